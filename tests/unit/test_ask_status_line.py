"""`traversals ask` on a terminal keeps one status line up to date while the search runs
(a search of minutes on a slow CPU is seen to be working) and erases it before the answer;
piped, or with --verbose, it writes no such line."""

from __future__ import annotations

import io
import sys

import pytest


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_line_counts_nodes_expansions_and_llm_calls_and_is_erased():
    from traversals.search.events import StatusLine

    now = [100.0]
    out = io.StringIO()
    status = StatusLine(out, clock=lambda: now[0])
    status.clear()  # nothing shown yet: nothing written
    assert out.getvalue() == ""
    status({"event": "linked", "question": "q", "entities": []})
    now[0] = 107.4
    status({"event": "node", "id": 0, "usage": {"llm_calls": 2}})
    status({"event": "expand", "node": 0, "expansion": 1, "depth": 0, "value": None})
    status({"event": "node", "id": 1, "usage": {"llm_calls": 1}})
    lines = out.getvalue().split("\r")[1:]
    assert lines[0] == "searching: 0 nodes · 0 expansions · 0 LLM calls · 0 s"
    assert lines[1].rstrip() == "searching: 1 node · 0 expansions · 2 LLM calls · 7 s"
    assert lines[-1] == "searching: 2 nodes · 1 expansion · 3 LLM calls · 7 s"
    # a shorter line than the one before is padded over it
    assert all(len(b) >= len(a.rstrip()) for a, b in zip(lines, lines[1:]))
    width = len(lines[-1])
    status.clear()
    assert out.getvalue().endswith("\r" + " " * width + "\r")
    status.clear()  # once only
    assert out.getvalue().endswith("\r" + " " * width + "\r") and out.getvalue().count(" " * width + "\r") == 1


def _ask(monkeypatch, stderr: io.StringIO, *flags: str) -> tuple[int, str]:
    import traversals.llm.factory as factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    monkeypatch.setattr(factory, "open_llm", lambda *a, **k: ScriptedLLM(["ANSWER: Beatrice Stone"] * 400))
    monkeypatch.setattr(sys, "stderr", stderr)
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    rc = main(["ask", "Who is Bob Dylan's mother?", "--kg", "demo", "--strategy", "chain", *flags])
    return rc, stdout.getvalue()


def test_ask_on_a_terminal_shows_the_status_line_and_erases_it_before_the_answer(monkeypatch):
    err = _Terminal()
    rc, out = _ask(monkeypatch, err)
    assert rc == 0, err.getvalue()
    shown = err.getvalue()
    assert "\rsearching: " in shown and " LLM call" in shown
    status = shown[: shown.rindex("\r") + 1]  # what the status line wrote, up to its erasure
    last = status.split("\r")[-3]
    assert status.endswith("\r" + " " * len(last) + "\r")
    assert "searching" not in out  # stdout is the answer's alone


@pytest.mark.parametrize("flags, terminal", [((), False), (("--verbose",), True), (("--json",), False)])
def test_ask_piped_or_verbose_writes_no_status_line(monkeypatch, flags, terminal):
    err = _Terminal() if terminal else io.StringIO()
    rc, _ = _ask(monkeypatch, err, *flags)
    assert rc == 0, err.getvalue()
    assert "searching:" not in err.getvalue() and "\r" not in err.getvalue()


def test_a_warning_during_the_search_is_shown_on_its_own_line(monkeypatch):
    """The status line is erased before a warning is printed (the next event draws it again)."""
    import warnings

    import traversals.api as api
    from traversals.errors import TraversalsWarning

    real = api.build_solver

    def build(*a, on_event=None, **k):
        solver = real(*a, on_event=on_event, **k)
        ask = solver.ask

        async def ask_and_warn(question):
            on_event({"event": "node", "id": 0, "usage": {"llm_calls": 1}})
            warnings.warn(TraversalsWarning("something to know"))
            return await ask(question)

        solver.ask = ask_and_warn
        return solver

    monkeypatch.setattr(api, "build_solver", build)
    err = _Terminal()
    rc, _ = _ask(monkeypatch, err)
    assert rc == 0, err.getvalue()
    first = "searching: 1 node · 0 expansions · 1 LLM call · "
    shown = err.getvalue()
    assert shown.startswith("\r" + first)
    line = shown[1:].split("\r")[0]
    assert shown[1 + len(line):].startswith("\r" + " " * len(line) + "\rtraversals: warning: something to know\n")
