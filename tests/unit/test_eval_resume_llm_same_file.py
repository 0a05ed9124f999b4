"""``--llm local`` and ``--llm local:PATH`` of the default model's own file name one model:
a resume across the two spellings goes on, while another model file is still refused.
No real model is needed: the default model's file in a model cache made under tmp_path
holds a few bytes and the ``.sha256`` sidecar a verified assembly writes beside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.runner import run_eval
from traversals.llm.models import DEFAULT_MODEL, MODELS, default_cache_dir, model_path

from .test_runner import FakeSolver, make_dataset


@pytest.fixture
def default_file(tmp_path, monkeypatch) -> Path:
    """Where ``--llm local`` finds the default model (``$TRAVERSALS_CACHE/models``), as
    ``traversals models fetch`` leaves it: the file and its sidecar (pinned hash, size)."""
    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path / "cache"))
    path = model_path(DEFAULT_MODEL, default_cache_dir(os.environ))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"GGUF the default model")
    path.with_name(path.name + ".sha256").write_text(
        f"{MODELS[DEFAULT_MODEL].sha256}  {path.name}  {path.stat().st_size}\n")
    return path


async def resume(out: Path, llm: str, limit: int):
    return await run_eval(make_dataset(5), FakeSolver(), out, resume=True, limit=limit, progress=False,
                          config={"strategy": "tree", "llm": llm})


async def test_local_and_the_path_of_the_default_model_resume_each_other(tmp_path, default_file, monkeypatch):
    out = tmp_path / "run"
    await run_eval(make_dataset(5), FakeSolver(), out, limit=2, progress=False, config={"strategy": "tree", "llm": "local"})
    assert (await resume(out, f"local:{default_file}", 3)).n == 3
    assert json.loads((out / "run.json").read_text())["llm_sha256"] == MODELS[DEFAULT_MODEL].sha256
    assert (await resume(out, "local", 4)).n == 4  # and back
    monkeypatch.chdir(default_file.parent)  # the same file by a relative path
    assert (await resume(out, f"local:{default_file.name}", 5)).n == 5


async def test_another_model_file_is_still_refused_and_the_message_says_what_to_do(tmp_path, default_file):
    out = tmp_path / "run"
    await run_eval(make_dataset(5), FakeSolver(), out, limit=2, progress=False, config={"strategy": "tree", "llm": "local"})
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF another model")
    with pytest.raises(BadInput) as e:
        await resume(out, f"local:{other}", 3)
    msg = str(e.value)
    assert f"llm: 'local' (recorded) vs 'local:{other}' (now)" in msg
    assert f"(recorded, model {DEFAULT_MODEL!r})" in msg and "(now, model 'other.gguf'): another model answers" in msg
    assert "resume with the recorded settings, or use another --out" in msg
    with pytest.raises(BadInput, match="llm: 'local' \\(recorded\\) vs 'local:qwen2.5-coder-0.5b'"):
        await resume(out, "local:qwen2.5-coder-0.5b", 3)  # another registry model, never fetched
    # a file at the default model's place that is not the default model (no sidecar, other bytes)
    default_file.with_name(default_file.name + ".sha256").unlink()
    with pytest.raises(BadInput, match="another model answers"):
        await resume(out, f"local:{default_file}", 3)


async def test_a_run_recorded_without_model_hashes_compares_the_resolved_paths(tmp_path, default_file):
    out = tmp_path / "run"
    await run_eval(make_dataset(5), FakeSolver(), out, limit=2, progress=False, config={"strategy": "tree", "llm": "local"})
    run = json.loads((out / "run.json").read_text())
    for key in ("llm_model", "llm_sha256", "llm_file"):  # as an older version recorded it
        run.pop(key, None)
    (out / "run.json").write_text(json.dumps(run))
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF another model")
    with pytest.raises(BadInput, match="llm: 'local' \\(recorded\\) vs"):
        await resume(out, f"local:{other}", 3)
    assert (await resume(out, f"local:{default_file}", 3)).n == 3
