"""Resume refuses every recorded search setting that changes the answers, including the
SearchConfig fields no flag sets (their defaults can change between versions of the code)."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput
from traversals.eval.runner import run_eval

from .test_runner import FakeSolver, make_dataset


@pytest.mark.parametrize(
    "key, old, new",
    [("max_edges", 50, 20), ("max_relations", 100, 40), ("diverse_temperature", 1.0, 0.7),
     ("evaluate_intermediate", None, True)],
)
async def test_a_resume_with_another_search_setting_is_refused(tmp_path, key, old, new):
    ds = make_dataset(3)
    base = {"strategy": "tree", "llm": "x"}
    await run_eval(ds, FakeSolver(), tmp_path, limit=2, progress=False, config={**base, key: old})
    with pytest.raises(BadInput, match=f"{key}: {old!r} \\(recorded\\) vs {new!r}"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config={**base, key: new})
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config={**base, key: old})
    assert s.n == 3
