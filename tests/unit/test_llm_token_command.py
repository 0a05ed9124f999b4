"""Bearer tokens that expire, printed by a command (``--llm-token-command``, ``token=``): the
command runs on first use and again when the server refuses its token, the refused request
is sent once more, concurrent refusals run it once, and no token reaches a message. The
command is a real shell command (a token file's line, counted); the server is
httpx.MockTransport. The same against a real llama.cpp server behind a proxy is in
tests/integration/test_llm_headers.py."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import httpx
import pytest

from traversals.errors import BadInput, LLMUnavailable
from traversals.llm.openai import OpenAICompatibleLLM
from traversals.tokens import CommandToken

URL = "http://llm.test/v1"


def issuer(tmp_path: Path) -> str:
    """A command that prints tok-1, tok-2, ... one more each run (its count in a file)."""
    script = tmp_path / "issue.py"
    script.write_text("import pathlib, sys\n"
                      "p = pathlib.Path(sys.argv[1])\n"
                      "n = int(p.read_text()) + 1 if p.exists() else 1\n"
                      "p.write_text(str(n))\n"
                      "print(f'tok-{n}')\n")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(tmp_path / 'count'))}"


def chat(content: str) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


class Server:
    """Accepts the token ``valid`` only; records the Authorization of each request."""

    def __init__(self, valid: str) -> None:
        self.valid = valid
        self.seen: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        auth = request.headers.get("authorization", "")
        self.seen.append(auth)
        if auth != f"Bearer {self.valid}":
            return httpx.Response(401, json={"error": {"message": f"token {auth.removeprefix('Bearer ')} expired"}})
        return httpx.Response(200, json=chat("ok"))


async def test_a_refused_token_is_fetched_anew_and_the_request_sent_again(tmp_path):
    server = Server("tok-1")
    token = CommandToken(issuer(tmp_path))
    llm = OpenAICompatibleLLM(URL, "m", token=token, transport=httpx.MockTransport(server))
    assert (await llm.generate("q")).texts == ["ok"]
    assert (await llm.generate("q")).texts == ["ok"] and token.fetches == 1  # kept while it works
    server.valid = "tok-2"  # the first token expired
    assert (await llm.generate("q")).texts == ["ok"]
    assert server.seen == ["Bearer tok-1", "Bearer tok-1", "Bearer tok-1", "Bearer tok-2"] and token.fetches == 2
    server.valid = "tok-3"  # several requests refused at once: one new token for all
    outs = await asyncio.gather(*(llm.generate(f"q{i}") for i in range(4)))
    assert [o.texts for o in outs] == [["ok"]] * 4 and token.fetches == 3
    await llm.close()


async def test_a_server_that_refuses_every_token_is_told_once_without_the_token(tmp_path):
    server = Server("never")
    token = CommandToken(issuer(tmp_path))
    llm = OpenAICompatibleLLM(URL, "m", token=token, transport=httpx.MockTransport(server))
    with pytest.raises(LLMUnavailable, match="HTTP 401.*the token --llm-token-command printed") as e:
        await llm.generate("q")
    assert "tok-" not in str(e.value) and "token *** expired" in str(e.value)
    assert server.seen == ["Bearer tok-1", "Bearer tok-2"]  # fetched anew once, then given up
    await llm.close()
    # a command that prints the refused token again gives no new one: the request fails at once
    same = CommandToken("echo tok-same")
    assert await same.get() == "tok-same" and await same.refresh("tok-same") is None and same.fetches == 2


@pytest.mark.parametrize(("command", "said"), [
    ("exit 3", "failed \\(exit status 3\\)"),
    ("echo 'login required' >&2; exit 1", "failed \\(exit status 1\\): login required"),
    ("true", "printed nothing"),
    ("printf 'tok-%s\\n' $((40+2)) $((40+3))", "printed more than a token"),
    ("echo Bearer tok-$((40+2))", "printed more than a token"),
])
async def test_a_command_that_gives_no_token_stops_with_what_it_said(command, said):
    llm = OpenAICompatibleLLM(URL, "m", token=CommandToken(command),
                              transport=httpx.MockTransport(lambda r: httpx.Response(200, json=chat("ok"))))
    with pytest.raises(LLMUnavailable, match=f"--llm-token-command .*{said}") as e:
        await llm.generate("q")
    assert "tok-42" not in str(e.value)  # what it printed is not shown: it may hold the token
    await llm.close()


async def test_a_command_that_hangs_is_stopped():
    token = CommandToken("sleep 30", timeout=0.3)
    with pytest.raises(Exception, match="printed no token within 0.3 s"):
        await token.get()


def test_a_token_command_beside_a_key_or_an_authorization_header_is_refused():
    for kw in ({"api_key": "sk-1"}, {"headers": {"Authorization": "Bearer x"}}):
        with pytest.raises(BadInput, match="a token command .* and an API key or an Authorization header"):
            OpenAICompatibleLLM(URL, "m", token=CommandToken("echo t"), **kw)


def test_the_cli_flag_replaces_the_environment_key_and_goes_to_the_embedder_at_the_llms_url(monkeypatch, tmp_path):
    import argparse

    import traversals.llm.openai
    from traversals.options import add_llm_flags, add_value_flags, open_embedder_from_args, open_llm_from_args

    def parse(*argv: str) -> argparse.Namespace:
        p = argparse.ArgumentParser()
        add_llm_flags(p)
        add_value_flags(p)
        return p.parse_args(list(argv))

    opened: list[dict] = []
    monkeypatch.setattr(traversals.llm.openai, "OpenAICompatibleLLM", lambda url, model, **kw: opened.append(kw))
    env = {"OPENAI_BASE_URL": URL, "OPENAI_API_KEY": "sk-env"}
    open_llm_from_args(parse("--llm", "openai:m", "--llm-token-command", "echo t"), env)
    assert opened[0]["api_key"] is None and opened[0]["token"].command == "echo t"
    with pytest.raises(BadInput, match="--llm-token-command is sent to an OpenAI-compatible server"):
        open_llm_from_args(parse("--llm-token-command", "echo t"), env)
    with pytest.raises(BadInput, match="both set the Authorization header"):
        open_llm_from_args(parse("--llm", "openai:m", "--llm-token-command", "echo t",
                                 "--llm-header", "Authorization: Bearer x"), env)
    with pytest.raises(BadInput, match="the command is empty"):
        open_llm_from_args(parse("--llm", "openai:m", "--llm-token-command", " "), env)
    same = open_embedder_from_args(parse("--llm", "openai:m", "--llm-token-command", "echo t", "--embedder",
                                         "openai:e"), env)
    other = open_embedder_from_args(parse("--llm", "openai:m", "--llm-token-command", "echo t", "--embedder",
                                          "openai:e", "--embedder-url", "http://other.test/v1"), env)
    assert same._http.token is not None and same._http.token.command == "echo t"
    assert other._http.token is None and other._http._headers["authorization"] == "Bearer sk-env"


def jwt(exp: float | None, n: int = 1) -> str:
    import base64
    import json

    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': f'u{n}', **({'exp': exp} if exp is not None else {})})}.sig"


def jwt_issuer(tmp_path: Path, exp: float) -> str:
    """Like :func:`issuer`, printing JWTs that expire at ``exp``."""
    script = tmp_path / "issue_jwt.py"
    script.write_text("import base64, json, pathlib, sys\n"
                      "p = pathlib.Path(sys.argv[1])\n"
                      "n = int(p.read_text()) + 1 if p.exists() else 1\n"
                      "p.write_text(str(n))\n"
                      "part = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).decode().rstrip('=')\n"
                      f"print(part({{'alg': 'none'}}) + '.' + part({{'sub': f'u{{n}}', 'exp': {exp}}}) + '.sig')\n")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(tmp_path / 'count'))}"


def test_a_jwts_exp_claim_is_read_and_anything_else_is_no_expiry():
    from traversals.tokens import jwt_expiry

    assert jwt_expiry(jwt(1_700_000_000)) == 1_700_000_000 and jwt_expiry(jwt(None)) is None
    assert jwt_expiry("tok-1") is None and jwt_expiry("a.b!.c") is None


async def test_a_token_that_says_when_it_expires_is_renewed_before_a_server_refuses_it(tmp_path):
    from traversals.tokens import REFRESH_MARGIN

    now = [1_000_000.0]
    token = CommandToken(jwt_issuer(tmp_path, 1_000_000 + 3600), clock=lambda: now[0])
    first = await token.get()
    assert token.expires == 1_000_000 + 3600 and await token.get() == first and token.fetches == 1
    now[0] += 3600 - REFRESH_MARGIN + 1  # within the margin: the command runs before the request
    assert await token.get() != first and token.fetches == 2
    # the command printed a token as old as the last: nearly expired when printed, it is not
    # renewed before every request (the command would run for each) but when a server refuses it
    assert token.expires is None and await token.get() == token.issued[-1] and token.fetches == 2


@pytest.mark.parametrize("printed, expires", [
    ('{"accessToken": "eyJ0.az", "expiresOn": "2030-01-01 10:00:00.000000", "expires_on": 1900000000, '
     '"tokenType": "Bearer"}', 1_900_000_000.0),
    ('{"access_token": "ya29.tok", "expires_in": 3599, "token_type": "Bearer"}', 1_000_000.0 + 3599),
    ('{"token": "plain"}', None),
])
async def test_a_json_object_printed_by_the_command_gives_the_token_and_its_expiry(tmp_path, printed, expires):
    token = CommandToken(f"printf '%s' {shlex.quote(printed)}", clock=lambda: 1_000_000.0)
    assert await token.get() in ("eyJ0.az", "ya29.tok", "plain") and token.expires == expires


async def test_json_without_a_token_is_refused_without_showing_it(tmp_path):
    from traversals.errors import TraversalsError

    printed = tmp_path / "out.json"
    printed.write_text('{"secret": "s3cr3t"}')
    with pytest.raises(TraversalsError, match=r"printed JSON with no token in it: .* accessToken, access_token, token") as e:
        await CommandToken(f"cat {shlex.quote(str(printed))}").get()
    assert "s3cr3t" not in str(e.value)


def test_a_token_kept_across_asyncio_runs_is_fetched_again_for_concurrent_calls(tmp_path):
    # a library user answers questions one asyncio.run at a time with the same LLM: when the
    # token is due again in a later loop, the calls waiting for it there got "bound to a
    # different event loop" (one asyncio.Lock, bound to the first loop that waited on it)
    now = [1_000_000.0]
    token = CommandToken(jwt_issuer(tmp_path, 1_000_000 + 3600), clock=lambda: now[0])

    async def burst() -> list[object]:  # each call's token or error (none left running)
        return list(await asyncio.gather(*(token.get() for _ in range(3)), return_exceptions=True))

    first = asyncio.run(burst())
    assert first == [first[0]] * 3 and isinstance(first[0], str) and token.fetches == 1
    now[0] += 3600  # due again
    second = asyncio.run(burst())
    assert second == [second[0]] * 3 and second[0] != first[0] and token.fetches == 2

    async def refreshed() -> list[object]:  # refresh() after a refusal takes the same lock
        return list(await asyncio.gather(*(token.refresh(second[0]) for _ in range(3)), return_exceptions=True))

    third = asyncio.run(refreshed())
    assert third == [third[0]] * 3 and isinstance(third[0], str) and third[0] != second[0] and token.fetches == 3
