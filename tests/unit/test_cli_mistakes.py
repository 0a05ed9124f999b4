"""A newcomer's mistakes on the command line, each one line and exit 2 (they were
tracebacks, or a lost trace, or a misleading message): outputs that cannot be written, an
unquoted question, a port in use, ``--version``, Ctrl-C while the command starts."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from traversals.cli import main


def one_line(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error: ") and err.count("\n") == 1, err
    return err


def test_outputs_that_cannot_be_written_are_one_line(tmp_path: Path, capsys) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "kb.txt").write_text("Alpha|directed_by|Ann Lee\n")
    assert "--export" in one_line(["prompts", "--export", str(afile)], capsys)
    assert "cannot write there" in one_line(["prompts", "--export", str(afile / "sub")], capsys)
    assert "cannot write the output" in one_line(["kg", "convert", str(tmp_path / "kb.txt"), str(afile / "kb.nt")],
                                                 capsys)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"question": "q", "answer": "a", "nodes": [{"id": 0, "parent": None}]}))
    assert "cannot make the folder" in one_line(["view", str(trace), "--out", f"{afile}/"], capsys)


def test_a_run_directory_that_cannot_be_written_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    """eval --resume into a read-only run directory: mkdir(exist_ok) passed, then a traceback."""
    import traversals.eval.runner as runner
    from traversals.llm.scripted import ScriptedLLM
    import traversals.llm.factory

    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda *a, **k: ScriptedLLM(["ANSWER: x"] * 3))
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"question": "q?", "answers": ["x"]}) + "\n")
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(runner.os, "access", lambda path, mode: False)  # root may write anywhere: as a user
    err = one_line(["eval", "questions", "--data", str(data), "--strategy", "cot", "--no-progress",
                    "--out", str(tmp_path / "run"), "--resume"], capsys)
    assert "cannot write in the run directory" in err


def test_the_trace_is_written_when_the_reader_of_stdout_is_gone(tmp_path: Path, monkeypatch, capsys) -> None:
    """`ask ... --trace t.json | true`: the answer's print raised BrokenPipeError before the
    trace was written, and the search it recorded was lost."""
    from traversals.llm.scripted import ScriptedLLM
    import traversals.llm.factory

    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda *a, **k: ScriptedLLM(["ANSWER: Bob"] * 2))

    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

        def fileno(self) -> int:
            return os.open(os.devnull, os.O_WRONLY)

    monkeypatch.setattr(sys, "stdout", Gone())
    trace = tmp_path / "t.json"
    assert main(["ask", "who directed [X]", "--strategy", "cot", "--trace", str(trace)]) == 141
    assert json.loads(trace.read_text())["answer"] == "Bob"


@pytest.mark.parametrize("argv, says", [
    (["ask", "what", "films", "did", "Charles", "Bail", "direct"],
     'put the question in quotes, as one argument: traversals ask "what films did Charles Bail direct"'),
    (["kg", "search", "Charles", "Bail", "--kg", "demo"],
     'put the text in quotes, as one argument: traversals kg search "Charles Bail"'),
])
def test_an_unquoted_question_is_told_to_be_quoted(argv: list[str], says: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and says in capsys.readouterr().err


def test_a_quoted_question_with_a_stray_word_gets_argparses_own_message(capsys) -> None:
    """`ask "who directed [X]" chain` (a forgotten --strategy) was told to quote the question."""
    with pytest.raises(SystemExit):
        main(["ask", "who directed [Bob Dylan]", "chain"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: chain" in err and "in quotes" not in err


def test_version(capsys) -> None:
    import traversals

    for flag in ("--version", "-V"):
        with pytest.raises(SystemExit) as stop:
            main([flag])
        assert stop.value.code == 0 and capsys.readouterr().out == f"traversals {traversals.__version__}\n"


def test_a_port_in_use_is_said_before_anything_loads(monkeypatch, capsys) -> None:
    import traversals.kg.factory

    monkeypatch.setattr(traversals.kg.factory, "open_kgs", lambda *a, **k: pytest.fail("a KG was opened"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = one_line(["serve", "--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1", "--port", str(port)],
                       capsys)
    assert f"--port {port}: cannot listen there" in err and "pass --port N" in err


def test_ctrl_c_while_the_command_starts_is_one_line(monkeypatch, capsys) -> None:
    import traversals.entry as entry

    class Interrupted:
        def find_spec(self, name, path=None, target=None):
            if name == "traversals.cli":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "traversals.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    assert entry.main() == 130
    assert capsys.readouterr().err == "traversals: interrupted\n"


def test_the_command_to_go_on_after_errors_in_a_row_answers_them_again(tmp_path: Path, monkeypatch, capsys) -> None:
    """The message said "resume with --retry-errors" and the command it printed had only
    --resume: pasted, it answered none of the failed questions and exited 0."""
    import traversals.llm.factory
    from traversals.errors import LLMError
    from traversals.llm.scripted import ScriptedLLM

    def fails(prompt, prefix, n, temperature):
        raise LLMError("HTTP 400: bad request")

    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda *a, **k: ScriptedLLM(fails))
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?", "answers": ["x"]}) + "\n" for i in range(4)))
    argv = ["eval", "questions", "--data", str(data), "--strategy", "cot", "--no-progress", "--out", str(tmp_path / "r"),
            "--max-consecutive-errors", "2"]
    monkeypatch.setattr(sys, "argv", ["traversals", *argv])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "2 questions in a row failed" in err and err.rstrip().endswith("--retry-errors --resume")
