"""Edge checks of user-supplied URLs and text: one clear error before any request."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput, LLMError
from traversals.http_json import JsonPoster
from traversals.kg.sparql import SparqlKG
from traversals.validate import http_url, unicode_text


@pytest.mark.parametrize("url", ["http://127.0.0.1:7878/query", "HTTPS://query.wikidata.org/sparql",
                                 "http://[::1]:8000/v1", "http://localhost/v1"])
def test_good_urls_pass_unchanged(url):
    assert http_url(url, "the endpoint") == url


@pytest.mark.parametrize(
    "url, says",
    [
        ("http://127.0.0.1:99999/query", "port 99999"),
        ("http://[::1", "not a valid URL"),
        ("http://", "no host"),
        ("ftp://example.org/sparql", "http(s) URL"),
        ("127.0.0.1:7878/query", "http(s) URL"),
        ("", "http(s) URL"),
    ],
)
def test_bad_urls_are_one_named_error(url, says):
    with pytest.raises(BadInput, match="the endpoint") as e:
        http_url(url, "the endpoint")
    assert says in str(e.value)


def test_a_sparql_endpoint_and_an_api_root_are_checked_when_built():
    assert SparqlKG("HTTP://127.0.0.1:7878/query").endpoint_url == "HTTP://127.0.0.1:7878/query"
    with pytest.raises(BadInput, match="port 99999"):
        SparqlKG("http://127.0.0.1:99999/query")
    with pytest.raises(LLMError, match="base_url is not a valid URL"):
        JsonPoster("http://[::1/v1", name="llm", error=LLMError, unavailable=LLMError)


def test_text_that_cannot_be_utf8_is_bad_input():
    assert unicode_text("Zoë «q»", "the question") == "Zoë «q»"
    with pytest.raises(BadInput, match="the question is not valid Unicode"):
        unicode_text("who is \udcff", "the question")


async def test_a_request_body_with_a_lone_surrogate_is_the_callers_error_class():
    poster = JsonPoster("http://127.0.0.1:9/v1", name="llm", error=LLMError, unavailable=LLMError, max_retries=0)
    with pytest.raises(LLMError, match="not valid Unicode"):
        await poster.post("/chat/completions", {"messages": [{"role": "user", "content": "q \ud800"}]})
    await poster.aclose()


def test_cli_refusals_come_before_any_model_is_loaded(tmp_path, capsys):
    from traversals.cli import main

    assert main(["ask", "who directed [X]", "--trace", str(tmp_path / "missing" / "t.json")]) == 2
    assert "--trace" in capsys.readouterr().err
    assert main(["ask", "who is \udcff"]) == 2
    assert "not valid Unicode" in capsys.readouterr().err
    assert main(["eval", "metaqa-1hop", "--data", str(tmp_path), "--strategy", "chain", "--out", str(tmp_path / "r"),
                 "--retry-errors"]) == 2
    assert "--retry-errors goes with --resume" in capsys.readouterr().err


def test_a_url_password_never_reaches_a_message_or_a_run_record():
    from traversals.embed.openai import OpenAIEmbedder
    from traversals.options import redact_secrets
    from traversals.validate import shown_url

    assert shown_url("http://u:s3cret@h:8000/v1") == "http://u:***@h:8000/v1"
    assert shown_url("http://h/v1") == "http://h/v1" and shown_url("http://u@h/v1") == "http://u@h/v1"
    assert shown_url("https://h/v1beta?key=AIza-1&alt=json") == "https://h/v1beta?key=***&alt=json"
    assert shown_url("http://u:p@h/q?access_token=T&api-version=1") == "http://u:***@h/q?access_token=***&api-version=1"
    assert shown_url("https://h/d?api-version=2024-10-21") == "https://h/d?api-version=2024-10-21"
    # an Azure SAS signature, a parameter name written %-encoded, a password written %-encoded
    assert shown_url("https://acct.blob.core.windows.net/c/f?sv=2024&sig=SECRETSIG").endswith("sv=2024&sig=***")
    assert shown_url("https://h/x?si%67=SECRET") == "https://h/x?si%67=***"
    from traversals.validate import url_secrets
    assert url_secrets("http://u:p%40ss@host/x") == ["p%40ss", "p@ss"]  # an error may quote either form
    with pytest.raises(BadInput) as bad:
        http_url("htp://u:s3cret@h/v1", "--llm-url")
    assert "s3cret" not in str(bad.value) and "u:***@h" in str(bad.value)
    argv = ["eval", "--llm-url", "http://u:s3cret@h/v1", "--kg=http://a:s3cret@kg/sparql", "--embedder-api-key", "k"]
    assert "s3cret" not in " ".join(redact_secrets(argv))
    assert redact_secrets(argv)[3] == "--kg=http://a:***@kg/sparql"
    assert OpenAIEmbedder("http://u:s3cret@h/v1", "m")._http.shown_url == "http://u:***@h/v1"


def test_constrained_decoding_refused_says_why_the_endpoint_cannot_score():
    from traversals.api import SearchConfig, build_solver
    from traversals.llm.scripted import ScriptedLLM
    from tests.unit.kgdouble import dylan_kg

    llm = ScriptedLLM(responses=["x"])
    llm.scoring_reason = "no completion_template (e.g. 'chatml') configured"
    with pytest.raises(BadInput, match=r"cannot score options \(no completion_template .*\); use --decoding sampled"):
        build_solver("tree", llm, [dylan_kg()], SearchConfig(decoding="constrained"))


def test_a_lone_surrogate_from_a_server_or_a_plugin_becomes_a_replacement_character(tmp_path, monkeypatch, capsys):
    """A JSON "\\ud800" escape is legal, and decodes to a string UTF-8 cannot write: a label or an
    LLM reply holding one crashed `ask` after its search (trace left empty) and stopped an eval at
    its first row, again at every resume."""
    import json
    from pathlib import Path

    import httpx

    import traversals.llm.factory
    from traversals.cli import main
    from traversals.http_json import read_json
    from traversals.kg.sparql import parse_results
    from traversals.llm.scripted import ScriptedLLM
    from traversals.validate import scrub_surrogates

    assert scrub_surrogates({"a\ud800": ["x\udfffy", 1, None]}) == {"a\ufffd": ["x\ufffdy", 1, None]}
    assert scrub_surrogates("\U0001F600 ok") == "\U0001F600 ok"  # a pair decoded whole is one character
    body = '{"head": {"vars": ["l"]}, "results": {"bindings": [{"l": {"type": "literal", "value": "Bob \\ud800"}}]}}'
    assert parse_results(body, "x")[0]["l"].value == "Bob \ufffd"
    assert read_json(httpx.Response(200, content=b'{"choices": [{"text": "A\\ud800"}]}'))["choices"][0]["text"] == "A\ufffd"
    # a plug-in LLM's reply: answered, printed, traced, and an eval's row written
    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(
        lambda *a: "ANSWER: Ann \ud800 Lee"))
    trace = tmp_path / "t.json"
    assert main(["ask", "who directed [Alpha]", "--strategy", "cot", "--json", "--trace", str(trace),
                 "--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "Ann \ufffd Lee"
    assert json.loads(trace.read_text())["answer"] == "Ann \ufffd Lee"
    data = Path(tmp_path / "q.jsonl")
    data.write_text('{"question": "who directed [Alpha]", "answers": ["Ann Lee"]}\n')
    assert main(["eval", "questions", "--data", str(data), "--strategy", "cot", "--no-progress", "--out",
                 str(tmp_path / "run"), "--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1"]) == 0
    [row] = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert row["answer"] == "Ann \ufffd Lee" and row["error"] is None


def test_control_characters_of_labels_and_replies_are_shown_not_acted_on(tmp_path, monkeypatch, capsys):
    """A label "\\x1b[2J…" cleared the screen and retitled the window of whoever printed the answer."""
    import traversals.llm.factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM
    from traversals.search.events import describe
    from traversals.validate import terminal_text

    assert terminal_text("a\x1b[2J\tb\nc\x07\x9b") == "a\\x1b[2J\tb\nc\\x07\\x9b"
    assert describe({"event": "linked", "entities": [{"label": "Bob\x1b]0;pwned\x07"}]}) == "linked: Bob\\x1b]0;pwned\\x07"
    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(
        lambda *a: "ANSWER: Ann\x1b[31mRED"))
    assert main(["ask", "who directed [Alpha]", "--strategy", "cot",
                 "--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.startswith("Ann\\x1b[31mRED\n")
