"""The library as a user's own code meets it: their KG and their LLM through build_solver.

The KG and LLM are the ones in examples/ (a dict-backed KG, an LLM around a scripted
completion function), so the guide in docs/library.md runs as tested here. Then the
ways real user code misbehaves: each must end in a named error that says which of the
user's methods broke and how, or in bounded behaviour (over-long answers cut, the rest
counted in ``omitted``).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from traversals import (
    Edge,
    Edges,
    Entity,
    KGError,
    KGTimeout,
    KGUnavailable,
    LLMError,
    Relation,
    Relations,
    SearchConfig,
    TraversalsError,
    build_solver,
)
from traversals.llm.base import Usage
from traversals.search.kgset import KGSet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

from dict_kg import GRAPH, LABELS, RELATIONS, DictKG, movies_kg  # noqa: E402
from my_llm import MyLLM, toy_complete  # noqa: E402

QUESTION = "Where was the director of [Inception] born?"
PATH = [("Christopher Nolan", "born in", "London"), ("Inception", "directed by", "Christopher Nolan")]


def walked(answer: Any) -> list[tuple[str, str, str]]:
    return [(e.subject.label, e.relation.label, e.object.label) for e in answer.supporting_edges]


# -- the examples run as the guide shows them -----------------------------------------------

@pytest.mark.parametrize("args", [["dict_kg.py"], ["my_llm.py"], ["ask.py"], ["ask.py", "tree"], ["ask.py", "cot"],
                                  ["ask.py", "beam"]])
def test_every_example_script_runs(args: list[str]) -> None:
    done = subprocess.run([sys.executable, *args], cwd=EXAMPLES, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    if args[0] == "ask.py":
        assert ": London (value" in done.stdout


def test_the_guide_shows_the_examples_as_they_are() -> None:
    """docs/library.md's code blocks that name an examples/ file are that file, verbatim."""
    guide = (EXAMPLES.parent / "docs" / "library.md").read_text()
    shown = re.findall(r"```python\n# examples/(\S+)\n(.*?)```", guide, re.S)
    assert {name for name, _ in shown} == {p.name for p in EXAMPLES.glob("*.py")}
    for name, code in shown:
        assert code == (EXAMPLES / name).read_text(), f"docs/library.md shows an old examples/{name}"


@pytest.mark.parametrize("strategy", ["chain", "tree", "cot", "beam"])
async def test_a_users_kg_and_llm_answer_with_every_strategy(strategy: str) -> None:
    llm = MyLLM(toy_complete)
    answer = await build_solver(strategy, llm, [movies_kg()], SearchConfig(embedder="lexical")).ask(QUESTION)
    assert answer.text == "London" and answer.found and answer.strategy == strategy
    json.dumps(answer.to_json())
    if strategy == "cot":  # the LLM alone: no KG, no provenance
        assert answer.linked_entities is None and answer.supporting_edges == [] and answer.usage.kg_calls == 0
        return
    assert walked(answer) == PATH
    assert [e.id for e in answer.linked_entities or []] == ["inception"]
    assert answer.usage.kg_calls > 0 and answer.usage.llm_calls > 0
    assert answer.supporting_edges[0].relation.kg == "movies"  # stamped with the KG's name


async def test_a_users_llm_without_scoring_decodes_sampled() -> None:
    llm = MyLLM(toy_complete)
    llm.can_score = False
    answer = await build_solver("chain", llm, [movies_kg()]).ask(QUESTION)
    assert answer.text == "London" and answer.decoding == "sampled" and walked(answer) == PATH


async def test_ids_and_relation_ids_with_spaces_and_quotes_flow_through_the_search() -> None:
    odd = {"inception": 'film "Inception" (2010)', "nolan": "Christopher 'Chris' Nolan, Jr.", "london": "London\\n UK"}

    def rename(i: str) -> str:
        return odd.get(i, i)

    rel = {"directed_by": "directed by", "born_in": 'born "in"', "starring": "star ring"}
    graph = {rename(s): {rel[r]: [rename(o) for o in objs] for r, objs in rels.items()} for s, rels in GRAPH.items()}
    kg = DictKG(graph, {rename(i): label for i, label in LABELS.items()}, {rel[r]: v for r, v in RELATIONS.items()})

    def complete(text: str, temperature: float) -> str:  # the toy model, told the odd relation ids
        for plain, spaced in rel.items():
            text = text.replace(f"SELECT RELATION: {spaced}", f"SELECT RELATION: {plain}")
        reply = toy_complete(text, temperature)
        return rel.get(reply, reply) if text.endswith("I suggest selecting property:") else reply

    for strategy in ("chain", "beam"):
        answer = await build_solver(strategy, MyLLM(complete), [kg], SearchConfig(embedder="lexical")).ask(QUESTION)
        assert answer.text == "London" and walked(answer) == PATH
        assert [(e.subject.id, e.relation.id, e.object.id) for e in answer.supporting_edges] == [
            (odd["nolan"], 'born "in"', odd["london"]), (odd["inception"], "directed by", odd["nolan"])]


# -- a KG that misbehaves --------------------------------------------------------------------

class Misbehaving(DictKG):
    """The example KG, with one method replaced by ``broken`` (called with the same arguments)."""

    def __init__(self, method: str, broken: Any) -> None:
        super().__init__(GRAPH, LABELS, RELATIONS)
        setattr(self, method, broken)


def returning(value: Any) -> Any:
    async def method(*args: Any, **kwargs: Any) -> Any:
        return value
    return method


def raising(exc: BaseException) -> Any:
    async def method(*args: Any, **kwargs: Any) -> Any:
        raise exc
    return method


INCEPTION = Entity("inception", "Inception", kg="movies")
DIRECTED_BY = Relation("directed_by", "directed by", kg="movies")


async def call(kgset: KGSet, method: str) -> Any:
    if method == "search":
        return await kgset.search("Inception", Usage())
    if method == "get_relations":
        return await kgset.get_relations([INCEPTION], Usage())
    return await kgset.get_edges([INCEPTION], DIRECTED_BY, Usage())


WRONG_TYPES = [
    ("search", None, "search() returned None where a list of Entity belongs"),
    ("search", "Inception", "search() returned a str where a list of Entity belongs"),
    ("search", [{"id": "inception"}], "search() returned a dict where an Entity belongs"),
    ("search", [Entity(7, "Inception")], "search() returned an Entity whose id or label is not a string"),  # type: ignore[arg-type]
    ("get_relations", None, "get_relations() returned None: return traversals.Relations("),
    ("get_relations", {"items": []}, "get_relations() returned a dict: return traversals.Relations("),
    ("get_relations", (DIRECTED_BY,), "get_relations() returned a tuple: return traversals.Relations("),
    ("get_relations", [DIRECTED_BY], "get_relations() returned a list: return traversals.Relations("),
    ("get_relations", Relations(("directed_by",)), "get_relations() returned a str among its items"),  # type: ignore[arg-type]
    ("get_relations", Relations((DIRECTED_BY,), omitted=None), "get_relations() returned omitted=None"),  # type: ignore[arg-type]
    ("get_relations", Relations((DIRECTED_BY,), omitted=-1), "get_relations() returned omitted=-1"),
    ("get_edges", None, "get_edges() returned None: return traversals.Edges("),
    ("get_edges", {"edges": []}, "get_edges() returned a dict: return traversals.Edges("),
    ("get_edges", ((), ()), "get_edges() returned a tuple: return traversals.Edges("),
    ("get_edges", Edges((("inception", "directed_by", "nolan"),)), "get_edges() returned a tuple among its edges"),  # type: ignore[arg-type]
    ("get_edges", Edges(None), "get_edges() returned None where a list of Edge belongs"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("method", "value", "message"), WRONG_TYPES)
async def test_a_kg_method_returning_the_wrong_type_is_named(method: str, value: Any, message: str) -> None:
    kgset = KGSet([Misbehaving(method, returning(value))])
    with pytest.raises(KGError) as caught:
        await call(kgset, method)
    assert str(caught.value).startswith(f"knowledge graph 'movies': {message}")


@pytest.mark.parametrize(("exc", "error"), [
    (KeyError("P123"), KGError),
    (ValueError("no such relation"), KGError),
    (ConnectionRefusedError(111, "Connection refused"), KGUnavailable),
    (TimeoutError(), KGTimeout),
])
@pytest.mark.parametrize("method", ["search", "get_relations", "get_edges"])
async def test_an_exception_in_a_kg_method_becomes_a_named_kg_error(method: str, exc: Exception,
                                                                     error: type[KGError]) -> None:
    kgset = KGSet([Misbehaving(method, raising(exc))])
    with pytest.raises(error, match=rf"^knowledge graph 'movies': {method}\(\) raised {type(exc).__name__}") as caught:
        await call(kgset, method)
    assert caught.type is error and caught.value.__cause__ is exc  # the original, for the traceback


async def test_http_client_errors_are_told_apart_by_kind() -> None:
    httpx = pytest.importorskip("httpx")
    for exc, error in ((httpx.ConnectError("refused"), KGUnavailable), (httpx.ReadTimeout("slow"), KGTimeout),
                       (httpx.HTTPStatusError("500", request=httpx.Request("GET", "http://kg"), response=None), KGError)):
        with pytest.raises(error) as caught:
            await call(KGSet([Misbehaving("get_edges", raising(exc))]), "get_edges")
        assert caught.type is error


async def test_a_kg_that_raises_our_own_errors_is_left_alone() -> None:
    mine = KGUnavailable("my endpoint is down")
    with pytest.raises(KGUnavailable) as caught:
        await call(KGSet([Misbehaving("get_edges", raising(mine))]), "get_edges")
    assert caught.value is mine


async def test_a_kg_error_reaches_the_caller_of_ask() -> None:
    kg = Misbehaving("get_edges", raising(KeyError("directed_by")))
    with pytest.raises(KGError, match=r"'movies': get_edges\(\) raised KeyError: 'directed_by'"):
        await build_solver("chain", MyLLM(toy_complete), [kg]).ask(QUESTION)


@pytest.mark.parametrize("method", ["search", "get_relations", "get_edges"])
async def test_a_sync_kg_method_is_refused_by_name(method: str) -> None:
    def sync(*args: Any, **kwargs: Any) -> Any:
        return []

    with pytest.raises(KGError, match=rf"'movies': {method}\(\) is not async: it returned a list .*async def"):
        await call(KGSet([Misbehaving(method, sync)]), method)


async def test_a_missing_kg_method_is_named() -> None:
    kg = DictKG(GRAPH, LABELS, RELATIONS)
    kg.get_edges = None  # type: ignore[assignment, method-assign]
    with pytest.raises(TraversalsError, match=r"'movies': get_edges\(\) is missing"):
        await call(KGSet([kg]), "get_edges")


async def test_a_hanging_kg_is_bounded_by_the_kgsets_timeout_or_by_the_callers() -> None:
    async def hang(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(3600)

    with pytest.raises(KGTimeout, match=r"'movies': get_relations\(\) took longer than 0.05 s"):
        await call(KGSet([Misbehaving("get_relations", hang)], timeout=0.05), "get_relations")
    solver = build_solver("chain", MyLLM(toy_complete), [Misbehaving("get_relations", hang)])
    with pytest.raises(TimeoutError):  # without one, the caller's own bound cancels the search
        await asyncio.wait_for(solver.ask(QUESTION), timeout=0.2)
    bounded = build_solver("chain", MyLLM(toy_complete), [Misbehaving("get_relations", hang)],
                           SearchConfig(kg_timeout=0.05))  # SearchConfig's bound reaches the KGSet
    with pytest.raises(KGTimeout, match=r"'movies': get_relations\(\) took longer than 0.05 s"):
        await bounded.ask(QUESTION)


async def test_over_long_answers_are_cut_to_the_limit_and_the_rest_counted() -> None:
    kg = DictKG(GRAPH, LABELS, RELATIONS)
    films = [Entity(f"film{i}", f"Film {i}", kg="movies") for i in range(30)]
    nolan = kg.entity("nolan")
    edges = tuple(Edge(f, DIRECTED_BY, nolan) for f in films)
    rels = tuple(Relation(f"r{i}", f"relation {i}") for i in range(30))
    kg.search = returning(films * 2)  # type: ignore[method-assign]
    kg.get_relations = returning(Relations(rels + rels, omitted=5))  # type: ignore[method-assign]
    kg.get_edges = returning(Edges(edges + edges, omitted=4))  # type: ignore[method-assign]
    kgset = KGSet([kg], max_relations=10, max_edges=8)

    found = await kgset.search("Film", Usage(), limit=5)
    assert found == films[:5]  # at most `limit`, duplicates dropped
    got = await kgset.get_relations([nolan], Usage())
    assert [r.id for r in got.items] == [f"r{i}" for i in range(10)] and got.omitted == 5 + 20
    assert all(r.kg == "movies" for r in got.items)
    walked_back = await kgset.get_edges([nolan], DIRECTED_BY.reversed(), Usage())
    assert walked_back.edges == edges[:8] and walked_back.omitted == 4 + 22
    assert walked_back.new_entities == tuple(films[:8])  # what the kept edges reach (none given)


async def test_new_entities_are_those_the_kept_edges_reach() -> None:
    kg = DictKG(GRAPH, LABELS, RELATIONS)
    inception, nolan, london = kg.entity("inception"), kg.entity("nolan"), kg.entity("london")
    kg.get_edges = returning(Edges((Edge(inception, DIRECTED_BY, nolan),), (nolan, london)))  # type: ignore[method-assign]
    got = await KGSet([kg]).get_edges([inception], DIRECTED_BY, Usage())
    assert got.new_entities == (nolan,)


async def test_close_accepts_a_plain_close_and_names_a_failing_one() -> None:
    closed: list[str] = []
    plain = DictKG(GRAPH, LABELS, RELATIONS, name="plain")
    plain.close = lambda: closed.append("plain")  # type: ignore[assignment, method-assign, func-returns-value]
    broken = DictKG(GRAPH, LABELS, RELATIONS, name="broken")
    broken.close = raising(OSError("disk gone"))  # type: ignore[method-assign]
    last = DictKG(GRAPH, LABELS, RELATIONS, name="last")

    async def close_last() -> None:
        closed.append("last")

    last.close = close_last  # type: ignore[method-assign]
    with pytest.raises(KGError, match=r"'broken': close\(\) raised OSError: disk gone"):
        await KGSet([plain, broken, last]).close()
    assert closed == ["plain", "last"]  # every KG was closed before the error


# -- an LLM that misbehaves (what reaches the caller today) ------------------------------------

async def test_an_llm_error_raised_by_the_users_llm_reaches_the_caller() -> None:
    def down(text: str, temperature: float) -> str:
        raise LLMError("my model server answered 503")

    with pytest.raises(LLMError, match="503"):
        await build_solver("chain", MyLLM(down), [movies_kg()]).ask(QUESTION)



async def test_close_all_closes_everything_even_when_a_kg_fails_to_close():
    from traversals.api import close_all
    from traversals.errors import KGError
    from traversals.llm.scripted import ScriptedLLM

    class PlainClose:  # a user's KG whose close is not async
        name = "plain"
        closed = False

        def close(self):
            self.closed = True

    class Broken:
        name = "broken"

        async def close(self):
            raise OSError("disk gone")

    plain, llm = PlainClose(), ScriptedLLM(responses=["x"])
    with pytest.raises(KGError, match="knowledge graph 'broken': close"):
        await close_all(llm, [Broken(), plain])
    assert plain.closed and llm.closed  # the failure did not leave the others open


async def test_a_question_and_its_topic_entities_of_the_wrong_kind():
    """topic_entities="Titanic" was read letter by letter (every letter linked, the search
    started from other films); ask(None) failed with a TypeError inside the linking."""
    from traversals.api import build_solver
    from traversals.errors import BadInput
    from traversals.llm.scripted import ScriptedLLM

    from .kgdouble import DictKG

    kg = DictKG([("Titanic", "directed_by", "James Cameron"), ("Inception", "directed_by", "Christopher Nolan")])
    llm = ScriptedLLM(rules=[("So the next action should be:", "ANSWER: James Cameron"), ("score", "0.9")])
    for strategy in ("chain", "cot"):
        solver = build_solver(strategy, llm, [kg])
        for question in (None, 42):
            with pytest.raises(BadInput, match="the question is a string"):
                await solver.ask(question)  # type: ignore[arg-type]
    solver = build_solver("chain", llm, [kg])
    answer = await solver.ask("who directed Titanic", topic_entities="Titanic")  # type: ignore[arg-type]
    assert [e.label for e in answer.linked_entities or []] == ["Titanic"]
    with pytest.raises(BadInput, match="holds 0"):
        await solver.ask("who directed Titanic", topic_entities=["Titanic", 0])  # type: ignore[list-item]
    with pytest.raises(BadInput, match="a list of entity names, got dict"):
        await solver.ask("who directed Titanic", topic_entities={"Titanic": 1})  # type: ignore[arg-type]


async def test_a_kg_that_stamps_its_entities_with_another_name_is_told():
    """A KG named "movies" whose entities said kg="Movies DB": the search never asked it about
    them (one search call, no expansion), and answered without supporting edges, in silence."""
    from dataclasses import replace

    from traversals.api import build_solver
    from traversals.errors import KGError
    from traversals.llm.scripted import ScriptedLLM

    from .kgdouble import DictKG

    class Stamped(DictKG):
        async def search(self, text, limit=10):
            return [replace(e, kg="Movies DB") for e in await super().search(text, limit)]

    kg = Stamped([("Titanic", "directed_by", "James Cameron")], name="movies")
    solver = build_solver("chain", ScriptedLLM(["ANSWER: x"] * 5), [kg])
    with pytest.raises(KGError, match=r"'movies': search\(\) returned an entity of knowledge graph 'Movies DB'"):
        await solver.ask("who directed [Titanic]")
