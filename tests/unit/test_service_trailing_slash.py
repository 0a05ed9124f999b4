"""The service answers ``POST /v1/ask/`` (trailing slash) as ``/v1/ask``, and its GET
endpoints likewise, instead of Starlette's bare 307 redirect (which curl without ``-L``,
and many HTTP clients posting JSON, show as an empty reply)."""

from __future__ import annotations

from typing import Any

import httpx

from traversals.api import SearchConfig
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.result import Answer
from traversals.service import create_app


class _Solver:
    name = "cot"

    async def ask(self, question: str, *, topic_entities: list[str] | None = None) -> Answer:
        return Answer(question, "Ann Lee", value=None, supporting_edges=[], usage=Usage(), seconds=0.1,
                      decoding="sampled", strategy="cot")


def _app() -> Any:
    return create_app(ScriptedLLM([]), [], defaults=SearchConfig(), default_strategy="cot",
                      solver_factory=lambda *a, **kw: _Solver())


async def test_the_service_answers_a_trailing_slash_as_without_it() -> None:
    app = _app()
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                     follow_redirects=False) as c:
            plain = await c.post("/v1/ask", json={"question": "who directed Alpha?"})
            slash = await c.post("/v1/ask/", json={"question": "who directed Alpha?"})
            bad = await c.post("/v1/ask/", json={"question": ""})
            health, info = await c.get("/health/"), await c.get("/v1/info/")
            wrong_method = await c.get("/v1/ask/")
            unknown = await c.post("/v1/answer/", json={})
    assert plain.status_code == slash.status_code == 200
    assert slash.json() == {**plain.json(), "seconds": slash.json()["seconds"]}
    assert slash.json()["answer"] == "Ann Lee"
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadInput"  # the same validation
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert info.status_code == 200 and info.json()["default_strategy"] == "cot"
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["type"] == "MethodNotAllowed"
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "NotFound"


def test_no_path_is_left_to_a_redirect() -> None:
    """Every route's path is served with and without its trailing slash."""
    paths = {str(getattr(r, "path")) for r in _app().routes}
    assert "/v1/ask/" in paths
    assert all(p.rstrip("/") in paths and p.rstrip("/") + "/" in paths for p in paths)
