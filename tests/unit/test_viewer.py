"""HTML views of traces and runs (traversals.viewer, `traversals view`): the returned
answer's path is marked, KG/LLM text is escaped, old traces without ``answer_node`` still
find their answer, a run's index links every traced question and survives a half-written
last line; MCTS and beam traces show hops, priors, visits, Q, the relations never walked,
the simulations or hops and the critical model's guesses, and their runs index like any."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from traversals.eval.datasets import Dataset, Gold, Question
from traversals.eval.runner import run_eval
from traversals.kg.factory import open_kgs
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.rwt import HopBeamSearch, MonteCarloTreeSearch, RwTConfig
from traversals.viewer import answer_node_id, render_trace, write_run_view

EVIL = 'Bob "The Bard" <script>alert(1)</script> & co'


def node(id, parent, state, action=None, value=None, **extra):
    return {"id": id, "parent": parent, "depth": 0 if parent is None else 1, "state": state, "action": action,
            "value": value, "expansion": None, "invalid": False,
            "usage": {"llm_calls": 1, "prompt_tokens": 10, "computed_prompt_tokens": 4, "kg_calls": 0}, **extra}


def trace(**extra) -> dict:
    return {
        "question": f"Who wrote {EVIL}?", "answer": "Ann", "value": 0.6, "strategy": "tree", "decoding": "constrained",
        "expansions": 2, "stopped": "max_expansions", "usage": {"llm_calls": 4},
        "nodes": [
            node(0, None, "default"),
            node(1, 0, "default", {"type": "SELECT_RELATION", "relation": {"key": "P50", "label": "author", "kg": "wd"}},
                 0.5, new_edges=[{"subject": {"label": EVIL}, "relation": {"label": "author"}, "object": {"label": "Ann"},
                                  "kg": "wd"}], priors={"P50 - author": 0.8, "P57 - director": 0.2}),
            node(2, 1, "done", {"type": "ANSWER", "text": "Ann"}, 0.6, answer="Ann"),
            node(3, 0, "done", {"type": "ANSWER", "text": EVIL}, 0.6, answer=EVIL),
        ],
        **extra,
    }


def classes_of(page: str, node_id: int) -> set[str]:
    m = re.search(r'<li class="([^"]*)">(?:<details><summary>)?<span class="line"><span class="st [^"]*">[^<]*</span>#'
                  + str(node_id) + r"\b", page)
    assert m, f"node {node_id} not rendered"
    return set(m.group(1).split())


def test_the_answer_path_is_marked_and_other_branches_are_not():
    page = render_trace(trace(answer_node=2))
    assert {"on-path", "answer-node"} <= classes_of(page, 2)
    assert "on-path" in classes_of(page, 1) and "on-path" in classes_of(page, 0)
    assert classes_of(page, 3) == {"node"}
    assert "P50 - author" in page and "0.800" in page  # the policy's option probabilities


def test_rwt_states_show_their_entities_and_search_statistics():
    t = trace(answer_node=2)
    t["nodes"][1].update(entities=["Ann", EVIL], prior=0.7, visits=3, q=0.45)
    page = render_trace(t)
    assert "entities (2): Ann, Bob &quot;The Bard&quot;" in page and "hop 1 · prior 0.700 · visits 3 · Q 0.450" in page


def test_rwt_states_show_both_parts_of_their_value_and_how_many_entities_they_reached():
    t = trace(answer_node=2)
    t["nodes"][1].update(entities=[f"film {i}" for i in range(20)], entity_count=57, prior=0.7, visits=3, q=0.45,
                         rollout=0.8, critical=0.25)
    page = text_of(render_trace(t))
    assert "entities (first 20 of 57): film 0, film 1" in page
    assert "value = mix of roll-out 0.800 and critical 0.250" in page
    assert "rollout 0.8" not in page  # shown on purpose, not again among the unknown fields


def test_kg_and_llm_text_is_escaped():
    page = render_trace(trace(answer_node=2))
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&quot;The Bard&quot;" in page


def test_old_traces_without_answer_node_use_the_searchs_own_rule():
    assert answer_node_id(trace()) == 2  # equal values 0.6: the earliest node, as the tree search picks
    assert answer_node_id({"nodes": [node(0, None, "default")]}) is None
    assert "No search tree" in render_trace({"question": "q", "answer": "a", "nodes": []})


def test_a_run_view_links_each_traced_question_and_ignores_a_half_written_line(tmp_path):
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "traces" / "q1.json").write_text(json.dumps(trace(answer_node=2)))
    rows = [
        {"id": "d:1", "question": "Who wrote it?", "answer": "Ann", "gold": [["Ann"]], "hits@1": 1.0, "value": 0.6,
         "llm_calls": 4, "seconds": 1.0, "error": None, "trace": "traces/q1.json"},
        {"id": "d:2", "question": "Who else?", "answer": "Bo", "gold": [["Cy"]], "hits@1": 0.0, "value": 0.1,
         "llm_calls": 2, "seconds": 1.0, "error": None, "trace": "traces/missing.json"},
    ]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "d:3", "quest')
    (run / "run.json").write_text(json.dumps({"dataset": "toy", "strategy": "tree", "selected": 3}))
    # an earlier invocation's summary: the header counts the rows listed (it showed this one's)
    (run / "summary.json").write_text(json.dumps({"dataset": "toy", "strategy": "tree", "n": 1, "hits@1": 1.0}))
    index = write_run_view(run)
    page = index.read_text()
    assert index == run / "view" / "index.html"
    assert page.count("<tr class=") == 2 and 'class="hit"' in page and 'class="miss"' in page
    assert '<a href="q1.html">Who wrote it?</a>' in page and "Who else?</td>" in page  # no trace: no link
    assert "toy · tree" in page and "n <b>2</b>" in page and "hits@1 <b>0.5</b>" in page
    assert 'href="index.html"' in (run / "view" / "q1.html").read_text()


def test_the_command_writes_a_page_and_refuses_what_is_not_a_trace(tmp_path):
    exe = [sys.executable, "-m", "traversals.cli"]
    t = tmp_path / "trace.json"
    t.write_text(json.dumps(trace(answer_node=2)))
    done = subprocess.run([*exe, "view", str(t)], capture_output=True, text=True)
    assert done.returncode == 0 and Path(done.stdout.strip()) == tmp_path / "trace.html"
    assert "answer-node" in (tmp_path / "trace.html").read_text()
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"question": "q", "nodes": [5]}))
    for target, says in ((bad, "not a trace"), (odd, "a node without an id"), (tmp_path / "nope", "no such file"),
                         (tmp_path, "no results.jsonl")):
        done = subprocess.run([*exe, "view", str(target)], capture_output=True, text=True)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


GRANDMOTHER = "Who is Bob Dylan's maternal grandmother?"


def rwt_search(cls, **cfg):
    """RwT on the demo store with a scripted LLM: 'mother' is the likeliest relation and a
    state holding Florence Stone is rated high, the state on the way to her promising (as in
    test_rwt)."""
    def score(prompt, options, prefix):
        if prefix.startswith("RATING"):
            want = ("0.9" if "<current entity>[Florence Stone" in prompt
                    else "0.6" if "<current entity>[Beatrice Stone" in prompt else "0.1")
            return [0.0 if o == want else -6.0 for o in options]
        return [-0.2 if o.endswith(": mother") else -3.0 for o in options]

    guesses = ("three most likely answers", "Florence Stone, B: Beatrice Stone, C: Abram Zimmerman]")
    return cls(ScriptedLLM(rules=[guesses], score=score), KGSet(open_kgs(["demo"])), RwTConfig(**cfg))


def text_of(page: str) -> str:
    return re.sub(r"<[^>]+>", "", page)


def line_of(page: str, node_id: int) -> str:
    m = re.search(r'<span class="line"><span class="st [^"]*">[^<]*</span>#' + str(node_id) + r"\b(.*?)</span></span>", page)
    assert m, f"node {node_id} not rendered"
    return m.group(1)


async def test_an_mcts_page_shows_the_search_statistics_and_folds_relations_never_walked():
    answer = await rwt_search(MonteCarloTreeSearch, simulations=6, max_hops=2).ask(GRANDMOTHER, topic_entities=["Bob Dylan"])
    t = answer.trace
    page = render_trace(t)
    nodes = {n["id"]: n for n in t["nodes"]}
    best = nodes[t["answer_node"]]
    assert f"6 simulations, stopped: {t['stopped']}" in page and t["stopped"] in ("simulations", "exhausted")
    assert "roll-out model LLMRollout · critical model embedder lexical" in page
    assert "the critical model's reference): Florence Stone, Beatrice Stone, Abram Zimmerman" in page
    assert {"on-path", "answer-node"} <= classes_of(page, best["id"])
    assert (f'hop 2 · prior {best["prior"]:.3f} · visits {best["visits"]} · Q {best["q"]:.3f}' in line_of(page, best["id"]))
    assert "prior" not in line_of(page, 0) and f'visits {nodes[0]["visits"]}' in line_of(page, 0)  # the root's 1.0 hidden
    # children created by an expansion but never selected: one line per state, not one node each
    idle = [n for n in nodes.values() if n["parent"] == 0 and not n["visits"]]
    assert len(idle) > 5 and all(f"#{n['id']} " not in page for n in idle)
    assert f"{len(idle)} relations offered, never walked (prior): occupation (demo) 0.031, award" in text_of(page)
    assert page.count('class="node never-walked"') == 2  # under the root and under the mother state


async def test_a_beam_page_shows_hops_and_priors_but_no_visits_beam_does_not_count():
    answer = await rwt_search(HopBeamSearch, beam_width=2, beam_branch=2, max_hops=2).ask(GRANDMOTHER, topic_entities=["Bob Dylan"])
    page = render_trace(answer.trace)
    assert "2 hops, stopped: max_hops" in page and "visits" not in page and "never walked" not in page
    for n in answer.trace["nodes"][1:]:
        assert f'hop {n["depth"]} · prior {n["prior"]:.3f}' in line_of(page, n["id"])


def test_rwt_fields_from_the_kg_and_the_llm_are_escaped_and_unknown_fields_still_show():
    root = node(0, None, "default", entities=["Bob"], prior=1.0, visits=2, q=0.5)
    walked = node(1, 0, "default", {"type": "SELECT_RELATION", "relation": {"key": "r", "label": "author", "kg": "x"}},
                  0.4, entities=[EVIL], prior=0.6, visits=2, q=0.4, answer_value=0.75, critical=0.25, hint=EVIL)
    idle = node(2, 0, "default", {"type": "SELECT_RELATION", "relation": {"key": "e", "label": EVIL, "kg": "x"}},
                entities=[], prior=0.4, visits=0, q=0.0)
    page = render_trace({"question": "q", "answer": EVIL, "strategy": "mcts", "guesses": [EVIL], "rollout": EVIL,
                         "simulations": 2, "answer_node": 1, "nodes": [root, walked, idle]})
    assert "<script>" not in page and page.count("&lt;script&gt;") == 6  # answer, guess, roll-out, entity, hint, relation
    assert "answer value 0.750" in line_of(page, 1) and "hint " in page  # a field the viewer does not know
    assert "mix of critical <span class=val>0.250</span>" in page
    assert "1 relation offered, never walked (prior): Bob &quot;The Bard&quot;" in text_of(page)


async def test_the_index_of_an_mcts_run_links_each_question_to_its_tree(tmp_path):
    questions = [Question(id="demo:1", text=GRANDMOTHER, gold=[Gold.from_json(["Florence Stone"])], topic_entities=["Bob Dylan"]),
                 Question(id="demo:2", text="Who is Bob Dylan's father?", gold=[Gold.from_json(["Abram Zimmerman"])],
                          topic_entities=["Bob Dylan"])]
    dataset = Dataset(name="demo", split="dev", questions=questions, kg_specs=["demo"])
    search = rwt_search(MonteCarloTreeSearch, simulations=4, max_hops=2)
    await run_eval(dataset, search, tmp_path / "run", progress=False, config={"strategy": "mcts", "llm": "scripted"})
    index = write_run_view(tmp_path / "run").read_text()
    assert "demo · mcts" in index and 'class="hit"' in index and 'class="miss"' in index
    assert '<a href="demo_1.html">' in index and '<a href="demo_2.html">' in index
    tree = (tmp_path / "run" / "view" / "demo_2.html").read_text()
    assert "4 simulations" in tree and "gold Abram Zimmerman" in tree and "Hits@1 0.0" in tree and "visits 4" in tree


def test_view_writes_where_out_says_and_a_damaged_run_is_one_line_or_shown_without_its_trace(tmp_path):
    exe = [sys.executable, "-m", "traversals.cli"]
    t = tmp_path / "trace.json"
    t.write_text(json.dumps(trace(answer_node=2)))
    into = tmp_path / "pages"
    into.mkdir()
    done = subprocess.run([*exe, "view", str(t), "--out", str(into)], capture_output=True, text=True)
    assert done.returncode == 0 and Path(done.stdout.strip()) == into / "trace.html"  # --out DIR: DIR/TRACE.html
    deep = tmp_path / "new" / "dir" / "t.html"
    done = subprocess.run([*exe, "view", str(t), "--out", str(deep)], capture_output=True, text=True)
    assert done.returncode == 0 and deep.is_file()

    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "traces" / "q1.json").write_text("garbage")  # a trace damaged by hand
    (run / "traces" / "q2.json").write_text(json.dumps(trace(answer_node=2)))
    rows = [{"id": f"d:{i}", "question": f"Q{i}?", "answer": "Ann", "gold": [["Ann"]], "hits@1": 1.0,
             "trace": f"traces/q{i}.json"} for i in (1, 2)]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = subprocess.run([*exe, "view", str(run)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = (run / "view" / "index.html").read_text()
    assert "Q1?</td>" in page and '<a href="q2.html">Q2?</a>' in page
    done = subprocess.run([*exe, "view", str(run), "--out", str(t)], capture_output=True, text=True)
    assert done.returncode == 2 and "is a file" in done.stderr and "Traceback" not in done.stderr


def test_numbers_of_a_hand_edited_trace_are_escaped_too():
    """Counts and values are numbers in a trace the search wrote; a trace edited by hand
    (or attached to an issue by someone else) may hold markup there as well."""
    evil_usage = {"llm_calls": EVIL, "prompt_tokens": EVIL, "computed_prompt_tokens": EVIL, "kg_calls": EVIL}
    t = trace(answer_node=2, expansions=EVIL, usage=evil_usage, value=EVIL)
    t["nodes"][1].update(usage=evil_usage, expansion=EVIL, value=EVIL, relation_options=EVIL, priors={"a": EVIL})
    page = render_trace(t, result={"gold": [["Ann"]], "hits@1": EVIL})
    assert "<script>" not in page
    assert "value Bob &quot;The Bard&quot; &lt;script&gt;" in page  # a value that is not a number is shown as text


def test_a_trace_whose_fields_have_the_wrong_shape_is_one_line_not_a_traceback(tmp_path):
    exe = [sys.executable, "-m", "traversals.cli"]
    damaged = [
        {"question": "q", "nodes": [{"id": 0, "usage": [1]}]},
        {"question": "q", "nodes": [{"id": 0, "action": "SELECT"}]},
        {"question": "q", "nodes": [{"id": 0, "parent": [1]}]},
        {"question": "q", "nodes": [{"id": 0, "new_edges": [{"subject": 1}]}]},
        {"question": "q", "answer_node": [1], "nodes": [{"id": 0}]},
        {"question": "q", "config": [1], "nodes": []},
        {"question": "q", "nodes": [{"id": i, "parent": i - 1 if i else None} for i in range(3000)]},
    ]
    for i, t in enumerate(damaged):
        path = tmp_path / f"t{i}.json"
        path.write_text(json.dumps(t))
        done = subprocess.run([*exe, "view", str(path)], capture_output=True, text=True)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (t, done.stderr[-300:])
        assert f"{path} is not a trace written by --trace or traversals eval" in done.stderr
    # in a run, such a trace is listed without its page, as a trace that is not JSON is
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "traces" / "q1.json").write_text(json.dumps(damaged[0]))
    row = {"id": "d:1", "question": "Q1?", "answer": "Ann", "gold": [["Ann"]], "hits@1": 1.0, "trace": "traces/q1.json"}
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    index = write_run_view(run)
    assert "Q1?</td>" in index.read_text() and not (run / "view" / "q1.html").exists()


def test_a_failed_questions_page_says_what_failed_and_where():
    """An error row's trace has no nodes: its page said "this strategy does not search a KG"
    (of a chain) and showed neither the error nor the traceback."""
    t = {"id": "q:1", "question": "who?", "gold": [["Ann"]], "error": "ZeroDivisionError: boom <b>",
         "traceback": "Traceback (most recent call last):\n  File \"x.py\", line 1\nZeroDivisionError: boom"}
    page = render_trace(t, result={"gold": [["Ann"]], "hits@1": 0.0, "strategy": "chain", "error": t["error"]})
    assert "This question failed:</b> ZeroDivisionError: boom &lt;b&gt;" in page and "File &quot;x.py&quot;" in page
    assert "the search failed before it could be recorded" in page and "does not search a KG" not in page


def test_view_out_never_writes_over_the_trace_and_a_trailing_slash_is_a_folder(tmp_path, capsys):
    from traversals.cli import main

    t = tmp_path / "trace.json"
    t.write_text(json.dumps(trace(answer_node=2)))
    assert main(["view", str(t), "--out", str(t)]) == 2
    assert "would write the page over a trace" in capsys.readouterr().err and json.loads(t.read_text())["nodes"]
    assert main(["view", str(t), "--out", f"{tmp_path / 'pages'}/"]) == 0
    assert (tmp_path / "pages" / "trace.html").is_file()
