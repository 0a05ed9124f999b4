"""``--llm-cache``: a file of the LLM's replies. A repeatable call asked again is answered
from the file and costs no call or token; anything else reaches the model; a broken file
is refused before a model loads, and a cache that cannot write loses no reply."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3

import pytest

from traversals.cli import main
from traversals.errors import BadInput, LLMError
from traversals.llm.base import Generation, Scores, Usage
from traversals.llm.cache import CachedLLM, check_cache_file
from traversals.llm.checked import checked
from traversals.llm.scripted import ScriptedLLM


def counting() -> ScriptedLLM:
    """A model whose every reply says how many calls it has answered, so a reply from the
    model and one from the file tell themselves apart."""
    llm: ScriptedLLM

    def reply(prompt, prefix, n, t):
        return [f"reply {len(llm.calls)}.{i}" for i in range(n)]

    llm = ScriptedLLM(reply, score=lambda prompt, options, prefix: [-1.0 * (i + 1) for i in range(len(options))])
    return llm


async def test_a_greedy_call_asked_again_comes_from_the_file_at_no_cost(tmp_path):
    inner = counting()
    llm = CachedLLM(inner, tmp_path / "c.sqlite3", identity="m")
    first = await llm.generate("Q", prefix="A:", max_tokens=9, stop=["\n"])
    again = await llm.generate("Q", prefix="A:", max_tokens=9, stop=["\n"])
    assert len(inner.calls) == 1 and again.texts == first.texts == ["reply 0.0"]
    assert not first.cached and first.prompt_tokens > 0
    assert again.cached and (again.prompt_tokens, again.completion_tokens, again.computed_prompt_tokens) == (0, 0, 0)
    usage = Usage()
    usage.add_generation(first)
    usage.add_generation(again)
    assert (usage.llm_calls, usage.llm_cache_hits, usage.prompt_tokens) == (1, 1, first.prompt_tokens)
    assert usage.to_json()["llm_cache_hits"] == 1 and "llm_cache_hits" not in Usage().to_json()
    assert (llm.hits, llm.misses) == (1, 1)
    await llm.close()


@pytest.mark.parametrize("change", [
    {"prompt": "Q2"}, {"prefix": "B:"}, {"n": 2}, {"max_tokens": 10}, {"stop": ["\n", "."]}, {"temperature": 0.5, "seed": 1},
])
async def test_any_setting_that_decides_the_reply_is_part_of_the_key(tmp_path, change):
    inner = counting()
    llm = CachedLLM(inner, tmp_path / "c.sqlite3", identity="m")
    call = {"prompt": "Q", "prefix": "A:", "n": 1, "max_tokens": 9, "stop": ["\n"], "temperature": 0.0, "seed": None}
    await llm.generate(call.pop("prompt"), **call)
    other = {"prompt": "Q", "prefix": "A:", "n": 1, "max_tokens": 9, "stop": ["\n"], "temperature": 0.0, "seed": None,
             **change}
    got = await llm.generate(other.pop("prompt"), **other)
    assert not got.cached and len(inner.calls) == 2
    await llm.close()


async def test_another_model_does_not_read_a_models_replies(tmp_path):
    path = tmp_path / "c.sqlite3"
    first = CachedLLM(counting(), path, identity="local:sha256:aaa")
    await first.generate("Q")
    await first.close()
    inner = counting()
    other = CachedLLM(inner, path, identity="local:sha256:bbb")
    assert not (await other.generate("Q")).cached and len(inner.calls) == 1
    await other.close()


async def test_replies_outlive_the_process_that_stored_them(tmp_path):
    path = tmp_path / "c.sqlite3"
    llm = CachedLLM(counting(), path, identity="m")
    stored = await llm.generate("Q", temperature=0.7, seed=42, n=3)
    await llm.close()
    inner = counting()
    again = CachedLLM(inner, path, identity="m")
    got = await again.generate("Q", temperature=0.7, seed=42, n=3)
    assert got.cached and got.texts == stored.texts and not inner.calls
    await again.close()


async def test_a_sample_drawn_without_a_seed_always_reaches_the_model(tmp_path):
    inner = counting()
    llm = CachedLLM(inner, tmp_path / "c.sqlite3", identity="m")
    a = await llm.generate("Q", temperature=0.7)
    b = await llm.generate("Q", temperature=0.7)
    assert not a.cached and not b.cached and a.texts != b.texts and len(inner.calls) == 2
    assert sqlite3.connect(tmp_path / "c.sqlite3").execute("SELECT count(*) FROM replies").fetchone() == (0,)
    await llm.close()


async def test_scores_come_back_with_impossible_options_and_token_counts(tmp_path):
    inner = ScriptedLLM(["x"], score=lambda prompt, options, prefix: [-0.5, -math.inf])
    path = tmp_path / "c.sqlite3"
    llm = CachedLLM(inner, path, identity="m")
    first = await llm.score("P", ["yes", "no"], prefix="R:", transient=True)
    again = await llm.score("P", ["yes", "no"], prefix="R:")  # transient does not change a score
    assert again.cached and again.logprobs == [-0.5, -math.inf] == first.logprobs
    assert again.token_counts == first.token_counts and len(inner.calls) == 1
    assert not (await llm.score("P", ["no", "yes"], prefix="R:")).cached  # other options, another key
    usage = Usage()
    usage.add_scores(again)
    assert (usage.llm_calls, usage.llm_cache_hits, usage.prompt_tokens) == (0, 1, 0)
    await llm.close()


class Broken:
    """A user's backend whose replies break the interface (or fail)."""

    name = "broken"
    can_score = True

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, prompt, **kw):
        self.calls += 1
        if prompt == "fail":
            raise RuntimeError("server said no")
        return Generation([None])  # type: ignore[list-item]

    async def score(self, prompt, options, **kw):
        self.calls += 1
        return Scores([0.0])  # one number for two options

    async def close(self) -> None:
        pass


async def test_a_malformed_or_failed_reply_is_not_stored(tmp_path):
    inner = Broken()
    llm = checked(CachedLLM(inner, tmp_path / "c.sqlite3", identity="m"))
    for _ in range(2):
        with pytest.raises(LLMError, match="texts"):
            await llm.generate("Q")
        with pytest.raises(LLMError, match="1 log-probabilities for 2 options"):
            await llm.score("Q", ["a", "b"])
        with pytest.raises(LLMError, match="server said no"):
            await llm.generate("fail")
    assert inner.calls == 6  # every call reached the model: nothing was stored
    await llm.close()


async def test_concurrent_calls_are_all_stored(tmp_path):
    inner = counting()
    llm = CachedLLM(inner, tmp_path / "c.sqlite3", identity="m")
    first = await asyncio.gather(*(llm.generate(f"Q{i}") for i in range(20)))
    again = await asyncio.gather(*(llm.generate(f"Q{i}") for i in range(20)))
    assert [g.texts for g in again] == [g.texts for g in first] and all(g.cached for g in again)
    assert len(inner.calls) == 20
    await llm.close()


async def test_a_cache_that_cannot_write_warns_once_and_loses_no_reply(tmp_path):
    warnings: list[str] = []
    llm = CachedLLM(counting(), tmp_path / "c.sqlite3", identity="m", warn=warnings.append)
    llm._db.execute("DROP TABLE replies")  # what a full disk or a file removed under the run looks like here
    got = [await llm.generate(f"Q{i}") for i in range(3)]
    assert [g.texts for g in got] == [["reply 0.0"], ["reply 1.0"], ["reply 2.0"]]
    assert len(warnings) == 1 and "cannot" in warnings[0] and "c.sqlite3" in warnings[0]
    await llm.close()


def test_a_file_that_cannot_be_a_cache_is_refused_naming_it(tmp_path):
    with pytest.raises(BadInput, match="is a directory: name a file"):
        check_cache_file(tmp_path)
    with pytest.raises(BadInput, match="the folder .*nowhere does not exist"):
        check_cache_file(tmp_path / "nowhere" / "c.sqlite3")
    text = tmp_path / "notes.txt"
    text.write_text("my notes, not a database\n" * 100)
    with pytest.raises(BadInput, match="notes.txt is not an LLM reply cache"):
        check_cache_file(text)
    assert text.read_text().startswith("my notes")  # left as it was
    other = tmp_path / "other.sqlite3"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('format', '99')")
    with pytest.raises(BadInput, match="another layout \\(format 99"):
        check_cache_file(other)
    check_cache_file(tmp_path / "new.sqlite3")  # made, empty
    assert (tmp_path / "new.sqlite3").is_file()
    # another program's database (the SPARQL query cache, say) is refused and left unchanged
    theirs = tmp_path / "kg-queries.sqlite3"
    with sqlite3.connect(theirs) as db:
        db.execute("CREATE TABLE results (id INTEGER, answer TEXT)")
    with pytest.raises(BadInput, match=r"is another SQLite database \(tables results\), not an LLM reply cache"):
        check_cache_file(theirs)
    with sqlite3.connect(theirs) as db:
        assert [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["results"]
        assert db.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


def test_a_broken_cache_file_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    from traversals.llm import factory as llm_factory

    def never(*a, **kw):
        raise AssertionError("the model was opened")

    monkeypatch.setattr(llm_factory, "open_llm", never)
    assert main(["ask", "q?", "--strategy", "cot", "--llm-cache", str(tmp_path)]) == 2
    assert "--llm-cache" in capsys.readouterr().err
    out = tmp_path / "run"
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "q?", "answers": ["x"]}) + "\n")
    assert main(["eval", "questions", "--data", str(questions), "--strategy", "cot", "--out", str(out),
                 "--llm-cache", str(tmp_path / "no" / "c.sqlite3"), "--no-progress"]) == 2
    assert "does not exist" in capsys.readouterr().err and not out.exists()  # no run directory made


def test_an_eval_run_again_is_answered_from_the_cache_and_says_so(tmp_path, capsys, monkeypatch):
    from traversals.llm import factory as llm_factory

    inner = ScriptedLLM(lambda prompt, prefix, n, t: "Answer: x" if "q0" in prompt else "Answer: y")
    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: inner)
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"question": f"q{i}?", "answers": ["x"]}) + "\n" for i in range(3)))
    cache = tmp_path / "c.sqlite3"
    rows = {}
    for run in ("first", "again"):
        out = tmp_path / run
        assert main(["eval", "questions", "--data", str(questions), "--strategy", "cot", "--out", str(out),
                     "--llm-cache", str(cache), "--no-progress"]) == 0
        rows[run] = [json.loads(line) for line in (out / "results.jsonl").open()]
        assert json.loads((out / "run.json").read_text())["llm_cache"] == str(cache.resolve())
    assert len(inner.calls) == 3  # the second run asked the model nothing
    assert [r["answer"] for r in rows["again"]] == [r["answer"] for r in rows["first"]]
    assert [r["hits@1"] for r in rows["again"]] == [1.0, 0.0, 0.0]
    assert all(r["llm_calls"] == 1 and "llm_cache_hits" not in r for r in rows["first"])
    assert all(r["llm_calls"] == 0 and r["prompt_tokens"] == 0 and r["llm_cache_hits"] == 1 for r in rows["again"])
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert summary["total_llm_cache_hits"] == 3 and "total_llm_cache_hits" not in json.loads(
        (tmp_path / "first" / "summary.json").read_text())
    assert "3 LLM replies came from --llm-cache" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "first"), str(tmp_path / "again"), "--out", str(tmp_path / "r")]) == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert "3 LLM replies came from `--llm-cache`" in report and report.count("came from `--llm-cache`") == 1
    # a resume may add or drop the cache: it decides what the model is asked, not what a run means
    assert main(["eval", "questions", "--data", str(questions), "--strategy", "cot", "--out", str(tmp_path / "first"),
                 "--resume", "--no-progress"]) == 0


async def test_a_wrapped_llm_with_a_plain_close_or_none_is_closed(tmp_path):
    """CachedLLM awaited the wrapped LLM's close(): a user's plain `def close` broke close_all
    with "object NoneType can't be used in 'await' expression", blamed on the user's LLM."""
    from traversals.llm.cache import CachedLLM
    from traversals.llm.scripted import ScriptedLLM

    closed = []

    class Plain(ScriptedLLM):
        def close(self):  # type: ignore[override]
            closed.append(True)

    class NoClose:
        name = "none"

    await CachedLLM(Plain(["x"]), tmp_path / "a.sqlite3").close()
    await CachedLLM(NoClose(), tmp_path / "b.sqlite3").close()  # type: ignore[arg-type]
    assert closed == [True]


async def test_a_reply_paid_for_is_counted_when_a_sibling_call_fails(tmp_path):
    """The write of a reply was awaited: a sibling's failure cancelled the call there (aio.gather),
    and the eval's error row counted 1 of the 3 calls the model had answered (3 without the cache)."""
    from traversals.aio import gather
    from traversals.llm.base import spending

    class Failing:
        name, can_score = "failing", False

        def __init__(self) -> None:
            self.answered = 0

        async def generate(self, prompt, **kw):
            if prompt == "boom":
                # the siblings' replies arrive first: each call looks the cache up in a
                # thread first, which on a loaded machine takes more than a few loop turns
                for _ in range(2000):
                    if self.answered == 2:
                        break
                    await asyncio.sleep(0.005)
                raise LLMError("boom")
            self.answered += 1
            return Generation([f"re {prompt}"], prompt_tokens=10, completion_tokens=1)

        async def score(self, prompt, options, **kw):
            raise NotImplementedError

        async def close(self):
            pass

    inner = Failing()
    cached = CachedLLM(inner, tmp_path / "c.sqlite3")

    async def call(prompt: str) -> None:
        gen = await cached.generate(prompt)
        usage.add_generation(gen)

    usage = Usage()
    with spending():
        with pytest.raises(LLMError, match="boom"):
            await gather(call("a"), call("b"), call("boom"))
    assert inner.answered == 2 and usage.llm_calls == 2 and usage.prompt_tokens == 20
    await cached.close()
    again = CachedLLM(Failing(), tmp_path / "c.sqlite3")
    assert (await again.generate("a")).cached  # written in the background, kept at close
    await again.close()


async def test_a_reply_cut_at_max_tokens_is_still_cut_when_read_from_the_file(tmp_path):
    inner = ScriptedLLM(["Reasoning: the path shows that Bob Dylan's mother", "ok"], cut_at_max_tokens=True)
    llm = CachedLLM(inner, tmp_path / "c.sqlite3", identity="m")
    first = await llm.generate("Q", max_tokens=3)
    await llm.flush()
    again = await llm.generate("Q", max_tokens=3)
    assert again.cached and again.texts == first.texts == ["Reasoning: the path"]
    assert first.cut() and again.cut() and again.finish_reasons == ["length"]
    await llm.close()
    # a reply stored before finish reasons were is read, its reasons unknown
    db = sqlite3.connect(tmp_path / "c.sqlite3")
    with db:
        db.execute("UPDATE replies SET reply = ?", (json.dumps({"texts": ["Reasoning: the path"]}),))
    db.close()
    llm = CachedLLM(ScriptedLLM(["not asked"]), tmp_path / "c.sqlite3", identity="m")
    old = await llm.generate("Q", max_tokens=3)
    assert old.cached and old.texts == ["Reasoning: the path"] and old.finish_reasons is None and not old.cut()
    await llm.close()
