"""SIGTERM (``timeout``, ``docker stop``) stops a command as Ctrl-C does: an evaluation
says how to resume, with every answered question kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"

SCRIPT = """
import asyncio, os, sys
import traversals.llm.factory as factory
from traversals.cli import main
from traversals.llm.scripted import ScriptedLLM

class Slow(ScriptedLLM):
    async def generate(self, prompt, **kw):
        await asyncio.sleep(float(os.environ['DELAY']))
        return await super().generate(prompt, **kw)

factory.open_llm = lambda spec="local", **kw: Slow(["ANSWER: Drama"] * 1000)
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not (SHARED / "metaqa").is_dir(), reason="needs ../shared/data/metaqa")
@pytest.mark.parametrize("delay, concurrency, background", [
    ("0.3", "1", False), ("0.01", "3", False),  # idle; busy writing answers
    ("0.01", "3", True),  # started in the background by a script: SIGINT ignored, no Ctrl-C handler
])
def test_sigterm_stops_an_eval_with_its_resume_hint_and_its_answers_kept(tmp_path, delay, concurrency, background):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "eval", "metaqa-1hop", "--data", str(SHARED / "metaqa"), "--limit", "40",
         "--strategy", "cot", "--out", str(out), "--no-progress", "--concurrency", concurrency],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "DELAY": delay},
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if background else None)
    results = out / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (results.exists() and results.read_text().count("\n") >= 2):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "--resume" in err and "Traceback" not in err and "never retrieved" not in err
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert 2 <= len(rows) < 40 and all(r["answer"] == "Drama" for r in rows)
