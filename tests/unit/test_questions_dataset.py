"""``traversals eval questions --data FILE --kg SPEC``: a user's own questions over their own KG."""

from __future__ import annotations

import json

import pytest

from traversals.errors import BadInput
from traversals.eval.datasets import load_dataset


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_questions_with_ids_aliases_topic_entities_and_extra_fields(tmp_path):
    f = write(tmp_path / "mine.jsonl", "\n".join([
        json.dumps({"question": "who directed [Inception]", "answers": ["Christopher Nolan"]}),
        "",
        json.dumps({"id": "q7", "question": " when was it released ", "answers": [["2010", "2010-07-16"]],
                    "topic_entities": ["Inception"], "hops": 1}),
        json.dumps({"id": 9, "question": "what does \"Dune\" mean", "answer": {"answer": "a hill", "aliases": ["dune"]}}),
    ]) + "\n")
    ds = load_dataset("questions", f)
    assert [q.id for q in ds.questions] == ["questions:1", "questions:q7", "questions:9"]
    first, second, third = ds.questions
    assert first.gold_json() == [["Christopher Nolan"]] and first.topic_entities == []
    assert second.text == "when was it released" and second.gold_json() == [["2010", "2010-07-16"]]
    assert second.topic_entities == ["Inception"] and second.meta == {"hops": 1}
    assert third.text == 'what does "Dune" mean' and third.gold_json() == [["a hill", "dune"]]
    assert ds.split == "mine" and ds.kg_specs == [] and ds.files == [str(f.resolve())]


def test_json_csv_and_tsv_files_and_a_folder_with_a_split(tmp_path):
    items = [{"question": "q one", "answers": ["a", "b"]}, {"question": "q two"}]
    assert [q.gold_json() for q in load_dataset("questions", write(tmp_path / "l.json", json.dumps(items))).questions] \
        == [[["a"], ["b"]], []]
    wrapped = write(tmp_path / "w.json", json.dumps({"questions": items}))
    assert len(load_dataset("custom", wrapped)) == 2  # the alias
    csv_file = write(tmp_path / "s.csv", 'id,question,answers,topic_entities\nx1,"who wrote ""It""",Stephen King|King,It\n'
                                         ',no id here,,\n')
    a, b = load_dataset("questions", csv_file).questions
    assert (a.id, a.text, a.gold_json(), a.topic_entities) == ("questions:x1", 'who wrote "It"', [["Stephen King"], ["King"]], ["It"])
    assert (b.id, b.gold_json(), b.topic_entities) == ("questions:2", [], [])
    folder = tmp_path / "set"
    folder.mkdir()
    write(folder / "test.tsv", "what films did [X] direct\tA|B\nwho is [Y]\n")
    ds = load_dataset("questions", folder, split="test")
    assert ds.split == "test" and [q.gold_json() for q in ds.questions] == [[["A"], ["B"]], []]
    assert len(load_dataset("questions", folder, split="test", answerable_only=True)) == 1


@pytest.mark.parametrize("name, text, says", [
    ("a.jsonl", '{"question": "ok"}\n{"question": "broken",\n', "a.jsonl line 2: not JSON"),
    ("b.jsonl", '{"answers": ["x"]}\n', "b.jsonl line 1: no 'question' text"),
    ("c.jsonl", '["who"]\n', "c.jsonl line 1: a question is an object"),
    ("d.jsonl", '{"id": 1, "question": "a"}\n{"id": "1", "question": "b"}\n', "d.jsonl line 2: id '1' again (first at"),
    ("e.jsonl", '{"question": "a", "answers": true}\n', "'answers' must be a list"),
    ("f.jsonl", '{"question": "a", "answers": [{"aliases": ["x"]}]}\n', "an answer is a string, a list of spellings"),
    ("g.jsonl", '{"question": "a", "topic_entities": [1]}\n', "'topic_entities' must be a list of entity names"),
    ("h.json", '{"q": []}', 'a list of questions (or {"questions": [...]}) expected'),
    ("i.csv", "text,answers\nwho,x\n", "the header row needs a 'question' column"),
    ("j.xml", "<q/>", "is not a question file"),
    ("k.jsonl", "\n", "questions: no questions in"),
    ("l.jsonl", '{"question": "a", "answers": [{"answer": "x", "aliases": [["y"]]}]}\n', "an answer is a string"),
    ("m.jsonl", '{"question": "a", "answers": [[{"x": 1}]]}\n', "an answer is a string"),
    ("n.tsv", "who directed [Heat]\tMichael Mann\tdirected_by\n", "n.tsv line 1: 3 tab-separated columns"),
    ("o.jsonl", '{"id": 2, "question": "a"}\n{"question": "b"}\n', "a question without an id is numbered by its place"),
])
def test_a_malformed_file_is_refused_with_where_and_why(tmp_path, name, text, says):
    with pytest.raises(BadInput) as e:
        load_dataset("questions", write(tmp_path / name, text))
    assert says in str(e.value)


def test_a_folder_without_the_split_names_what_it_looked_for(tmp_path):
    with pytest.raises(BadInput, match=r"no question file in .* \(looked for dev\.jsonl, dev\.json"):
        load_dataset("questions", tmp_path)


def test_eval_of_your_own_questions_asks_for_the_kg_and_notes_questions_without_answers(tmp_path, monkeypatch, capsys):
    import traversals.llm.factory as llm_factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    f = write(tmp_path / "mine.jsonl", '{"question": "who is [A]", "answers": ["B"]}\n{"question": "what is [C]"}\n')
    base = ["eval", "questions", "--data", str(f), "--no-progress"]
    assert main([*base, "--strategy", "chain", "--out", str(tmp_path / "chain")]) == 2
    err = capsys.readouterr().err
    assert "questions: no KG file found next to the data; pass --kg SPEC, the KG the questions are asked over" in err
    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(["ANSWER: B"] * 4))
    assert main([*base, "--strategy", "cot", "--out", str(tmp_path / "cot")]) == 0
    assert "note: 1 of the 2 questions have no gold answer" in capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "cot" / "results.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["hits@1"]) for r in rows) == [("questions:1", 1.0), ("questions:2", 0.0)]
    assert main([*base, "--strategy", "cot", "--answerable-only", "--out", str(tmp_path / "cot1")]) == 0
    assert "note:" not in capsys.readouterr().err


def test_train_value_on_too_few_of_your_own_questions_says_to_lower_skip_before_opening_the_kg(tmp_path, capsys):
    from traversals.cli import main

    f = write(tmp_path / "mine.jsonl", '{"question": "who is [A]", "answers": ["B"]}\n')
    assert main(["train-value", "questions", "--data", str(f), "--kg", str(tmp_path / "absent.nt"),
                 "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "questions: --skip 100 passes over all its 1 questions" in err and "lower --skip" in err


def test_a_json_number_is_an_answer(tmp_path):
    """"How many ..." and "which year ..." answers are natural JSON numbers: they were
    refused as not a string."""
    from traversals.eval.datasets import load_dataset
    from traversals.eval.metrics import em_in

    f = tmp_path / "mine.jsonl"
    f.write_text('{"question": "how many films did [X] direct", "answers": [3, ["1976", 1976.0]]}\n'
                 '{"question": "when was [Y] born", "answer": 1976}\n'
                 '{"question": "is [Z] a film", "answers": [true]}\n')
    import pytest

    from traversals.errors import BadInput
    with pytest.raises(BadInput, match="line 3: an answer is a string"):  # a boolean is no number
        load_dataset("questions", f)
    f.write_text("\n".join(f.read_text().splitlines()[:2]) + "\n")
    q1, q2 = load_dataset("questions", f).questions
    assert q1.gold_json() == [["3"], ["1976", "1976.0"]] and q2.gold_json() == [["1976"]]
    assert em_in("He directed 3 films", q1.gold_json()) == 0.5 and em_in("in 1976", q2.gold_json()) == 1.0


def test_a_csv_answer_column_is_read_as_answers(tmp_path):
    """JSON reads `answer` as `answers`; a CSV headed `question,answer` had every question
    without gold, so the whole run scored 0 with only a note."""
    from traversals.eval.datasets import load_dataset

    f = tmp_path / "mine.csv"
    f.write_text('question,answer\nwho directed [Inception],Christopher Nolan\n"who wrote [X]","Ann|Bo, Jr."\n')
    q1, q2 = load_dataset("questions", f).questions
    assert q1.gold_json() == [["Christopher Nolan"]] and q2.gold_json() == [["Ann"], ["Bo, Jr."]]


def test_a_tsv_header_row_is_not_a_question(tmp_path):
    """A spreadsheet's TSV export starts with its header: it was evaluated as the question
    "question" with the gold answer "answers"."""
    from traversals.eval.datasets import load_dataset

    f = tmp_path / "mine.tsv"
    f.write_text("Question\tanswers\nwho directed [Inception]\tChristopher Nolan\n")
    (q,) = load_dataset("questions", f).questions
    assert q.id == "questions:1" and q.text == "who directed [Inception]"


def test_one_alias_written_as_a_string_is_one_alias_not_one_a_letter(tmp_path):
    f = write(tmp_path / "a.jsonl", json.dumps({"question": "capital of France?",
                                                  "answers": [{"answer": "Paris", "aliases": "Paname"}]}) + "\n")
    [q] = load_dataset("questions", f).questions
    assert q.gold_json() == [["Paris", "Paname"]]
    from traversals.eval.metrics import hits_at_1
    assert hits_at_1("a town", q.gold_json()) == 0.0 and hits_at_1("Paname", q.gold_json()) == 1.0
