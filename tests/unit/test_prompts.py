"""Prompt sets (``--prompts``): Appendix F's prompts word for word, a directory of the user's
templates replacing default ones, the checks that refuse a broken one, and what a run records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.cli import main
from traversals.errors import BadInput
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.machine import Action, ActionType, Machine
from traversals.search.subgraph import Subgraph
from traversals.search.templates import VARIABLES, default_prompts, export_prompts, load_prompts

from .kgdouble import dylan_kg
from .test_search import scripted, table_score

PAPER = Path(__file__).resolve().parents[3] / "shared" / "papers" / "tree-of-traversals.txt"
QUERY = "Who is Bob Dylan's maternal grandmother?"


def appendix_f() -> list[str]:
    """The five prompts Appendix F prints (F.1-F.5), as the paper's text gives them."""
    text = PAPER.read_text("utf-8").split("## F Prompts", 1)[1]
    return re.findall(r"```\n(.*?)\n```", text, re.S)[:5]


def as_ours(paper: str) -> str:
    """The paper's example with what the code writes in its own way (docs/prompts.md): our
    test KG has no descriptions, the history says EXPAND_KG and names a relation by its label."""
    return (paper.replace(" - American singer-songwriter", "").replace("EXPAND KG:", "EXPAND_KG:")
            .replace("P25 - has mother", "P25 - mother"))


async def grandmother_states(prompts):
    """F's example states: after Bob Dylan's mother was expanded (F.1), the second EXPAND_KG
    (F.2), Beatrice Stone selected (F.3, F.4)."""
    kg = dylan_kg()
    machine = Machine(KGSet([kg]), prompts=prompts)
    u = Usage()
    root = machine.root(Subgraph().with_entities((await kg.search("Bob Dylan"))[:1]))
    node = await machine.transition(root, Action(ActionType.EXPAND_KG, "I should search for the mother of Bob Dylan"), u)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(node.subgraph.entities[0],)), u)
    rel = next(r for r, k in zip(node.relation_options, node.relation_keys) if k == "P25")
    f1 = await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=rel, relation_key="P25"), u)
    f2 = await machine.transition(f1, Action(ActionType.EXPAND_KG, "I should search for the mother of Beatrice Stone"), u)
    beatrice = next(e for e in f2.subgraph.entities if e.label == "Beatrice Stone")
    f3 = await machine.transition(f2, Action(ActionType.SELECT_ENTITIES, entities=(beatrice,)), u)
    return machine, f1, f2, f3


@pytest.mark.skipif(not PAPER.is_file(), reason="needs ../shared/papers")
async def test_the_paper_set_renders_appendix_f_word_for_word():
    from traversals.search.value import ValueFunction

    f = appendix_f()
    machine, f1, f2, f3 = await grandmother_states(load_prompts("paper"))
    # F.1: the context, then the instructions and the actions
    assert machine.prompt(QUERY, f1) == as_ours(f[0])
    # F.2: the options carry their labels (they are what constrained decoding scores), newest first
    assert machine.prompt(QUERY, f2) == as_ours(f[1]).replace(
        "[Q392, Q62519478]", "[Q62519478 (Beatrice Stone), Q392 (Bob Dylan; already expanded: mother)]")
    # F.3: the paper's options are Wikidata's; the rest is the paper's
    paper_f3, ours = as_ours(f[2]), machine.prompt(QUERY, f3)
    head, tail = paper_f3.split("P31 - has instance of")[0], paper_f3.split("...\n")[1]
    assert ours.startswith(head) and ours.endswith("\n" + tail) and tail.startswith("\nSelect exactly")
    assert "P25 - mother" in ours[len(head):]
    # F.4: its last line starts the reply, where the rating is read
    value = ValueFunction(ScriptedLLM([]), machine, constrained=True)
    assert value.prompt(QUERY, f3) == as_ours(f[3]).removesuffix("\nRATING [0.0-1.0]:")
    # F.5: the query, the whole subgraph, the answer and the rubric with its reasoning instruction
    done = await machine.transition(f1, Action(ActionType.ANSWER, "Florence Sara Stone"), Usage())
    sampled = ValueFunction(ScriptedLLM([]), machine, constrained=False).prompt(QUERY, done)
    rubric = f[4].split("Provided answer: The answer is Florence Sara Stone.\n", 1)[1]
    assert sampled.startswith(f"Original Query:\n  {QUERY}\n\nKnowledge Graph Entities:\n")
    assert sampled.endswith("\nProvided answer: The answer is Florence Sara Stone.\n" + rubric)


async def test_the_default_set_puts_the_instructions_first_and_the_paper_set_after_the_context():
    preamble_start = "You are a superintelligent AI"
    for name, first in (("default", preamble_start), ("paper", "Original Query:")):
        machine, f1, f2, f3 = await grandmother_states(load_prompts(name))
        for node in (f1, f2, f3):
            prompt = machine.prompt(QUERY, node)
            assert prompt.startswith(first), (name, prompt[:80])
            if name == "paper" and node is not f1:  # F.2 and F.3 show no instructions at all
                assert preamble_start not in prompt


async def test_a_search_with_the_paper_set_sends_only_paper_prompts_and_finds_the_answer():
    from .test_search import grandmother_policy

    # F.1 ends with the actions, not with the default set's cue
    llm = scripted(score=table_score({}), extra=[(lambda t: "Available actions:" in t.split("Previous Actions:")[-1],
                                                 grandmother_policy)])
    s = build_solver("tree", llm, [dylan_kg()], SearchConfig(decoding="constrained", k=1, prompts="paper"))
    answer = await s.ask(QUERY)
    assert answer.text == "Florence Stone"
    asm = [c.prompt for c in llm.calls if "Knowledge Graph Edges:" in c.prompt]
    assert asm and all(p.startswith("Original Query:") for p in asm)
    assert any(p.endswith("SELECT PROPERTY:") for p in asm) and any(p.endswith("SELECT ENTITIES:") for p in asm)
    assert answer.trace["prompts"] == {"name": "paper", "sha256": load_prompts("paper").sha256}


async def test_a_directory_replaces_the_prompts_it_holds_and_keeps_the_others(tmp_path):
    (tmp_path / "cot.txt").write_text("Réponds en français, $$5 la réponse : $query\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("not a prompt: ignored")
    prompts = load_prompts(str(tmp_path))
    assert prompts.replaced == ("cot",) and prompts.name == str(tmp_path.resolve())
    assert prompts.text("default") == default_prompts().text("default")
    assert prompts.sha256 != default_prompts().sha256
    llm = ScriptedLLM(["Answer: Paris"])
    answer = await build_solver("cot", llm, [], SearchConfig(prompts=str(tmp_path))).ask("capital of {France} $x?")
    assert llm.calls[0].prompt == "Réponds en français, $5 la réponse : capital of {France} $x?"
    assert answer.trace["prompts"]["sha256"] == prompts.sha256


async def test_a_replaced_state_prompt_is_what_the_search_sends(tmp_path):
    (tmp_path / "selecting_relation.txt").write_text(
        "$context\n\nWhich relation of $selected answers \"$query\"?\n$options\nI suggest selecting property:\n")
    llm = scripted(score=table_score({}))
    s = build_solver("tree", llm, [dylan_kg()], SearchConfig(decoding="constrained", k=1, prompts=str(tmp_path)))
    assert (await s.ask(QUERY)).text == "Florence Stone"
    asked = [c.prompt for c in llm.calls if "Which relation of" in c.prompt]
    assert asked and f'answers "{QUERY}"?' in asked[0] and "P25 - mother" in asked[0]


@pytest.mark.parametrize("files, message", [
    ({"selecting_relations.txt": "$context"}, r"selecting_relations\.txt names no prompt a search uses; the prompts are preamble, context"),
    ({"cot.txt": "Question: $query\nFacts: $subgraph"}, r"cot\.txt, line 2: \$subgraph is not given to the cot prompt; it is given \$query"),
    ({"default.txt": "$context\nCosts $5"}, r"default\.txt, line 2: a '\$' that starts no placeholder; write \$\$ for a dollar sign"),
    ({"preamble.txt": "Answer $query"}, r"\$query is not given to the preamble prompt; it is given no placeholder"),
    ({"cot.txt": b"caf\xe9 $query"}, r"cot\.txt is not UTF-8 text"),
    ({"README": "no .txt"}, r"no prompt file \(NAME\.txt\) in it"),
    # an empty file, a prompt without what it must show: the model had been sent a blind prompt
    ({"default.txt": "  \n"}, r"default\.txt: the default prompt is empty \(delete the file to use the default one\)"),
    ({"selecting_relation.txt": "$context\nPick one."}, r"the selecting_relation prompt must show \$options"),
    ({"default.txt": "$preamble $actions"}, r"the default prompt must show \$context or \$query"),
])
def test_a_broken_directory_is_refused_naming_the_file_and_the_fault(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(BadInput, match=message):
        load_prompts(str(tmp_path))


def test_an_unknown_set_is_neither_built_in_nor_a_directory(tmp_path):
    with pytest.raises(BadInput, match=r"--prompts papers: not a prompt set \(default, paper\) nor a directory"):
        load_prompts("papers")
    with pytest.raises(BadInput, match="not a prompt set"):
        load_prompts(str(tmp_path / "missing"))


def test_every_packaged_prompt_uses_only_its_placeholders_and_export_loads_back(tmp_path):
    from traversals.search.templates import check_template

    for name in ("default", "paper"):
        prompts = load_prompts(name)
        assert set(prompts.texts) == set(VARIABLES)
        for prompt, text in prompts.texts.items():
            check_template(text, prompt, where=f"{name}/{prompt}")
    written = export_prompts(load_prompts("paper"), tmp_path / "mine")
    assert len(written) == len(VARIABLES)
    back = load_prompts(str(tmp_path / "mine"))
    assert back.sha256 == load_prompts("paper").sha256 and back.texts == load_prompts("paper").texts
    with pytest.raises(BadInput, match="already holds"):
        export_prompts(default_prompts(), tmp_path / "mine")


def test_the_prompts_command_lists_prints_and_exports(tmp_path, capsys):
    assert main(["prompts", "--prompts", "paper"]) == 0
    listing = capsys.readouterr().out
    assert listing.startswith(f"prompt set: paper (sha256 {load_prompts('paper').sha256[:12]})")
    assert re.search(r"selecting_relation\s+this set\s+\$context", listing)
    assert re.search(r"cot\s+default\s+\$query", listing)
    assert main(["prompts", "--prompts", "paper", "selecting_entities"]) == 0
    assert capsys.readouterr().out.rstrip("\n").endswith("SELECT ENTITIES:")
    assert main(["prompts", "--export", str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "evaluate_answer.txt").read_text() == default_prompts().text("evaluate_answer") + "\n"
    assert main(["prompts", "no_such_prompt"]) == 2
    assert "no prompt is named 'no_such_prompt'" in capsys.readouterr().err


def test_ask_refuses_a_broken_directory_before_anything_loads(tmp_path, capsys, monkeypatch):
    from traversals.llm import factory as llm_factory

    def never(*a, **k):
        raise AssertionError("the LLM was opened before the prompts were checked")

    monkeypatch.setattr(llm_factory, "open_llm", never)
    (tmp_path / "cot.txt").write_text("$question")
    assert main(["ask", "q?", "--strategy", "cot", "--prompts", str(tmp_path)]) == 2
    assert "cot.txt, line 1: $question is not given to the cot prompt" in capsys.readouterr().err


def test_an_eval_records_its_prompts_and_a_resume_after_an_edit_is_refused(tmp_path, capsys, monkeypatch):
    from traversals.llm import factory as llm_factory

    llm = ScriptedLLM(lambda prompt, prefix, n, t: "Answer: x")
    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: llm)
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"question": f"q{i}?", "answers": ["x"]}) + "\n" for i in range(3)))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "cot.txt").write_text("Mine: $query")
    out = tmp_path / "run"
    base = ["eval", "questions", "--data", str(questions), "--strategy", "cot", "--out", str(out), "--no-progress"]
    assert main([*base, "--prompts", str(mine), "--limit", "2"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["prompts"] == str(mine.resolve()) and run["prompts_sha256"] == load_prompts(str(mine)).sha256
    assert len(llm.calls) == 2 and all(re.fullmatch(r"Mine: q\d\?", c.prompt) for c in llm.calls)
    (mine / "cot.txt").write_text("Mine, edited: $query")
    capsys.readouterr()
    assert main([*base, "--prompts", str(mine), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "prompts_sha256" in err and "the prompts' words differ" in err
    assert main([*base, "--resume"]) == 2  # another set altogether
    assert "prompts: " in capsys.readouterr().err
    (mine / "cot.txt").write_text("Mine: $query")
    assert main([*base, "--prompts", str(mine), "--resume"]) == 0
    assert sum(1 for _ in (out / "results.jsonl").open()) == 3


def test_a_run_recorded_before_prompt_sets_resumes_as_the_default_set(tmp_path):
    from traversals.eval.resume import check_resume

    old = {"strategy": "cot", "llm": "x"}
    new = {**old, "prompts": "default", "prompts_sha256": default_prompts().sha256}
    check_resume(old, new, tmp_path / "run.json", environ={})
    with pytest.raises(BadInput, match="prompts: 'default' \\(recorded\\) vs 'paper' \\(now\\)"):
        check_resume(old, {**new, "prompts": "paper"}, tmp_path / "run.json", environ={})


def test_a_dollar_sign_in_the_preamble_is_written_as_the_error_says(tmp_path):
    """"$5" in preamble.txt is refused with "write $$ for a dollar sign"; written so, the
    prompt sent said "$$5" (the two texts given no placeholder were inserted raw)."""
    (tmp_path / "preamble.txt").write_text("Each lookup costs $$5.")
    prompts = load_prompts(str(tmp_path))
    machine = Machine(KGSet([dylan_kg()]), prompts=prompts)
    root = machine.root(Subgraph().with_entities([dylan_kg().entities["Q392"]]))
    sent = machine.prompt("who is the mother of Bob Dylan", root)
    assert "Each lookup costs $5." in sent and "$$5" not in sent


def test_value_examples_with_a_prompt_set_without_their_place_are_refused():
    """The paper set's F.5 has no $preamble, where --value-examples puts its examples: the flag
    changed nothing, in silence."""
    from traversals.api import SearchConfig, build_solver
    from traversals.errors import BadInput
    from traversals.llm.scripted import ScriptedLLM

    from .kgdouble import dylan_kg

    with pytest.raises(BadInput, match=r"--value-examples .*'paper' prompt set's evaluate_answer"):
        build_solver("tree", ScriptedLLM([]), [dylan_kg()], SearchConfig(prompts="paper", value_examples=True,
                                                                           decoding="sampled"))
    build_solver("tree", ScriptedLLM([]), [dylan_kg()], SearchConfig(value_examples=True, decoding="sampled"))


def test_prompts_exported_to_a_folder_named_like_a_built_in_set_are_told_apart(tmp_path, monkeypatch, capsys):
    """`prompts --export default` said "then pass --prompts default", which is the built-in set: the
    edits were never used, in silence. A byte-order mark (a Windows editor's) went to the model."""
    from traversals.cli import main
    from traversals.errors import TraversalsWarning

    monkeypatch.chdir(tmp_path)
    assert main(["prompts", "--export", "default"]) == 0
    assert "then pass --prompts ./default" in capsys.readouterr().out
    with pytest.warns(TraversalsWarning, match=r"pass --prompts \./default for the folder's"):
        assert load_prompts("default").name == "default"
    (tmp_path / "default" / "cot.txt").write_text("\ufeffAnswer: $query", encoding="utf-8")
    assert load_prompts("./default").text("cot") == "Answer: $query"


@pytest.mark.parametrize("strategy", ["tree", "chain", "cot", "mcts", "beam", "retrieve"])
async def test_a_strategy_sends_no_prompt_but_those_it_is_said_to_read(strategy, tmp_path):
    """PROMPTS_READ, which refuses a set that changes nothing a strategy sends, leaves none
    out: every other prompt replaced by a marked one, no marked prompt is sent."""
    from traversals.options import PROMPTS_READ

    assert set().union(*PROMPTS_READ.values()) == set(VARIABLES)  # each prompt is some strategy's
    for name in set(VARIABLES) - PROMPTS_READ[strategy]:
        (tmp_path / f"{name}.txt").write_text("UNREAD " + default_prompts().text(name))
    llm = ScriptedLLM(lambda prompt, prefix, n, t: ["ANSWER: Beatrice Stone"] * n,
                      score=lambda prompt, options, prefix: [0.0] * len(options))
    config = SearchConfig(prompts=str(tmp_path), embedder="lexical", **({"k": 1} if strategy == "chain" else {}))
    await build_solver(strategy, llm, [dylan_kg()], config).ask("Who is [Bob Dylan]'s mother?")
    assert llm.calls and not [c.prompt for c in llm.calls if "UNREAD" in c.prompt + (c.prefix or "")]


@pytest.mark.parametrize("strategy, files, refused", [
    ("cot", {}, "--prompts paper replaces prompts only tree/chain send (context, default, evaluate, evaluate_answer, "
                "preamble, selecting_entities, selecting_relation), none that --strategy cot sends; drop it or "
                "pick tree/chain"),
    ("mcts", {}, "none that --strategy mcts sends"),
    ("beam", {}, "none that --strategy beam sends"),
    ("retrieve", {}, "none that --strategy retrieve sends"),
    ("tree", {"cot.txt": "Mine: $query"}, "replaces prompts only cot send (cot), none that --strategy tree sends"),
    ("cot", {"link_entity.txt": "$mention $options"},
     "replaces prompts only tree/chain/mcts/beam/retrieve send (link_entity), none that --strategy cot sends"),
])
def test_a_prompt_set_a_strategy_sends_nothing_of_is_refused(strategy, files, refused, tmp_path, capsys, monkeypatch):
    """`--prompts paper` with cot, mcts, beam or retrieve was accepted and changed nothing,
    while run.json recorded the set and its digest as used."""
    from traversals.llm import factory as llm_factory

    monkeypatch.setattr(llm_factory, "open_llm", lambda *a, **k: pytest.fail("the LLM was opened"))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    given = str(tmp_path) if files else "paper"
    embedder = ["--embedder", "lexical"] if strategy in ("mcts", "beam", "retrieve") else []
    assert main(["ask", "q?", "--strategy", strategy, "--prompts", given, *embedder]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: --prompts {given} " in err and refused in err
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "q?", "answers": ["x"]}\n')
    assert main(["eval", "questions", "--data", str(questions), "--kg", "demo", "--strategy", strategy,
                 "--prompts", given, *embedder, "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert refused in capsys.readouterr().err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("strategy, files", [
    ("tree", {}), ("chain", {}),  # paper: Appendix F's
    ("cot", {"cot.txt": "Mine: $query", "rwt_guess.txt": "$question"}),  # one prompt of its own is enough
    ("mcts", {"link_entity.txt": "$mention $options"}),  # entity linking is every KG strategy's
])
def test_a_prompt_set_that_replaces_a_prompt_the_strategy_sends_is_accepted(strategy, files, tmp_path, capsys,
                                                                              monkeypatch):
    from traversals.llm import factory as llm_factory

    class Opened(Exception):
        pass

    def opened(*a, **k):
        raise Opened

    monkeypatch.setattr(llm_factory, "open_llm", opened)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(Opened):  # past every check, to the LLM
        main(["ask", "q?", "--strategy", strategy, "--prompts", str(tmp_path) if files else "paper",
              *(["--embedder", "lexical"] if strategy == "mcts" else [])])
