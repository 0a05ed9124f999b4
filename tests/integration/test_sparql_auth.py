"""A SPARQL endpoint that wants credentials: a real Oxigraph server behind a small proxy on
127.0.0.1 that lets a request through only with HTTP Basic ``alice`` / ``s@cret:1`` or
``Authorization: Bearer TOKEN-1``, as an authenticating gateway in front of GraphDB,
Fuseki or Stardog does. Credentials reach that endpoint, and no password or token reaches
a message, a run directory or the query cache."""

from __future__ import annotations

import base64
import json
import sys

import pytest

from traversals.errors import BadInput, KGAuthError
from traversals.kg import iris
from traversals.kg.base import Entity, Relation
from traversals.kg.cache import QueryCache
from traversals.kg.sparql import SparqlKG

from .servers import AuthProxy, OxigraphServer, load_store

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]

PASSWORD = "s@cret:1"  # an @ and a : in it, percent-encoded in a URL
TOKEN = "TOKEN-1"
ACCEPTED = {
    "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode(),
    f"Bearer {TOKEN}",
}
TRIPLES = ("The Gumball Rally", "directed_by", "Charles Bail"), ("Bullitt", "starred_actors", "Steve McQueen")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    root = tmp_path_factory.mktemp("auth")
    kb = root / "kb.nt"
    lines = []
    for s, r, o in TRIPLES:
        lines.append(f"<{iris.entity_iri(s)}> <{iris.relation_iri(r)}> <{iris.entity_iri(o)}> .")
        for name in (s, o):
            lines.append(f'<{iris.entity_iri(name)}> <{iris.RDFS_LABEL}> "{name}" .')
    kb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_store(root / "db", [kb])
    server = OxigraphServer(root / "db", root / "server.log")
    app = AuthProxy(server.url, ACCEPTED)
    yield app
    app.close()
    server.stop()


BAIL = Entity(iris.entity_iri("Charles Bail"), "Charles Bail")
DIRECTED = Relation("directed_by", "directed by", inverse=True, iri=iris.relation_iri("directed_by"))


async def test_basic_credentials_in_the_url_reach_the_endpoint_and_nowhere_else(proxy) -> None:
    async with SparqlKG(proxy.with_user("alice", PASSWORD)) as kg:
        relations = await kg.get_relations([BAIL])
        assert [(r.id, r.inverse) for r in relations.items] == [("directed_by", True)]
        assert kg.endpoint_url == proxy.url and kg.name == proxy.url  # shown and named without them
        assert "s%40cret" not in repr(kg) and "alice" not in repr(kg)
    assert proxy.seen[-1] in ACCEPTED and proxy.seen[-1].startswith("Basic ")


async def test_a_bearer_token_goes_as_a_header(proxy) -> None:
    async with SparqlKG(proxy.url, headers={"Authorization": f"Bearer {TOKEN}"}) as kg:
        found = await kg.search("Charles Bail")
        assert [e.label for e in found] == ["Charles Bail"]
    assert proxy.seen[-1] == f"Bearer {TOKEN}"


async def test_no_credentials_says_how_to_give_them(proxy) -> None:
    async with SparqlKG(proxy.url) as kg:
        with pytest.raises(KGAuthError) as e:
            await kg.get_relations([BAIL])
    msg = str(e.value)
    assert msg.startswith(f"SPARQL endpoint {proxy.url} refused access (HTTP 401, unauthorized)")
    assert "https://USER:PASSWORD@host/" in msg and "--kg-header 'Authorization: Bearer TOKEN'" in msg


@pytest.mark.parametrize("how", ["password", "token"])
async def test_refused_credentials_are_named_but_never_shown(proxy, how) -> None:
    kg = (SparqlKG(proxy.with_user("alice", "wrong-pw")) if how == "password"
          else SparqlKG(proxy.url, headers={"Authorization": "Bearer wrong-token"}))
    async with kg:
        with pytest.raises(KGAuthError) as e:
            await kg.get_edges([BAIL], DIRECTED)
    msg = str(e.value)
    said = "user 'alice'" if how == "password" else "header Authorization"
    assert f"the credentials given ({said}) were refused" in msg
    assert "wrong-pw" not in msg and "wrong-token" not in msg


async def test_the_cache_files_answers_by_user_without_the_password(proxy, tmp_path) -> None:
    cache = QueryCache(tmp_path / "cache.sqlite")
    async with SparqlKG(proxy.with_user("alice", PASSWORD), cache=cache) as kg:
        assert [r.id for r in (await kg.get_relations([BAIL])).items] == ["directed_by"]
    sent = len(proxy.seen)
    async with SparqlKG(proxy.with_user("alice", PASSWORD), cache=cache) as kg:
        assert [r.id for r in (await kg.get_relations([BAIL])).items] == ["directed_by"]
    assert len(proxy.seen) == sent + 1  # answered from the cache after one ASK that the credentials still open it
    async with SparqlKG(proxy.url, headers={"Authorization": f"Bearer {TOKEN}"}, cache=cache) as kg:
        await kg.get_relations([BAIL])
    assert len(proxy.seen) > sent + 2  # another identity: its own entries, asked again
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert PASSWORD.encode() not in stored and b"s%40cret" not in stored and TOKEN.encode() not in stored


def test_kg_header_from_the_environment_on_the_command_line(proxy, monkeypatch, capsys, tmp_path) -> None:
    from traversals.cli import main

    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path))
    monkeypatch.setenv("SPARQL_TOKEN", TOKEN)
    base = ["kg", "relations", "Charles Bail", "--kg", f"movies={proxy.url}"]
    assert main([*base, "--kg-header", "movies=Authorization: Bearer ${SPARQL_TOKEN}"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0] == "~directed_by"
    assert main([*base, "--kg-header", "movies=Authorization: Bearer ${NO_SUCH_VARIABLE}"]) == 2
    assert "the environment variable NO_SUCH_VARIABLE is not set" in capsys.readouterr().err
    assert main([*base, "--kg-header", "films=Authorization: Bearer x", "--no-cache"]) == 2
    assert "no --kg is named 'films'" in capsys.readouterr().err
    assert main([*base, "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "refused access (HTTP 401, unauthorized)" in err and "it wants credentials" in err


def test_an_eval_over_an_endpoint_with_a_password_records_none(proxy, monkeypatch, tmp_path, capsys) -> None:
    """The whole path: eval links, gathers facts through the proxy (retrieve, with a scripted
    LLM), scores; run.json's ``kg`` and ``command``, the results and the cache hold no password."""
    import traversals.llm.factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda *a, **k: ScriptedLLM(["The Gumball Rally"] * 4))
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "what did [Charles Bail] direct",
                                "answers": ["The Gumball Rally"]}) + "\n")
    url = proxy.with_user("alice", PASSWORD)
    out = tmp_path / "run"
    argv = ["eval", "questions", "--data", str(data), "--strategy", "retrieve", "--embedder", "lexical",
            "--kg", f"movies={url}", "--out", str(out), "--no-progress"]
    monkeypatch.setattr(sys, "argv", ["traversals", *argv])  # what run.json records as the command
    assert main(argv) == 0, capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    assert run["kg"] == [f"movies={url.replace('s%40cret%3A1', '***')}"]
    assert "s%40cret" not in run["command"] and "alice:***@" in run["command"]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows[0]["hits@1"] == 1.0 and rows[0]["error"] is None
    for path in [*out.rglob("*"), *(tmp_path / "cache").rglob("*")]:
        if path.is_file():
            assert b"s%40cret" not in path.read_bytes() and PASSWORD.encode() not in path.read_bytes(), path
    # the password is no part of what the run read: a resume after it was changed goes on
    rotated = [a.replace("s%40cret%3A1", "new-password") for a in argv]
    assert main([*rotated, "--resume"]) == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["resumed"]


def test_headers_that_would_reach_no_endpoint_or_the_wrong_one_are_refused(tmp_path) -> None:
    from traversals.kg.factory import open_kgs

    kb = tmp_path / "kb.txt"
    kb.write_text("A|r|B\n")
    with pytest.raises(BadInput, match="headers go to a SPARQL endpoint, and no --kg is one"):
        open_kgs([str(kb)], kg_headers=["Authorization: Bearer x"])
    with pytest.raises(BadInput, match="2 SPARQL endpoints are given; say which one"):
        open_kgs(["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"], kg_headers=["Authorization: Bearer x"])
    with pytest.raises(BadInput, match="--kg files is not a SPARQL endpoint"):
        open_kgs([f"files={kb}", "http://127.0.0.1:9/a"], kg_headers=["files=Authorization: Bearer x"])
    kgs = open_kgs([f"files={kb}", "ep=http://127.0.0.1:9/a"], kg_headers=["ep=X-Api-Key: k"])
    assert kgs[1]._headers == {"X-Api-Key": "k"}


def test_an_eval_whose_credentials_are_refused_stops_and_records_no_error_row(proxy, monkeypatch, tmp_path,
                                                                              capsys) -> None:
    """Refused credentials are the setup's fault, not a hard question's: the run stops at once
    (as with an unreachable endpoint) with the resume command, and the fixed run answers all."""
    import traversals.llm.factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda *a, **k: ScriptedLLM(["The Gumball Rally"] * 8))
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "what did [Charles Bail] direct",
                                        "answers": ["The Gumball Rally"]}) + "\n" for i in range(3)))
    out = tmp_path / "run"
    argv = ["eval", "questions", "--data", str(data), "--strategy", "retrieve", "--embedder", "lexical",
            "--out", str(out), "--no-progress", "--concurrency", "1"]
    refused = [*argv, "--kg", proxy.with_user("alice", "wrong")]
    monkeypatch.setattr(sys, "argv", ["traversals", *refused])  # what the resume hint repeats
    assert main(refused) == 2
    err = capsys.readouterr().err
    assert "refused access (HTTP 401, unauthorized)" in err and "the credentials given (user 'alice') were refused" in err
    assert "-- the run stopped; 0 question(s) saved in" in err and "--kg 'http://alice:***@127.0.0.1" in err
    assert "wrong" not in err
    assert (out / "results.jsonl").read_text() == ""  # nothing recorded as the question's own error
    assert main([*argv, "--kg", proxy.with_user("alice", PASSWORD), "--resume"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["hits@1"] for r in rows] == [1.0, 1.0, 1.0]


def test_an_expiring_token_from_a_command_is_fetched_anew(proxy, monkeypatch, tmp_path, capsys) -> None:
    """--kg-token-command: the endpoint refuses the first token the command prints (it
    expired); the command runs again and the query goes through with the next one. No token
    in the message of an endpoint that refuses them all."""
    from traversals.cli import main

    count = tmp_path / "count"
    issue = tmp_path / "issue.py"
    # the first run prints an expired token, every later one TOKEN-1 (the proxy's)
    issue.write_text("import pathlib, sys\np = pathlib.Path(sys.argv[1])\nn = int(p.read_text()) + 1 if p.exists() "
                     f"else 1\np.write_text(str(n))\nprint('expired-0' if n == 1 else {TOKEN!r})\n")
    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path / "cache"))
    command = f"{sys.executable} {issue} {count}"
    assert main(["kg", "relations", "Charles Bail", "--kg", f"movies={proxy.url}", "--no-cache",
                 "--kg-token-command", f"movies={command}"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0] == "~directed_by"
    assert count.read_text() == "2" and "Bearer expired-0" in proxy.seen and proxy.seen[-1] == f"Bearer {TOKEN}"
    assert main(["kg", "relations", "Charles Bail", "--kg", proxy.url, "--no-cache",
                 "--kg-token-command", "echo never-accepted"]) == 2
    err = capsys.readouterr().err
    assert "refused access (HTTP 401" in err and "the token --kg-token-command printed" in err
    assert "never-accepted" not in err.replace("echo never-accepted", "")  # the command is named, not its token
