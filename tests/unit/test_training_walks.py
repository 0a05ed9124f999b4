"""`train-value --synthetic` on small KGs of one shape: a hop count no walk can take must not
stop the walks of the others, and a run that makes fewer questions than asked says so."""

from __future__ import annotations

from collections import Counter

from traversals.eval.synthetic import HopCounts, SyntheticConfig, SyntheticQuestions

#: colleagues in pairs: a walk of one relation (to the company) or two (to the colleague), never three
PAIRS = "".join(f"P{i}|works_for|C{i // 2}\n" for i in range(100))
#: a star: one relation, one hub; only one-hop walks (the hub's 300 ends are too many)
STAR = "".join(f"P{i}|type|Thing\n" for i in range(300))


async def _walks(tmp_path, triples: str, wanted: int) -> list[int]:
    from traversals.kg.factory import open_kgs
    from traversals.llm.scripted import ScriptedLLM
    from traversals.search.kgset import KGSet

    kb = tmp_path / "kb.txt"
    kb.write_text(triples)
    kgs = KGSet(open_kgs([str(kb)]))
    try:
        maker = SyntheticQuestions(kgs, ScriptedLLM(["unused"]), SyntheticConfig(questions=wanted))
        ends = await maker.walks()
    finally:
        await kgs.close()
    return [end.depth for _, end in ends]


async def test_a_kg_without_three_hop_walks_still_gives_one_and_two_hop_questions(tmp_path):
    """It had made one walk of each and then, wanting three hops from every later start, none."""
    hops = Counter(await _walks(tmp_path, PAIRS, 60))
    assert sum(hops.values()) == 60 and set(hops) == {1, 2} and abs(hops[1] - hops[2]) <= 1


async def test_a_star_gives_one_hop_questions_from_every_point(tmp_path):
    """One relation to a hub: it had made one question of the 100 asked for."""
    assert await _walks(tmp_path, STAR, 100) == [1] * 100


def test_hop_counts_take_turns_until_one_fails_a_whole_draw_in_a_row():
    counts = HopCounts(3, give_up_after=2)
    assert [counts.next(n) for n in range(4)] == [1, 2, 3, 1]  # as before while none is given up
    counts.record(3, False)
    counts.record(3, True)  # a walk made: the failures start again from 0
    counts.record(3, False)
    assert counts.open == [1, 2, 3]
    counts.record(3, False)
    assert counts.open == [1, 2] and [counts.next(n) for n in range(3)] == [1, 2, 1]


def test_a_run_that_makes_fewer_questions_than_asked_says_so(tmp_path, capsys, monkeypatch):
    import traversals.eval.training as training
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    def reply(prompt, prefix, n, temperature):
        if prefix.startswith("\nRelation: "):
            return " other words"
        return " What is the friend of {}?\nPhrase: the friend of {}\nReverse question: Whose friend is {}?\n" \
               "Reverse phrase: the people whose friend is {}"

    monkeypatch.setattr(training, "open_llm_from_args",
                        lambda args: ScriptedLLM(reply, score=lambda p, o, x: [0.0] * len(o)))
    (tmp_path / "tiny.txt").write_text("A|likes|B\nB|likes|C\nC|likes|D\n")
    assert main(["train-value", "--synthetic", "50", "--kg", str(tmp_path / "tiny.txt"), "--rounds", "1",
                 "--out", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if line.startswith("note: only ")]
    assert len(note) == 1 and " of the 50 questions asked for could be made: the 4 entities drawn" in note[0], err


def test_an_interruption_while_the_questions_are_written_leaves_no_temporary_file(tmp_path, capsys, monkeypatch):
    import traversals.eval.training as training
    from pathlib import Path

    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    def reply(prompt, prefix, n, temperature):
        if prefix.startswith("\nRelation: "):
            return " other words"
        return " Who employs {}?\nPhrase: the employer of {}\nReverse question: Who works for {}?\n" \
               "Reverse phrase: the staff of {}"

    monkeypatch.setattr(training, "open_llm_from_args",
                        lambda args: ScriptedLLM(reply, score=lambda p, o, x: [0.0] * len(o)))
    replace = Path.replace

    def interrupted(self, target):
        if str(target).endswith(".questions.jsonl"):
            raise KeyboardInterrupt
        return replace(self, target)

    monkeypatch.setattr(Path, "replace", interrupted)
    (tmp_path / "kb.txt").write_text(PAIRS)
    assert main(["train-value", "--synthetic", "10", "--kg", str(tmp_path / "kb.txt"), "--rounds", "1",
                 "--out", str(tmp_path / "m.json")]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.txt", "m.json.phrasings.json"]
