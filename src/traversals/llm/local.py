"""An in-process llama.cpp model (``llama-cpp-python``) behind the :class:`LLM` protocol.

- **Prompt format**: the prompt is one user message rendered with the model's own chat
  template (GGUF ``tokenizer.chat_template``, rendered with jinja2 like llama-cpp-python
  does), followed by ``prefix`` as the start of the assistant turn. Generation is a raw
  completion of that text, so the reply is really pre-filled.
- **KV cache reuse**: llama.cpp keeps the evaluated tokens of the previous call; a new
  call re-evaluates only the tokens after the longest common prefix. Consecutive prompts
  that share a long head (same instructions, a growing subgraph) are therefore cheap;
  ``computed_prompt_tokens`` reports how many prompt tokens were really evaluated.
- **Scoring**: :meth:`LlamaCppLLM.score` evaluates the shared prompt once (or takes it
  from the KV cache), then all options together in one batch, each option in its own
  sequence on top of the shared prompt (up to ``n_seq - 1`` options per batch), with
  logits at every position that predicts an option token, and sums the log-softmax of
  the option tokens. Token prefixes that options share are decoded once for all of them
  (the eleven ratings "0.0" … "1.0" cost four tokens, not 33), and an option's last token
  is not decoded at all (it predicts nothing). No
  ``logits_all`` buffer (n_ctx x vocab floats) is needed. Values agree with scoring the
  options one at a time up to float noise (~0.1-0.3 nats on a 1.5B Q4 model). A
  ``transient`` prompt (calibration's neutral prompt) is scored in a spare sequence beside
  the cached context, which stays for the next call.
- **Loading** is lazy: the constructor only checks that the file exists; the model is
  loaded (a few seconds) by the first call, or by ``await llm.load()``.
- **Concurrency**: llama.cpp contexts are not thread-safe. Calls queue on an
  :class:`asyncio.Lock` (one per event loop) and run in :func:`asyncio.to_thread` under a
  :class:`threading.Lock`, so the event loop stays free and the model sees one call at a
  time.
- **Cancellation** (Ctrl-C): the thread cannot be stopped from outside, so a cancelled
  call stops itself at its next step -- a prompt (of a generation or a score) or the
  options of a score at their next batch of ``n_batch`` tokens, a generation at its next
  token -- rather than running to the end before the program can exit. A generation's
  uncached prompt is evaluated here batch by batch, in the very batches llama-cpp-python
  would make, up to its last batch, which ``create_completion`` evaluates itself (so the
  logits, and the replies, are the ones it would give alone); Ctrl-C waits for at most
  one batch.

Written against ``llama-cpp-python==0.3.36`` (it uses ``Llama.eval``/``n_tokens``/
``input_ids`` and the context's batch decode, which are stable but semi-internal).
"""

from __future__ import annotations

import asyncio
import math
import operator
import os
import random
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from traversals.aio import LoopLock
from traversals.errors import BadInput, LLMError, LLMUnavailable, PromptTooLong, TraversalsError
from traversals.llm.base import Generation, Scores, finish_reason
from traversals.llm.chat import apply_stop

if TYPE_CHECKING:
    from llama_cpp.llama_types import ChatCompletionRequestMessage

__all__ = ["DEFAULT_N_CTX", "LlamaCppLLM"]

T = TypeVar("T")

#: tokens of prompt + completion a context holds unless ``n_ctx`` (``--n-ctx``) says otherwise
DEFAULT_N_CTX = 8192
#: sampling knobs used when temperature > 0 (llama.cpp's usual defaults, no repeat penalty)
DEFAULT_SAMPLING = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _prefix_tree(branches: Sequence[Sequence[int]], head: int) -> tuple[list[int], list[int], list[list[int]], list[list[int]]]:
    """One batch for option branches that share token prefixes (the ratings "0.0" … "0.9"
    share "0."): each distinct prefix is decoded once, as a token that belongs to every
    branch sequence (1, 2, …) having it. A branch's last token predicts nothing, so it is
    left out. Returns the batch's tokens, their positions, their sequence ids, and for
    each branch the batch rows of its tokens in order (row r holds the logits after the
    branch's token r)."""
    tokens: list[int] = []
    positions: list[int] = []
    members: list[list[int]] = []
    rows_at: list[list[int]] = []
    node_of: dict[tuple[int, int], int] = {}
    for sid, branch in enumerate(branches, start=1):
        rows: list[int] = []
        parent = -1
        for k, tok in enumerate(branch[:-1]):
            at = node_of.get((parent, tok))
            if at is None:
                at = node_of[parent, tok] = len(tokens)
                tokens.append(tok)
                positions.append(head + k)
                members.append([])
            members[at].append(sid)
            rows.append(at)
            parent = at
        rows_at.append(rows)
    return tokens, positions, members, rows_at


class _Cancelled(TraversalsError):
    """The awaiting task was cancelled (Ctrl-C): a prompt or scoring batch in the worker
    thread stops at the next batch boundary instead of running to the end. The KV cache
    stays consistent (it holds every batch evaluated), and the result is thrown away."""


class LlamaCppLLM:
    """A GGUF model run in-process by llama.cpp.

    ``n_ctx`` bounds prompt + completion tokens (8192 by default: the search prompts are
    1-3k tokens; the KV cache of the 1.5B model costs ~28 KB/token). ``n_threads``
    defaults to ``os.cpu_count()``. ``seed`` makes sampling reproducible: with
    ``temperature > 0`` sample ``i`` of a call uses ``seed + i`` (the call's ``seed`` if
    given, else one drawn from a generator seeded with the constructor's ``seed``).
    ``n_seq`` is the number of KV sequences of the context (options scored per batch + 1;
    1 scores options one at a time).
    """

    can_score = True

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_seq: int = 32,
        seed: int = 0,
        verbose: bool = False,
        system_prompt: str | None = None,
        chat_template: str | None = None,
        sampling: dict[str, float] | None = None,
        name: str | None = None,
    ) -> None:
        self.model_path = Path(model_path).expanduser()
        if not self.model_path.is_file():
            raise LLMUnavailable(f"model file not found: {self.model_path}")
        try:
            ctx = -1 if isinstance(n_ctx, bool) else operator.index(n_ctx)  # an int, a NumPy integer
        except TypeError:
            ctx = -1
        if ctx < 1:  # llama.cpp reads 0 as the model's whole trained context (32k tokens for Qwen2.5)
            raise BadInput(f"n_ctx (--n-ctx) is a whole number of tokens of at least 1, got {n_ctx!r}")
        self.n_ctx = ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.n_batch = int(n_batch)
        self.n_seq = max(1, int(n_seq))
        #: sequences the context really has (1 when multi-sequence scoring is off)
        self._n_seq_ctx = 1
        self.seed = int(seed)
        self.verbose = verbose
        self.system_prompt = system_prompt
        self._template_override = chat_template
        self.sampling = {**DEFAULT_SAMPLING, **(sampling or {})}
        self.name = name or f"local:{self.model_path.name}"
        self._rng = random.Random(self.seed)
        self._llm: Any = None
        self._formatter: Callable[[str], str] | None = None
        self._bos: str = ""
        self._add_bos = False
        self._thread_lock = threading.Lock()
        #: set when the call running under the lock was cancelled (see :meth:`_run`)
        self._cancelled = threading.Event()
        #: one call at a time from each event loop (the thread lock orders calls across loops)
        self._alock = LoopLock()
        self._closed = False
        #: seconds spent loading the model (None until loaded)
        self.load_seconds: float | None = None

    # ------------------------------------------------------------------ plumbing

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise LLMError(f"{self.name} is closed")
        async with self._alock:
            cancelled = threading.Event()
            try:
                return await asyncio.to_thread(self._locked, fn, *args, cancelled=cancelled)
            except asyncio.CancelledError:
                # the thread cannot be stopped from here: the call it runs stops at its
                # next batch of prompt tokens or its next generated token (Ctrl-C in `eval`
                # exits at once instead of after the whole prompt and reply), and what it
                # would return is thrown away anyway
                cancelled.set()
                raise

    def _locked(self, fn: Callable[..., T], *args: Any, cancelled: threading.Event | None = None) -> T:
        with self._thread_lock:
            if self._closed:
                raise LLMError(f"{self.name} is closed")
            self._cancelled = cancelled or threading.Event()
            self._ensure_loaded()
            try:
                return fn(*args)
            except TraversalsError:
                raise
            except Exception as e:  # llama.cpp raises RuntimeError/ValueError/...
                # the KV cache may not match input_ids any more: start afresh next time
                self._llm.reset()
                raise LLMError(f"{self.name}: {type(e).__name__}: {e}") from e

    def _ensure_loaded(self) -> None:
        if self._llm is not None:
            return
        try:
            import llama_cpp
        except ImportError as e:
            raise LLMUnavailable(
                "the local model needs llama-cpp-python: pip install 'traversals[local]' "
                f"({e})"
            ) from e
        if not self.model_path.is_file():
            raise LLMUnavailable(f"model file not found: {self.model_path}")
        t0 = time.perf_counter()
        try:
            llm = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_batch=self.n_batch,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=self.verbose,
            )
        except Exception as e:
            raise LLMUnavailable(
                f"cannot load model {self.model_path} (corrupt or not a GGUF file?): {e}. A model traversals "
                "fetched: `traversals model status` checks the cache and `traversals model fetch NAME` replaces "
                "a damaged file"
            ) from e
        try:
            self._formatter = self._make_formatter(llm)
        except Exception as e:  # jinja2 cannot compile the GGUF's template (llama.cpp-only syntax ...)
            llm.close()
            raise LLMUnavailable(
                f"cannot use model {self.model_path}: its chat template (GGUF tokenizer.chat_template) does not "
                f"compile with jinja2: {type(e).__name__}: {e}; pass chat_template= (a Jinja2 chat template) "
                "to open_llm or LlamaCppLLM, or use another GGUF of the model"
            ) from e
        self.load_seconds = time.perf_counter() - t0
        self._llm = llm
        if self.n_seq > 1:
            self._enable_multi_seq()

    def _enable_multi_seq(self) -> None:
        """Recreate the llama context with ``n_seq`` sequences sharing one (unified) KV
        buffer, so :meth:`score` can evaluate all options in one batch, each in its own
        sequence on top of the shared prompt. llama-cpp-python only enables this for
        embeddings, so the context is swapped after construction; if that fails, scoring
        falls back to one option at a time."""
        from llama_cpp import _internals as internals

        llm = self._llm
        try:
            params = llm.context_params
            params.n_seq_max = self.n_seq
            params.kv_unified = True
            new = internals.LlamaContext(model=llm._model, params=params, verbose=self.verbose)
        except Exception:  # pragma: no cover - depends on the llama.cpp build
            llm.context_params.n_seq_max = 1
            return
        old = llm._ctx
        llm._ctx = new
        old.close()
        llm._stack.callback(new.close)
        llm.n_tokens = 0
        llm._requires_eval = True
        self._n_seq_ctx = self.n_seq

    def _make_formatter(self, llm: Any) -> Callable[[str], str]:
        """The prompt renderer of the loaded ``llm`` (its BOS handling noted on ``self``)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        bos_id, eos_id = llm.token_bos(), llm.token_eos()
        self._bos = llm._model.token_get_text(bos_id) if bos_id != -1 else ""
        eos = llm._model.token_get_text(eos_id) if eos_id != -1 else ""
        self._add_bos = bool(llm._model.add_bos_token()) and bos_id != -1
        template = self._template_override or llm.metadata.get("tokenizer.chat_template")
        if template:
            fmt = Jinja2ChatFormatter(
                template=template, eos_token=eos, bos_token=self._bos, add_generation_prompt=True
            )

            def render(prompt: str) -> str:
                return fmt(messages=self._messages(prompt)).prompt

        else:  # no template in the file: ChatML (Qwen, SmolLM2 and many others)

            def render(prompt: str) -> str:
                out = "".join(
                    f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
                    for m in self._messages(prompt)
                )
                return out + "<|im_start|>assistant\n"

        return render

    def _messages(self, prompt: str) -> list[ChatCompletionRequestMessage]:
        msgs: list[ChatCompletionRequestMessage] = []
        if self.system_prompt is not None:
            msgs.append({"role": "system", "content": self.system_prompt})
        msgs.append({"role": "user", "content": prompt})
        return msgs

    # ------------------------------------------------------------------ tokens

    def format_prompt(self, prompt: str, prefix: str = "") -> str:
        """The exact text the model sees (needs the model loaded for its template)."""
        if self._closed:
            raise LLMError(f"{self.name} is closed")
        self._ensure_loaded()
        assert self._formatter is not None
        return self._formatter(prompt) + prefix

    def _tokenize(self, text: str) -> list[int]:
        add_bos = self._add_bos and not (self._bos and text.startswith(self._bos))
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def _reused(self, tokens: Sequence[int]) -> int:
        """How many of ``tokens`` llama-cpp-python's ``generate`` will take from the KV
        cache (mirrors its prefix-match logic)."""
        llm = self._llm
        if llm.n_tokens == 0:
            return 0
        lcp = _lcp(llm._input_ids.tolist(), tokens)
        if lcp == len(tokens):
            if llm.n_tokens == len(tokens) and not llm._requires_eval:
                return len(tokens)
            return max(lcp - 1, 0)
        return lcp

    def _check_ctx(self, n: int, what: str, room: int = 0) -> None:
        """Raise :class:`PromptTooLong` unless ``n`` prompt tokens and ``room`` tokens of
        reply fit the context. A generation must have its whole ``max_tokens`` of room:
        llama-cpp-python cuts a reply's ``max_tokens`` to what is left of the context in
        silence, so a rating "0.9" came back as "0." (read 0.0), an answer as half a name."""
        if n >= self.n_ctx or n + room > self.n_ctx:
            told = f"{what} has {n} tokens"
            if room:
                told += f" and its reply room (max_tokens) {room}, {n + room} together,"
            raise PromptTooLong(
                f"{told} but the context window of {self.name} is "
                f"{self.n_ctx} (raise n_ctx, --n-ctx on the command line, or shorten the prompt)"
            )

    # ------------------------------------------------------------------ API

    async def load(self) -> None:
        """Load the model now (otherwise the first call does)."""
        await self._run(lambda: None)

    async def count_tokens(self, prompt: str, prefix: str = "") -> int:
        """Tokens of the formatted prompt + prefix."""
        return await self._run(lambda: len(self._tokenize(self.format_prompt(prompt, prefix))))

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
        return await self._run(
            self._generate_sync, prompt, prefix, n, temperature, max_tokens, stop, seed
        )

    def _generate_sync(
        self,
        prompt: str,
        prefix: str,
        n: int,
        temperature: float,
        max_tokens: int,
        stop: Sequence[str] | None,
        seed: int | None,
    ) -> Generation:
        tokens = self._tokenize(self.format_prompt(prompt, prefix))
        self._check_ctx(len(tokens), "the prompt", max(int(max_tokens), 0))
        stops = [s for s in (stop or []) if s]
        greedy = temperature <= 0
        base_seed = seed if seed is not None else self._rng.randrange(2**31)
        texts: list[str] = []
        reasons: list[str | None] = []
        completion = 0
        computed = 0
        from llama_cpp import StoppingCriteriaList

        cancelled = self._cancelled
        halt = StoppingCriteriaList([lambda _ids, _logits: cancelled.is_set()])
        for i in range(1 if greedy else n):
            if cancelled.is_set():
                break
            reused = self._reused(tokens)
            computed += len(tokens) - reused
            self._prefill(tokens, reused)
            out = self._llm.create_completion(
                tokens,
                max_tokens=max_tokens,
                temperature=0.0 if greedy else float(temperature),
                stop=stops,
                seed=(base_seed + i) % 2**31,
                stopping_criteria=halt,
                **self.sampling,
            )
            choice = out["choices"][0]
            texts.append(apply_stop(choice["text"], stops))
            reasons.append(finish_reason(choice.get("finish_reason"), choice["text"], texts[-1]))
            completion += int(out["usage"]["completion_tokens"])
        if greedy and n > 1:
            texts, reasons = texts * n, reasons * n
        return Generation(
            texts=texts,
            prompt_tokens=len(tokens),
            completion_tokens=completion,
            computed_prompt_tokens=computed,
            finish_reasons=reasons,
        )

    async def score(
        self, prompt: str, options: Sequence[str], *, prefix: str = "", transient: bool = False
    ) -> Scores:
        options = list(options)
        if not options:
            return Scores(logprobs=[], prompt_tokens=0, computed_prompt_tokens=0)
        return await self._run(self._score_sync, prompt, options, prefix, transient)

    def _score_sync(self, prompt: str, options: list[str], prefix: str, transient: bool = False) -> Scores:
        import numpy as np

        llm = self._llm
        text = self.format_prompt(prompt, prefix)
        base = self._tokenize(text)
        seqs = [self._tokenize(text + o) for o in options]
        for s in seqs:
            self._check_ctx(len(s), "prompt + option")
        # Option o's own tokens start where its tokenisation leaves the prompt's (a
        # boundary merge moves that point back by a token or so).
        starts = [max(_lcp(s, base), 1) for s in seqs]
        # Everything before `head` is shared by all options and evaluated once; each
        # option then evaluates seq[head:] with logits at every position.
        head = max(min(starts) - 1, 0)

        reuse = min(_lcp(llm._input_ids.tolist(), base[:head]), head)
        n_vocab = llm.n_vocab()
        branches = [(i, seq) for i, (seq, st) in enumerate(zip(seqs, starts)) if st < len(seq)]
        rows_of: dict[int, Any] = {}
        computed = None
        if transient and reuse < llm.n_tokens and self._fork_fits(head, reuse, branches):
            try:
                computed = self._score_beside(base, head, reuse, branches, n_vocab, rows_of)
            except RuntimeError:  # no KV slot for the fork: score the usual way
                rows_of.clear()
        if computed is None:
            llm.n_tokens = reuse  # eval() drops the KV cells from here on
            computed = 0
            if head > reuse:
                self._eval(base[reuse:head])
                computed += head - reuse
            if self._n_seq_ctx > 1:
                computed += self._decode_branches(branches, head, n_vocab, rows_of)
            else:
                for i, seq in branches:
                    rows_of[i] = self._decode_all_logits(seq[head:], head, n_vocab)
                    computed += len(seq) - head
        logprobs: list[float] = []
        for i, (seq, start) in enumerate(zip(seqs, starts)):
            if i not in rows_of:  # empty option
                logprobs.append(0.0)
                continue
            rows = rows_of[i]
            total = 0.0
            for t in range(start, len(seq)):
                row = rows[t - head - 1]
                m = float(row.max())
                lse = m + math.log(float(np.exp(row - m, dtype=np.float64).sum()))
                total += float(row[seq[t]]) - lse
            logprobs.append(total)
        llm._requires_eval = True
        # distinct token positions of the prompt tree: shared head + each option branch
        n_tokens = head + sum(len(s) - head for s in seqs)
        return Scores(
            logprobs=logprobs,
            prompt_tokens=n_tokens,
            computed_prompt_tokens=computed,
            token_counts=[max(len(seq) - start, 0) for seq, start in zip(seqs, starts)],
        )

    # A transient prompt is scored beside the cached context, in the last sequence, so
    # that sequence 0 (what the next call continues) keeps its KV cells.
    @property
    def _fork_seq(self) -> int:
        return self._n_seq_ctx - 1

    def _fork_cap(self, head: int, reuse: int) -> int:
        """Branch tokens per batch when scoring beside the cached context: the unified KV
        cache holds sequence 0, the fork's own head and the batch."""
        return min(self.n_batch, self.n_ctx - self._llm.n_tokens - (head - reuse) - 1)

    def _fork_fits(self, head: int, reuse: int, branches: list[tuple[int, list[int]]]) -> bool:
        if self._n_seq_ctx < 3:  # needs sequence 0, the fork and at least one branch
            return False
        cap = self._fork_cap(head, reuse)
        return cap > 0 and all(len(seq) - head <= cap for _, seq in branches)

    def _score_beside(
        self, base: list[int], head: int, reuse: int, branches: list[tuple[int, list[int]]], n_vocab: int, rows_of: dict
    ) -> int:
        """Score a transient prompt without evicting the cached context: the fork sequence
        shares the cached tokens ``[0, reuse)`` with sequence 0 (in a unified KV cache a
        copy only tags the cells), holds the prompt's own head ``[reuse, head)``, and the
        option branches fork from it. Sequence 0 and ``input_ids`` are left as they were."""
        ctx = self._llm._ctx
        fork = self._fork_seq
        ctx.kv_cache_seq_rm(fork, -1, -1)
        try:
            if reuse > 0:
                ctx.kv_cache_seq_cp(0, fork, 0, reuse)
            self._decode_into(fork, base[reuse:head], reuse)
            return (head - reuse) + self._decode_branches(
                branches, head, n_vocab, rows_of, source=fork, cap=self._fork_cap(head, reuse)
            )
        finally:
            ctx.kv_cache_seq_rm(fork, -1, -1)

    def _stop_if_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise _Cancelled(f"{self.name}: cancelled")

    def _eval(self, tokens: Sequence[int]) -> None:
        """``Llama.eval(tokens)`` one ``n_batch`` batch at a time -- the batches it makes
        itself, so the logits are the same --, stopping between batches once the call is
        cancelled: Ctrl-C during a long prompt waits for one batch, not the whole prompt."""
        for i in range(0, len(tokens), self.n_batch):
            self._stop_if_cancelled()
            self._llm.eval(tokens[i : i + self.n_batch])

    def _prefill(self, tokens: Sequence[int], reused: int) -> None:
        """Evaluate the prompt ``tokens`` a generation does not take from the KV cache (all
        after the first ``reused``, see :meth:`_reused`) up to the start of their last
        ``n_batch`` batch, with the cancellable :meth:`_eval`: ``create_completion`` then
        finds that much cached and evaluates only the last batch before its first token,
        where nothing can stop it. The batches are the ones ``Llama.generate`` makes itself
        (``n_batch`` tokens from the reused prefix on), so the logits are the same: the
        prompt is just split between two callers. The cache is truncated to the reused
        prefix as ``generate`` does (``Llama.eval`` drops the KV cells from ``n_tokens``
        on). A recurrent or hybrid model's memory cannot always be cut at a position
        (``generate`` then starts afresh): it is left to ``create_completion`` whole."""
        llm = self._llm
        if getattr(llm, "_is_recurrent", False) or getattr(llm, "_is_hybrid", False):
            return
        # Llama's own n_batch is min(n_ctx, n_batch); it differs from ours only when the
        # prompt (< n_ctx) is shorter than one of our batches, and then nothing is done here
        cut = reused + (len(tokens) - reused - 1) // self.n_batch * self.n_batch
        if cut <= reused:
            return
        llm.n_tokens = reused
        self._eval(tokens[reused:cut])

    def _decode_into(self, seq_id: int, toks: Sequence[int], n_past: int) -> None:
        """Evaluate ``toks`` at positions ``n_past...`` in sequence ``seq_id`` only."""
        llm = self._llm
        b = llm._batch.batch
        for i in range(0, len(toks), self.n_batch):
            self._stop_if_cancelled()
            chunk = toks[i : i + self.n_batch]
            for j, tok in enumerate(chunk):
                b.token[j] = tok
                b.pos[j] = n_past + i + j
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = seq_id
                b.logits[j] = j == len(chunk) - 1
            b.n_tokens = len(chunk)
            llm._ctx.decode(llm._batch)

    def _decode_branches(
        self,
        branches: list[tuple[int, list[int]]],
        head: int,
        n_vocab: int,
        rows_of: dict,
        *,
        source: int = 0,
        cap: int | None = None,
    ) -> int:
        """Decode every option branch ``seq[head:]`` in its own sequence (1, 2, ...) on
        top of the shared head held by sequence ``source`` (shared prefixes once:
        :func:`_prefix_tree`), in as few batches as fit;
        store each branch's logits rows in ``rows_of``. With ``source`` 0 the KV cache is
        left holding the head only; a fork source is left untouched (and ``cap`` must
        then fit every branch)."""
        import numpy as np
        import llama_cpp

        llm = self._llm
        ctx = llm._ctx
        n_branch_seqs = self._n_seq_ctx - 1
        if source == 0:
            ctx.kv_cache_seq_rm(0, head, -1)
            llm.n_tokens = head
        else:
            n_branch_seqs -= 1  # the fork sequence is the last one
        computed = 0
        pending = list(branches)
        # one batch holds at most n_batch tokens, and the unified KV cache must hold the
        # head plus every branch of the batch
        cap = max(1, min(self.n_batch, self.n_ctx - head - 1)) if cap is None else cap
        while pending:
            self._stop_if_cancelled()
            group: list[tuple[int, list[int]]] = []
            size = 0
            while pending and len(group) < n_branch_seqs:
                n = len(pending[0][1]) - head
                if n > cap:  # too long to share a batch: decode it alone (source 0 only)
                    i, seq = pending.pop(0)
                    rows_of[i] = self._decode_all_logits(seq[head:], head, n_vocab)
                    ctx.kv_cache_seq_rm(0, head, -1)
                    llm.n_tokens = head
                    computed += n
                    continue
                if group and size + n > cap:
                    break
                group.append(pending.pop(0))
                size += n
            if not group:
                continue
            for sid in range(1, len(group) + 1):
                ctx.kv_cache_seq_rm(sid, -1, -1)
                if head > 0:
                    ctx.kv_cache_seq_cp(source, sid, 0, head)
            tokens, positions, members, rows_at = _prefix_tree([seq[head:] for _, seq in group], head)
            b = llm._batch.batch
            for j, (tok, pos, sids) in enumerate(zip(tokens, positions, members)):
                b.token[j] = tok
                b.pos[j] = pos
                b.n_seq_id[j] = len(sids)
                for q, sid in enumerate(sids):
                    b.seq_id[j][q] = sid
                b.logits[j] = True
            b.n_tokens = len(tokens)
            try:
                ctx.decode(llm._batch)
                ptr = llama_cpp.llama_get_logits(ctx.ctx)
                flat = np.ctypeslib.as_array(ptr, shape=(len(tokens), n_vocab))
                for (i, _), at in zip(group, rows_at):
                    rows_of[i] = flat[at]  # fancy indexing: a copy
            finally:
                for sid in range(1, len(group) + 1):
                    ctx.kv_cache_seq_rm(sid, -1, -1)
            computed += len(tokens)
        return computed

    def _decode_all_logits(self, toks: Sequence[int], n_past: int, n_vocab: int) -> Any:
        """Decode ``toks`` at positions ``n_past...`` (dropping any KV cells from
        ``n_past`` on) and return their logits, one row per token."""
        import numpy as np
        import llama_cpp

        llm = self._llm
        llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
        llm.n_tokens = n_past
        out = np.empty((len(toks), n_vocab), dtype=np.float32)
        for i in range(0, len(toks), self.n_batch):
            self._stop_if_cancelled()
            chunk = list(toks[i : i + self.n_batch])
            llm._batch.set_batch(batch=chunk, n_past=llm.n_tokens, logits_all=True)
            llm._ctx.decode(llm._batch)
            ptr = llama_cpp.llama_get_logits(llm._ctx.ctx)
            out[i : i + len(chunk)] = np.ctypeslib.as_array(ptr, shape=(len(chunk), n_vocab))
            llm.input_ids[llm.n_tokens : llm.n_tokens + len(chunk)] = chunk
            llm.n_tokens += len(chunk)
        return out

    async def close(self) -> None:
        if self._closed:
            return

        def _free() -> None:
            with self._thread_lock:
                self._closed = True
                if self._llm is not None:
                    try:
                        self._llm.close()
                    finally:
                        self._llm = None

        await asyncio.to_thread(_free)

    def __repr__(self) -> str:
        state = "loaded" if self._llm is not None else "not loaded"
        return f"LlamaCppLLM({str(self.model_path)!r}, n_ctx={self.n_ctx}, {state})"
