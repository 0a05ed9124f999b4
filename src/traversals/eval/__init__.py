"""Evaluation: benchmark loaders, metrics, resumable runs and reports.

From Python, the same run ``traversals eval`` makes (docs/library.md, "6. Evaluating")::

    from traversals.eval import load_dataset, run_eval

    dataset = load_dataset("questions", "mine.jsonl")  # or "metaqa-1hop", "../shared/data", ...
    summary = await run_eval(dataset, solver, "runs/mine")

The names are loaded on first use, so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it
_EXPORTS = {
    "load_dataset": "traversals.eval.datasets", "DATASETS": "traversals.eval.datasets",
    "sample_questions": "traversals.eval.datasets", "Dataset": "traversals.eval.datasets.base",
    "Question": "traversals.eval.datasets.base", "Gold": "traversals.eval.datasets.base",
    "run_eval": "traversals.eval.runner", "Summary": "traversals.eval.runfiles",
    "hits_at_1": "traversals.eval.metrics", "em_in": "traversals.eval.metrics", "f1": "traversals.eval.metrics",
}  # fmt: skip

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'traversals.eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
