"""The pure helpers of bench/kg_backends.py (the benchmark itself prints figures and is
run by hand), and its one-line refusal of a missing data folder."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def kb():
    spec = importlib.util.spec_from_file_location("kg_backends", BENCH / "kg_backends.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kg_backends"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("kg_backends", None)


def test_percentile_interpolates_between_ranks(kb):
    assert kb.percentile([3.0], 95) == 3.0
    assert kb.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert kb.percentile(list(map(float, range(101))), 95) == pytest.approx(95.0)
    with pytest.raises(ValueError):
        kb.percentile([], 50)


def test_degrees_count_distinct_edges_both_ways_in_either_delimiter(kb, tmp_path):
    f = tmp_path / "kb.txt"
    f.write_text("a|r|Hub\nb|r|Hub\nb|r|Hub\na|s|b\nbad line\n", encoding="utf-8")
    counts = kb.degrees(f)
    assert counts[("Hub", "r", True)] == 2  # the duplicate line counts once, as in a store
    assert counts[("a", "r", False)] == 1 and counts[("b", "s", True)] == 1
    assert kb.biggest_hubs(counts, 1) == [("Hub", "r", True, 2)]
    assert kb.split_line("x\ty\tz\n") == ("x", "y", "z")


def test_the_synthetic_kg_has_one_hub_per_size(kb, tmp_path):
    f = tmp_path / "hubs.txt"
    kb.write_synthetic(f, (3, 5))
    counts = kb.degrees(f)
    assert counts[("Hub 3", "tagged", True)] == 3 and counts[("Hub 5", "tagged", True)] == 5
    assert counts[("item2", "tagged", False)] == 2 and counts[("item4", "tagged", False)] == 1


def test_markdown_table_and_typo(kb):
    assert kb.markdown_table(["a", "b"], [[1, "x"]]) == "| a | b |\n|---|---|\n| 1 | x |"
    assert kb.typo("Charles Bail") == "Cahrles Bail" and kb.typo("abc") == "abc"


def test_missing_data_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, str(BENCH / "kg_backends.py"), "--skip-remote", "--data", str(tmp_path / "nowhere")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("kg_backends.py: error: ") and "nowhere/metaqa/kb.txt: no such file" in line
