"""A KG file that moved is the same KG when its content is: run.json records the SHA-256 of
each KG file (``kg_sha256``), and a resume that finds the KG at another path compares the
hashes -- the same content goes on, other content is refused naming both paths. A run
recorded without the hashes compares paths, as before."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.resume import kg_digests
from traversals.eval.runner import run_eval

from .test_runner import FakeSolver, make_dataset


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def first_run(tmp_path: Path, spec: str = "{}") -> tuple[Path, Path]:
    """A run of two questions over ``a/kb.txt``: the KG file and the run directory."""
    kb = tmp_path / "a" / "kb.txt"
    kb.parent.mkdir()
    kb.write_text("Alpha|directed_by|Ann Lee\n")
    out = tmp_path / "run"
    await run_eval(make_dataset(4), FakeSolver(), out, limit=2, progress=False,
                   config={"strategy": "tree", "llm": "x", "kg": [spec.format(kb)]})
    return kb, out


async def resume(out: Path, spec: str, limit: int, *, progress: bool = False):
    return await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=limit, progress=progress,
                          config={"strategy": "tree", "llm": "x", "kg": [spec]})


async def test_a_kg_file_moved_with_its_content_resumes(tmp_path, capsys):
    kb, out = await first_run(tmp_path)
    assert json.loads((out / "run.json").read_text())["kg_sha256"] == [sha(kb)]
    moved = tmp_path / "b" / "kb.txt"
    moved.parent.mkdir()
    os.replace(kb, moved)
    s = await resume(out, str(moved), 3, progress=True)
    assert s.n == 3
    assert f"KG file moved, same content: {kb} -> {moved}" in capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    assert run["kg"] == [str(moved)] and run["kg_sha256"] == [sha(moved)]


async def test_a_kg_file_of_other_content_at_another_path_is_refused_naming_both(tmp_path):
    kb, out = await first_run(tmp_path)
    before = sha(kb)
    other = tmp_path / "c" / "kb.txt"
    other.parent.mkdir()
    other.write_text("Alpha|directed_by|Bo Ray\n")
    with pytest.raises(BadInput) as e:
        await resume(out, str(other), 3)
    msg = str(e.value)
    assert f"kg: [{str(kb)!r}] (recorded) vs [{str(other)!r}] (now)" in msg
    assert f"KG file {kb} has sha256 {before} (recorded), {other} has {sha(other)} (now)" in msg


async def test_a_named_kg_keeps_its_name_when_it_moves(tmp_path):
    kb, out = await first_run(tmp_path, "movies={}")
    moved = tmp_path / "b.txt"
    os.replace(kb, moved)
    with pytest.raises(BadInput, match="kg: "):  # the name is in the prompts of several KGs
        await resume(out, f"films={moved}", 3)
    assert (await resume(out, f"movies={moved}", 3)).n == 3


async def test_a_renamed_kg_file_given_the_old_name_with_name_equals_is_the_same_kg(tmp_path):
    """kb.txt was the KG "kb": ``kb=other.txt`` of the same content names it so again (it was
    refused, the NAME= compared with the spec recorded without one)."""
    from traversals.eval.resume import kg_changes, kg_paths

    kb, out = await first_run(tmp_path)
    moved = tmp_path / "b" / "other.txt"
    moved.parent.mkdir()
    os.replace(kb, moved)
    recorded = json.loads((out / "run.json").read_text())
    now = {"kg": [f"kb={moved}"], "kg_sha256": kg_digests([f"kb={moved}"]), "kg_paths": kg_paths([f"kb={moved}"])}
    differ, why, [found] = kg_changes(recorded, now)
    assert not differ and not why and str(found) == f"{kb} -> {moved}"
    assert (found.old_name, found.new_name, found.renamed, found.option()) == ("kb", "kb", False, f"--kg kb={moved}")
    differ, why, [found] = kg_changes(recorded, {**now, "kg": [f"films={moved}"]})  # another name: another KG
    assert differ and found.renamed and why == [f"KG file {moved} holds the triples of {kb}, but is named 'films' "
                                                f"where the run named it 'kb': give it as --kg kb={moved}"]
    assert (await resume(out, f"kb={moved}", 3)).n == 3


async def test_a_kg_file_renamed_without_name_equals_is_refused_naming_the_option(tmp_path, capsys):
    """kb.txt renamed films.txt (the same triples) renames the KG "kb" to "films" -- in each
    row's supporting_edges[].kg, in a relation key two KGs share, so in the prompts: the
    resume went on, changing the KG's name halfway through the run. It is refused as
    train-value --resume refuses it; ``kb=films.txt``, or the file's old name in another
    directory, goes on."""
    kb, out = await first_run(tmp_path)
    renamed = tmp_path / "a" / "films.txt"
    os.replace(kb, renamed)
    with pytest.raises(BadInput) as e:
        await resume(out, str(renamed), 3)
    msg = str(e.value)
    assert (f"the KG file was renamed ({kb} -> {renamed}): a KG is named by its file, so it is named 'films' where "
            f"the run named it 'kb'; give it its old name as --kg kb={renamed} (or give the file its old name, in "
            "any directory)") in msg
    assert json.loads((out / "run.json").read_text())["kg"] == [str(kb)]  # nothing written
    assert (await resume(out, f"kb={renamed}", 3, progress=True)).n == 3
    assert f"KG file moved, same content: {kb} -> {renamed}" in capsys.readouterr().err
    elsewhere = tmp_path / "b" / "kb.txt"  # the old file name in another directory: the same name
    elsewhere.parent.mkdir()
    os.replace(renamed, elsewhere)
    assert (await resume(out, str(elsewhere), 4)).n == 4


async def test_a_run_recorded_without_kg_hashes_compares_paths(tmp_path):
    kb, out = await first_run(tmp_path)
    run = json.loads((out / "run.json").read_text())
    del run["kg_sha256"]  # as an older version recorded it
    (out / "run.json").write_text(json.dumps(run))
    moved = tmp_path / "b.txt"
    os.replace(kb, moved)
    with pytest.raises(BadInput, match="kg: "):
        await resume(out, str(moved), 3)
    os.replace(moved, kb)
    assert (await resume(out, str(kb), 3)).n == 3


def test_only_kg_files_are_hashed(tmp_path):
    kb = tmp_path / "kb.nt"
    kb.write_text("<http://e/a> <http://e/r> <http://e/b> .\n")
    store = tmp_path / "store"
    store.mkdir()
    specs = [str(kb), f"m={kb}", "wikidata", "http://127.0.0.1:9/sparql", str(store), "missing.txt", "freebase"]
    assert kg_digests(specs) == [sha(kb), sha(kb), None, None, None, None, None]


def test_a_kg_file_gone_since_is_named_as_gone(tmp_path, monkeypatch):
    """train-value --resume with its KG file deleted said "trained with r/kb.txt, this run has r/kb.txt"."""
    from traversals.eval.resume import kg_changes, kg_paths

    monkeypatch.chdir(tmp_path)
    kb = tmp_path / "kb.txt"
    kb.write_text("Alpha|directed_by|Ann Lee\n")
    old = {"kg": ["kb.txt"], "kg_sha256": kg_digests(["kb.txt"]), "kg_paths": kg_paths(["kb.txt"])}
    kb.unlink()
    differ, why, _ = kg_changes(old, {"kg": ["kb.txt"], "kg_sha256": kg_digests(["kb.txt"])})
    assert differ and why == ["KG file kb.txt does not exist or cannot be read"]
