"""Training that learns nothing says so: questions whose entities have no relation had written
an empty model (every state 0.5) and "use it with --value-model"; gold answers that no state
matches (not the KG's labels) train a model of wrong paths alone, and a note says why."""

from __future__ import annotations

import json

KG = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:a rdfs:label "Ann" . ex:b rdfs:label "Bob" . ex:c rdfs:label "Cid" ; ex:knows ex:d . ex:d rdfs:label "Dan" .
"""


def _run(tmp_path, rows: list[dict]) -> tuple[int, list[str]]:
    (tmp_path / "kg.ttl").write_text(KG)
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ["train-value", "questions", "--data", str(tmp_path / "mine.jsonl"), "--kg", str(tmp_path / "kg.ttl"),
            "--skip", "0", "--rounds", "1", "--out", str(tmp_path / "m.json")]


def test_questions_whose_entities_have_no_relation_write_no_model(tmp_path, capsys):
    from traversals.cli import main

    args = _run(tmp_path, [{"question": "who does [Ann] know", "answers": ["Bob"]},
                           {"question": "who does [Bob] know", "answers": ["Ann"]}])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no training example: the trees of the 2 questions reached no entity" in err
    assert not (tmp_path / "m.json").exists()


def test_gold_answers_no_state_matches_are_noted(tmp_path, capsys):
    from traversals.cli import main

    assert main(_run(tmp_path, [{"question": "who does [Cid] know", "answers": ["Daniel"]}])) == 0
    assert "note: no tree reached a state whose entities match the gold answers within 3 hops" \
        in capsys.readouterr().err
    assert main(_run(tmp_path, [{"question": "who does [Cid] know", "answers": ["Dan"]}])) == 0
    assert "note: no tree reached" not in capsys.readouterr().err
