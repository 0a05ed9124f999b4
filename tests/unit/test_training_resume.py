"""`train-value --resume`: an interrupted training goes on from the rounds its model file
holds — the rounds done are not searched again, and the model is the one an uninterrupted
training writes — while a model of other settings is refused, naming the setting, and a
model that has every round asked for is left as it is."""

from __future__ import annotations

import copy
import json
import random

import pytest

from traversals.search.kgset import KGSet
from traversals.search.rwt import ValueModel
from traversals.search.rwt.train import TrainConfig, Trainer, TrainState

from .test_rwt_training import movie_kg, questions
from .test_train_value_inputs import FILMS, _llm, ctrl_c_in_fit

KB = "".join(f"P{i}|born_in|City {i % 3}\nP{i}|works_for|Firm {i % 4}\nFirm {i % 4}|based_in|City {i % 2}\n"
             for i in range(12))


def _without_seconds(meta: dict) -> dict:
    meta = copy.deepcopy(meta)
    for r in meta.get("rounds", []):
        r.pop("seconds")
    return meta


def _same_model(a, b) -> None:
    a, b = ValueModel.load(a), ValueModel.load(b)
    assert a.weights == b.weights and _without_seconds(a.meta) == _without_seconds(b.meta)


@pytest.fixture
def grown(monkeypatch) -> list[str]:
    """The questions every tree was grown for, in order (the search work a round does)."""
    calls: list[str] = []
    grow = Trainer.grow

    async def counting(self, q, model, rng, tree):
        calls.append(q.id)
        await grow(self, q, model, rng, tree)

    monkeypatch.setattr(Trainer, "grow", counting)
    return calls


def _args(tmp_path, name: str = "m.json", *flags: str, rounds: int = 3) -> list[str]:
    """`train-value questions` on a file of 24 questions over KB (no LLM)."""
    (tmp_path / "kb.txt").write_text(KB)
    rows = [{"question": f"where was [P{i}] born", "answers": [f"City {i % 3}"]} for i in range(12)]
    rows += [{"question": f"which city is the employer of [P{i}] based in", "answers": [f"City {i % 4 % 2}"]}
             for i in range(12)]
    data = tmp_path / "mine.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ["train-value", "questions", "--data", str(data), "--kg", str(tmp_path / "kb.txt"), "--skip", "0",
            "--rounds", str(rounds), "--heldout", "0.25", *flags, "--out", str(tmp_path / name)]


async def test_a_training_resumed_from_its_state_gives_the_uninterrupted_model(grown):
    kgs = KGSet([movie_kg()])
    train, held = await questions(kgs, range(6)), await questions(kgs, range(6, 8))
    cfg = TrainConfig(rounds=3, trees=2, width=3, branch=3, max_hops=2, seed=1)
    trainer = Trainer(kgs, cfg)
    states: list[dict] = []

    def keep(report, model):  # what the CLI writes beside the model, through JSON
        assert trainer.state is not None
        states.append(json.loads(json.dumps(trainer.state.to_json())))

    whole = await trainer.train(train, held, on_round=keep)
    per_round = len(grown) // 3
    assert per_round == len(train) * cfg.trees + len(held)
    for done in (1, 2, 3):
        grown.clear()
        state = TrainState.from_json(states[done - 1])
        resumed = await Trainer(KGSet([movie_kg()]), cfg).train(train, held, resume=state)
        assert len(grown) == (3 - done) * per_round  # the rounds done are not searched again
        assert resumed.weights == whole.weights
        assert _without_seconds(resumed.meta) == _without_seconds(whole.meta)


def test_a_damaged_state_is_refused_in_one_line():
    from traversals.errors import BadInput

    with pytest.raises(BadInput, match="s.json.gz is damaged"):
        TrainState.from_json({"rounds": 1, "rng": [3, [1, 2], None], "history": [{}], "lexicon": {},
                              "synonyms": {}, "examples": []}, "s.json.gz")
    with pytest.raises(BadInput, match=r"damaged \(example \[0, 'up'"):
        TrainState.from_json({**TrainState(1, [], random.Random(0).getstate(), [{}], {}, {}).to_json(),
                              "examples": [[0, "up", ["r"], 1.0]]}, "s.json.gz")


def test_an_interrupted_training_resumed_gives_the_uninterrupted_model(tmp_path, capsys, monkeypatch, grown):
    from traversals.cli import main
    import traversals.search.rwt.train as train

    assert main(_args(tmp_path, "whole.json")) == 0
    per_round = len(grown) // 3
    capsys.readouterr()

    fit = train.fit
    ctrl_c_in_fit(monkeypatch, 3)
    assert main(_args(tmp_path)) == 130
    out = tmp_path / "m.json"
    assert (f"interrupted in round 3 of 3: {out} holds the model of round 2; the same command with --resume goes "
            "on from round 3") in capsys.readouterr().err
    monkeypatch.setattr(train, "fit", fit)

    grown.clear()
    assert main(_args(tmp_path, "m.json", "--resume")) == 0
    err = capsys.readouterr().err
    assert f"resuming {out} from round 3 of 3 (the examples of rounds 1-2 read back from {out}.state.json.gz)" in err
    assert "round 3:" in err and "round 1:" not in err and "round 2:" not in err
    assert len(grown) == per_round  # round 3 alone
    _same_model(out, tmp_path / "whole.json")

    # more rounds than the model holds: only the new ones are trained, as a longer training would
    grown.clear()
    assert main(_args(tmp_path, "m.json", "--resume", rounds=4)) == 0
    assert len(grown) == per_round
    assert main(_args(tmp_path, "whole.json", rounds=4)) == 0
    _same_model(out, tmp_path / "whole.json")


@pytest.mark.parametrize("stopped_in", [1, 2])
def test_an_interruption_between_the_model_and_its_state_trains_that_round_again(tmp_path, capsys, monkeypatch,
                                                                                  grown, stopped_in):
    from traversals.cli import main
    import traversals.eval.training as training

    assert main(_args(tmp_path, "whole.json")) == 0
    per_round = len(grown) // 3
    write, writes = training._write_state, []

    def interrupted(*a, **kw):
        writes.append(1)
        if len(writes) == stopped_in:  # the model of that round is written, its state is not
            # (round 1: no state at all was written)
            raise KeyboardInterrupt
        return write(*a, **kw)

    monkeypatch.setattr(training, "_write_state", interrupted)
    assert main(_args(tmp_path)) == 130
    assert len(ValueModel.load(tmp_path / "m.json").meta["rounds"]) == stopped_in
    monkeypatch.setattr(training, "_write_state", write)
    capsys.readouterr()
    grown.clear()
    assert main(_args(tmp_path, "m.json", "--resume")) == 0
    assert f"round {stopped_in} is trained again" in capsys.readouterr().err
    assert len(grown) == (4 - stopped_in) * per_round
    _same_model(tmp_path / "m.json", tmp_path / "whole.json")


def test_a_model_with_every_round_asked_for_is_not_trained_again(tmp_path, capsys, monkeypatch, grown):
    from traversals.cli import main
    import traversals.kg.factory as factory

    assert main(_args(tmp_path, rounds=2)) == 0
    out = tmp_path / "m.json"
    before = out.read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(factory, "open_kgs", lambda *a, **kw: pytest.fail("the KG was opened"))
    grown.clear()
    for rounds, more in ((2, ""), (1, ", more than the 1 asked")):
        assert main(_args(tmp_path, "m.json", "--resume", rounds=rounds)) == 0
        assert f"{out} already holds the model of 2 rounds{more}: nothing to train" in capsys.readouterr().out
    assert out.read_bytes() == before and not grown


@pytest.mark.parametrize("flags, says", [
    (["--trees", "3"], "--trees: the model was trained with 2, this run has 3"),
    (["--seed", "1"], "--seed: the model was trained with 0, this run has 1"),
    (["--heldout", "0.5"], "--heldout: the model was trained with 0.25, this run has 0.5"),
    (["--skip", "2"], "--skip: the model was trained with 0, this run has 2"),
    (["--max-hops", "2"], "--max-hops: the model was trained with 3, this run has 2"),
])
def test_a_model_trained_with_other_settings_is_refused_naming_the_setting(tmp_path, capsys, flags, says, grown):
    from traversals.cli import main

    assert main(_args(tmp_path, rounds=1)) == 0
    out = tmp_path / "m.json"
    before = out.read_bytes()
    capsys.readouterr()
    grown.clear()
    args = _args(tmp_path, "m.json", "--resume", *flags, rounds=2)  # a flag given twice: the last counts
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"cannot resume {out}: {says}; give the settings it was trained with (only --rounds may differ), or " \
           "train again without --resume" in err
    assert out.read_bytes() == before and not grown


def test_other_questions_or_a_missing_state_are_refused(tmp_path, capsys, grown):
    from traversals.cli import main

    assert main(_args(tmp_path, rounds=2)) == 0  # a state is missing from round 2 on (round 1's: trained again)
    out, data = tmp_path / "m.json", tmp_path / "mine.jsonl"
    trained = len(grown)
    capsys.readouterr()
    data.write_text(data.read_text().replace("where was", "where is"))
    assert main(_args(tmp_path, "m.json", "--resume", rounds=3)) == 2
    assert (f"cannot resume {out}: the training questions (their wording, linked entities or gold answers): the "
            "model was trained with") in capsys.readouterr().err
    data.unlink()
    (tmp_path / "m.json.state.json.gz").unlink()
    assert main(_args(tmp_path, "m.json", "--resume", rounds=3)) == 2
    assert f"cannot resume {out}: {out}.state.json.gz, the examples of the rounds it holds" in capsys.readouterr().err
    # a model written before the settings were recorded
    ValueModel({"stop|bias": 1.0}, {"features": 7, "rounds": [{}]}).save(out)
    assert main(_args(tmp_path, "m.json", "--resume", rounds=3)) == 2
    assert "it does not record the settings --resume checks" in capsys.readouterr().err
    assert len(grown) == trained


def test_resume_without_a_model_trains_from_round_1_and_a_rerun_without_it_says_what_it_drops(tmp_path, capsys):
    from traversals.cli import main

    out = tmp_path / "m.json"
    assert main(_args(tmp_path, "m.json", "--resume", rounds=1)) == 0
    assert f"note: --resume: {out} holds no model yet: training from round 1" in capsys.readouterr().err
    assert len(ValueModel.load(out).meta["rounds"]) == 1
    assert main(_args(tmp_path, rounds=2)) == 0
    assert f"note: {out} holds the model of round 1: it is trained again from round 1" in capsys.readouterr().err


def test_a_synthetic_training_resumes_and_refuses_other_synthetic_settings(tmp_path, capsys, monkeypatch, grown):
    import traversals.eval.training as training
    import traversals.search.rwt.train as train
    from traversals.cli import main

    monkeypatch.setattr(training, "open_llm_from_args", lambda args: _llm())
    (tmp_path / "films.txt").write_text(FILMS)

    def args(name: str, *flags: str) -> list[str]:
        return ["train-value", "--synthetic", "6", "--kg", str(tmp_path / "films.txt"), "--rounds", "3",
                "--questions-out", str(tmp_path / "q"), *flags, "--out", str(tmp_path / name)]

    assert main(args("whole.json")) == 0
    fit = train.fit
    ctrl_c_in_fit(monkeypatch, 2)
    assert main(args("m.json")) == 130
    monkeypatch.setattr(train, "fit", fit)
    capsys.readouterr()
    assert main(args("m.json", "--synthetic", "5", "--resume")) == 2
    assert "--synthetic: the model was trained with 6, this run has 5" in capsys.readouterr().err
    assert main(["train-value", "--synthetic", "6", "--kg", str(tmp_path / "films.txt"), "--llm", "local:other",
                 "--rounds", "3", "--resume", "--out", str(tmp_path / "m.json")]) == 2
    assert "--llm: the model was trained with local, this run has local:other" in capsys.readouterr().err
    assert main(args("m.json", "--resume")) == 0
    assert "from round 2 of 3" in capsys.readouterr().err
    _same_model(tmp_path / "m.json", tmp_path / "whole.json")


def _sha256(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_other_kg_triples_that_leave_the_linking_alone_are_refused_and_the_same_file_resumes(tmp_path, capsys,
                                                                                            grown):
    """The questions' hash does not see a changed triple no question links to (here a firm's
    city): the model records each KG file's SHA-256, and a resume over other triples is
    refused naming the file and both hashes. The file as it was resumes, and a model of 1
    round extended to 2 is the model of an uninterrupted 2-round training (the state file
    kept after the last round is what makes that possible)."""
    from traversals.cli import main

    assert main(_args(tmp_path, rounds=1)) == 0
    out, kb = tmp_path / "m.json", tmp_path / "kb.txt"
    trained, before = ValueModel.load(out).meta, out.read_bytes()
    assert trained["kg"] == [str(kb)] and trained["kg_sha256"] == [_sha256(kb)]
    capsys.readouterr()
    grown.clear()

    resume = _args(tmp_path, "m.json", "--resume", rounds=2)  # (writes KB again)
    edited = KB.replace("Firm 3|based_in|City 1\n", "Firm 3|based_in|City 0\n")
    assert edited != KB
    kb.write_text(edited)
    assert main(resume) == 2
    err = capsys.readouterr().err
    assert (f"cannot resume {out}: --kg: the model was trained with {kb}, this run has {kb} (KG file {kb} has "
            f"sha256 {trained['kg_sha256'][0]} (recorded), {_sha256(kb)} (now): the file was edited); train again "
            "without --resume") in err
    assert out.read_bytes() == before and not grown
    # the questions link as before: without the KG's hash nothing would have told the two KGs apart
    fresh = _args(tmp_path, "edited.json", rounds=1)
    kb.write_text(edited)
    assert main(fresh) == 0
    assert ValueModel.load(tmp_path / "edited.json").meta["questions_sha256"] == trained["questions_sha256"]

    # the same triples in a file at another path are the same KG (as an evaluation's resume has it)
    moved = tmp_path / "elsewhere" / "kb.txt"
    moved.parent.mkdir()
    moved.write_text(KB)
    capsys.readouterr()
    grown.clear()
    assert main([str(moved) if a == str(kb) else a for a in _args(tmp_path, "m.json", "--resume", rounds=2)]) == 0
    assert "resuming" in capsys.readouterr().err and grown
    assert ValueModel.load(out).meta["kg"] == [str(moved)]  # where it is now
    assert main([str(moved) if a == str(kb) else a for a in _args(tmp_path, "whole.json", rounds=2)]) == 0
    _same_model(out, tmp_path / "whole.json")


def test_a_model_that_records_no_kg_hashes_resumes_with_a_note(tmp_path, capsys):
    """A model (and state) written before the KG files' SHA-256 were recorded resumes as
    before, a note saying the triples are not checked."""
    import gzip

    from traversals.cli import main
    from traversals.llm.models import file_sha256

    assert main(_args(tmp_path, rounds=1)) == 0
    out, state = tmp_path / "m.json", tmp_path / "m.json.state.json.gz"
    model = json.loads(out.read_text())
    del model["meta"]["kg_sha256"], model["meta"]["kg_paths"]  # neither recorded then
    out.write_text(json.dumps(model))
    with gzip.open(state, "rt", encoding="utf-8") as f:
        data = json.load(f)
    del data["settings"]["kg_sha256"], data["settings"]["kg_paths"]
    data["model_sha256"] = file_sha256(out)
    with gzip.open(state, "wt", encoding="utf-8") as f:
        json.dump(data, f)
    capsys.readouterr()
    assert main(_args(tmp_path, "m.json", "--resume", rounds=2)) == 0
    err = capsys.readouterr().err
    assert (f"note: --resume: {out} records no SHA-256 of its KG files (trained by an older traversals), so whether "
            f"{tmp_path / 'kb.txt'} still holds the triples it was trained on is not checked") in err
    assert f"resuming {out} from round 2 of 2" in err
    assert ValueModel.load(out).meta["kg_sha256"] == [_sha256(tmp_path / "kb.txt")]  # recorded from now on


def test_the_same_relative_kg_from_another_directory_resumes_when_its_content_is_the_same(tmp_path, capsys,
                                                                                           monkeypatch, grown):
    """The model records where each KG file was (``kg_paths``) beside ``kg`` as typed: the
    same ``--kg kb.txt`` from another directory is another file there, the same KG when its
    content is the same, other triples (not an edit) when not."""
    from traversals.cli import main

    def relative(argv: list[str]) -> list[str]:
        return ["kb.txt" if a == str(tmp_path / "kb.txt") else a for a in argv]

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    (first / "kb.txt").write_text(KB)
    assert main(relative(_args(tmp_path, rounds=1))) == 0
    out = tmp_path / "m.json"
    meta = ValueModel.load(out).meta
    assert meta["kg"] == ["kb.txt"] and meta["kg_paths"] == [str((first / "kb.txt").resolve())]

    monkeypatch.chdir(second)
    (second / "kb.txt").write_text(KB.replace("Firm 3|based_in|City 1\n", "Firm 3|based_in|City 0\n"))
    capsys.readouterr()
    grown.clear()
    assert main(relative(_args(tmp_path, "m.json", "--resume", rounds=2))) == 2
    err = capsys.readouterr().err
    assert (f"KG file {(first / 'kb.txt').resolve()} has sha256 {_sha256(first / 'kb.txt')} (recorded), "
            f"{(second / 'kb.txt').resolve()} has {_sha256(second / 'kb.txt')} (now): other triples") in err
    assert "edited" not in err and not grown

    (second / "kb.txt").write_text(KB)
    assert main(relative(_args(tmp_path, "m.json", "--resume", rounds=2))) == 0
    assert f"resuming {out} from round 2 of 2" in capsys.readouterr().err and grown
    assert ValueModel.load(out).meta["kg_paths"] == [str((second / "kb.txt").resolve())]  # where it is now
