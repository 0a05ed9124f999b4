"""traversals: answer questions by searching knowledge graphs with an LLM.

The names most scripts need are importable from here; each is loaded on first use, so
``import traversals`` stays cheap (the CLI starts without pyoxigraph or llama.cpp)::

    import asyncio, traversals

    kg = traversals.open_kg("kb.txt")
    llm = traversals.open_llm("local")
    solver = traversals.build_solver("tree", llm, [kg], traversals.SearchConfig())
    answer = asyncio.run(solver.ask("what films did [Charles Bail] direct"))
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the front names' types for a type checker (py.typed); at run time __getattr__ loads them
    # (``X as X``: an explicit re-export, which mypy --strict needs, as __all__ is built at run time)
    from .api import (
        STRATEGIES as STRATEGIES, SearchConfig as SearchConfig, build_solver as build_solver, close_all as close_all
    )
    from .errors import (
        BadInput as BadInput, KGAuthError as KGAuthError, KGError as KGError, KGQueryError as KGQueryError,
        KGTimeout as KGTimeout, KGUnavailable as KGUnavailable, LLMError as LLMError,
        LLMTimeout as LLMTimeout, LLMUnavailable as LLMUnavailable, PromptTooLong as PromptTooLong, TraversalsError as TraversalsError,
        TraversalsWarning as TraversalsWarning
    )
    from .kg.base import (
        Edge as Edge, Edges as Edges, Entity as Entity, KnowledgeGraph as KnowledgeGraph, Relation as Relation,
        Relations as Relations
    )
    from .kg.factory import open_kg as open_kg, open_kgs as open_kgs
    from .llm.base import LLM as LLM
    from .llm.factory import open_llm as open_llm
    from .llm.scripted import ScriptedLLM as ScriptedLLM
    from .search.result import Answer as Answer, Solver as Solver
    from .search.templates import PromptSet as PromptSet, load_prompts as load_prompts

try:
    __version__ = version("traversals")
except PackageNotFoundError:  # pragma: no cover - run from a source tree without install
    __version__ = "0+unknown"

#: public name -> the module that defines it
_EXPORTS = {
    "build_solver": "traversals.api", "SearchConfig": "traversals.api", "STRATEGIES": "traversals.api",
    "close_all": "traversals.api",
    "PromptSet": "traversals.search.templates", "load_prompts": "traversals.search.templates",
    "Answer": "traversals.search.result", "Solver": "traversals.search.result",
    "open_kg": "traversals.kg.factory", "open_kgs": "traversals.kg.factory",
    "KnowledgeGraph": "traversals.kg.base", "Entity": "traversals.kg.base", "Relation": "traversals.kg.base",
    "Edge": "traversals.kg.base", "Edges": "traversals.kg.base", "Relations": "traversals.kg.base",
    "LLM": "traversals.llm.base", "open_llm": "traversals.llm.factory", "ScriptedLLM": "traversals.llm.scripted",
    "TraversalsError": "traversals.errors", "BadInput": "traversals.errors", "KGError": "traversals.errors",
    "KGUnavailable": "traversals.errors", "KGTimeout": "traversals.errors", "KGQueryError": "traversals.errors",
    "KGAuthError": "traversals.errors",
    "LLMError": "traversals.errors", "LLMUnavailable": "traversals.errors", "PromptTooLong": "traversals.errors",
    "LLMTimeout": "traversals.errors",
    "TraversalsWarning": "traversals.errors",
}  # fmt: skip

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'traversals' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
