"""An LLM server that wants a key in a header of its own and an API version in the query, as
Azure OpenAI's deployments do: a real ``python -m llama_cpp.server`` (the small model)
behind a proxy on 127.0.0.1 that lets a request through only with ``api-key: KEY`` and
``?api-version=VERSION``. ``--llm-header``/``headers=`` and the base URL's query reach it,
and the key reaches no message and no run directory."""

from __future__ import annotations

import importlib.util
import json
import sys

import httpx
import pytest

from traversals.errors import LLMUnavailable
from traversals.llm.openai import OpenAICompatibleLLM

from .servers import LocalApp

pytestmark = [
    pytest.mark.server,
    pytest.mark.model,
    pytest.mark.timeout(600),
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python[server] is not installed"),
]

KEY = "azure-KEY-0123456789"
VERSION = "2024-10-21"


class KeyProxy(LocalApp):
    """Forwards a request carrying ``api-key: KEY`` and ``?api-version=VERSION`` to the LLM
    server, answers one without the version with Azure's 404 and one without the key with its
    401; ``seen`` is the ``api-key`` header of each request."""

    def __init__(self, upstream: str) -> None:
        root = upstream.removesuffix("/v1")

        def handle(handler, app) -> tuple[int, dict, bytes]:
            path, _, query = handler.path.partition("?")
            if query != f"api-version={VERSION}":
                return 404, {"Content-Type": "application/json"}, b'{"error": {"code": "404", "message": "Resource not found"}}'
            if handler.headers.get("api-key") != KEY:
                given = handler.headers.get("api-key") or ""
                body = {"error": {"code": "401", "message": f"Access denied due to invalid subscription key {given}."}}
                return 401, {"Content-Type": "application/json"}, json.dumps(body).encode()
            r = httpx.request(handler.command, root + path, content=app.requests[-1]["body"], timeout=300,
                              headers={"Content-Type": handler.headers.get("Content-Type", "application/json")})
            return r.status_code, {"Content-Type": r.headers.get("content-type", "")}, r.content

        super().__init__(handle)
        self.base = self.url.removesuffix("/query") + f"/v1?api-version={VERSION}"

    @property
    def seen(self) -> list[str | None]:
        return [r["headers"].get("api-key") for r in self.requests]


@pytest.fixture(scope="module")
def proxy(llama_server):
    app = KeyProxy(llama_server)
    yield app
    app.close()


async def test_a_header_reaches_the_server_and_a_wrong_one_is_named_not_shown(proxy) -> None:
    # the full endpoint's URL, as Azure's portal shows it, is cut back to its root, the query kept
    endpoint = proxy.base.replace("/v1?", "/v1/chat/completions?")
    llm = OpenAICompatibleLLM(endpoint, "qwen-small", headers={"api-key": KEY}, timeout=300)
    try:
        g = await llm.generate("What is the capital of France? Answer with one word.", max_tokens=8)
        assert "paris" in g.texts[0].lower()
    finally:
        await llm.close()
    assert proxy.seen[-1] == KEY
    wrong = OpenAICompatibleLLM(proxy.base, "qwen-small", headers={"api-key": "wrong-KEY-42"}, max_retries=0)
    with pytest.raises(LLMUnavailable, match="HTTP 401.*check the credentials sent: header api-key") as e:
        await wrong.generate("hello", max_tokens=4)
    assert "wrong-KEY-42" not in str(e.value) and "subscription key ***" in str(e.value)
    await wrong.close()
    unversioned = OpenAICompatibleLLM(proxy.base.partition("?")[0], "qwen-small", headers={"api-key": KEY})
    with pytest.raises(LLMUnavailable, match="HTTP 404: Resource not found"):
        await unversioned.generate("hello", max_tokens=4)
    await unversioned.close()


def test_eval_with_llm_header_from_the_environment_records_no_key(proxy, monkeypatch, tmp_path, capsys) -> None:
    """A whole eval (cot: the LLM alone) through the proxy: the header comes from the
    environment, run.json's command keeps ``${VAR}`` and a typed value is shown as ``***``;
    without it the eval stops on the first question, with the resume command and no error row."""
    from traversals.cli import main

    monkeypatch.setenv("AZURE_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "what is the capital of [France]", "answers": ["Paris"]}) + "\n")
    base = ["eval", "questions", "--data", str(data), "--strategy", "cot", "--llm", "openai:qwen-small",
            "--llm-url", proxy.base, "--llm-timeout", "300", "--no-progress"]
    for header, shown in [("api-key: ${AZURE_KEY}", "api-key: ${AZURE_KEY}"), (f"api-key: {KEY}", "api-key: ***")]:
        out = tmp_path / f"run{len(shown)}"
        argv = [*base, "--out", str(out), "--llm-header", header]
        monkeypatch.setattr(sys, "argv", ["traversals", *argv])  # what run.json records as the command
        assert main(argv) == 0, capsys.readouterr().err
        run = json.loads((out / "run.json").read_text())
        assert shown in run["command"]
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert len(rows) == 1 and rows[0]["error"] is None and rows[0]["answer"]
        assert KEY not in "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    out = tmp_path / "refused"
    argv = [*base, "--out", str(out)]
    monkeypatch.setattr(sys, "argv", ["traversals", *argv])
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "no API key was sent" in err and "--llm-header" in err and "--resume" in err
    assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text().strip()


class ExpiringTokenProxy(LocalApp):
    """Forwards a request carrying ``Authorization: Bearer tok-N`` for the newest N it was
    told of (:attr:`valid`) to the LLM server; each token is good for one answer, then it
    expires (401), as an hour-long token does over a long evaluation."""

    def __init__(self, upstream: str) -> None:
        root = upstream.removesuffix("/v1")
        self.valid = 1

        def handle(handler, app) -> tuple[int, dict, bytes]:
            if handler.headers.get("Authorization") != f"Bearer tok-{self.valid}":
                body = {"error": {"message": f"token {handler.headers.get('Authorization', '')} expired"}}
                return 401, {"Content-Type": "application/json"}, json.dumps(body).encode()
            r = httpx.request(handler.command, root + handler.path, content=app.requests[-1]["body"], timeout=300,
                              headers={"Content-Type": handler.headers.get("Content-Type", "application/json")})
            self.valid += 1
            return r.status_code, {"Content-Type": r.headers.get("content-type", "")}, r.content

        super().__init__(handle)
        self.base = self.url.removesuffix("/query") + "/v1"


def test_an_eval_goes_on_when_its_token_expires(llama_server, monkeypatch, tmp_path, capsys) -> None:
    """--llm-token-command: every answer's token expires after it; the command is run again
    at each refusal and the eval answers every question, with no token in its run directory."""
    from traversals.cli import main

    proxy = ExpiringTokenProxy(llama_server)
    count = tmp_path / "count"
    issue = tmp_path / "issue.py"
    issue.write_text("import pathlib, sys\np = pathlib.Path(sys.argv[1])\nn = int(p.read_text()) + 1 if p.exists() "
                     "else 1\np.write_text(str(n))\nprint(f'tok-{n}')\n")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"what is {i} plus {i}", "answers": [str(2 * i)]})
                            + "\n" for i in range(1, 4)))
    out = tmp_path / "run"
    argv = ["eval", "questions", "--data", str(data), "--strategy", "cot", "--llm", "openai:qwen-small",
            "--llm-url", proxy.base, "--llm-timeout", "300", "--no-progress", "--out", str(out),
            "--llm-token-command", f"{sys.executable} {issue} {count}"]
    monkeypatch.setattr(sys, "argv", ["traversals", *argv])
    try:
        assert main(argv) == 0, capsys.readouterr().err
    finally:
        proxy.close()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["error"] is None and r["answer"] for r in rows)
    assert int(count.read_text()) >= 3  # a new token for each question after the first
    stored = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert "tok-1" not in stored and "--llm-token-command" in stored  # the command is recorded, no token
