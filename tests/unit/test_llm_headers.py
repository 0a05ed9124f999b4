"""Headers for an OpenAI-compatible LLM or embeddings server (``--llm-header``,
``headers=``): an Azure ``api-key``, a gateway's key. They reach that server only, an
``Authorization`` header takes the API key's place, and no value reaches a message or a
recorded command line. httpx.MockTransport for the protocol; the same path against a real
llama.cpp server behind a key-checking proxy is tests/integration/test_llm_headers.py."""

from __future__ import annotations

import argparse

import httpx
import pytest

from traversals.embed.openai import OpenAIEmbedder
from traversals.errors import BadInput, LLMUnavailable
from traversals.llm.factory import open_llm
from traversals.llm.openai import OpenAICompatibleLLM
from traversals.options import (
    add_llm_flags,
    add_value_flags,
    headers_from_flag,
    open_embedder_from_args,
    open_llm_from_args,
    redact_secrets,
)

URL = "http://llm.test/v1"
SECRET = "azure-KEY-0123456789"


async def no_sleep(_: float) -> None:
    pass


def chat(content: str) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


def llm_with(respond, **kw) -> tuple[OpenAICompatibleLLM, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return respond(request)

    return OpenAICompatibleLLM(URL, "m", transport=httpx.MockTransport(handler), sleep=no_sleep, **kw), seen


async def test_headers_go_with_every_request() -> None:
    llm, seen = llm_with(lambda r: httpx.Response(200, json=chat("ok")), headers={"api-key": f" {SECRET} "})
    assert (await llm.generate("q")).texts == ["ok"]
    assert (await llm.generate("q2")).texts == ["ok"]
    assert [r.headers["api-key"] for r in seen] == [SECRET, SECRET]  # the ends stripped
    assert all("authorization" not in r.headers for r in seen)
    await llm.close()


async def test_an_authorization_header_takes_the_keys_place_and_both_are_refused() -> None:
    llm, seen = llm_with(lambda r: httpx.Response(200, json=chat("ok")), headers={"Authorization": f"Token {SECRET}"})
    await llm.generate("q")
    assert seen[0].headers["authorization"] == f"Token {SECRET}"
    await llm.close()
    with pytest.raises(BadInput, match="both an API key and an Authorization header") as e:
        llm_with(lambda r: httpx.Response(200), api_key="sk-1", headers={"authorization": f"Bearer {SECRET}"})
    assert SECRET not in str(e.value)


@pytest.mark.parametrize(("headers", "said"), [
    ({"Content-Type": "text/plain"}, "set by the client itself"),
    ({"Accept": "text/html"}, "set by the client itself"),
    ({"api key": SECRET}, "not an HTTP header name"),
    ({"api-key": f"{SECRET}\r\nX-Injected: 1"}, "one line of printable ASCII"),
])
def test_headers_the_client_cannot_send_are_refused_without_their_values(headers, said) -> None:
    with pytest.raises(BadInput, match=said) as e:
        llm_with(lambda r: httpx.Response(200), headers=headers)
    assert SECRET not in str(e.value)


async def test_a_refused_header_is_named_and_its_value_not_shown() -> None:
    reply = {"error": {"message": f"Access denied due to invalid subscription key {SECRET}."}}
    llm, _ = llm_with(lambda r: httpx.Response(401, json=reply), headers={"api-key": SECRET})
    with pytest.raises(LLMUnavailable, match="check the credentials sent: header api-key") as e:
        await llm.generate("q")
    assert SECRET not in str(e.value) and "subscription key ***" in str(e.value)
    await llm.close()
    llm, _ = llm_with(lambda r: httpx.Response(401, json={"error": {"message": "no key"}}))
    with pytest.raises(LLMUnavailable, match=r"no API key was sent.*--llm-header"):
        await llm.generate("q")
    await llm.close()


AZURE = "https://res.openai.azure.com/openai/deployments/gpt4o"


@pytest.mark.parametrize("base", [f"{AZURE}?api-version=2024-10-21", f"{AZURE}/chat/completions?api-version=2024-10-21",
                                  f"{AZURE}/?api-version=2024-10-21"])
async def test_a_base_urls_query_goes_with_every_request(base) -> None:
    """Azure's deployments want ``?api-version=``: the query stays after each endpoint's path."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/embeddings"):
            return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})
        return httpx.Response(200, json=chat("ok"))

    llm = OpenAICompatibleLLM(base, "gpt4o", transport=httpx.MockTransport(handler), headers={"api-key": SECRET})
    embedder = OpenAIEmbedder(base.replace("/chat/completions", ""), "e", transport=httpx.MockTransport(handler),
                              headers={"api-key": SECRET})
    assert (await llm.generate("q")).texts == ["ok"] and await embedder.embed(["x"]) == [[1.0, 0.0]]
    assert [str(r.url) for r in seen] == [f"{AZURE}/chat/completions?api-version=2024-10-21",
                                          f"{AZURE}/embeddings?api-version=2024-10-21"]
    await llm.close()
    await embedder.aclose()


async def test_a_key_in_the_base_urls_query_is_not_shown() -> None:
    llm = OpenAICompatibleLLM(f"{URL}?key={SECRET}&alt=json", "m", max_retries=0, sleep=no_sleep,
                              transport=httpx.MockTransport(lambda r: httpx.Response(
                                  400, json={"error": {"message": f"bad request to {r.url}"}})))
    with pytest.raises(Exception, match=r"/chat/completions\?key=\*\*\*&alt=json") as e:
        await llm.generate("q")
    assert SECRET not in str(e.value)
    await llm.close()


async def test_an_azure_deployment_without_its_api_version_is_told_how_to_give_it() -> None:
    llm = OpenAICompatibleLLM(AZURE, "gpt4o", max_retries=0, transport=httpx.MockTransport(
        lambda r: httpx.Response(404, json={"error": {"code": "404", "message": "Resource not found"}})))
    with pytest.raises(LLMUnavailable, match=r"Resource not found \(an Azure deployment's URL needs its API version: "
                                             r"\.\.\./deployments/NAME\?api-version="):
        await llm.generate("q")
    await llm.close()


def test_a_local_model_takes_no_headers() -> None:
    with pytest.raises(BadInput, match="runs the model in this process and sends no request"):
        open_llm("local:/nowhere/model.gguf", headers={"api-key": SECRET})


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_llm_flags(p)
    add_value_flags(p)
    return p.parse_args(list(argv))


def test_llm_header_flags_are_read_with_the_environment() -> None:
    args = parse("--llm", "openai:m", "--llm-header", "api-key: ${AZURE_KEY}", "--llm-header", "X-Title: traversals")
    assert headers_from_flag(args, "--llm-header", {"AZURE_KEY": SECRET}) == {"api-key": SECRET, "X-Title": "traversals"}
    with pytest.raises(BadInput, match="--llm-header 'api-key: \\$\\{AZURE_KEY\\}': the environment variable "
                                       "AZURE_KEY is not set"):
        headers_from_flag(args, "--llm-header", {})
    for bad, said in [(SECRET, "this one has no colon"), ("Accept: text/html", "set by the LLM client itself"),
                      ("api-key: a", None)]:
        argv = ["--llm", "openai:m", "--llm-header", bad] + (["--llm-header", "API-KEY: b"] if said is None else [])
        with pytest.raises(BadInput, match=said or "given twice") as e:
            headers_from_flag(parse(*argv), "--llm-header", {})
        assert SECRET not in str(e.value)


def test_llm_header_with_a_local_model_is_refused_before_anything_loads() -> None:
    with pytest.raises(BadInput, match="--llm-header is sent to an OpenAI-compatible server"):
        open_llm_from_args(parse("--llm-header", "api-key: x"), {})


def test_the_cli_sends_headers_and_leaves_out_the_environment_key_they_replace(monkeypatch) -> None:
    import traversals.llm.openai

    opened: list[dict] = []
    monkeypatch.setattr(traversals.llm.openai, "OpenAICompatibleLLM", lambda url, model, **kw: opened.append(kw))
    env = {"OPENAI_BASE_URL": URL, "OPENAI_API_KEY": "sk-env"}
    open_llm_from_args(parse("--llm", "openai:m", "--llm-header", "api-key: k1"), env)
    open_llm_from_args(parse("--llm", "openai:m", "--llm-header", "Authorization: Token k2"), env)
    open_llm_from_args(parse("--llm", "OpenAI:m", "--llm-header", "api-key: k3"), env)  # read as the factory reads it
    assert [(kw["api_key"], kw["headers"]) for kw in opened] == [
        ("sk-env", {"api-key": "k1"}), (None, {"Authorization": "Token k2"}), ("sk-env", {"api-key": "k3"})]


def test_the_embedder_gets_the_llm_headers_at_the_llms_url_only() -> None:
    env = {"OPENAI_BASE_URL": URL}
    same = open_embedder_from_args(parse("--llm", "openai:m", "--llm-header", f"api-key: {SECRET}",
                                         "--embedder", "openai:e"), env)
    other = open_embedder_from_args(parse("--llm", "openai:m", "--llm-header", f"api-key: {SECRET}",
                                          "--embedder", "openai:e", "--embedder-url", "http://other.test/v1"), env)
    assert isinstance(same, OpenAIEmbedder) and isinstance(other, OpenAIEmbedder)
    assert same._http._headers.get("api-key") == SECRET
    assert "api-key" not in other._http._headers  # a key meant for one server never goes to another
    own = open_embedder_from_args(parse("--llm", "openai:m", "--llm-header", f"api-key: {SECRET}",
                                        "--embedder", "openai:e", "--embedder-url", "http://other.test/v1",
                                        "--embedder-header", "X-Key: ${EMBED_KEY}"), {**env, "EMBED_KEY": "k9"})
    assert own._http._headers.get("x-key") == "k9" and "api-key" not in own._http._headers
    with pytest.raises(BadInput, match="--embedder-header: a header is given as 'Name: value'") as e:
        open_llm_from_args(parse("--llm", "openai:m", "--embedder-header", SECRET), env)  # told before anything opens
    assert SECRET not in str(e.value)


def test_recorded_command_lines_hide_llm_header_values() -> None:
    argv = ["eval", "x", "--llm-header", f"api-key: {SECRET}", f"--llm-header=X-Key: {SECRET}",
            "--llm-h", f"X-Other: {SECRET}", "--llm-header", "api-key: ${AZURE_KEY}",
            "--embedder-header", f"api-key: {SECRET}"]
    shown = redact_secrets(argv)
    assert SECRET not in " ".join(shown)
    assert shown[2:] == ["--llm-header", "api-key: ***", "--llm-header=X-Key: ***", "--llm-h", "X-Other: ***",
                         "--llm-header", "api-key: ${AZURE_KEY}", "--embedder-header", "api-key: ***"]
