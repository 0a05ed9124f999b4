"""An OpenAI-compatible server that misbehaves the ways real ones do (vLLM, Ollama,
llama.cpp, proxies, hosted APIs): every case is one named error that says what to do,
with no secret in it, or a clean fallback. httpx.MockTransport for the protocol, one
stdlib server on 127.0.0.1 for a reply that trickles in."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from traversals.errors import BadInput, LLMError, LLMUnavailable, TraversalsWarning
from traversals.llm.factory import open_llm
from traversals.llm.openai import OpenAICompatibleLLM

URL = "http://llm.test/v1"
KEY = "sk-SECRET-0123456789"


async def no_sleep(_: float) -> None:
    pass


def make(respond, *, url: str = URL, api_key: str | None = KEY, **kw) -> tuple[OpenAICompatibleLLM, list]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return respond(request)

    llm = OpenAICompatibleLLM(url, "m", api_key=api_key, transport=httpx.MockTransport(handler),
                              sleep=no_sleep, **kw)
    return llm, seen


def chat(content, finish: str = "stop") -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]}


# --- secrets ----------------------------------------------------------------------------


async def test_a_key_pasted_with_its_newline_is_stripped():
    llm, seen = make(lambda r: httpx.Response(200, json=chat("ok")), api_key=f" {KEY}\r\n")
    assert (await llm.generate("q")).texts == ["ok"]
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    await llm.close()


@pytest.mark.parametrize("key", [f"{KEY}\x00x", "sk-clé-123456"])
def test_a_key_no_header_can_carry_is_refused_without_showing_it(key):
    with pytest.raises(LLMUnavailable, match="API key holds a character") as ei:
        make(lambda r: httpx.Response(200, json=chat("ok")), api_key=key)
    assert KEY not in str(ei.value) and "clé" not in str(ei.value)


async def test_a_server_quoting_the_refused_key_does_not_put_it_in_the_message():
    reply = {"error": {"message": f"Incorrect API key provided: {KEY}."}}
    llm, _ = make(lambda r: httpx.Response(401, json=reply))
    with pytest.raises(LLMUnavailable, match="check the API key") as ei:
        await llm.generate("q")
    assert KEY not in str(ei.value) and "Incorrect API key provided: ***" in str(ei.value)
    await llm.close()


async def test_no_key_sent_says_so():
    llm, _ = make(lambda r: httpx.Response(403, json={"error": "forbidden"}), api_key=None)
    with pytest.raises(LLMUnavailable, match=r"no API key was sent.*OPENAI_API_KEY"):
        await llm.generate("q")
    await llm.close()


async def test_a_password_in_the_base_url_is_masked():
    llm, seen = make(lambda r: httpx.Response(500, text="boom"), url="http://me:pa%40ss99@llm.test/v1",
                     max_retries=0)
    with pytest.raises(LLMUnavailable) as ei:
        await llm.generate("q")
    assert "pa%40ss99" not in str(ei.value) and "pa@ss99" not in str(ei.value)
    assert "http://me:***@llm.test/v1/chat/completions" in str(ei.value)
    assert seen[0].url.password == "pa@ss99"  # still sent (httpx: as basic auth)
    await llm.close()


# --- odd bodies -------------------------------------------------------------------------

NGINX_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway"
             "</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n")


async def test_a_proxys_html_error_page_is_named_by_its_title():
    llm, _ = make(lambda r: httpx.Response(502, text=NGINX_502, headers={"content-type": "text/html"}),
                  max_retries=1)
    with pytest.raises(LLMUnavailable) as ei:
        await llm.generate("q")
    assert "HTTP 502: an HTML page: 502 Bad Gateway (gave up after 2 attempts)" in str(ei.value)
    assert "<" not in str(ei.value)
    await llm.close()


async def test_a_web_page_at_the_base_url_asks_whether_it_is_the_api_root():
    page = "<!DOCTYPE html><html><head><title>Open WebUI</title></head><body><div id=app></div></body></html>"
    llm, _ = make(lambda r: httpx.Response(200, text=page, headers={"content-type": "text/html"}),
                  url="http://llm.test:3000")
    with pytest.raises(LLMError, match=r"returned an HTML page \(Open WebUI\), not JSON: is http://llm.test:3000 "
                                       r"the API root"):
        await llm.generate("q")
    await llm.close()


async def test_a_reply_streamed_though_not_asked_is_merged():
    events = "".join(
        f"data: {json.dumps(e)}\n\n"
        for e in (
            {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
            {"choices": [{"index": 0, "delta": {"content": "Par"}}]},
            {"choices": [{"index": 0, "delta": {"content": "is"}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}},
        )
    ) + "data: [DONE]\n\n"
    llm, seen = make(lambda r: httpx.Response(200, text=events, headers={"content-type": "text/event-stream"}))
    g = await llm.generate("Capital of France?")
    assert g.texts == ["Paris"] and (g.prompt_tokens, g.completion_tokens) == (7, 2)
    assert json.loads(seen[0].content)["stream"] is False  # asked not to, explicitly
    await llm.close()


async def test_a_stream_with_usage_in_every_chunk_counts_the_last():
    """Some servers put a running usage in each chunk: the last one is the reply's."""
    events = "".join(
        f"data: {json.dumps(e)}\n\n"
        for e in (
            {"choices": [{"index": 0, "delta": {"content": "Par"}}],
             "usage": {"prompt_tokens": 7, "completion_tokens": 1}},
            {"choices": [{"index": 0, "delta": {"content": "is"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 7, "completion_tokens": 2}},
        )
    ) + "data: [DONE]\n\n"
    llm, _ = make(lambda r: httpx.Response(200, text=events, headers={"content-type": "text/event-stream"}))
    g = await llm.generate("Capital of France?")
    assert g.texts == ["Paris"] and (g.prompt_tokens, g.completion_tokens) == (7, 2)
    await llm.close()


async def test_a_chat_reply_written_as_a_completion_text_is_read():
    """A server (or proxy) answering /chat/completions with a completions-style choice:
    its "text" is the reply, not an empty answer."""
    reply = {"choices": [{"index": 0, "text": "Paris", "finish_reason": "stop"}]}
    llm, _ = make(lambda r: httpx.Response(200, json=reply))
    assert (await llm.generate("Capital of France?")).texts == ["Paris"]
    await llm.close()


async def test_a_body_in_a_declared_charset_other_than_utf8_is_read():
    body = json.dumps(chat("Zoë"), ensure_ascii=False).encode("latin-1")
    llm, _ = make(lambda r: httpx.Response(200, content=body,
                                           headers={"content-type": "application/json; charset=iso-8859-1"}))
    assert (await llm.generate("q")).texts == ["Zoë"]
    await llm.close()


@pytest.mark.parametrize("body, says", [("null", "returned a JSON null, not an object"),
                                        ('{"error": {"message": "model overloaded"}}',
                                         "the server answered with an error: model overloaded")])
async def test_a_reply_without_choices_says_what_it_was(body, says):
    llm, _ = make(lambda r: httpx.Response(200, text=body))
    with pytest.raises(LLMError, match=says):
        await llm.generate("q")
    await llm.close()


# --- the request's own errors, the model's ------------------------------------------------


async def test_a_prompt_too_long_for_the_context_names_its_size():
    reply = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                       "type": "exceed_context_size_error"}}  # llama.cpp's server
    llm, _ = make(lambda r: httpx.Response(400, json=reply))
    with pytest.raises(LLMError) as ei:
        await llm.generate("x" * 4000, prefix="ANSWER:", max_tokens=64)
    assert not isinstance(ei.value, LLMUnavailable)  # this request's, not the server's
    from traversals.errors import PromptTooLong

    assert isinstance(ei.value, PromptTooLong)  # a search gives up that node, not the question
    # the prefix the model is asked to write first has its room on top of max_tokens
    assert "a prompt of 4007 characters (about 1001 tokens) + max_tokens 71" in str(ei.value)
    await llm.close()


async def test_the_prefix_the_model_writes_first_gets_its_own_room():
    """A rating asked with max_tokens 6 and "RATING [0.0-1.0]: " to echo: the echo alone is
    about 11 tokens, the reply was cut to "RATING [0.0" and read as 0.0."""
    sent = []

    def reply(request):
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"content": "RATING [0.0-1.0]: 0.8"},
                                                      "finish_reason": "stop"}]})

    llm, _ = make(reply)
    got = await llm.generate("rate it", prefix="RATING [0.0-1.0]: ", max_tokens=6)
    assert got.texts == ["0.8"] and sent[0]["max_tokens"] == 6 + len("RATING [0.0-1.0]:")
    await llm.close()
    llm, _ = make(lambda r: httpx.Response(400, json={"error": {"message": "bad stop"}}))
    with pytest.raises(LLMError) as ei:
        await llm.generate("q")
    assert "characters" not in str(ei.value)  # other 400s are left as the server said them
    await llm.close()


async def test_a_model_the_server_does_not_serve_is_unavailable_even_as_400():
    reply = {"error": {"message": "m is not a valid model ID", "code": 400}}  # OpenRouter
    llm, seen = make(lambda r: httpx.Response(400, json=reply))
    with pytest.raises(LLMUnavailable, match="check the model name"):
        await llm.generate("q")
    assert len(seen) == 1
    await llm.close()


async def test_a_reasoning_model_out_of_tokens_is_one_clear_error():
    reply = {"choices": [{"message": {"content": None, "reasoning_content": "Let me think"}, "finish_reason": "length"}]}
    llm, _ = make(lambda r: httpx.Response(200, json=reply))
    with pytest.raises(LLMError, match=r"reached max_tokens \(40\) before any answer text"):
        await llm.generate("q", max_tokens=40)
    await llm.close()
    llm, _ = make(lambda r: httpx.Response(200, json=chat("<think>Hmm, the capital", finish="length")))
    with pytest.raises(LLMError, match="reasoning model"):
        await llm.generate("q")
    await llm.close()


async def test_thoughts_written_into_the_reply_are_dropped():
    llm, _ = make(lambda r: httpx.Response(200, json=chat("<think>\nFrance... Paris.\n</think>\n\nANSWER: Paris")))
    assert (await llm.generate("q", prefix="ANSWER:")).texts == [" Paris"]
    await llm.close()
    llm, _ = make(lambda r: httpx.Response(200, json=chat("Paris", finish="length")))
    assert (await llm.generate("q")).texts == ["Paris"]  # cut short but not empty: the text is kept
    await llm.close()


async def test_a_reply_cut_at_max_tokens_is_told_from_a_whole_one():
    """finish_reason "length" was read only when every text was empty: a rating's reasoning
    cut before its number read as a reply with no number."""
    replies = {"cut": chat("Reasoning: the path shows that Bob", finish="length"), "whole": chat("ok"),
               "ran on": chat("E2\nANSWER: x", finish="length"), "untold": {"choices": [{"message": {"content": "ok"}}]}}
    llm, _ = make(lambda r: httpx.Response(200, json=replies[json.loads(r.content)["messages"][0]["content"]]))
    cut = await llm.generate("cut", n=2)
    assert cut.texts == ["Reasoning: the path shows that Bob"] * 2 and cut.cut(0) and cut.cut(1)
    assert (await llm.generate("whole")).finish_reasons == ["stop"]
    # a server that ignores stop runs on to max_tokens: the text ends at the stop sequence, whole
    ran_on = await llm.generate("ran on", stop=["\nANSWER"])
    assert ran_on.texts == ["E2"] and ran_on.finish_reasons == ["stop"] and not ran_on.cut()
    untold = await llm.generate("untold")
    assert untold.finish_reasons == [None] and not untold.cut()
    await llm.close()


# --- base URLs --------------------------------------------------------------------------


@pytest.mark.parametrize("given", [URL, URL + "/", URL + "/chat/completions", URL + "/completions/"])
async def test_the_base_url_is_cut_back_to_the_api_root(given):
    llm, seen = make(lambda r: httpx.Response(200, json=chat("ok")), url=given)
    assert llm.base_url == URL
    await llm.generate("q")
    assert str(seen[0].url) == URL + "/chat/completions"
    await llm.close()


async def test_the_factory_strips_a_url_pasted_with_whitespace():
    llm = open_llm("openai:m", url=" http://127.0.0.1:8000/v1/\n")
    assert isinstance(llm, OpenAICompatibleLLM) and llm.base_url == "http://127.0.0.1:8000/v1"
    await llm.close()
    with pytest.raises(BadInput, match=r"LLM URL \(--llm-url or \$OPENAI_BASE_URL\)"):
        open_llm("openai:m", url="127.0.0.1:8000/v1")


# --- the time limit covers the whole reply ----------------------------------------------


class _Trickle(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length", 0)))
        payload = json.dumps(chat("hello")).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            for b in payload:  # one byte every 50 ms: no single read waits long
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *a):
        pass


async def test_a_reply_that_trickles_in_is_bounded_by_the_timeout():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{srv.server_address[1]}/v1", "m", timeout=0.6)
    try:
        t0 = time.perf_counter()
        with pytest.raises(LLMError, match=r"timed out .*limit 0.6 s.*--llm-timeout"):
            await llm.generate("q")
        assert time.perf_counter() - t0 < 1.5  # the whole reply would take about 3 s
    finally:
        await llm.close()
        srv.shutdown()
        srv.server_close()


# --- scoring: the probe only passes for real echoed prompt log-probabilities ------------


def _tokens(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_a_server_ignoring_echo_and_max_tokens_does_not_pass_the_probe():
    """It returns confident *generated* tokens: they must not be read as the prompt's."""

    def respond(request):
        gen = [", 9", ", 10", ", 11", ", 12", ", 13", ", 14", ", 15", ", 16"]
        lp = {"tokens": gen, "token_logprobs": [-0.01] * 8, "text_offset": [0, 3, 7, 11, 15, 19, 23, 27]}
        return httpx.Response(200, json={"choices": [{"text": "".join(gen), "logprobs": lp}],
                                         "usage": {"prompt_tokens": 22, "completion_tokens": 8}})

    llm, _ = make(respond, completion_template="raw")
    with pytest.warns(TraversalsWarning, match="cannot score options.*not the prompt.*sampled decoding"):
        assert await llm.probe_scoring() is False
    assert "ignores echo" in llm.scoring_reason
    await llm.close()


async def test_echoed_logprobs_without_offsets_or_in_the_chat_format_are_read():
    def respond(request):
        prompt = json.loads(request.content)["prompt"]
        toks = _tokens(prompt) + ["!"]
        lps = [None] + [-0.5] * (len(toks) - 1)
        if "chatfmt" in str(request.url):
            logprobs = {"content": [{"token": t, "logprob": v, "top_logprobs": []} for t, v in zip(toks, lps)]}
        else:
            logprobs = {"tokens": toks, "token_logprobs": lps}  # no text_offset
        return httpx.Response(200, json={"choices": [{"text": prompt + "!", "logprobs": logprobs}],
                                         "usage": {"prompt_tokens": len(toks) - 1}})

    for url in (URL, "http://chatfmt.test/v1"):
        llm, _ = make(respond, url=url, completion_template="raw")
        assert await llm.probe_scoring() is True, llm.scoring_reason
        s = await llm.score("Q", ["abc", "abcdef"], prefix="A:")
        assert s.logprobs[0] > s.logprobs[1]
        await llm.close()


async def test_completions_missing_falls_back_to_sampling_with_a_warning():
    def respond(request):
        if request.url.path.endswith("/chat/completions"):
            return httpx.Response(200, json=chat("Paris"))
        return httpx.Response(404, json={"detail": "Not Found"})

    llm, _ = make(respond, completion_template="chatml")
    with pytest.warns(TraversalsWarning, match=r"cannot score options \(the server has no /completions endpoint") as w:
        assert await llm.probe_scoring() is False
    assert "check the base URL" not in str(w[0].message)  # the base URL is right: chat works
    assert (await llm.generate("q")).texts == ["Paris"]  # generation is unaffected
    await llm.close()


@pytest.mark.parametrize("template", ["llama3", "x {prompt} {other}", "{prompt} {", "no field at all"])
def test_a_completion_template_without_one_prompt_field_is_refused_at_once(template):
    """An unknown name was read as a format string: every scoring prompt lost its question
    ("llama3Answer: Paris") and constrained decoding ranked options blind."""
    from traversals.errors import BadInput
    from traversals.llm.openai import OpenAICompatibleLLM

    with pytest.raises(BadInput, match="a template is 'chatml' or 'raw', or a text with one {prompt}"):
        OpenAICompatibleLLM("http://127.0.0.1:9/v1", "m", completion_template=template)
    ok = OpenAICompatibleLLM("http://127.0.0.1:9/v1", "m", completion_template="<s>[INST] {prompt} [/INST]{{x}}")
    assert ok._render("Q?", "A:") == "<s>[INST] Q? [/INST]{x}A:"
    assert OpenAICompatibleLLM("http://127.0.0.1:9/v1", "m", completion_template="ChatML").completion_template.startswith(
        "<|im_start|>user")
