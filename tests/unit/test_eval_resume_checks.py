"""What a resume checks beyond the search settings: a KG file edited in place (its
``kg_sha256`` differs at the same path), the llama.cpp context size (``n_ctx``), and the
model cache read from the environment the caller passes (read once, at the edge: the CLI
or :func:`~traversals.eval.runner.run_eval`'s own entry). Also the helpers the runner and
the report share across modules, used by their public names."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.runner import run_eval
from traversals.llm.models import DEFAULT_MODEL, MODELS, default_cache_dir, model_path

from .test_runner import FakeSolver, make_dataset


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- a KG edited in place


async def kg_run(tmp_path: Path) -> tuple[Path, Path]:
    kb = tmp_path / "kb.txt"
    kb.write_text("Alpha|directed_by|Ann Lee\n")
    out = tmp_path / "run"
    await run_eval(make_dataset(4), FakeSolver(), out, limit=2, progress=False,
                   config={"strategy": "tree", "llm": "x", "kg": [str(kb)]})
    return kb, out


async def kg_resume(out: Path, spec: str, limit: int = 3):
    return await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=limit, progress=False,
                          config={"strategy": "tree", "llm": "x", "kg": [spec]})


async def test_a_kg_file_edited_in_place_is_refused_naming_the_path_and_both_hashes(tmp_path):
    kb, out = await kg_run(tmp_path)
    before = sha(kb)
    kb.write_text("Alpha|directed_by|Bo Ray\n")  # other triples, the same path
    with pytest.raises(BadInput) as e:
        await kg_resume(out, str(kb))
    msg = str(e.value)
    assert msg.startswith(f"cannot resume: {out / 'run.json'} was made with different settings -- kg: ")
    assert f"KG file {kb} has sha256 {before} (recorded), {sha(kb)} (now): the file was edited" in msg
    assert "use another --out for a new run" in msg
    assert json.loads((out / "run.json").read_text())["kg_sha256"] == [before]  # nothing rewritten
    kb.write_text("Alpha|directed_by|Ann Lee\n")  # the triples it was: resumes
    assert (await kg_resume(out, str(kb))).n == 3


async def test_a_kg_file_edited_in_place_is_refused_by_another_path_to_it(tmp_path, monkeypatch):
    kb, out = await kg_run(tmp_path)
    kb.write_text("Alpha|directed_by|Bo Ray\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match="the file was edited"):
        await kg_resume(out, "kb.txt")


async def test_a_kg_file_edited_in_place_resumes_when_the_run_recorded_no_hashes(tmp_path):
    kb, out = await kg_run(tmp_path)
    run = json.loads((out / "run.json").read_text())
    del run["kg_sha256"]  # as an older version recorded it: paths only
    (out / "run.json").write_text(json.dumps(run))
    kb.write_text("Alpha|directed_by|Bo Ray\n")
    assert (await kg_resume(out, str(kb))).n == 3


# --------------------------------------------------------------------------- the same --kg text from another directory


async def relative_kg_run(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A run of two questions over ``--kg kb.txt`` typed in ``a/``: its KG file and run directory."""
    a = tmp_path / "a"
    a.mkdir()
    kb = a / "kb.txt"
    kb.write_text("Alpha|directed_by|Ann Lee\n")
    out = tmp_path / "run"
    monkeypatch.chdir(a)
    await run_eval(make_dataset(4), FakeSolver(), out, limit=2, progress=False,
                   config={"strategy": "tree", "llm": "x", "kg": ["kb.txt"]})
    return kb, out


def elsewhere(tmp_path: Path, monkeypatch, triples: str) -> Path:
    """``b/kb.txt`` holding ``triples``, ``b/`` the working directory."""
    b = tmp_path / "b"
    b.mkdir()
    (b / "kb.txt").write_text(triples)
    monkeypatch.chdir(b)
    return b / "kb.txt"


async def test_run_json_records_where_each_kg_file_was_and_the_spec_as_typed(tmp_path, monkeypatch):
    kb, out = await relative_kg_run(tmp_path, monkeypatch)
    run = json.loads((out / "run.json").read_text())
    assert run["kg"] == ["kb.txt"] and run["kg_paths"] == [str(kb.resolve())] and run["kg_sha256"] == [sha(kb)]


async def test_the_same_kg_text_from_another_directory_with_the_same_content_is_a_moved_file(tmp_path, monkeypatch,
                                                                                             capsys):
    kb, out = await relative_kg_run(tmp_path, monkeypatch)
    other = elsewhere(tmp_path, monkeypatch, kb.read_text())
    s = await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=3, progress=True,
                       config={"strategy": "tree", "llm": "x", "kg": ["kb.txt"]})
    assert s.n == 3
    assert f"KG file moved, same content: {kb.resolve()} -> {other.resolve()}" in capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["kg_paths"] == [str(other.resolve())]  # where it is now


async def test_the_same_kg_text_from_another_directory_with_other_content_is_other_triples(tmp_path, monkeypatch):
    kb, out = await relative_kg_run(tmp_path, monkeypatch)
    other = elsewhere(tmp_path, monkeypatch, "Alpha|directed_by|Bo Ray\n")
    with pytest.raises(BadInput) as e:
        await kg_resume(out, "kb.txt")
    msg = str(e.value)
    assert (f"KG file {kb.resolve()} has sha256 {sha(kb)} (recorded), {other.resolve()} has {sha(other)} (now): "
            "other triples, --kg kb.txt names another file from this directory") in msg
    assert "edited" not in msg
    # the recorded file, by a path from here: resumes
    assert (await kg_resume(out, "../a/kb.txt")).n == 3


async def test_the_recorded_file_edited_is_edited_by_whatever_path_and_directory(tmp_path, monkeypatch):
    kb, out = await relative_kg_run(tmp_path, monkeypatch)
    before = sha(kb)
    kb.write_text("Alpha|directed_by|Bo Ray\n")
    elsewhere(tmp_path, monkeypatch, "Alpha|directed_by|Ann Lee\n")  # the recorded content, not the recorded file
    with pytest.raises(BadInput) as e:
        await kg_resume(out, "../a/kb.txt")
    assert (f"KG file {kb.resolve()} has sha256 {before} (recorded), {sha(kb)} (now): the file was edited"
            in str(e.value))
    monkeypatch.chdir(kb.parent)
    with pytest.raises(BadInput, match="the file was edited"):
        await kg_resume(out, "kb.txt")


async def test_a_run_recorded_without_kg_paths_resolves_its_kg_from_the_current_directory(tmp_path, monkeypatch):
    """As before ``kg_paths`` were recorded: the recorded ``kb.txt`` is what it names from here."""
    kb, out = await relative_kg_run(tmp_path, monkeypatch)
    run = json.loads((out / "run.json").read_text())
    del run["kg_paths"]
    (out / "run.json").write_text(json.dumps(run))
    other = elsewhere(tmp_path, monkeypatch, "Alpha|directed_by|Bo Ray\n")
    with pytest.raises(BadInput, match=f"KG file {other.resolve()} has sha256 {sha(kb)} "):
        await kg_resume(out, "kb.txt")
    other.write_text(kb.read_text())
    assert (await kg_resume(out, "kb.txt")).n == 3


# --------------------------------------------------------------------------- n_ctx


async def test_a_resume_with_another_n_ctx_is_refused(tmp_path):
    ds = make_dataset(3)
    base = {"strategy": "tree", "llm": "local:m.gguf"}
    await run_eval(ds, FakeSolver(), tmp_path, limit=1, progress=False, config={**base, "n_ctx": 8192})
    with pytest.raises(BadInput, match="n_ctx: 8192 \\(recorded\\) vs 4096 \\(now\\)"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False, config={**base, "n_ctx": 4096})
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False, config={**base, "n_ctx": 8192})
    assert s.n == 2


async def test_a_run_recorded_without_n_ctx_resumes(tmp_path):
    ds = make_dataset(3)
    base = {"strategy": "tree", "llm": "local:m.gguf"}
    await run_eval(ds, FakeSolver(), tmp_path, limit=1, progress=False, config=base)  # an older version's run.json
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False, config={**base, "n_ctx": 4096})
    assert s.n == 2 and json.loads((tmp_path / "run.json").read_text())["n_ctx"] == 4096


def test_cli_eval_refuses_a_resume_with_another_n_ctx(tmp_path, monkeypatch, capsys):
    import traversals.llm.factory as llm_factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(["ANSWER: Drama"] * 9))
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"id": i, "question": f"q{i}?", "answers": ["Drama"]}) + "\n"
                                 for i in range(3)))
    out = tmp_path / "run"
    args = ["eval", "questions", "--data", str(questions), "--strategy", "cot", "--out", str(out), "--no-progress",
            "--llm", "local"]
    assert main([*args, "--limit", "1", "--n-ctx", "4096"]) == 0
    assert json.loads((out / "run.json").read_text())["n_ctx"] == 4096
    capsys.readouterr()
    assert main([*args, "--limit", "2", "--resume"]) == 2
    assert "n_ctx: 4096 (recorded) vs 8192 (now)" in capsys.readouterr().err
    assert main([*args, "--limit", "2", "--resume", "--n-ctx", "4096"]) == 0


# --------------------------------------------------------------------------- the environment, read at the edge


def place_default_model(cache: Path) -> Path:
    """The default model's file in the model cache under ``cache``, as ``traversals models
    fetch`` leaves it (a few bytes and the sidecar of its pinned hash)."""
    path = model_path(DEFAULT_MODEL, default_cache_dir({"TRAVERSALS_CACHE": str(cache)}))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"GGUF the default model")
    path.with_name(path.name + ".sha256").write_text(
        f"{MODELS[DEFAULT_MODEL].sha256}  {path.name}  {path.stat().st_size}\n")
    return path


async def unhashed_local_run(out: Path, environ=None) -> None:
    """A run of ``--llm local`` whose run.json, as an older version wrote it, names no model
    hash: a resume compares the resolved model files, so it needs the model cache."""
    kw = {} if environ is None else {"environ": environ}
    await run_eval(make_dataset(4), FakeSolver(), out, limit=1, progress=False,
                   config={"strategy": "tree", "llm": "local"}, **kw)
    run = json.loads((out / "run.json").read_text())
    for key in ("llm_model", "llm_sha256", "llm_file"):
        run.pop(key, None)
    (out / "run.json").write_text(json.dumps(run))


async def test_the_model_cache_comes_from_the_environ_passed_not_os_environ(tmp_path, monkeypatch):
    for var in ("TRAVERSALS_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # os.environ's cache: not where the model is
    environ = {"TRAVERSALS_CACHE": str(tmp_path / "cache")}
    default = place_default_model(tmp_path / "cache")
    out = tmp_path / "run"
    await unhashed_local_run(out, environ)
    s = await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=2, progress=False,
                       config={"strategy": "tree", "llm": f"local:{default}"}, environ=environ)
    assert s.n == 2
    # the same resume reading os.environ (another cache): `local` is another file there
    await unhashed_local_run(out / "again", environ)
    with pytest.raises(BadInput, match="llm: 'local' \\(recorded\\) vs"):
        await run_eval(make_dataset(4), FakeSolver(), out / "again", resume=True, limit=2, progress=False,
                       config={"strategy": "tree", "llm": f"local:{default}"})


async def test_a_caller_that_passes_no_environ_gets_os_environ(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path / "cache"))
    default = place_default_model(tmp_path / "cache")
    out = tmp_path / "run"
    await unhashed_local_run(out)
    s = await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=2, progress=False,
                       config={"strategy": "tree", "llm": f"local:{default}"})
    assert s.n == 2


def test_the_resume_check_has_no_environment_of_its_own():
    import traversals.eval.resume as resume

    for fn in (resume._same_llm, resume.check_resume):
        assert inspect.signature(fn).parameters["environ"].default is inspect.Parameter.empty
    assert "os.environ" not in inspect.getsource(resume).replace("``os.environ``", "")


def test_cli_eval_passes_the_process_environment_to_the_runner(tmp_path, monkeypatch):
    import traversals.eval.runner as runner
    import traversals.llm.factory as llm_factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    seen = {}
    real = runner.run_eval

    async def spy(*args, **kw):
        seen["environ"] = kw.get("environ")
        return await real(*args, **kw)

    monkeypatch.setattr(runner, "run_eval", spy)
    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(["ANSWER: x"] * 3))
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "q?", "answers": ["x"]}) + "\n")
    assert main(["eval", "questions", "--data", str(questions), "--strategy", "cot", "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 0
    assert seen["environ"] is os.environ


# --------------------------------------------------------------------------- public names across modules


def test_the_helpers_shared_across_modules_are_public(tmp_path):
    from traversals.eval import report, runner
    from traversals.eval.resume import check_questions, check_resume, kg_changes, package_version
    from traversals.eval.runfiles import as_number, read_results, rewrite_results

    assert as_number("0.5") == 0.5 and as_number(None) == 0.0 and as_number(float("nan")) == 0.0
    assert as_number("x") == 0.0 and as_number(float("inf")) == 0.0
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n')
    rewrite_results(path, [{"id": "b", "f1": float("nan")}])
    assert read_results(path) == [{"id": "b", "f1": None}]
    assert isinstance(package_version(), str) and package_version()
    kb = tmp_path / "kb.txt"
    kb.write_text("a|r|b\n")
    old = {"kg": [str(kb)], "kg_sha256": ["1" * 64]}
    new = {"kg": [str(kb)], "kg_sha256": ["2" * 64]}
    differ, why, moved = kg_changes(old, new)
    assert differ and moved == [] and why == [f"KG file {kb} has sha256 {'1' * 64} (recorded), {'2' * 64} (now): "
                                              "the file was edited"]
    with pytest.raises(BadInput, match="cannot resume: R was made with different settings -- k: 3 \\(recorded\\)"):
        check_resume({"k": 3}, {"k": 4}, Path("R"), environ={})
    check_resume({"k": 3}, {"k": 3}, Path("R"), environ={})
    assert check_questions({}, {}, [], [], Path("R"), False) == 0  # no hashes recorded: nothing to check
    # no module reaches into another's private helpers for these any more
    for module in (runner, report):
        source = inspect.getsource(module)
        for old_name in ("_check_questions", "_check_resume", "_kg_changes", "_version", "_num", "_rewrite_results"):
            assert not re.search(rf"(?<![\w.]){old_name}\b", source), (module.__name__, old_name)
