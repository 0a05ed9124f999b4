"""run.json records which model answers (``llm_model``, ``llm_sha256``) and a resume with
another model is refused; ``--llm-url`` alone may change (a server moved to another port)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.resume import _gguf_sha256, llm_identity
from traversals.eval.runner import run_eval
from traversals.llm.models import DEFAULT_MODEL, MODELS

from .test_runner import FakeSolver, make_dataset


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def local_run(tmp_path: Path) -> tuple[Path, dict, Path, dict]:
    """A run of two questions by ``--llm local:mine.gguf``: the file, the config, the run
    directory and its run.json."""
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF model one")
    cfg = {"strategy": "tree", "llm": f"local:{gguf}"}
    out = tmp_path / "run"
    await run_eval(make_dataset(4), FakeSolver(), out, limit=2, progress=False, config=cfg)
    return gguf, cfg, out, json.loads((out / "run.json").read_text())


async def test_a_gguf_replaced_in_place_is_another_model(tmp_path):
    gguf, cfg, out, run = await local_run(tmp_path)
    assert run["llm_model"] == "mine.gguf" and run["llm_sha256"] == sha(gguf)
    before = sha(gguf)
    gguf.write_bytes(b"GGUF model two, retrained")  # the same path, another model
    with pytest.raises(BadInput) as e:
        await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=4, progress=False, config=cfg)
    msg = str(e.value)
    assert "\n" not in msg and "another model answers" in msg
    assert f"llm_sha256: {before!r} (recorded, model 'mine.gguf') vs {sha(gguf)!r} (now" in msg
    gguf.write_bytes(b"GGUF model one")  # the model it was: resumes
    s = await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=4, progress=False, config=cfg)
    assert s.n == 4


async def test_a_registry_model_is_named_without_reading_it(tmp_path, monkeypatch):
    """``--llm local`` is whichever model is the default of the version that runs: the
    recorded spec stays ``local`` when a newer version changes the default."""
    import traversals.eval.resume as resume

    monkeypatch.setattr(resume, "file_sha256", lambda path: pytest.fail(f"read {path}"))
    cfg = {"strategy": "tree", "llm": "local"}
    out = tmp_path / "run"
    await run_eval(make_dataset(4), FakeSolver(), out, limit=2, progress=False, config=cfg)
    run = json.loads((out / "run.json").read_text())
    assert run["llm_model"] == DEFAULT_MODEL and run["llm_sha256"] == MODELS[DEFAULT_MODEL].sha256
    run.update(llm_model="an-older-default", llm_sha256="0" * 64)  # as an older version recorded it
    (out / "run.json").write_text(json.dumps(run))
    with pytest.raises(BadInput, match="model 'an-older-default'.*another model answers"):
        await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=4, progress=False, config=cfg)


async def test_a_run_recorded_without_the_model_hash_still_resumes(tmp_path):
    gguf, cfg, out, run = await local_run(tmp_path)
    for key in ("llm_model", "llm_sha256", "llm_file"):
        del run[key]
    (out / "run.json").write_text(json.dumps(run))
    gguf.write_bytes(b"GGUF model two")
    s = await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=4, progress=False, config=cfg)
    assert s.n == 4 and json.loads((out / "run.json").read_text())["llm_sha256"] == sha(gguf)


async def test_an_endpoint_moved_to_another_port_resumes_and_its_model_is_recorded(tmp_path):
    base = {"strategy": "tree", "llm": "openai:qwen-7b"}
    out = tmp_path / "run"
    await run_eval(make_dataset(4), FakeSolver(), out, limit=2, progress=False,
                   config={**base, "llm_url": "http://127.0.0.1:8000/v1"})
    assert json.loads((out / "run.json").read_text())["llm_model"] == "qwen-7b"
    s = await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=3, progress=False,
                       config={**base, "llm_url": "http://127.0.0.1:8001/v1"})
    assert s.n == 3
    with pytest.raises(BadInput, match="llm: 'openai:qwen-7b' \\(recorded\\) vs 'openai:llama-8b'"):
        await run_eval(make_dataset(4), FakeSolver(), out, resume=True, limit=4, progress=False,
                       config={**base, "llm": "openai:llama-8b", "llm_url": "http://127.0.0.1:8001/v1"})


def test_the_hash_of_an_unchanged_gguf_is_not_read_again(tmp_path):
    gguf = tmp_path / "big.gguf"
    gguf.write_bytes(b"weights")
    first = llm_identity(f"local:{gguf}")
    assert first["llm_sha256"] == sha(gguf)
    recorded = {**first, "llm_sha256": "f" * 64}  # a recorded hash of this very file is trusted
    assert llm_identity(f"local:{gguf}", recorded)["llm_sha256"] == "f" * 64
    st = gguf.stat()
    os.utime(gguf, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: read again
    assert llm_identity(f"local:{gguf}", recorded)["llm_sha256"] == sha(gguf)
    # a verified registry file named by its path: its sidecar, when the size agrees
    (tmp_path / "big.gguf.sha256").write_text(f"{'a' * 64}  big.gguf  {gguf.stat().st_size}\n")
    assert _gguf_sha256(gguf, {}) == "a" * 64
    (tmp_path / "big.gguf.sha256").write_text(f"{'a' * 64}  big.gguf  999\n")
    assert _gguf_sha256(gguf, {}) == sha(gguf)


def test_specs_that_name_no_model_record_nothing(tmp_path):
    assert llm_identity("x") == {} and llm_identity(None) == {} and llm_identity("openai:") == {}
    assert llm_identity(f"local:{tmp_path / 'missing.gguf'}") == {}  # opening it says what is wrong
