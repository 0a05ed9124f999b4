"""Static HTML views of search traces: ``traversals view``.

A trace (``ask --trace FILE``, or ``traces/*.json`` of an evaluation run) becomes one
self-contained page: the question, the answer and what it cost, then the search tree —
every node with its state, the action that made it, its value, the policy's option
probabilities, the edges it added and its own LLM/KG usage. The path from the root to
the chosen answer is marked, so backtracking and the branches that lost show at a glance.
Reasoning-with-Trees traces (``mcts``, ``beam``) show, per state, its hop, the policy's
prior ``P(s, a)``, the MCTS visits ``N`` and ``Q = W / N``, the value ``V̂`` (Eq. 4) and the
answer value of a trained roll-out model; the relations MCTS offered but never walked
collapse into one line per state, with their priors; the page's header gives the
simulations or hops, the roll-out model, the critical model's embedder and the LLM's
guessed answers it compares states with. A ``retrieve`` trace has no tree: its page lists
the ranked facts the LLM was given, with their similarity to the question, and the reply.
An evaluation run directory becomes an index page (one row per question: answer, gold,
Hits@1, value, costs; failures are easy to scan) linking to one page per question.

No JavaScript, no external assets: the pages open from disk and can be attached to an
issue. Every string from the KG or the LLM is escaped, and so is every other field of a trace (a
hand-edited one may hold markup where numbers belong); a trace damaged in its fields is one
clear error (a run lists its question without a page), not a traceback.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from .errors import BadInput
from .eval.runfiles import read_results
from .search.events import action_parts

__all__ = ["answer_node_id", "render_run", "render_trace", "write_run_view", "write_trace_view"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
h1{font-size:1.3em;margin:.2em 0}.meta{color:#555}.meta b{color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4}tr.miss td{background:#fff3f3}tr.hit td{background:#f3fff3}tr.err td{background:#fff8e0}
ul.tree{list-style:none;padding-left:1.2em;border-left:1px dotted #bbb;margin:0}
ul.tree.root{border-left:none;padding-left:0}
li.node{margin:.15em 0}
.line{display:inline-block;padding:.05em .4em;border-radius:3px}
.on-path>.line,.on-path>details>summary>.line{background:#e8f0ff;outline:1px solid #7aa2e8}
.answer-node>.line,.answer-node>details>summary>.line{background:#d9f5d9;outline:2px solid #3a3}
.invalid .line{color:#a33;text-decoration:line-through}.never-walked .line{font-style:italic}
.st{font-size:.8em;color:#fff;border-radius:3px;padding:0 .3em;margin-right:.3em}
.st-default{background:#777}.st-selecting-entities{background:#b07b00}.st-selecting-relation{background:#6a4fb0}.st-done{background:#2a8a2a}
.act{font-weight:600}.val{color:#05a}.cost{color:#888;font-size:.85em}.note{color:#a60;font-size:.85em}
details>summary{cursor:pointer;list-style:none}details>summary::-webkit-details-marker{display:none}
.detail{margin:.2em 0 .4em 1.5em;font-size:.9em;color:#333}
code{background:#f6f6f6;padding:0 .2em}
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _fmt_value(v: Any) -> str:
    """A value to three decimals; anything but a number (a hand-edited trace) as text, escaped."""
    if v is None:
        return "–"
    return f"{v:.3f}" if isinstance(v, (int, float)) else _e(v)


def answer_node_id(trace: dict) -> int | None:
    """The node whose answer the search returned: ``trace["answer_node"]`` when recorded,
    else the same rule the tree search uses (highest value, then the earliest)."""
    if "answer_node" in trace:
        return trace["answer_node"]
    done = [n for n in trace.get("nodes", []) if n.get("state") == "done"]
    if not done:
        return None
    return max(done, key=lambda n: (n.get("value") or 0.0, -n["id"]))["id"]


def _action_summary(action: dict | None) -> str:
    kind, what = action_parts(action)
    return f'<span class="act">{_e(kind)}</span> {_e(what)}'


def _edge(e: dict) -> str:
    kg = f' <span class="cost">[{_e(e.get("kg"))}]</span>' if e.get("kg") else ""
    return (f'({_e(e["subject"]["label"])}) —[{_e(e["relation"]["label"])}]→ '
            f'({_e(e["object"]["label"])}){kg}')


#: node fields rendered on purpose; any other scalar field is listed in the node's details
_SHOWN = {"id", "parent", "depth", "state", "action", "value", "answer_value", "expansion", "invalid", "usage",
          "priors", "new_edges", "selected", "relation_options", "entities", "entity_count", "prior", "visits", "q",
          "rollout", "critical", "note"}


def _is_rwt(n: dict) -> bool:
    """A Reasoning-with-Trees state (mcts, beam): it carries MCTS statistics."""
    return "visits" in n


def _never_walked(n: dict, children: dict[int | None, list[dict]]) -> bool:
    """An MCTS child created when its parent was expanded but never selected."""
    return (_is_rwt(n) and n.get("parent") is not None and not n.get("visits") and n.get("value") is None
            and not n.get("entities") and not children.get(n["id"]))


def _search_stats(n: dict) -> str:
    """hop, prior, visits and Q of a RwT state (visits and Q only once MCTS visited it:
    beam search does not count visits); the prior alone for a tree node that has one."""
    stats = [f'hop {_e(n.get("depth"))}'] if _is_rwt(n) else []
    if n.get("prior") is not None and n.get("parent") is not None:  # the root's 1.0 says nothing
        stats.append(f'prior {_fmt_value(n["prior"])}')
    if n.get("visits"):
        stats.append(f'visits {_e(n["visits"])} · Q {_fmt_value(n.get("q"))}')
    return " · ".join(stats)


def _node_details(n: dict) -> list[str]:
    out = []
    if n.get("priors"):
        ranked = sorted(n["priors"].items(), key=lambda kv: -kv[1] if isinstance(kv[1], (int, float)) else 0.0)
        out.append("options: " + ", ".join(f"{_e(k)} <span class=val>{_fmt_value(v)}</span>" for k, v in ranked))
    if n.get("new_edges"):
        out.append("new edges:<br>" + "<br>".join(_edge(e) for e in n["new_edges"]))
    if n.get("selected"):
        out.append("selected: " + _e(", ".join(n["selected"])))
    if n.get("relation_options") is not None:
        out.append(f"relation options offered: {_e(n['relation_options'])}")
    parts = [f"{name} <span class=val>{_fmt_value(n[key])}</span>"  # RwT: the two parts of V̂ (Eq. 4)
             for key, name in (("rollout", "roll-out"), ("critical", "critical")) if n.get(key) is not None]
    if parts:
        out.append("value = mix of " + " and ".join(parts))
    if n.get("entities"):  # RwT states: the entities the path reached (a trace keeps the first 20)
        shown, total = len(n["entities"]), n.get("entity_count")
        count = (f"first {shown} of {total}" if isinstance(total, int) and total > shown
                 else "first 20" if total is None and shown >= 20 else shown)
        out.append(f"entities ({count}): " + _e(", ".join(n["entities"])))
    other = [f"{_e(k)} {_e(json.dumps(v) if not isinstance(v, str) else v)}" for k, v in n.items()
             if k not in _SHOWN and (v is None or isinstance(v, (str, int, float, bool)))]
    if other:
        out.append(" · ".join(other))
    if n.get("note"):
        out.append(f'<span class="note">{_e(n["note"])}</span>')
    return out


def _never_walked_line(nodes: list[dict]) -> str:
    """One line for the relations MCTS offered at a state but never walked, best prior first."""
    ranked = sorted(nodes, key=lambda n: (-(n.get("prior") or 0.0), n["id"]))
    listed = ", ".join(f'{_e(action_parts(n.get("action"))[1])} <span class="val">{_fmt_value(n.get("prior"))}</span>'
                       for n in ranked)
    return (f'<li class="node never-walked"><span class="line cost">{len(ranked)} relation'
            f'{"s" if len(ranked) != 1 else ""} offered, never walked (prior): {listed}</span></li>')


def _render_node(n: dict, children: dict[int | None, list[dict]], path: set[int], answer_id: int | None) -> str:
    classes = ["node"]
    if n["id"] in path:
        classes.append("on-path")
    if n["id"] == answer_id:
        classes.append("answer-node")
    if n.get("invalid"):
        classes.append("invalid")
    u = n.get("usage") or {}
    embedded = f', {_e(u["embedder_calls"])} embedder calls' if u.get("embedder_calls") else ""  # the critical model's
    expansion = f' · expanded {_e(n["expansion"])}.' if n.get("expansion") else ""
    stats = _search_stats(n)
    answer_value = ("" if n.get("answer_value") is None
                    else f' · <span class="val">answer value {_fmt_value(n["answer_value"])}</span>')
    line = (
        f'<span class="line"><span class="st st-{_e(n.get("state"))}">{_e(n.get("state"))}</span>'
        f'#{n["id"]} {_action_summary(n.get("action"))} · <span class="val">value {_fmt_value(n.get("value"))}</span>'
        f'{answer_value}{" · " + stats if stats else ""}'
        f'<span class="cost">{expansion} · {_e(u.get("llm_calls", 0))} LLM calls, '
        f'{_e(u.get("computed_prompt_tokens", u.get("prompt_tokens", 0)))} tokens computed, '
        f'{_e(u.get("kg_calls", 0))} KG calls{embedded}</span></span>'
    )
    details = _node_details(n)
    body = line if not details else (
        f'<details><summary>{line}</summary><div class="detail">{"<br>".join(details)}</div></details>'
    )
    kids = children.get(n["id"], [])
    idle = [c for c in kids if _never_walked(c, children) and c["id"] not in path]
    shown = [c for c in kids if c not in idle]
    items = [_render_node(c, children, path, answer_id) for c in shown] + ([_never_walked_line(idle)] if idle else [])
    sub = "" if not items else '<ul class="tree">' + "".join(items) + "</ul>"
    return f'<li class="{" ".join(classes)}">{body}{sub}</li>'


def _path_to(nodes: dict[int, dict], node_id: int | None) -> set[int]:
    path: set[int] = set()
    while node_id is not None and node_id in nodes and node_id not in path:
        path.add(node_id)
        node_id = nodes[node_id].get("parent")
    return path


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")


def render_trace(trace: dict, *, result: dict | None = None, back_link: str | None = None) -> str:
    """One trace as an HTML page. ``result`` (a ``results.jsonl`` row) adds gold and
    metrics; ``back_link`` a link to the run's index."""
    nodes = {n["id"]: n for n in trace.get("nodes", [])}
    children: dict[int | None, list[dict]] = {}
    for n in sorted(nodes.values(), key=lambda n: n["id"]):
        children.setdefault(n.get("parent"), []).append(n)
    answer_id = answer_node_id(trace)
    path = _path_to(nodes, answer_id)

    parts = []
    if back_link:
        parts.append(f'<p><a href="{_e(back_link)}">← all questions</a></p>')
    parts.append(f'<h1>{_e(trace.get("question"))}</h1>')
    meta = [f'answer <b>{_e(trace.get("answer"))}</b>', f'value {_fmt_value(trace.get("value"))}']
    if result is not None:
        meta.append("gold " + _e(" | ".join("/".join(g) if isinstance(g, list) else str(g) for g in result.get("gold", []))))
        meta.append(f'Hits@1 {_e(result.get("hits@1", "–"))}')
    meta += [f'{_e(trace.get("strategy", ""))} · {_e(trace.get("decoding", ""))} decoding']
    if "expansions" in trace:
        meta.append(f'{_e(trace["expansions"])} expansions, stopped: {_e(trace.get("stopped"))}')
    rwt_stop = f', stopped: {_e(trace["stopped"])}' if trace.get("stopped") and "expansions" not in trace else ""
    if "simulations" in trace:  # mcts
        meta.append(f'{_e(trace["simulations"])} simulations{rwt_stop}')
    elif "hops" in trace:  # beam
        meta.append(f'{_e(trace["hops"])} hops{rwt_stop}')
    if trace.get("rollout") or trace.get("embedder"):
        meta.append(f'roll-out model {_e(trace.get("rollout", "–"))} · critical model embedder '
                    f'{_e(trace.get("embedder", "–"))}')
    if trace.get("guesses") is not None:
        meta.append("the LLM's guessed answers (the critical model's reference): "
                    + (_e(", ".join(map(str, trace["guesses"]))) or "none"))
    u = trace.get("usage") or {}
    if u:
        meta.append(f'{_e(u.get("llm_calls", 0))} LLM calls · {_e(u.get("prompt_tokens", 0))} prompt tokens sent, '
                    f'{_e(u.get("computed_prompt_tokens", "–"))} computed · {_e(u.get("kg_calls", 0))} KG calls'
                    + (f' · {_e(u["embedder_calls"])} embedder calls ({_e(u.get("embedded_texts", 0))} texts'
                       + (f', {_e(u["embedding_tokens"])} tokens' if u.get("embedding_tokens") else "") + ")"
                       if u.get("embedder_calls") else ""))
    parts.append('<p class="meta">' + "<br>".join(meta) + "</p>")
    error = trace.get("error") or (result or {}).get("error")
    if error:  # an error row's trace: what failed, and where (an unexpected exception's traceback)
        parts.append(f'<p class="note"><b>This question failed:</b> {_e(error)}</p>')
        if trace.get("traceback"):
            parts.append(f'<pre>{_e(trace["traceback"])}</pre>')
    if trace.get("linked_entities"):
        parts.append('<p class="meta">linked: ' + ", ".join(
            f'{_e(e.get("label"))} <code>{_e(e.get("id"))}</code>' for e in trace["linked_entities"]) + "</p>")
    if trace.get("config"):
        parts.append('<p class="meta">config: ' + ", ".join(f"{_e(k)}={_e(v)}" for k, v in trace["config"].items()) + "</p>")
    facts = trace.get("facts")
    if isinstance(facts, list):  # retrieve: the ranked facts its one prompt listed
        parts.append(_facts_table(facts, trace))
    if isinstance(trace.get("raw"), str):  # cot, retrieve: the LLM's one reply
        parts.append(f'<p class="meta">the LLM\'s reply:</p><pre>{_e(trace["raw"])}</pre>')
    for note in trace.get("notes") or []:
        parts.append(f'<p class="note">{_e(note)}</p>')
    if nodes:
        parts.append('<p class="meta">Blue: the path to the returned answer (green). Click a node for its option '
                     'probabilities, new edges and notes.</p>')
        if any(_is_rwt(n) for n in nodes.values()):
            counted = "; visits: N; Q: W / N" if any(n.get("visits") for n in nodes.values()) else ""
            parts.append('<p class="meta">value: V̂ of the state (Eq. 4: roll-out and critical model mixed); '
                         f"prior: the policy's P(s, a) of the relation that led here{counted}.</p>")
        parts.append('<ul class="tree root">' + "".join(
            _render_node(n, children, path, answer_id) for n in children.get(None, [])) + "</ul>")
    elif error:
        parts.append("<p>No search tree (the search failed before it could be recorded).</p>")
    elif isinstance(facts, list):
        parts.append("<p>No search tree (this strategy ranks the KG's facts and asks the LLM once).</p>")
    else:
        parts.append("<p>No search tree (this strategy does not search a KG).</p>")
    return _page(str(trace.get("question", "trace")), "\n".join(parts))


def _facts_table(facts: list, trace: dict) -> str:
    """retrieve's facts, most similar to the question first, with their scores and hops."""
    rows = "".join(
        f'<tr><td>{_e(f.get("rank"))}</td><td class="val">{_fmt_value(f.get("score"))}</td>'
        f'<td>{_e(f.get("hop"))}</td><td>{_e(f.get("fact"))}</td></tr>'
        for f in facts if isinstance(f, dict))
    retrieved = trace.get("retrieved")
    of = f" of the {_e(retrieved)} retrieved" if retrieved is not None else ""
    head = (f'<p class="meta">facts given to the LLM{of}, the most similar to the question first '
            f'(embedder {_e(trace.get("embedder", "–"))}):</p>')
    if not rows:
        return head + "<p>none</p>"
    table = f"<table><tr><th>#</th><th>score</th><th>hop</th><th>fact</th></tr>{rows}</table>"
    listed = trace.get("listed")
    if isinstance(listed, list) and listed != [f.get("fact") for f in facts if isinstance(f, dict)]:
        table += ('<p class="meta">as the prompt listed them, each fact of a later hop after the facts of its walk:</p>'
                  f'<pre>{_e(chr(10).join(str(line) for line in listed))}</pre>')
    return head + table


def write_trace_view(trace_path: Path, out: Path | None = None) -> Path:
    """``TRACE.html`` (or ``out``) beside a trace file; :class:`BadInput` if it is not one."""
    try:
        trace = json.loads(Path(trace_path).read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(f"{trace_path} is not a trace written by --trace or traversals eval ({exc})") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("nodes", []), list) or "question" not in trace:
        raise BadInput(f"{trace_path} is not a trace written by --trace or traversals eval (no question and nodes)")
    if not all(isinstance(n, dict) and isinstance(n.get("id"), int) for n in trace.get("nodes", [])):
        raise BadInput(f"{trace_path} is not a trace written by --trace or traversals eval (a node without an id)")
    default = Path(trace_path).with_suffix(".html")
    out = default if out is None else (out / default.name if out.is_dir() else out)  # --out DIR: DIR/TRACE.html
    if out.resolve() == Path(trace_path).resolve() or out.suffix.lower() in (".json", ".jsonl"):
        raise BadInput(f"--out {out} would write the page over a trace (JSON); name an .html file or a folder")
    page = _render_checked(trace)
    if page is None:
        raise BadInput(f"{trace_path} is not a trace written by --trace or traversals eval (a field of the wrong "
                       "shape, or a tree too deep to draw)")
    _write(out, page)
    return out


def _render_checked(trace: dict, **kwargs: Any) -> str | None:
    """:func:`render_trace`, or None when the trace is damaged in a way the checks of its
    outline do not see (a field of another type, as a hand-edited trace may have; a chain
    of nodes thousands deep)."""
    try:
        return render_trace(trace, **kwargs)
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError):
        return None


def _write(path: Path, text: str) -> None:
    """Write a page, its folder made if missing; :class:`BadInput` when that cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    except OSError as e:
        raise BadInput(f"cannot write {path} ({e.strerror or type(e).__name__})") from None


def render_run(rows: list[dict], *, title: str, links: dict[str, str], summary: dict | None = None) -> str:
    """The index page of a run: one row per question, linking to its trace page."""
    parts = [f"<h1>{_e(title)}</h1>"]
    if summary:
        keys = ("n", "hits@1", "em_in", "f1", "mean_llm_calls", "mean_computed_prompt_tokens", "mean_seconds")
        parts.append('<p class="meta">' + " · ".join(f"{k} <b>{_e(summary[k])}</b>" for k in keys if k in summary) + "</p>")
    head = "<tr><th>#</th><th>question</th><th>answer</th><th>gold</th><th>Hits@1</th><th>value</th><th>LLM calls</th><th>s</th></tr>"
    body = []
    for i, r in enumerate(rows, 1):
        cls = "err" if r.get("error") else ("hit" if r.get("hits@1") else "miss")
        gold = " | ".join("/".join(g) if isinstance(g, list) else str(g) for g in r.get("gold", []))
        q = _e(r.get("question"))
        link = links.get(r.get("id", ""))
        q = f'<a href="{_e(link)}">{q}</a>' if link else q
        answer = _e(r.get("answer")) if not r.get("error") else f'<span class="note">{_e(r["error"])}</span>'
        body.append(
            f'<tr class="{cls}"><td>{i}</td><td>{q}</td><td>{answer}</td><td>{_e(gold)}</td>'
            f'<td>{_e(r.get("hits@1"))}</td><td>{_fmt_value(r.get("value"))}</td><td>{_e(r.get("llm_calls"))}</td>'
            f'<td>{_e(r.get("seconds"))}</td></tr>'
        )
    parts.append(f"<table>{head}{''.join(body)}</table>")
    return _page(title, "\n".join(parts))


def write_run_view(run_dir: Path, out_dir: Path | None = None) -> Path:
    """``run_dir/view/index.html`` plus one page per question that has a trace."""
    run_dir = Path(run_dir)
    out_dir = out_dir or run_dir / "view"
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"--out {out_dir} is a file: a run's view is a folder (index.html and a page per question)")
    rows = read_results(run_dir / "results.jsonl")
    links: dict[str, str] = {}
    for r in rows:
        rel = r.get("trace")
        if not rel or not (run_dir / rel).is_file():
            continue
        trace = _read_json(run_dir / rel)
        if not isinstance(trace, dict) or not isinstance(trace.get("nodes", []), list) or not all(
                isinstance(n, dict) and isinstance(n.get("id"), int) for n in trace.get("nodes", [])):
            continue  # a damaged trace: the question is listed without a link, as `report` reads it as none
        page = Path(rel).with_suffix(".html").name
        html_page = _render_checked(trace, result=r, back_link="index.html")
        if html_page is None:
            continue  # damaged in its fields: listed without a link too
        _write(out_dir / page, html_page)
        links[r["id"]] = page
    # the header counts the rows listed, as `report` does (summary.json may be an earlier
    # invocation's: a resume stopped before its own summary)
    from .eval.report import load_run

    try:
        run = load_run(run_dir)
        summary: dict | None = run.summary.to_json()
        title = f"{run.dataset} · {run.strategy}"
    except BadInput:
        summary, title = None, run_dir.name
    index = out_dir / "index.html"
    _write(index, render_run(rows, title=title, links=links, summary=summary))
    return index


def _read_json(path: Path) -> object:
    """A JSON file of a run, or None when it cannot be read as one."""
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
