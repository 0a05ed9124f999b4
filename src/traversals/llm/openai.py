"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp's servers, Ollama, ...).

Generation posts ``{base_url}/chat/completions`` with the prompt as one user message.
``base_url`` is the API root *including* the version, e.g. ``http://127.0.0.1:8000/v1``;
a query in it goes with every request (Azure's ``.../deployments/NAME?api-version=V``).

- **prefix**: most chat servers cannot pre-fill the assistant turn, so by default the user
  message asks the model to start its reply with the prefix and the prefix is stripped
  from the reply if it was repeated (``prefill=True`` sends it as a trailing assistant
  message instead, for servers that continue it).
- **n**: servers that ignore ``n`` (llama.cpp's) return one choice, and servers that refuse
  it (Groq, Anthropic: HTTP 400) are asked for one; the missing samples are requested
  concurrently (with distinct seeds when sampling), and later calls go straight to
  concurrent requests.
- **refused parameters**: a 400/422 that says ``seed`` or ``stop`` is not supported
  (Mistral's API, OpenAI's reasoning models) sends the request again without it (stops are
  applied to the reply anyway; a warning says that a seeded run no longer repeats), one
  that asks for ``max_completion_tokens`` instead of ``max_tokens`` sends that; the server's
  refusals are remembered (``refused_params``).
- **retries**: 408/409/429/5xx answers and connection errors are retried with exponential
  backoff and jitter, honouring ``Retry-After``, up to ``max_retries`` times; read
  timeouts are not retried. Failures become :class:`LLMUnavailable` (cannot connect),
  :class:`LLMTimeout` (out of time) or :class:`LLMError`, with one line naming the URL (:class:`traversals.http_json.JsonPoster`,
  shared with the embeddings client).
- **odd servers**: a base URL given as the full endpoint (``.../v1/chat/completions``) is
  cut back to the API root; ``stream`` is sent as false, and a reply streamed anyway is
  merged from its chunks; a leading ``<think>...</think>`` block is dropped from a reply,
  and a reply that spent all of ``max_tokens`` before any text (a reasoning model thinking)
  is an :class:`LLMError` saying so, as is a reply with no text but reasoning
  (``reasoning_content``/``reasoning``: the server's reasoning parser took the whole reply
  for thinking); a 400 for a prompt too long for the context names the prompt's size.
- **scoring**: ``can_score`` is false until :meth:`OpenAICompatibleLLM.probe_scoring`
  (awaited once, before :func:`~traversals.api.build_solver`: the command line does it,
  :func:`traversals.options.prepare_llm`) finds a ``/completions`` endpoint that echoes prompt log-probabilities (vLLM;
  llama.cpp's ``llama-server`` refuses ``echo``, llama-cpp-python's server 0.3.x misaligns
  them and fails the probe) *and* a ``completion_template`` is known to render the chat
  prompt as raw text (``"chatml"`` for Qwen/SmolLM2 or a format string with
  ``{prompt}``). :meth:`score` then sums the echoed log-probabilities of each option's
  tokens and reports how many it summed (``token_counts``, for a mean per token);
  otherwise it raises :class:`ScoringNotSupported`. A score's tokens are prompt tokens
  (each option's echoed prompt, ``cached_tokens`` as :meth:`generate` reads them): the one
  token an echo request has to generate is no completion token, as scoring generates
  nothing (the local backend counts none either). An option whose echoed
  log-probabilities hold a NaN scores ``-inf`` (impossible, as the search reads a NaN
  score anyway), and a probe whose echoed values are not finite numbers fails. Echoed log-probabilities
  are read in the completions format (``tokens``/``token_logprobs``, ``text_offset`` if
  given) or the chat format (``content[].token``/``logprob``). A probe that fails while a
  template is configured warns (:class:`~traversals.errors.TraversalsWarning`) with the
  reason, as the search then samples instead: a reply of another shape, no
  ``/completions`` (404) or one refused to this client (401/403: a gateway that serves chat
  only), a 400 for ``echo`` or ``logprobs``, or a 200 reply with an ``error`` object (its
  message quoted). A server that cannot answer now -- it cannot be reached, still answers
  5xx/429 after the retries (a model loading), names no such model, or runs out of time --
  says nothing about scoring: the probe raises that :class:`LLMUnavailable` or
  :class:`LLMTimeout`, as the run's first call would, rather than make a whole run sampled.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import string
import warnings
from typing import Any, Awaitable, Callable, Mapping, Sequence

import httpx

from traversals.errors import BadInput, LLMError, LLMTimeout, LLMUnavailable, ScoringNotSupported, TraversalsWarning
from traversals.http_json import JsonPoster, api_root
from traversals.tokens import CommandToken
from traversals.llm.base import Generation, Scores, finish_reason
from traversals.llm.chat import apply_stop, prefix_instruction, strip_prefix
from ..aio import gather

__all__ = ["OpenAICompatibleLLM", "COMPLETION_TEMPLATES", "NOT_PROBED"]

#: raw-text renderings of one user turn + the start of the assistant turn
COMPLETION_TEMPLATES = {
    "chatml": "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n",
    "raw": "{prompt}\n\n",
}

def _checked_template(template: str | None) -> str | None:
    """A completion template: a name of :data:`COMPLETION_TEMPLATES`, or a format string
    with one ``{prompt}`` field and no other (``{{`` for a literal brace). Anything else is
    refused: an unknown name read as a format string rendered every scoring prompt without
    the question ("ChatMLAnswer: Paris"), a stray brace failed at the first option scored."""
    if not template:
        return None
    if template.strip().lower() in COMPLETION_TEMPLATES:  # ChatML is chatml
        return COMPLETION_TEMPLATES[template.strip().lower()]
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        fields = [f"unparsable ({e})"]
    if fields != ["prompt"]:
        raise BadInput(f"--llm-template {template!r}: a template is {' or '.join(map(repr, COMPLETION_TEMPLATES))}, or "
                       "a text with one {prompt} where the question goes (and {{ }} for literal braces), e.g. "
                       "'<|im_start|>user\\n{prompt}<|im_end|>\\n<|im_start|>assistant\\n'")
    return template


#: the OpenAI API accepts at most 4 stop sequences; the rest are applied client-side
MAX_SERVER_STOPS = 4

#: why scoring is off when a completion template is known but :meth:`~OpenAICompatibleLLM.probe_scoring`
#: has not run (the command line runs it; a library user calls it)
NOT_PROBED = ("not probed: `await llm.probe_scoring()` checks the server's echoed log-probabilities and "
              "turns scoring on; call it before build_solver, as the command line does")
#: why scoring is off when no completion template is known
_NO_TEMPLATE = ("no completion_template (--llm-template, e.g. 'chatml') configured: scoring options needs "
                "the served model's prompt template")
#: a request parameter a server refused, quoted in its 400/422 message ('seed', "stop", `n`)
_QUOTED = "[\"'`]{}[\"'`]"
#: the HTTP statuses of a request the server refused for what it holds (JsonPoster sets ``status``)
_REFUSED = (400, 422)
#: the statuses of an LLMUnavailable that refuses the /completions endpoint to a server that is up:
#: none there (404), or a gateway that serves chat only (401/403)
_NOT_SERVED = (401, 403, 404)
#: a 5xx that refuses the probe's request rather than says the server is down: llama.cpp's
#: llama-server answers echo with HTTP 500 "Only no echo is supported"; 501 is "not implemented"
_REFUSES_ECHO = re.compile(r"\becho\b|logprob", re.IGNORECASE)
#: how a server says it does not take a parameter (OpenAI, Mistral/pydantic, vLLM, Groq ...)
_UNSUPPORTED = re.compile(r"unsupported|not supported|not permitted|not allowed|unrecognized|unknown|"
                          r"extra_forbidden", re.IGNORECASE)
#: where a reasoning model's thoughts come back beside ``content`` (vLLM, llama.cpp; Ollama, OpenRouter)
_REASONING_FIELDS = ("reasoning_content", "reasoning")
#: a reasoning model's thoughts written into the reply (Ollama, llama.cpp without a parser)
_THINK = re.compile(r"\A\s*<think>.*?(</think>\s*|\Z)", re.DOTALL)


def merge_chunks(events: list[dict[str, Any]]) -> dict[str, Any]:
    """One chat/completions reply from the chunks of a streamed one: each choice's
    ``delta.content`` (or ``text``) joined, its last ``finish_reason``, the last ``usage``."""
    texts: dict[int, list[str]] = {}
    finish: dict[int, Any] = {}
    usage: Any = None
    for event in events:
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
        for ch in event.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            index = ch.get("index")
            i = index if isinstance(index, int) else 0
            delta = ch.get("delta")
            part = delta.get("content") if isinstance(delta, dict) else ch.get("text")
            texts.setdefault(i, []).append(part if isinstance(part, str) else "")
            if ch.get("finish_reason"):
                finish[i] = ch["finish_reason"]
    choices = [
        {"index": i, "message": {"role": "assistant", "content": "".join(parts)}, "finish_reason": finish.get(i)}
        for i, parts in sorted(texts.items())
    ]
    return {"choices": choices, "usage": usage} if usage is not None else {"choices": choices}


def _size(text: str, max_tokens: int) -> str:
    return f"a prompt of {len(text)} characters (about {len(text) // 4} tokens) + max_tokens {max_tokens}"


class OpenAICompatibleLLM:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        token: CommandToken | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_concurrency: int = 8,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        prefill: bool = False,
        completion_template: str | None = None,
        extra_body: dict[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        name: str | None = None,
    ) -> None:
        self.model = model
        self.name = name or f"openai:{model}"
        self.timeout = timeout
        self.prefill = prefill
        self.completion_template = _checked_template(completion_template)
        self.extra_body = dict(extra_body or {})
        self.can_score = False
        #: None until a call shows whether the server honours ``n``
        self.supports_n: bool | None = None
        #: why scoring is off (after :meth:`probe_scoring`)
        self.scoring_reason: str = NOT_PROBED if self.completion_template is not None else _NO_TEMPLATE
        #: request parameters this server refused (HTTP 400/422 naming them), left out since
        self.refused_params: set[str] = set()
        self._http = JsonPoster(  # checks base_url (LLMError if it is not http(s))
            api_root(base_url) if isinstance(base_url, str) else base_url,
            name=self.name,
            error=LLMError,
            unavailable=LLMUnavailable,
            timed_out=LLMTimeout,
            api_key=api_key,
            headers=headers,
            token=token,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_concurrency=max_concurrency,
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            transport=transport,
            sleep=sleep,
            merge_stream=merge_chunks,
        )
        self.base_url = self._http.base_url

    # ------------------------------------------------------------------ HTTP

    async def _post(self, path: str, body: dict[str, Any], size: str | None = None) -> dict[str, Any]:
        """POST through the shared plumbing (:class:`~traversals.http_json.JsonPoster`):
        retries, ``Retry-After``, time limits, one-line errors."""
        return await self._http.post(path, {"stream": False, **body}, size=size)

    # ------------------------------------------------------------------ generate

    def _messages(self, prompt: str, prefix: str) -> list[dict[str, str]]:
        if self.prefill and prefix:
            return [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": prefix},
            ]
        return [{"role": "user", "content": prefix_instruction(prompt, prefix)}]

    def _dump(self, data: Any) -> str:
        """A reply quoted in a message: its secrets (the key, a header's value, a token) hidden
        before it is cut short, so no part of one shows either."""
        return self._http.redact(json.dumps(data, ensure_ascii=False))[:200]

    async def _chat(
        self,
        prompt: str,
        prefix: str,
        n: int,
        temperature: float,
        max_tokens: int,
        stop: Sequence[str] | None,
        seed: int | None,
    ) -> tuple[list[tuple[str, object]], dict[str, Any]]:
        """One chat request: each choice's text with its ``finish_reason``, and the usage."""
        if prefix and not self.prefill:  # the model writes the prefix itself first: room for it (at most a
            max_tokens += len(prefix.strip())  # token a character), or a rating's echo ate its 6 tokens
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(prompt, prefix),
            "temperature": temperature,
            "max_tokens": max_tokens,
            **self.extra_body,
        }
        if n != 1:
            body["n"] = n
        if stop:
            body["stop"] = list(stop)[:MAX_SERVER_STOPS]
        if seed is not None:
            body["seed"] = seed
        data = await self._post_chat(body, _size(prompt + prefix, max_tokens))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            self._check_error_reply(data)
            raise LLMError(f"{self.name}: reply has no choices: {self._dump(data)}")
        if not all(isinstance(ch, dict) for ch in choices):
            raise LLMError(f"{self.name}: reply is not a chat completion (a choice is not an object): "
                           f"{self._dump(data)}")
        index = [ch.get("index") if isinstance(ch.get("index"), int) else 0 for ch in choices]
        ordered = [ch for _, ch in sorted(zip(index, choices), key=lambda p: p[0])]
        texts = [self._choice_text(ch, data) for ch in ordered]
        if not any(texts) and all(ch.get("finish_reason") == "length" for ch in choices):
            raise LLMError(
                f"{self.name}: the reply reached max_tokens ({max_tokens}) before any answer text: "
                "a reasoning model spends its tokens thinking; turn its thinking off or use another model"
            )
        if not any(texts):
            self._check_reasoning_only(choices)
        usage = data.get("usage")
        return [(t, ch.get("finish_reason")) for t, ch in zip(texts, ordered)], usage if isinstance(usage, dict) else {}

    def _check_error_reply(self, data: dict[str, Any]) -> None:
        """Raise an :class:`LLMError` quoting the message of a reply that carries an ``error``
        object in place of choices (a 200 from a proxy or an overloaded server)."""
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            raise LLMError(f"{self.name}: the server answered with an error: {self._http.redact(err['message'][:200])}")

    async def _post_chat(self, body: dict[str, Any], size: str) -> dict[str, Any]:
        """POST a chat request without the parameters this server refuses: a 400/422 that
        names ``seed`` or ``stop`` as not supported (Mistral's API, OpenAI's reasoning models)
        is sent again without it, one that asks for ``max_completion_tokens`` instead of
        ``max_tokens`` with that; what worked is remembered for later calls."""
        body = _without(body, self.refused_params)
        adapted: list[str] = []
        while True:
            try:
                data = await self._post("/chat/completions", body, size)
                break
            except LLMError as e:
                param = _refused_param(e, body)
                if param is None:
                    raise
                adapted.append(param)
                body = _without(body, {param})
        for param in adapted:
            self._remember_refused(param)
        return data

    def _remember_refused(self, param: str) -> None:
        """Leave ``param`` out from now on, warning when that changes what a call does."""
        self.refused_params.add(param)
        effect = {
            "seed": "calls go unseeded, so a sampled run does not repeat on this server",
            "stop": "stop sequences are applied to the reply instead (each reply runs on to max_tokens)",
        }.get(param)
        if effect:
            warnings.warn(f"{self.name}: the server refuses the parameter {param!r}: {effect}",
                          TraversalsWarning, stacklevel=4)

    def _check_reasoning_only(self, choices: list[dict[str, Any]]) -> None:
        """Raise when a reply's text is empty but its reasoning is not: the server's
        reasoning parser took the whole reply for thinking (vLLM's, llama.cpp's
        ``--reasoning-format``), so the answer is nowhere to read."""
        for ch in choices:
            msg = ch.get("message")
            for field in _REASONING_FIELDS:
                thought = msg.get(field) if isinstance(msg, dict) else None
                if isinstance(thought, str) and thought.strip():
                    raise LLMError(
                        f"{self.name}: the reply has no content, only reasoning (message.{field}, "
                        f"{len(thought)} characters): the server took the whole reply for the model's "
                        "thinking; turn the model's thinking off or start the server without a reasoning "
                        "parser (vLLM: no --reasoning-parser; llama.cpp: --reasoning-format none)"
                    )

    def _choice_text(self, ch: dict[str, Any], data: dict[str, Any]) -> str:
        """A choice's reply text: ``message.content`` (a string, or a list of text parts),
        or ``text`` as a completions endpoint writes it."""
        msg = ch.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if content is None:
            content = ch.get("text")
        if isinstance(content, list):  # [{"type": "text", "text": "..."}, ...]
            parts = [p.get("text") if isinstance(p, dict) else p for p in content]
            if all(isinstance(p, str) for p in parts):
                content = "".join(str(p) for p in parts)
        if content is None:
            if msg is not None and not isinstance(msg, dict):
                raise LLMError(f"{self.name}: reply is not a chat completion (message is not an object): "
                               f"{self._dump(data)}")
            return ""
        if not isinstance(content, str):
            raise LLMError(f"{self.name}: the reply's content is {type(content).__name__}, not text: "
                           f"{self._dump(data)}")
        return _THINK.sub("", content, count=1)

    async def generate(
        self,
        prompt: str,
        *,
        prefix: str = "",
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> Generation:
        if n < 1:
            raise ValueError("n must be >= 1")
        sampling = temperature > 0
        usages: list[dict[str, Any]] = []
        replies: list[tuple[str, object]] = []  # each text with its finish_reason
        if not sampling:
            # greedy samples are all the same: ask once, copy
            got, usage = await self._chat(prompt, prefix, 1, temperature, max_tokens, stop, seed)
            replies = got[:1] * n
            usages.append(usage)
        else:
            base = seed if seed is not None else random.randrange(2**31)
            if n == 1 or self.supports_n is not False:
                got, usage = await self._first_samples(
                    lambda k: self._chat(prompt, prefix, k, temperature, max_tokens, stop, base), n
                )
                replies.extend(got[:n])
                usages.append(usage)
            if len(replies) < n:  # the server ignored n: top up with concurrent requests
                offset = len(replies)
                results = await gather(
                    *(
                        self._chat(
                            prompt,
                            prefix,
                            1,
                            temperature,
                            max_tokens,
                            stop,
                            (base + offset + i) % 2**31,
                        )
                        for i in range(n - offset)
                    )
                )
                for got, usage in results:
                    replies.extend(got[:1])
                    usages.append(usage)
        texts = [strip_prefix(t, prefix) for t, _ in replies[:n]]
        stopped = [apply_stop(t, stop) for t in texts]
        prompt_tokens = sum(_count(u.get("prompt_tokens")) for u in usages)
        completion_tokens = sum(_count(u.get("completion_tokens")) for u in usages)
        computed = _computed(prompt_tokens, [_cached_tokens(u) for u in usages])
        return Generation(
            texts=stopped,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            computed_prompt_tokens=computed,
            finish_reasons=[finish_reason(reason, t, cut) for (_, reason), t, cut in zip(replies, texts, stopped)],
        )

    async def _first_samples(
        self, chat: Callable[[int], Awaitable[tuple[list[tuple[str, object]], dict[str, Any]]]], n: int
    ) -> tuple[list[tuple[str, object]], dict[str, Any]]:
        """The first request of a sampling call, ``chat(n)``: ``n`` samples asked at once. A
        server that refuses ``n`` > 1 (Groq, Anthropic: HTTP 400) is asked for one, and
        :attr:`supports_n` records what the server did, so the caller tops the samples up."""
        try:
            got, usage = await chat(n)
        except LLMError as e:
            if n == 1 or isinstance(e, LLMUnavailable) or e.status not in _REFUSED:
                raise
            got, usage = await chat(1)
            self.supports_n = False  # asked for one sample, the server answered: n was the trouble
            return got, usage
        if n > 1:
            self.supports_n = len(got) >= n
        return got, usage

    # ------------------------------------------------------------------ scoring

    def _render(self, prompt: str, prefix: str) -> str:
        assert self.completion_template is not None
        return self.completion_template.format(prompt=prompt) + prefix

    async def _echo_logprobs(
        self, text: str
    ) -> tuple[list[float | None], list[int], list[str], int, int | None]:
        """Echoed prompt tokens of ``text``: (logprobs, char offsets, token strings,
        prompt token count, how many of them the server took from its cache or None if it
        does not say), restricted to the prompt's tokens."""
        body = {
            "model": self.model,
            "prompt": text,
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": 1,
        }
        data = await self._post("/completions", body, _size(text, 1))
        if not data.get("choices"):
            self._check_error_reply(data)
        try:
            token_logprobs, offsets, tokens = _read_logprobs(data["choices"][0]["logprobs"])
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ScoringNotSupported(
                f"{self.name}: /completions did not return echoed logprobs"
            ) from e
        usage = data.get("usage")
        n_prompt = _count(usage.get("prompt_tokens")) if isinstance(usage, dict) else 0
        if not (0 < n_prompt <= len(tokens)):
            n_prompt = max(len(tokens) - 1, 0)  # assume one generated token at the end
        cached = _cached_tokens(usage) if isinstance(usage, dict) else None
        return token_logprobs[:n_prompt], offsets[:n_prompt], tokens[:n_prompt], n_prompt, cached

    @staticmethod
    def _tail_logprob(
        lps: Sequence[float | None], offsets: Sequence[int], tokens: Sequence[str], tail: int
    ) -> tuple[float, int]:
        """Sum of the logprobs of the tokens that overlap the last ``tail`` characters of
        the echoed prompt, and how many tokens it sums (the option's length for a mean per
        token). Offsets are counted from the end, because servers count them in their
        detokenised text (special tokens may render as nothing)."""
        if not tokens:
            return 0.0, 0
        end = offsets[-1] + len(tokens[-1])
        start = end - tail
        summed = [
            float(lp)
            for lp, off, tok in zip(lps, offsets, tokens)
            if lp is not None and off + len(tok) > start
        ]
        total = sum(summed)
        # a NaN echoed (a server's numeric fault) makes the option impossible, as the search
        # reads a NaN score anyway (choices.softmax, CheckedLLM): -inf says so, NaN hid it
        return (-math.inf if math.isnan(total) else total), len(summed)

    async def probe_scoring(self) -> bool:
        """Check whether :meth:`score` can work here; sets and returns ``can_score``.

        Besides the API shape, the probe checks that the echoed log-probabilities are
        aligned with their tokens: the continuation of a counting sequence must be
        near-certain. (llama-cpp-python's server 0.3.x pairs each token with the
        distribution *after* it, so it fails this check.)"""
        if self.completion_template is None:
            self.can_score = False
            self.scoring_reason = _NO_TEMPLATE
            return False
        probe = ", ".join(str(i) for i in range(1, 9))
        try:
            lps, offsets, tokens, _, _ = await self._echo_logprobs(probe)
        except LLMError as e:  # ScoringNotSupported too
            if isinstance(e, LLMTimeout) or (isinstance(e, LLMUnavailable) and e.status not in _NOT_SERVED
                                             and not _refuses_probe(e)):
                raise  # down, loading, overloaded: no answer about scoring (module docstring)
            if e.status == 404:  # a chat-only server (Ollama, LM Studio, hosted chat APIs)
                return self._scoring_off("the server has no /completions endpoint (HTTP 404)")
            return self._scoring_off(f"/completions with echo+logprobs failed: {_unnamed(e, self.name)}")
        given = [float(x) for x in lps if isinstance(x, (int, float))]
        values = [x for x in given if math.isfinite(x)]  # NaN passed `mean < -1.5`, and scored -inf
        if len(values) < 4 or len(offsets) != len(lps):
            if len(given) > len(values):
                return self._scoring_off(f"the server echoes prompt logprobs that are not numbers: "
                                         f"{len(given) - len(values)} of {len(given)} NaN or infinite")
            return self._scoring_off("the server does not echo prompt logprobs")
        tail = values[len(values) // 2 :]
        mean = sum(tail) / len(tail)
        if not (mean >= -1.5 and math.isfinite(mean)):
            return self._scoring_off(f"echoed logprobs look misaligned (mean {mean:.1f} on a counting sequence)")
        if not _bare("".join(tokens)).endswith(_bare(probe)):  # generated tokens, not the prompt's
            return self._scoring_off("the echoed tokens are not the prompt (the server ignores echo or max_tokens)")
        self.can_score = True
        self.scoring_reason = "ok"
        return True

    def _scoring_off(self, reason: str) -> bool:
        """Record why scoring is off and warn: a template was configured, so scoring was
        asked for, and the search samples instead."""
        self.can_score = False
        self.scoring_reason = reason
        warnings.warn(f"{self.name}: cannot score options ({reason}); sampled decoding instead",
                      TraversalsWarning, stacklevel=3)
        return False

    async def score(
        self, prompt: str, options: Sequence[str], *, prefix: str = "", transient: bool = False
    ) -> Scores:
        if not self.can_score:
            raise ScoringNotSupported(
                f"{self.name} cannot score options ({self.scoring_reason}); "
                "use generation-based selection"
            )
        options = list(options)
        text = self._render(prompt, prefix)
        results = await gather(
            *(self._echo_logprobs(text + o) for o in options if o)
        )
        it = iter(results)
        logprobs: list[float] = []
        counts: list[int] = []
        total_tokens = 0
        cached: list[int | None] = []
        for opt in options:
            if not opt:
                logprobs.append(0.0)
                counts.append(1)
                continue
            lps, offsets, tokens, n_prompt, reused = next(it)
            total_tokens += n_prompt
            cached.append(reused)
            logprob, count = self._tail_logprob(lps, offsets, tokens, len(opt))
            logprobs.append(logprob)
            # the tokens summed, so answers compare per token (Scores.per_token), not per ~4
            # characters; at least 1, as a count of tokens is (CheckedLLM)
            counts.append(max(count, 1))
        # no completion tokens: the one token each echo request must generate (max_tokens 1)
        # is not counted, as a score generates nothing (the local backend's count too)
        return Scores(logprobs=logprobs, prompt_tokens=total_tokens,
                      computed_prompt_tokens=_computed(total_tokens, cached) if cached else 0,
                      token_counts=counts)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "OpenAICompatibleLLM":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _without(body: dict[str, Any], params: set[str]) -> dict[str, Any]:
    """``body`` without the refused ``params``: ``max_tokens`` becomes
    ``max_completion_tokens``, the others are left out."""
    out = {k: v for k, v in body.items() if k not in params}
    if "max_tokens" in params and "max_tokens" in body:
        out["max_completion_tokens"] = body["max_tokens"]
    return out


def _refused_param(error: LLMError, body: dict[str, Any]) -> str | None:
    """The request parameter a 400/422 ``error`` says the server does not support, if it is
    one a request can do without (``seed``, ``stop``) or rename (``max_tokens``)."""
    if isinstance(error, LLMUnavailable) or error.status not in _REFUSED:
        return None
    detail = error.detail
    if not _UNSUPPORTED.search(detail):  # e.g. "'max_tokens' ... is too large": the request's own
        return None
    for param in ("seed", "stop", "max_tokens"):
        if param in body and re.search(_QUOTED.format(param), detail):
            if param == "max_tokens" and "max_completion_tokens" not in detail:
                continue
            return param
    return None


def _refuses_probe(error: LLMUnavailable) -> bool:
    """Does a server error (5xx after the retries) refuse the scoring probe's request itself --
    501, or a message about echo, log-probabilities or an unsupported parameter -- rather
    than say the server is down or loading (which stops the run: no answer about scoring)?"""
    text = str(error)
    return error.status == 501 or bool(_REFUSES_ECHO.search(text) or _UNSUPPORTED.search(text))


def _unnamed(error: Exception, name: str) -> str:
    """``error``'s message without a leading ``name: `` (it is said once already)."""
    return str(error).removeprefix(f"{name}: ")


def _bare(text: str) -> str:
    """``text`` without whitespace or the space marks some servers leave in token strings."""
    return re.sub(r"[\s\u2581\u0120]", "", text)


def _read_logprobs(lp: Any) -> tuple[list[float | None], list[int], list[str]]:
    """(log-probabilities, character offsets, token strings) of a completion's
    ``logprobs``: the completions format (``tokens``, ``token_logprobs``, ``text_offset``;
    offsets counted from the token strings when missing) or the chat format
    (``content: [{"token", "logprob"}, ...]``). Raises KeyError/TypeError/ValueError for
    anything else."""
    if isinstance(lp, dict) and isinstance(lp.get("content"), list) and "tokens" not in lp:
        tokens = [str(t["token"]) for t in lp["content"]]
        values = [t.get("logprob") for t in lp["content"]]
        raw_offsets = None
    else:
        tokens = [str(t) for t in lp["tokens"]]
        values = list(lp["token_logprobs"])
        raw_offsets = lp.get("text_offset")
    logprobs = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in values]
    if raw_offsets is None:
        raw_offsets, pos = [], 0
        for tok in tokens:
            raw_offsets.append(pos)
            pos += len(tok)
    offsets = [int(x) for x in raw_offsets]
    if not (len(tokens) == len(logprobs) == len(offsets)):
        raise ValueError("tokens, logprobs and offsets differ in length")
    return logprobs, offsets, tokens


def _cached_tokens(usage: dict[str, Any]) -> int | None:
    """The prompt tokens a reply's ``usage`` says the server took from its prefix cache
    (``prompt_tokens_details.cached_tokens``), or None if it does not say."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0 else None


def _computed(prompt_tokens: int, cached: Sequence[int | None]) -> int | None:
    """The prompt tokens computed of requests that sent ``prompt_tokens`` in all, each of
    which took ``cached`` from the server's cache: None (all of them, as far as anyone
    can tell) unless every request said."""
    if not cached or any(c is None for c in cached):
        return None
    return max(prompt_tokens - sum(c for c in cached if c is not None), 0)


def _count(value: object) -> int:
    """A token count from a reply's ``usage``; 0 for anything that is not a count (a
    server's odd usage block costs its figures, not the answer)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
