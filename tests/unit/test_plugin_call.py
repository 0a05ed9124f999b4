"""One way to call a user's plugin (traversals.plugin_call.call_plugin), shared by a KG's
calls (KGSet._call) and an LLM's (CheckedLLM._call): each caller's own messages and error
types, pinned here exactly, and what the helper does for both."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from traversals.errors import BadInput, KGError, KGTimeout, KGUnavailable, LLMError, TraversalsError
from traversals.llm.base import Generation
from traversals.llm.checked import CheckedLLM
from traversals.plugin_call import call_plugin
from traversals.search.kgset import KGSet


class Boom(TraversalsError):
    pass


def errors() -> dict[str, Any]:
    return {
        "missing": lambda: Boom("missing"),
        "not_async": lambda got: Boom(f"not async: {got!r}"),
        "failed": lambda exc: Boom(f"failed: {type(exc).__name__}: {exc}"),
    }


class Plugin:
    name = "mine"

    async def echo(self, *args: Any, **kwargs: Any) -> Any:
        return args, kwargs

    def sync(self) -> list[int]:
        return [1]

    async def raises(self, exc: BaseException) -> None:
        raise exc

    def raises_at_once(self) -> None:
        raise KeyError("k")

    async def hangs(self) -> None:
        await asyncio.sleep(3600)


# ----------------------------------------------------------------------------- the helper


async def test_the_call_is_awaited_with_its_arguments_whatever_their_names():
    kwargs = {"timeout": 1, "missing": 2, "failed": 3, "method": 4, "plugin": 5}
    got = await call_plugin(Plugin(), "echo", ("a", "b"), kwargs, **errors())
    assert got == (("a", "b"), kwargs)
    assert await call_plugin(Plugin(), "echo", **errors()) == ((), {})


async def test_a_missing_or_sync_method_is_the_callers_error_as_it_made_it():
    with pytest.raises(Boom, match="^missing$") as caught:
        await call_plugin(Plugin(), "nope", **errors())
    assert caught.value.__cause__ is None
    with pytest.raises(Boom, match=r"^not async: \[1\]$") as caught:
        await call_plugin(Plugin(), "sync", **errors())
    assert caught.value.__cause__ is None


@pytest.mark.parametrize("method", ["raises", "raises_at_once"])
async def test_any_other_exception_becomes_the_callers_error_with_it_as_the_cause(method):
    exc = KeyError("k")
    with pytest.raises(Boom, match=r"^failed: KeyError: 'k'$") as caught:
        await call_plugin(Plugin(), method, (exc,) if method == "raises" else (), **errors())
    assert isinstance(caught.value.__cause__, KeyError)


async def test_the_librarys_own_errors_and_a_cancellation_pass_through():
    mine = KGUnavailable("down")
    with pytest.raises(KGUnavailable) as caught:
        await call_plugin(Plugin(), "raises", (mine,), **errors())
    assert caught.value is mine
    with pytest.raises(asyncio.CancelledError):
        await call_plugin(Plugin(), "raises", (asyncio.CancelledError(),), **errors())


async def test_a_timeout_is_given_to_failed_as_a_timeout_error():
    from traversals.plugin_call import DeadlineExceeded

    with pytest.raises(Boom, match=r"^failed: DeadlineExceeded: took longer than 0.01 s$") as caught:
        await call_plugin(Plugin(), "hangs", timeout=0.01, **errors())
    assert isinstance(caught.value.__cause__, DeadlineExceeded) and isinstance(caught.value.__cause__, TimeoutError)


# ------------------------------------------------------------- the KG's messages, exactly


class UserKG:
    name = "movies"

    def __init__(self, **methods: Any) -> None:
        for k, v in methods.items():
            setattr(self, k, v)


async def kg_error(kg: Any, timeout: float | None = None) -> TraversalsError:
    with pytest.raises(TraversalsError) as caught:
        await KGSet([kg], timeout=timeout)._call(kg, "get_edges", [], None, limit=5)
    return caught.value


async def test_a_kgs_failures_keep_their_types_and_messages():
    async def hang(*a: Any, **k: Any) -> None:
        await asyncio.sleep(3600)

    async def refuse(*a: Any, **k: Any) -> None:
        raise ConnectionRefusedError("refused")

    async def own_timeout(*a: Any, **k: Any) -> None:
        raise TimeoutError

    cases = [
        (UserKG(), BadInput, "knowledge graph 'movies': get_edges() is missing: a KnowledgeGraph has async search, "
                             "get_relations, get_edges and close"),
        (UserKG(get_edges=lambda *a, **k: None), KGError,
         "knowledge graph 'movies': get_edges() is not async: it returned None instead of a coroutine "
         "(define it with `async def`)"),
        (UserKG(get_edges=refuse), KGUnavailable,
         "knowledge graph 'movies': get_edges() raised ConnectionRefusedError: refused"),
        (UserKG(get_edges=own_timeout), KGTimeout, "knowledge graph 'movies': get_edges() raised TimeoutError"),
    ]
    for kg, kind, message in cases:
        got = await kg_error(kg)
        assert type(got) is kind and str(got) == message
    got = await kg_error(UserKG(get_edges=hang), timeout=0.01)
    assert type(got) is KGTimeout and str(got) == "knowledge graph 'movies': get_edges() took longer than 0.01 s"
    # with a budget, the backend's own TimeoutError at once is its own, with or without a message
    # (it read as the budget's: "took longer than 5 s" after a millisecond) ...
    got = await kg_error(UserKG(get_edges=own_timeout), timeout=5)
    assert type(got) is KGTimeout and str(got) == "knowledge graph 'movies': get_edges() raised TimeoutError"

    async def said_timeout(*a: Any, **k: Any) -> None:
        raise TimeoutError("socket read")

    # ... one with a message is the backend's own
    got = await kg_error(UserKG(get_edges=said_timeout), timeout=5)
    assert type(got) is KGTimeout and str(got) == "knowledge graph 'movies': get_edges() raised TimeoutError: socket read"


# ------------------------------------------------------------ the LLM's messages, exactly


class UserLLM:
    name = "mine"


async def llm_error(llm: Any) -> TraversalsError:
    with pytest.raises(TraversalsError) as caught:
        await CheckedLLM(llm).generate("p")
    return caught.value


async def test_an_llms_failures_keep_their_types_and_messages():
    async def slow_timeout(prompt: str, **kw: Any) -> None:
        raise TimeoutError("read timed out")

    sync, hangs_up = UserLLM(), UserLLM()
    sync.generate = lambda prompt, **kw: Generation(["x"])  # type: ignore[attr-defined]
    hangs_up.generate = slow_timeout  # type: ignore[attr-defined]
    cases = [
        (UserLLM(), "LLM 'mine': generate() is missing: an LLM needs async generate, score and close"),
        (sync, "LLM 'mine': generate() is not async: define it with `async def`"),
        (hangs_up, "LLM 'mine': generate() raised TimeoutError: read timed out"),  # no KGTimeout-like sorting
    ]
    for llm, message in cases:
        got = await llm_error(llm)
        assert type(got) is LLMError and str(got) == message
    got = await llm_error(UserLLM.__new__(type("Anonymous", (), {})))  # no name: its class's
    assert str(got) == "LLM 'Anonymous': generate() is missing: an LLM needs async generate, score and close"
