"""`traversals train-value`'s inputs and what it keeps: a phrasings file of the wrong shape,
an --out that is not a model file, too few questions to train on, an interruption (a
scripted LLM and tiny triple files; the real LLM's run is in tests/integration/test_train_value.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.synthetic import PHRASINGS_FORMAT, read_phrasings


def _file(tmp_path, relations) -> object:
    path = tmp_path / "m.json.phrasings.json"
    path.write_text(json.dumps({"format": PHRASINGS_FORMAT, "llm": "scripted", "relations": relations}))
    return path


@pytest.mark.parametrize(
    "relations, says",
    [
        ([1], "'relations' is list, not an object"),
        ({"knows": [1, 2]}, "knows: list, not an object"),
        ({"knows": {"questions": "Who knows {}?"}}, "knows: 'questions' is not a list of texts"),
        ({"knows": {"phrases": [3]}}, "knows: 'phrases' is not a list of texts"),
        ({"knows": {"questions": ["Who knows?"]}}, "knows: 'Who knows?' has no '{}'"),
        ({"knows": {"checked": {"Who knows {}?": "high"}}}, "knows: 'checked' is not an object of numbers"),
        ({"knows": {"synonyms": "pal"}}, "knows: 'synonyms' is not a list of texts"),
        ({"knows": {"bogus": 1}}, "knows: unknown field 'bogus'"),
    ],
)
def test_a_phrasings_file_of_the_wrong_shape_is_one_line(tmp_path, relations, says):
    """A hand-edited or damaged file: a list of relations had been a traceback, and a question
    given as a string had been read letter by letter (the question "}")."""
    path = _file(tmp_path, relations)
    with pytest.raises(BadInput, match=f"{re.escape(str(path))} is not a phrasings file .*{re.escape(says)}.*move it away"):
        read_phrasings(path, "scripted")


def test_a_phrasings_file_of_the_right_shape_is_read(tmp_path):
    path = _file(tmp_path, {"knows": {"questions": ["Who knows {}?"], "phrases": ["the friends of {}"],
                                      "checked": {"Who knows {}?": 1}, "synonyms": None},
                            "~knows": {}})
    got = read_phrasings(path, "scripted")
    assert got["knows"].questions == ["Who knows {}?"] and got["knows"].checked == {"Who knows {}?": 1.0}
    assert got["~knows"].questions == [] and got["~knows"].synonyms is None


FILMS = """Heat|directed_by|Michael Mann
Collateral|directed_by|Michael Mann
Alien|directed_by|Ridley Scott
Gladiator|directed_by|Ridley Scott
Heat|release_year|1995
Collateral|release_year|2004
Alien|release_year|1979
Gladiator|release_year|2000
"""


def _reply(prompt, prefix, n, temperature):  # one phrasing per relation and direction, named after it
    if prefix.startswith("\nRelation: "):  # the other words a question may use for it
        return " other words"
    if prefix.startswith("Question: "):  # a paraphrase
        return " " + prefix.split("\n")[0][len("Question: "):].replace("What", "Which")
    r = prompt.rsplit("Relation: ", 1)[1].split(" (")[0]
    return (f" What is the {r} of {{}}?\nPhrase: the {r} of {{}}\n"
            f"Reverse question: What has {r} {{}}?\nReverse phrase: the things with {r} {{}}")


def _llm(name: str = "scripted"):
    from traversals.llm.scripted import ScriptedLLM

    return ScriptedLLM(_reply, score=lambda prompt, options, prefix: [0.0] * len(options), name=name)


async def _make(tmp_path, kb_name: str, llm, stem: str = "m.json"):
    from traversals.eval.synthetic import SyntheticConfig, SyntheticQuestions
    from traversals.kg.factory import open_kgs
    from traversals.search.kgset import KGSet

    kb = tmp_path / kb_name
    kb.write_text(FILMS)
    kgs = KGSet(open_kgs([str(kb)]))
    try:
        maker = SyntheticQuestions(kgs, llm, SyntheticConfig(questions=6, variants=1, paraphrases=0))
        made = await maker.run(tmp_path / f"{stem}.phrasings.json", tmp_path / f"{stem}.questions.jsonl")
    finally:
        await kgs.close()
    return maker, made


async def test_a_rerun_says_which_phrasings_it_read_back_and_which_kg_they_were_written_for(tmp_path):
    llm = _llm()
    first, made = await _make(tmp_path, "films.txt", llm)
    assert made and first.phrased == 2 and first.reused == 0 and first.written_for is None
    written = json.loads((tmp_path / "m.json.phrasings.json").read_text())
    assert written["kg"] == ["films"]  # the KG the relations were phrased over is recorded
    asked = len(llm.generate_calls)
    again, _ = await _make(tmp_path, "films.txt", llm)
    assert (again.phrased, again.reused, again.written_for) == (0, 2, None) and len(llm.generate_calls) == asked
    # another KG with the same relation keys: the phrasings are reused, and that is said
    other, _ = await _make(tmp_path, "movies.txt", llm)
    assert (other.phrased, other.reused, other.written_for) == (0, 2, ["films"])


async def test_a_phrasings_file_that_cannot_be_used_is_refused_before_the_walks(tmp_path, monkeypatch):
    from traversals.eval.synthetic import SyntheticQuestions

    await _make(tmp_path, "films.txt", _llm())

    async def walks(self, progress=None):
        raise AssertionError("walked before reading the phrasings file")

    monkeypatch.setattr(SyntheticQuestions, "walks", walks)
    with pytest.raises(BadInput, match="holds phrasings written by scripted, not by local:other"):
        await _make(tmp_path, "films.txt", _llm("local:other"))
    (tmp_path / "m.json.phrasings.json").write_text("{")
    with pytest.raises(BadInput, match="is not a phrasings file"):
        await _make(tmp_path, "films.txt", _llm())


def test_the_cli_says_how_many_phrasings_it_read_back(tmp_path, capsys, monkeypatch):
    import traversals.eval.training as training
    from traversals.cli import main

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    (tmp_path / "films.txt").write_text(FILMS)
    args = ["train-value", "--synthetic", "6", "--kg", str(tmp_path / "films.txt"), "--rounds", "1",
            "--out", str(tmp_path / "m.json")]
    assert main(args) == 0
    assert "0 relations read from it, 2 relations phrased now)" in capsys.readouterr().err
    (tmp_path / "movies.txt").write_text(FILMS)
    assert main([*args[:4], str(tmp_path / "movies.txt"), *args[5:]]) == 0
    err = capsys.readouterr().err
    assert "2 relations read from it, 0 relations phrased now)" in err
    assert "m.json.phrasings.json was written for the KG films: the phrasings of its relations" in err


@pytest.mark.parametrize("benchmark", [True, False])
def test_an_out_that_is_a_file_of_another_kind_is_not_written_over(tmp_path, capsys, monkeypatch, benchmark):
    """`--out kb.txt` had trained a model and written it over the KG it was trained on."""
    import traversals.eval.training as training
    from traversals.cli import main

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())

    kb = tmp_path / "kb.txt"
    kb.write_text(FILMS)
    phrasings = tmp_path / "m.json.phrasings.json"
    phrasings.write_text(json.dumps({"format": PHRASINGS_FORMAT, "llm": "x", "relations": {}}))
    head = ["metaqa-1hop", "--data", str(tmp_path)] if benchmark else ["--synthetic", "3", "--kg", str(kb)]
    for out in (kb, phrasings):
        before = out.read_text()
        assert main(["train-value", *head, "--out", str(out)]) == 2
        assert f"--out {out} exists and is not a value model" in capsys.readouterr().err
        assert out.read_text() == before
    # a name ending with a slash is a folder's
    assert main(["train-value", *head, "--out", str(tmp_path / "models") + "/"]) == 2
    assert "names a folder; name the model file" in capsys.readouterr().err
    assert not (tmp_path / "models").exists()


def test_an_out_that_is_a_value_model_or_empty_is_trained_again(tmp_path, capsys, monkeypatch):
    import traversals.eval.training as training
    from traversals.cli import main
    from traversals.search.rwt import ValueModel

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    (tmp_path / "films.txt").write_text(FILMS)
    ValueModel({"stop|bias": 1.0}).save(tmp_path / "old.json")
    (tmp_path / "empty.json").write_text("")
    for name in ("old.json", "empty.json"):
        assert main(["train-value", "--synthetic", "6", "--kg", str(tmp_path / "films.txt"), "--rounds", "1",
                     "--out", str(tmp_path / name)]) == 0, capsys.readouterr().err
        assert len(ValueModel.load(tmp_path / name).weights) > 1


def test_a_heldout_share_keeps_at_least_one_question_to_train_on(tmp_path, capsys, monkeypatch):
    """--heldout 0.75 of 2 questions had held out both, trained on none and written an empty
    model ("use it with --value-model")."""
    import traversals.eval.training as training
    from traversals.cli import main
    from traversals.search.rwt import ValueModel

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    (tmp_path / "films.txt").write_text(FILMS)
    assert main(["train-value", "--synthetic", "2", "--kg", str(tmp_path / "films.txt"), "--rounds", "1",
                 "--heldout", "0.75", "--out", str(tmp_path / "m.json")]) == 0
    assert "1 training and 1 held-out questions" in capsys.readouterr().err
    assert ValueModel.load(tmp_path / "m.json").weights


def _synthetic_run(tmp_path, monkeypatch, rounds: int) -> tuple[list[str], Path]:
    """``train-value --synthetic 6`` over FILMS with the scripted LLM: its arguments and --out."""
    import traversals.eval.training as training

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    (tmp_path / "films.txt").write_text(FILMS)
    out = tmp_path / "m.json"
    return ["train-value", "--synthetic", "6", "--kg", str(tmp_path / "films.txt"), "--rounds", str(rounds),
            "--out", str(out)], out


def test_an_interruption_while_phrasing_says_the_phrasings_are_kept_and_a_rerun_reads_them(tmp_path, capsys,
                                                                                           monkeypatch):
    from traversals.cli import main
    from traversals.eval.synthetic import SyntheticQuestions

    args, out = _synthetic_run(tmp_path, monkeypatch, rounds=1)
    phrase = SyntheticQuestions.phrase
    calls = []

    async def interrupted(self, *a, **kw):
        calls.append(1)
        if len(calls) == 2:  # Ctrl-C while the LLM phrases the second relation
            raise KeyboardInterrupt
        return await phrase(self, *a, **kw)

    monkeypatch.setattr(SyntheticQuestions, "phrase", interrupted)
    assert main(args) == 130
    err = capsys.readouterr().err
    assert (f"interrupted while making the synthetic questions: the phrasings of 1 relation are kept in "
            f"{out}.phrasings.json (1 phrased in this run), and a rerun reads them back; no model was written") in err
    assert not out.exists()
    monkeypatch.setattr(SyntheticQuestions, "phrase", phrase)
    assert main(args) == 0
    assert "1 relation read from it, 1 relation phrased now" in capsys.readouterr().err


def ctrl_c_in_fit(monkeypatch, n: int) -> list[int]:
    """Make the ``n``-th fit of the value model raise KeyboardInterrupt (Ctrl-C in round
    ``n``: each round fits once). Returns the fits made so far, which a test may reset."""
    import traversals.search.rwt.train as train

    fit, fits = train.fit, []

    def interrupted(*a, **kw):
        fits.append(1)
        if len(fits) == n:
            raise KeyboardInterrupt
        return fit(*a, **kw)

    monkeypatch.setattr(train, "fit", interrupted)
    return fits


def test_an_interruption_while_training_says_which_round_the_model_file_holds(tmp_path, capsys, monkeypatch):
    from traversals.cli import main
    from traversals.search.rwt import ValueModel

    args, out = _synthetic_run(tmp_path, monkeypatch, rounds=3)
    fits = ctrl_c_in_fit(monkeypatch, 3)
    assert main(args) == 130
    assert f"interrupted in round 3 of 3: {out} holds the model of round 2" in capsys.readouterr().err
    assert len(ValueModel.load(out).meta["rounds"]) == 2

    # interrupted in round 1: the model an earlier run wrote is left as it was
    before = out.read_text()
    fits[:] = [1, 1]
    assert main(args) == 130
    assert f"interrupted in round 1 of 3: no model was written ({out} holds the one it held before)" \
        in capsys.readouterr().err
    assert out.read_text() == before


@pytest.mark.parametrize(
    "data, says",
    [
        ({"format": "traversals-rwt-value/2", "weights": {}},
         "uses the value model format traversals-rwt-value/2; this traversals reads traversals-rwt-value/1"),
        ({"format": PHRASINGS_FORMAT, "relations": {}},
         f"is a {PHRASINGS_FORMAT} file, not a value model .*--value-model takes the model file"),
        ({"weights": {}}, "is not a value model .*'traversals-rwt-value/1' expected in its 'format' field"),
    ],
)
def test_a_file_of_another_format_given_as_a_value_model_says_what_it_is(tmp_path, data, says):
    from traversals.search.rwt import ValueModel

    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BadInput, match=says):
        ValueModel.load(path)


def test_a_kg_with_no_walk_to_make_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    """A KG of labels alone: no walk, no phrasings file, and reading it had been a traceback."""
    import traversals.eval.training as training
    from traversals.cli import main

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    kb = tmp_path / "labels.nt"
    kb.write_text('<http://x/a> <http://www.w3.org/2000/01/rdf-schema#label> "A" .\n'
                  '<http://x/b> <http://www.w3.org/2000/01/rdf-schema#label> "B" .\n')
    assert main(["train-value", "--synthetic", "3", "--kg", str(kb), "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "no synthetic question could be made: no walk of 1-3 relations from" in err and "Traceback" not in err


def test_a_questions_out_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    import traversals.eval.training as training
    from traversals.cli import main

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: pytest.fail("the LLM was opened"))
    (tmp_path / "films.txt").write_text(FILMS)
    (tmp_path / "file").write_text("x")
    head = ["train-value", "--synthetic", "3", "--kg", str(tmp_path / "films.txt"), "--out", str(tmp_path / "m.json")]
    assert main([*head, "--questions-out", str(tmp_path / "file" / "stem")]) == 2
    assert f"--questions-out {tmp_path / 'file' / 'stem'}: cannot write there" in capsys.readouterr().err
    assert main([*head, "--questions-out", str(tmp_path) + "/"]) == 2
    assert "--questions-out names a folder; name a file stem" in capsys.readouterr().err


def test_a_benchmark_asked_over_freebase_says_to_pass_a_kg(SHARED, capsys, tmp_path):
    from traversals.cli import main

    data = SHARED / "data" / "questions-only"
    if not (data / "cwq.json").exists():
        pytest.skip(f"{data} is not there")
    assert main(["train-value", "cwq", "--data", str(data), "--out", str(tmp_path / "m.json")]) == 2
    assert "cwq is asked over Freebase, which is not available: pass --kg" in capsys.readouterr().err


def test_questions_that_name_no_entity_to_link_say_so(SHARED, capsys, tmp_path):
    """2WikiMultiHopQA's questions have no topic entities and no [bracketed] mentions: nothing
    to link without an LLM (it had said 'no training question could be linked to the KG')."""
    from traversals.cli import main

    data = SHARED / "data" / "questions-only"
    if not (data / "2wikimultihopqa_dev1000.json").exists():
        pytest.skip(f"{data} is not there")
    assert main(["train-value", "2wikimultihopqa", "--data", str(data), "--limit", "5",
                 "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "none of the 5 training questions names an entity to link" in err and "[bracketed]" in err


def test_a_refused_run_leaves_no_folder_made_for_its_out(tmp_path, capsys):
    from traversals.cli import main

    out = tmp_path / "new" / "sub" / "m.json"
    assert main(["train-value", "metaqa-1hop", "--data", str(tmp_path), "--out", str(out)]) == 2
    assert "metaqa-1hop: no qa_dev_1hop.txt" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_a_model_write_that_fails_leaves_the_previous_model_and_no_temporary_file(tmp_path, monkeypatch):
    import os

    from traversals.search.rwt import ValueModel

    path = ValueModel({"stop|bias": 1.0}).save(tmp_path / "m.json")
    before = path.read_text()

    def fail(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    monkeypatch.setattr(type(path), "replace", fail)
    with pytest.raises(OSError):
        ValueModel({"stop|bias": 2.0}).save(path)
    assert path.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_a_model_or_phrasings_file_that_cannot_be_written_midway_is_one_line(tmp_path, capsys, monkeypatch):
    """A full disk while training had been a traceback."""
    import traversals.eval.training as training
    import traversals.eval.synthetic as synthetic
    from traversals.cli import main
    from traversals.search.rwt import ValueModel

    def full(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    (tmp_path / "films.txt").write_text(FILMS)
    args = ["train-value", "--synthetic", "6", "--kg", str(tmp_path / "films.txt"), "--rounds", "1",
            "--out", str(tmp_path / "m.json")]
    monkeypatch.setattr(synthetic, "write_json_atomic", full)
    assert main(args) == 2
    assert f"cannot write {tmp_path / 'm.json.phrasings.json'} (No space left on device)" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    monkeypatch.setattr(ValueModel, "save", full)
    assert main(args) == 2
    assert f"cannot write the model of round 1 to {tmp_path / 'm.json'} (No space left on device)" \
        in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--limit", "50"], ["--skip", "0"], ["--data", "x"], ["--split", "test"],
                                   ["--answerable-only"], ["--sample-seed", "1"]])
def test_benchmark_flags_with_synthetic_are_refused_not_ignored(tmp_path, capsys, monkeypatch, flags):
    """`--synthetic 1500 --limit 50` had made 1,500 questions: --limit reads a benchmark's."""
    import traversals.eval.training as training
    from traversals.cli import main

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: pytest.fail("the LLM was opened"))

    (tmp_path / "films.txt").write_text(FILMS)
    assert main(["train-value", "--synthetic", "5", "--kg", str(tmp_path / "films.txt"), *flags,
                 "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert f"{flags[0]} only matter(s) for a benchmark's questions" in err and "--synthetic N" in err


def test_an_eval_of_questions_the_value_model_was_trained_on_warns_and_records_how_many(tmp_path, capsys,
                                                                                      monkeypatch):
    """`eval --value-model` never looked at what the model was trained on: 3 of 5 questions scored had been
    trained on (with their gold answers) without a word."""
    import traversals.eval.commands as commands
    import traversals.eval.training as training
    from traversals.cli import main
    from traversals.eval.datasets import load_dataset, sample_questions
    from traversals.llm.scripted import ScriptedLLM

    (tmp_path / "kb.txt").write_text(FILMS)
    films = ["Heat", "Collateral", "Alien", "Gladiator"]
    (tmp_path / "qa_dev_1hop.txt").write_text("".join(
        f"who directed [{f}]\t{'Michael Mann' if i < 2 else 'Ridley Scott'}\nwhen was [{f}] released\t"
        f"{['1995', '2004', '1979', '2000'][i]}\n" for i, f in enumerate(films)))
    llm = ScriptedLLM(rules=[("", "x, B: y, C: z]")], score=lambda prompt, options, prefix: [-1.0] * len(options))
    monkeypatch.setattr(training, "open_llm_from_args", lambda *a, **kw: llm)
    monkeypatch.setattr(commands, "open_llm_from_args", lambda *a, **kw: llm)
    model = str(tmp_path / "m.json")
    assert main(["train-value", "metaqa-1hop", "--data", str(tmp_path), "--skip", "2", "--limit", "4",
                 "--heldout", "0", "--rounds", "1", "--out", model]) == 0
    capsys.readouterr()

    def evaluate(out: str, *flags: str) -> tuple[str, dict]:
        assert main(["eval", "metaqa-1hop", "--data", str(tmp_path), *flags, "--strategy", "beam", "--embedder",
                     "lexical", "--value-model", model, "--out", str(tmp_path / out), "--no-progress"]) == 0
        return capsys.readouterr().err, json.loads((tmp_path / out / "run.json").read_text())

    err, run = evaluate("overlap", "--limit", "5")
    questions = load_dataset("metaqa-1hop", tmp_path).questions
    expected = len({q.id for q in sample_questions(questions, 5, 233)} & {q.id for q in sample_questions(questions, 4, 233, skip=2)})
    assert expected == 3 and run["value_model_trained_questions"] == 3
    assert re.search(r"warning: 3 of the 5 questions evaluated are among those --value-model \S+m\.json was "
                     r"trained on \(--sample-seed 233 --skip 2 --limit 4\)", err)
    report = tmp_path / "report.md"
    assert main(["report", str(tmp_path / "overlap"), "--out", str(report)]) == 0
    assert "(n=5, 3 in its --value-model's training)" in report.read_text()
    err, run = evaluate("held-out", "--limit", "2")  # the questions train-value --skip 2 left out
    assert "warning" not in err and run["value_model_trained_questions"] == 0
    # resumed to a smaller --limit: the folder's 5 rows are what the report counts, 3 of them trained on
    err, run = evaluate("overlap", "--limit", "2", "--resume")
    assert run["value_model_trained_questions"] == 3 and "3 of the 5 questions evaluated" in err


def test_the_training_overlap_is_counted_only_for_a_model_trained_on_the_benchmark_evaluated(tmp_path):
    from traversals.eval.datasets import load_dataset, sample_questions
    from traversals.eval.training import trained_among

    (tmp_path / "qa_dev_1hop.txt").write_text("".join(f"who directed [F{i}]\tD{i}\n" for i in range(6)))
    (tmp_path / "qa_test_1hop.txt").write_text("".join(f"who directed [F{i}]\tD{i}\n" for i in range(6)))
    ds = load_dataset("metaqa-1hop", tmp_path)
    evaluated = sample_questions(ds.questions, 3, 233)
    meta = {"datasets": ["MetaQA-1hop"], "split": "dev", "answerable_only": False, "sample_seed": 233, "skip": 1,
            "limit": 5}

    def count(**changes):
        return trained_among({**meta, **changes}, ds, evaluated, data=str(tmp_path), split="dev", answerable_only=False)

    assert count() == 2  # the 2nd and 3rd of the shuffle; the name as the user typed it
    assert count(skip=3) == 0
    assert count(datasets=["metaqa-2hop"]) is None and count(datasets=["no-such-benchmark"]) is None
    assert trained_among({"synthetic": {"asked": 6}}, ds, evaluated, data=str(tmp_path), split="dev",
                         answerable_only=False) is None
    assert count(skip=None) is None  # a model that does not say which questions it was trained on
    assert count(split="test") == 0  # another split's questions (read from the same --data): other ids


def test_a_model_trained_on_another_file_of_ones_own_claims_no_overlap(tmp_path):
    """train-value questions --data train.jsonl, eval questions --data test.jsonl: ids like
    "questions:3" name no file, and every question evaluated was counted as trained on."""
    from traversals.eval.datasets import load_dataset, sample_questions
    from traversals.eval.training import selection_sha256, trained_among, training_questions

    def write(name: str, who: str) -> object:
        (tmp_path / name).write_text("".join(f'{{"question": "who directed [{who}{i}]", "answers": ["D{i}"]}}\n'
                                             for i in range(8)))
        return load_dataset("questions", tmp_path / name)

    train, test = write("train.jsonl", "F"), write("test.jsonl", "G")
    picked = training_questions(train.questions, 0, 8, 233)
    meta = {"datasets": ["questions"], "split": "", "answerable_only": False, "sample_seed": 233, "skip": 0, "limit": 8}
    evaluated = sample_questions(test.questions, 5, 233)

    def count(dataset, data, **changes):
        return trained_among({**meta, **changes}, dataset, evaluated if dataset is test else
                             sample_questions(train.questions, 5, 233), data=str(tmp_path / data), split="",
                             answerable_only=False)

    recorded = selection_sha256(picked)
    assert count(test, "test.jsonl", trained_selection_sha256=recorded) is None  # another file: no claim
    assert count(train, "train.jsonl", trained_selection_sha256=recorded) == 5  # the file trained on
    assert count(test, "test.jsonl") is None  # an older model that does not say which file: no claim


def _trained_one_round_on_kb_txt(tmp_path, monkeypatch) -> list[str]:
    """One round of train-value on two questions over ``tmp_path/kb.txt`` (a scripted LLM), the
    model at ``tmp_path/m.json``; returns the command without --rounds and --kg, to resume with."""
    import traversals.eval.training as training
    from traversals.cli import main

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    (tmp_path / "kb.txt").write_text(FILMS)
    (tmp_path / "q.jsonl").write_text('{"question": "who directed [Heat]", "answers": ["Michael Mann"]}\n'
                                      '{"question": "who directed [Alien]", "answers": ["Ridley Scott"]}\n')
    train = ["train-value", "questions", "--data", str(tmp_path / "q.jsonl"), "--skip", "0", "--heldout", "0",
             "--out", str(tmp_path / "m.json")]
    assert main([*train, "--rounds", "1", "--kg", str(tmp_path / "kb.txt")]) == 0
    return train


def test_a_resume_with_the_kg_file_renamed_says_so(tmp_path, capsys, monkeypatch):
    """kb.txt renamed films.txt (the same triples): the resume was refused as "the training
    questions … differ", since a KG is named by its file and the questions' entities carry it."""
    from traversals.cli import main

    train = _trained_one_round_on_kb_txt(tmp_path, monkeypatch)
    (tmp_path / "kb.txt").rename(tmp_path / "films.txt")
    capsys.readouterr()
    assert main([*train, "--rounds", "2", "--kg", str(tmp_path / "films.txt"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "the KG file was renamed" in err and "give the file its old name" in err
    assert f"--kg kb={tmp_path / 'films.txt'}" in err  # the option that keeps the KG's name


def test_a_renamed_kg_file_given_its_old_name_with_name_equals_resumes(tmp_path, capsys, monkeypatch):
    """--kg kb=films.txt names the KG "kb" as kb.txt did: the same KG, and the resume goes on
    (it was refused as --kg differing, the NAME= compared with the spec trained without one)."""
    from traversals.cli import main
    from traversals.search.rwt import ValueModel

    train = _trained_one_round_on_kb_txt(tmp_path, monkeypatch)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (tmp_path / "kb.txt").rename(moved / "films.txt")
    capsys.readouterr()
    assert main([*train, "--rounds", "2", "--kg", f"kb={moved / 'films.txt'}", "--resume"]) == 0
    assert len(ValueModel.load(tmp_path / "m.json").meta["rounds"]) == 2
    # another name is another KG still: the questions' entities carry the name
    (moved / "films.txt").rename(moved / "kb.txt")
    capsys.readouterr()
    assert main([*train, "--rounds", "3", "--kg", f"films={moved / 'kb.txt'}", "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"is named 'films' where the run named it 'kb': give it as --kg kb={moved / 'kb.txt'}" in err


def test_a_resume_of_a_damaged_model_file_says_what_this_command_needs(tmp_path):
    """A truncated model at --out ended "--value-model takes the model file …", a flag train-value has not."""
    from traversals.errors import BadInput
    from traversals.eval.training import _model_to_resume

    out = tmp_path / "m.json"
    out.write_text('{"format": "traversals/value-model/v1", "weights": {')
    with pytest.raises(BadInput, match=r"cannot resume .*m\.json: value model .* is not JSON .*; train again without "
                                       r"--resume") as err:
        _model_to_resume(out, {})
    assert "--value-model" not in str(err.value)
