"""RwT as the paper specifies it (Shen et al., §3.2, Appendix C): hop counts, back-up along
the path, and how each search says it stopped — on small dict KGs with a scripted LLM."""

from __future__ import annotations

import pytest

from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.rwt import CriticalModel, HopBeamSearch, LexicalEmbedder, MonteCarloTreeSearch, RwTConfig
from traversals.search.rwt.engine import RwTSearch

from .kgdouble import DictKG


def flat_scorer(prompt: str, options: list[str], prefix: str) -> list[float]:
    """Every relation equally likely; every state rated 0.5."""
    if prefix.startswith("RATING"):
        return [0.0 if o == "0.5" else -6.0 for o in options]
    return [-1.0 for _ in options]


def rwt(cls: type[RwTSearch], kg: DictKG, guesses: str = "C, B: E, C: Z]", **cfg: object) -> RwTSearch:
    """A search whose LLM guesses ``[A: C, B: E, C: Z]`` (the critical model tells states apart)."""
    llm = ScriptedLLM(rules=[("three most likely answers", guesses)], score=flat_scorer)
    return cls(llm, KGSet([kg]), RwTConfig(**cfg), critical=CriticalModel(LexicalEmbedder()))


async def test_beam_counts_the_hops_it_walked_not_the_hop_that_found_nothing():
    # Q -r1-> A, and A leads nowhere new (its only relation walks back to Q): one hop walked
    answer = await rwt(HopBeamSearch, DictKG([("Q", "r1", "A")]), max_hops=3).ask("r1 of [Q]?", topic_entities=["Q"])
    assert answer.text == "A"
    assert max(n["depth"] for n in answer.trace["nodes"]) == 1
    assert answer.trace["hops"] == 1


async def test_beam_walks_max_hops_hops_and_no_more():
    kg = DictKG([("Q", "r1", "A"), ("A", "r2", "B"), ("B", "r3", "C"), ("C", "r4", "D")])
    answer = await rwt(HopBeamSearch, kg, max_hops=2).ask("r2 of r1 of [Q]?", topic_entities=["Q"])
    assert answer.trace["hops"] == 2 and max(n["depth"] for n in answer.trace["nodes"]) == 2


async def test_mcts_backs_each_value_up_every_state_on_its_path():
    # Eq. 5: N(s, a) counts the simulations through a, Q(s, a) is the mean of their values.
    # A state's visits are its own evaluation plus its children's (the root has none of its
    # own), or, at a leaf, one per simulation that stopped there.
    kg = DictKG([("Q", "r1", "A"), ("Q", "r2", "B"), ("A", "r3", "C"), ("A", "r4", "D"), ("B", "r5", "E")])
    search = rwt(MonteCarloTreeSearch, kg, max_hops=2, simulations=12)
    answer = await search.ask("r3 of r1 of [Q]?", topic_entities=["Q"])
    nodes = {n["id"]: n for n in answer.trace["nodes"]}
    children = {i: [n for n in nodes.values() if n["parent"] == i] for i in nodes}
    assert nodes[0]["visits"] == answer.trace["simulations"]
    for i, n in nodes.items():
        below = sum(c["visits"] for c in children[i])
        if n["visits"] and children[i] and any(c["visits"] for c in children[i]):
            own = 0 if n["parent"] is None else 1
            assert n["visits"] == own + below, n
            weighted = sum(c["q"] * c["visits"] for c in children[i]) + own * (n["value"] or 0.0)
            assert abs(n["q"] * n["visits"] - weighted) < 1e-3 * n["visits"], n


async def test_each_search_says_how_it_stopped():
    # RwT has no value threshold: MCTS stops when its simulations are spent or nothing is
    # left to learn, beam search after max_hops hops or when no kept state can go on
    kg = DictKG([("Q", "r1", "A"), ("Q", "r2", "B"), ("A", "r3", "C"), ("A", "r4", "D"), ("B", "r5", "E")])
    spent = await rwt(MonteCarloTreeSearch, kg, max_hops=2, simulations=3).ask("r3 of [Q]?", topic_entities=["Q"])
    assert spent.trace["simulations"] == 3 and spent.stopped == spent.trace["stopped"] == "simulations"
    seen = await rwt(MonteCarloTreeSearch, kg, max_hops=2, simulations=50).ask("r3 of [Q]?", topic_entities=["Q"])
    assert seen.trace["simulations"] < 50 and seen.stopped == "exhausted"
    assert seen.to_json()["stopped"] == "exhausted"
    walked = await rwt(HopBeamSearch, kg, max_hops=2).ask("r3 of [Q]?", topic_entities=["Q"])
    assert walked.trace["hops"] == 2 and walked.stopped == walked.trace["stopped"] == "max_hops"
    dead = await rwt(HopBeamSearch, kg, max_hops=3).ask("r3 of [Q]?", topic_entities=["Q"])
    assert dead.trace["hops"] == 2 and dead.stopped == "exhausted"


async def test_ties_go_to_the_relation_offered_first():
    # equal priors, equal values: MCTS expands and walks the first offered relation first,
    # beam keeps the state made first, and the answer is the first of equally valued states
    kg = DictKG([("Q", "r1", "A"), ("Q", "r2", "B"), ("A", "r3", "C"), ("B", "r4", "D")])
    one = await rwt(MonteCarloTreeSearch, kg, guesses="X, B: Y, C: Z]", max_hops=2, simulations=1).ask(
        "?", topic_entities=["Q"])
    walked = [n for n in one.trace["nodes"] if n["value"] is not None]
    assert [n["action"]["relation"]["key"] for n in walked] == ["r1"] and one.text == "A"
    beam = await rwt(HopBeamSearch, kg, guesses="X, B: Y, C: Z]", max_hops=2, beam_width=1, beam_branch=2).ask(
        "?", topic_entities=["Q"])
    second = [n for n in beam.trace["nodes"] if n["depth"] == 2]
    assert [n["action"]["relation"]["key"] for n in second] == ["r3"]  # from A, the state made first
    assert beam.text == "A"  # A, B and C valued alike: the shallower, then the first made


async def test_mcts_ties_between_unvisited_relations_go_to_the_one_offered_first_on_later_simulations_too():
    # the first simulation walks r1 (valued below the middle); the second picks among the
    # unvisited r2 and r3, alike in prior and value: r2, offered first
    kg = DictKG([("Q", "r1", "A"), ("Q", "r2", "B"), ("Q", "r3", "C")])
    answer = await rwt(MonteCarloTreeSearch, kg, guesses="C, B: Z, C: Z]", max_hops=1, simulations=2).ask(
        "?", topic_entities=["Q"])
    assert [n["action"]["relation"]["key"] for n in answer.trace["nodes"] if n["value"] is not None] == ["r1", "r2"]


async def test_beam_keeps_no_state_that_reached_nothing_new():
    # from A, each relation walks back to Q, which the path has met: those states reach
    # nothing, so no state goes on to a second hop and the search ends there
    kg = DictKG([("A", "r1", "Q"), ("A", "r2", "Q")])
    answer = await rwt(HopBeamSearch, kg, max_hops=3).ask("r1 of [Q]?", topic_entities=["Q"])
    nodes = [(n["depth"], n["entities"]) for n in answer.trace["nodes"]]
    assert (2, []) in nodes and max(depth for depth, _ in nodes) == 2  # walked, reached nothing
    assert answer.text == "A" and answer.trace["hops"] == 1 and answer.stopped == "exhausted"


async def test_sampled_priors_are_the_written_likelihoods_normalised_and_a_lone_relation_is_certain():
    # no log-probabilities: the priors are what the LLM writes, made to sum to 1
    kg = DictKG([("Q", "r1", "A"), ("Q", "r2", "B"), ("A", "r3", "C")])
    llm = ScriptedLLM(rules=[("three most likely answers", "X, B: Y, C: Z]"), ("RATING", "0.5"),
                             ("", "A: r1 0.5, B: r2 0.2]")])
    search = MonteCarloTreeSearch(llm, KGSet([kg]), RwTConfig(max_hops=2, simulations=4),
                                  critical=CriticalModel(LexicalEmbedder()))
    answer = await search.ask("which?", topic_entities=["Q"])
    priors = {n["action"]["relation"]["key"]: n["prior"] for n in answer.trace["nodes"] if n["action"]}
    assert answer.decoding == "sampled"
    assert priors == {"r1": pytest.approx(5 / 7, abs=1e-3), "r2": pytest.approx(2 / 7, abs=1e-3), "r3": 1.0}
