"""`train-value questions --data mine.jsonl`: a question of the user's own file without gold
answers is not trained on (it rewards every state 0, teaching that every path is wrong), and
the run says how many it left out; a file with no gold at all is refused in one line."""

from __future__ import annotations

import json

from traversals.search.rwt import ValueModel

KB = "".join(f"P{i}|born_in|City {i % 3}\nP{i}|works_for|Firm {i % 4}\n" for i in range(12))


def _files(tmp_path, rows: list[dict]) -> list[str]:
    (tmp_path / "kb.txt").write_text(KB)
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ["train-value", "questions", "--data", str(tmp_path / "mine.jsonl"), "--kg", str(tmp_path / "kb.txt"),
            "--skip", "0", "--rounds", "1", "--heldout", "0", "--out", str(tmp_path / "m.json")]


def test_questions_without_gold_answers_are_not_trained_on(tmp_path, capsys):
    from traversals.cli import main

    rows = [{"question": f"where was [P{i}] born", "answers": [f"City {i % 3}"]} for i in range(6)]
    rows += [{"question": f"where was [P{i}] born", "answers": []} for i in range(6, 12)]
    assert main(_files(tmp_path, rows)) == 0
    assert "6 training and 0 held-out questions (0 not linked; 6 without gold answers, not trained on)" \
        in capsys.readouterr().err
    assert ValueModel.load(tmp_path / "m.json").meta["train_questions"] == 6


def test_a_file_without_any_gold_answer_is_refused_in_one_line(tmp_path, capsys):
    from traversals.cli import main

    rows = [{"question": f"where was [P{i}] born"} for i in range(3)]
    assert main(_files(tmp_path, rows)) == 2
    err = capsys.readouterr().err
    assert "none of the 3 training questions has gold answers" in err and "--synthetic N" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "m.json").exists()
