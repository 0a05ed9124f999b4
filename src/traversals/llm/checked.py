"""A user's LLM, checked at the boundary: what :func:`~traversals.api.build_solver` hands
to the search.

The search trusts what an :class:`~.base.LLM` returns: ``generate`` gives a
:class:`~.base.Generation` of strings, ``score`` a :class:`~.base.Scores` with one number
per option. A backend written by a user can break that quietly — a ``score`` that returns
fewer numbers than options made beam search answer with the wrong entity, a ``generate``
that returns ``None`` failed deep inside the search as ``AttributeError: 'NoneType' object
has no attribute 'prompt_tokens'``. :class:`CheckedLLM` checks each reply and turns every
failure into an :class:`~traversals.errors.LLMError` that names the LLM and the method (the
original exception kept as its cause); the library's own errors pass through unchanged.
Every other attribute (``can_score``, ``scoring_reason``, a backend's own methods) is the
wrapped LLM's, read when asked, so a probe that changes ``can_score`` is seen.
"""

from __future__ import annotations

import inspect
import math
import numbers
from typing import Any, Sequence

from ..errors import LLMError, TraversalsError
from ..plugin_call import call_plugin
from ..validate import scrub_surrogates
from .base import LLM, Generation, Scores


class CheckedLLM:
    """``llm`` with its replies checked (module docstring). Wrapping twice is a no-op
    (:func:`checked`)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm

    def __getattr__(self, name: str) -> Any:  # name, can_score, a backend's own attributes
        return getattr(self.llm, name)

    def _where(self, method: str) -> str:
        return f"LLM {getattr(self.llm, 'name', type(self.llm).__name__)!r}: {method}()"

    async def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        """``llm.method(*args, **kw)`` awaited, its failures turned into ``LLMError``s
        (:func:`~traversals.plugin_call.call_plugin`). Unlike a KG call
        (:meth:`~traversals.search.kgset.KGSet._call`), no time budget is set here."""
        return await call_plugin(
            self.llm, method, args, kw,
            missing=lambda: LLMError(f"{self._where(method)} is missing: an LLM needs async generate, score "
                                     "and close"),
            not_async=lambda _: LLMError(f"{self._where(method)} is not async: define it with `async def`"),
            failed=lambda exc: LLMError(f"{self._where(method)} raised {type(exc).__name__}: {exc}"))

    async def generate(self, prompt: str, **kw: Any) -> Generation:
        got = await self._call("generate", prompt, **kw)
        if not isinstance(got, Generation):
            raise LLMError(f"{self._where('generate')} returned {type(got).__name__}, not a Generation")
        if not isinstance(got.texts, list) or not all(isinstance(t, str) for t in got.texts):
            raise LLMError(f"{self._where('generate')} returned texts {_short(got.texts)}: a list of strings belongs there")
        if not got.texts:  # read as an empty reply, it would end a search with "Cannot find answer" in silence
            raise LLMError(f"{self._where('generate')} returned no text for n={kw.get('n', 1)}: one text per sample "
                           "belongs there (an empty reply is [''])")
        _check_counts(got, self._where("generate"), ("prompt_tokens", "completion_tokens", "computed_prompt_tokens"))
        reasons = got.finish_reasons
        if reasons is not None and (not isinstance(reasons, list) or len(reasons) != len(got.texts)
                                    or not all(r is None or isinstance(r, str) for r in reasons)):
            raise LLMError(f"{self._where('generate')} returned finish_reasons {_short(reasons)}: one per text "
                           "(\"length\" when cut at max_tokens, \"stop\", or None when not known), or None")
        got.texts = [scrub_surrogates(t) for t in got.texts]  # a lone surrogate: U+FFFD (nothing can write it)
        return got

    async def score(self, prompt: str, options: Sequence[str], **kw: Any) -> Scores:
        got = await self._call("score", prompt, options, **kw)
        if not isinstance(got, Scores):
            raise LLMError(f"{self._where('score')} returned {type(got).__name__}, not Scores")
        lps = got.logprobs
        if isinstance(lps, (tuple, range)) or hasattr(lps, "tolist"):  # a tuple, a NumPy array: a model's logits
            lps = list(lps)
        if not isinstance(lps, list):
            raise LLMError(f"{self._where('score')} returned logprobs as {type(lps).__name__}: a list of one "
                           f"log-probability per option ({len(options)}) belongs there")
        if len(lps) != len(options):
            raise LLMError(f"{self._where('score')} returned {len(lps)} log-probabilities for {len(options)} options")
        if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in lps):  # numpy's too
            raise LLMError(f"{self._where('score')} returned {_short(lps)}: log-probabilities are numbers "
                           "(-inf for impossible)")
        if any(x == math.inf for x in lps):  # no probability is over 1: the options' softmax would be NaN
            raise LLMError(f"{self._where('score')} returned {_short(lps)}: +inf is no log-probability "
                           "(-inf for impossible, 0 for certain)")
        got.logprobs = [-math.inf if math.isnan(x) else float(x) for x in lps]  # NaN: impossible
        _check_counts(got, self._where("score"), ("prompt_tokens", "computed_prompt_tokens"))
        counts = got.token_counts
        if counts is not None and (not isinstance(counts, list) or len(counts) != len(options)
                                   or not all(_whole(c) and c > 0 for c in counts)):
            raise LLMError(f"{self._where('score')} returned token_counts {_short(counts)}: one count of 1 or more per "
                           f"option ({len(options)}), or None")
        return got

    async def close(self) -> None:
        close = getattr(self.llm, "close", None)
        if close is None:
            return
        try:
            pending = close()
            if inspect.isawaitable(pending):
                await pending
        except TraversalsError:
            raise
        except Exception as exc:
            raise LLMError(f"{self._where('close')} raised {type(exc).__name__}: {exc}") from exc


def _whole(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_counts(reply: Generation | Scores, where: str, fields: Sequence[str]) -> None:
    """A reply's token counts: whole numbers of 0 or more. None (a server that sent no
    usage) counts 0, except ``computed_prompt_tokens``, where None means "all of them";
    anything else is an :class:`LLMError` (it failed later, adding None to the usage)."""
    for name in fields:
        value = getattr(reply, name)
        if value is None:
            if name != "computed_prompt_tokens":
                setattr(reply, name, 0)
            continue
        if not _whole(value) or value < 0:
            raise LLMError(f"{where} returned {name}={value!r}: a count of tokens, 0 or more (or None)")
        setattr(reply, name, int(value))


def checked(llm: LLM) -> LLM:
    """``llm`` wrapped in :class:`CheckedLLM`, unless it already is."""
    return llm if isinstance(llm, CheckedLLM) else CheckedLLM(llm)  # type: ignore[return-value]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
