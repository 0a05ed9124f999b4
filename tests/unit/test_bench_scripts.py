"""The bench scripts answer bad input as `traversals` does: one line on stderr naming the
script, exit code 2, no traceback (bench/clean_exit.py); what they return otherwise is
their exit code."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from traversals.errors import BadInput

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("argv, says", [
    (["rwt_without_llm.py", "nosuch", "--data", "{tmp}", "--model", "{tmp}/m.json"], "unknown dataset 'nosuch'"),
    (["value_judge.py", "--data", "{tmp}/nowhere"], "--data {tmp}/nowhere: no such file or directory"),
    (["where_time_goes.py", "--llm", "local:{tmp}/no.gguf", "--data", "{tmp}/nowhere"], "no such file or directory"),
])
def test_a_bench_script_given_bad_input_says_so_in_one_line(tmp_path, argv, says):
    script, *args = (a.format(tmp=tmp_path) for a in argv)
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{script}: error: ") and says.format(tmp=tmp_path) in line


def test_run_script_awaits_a_coroutine_and_passes_its_exit_code_on(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("clean_exit", BENCH / "clean_exit.py")
    clean_exit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(clean_exit)
    monkeypatch.setattr(sys, "argv", ["some_bench.py"])

    async def fine(code: int) -> int:
        await asyncio.sleep(0)
        return code

    async def refuses() -> None:
        raise BadInput("--data x: no such file or directory")

    assert clean_exit.run_script(fine, 0) == 0 and clean_exit.run_script(fine, 3) == 3
    assert clean_exit.run_script(lambda: None) == 0
    assert clean_exit.run_script(refuses) == 2
    assert capsys.readouterr().err == "some_bench.py: error: --data x: no such file or directory\n"
    with pytest.raises(ZeroDivisionError):  # a bug keeps its traceback
        clean_exit.run_script(lambda: 1 / 0)
