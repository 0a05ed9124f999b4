"""HTML views of traces and runs (traversals.viewer, `traversals view`): the returned
answer's path is marked, KG/LLM text is escaped, old traces without ``answer_node`` still
find their answer, a run's index links every traced question and survives a half-written
last line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

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
    assert "entities: Ann, Bob &quot;The Bard&quot;" in page and "prior 0.700 · visits 3 · Q 0.450" in page


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
    (run / "summary.json").write_text(json.dumps({"dataset": "toy", "strategy": "tree", "n": 2, "hits@1": 0.5}))
    index = write_run_view(run)
    page = index.read_text()
    assert index == run / "view" / "index.html"
    assert page.count("<tr class=") == 2 and 'class="hit"' in page and 'class="miss"' in page
    assert '<a href="q1.html">Who wrote it?</a>' in page and "Who else?</td>" in page  # no trace: no link
    assert "toy · tree" in page and "hits@1 <b>0.5</b>" in page
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
