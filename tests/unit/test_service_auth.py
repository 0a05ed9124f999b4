"""API keys on the HTTP service: ``create_app(api_keys=...)`` (``serve --api-key-file`` /
``$TRAVERSALS_API_KEY``) lets a request through only with ``Authorization: Bearer KEY``;
``/health`` stays open for load balancers; keys are read from a file or the environment and
a file that would leave the server open by mistake is refused."""

from __future__ import annotations

import pytest

from traversals.auth import API_KEY_ENV, is_loopback, read_api_keys
from traversals.errors import BadInput

from traversals.llm.scripted import ScriptedLLM
from traversals.service import create_app

from .test_service import Factory, FakeKG, client

KEY = "s3cret-Key_0123456789"


async def test_without_the_key_every_endpoint_but_health_is_refused_with_401():
    factory = Factory()
    async with client(factory, api_keys=[KEY, "another-key-abcdef"]) as c:
        assert (await c.get("/health")).json() == {"status": "ok"}  # a load balancer's probe needs no key
        missing = await c.post("/v1/ask", json={"question": "Who directed Alpha?"})
        wrong = await c.post("/v1/ask", json={"question": "Who directed Alpha?"},
                             headers={"Authorization": "Bearer not-the-key"})
        basic = await c.get("/v1/info", headers={"Authorization": f"Basic {KEY}"})
        info = await c.get("/v1/info")
        ok = await c.post("/v1/ask", json={"question": "Who directed Alpha?"},
                          headers={"Authorization": f"Bearer {KEY}"})
        other = await c.get("/v1/info", headers={"authorization": "bearer another-key-abcdef"})
    for r in (missing, wrong, basic, info):
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["error"]["type"] == "Unauthorized"
        assert KEY not in r.text  # never echoed
    assert "Authorization: Bearer KEY" in missing.json()["error"]["message"]
    assert "not one this server accepts" in wrong.json()["error"]["message"]
    assert ok.status_code == 200 and ok.json()["answer"] == "Ann Lee"
    assert other.status_code == 200 and "llm" in other.json()  # either key, the scheme in any case
    assert len(factory.built) == 1  # the refused requests never reached a solver


async def test_without_keys_nothing_is_checked():
    async with client() as c:
        assert (await c.post("/v1/ask", json={"question": "Who directed Alpha?"})).status_code == 200


def test_keys_come_from_a_file_and_the_environment(tmp_path):
    f = tmp_path / "keys"
    f.write_text("# the team's keys\n\n  first-key-123  \nsecond-key-456\n", encoding="utf-8")
    assert read_api_keys(f, {}) == ["first-key-123", "second-key-456"]
    assert read_api_keys(f, {API_KEY_ENV: " env-key-789\n"}) == ["first-key-123", "second-key-456", "env-key-789"]
    assert read_api_keys(None, {API_KEY_ENV: "env-key-789"}) == ["env-key-789"]
    assert read_api_keys(None, {}) == [] and read_api_keys(None, {API_KEY_ENV: "  "}) == []
    indented = tmp_path / "revoked"
    indented.write_text("live-key-1234\n    #revoked-key-5678\n", encoding="utf-8")
    assert read_api_keys(indented, {}) == ["live-key-1234"]  # an indented comment is no key


def test_a_key_file_saved_with_a_byte_order_mark_is_read(tmp_path):
    """Notepad's UTF-8 starts with a BOM: it was read as part of the first key, refused as not ASCII."""
    f = tmp_path / "keys"
    f.write_bytes(b"\xef\xbb\xbfkey-with-bom-1234\r\nsecond-key-456\r\n")
    assert read_api_keys(f, {}) == ["key-with-bom-1234", "second-key-456"]
    f.write_bytes(b"\xef\xbb\xbf# the team's keys\r\nkey-with-bom-1234\r\n")  # a comment first stays one
    assert read_api_keys(f, {}) == ["key-with-bom-1234"]


def test_a_key_file_that_would_leave_the_server_open_is_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n\n", encoding="utf-8")
    with pytest.raises(BadInput, match="holds no key"):
        read_api_keys(empty, {})
    with pytest.raises(BadInput, match="cannot read it"):
        read_api_keys(tmp_path / "missing", {})
    spaced = tmp_path / "spaced"
    spaced.write_text("two words\n", encoding="utf-8")
    with pytest.raises(BadInput, match="line 1: an API key must be printable ASCII without spaces"):
        read_api_keys(spaced, {})
    with pytest.raises(BadInput, match=API_KEY_ENV):
        read_api_keys(None, {API_KEY_ENV: "clé-non-ascii"})


def test_a_bad_key_given_to_the_library_is_refused_at_start():
    with pytest.raises(BadInput, match="printable ASCII"):
        client(api_keys=["has space"])


def test_loopback_hosts():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("::")
    # a loopback address however written: the long form of ::1 was taken for a public one,
    # which turned the Host check off (and warned that the server listens beyond this machine)
    assert is_loopback("127.0.0.2") and is_loopback("0:0:0:0:0:0:0:1") and is_loopback("[::1]")
    assert not is_loopback("127.example.org")


def test_serve_warns_when_it_listens_beyond_this_machine_without_a_key(capsys, monkeypatch):
    from traversals.cli import _api_keys, build_parser

    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert _api_keys(build_parser().parse_args(["serve", "--host", "0.0.0.0"]), "the service") == []
    assert "listens on 0.0.0.0 with no API key" in capsys.readouterr().err
    assert _api_keys(build_parser().parse_args(["serve"]), "the service") == []  # 127.0.0.1: no warning
    monkeypatch.setenv(API_KEY_ENV, "env-key-789")
    assert _api_keys(build_parser().parse_args(["serve", "--host", "0.0.0.0"]), "the service") == ["env-key-789"]
    assert capsys.readouterr().err == ""


async def test_a_request_for_another_host_is_refused_with_421():
    """serve on 127.0.0.1 answers its loopback names only: a page whose own name resolves to
    127.0.0.1 (DNS rebinding) sends that name in Host and gets 421, before any key or search."""
    from traversals.auth import LOOPBACK_HOSTS

    factory = Factory()
    async with client(factory, allowed_hosts=[*LOOPBACK_HOSTS, "api.example.com"]) as c:
        answered = [await c.get("/v1/info", headers={"Host": host})
                    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:8000", "[::1]:8000", "api.example.com")]
        evil = await c.post("/v1/ask", json={"question": "q"}, headers={"Host": "attacker.example:8000"})
        no_port_trick = await c.get("/health", headers={"Host": "127.0.0.1.attacker.example"})
    assert [r.status_code for r in answered] == [200] * 5
    assert evil.status_code == 421 and evil.json()["error"]["type"] == "MisdirectedRequest"
    assert "not attacker.example" in evil.json()["error"]["message"] and "--allowed-host" in evil.json()["error"]["message"]
    assert no_port_trick.status_code == 421
    assert factory.built == []
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(), allowed_hosts=list(LOOPBACK_HOSTS))
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "method": "GET", "path": "/health", "raw_path": b"/health", "query_string": b"",
               "headers": [], "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 8000),
               "client": ("127.0.0.1", 5000), "root_path": "", "asgi": {"version": "3.0"}}, receive, send)
    assert sent[0]["status"] == 421  # a request without a Host header names no allowed host
    async with client(Factory(), allowed_hosts=["*"]) as c:  # any name
        assert (await c.get("/v1/info", headers={"Host": "anything.example"})).status_code == 200


def test_serve_checks_the_host_on_a_loopback_address_only_unless_names_are_given():
    from traversals.cli import _allowed_hosts, build_parser

    def hosts(*argv: str) -> set[str]:
        return set(_allowed_hosts(build_parser().parse_args(["serve", *argv])))

    assert hosts() == {"127.0.0.1", "localhost", "[::1]"}
    assert hosts("--allowed-host", "api.example.com") == {"127.0.0.1", "localhost", "[::1]", "api.example.com"}
    assert hosts("--host", "0.0.0.0") == set()  # reached by any name: the API key guards it
    assert hosts("--host", "127.0.0.2") == {"127.0.0.1", "localhost", "[::1]", "127.0.0.2"}
    assert hosts("--host", "0:0:0:0:0:0:0:1") == {"127.0.0.1", "localhost", "[::1]"}
    assert hosts("--host", "0.0.0.0", "--allowed-host", "api.example.com") == {"api.example.com"}


@pytest.mark.parametrize("name", ["api.example.com:18551", "https://api.example.com", "api.example.com/v1",
                                  "[::1]:8000", "api example.com", ""])
def test_an_allowed_host_no_host_header_can_name_is_refused_at_start(name):
    """A name with a port or a scheme was accepted, then every request got 421."""
    from traversals.cli import _allowed_hosts, build_parser
    with pytest.raises(BadInput, match="--allowed-host .*bare host name"):
        _allowed_hosts(build_parser().parse_args(["serve", "--allowed-host", name]))
    with pytest.raises(BadInput, match="--allowed-host"):
        create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(), allowed_hosts=[name or "x:1"])


def test_allowed_hosts_are_read_as_a_host_header_carries_them():
    from traversals.auth import allowed_host

    assert [allowed_host(n) for n in ("API.Example.com", "10.0.0.5", "::1", "[::1]", "*", "my_host")] == [
        "api.example.com", "10.0.0.5", "[::1]", "[::1]", "*", "my_host"]


def test_serve_refuses_an_allowed_host_with_a_port_before_the_model_loads(monkeypatch, capsys):
    from traversals import cli

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(cli, "open_llm_from_args", no_model)
    assert cli.main(["serve", "--kg", "demo", "--port", "0", "--allowed-host", "api.example.com:18551"]) != 0
    err = capsys.readouterr().err
    assert "--allowed-host 'api.example.com:18551'" in err and len(err.strip().splitlines()) == 1
