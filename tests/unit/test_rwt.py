"""Reasoning with Trees (MCTS with PUCT, hop-level beam search) on the embedded demo store
with a scripted LLM: the policy's priors order the first visits, values steer later ones,
the best-valued state answers with its supporting path, the paper's output formats parse."""

from __future__ import annotations

import math

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.errors import BadInput
from traversals.kg.base import Entity
from traversals.kg.factory import open_kgs
from traversals.llm.scripted import ScriptedLLM
from traversals.search.rwt import CriticalModel, HopBeamSearch, LexicalEmbedder, MonteCarloTreeSearch, RwTConfig
from traversals.search.rwt.policy import letters, parse_guesses
from traversals.search.rwt.state import PathNode
from traversals.search.kgset import KGSet

QUESTION = "Who is Bob Dylan's maternal grandmother?"


def scorer(prompt, options, prefix):
    """Relations: 'mother' most likely; ratings: high for a state holding Florence Stone,
    promising for the state on the way to her (Beatrice Stone, a hop left), low otherwise."""
    if prefix.startswith("RATING"):
        want = ("0.9" if "<current entity>[Florence Stone" in prompt
                else "0.6" if "<current entity>[Beatrice Stone" in prompt else "0.1")
        return [0.0 if o == want else -6.0 for o in options]
    return [-0.2 if o.endswith(": mother") else -3.0 for o in options]


def llm():
    return ScriptedLLM(rules=[("three most likely answers", "Florence Stone, B: Beatrice Stone, C: Abram Zimmerman]")],
                       score=scorer)


def search(cls, **cfg):
    return cls(llm(), KGSet(open_kgs(["demo"])), RwTConfig(**cfg))


async def test_beam_search_follows_the_policy_and_answers_with_the_path():
    answer = await search(HopBeamSearch, beam_width=2, beam_branch=2, max_hops=2).ask(QUESTION, topic_entities=["Bob Dylan"])
    assert answer.text == "Florence Stone" and answer.strategy == "beam"
    assert [(e.subject.label, e.relation.label, e.object.label) for e in answer.supporting_edges] == [
        ("Beatrice Stone", "mother", "Florence Stone"), ("Bob Dylan", "mother", "Beatrice Stone")]
    assert answer.trace["guesses"] == ["Florence Stone", "Beatrice Stone", "Abram Zimmerman"]
    nodes = answer.trace["nodes"]
    # hop 1: the two most probable relations from Bob Dylan (mother first); hop 2: two from each
    # kept state that can reach someone new. A state reaches an entity met earlier on its
    # path only on a round trip the KG stores both ways: Beatrice Stone's only `child` is Bob
    # Dylan (his `mother` edge, walked back by a `child` edge), and the occupations are
    # offered the way back (`is occupation of`) only because it reaches another musician,
    # Jakob Dylan (not Bob Dylan, whom the same stored edge leads back to)
    first = [n for n in nodes if n["depth"] == 1]
    assert len(first) == 2 and first[0]["action"]["relation"]["label"] == "mother"
    second = {(n["parent"], n["action"]["relation"]["label"]): n["entities"] for n in nodes if n["depth"] == 2}
    assert second == {(first[0]["id"], "mother"): ["Florence Stone"], (first[0]["id"], "child"): ["Bob Dylan"],
                      (first[1]["id"], "is occupation of"): ["Jakob Dylan"]}
    assert answer.trace["answer_node"] == next(n["id"] for n in nodes if n["entities"] == ["Florence Stone"])


async def test_mcts_visits_by_prior_first_and_backs_values_up():
    s = search(MonteCarloTreeSearch, simulations=6, max_hops=2)
    answer = await s.ask(QUESTION, topic_entities=["Bob Dylan"])
    nodes = {n["id"]: n for n in answer.trace["nodes"]}
    root = nodes[0]
    assert answer.text == "Florence Stone" and answer.trace["simulations"] == 6
    assert root["visits"] == 6  # every simulation backs up through the root
    first = min((n for n in nodes.values() if n["parent"] == 0 and n["visits"]), key=lambda n: n["id"])
    assert first["action"]["relation"]["label"] == "mother" and first["prior"] > 0.5  # the prior chose it first
    # Q of a node is the mean of the values backed up through it
    for n in nodes.values():
        if n["visits"] and n["parent"] is not None:
            assert 0.0 <= n["q"] <= 1.0


def test_puct_prefers_unvisited_high_prior_then_value():
    s = MonteCarloTreeSearch(llm(), KGSet(open_kgs(["demo"])), RwTConfig(c_puct=1.25, signed_q=False))
    parent = PathNode(0, (), visits=4)
    a = PathNode(1, (), parent=parent, prior=0.8)
    b = PathNode(2, (), parent=parent, prior=0.2, visits=3, total=2.4)
    assert s.puct(parent, a) == pytest.approx(1.25 * 0.8 * 2)
    assert s.puct(parent, b) == pytest.approx(0.8 + 1.25 * 0.2 * 2 / 4)
    assert s.puct(parent, a) > s.puct(parent, b)


def test_signed_puct_reads_values_on_the_papers_scale_with_unvisited_in_the_middle():
    s = MonteCarloTreeSearch(llm(), KGSet(open_kgs(["demo"])), RwTConfig(c_puct=1.25))  # the default
    parent = PathNode(0, (), visits=4)
    fresh = PathNode(1, (), parent=parent, prior=0.1)
    poor = PathNode(2, (), parent=parent, prior=0.1, visits=1, total=0.3)
    good = PathNode(3, (), parent=parent, prior=0.1, visits=1, total=0.9)
    assert s.puct(parent, fresh) == pytest.approx(1.25 * 0.1 * 2)
    assert s.puct(parent, poor) == pytest.approx(2 * 0.3 - 1 + 1.25 * 0.1 * 2 / 2)
    assert s.puct(parent, good) == pytest.approx(2 * 0.9 - 1 + 1.25 * 0.1 * 2 / 2)
    # a visited child rated below the middle falls behind an unvisited sibling, one above it stays ahead
    assert s.puct(parent, good) > s.puct(parent, fresh) > s.puct(parent, poor)
    unsigned = MonteCarloTreeSearch(llm(), KGSet(open_kgs(["demo"])), RwTConfig(c_puct=1.25, signed_q=False))
    assert unsigned.puct(parent, poor) > unsigned.puct(parent, fresh)


def test_the_papers_output_formats_parse():
    assert parse_guesses("[A: Leonhard Euler, B: Joseph Louis Lagrange, C: Johann Bernoulli]") == [
        "Leonhard Euler", "Joseph Louis Lagrange", "Johann Bernoulli"]
    assert parse_guesses("nothing useful") == []
    # a guess runs to the next handle, not its first comma ("20,000 Leagues…" was "20")
    assert parse_guesses("[A: Crouching Tiger, Hidden Dragon, B: Washington, D.C., C: 20,000 Leagues Under the Sea]") == [
        "Crouching Tiger, Hidden Dragon", "Washington, D.C.", "20,000 Leagues Under the Sea"]
    assert parse_guesses('[A: "Lust, Caution", B: Hero') == ["Lust, Caution", "Hero"]
    assert letters(3) == ["A", "B", "C"] and letters(28)[26:] == ["AA", "AB"]


async def test_sampled_priors_read_the_written_likelihoods_or_fall_back_to_uniform():
    from traversals.search.rwt.policy import RelationPolicy

    kgs = KGSet(open_kgs(["demo"]))
    dylan = (await kgs.search("Bob Dylan", __import__("traversals.llm.base", fromlist=["Usage"]).Usage()))[0]
    node = PathNode(0, (dylan,))
    rels = (await kgs.get_relations([dylan], node.usage)).items[:3]
    written = ScriptedLLM(rules=[("deduction game", f"A: {rels[0].display} 0.2, B: {rels[1].display} 0.6, C: x 0.2]")])
    priors = await RelationPolicy(written, constrained=False).priors(QUESTION, node, rels, node.usage)
    assert priors == pytest.approx([0.2, 0.6, 0.2])
    silent = ScriptedLLM(rules=[("deduction game", "I cannot tell")])
    priors = await RelationPolicy(silent, constrained=False).priors(QUESTION, node, rels, node.usage)
    assert priors == pytest.approx([1 / 3] * 3) and "uniform" in node.note


@pytest.mark.parametrize("written, expected", [
    ("A: {0} 70, B: {1} 21, C: {2} 9]", [0.7, 0.21, 0.09]),  # whole percentages: each read as its last digit
    ("A: {0} 70%, B: {1} 20%, C: {2} 10%]", [0.7, 0.2, 0.1]),
    ("A: {0} 60, B: {1} 30, C: {2} 10]", [0.6, 0.3, 0.1]),  # read as [0, 0, 1]
    ("A: {0} (0.5), B: {1} (0.25), C: {2} (0.25)]", [0.5, 0.25, 0.25]),
    ("A: {0} 0.8, B: {1} 10%, C: {2} 0.1]", [0.8, 0.1, 0.1]),
])
async def test_sampled_priors_read_written_percentages_as_percentages(written, expected):
    from traversals.llm.base import Usage
    from traversals.search.rwt.policy import RelationPolicy

    kgs = KGSet(open_kgs(["demo"]))
    dylan = (await kgs.search("Bob Dylan", Usage()))[0]
    node = PathNode(0, (dylan,))
    rels = (await kgs.get_relations([dylan], node.usage)).items[:3]
    llm = ScriptedLLM(rules=[("deduction game", written.format(*(r.display for r in rels)))])
    priors = await RelationPolicy(llm, constrained=False).priors(QUESTION, node, rels, node.usage)
    assert priors == pytest.approx(expected) and not node.note


async def test_a_written_likelihood_over_100_makes_the_prior_uniform_with_a_note():
    from traversals.llm.base import Usage
    from traversals.search.rwt.policy import RelationPolicy

    kgs = KGSet(open_kgs(["demo"]))
    dylan = (await kgs.search("Bob Dylan", Usage()))[0]
    node = PathNode(0, (dylan,))
    rels = (await kgs.get_relations([dylan], node.usage)).items[:3]
    llm = ScriptedLLM(rules=[("deduction game", "A: x 1941, B: y 0.5, C: P25]")])
    priors = await RelationPolicy(llm, constrained=False).priors(QUESTION, node, rels, node.usage)
    assert priors == pytest.approx([1 / 3] * 3) and "over 100" in node.note


async def test_critical_model_scores_closeness_to_the_guesses():
    crit = CriticalModel(LexicalEmbedder())
    near = PathNode(1, (Entity("x", "Florence Stone"),))
    far = PathNode(2, (Entity("y", "1941"),))
    guesses = ["Florence Stone", "Beatrice Stone"]
    assert await crit.value(guesses, near) > 0.6 > await crit.value(guesses, far)
    assert await crit.value([], near) == 0.0 and math.isclose(await crit.value(["Florence Stone"], near), 1.0)


class CountingEmbedder:
    """Lexical vectors, recording every batch of texts it is asked to embed."""

    name = "counting"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def embed(self, texts):
        self.batches.append(list(texts))
        return await LexicalEmbedder().embed(texts)


async def test_critical_model_embeds_each_text_once():
    embedder = CountingEmbedder()
    crit = CriticalModel(embedder)
    guesses = ["Florence Stone", "Beatrice Stone"]
    first = PathNode(1, (Entity("x", "Florence Stone"), Entity("y", "Beatrice Stone"), Entity("z", "1941")))
    again = PathNode(2, (Entity("z", "1941"), Entity("w", "Bob Dylan")))
    v1 = await crit.value(guesses, first)
    await crit.value(guesses, again)
    assert embedder.batches == [["Florence Stone", "Beatrice Stone", "1941"], ["Bob Dylan"]]
    assert await crit.value(guesses, first) == v1 and len(embedder.batches) == 2


class GatedEmbedder(CountingEmbedder):
    """A CountingEmbedder whose embed waits for ``gate``: calls made while it is shut
    overlap, deterministically; ``fail`` calls raise once it opens."""

    def __init__(self, fail: int = 0) -> None:
        import asyncio

        super().__init__()
        self.gate = asyncio.Event()
        self.fail = fail

    async def embed(self, texts):
        self.batches.append(list(texts))
        await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("refused")
        return await LexicalEmbedder().embed(texts)


async def test_states_valued_at_once_embed_a_text_once_counted_once():
    """Sibling states are valued concurrently (beam's gather): each call sent the texts not
    kept when it started, so the guesses and a shared label were embedded by both, counted
    twice or once as the calls interleaved. The second now awaits the first's vectors."""
    import asyncio

    from traversals.llm.base import Usage

    embedder = GatedEmbedder()
    crit = CriticalModel(embedder)
    guesses = ["Florence Stone", "Beatrice Stone"]
    a = PathNode(1, (Entity("x", "Florence Stone"), Entity("z", "1941")))
    b = PathNode(2, (Entity("z", "1941"), Entity("w", "Bob Dylan")))
    ua, ub = Usage(), Usage()
    one = asyncio.ensure_future(crit.value(guesses, a, ua))
    for _ in range(3):
        await asyncio.sleep(0)
    two = asyncio.ensure_future(crit.value(guesses, b, ub))
    for _ in range(3):
        await asyncio.sleep(0)
    embedder.gate.set()
    va, vb = await asyncio.wait_for(asyncio.gather(one, two), 5)
    assert embedder.batches == [["Florence Stone", "Beatrice Stone", "1941"], ["Bob Dylan"]]
    assert (ua.embedder_calls, ua.embedded_texts, ub.embedder_calls, ub.embedded_texts) == (1, 3, 1, 1)
    assert (va, vb) == (await CriticalModel().value(guesses, a), await CriticalModel().value(guesses, b))


async def test_a_value_waiting_on_a_failed_or_cancelled_embedding_embeds_the_texts_itself():
    """The call whose vectors another awaits may end without them: its embedder failed, or
    it was cancelled. The waiter is neither left cancelled nor given no vectors: it embeds
    them itself (and counts that); a waiter cancelled leaves the vectors to the others."""
    import asyncio

    guesses = ["Florence Stone"]
    a = PathNode(1, (Entity("x", "Florence Stone"),))
    want = await CriticalModel().value(guesses, a)
    for how in ("failed", "cancelled", "waiter cancelled"):
        embedder = GatedEmbedder(fail=1 if how == "failed" else 0)
        crit = CriticalModel(embedder)
        one = asyncio.ensure_future(crit.value(guesses, a))
        for _ in range(3):
            await asyncio.sleep(0)
        two = asyncio.ensure_future(crit.value(guesses, a))
        three = asyncio.ensure_future(crit.value(guesses, a))
        for _ in range(3):
            await asyncio.sleep(0)
        if how != "failed":
            (one if how == "cancelled" else two).cancel()
        embedder.gate.set()
        got = await asyncio.wait_for(asyncio.gather(one, two, three, return_exceptions=True), 5)
        if how == "waiter cancelled":
            assert got[0] == got[2] == want and len(embedder.batches) == 1, how
        else:
            assert got[1] == got[2] == want and len(embedder.batches) == 2, how


class SlowFirstRollout:
    """Rates every state 0.5; the first state it is asked about (the hop's most probable
    relation) answers last, after a few loop turns, as an LLM's reply may."""

    def __init__(self) -> None:
        self.asked = 0

    async def value(self, question, node, hops_left, usage):
        import asyncio

        self.asked += 1
        for _ in range(20 if self.asked == 1 else 0):
            await asyncio.sleep(0)
        return 0.5

    def answer_value(self, question, node):
        return None


async def test_beams_siblings_are_valued_by_the_critical_model_in_their_order():
    """Siblings are walked and rated at once, and each reached the critical model when its
    rating came back: which sent the guesses and a shared label (and counted them) followed
    the LLM's reply times, so embedder_calls and a node's embedded_texts changed between
    identical runs. The critical model now values them in their order."""
    embedder = CountingEmbedder()
    beam = HopBeamSearch(llm(), KGSet(open_kgs(["demo"])), RwTConfig(beam_width=1, beam_branch=2, max_hops=1),
                         rollout=SlowFirstRollout(), critical=CriticalModel(embedder))
    answer = await beam.ask(QUESTION, topic_entities=["Bob Dylan"])
    first = [n for n in answer.trace["nodes"] if n["depth"] == 1]
    assert first[0]["action"]["relation"]["label"] == "mother"
    guesses = answer.trace["guesses"]
    # the first sibling sends the guesses (its Beatrice Stone among them), the second its own labels
    assert embedder.batches[0] == guesses and "Beatrice Stone" in guesses
    assert first[0]["usage"]["embedded_texts"] == len(guesses)
    assert first[1]["usage"]["embedded_texts"] == len(embedder.batches[1]) == len(first[1]["entities"])


class NoisyEmbedder:
    """Fixed vectors, each component moved by ``noise``: a sentence embedder's vector for
    a text changes in its last bits with the batch it is embedded in."""

    name = "noisy"

    def __init__(self, noise: float) -> None:
        self.noise = noise

    async def embed(self, texts):
        table = {"Florence Stone": [1.0, 0.0, 0.0], "Beatrice Stone": [0.6, 0.8, 0.0],
                 "1941": [0.0, 0.3, 0.9539392014169456], "Bob Dylan": [0.28, 0.96, 0.0]}
        return [[x + self.noise * (i + 1) for i, x in enumerate(table[t])] for t in texts]


async def test_the_critical_value_does_not_change_with_the_embedders_last_bits():
    """A resumed or concurrent run batches texts otherwise, and Sentence-BERT's vectors
    differ by ~1e-9 with the batch: the value written to results.jsonl differed in its last
    decimals between runs that searched alike. Each cosine is rounded to 4 places."""
    guesses = ["Florence Stone", "Bob Dylan"]
    node = PathNode(1, (Entity("y", "Beatrice Stone"), Entity("z", "1941")))
    exact = await CriticalModel(NoisyEmbedder(0.0)).value(guesses, node)
    for noise in (1e-9, -1e-9, 3e-9):
        assert await CriticalModel(NoisyEmbedder(noise)).value(guesses, node) == exact, noise
    assert exact == (0.6 + 0.936) / 2


@pytest.mark.parametrize("strategy", ["mcts", "beam"])
async def test_the_critical_models_embedder_calls_are_counted_where_the_llm_calls_are(strategy):
    """An embedder at a paid endpoint costs money and time: its calls were counted nowhere."""
    embedder = CountingEmbedder()
    solver = build_solver(strategy, llm(), open_kgs(["demo"]), SearchConfig(simulations=6, max_hops=2),
                          embedder=embedder)
    answer = await solver.ask(QUESTION, topic_entities=["Bob Dylan"])
    usage, texts = answer.usage, sum(map(len, embedder.batches))
    assert answer.text == "Florence Stone" and embedder.batches
    assert (usage.embedder_calls, usage.embedded_texts, usage.embedding_tokens) == (len(embedder.batches), texts, 0)
    shown = answer.to_json()  # what ask --json, the service and an eval row show
    assert (shown["embedder_calls"], shown["embedded_texts"]) == (len(embedder.batches), texts)
    assert "embedding_tokens" not in shown  # no endpoint reported any
    assert answer.trace["usage"] == usage.to_json()
    # each node counts what valuing it embedded
    assert sum(n["usage"].get("embedded_texts", 0) for n in answer.trace["nodes"]) == texts
    # asked again: every text is kept by the critical model, so nothing is embedded or counted
    again = await solver.ask(QUESTION, topic_entities=["Bob Dylan"])
    assert again.usage.embedder_calls == 0 and len(embedder.batches) == usage.embedder_calls
    assert "embedder_calls" not in again.to_json()


class NumpyEmbedder:
    """Letter counts as a NumPy float32 array, the kind sentence-transformers' encode() returns."""

    name = "numpy"

    async def embed(self, texts):
        np = pytest.importorskip("numpy")
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out


@pytest.mark.parametrize("strategy", ["mcts", "beam"])
async def test_an_embedder_of_numpy_vectors_gives_an_answer_that_is_json(strategy):
    """Its float32s went on into every cosine: Answer.value and the trace's node values were
    NumPy scalars, and json.dumps (ask --json, the service, an eval's results.jsonl) refused them."""
    import json

    solver = build_solver(strategy, llm(), open_kgs(["demo"]), SearchConfig(simulations=6, max_hops=2),
                          embedder=NumpyEmbedder())
    answer = await solver.ask(QUESTION, topic_entities=["Bob Dylan"])
    assert answer.text == "Florence Stone" and type(answer.value) is float
    assert json.loads(json.dumps(answer.to_json()))["value"] == answer.value
    json.dumps(answer.trace)  # was: Object of type float32 is not JSON serializable
    critical = [n["critical"] for n in answer.trace["nodes"] if "critical" in n]
    assert critical and all(type(v) is float for v in critical)


async def test_a_full_embedding_cache_loses_no_vector_of_the_call_that_clears_it():
    """Cleared for the new texts, the cache lost the guesses looked up after: a KeyError one
    question in every few thousand labels of an eval (one critical model for all)."""
    import asyncio

    crit = CriticalModel(LexicalEmbedder(), cache_size=3)
    guesses = ["Florence Stone"]
    await crit.value(guesses, PathNode(1, (Entity("x", "Florence Stone"), Entity("y", "1941"))))
    wide = PathNode(2, (Entity("a", "Bob Dylan"), Entity("b", "Duluth"), Entity("c", "Florence Stone")))
    assert math.isclose(await crit.value(guesses, wide), 1.0)  # was KeyError: 'Florence Stone'
    nodes = [PathNode(i, (Entity(f"e{i}", f"Person {i}"), Entity(f"f{i}", "Florence Stone"))) for i in range(6)]
    values = await asyncio.gather(*(crit.value(guesses, n) for n in nodes))  # side by side, each clearing
    assert all(math.isclose(v, 1.0) for v in values)


async def test_the_critical_model_embedder_comes_from_the_config():
    from traversals.embed import SentenceBert

    assert SearchConfig().embedder == "sbert"  # the paper's Sentence-BERT family by default
    lexical = build_solver("beam", llm(), open_kgs(["demo"]), SearchConfig(embedder="lexical"))
    assert isinstance(lexical.critical.embedder, LexicalEmbedder)
    shared = CountingEmbedder()
    # the caller's own, checked at the boundary (CheckedEmbedder)
    assert build_solver("mcts", llm(), open_kgs(["demo"]), SearchConfig(), embedder=shared).critical.embedder.embedder is shared
    default = build_solver("mcts", llm(), open_kgs(["demo"]), SearchConfig())
    assert isinstance(default.critical.embedder, SentenceBert)  # fetched and loaded on first use only


async def test_the_strategies_are_offered_by_build_solver():
    for name, cls in (("mcts", MonteCarloTreeSearch), ("beam", HopBeamSearch)):
        s = build_solver(name, llm(), open_kgs(["demo"]), SearchConfig(simulations=3))
        assert isinstance(s, cls)


async def test_the_search_sizes_reach_the_search_and_a_beam_of_one_walks_one_state_a_hop():
    """--max-hops, --beam-width, --beam-branch (the paper's Table 6 sweeps B1 with B2 = 5)."""
    cfg = SearchConfig(embedder="lexical", max_hops=2, beam_width=1, beam_branch=5)
    beam = build_solver("beam", llm(), open_kgs(["demo"]), cfg)
    assert (beam.config.max_hops, beam.config.beam_width, beam.config.beam_branch) == (2, 1, 5)
    answer = await beam.ask(QUESTION, topic_entities=["Bob Dylan"])
    depths = [n["depth"] for n in answer.trace["nodes"]]
    assert max(depths) <= 2 and depths.count(1) == 5  # B2 relations tried from the one state of hop 0
    parents_of_hop_2 = {n["parent"] for n in answer.trace["nodes"] if n["depth"] == 2}
    assert len(parents_of_hop_2) <= 1  # B1 = 1: one state kept a hop
    mcts = build_solver("mcts", llm(), open_kgs(["demo"]), SearchConfig(embedder="lexical", max_hops=1, simulations=4))
    assert max(n["depth"] for n in (await mcts.ask(QUESTION, topic_entities=["Bob Dylan"])).trace["nodes"]) == 1
    with pytest.raises(BadInput, match="--beam-branch must be at least 1"):
        build_solver("beam", llm(), open_kgs(["demo"]), SearchConfig(embedder="lexical", beam_branch=0))


async def test_a_relation_walked_back_reaches_only_what_the_path_has_not_met(tmp_path):
    from traversals.llm.base import Usage
    from traversals.search.rwt.state import offered_relations, step

    kb = tmp_path / "kb.txt"
    kb.write_text("X|written_by|W\nY|written_by|W\nX|release_year|1972\nY|release_year|1985\nZ|written_by|V\n")
    kgs = KGSet(open_kgs([str(kb)]))
    usage = Usage()

    async def walk(start: str, *keys: str) -> PathNode:
        node = PathNode(0, tuple(await kgs.search(start, usage, limit=1)))
        for key in keys:
            rel = next(r for r in (await kgs.get_relations(list(node.entities), usage)).items if r.key == key)
            entities, edges, _ = await step(kgs, node, rel, usage)
            node = PathNode(node.id + 1, entities, parent=node, relation=rel, edges=edges, depth=node.depth + 1)
        return node

    async def offered(node: PathNode) -> list[str]:
        rels = (await kgs.get_relations(list(node.entities), usage)).items
        return [r.key for r in await offered_relations(kgs, node, rels, usage, 30)]

    # "release dates of films written by the screenwriter of X": X's writer, their other film, its year
    writer = await walk("X", "written_by")
    assert "~written_by" in await offered(writer)
    films = await walk("X", "written_by", "~written_by")
    assert [e.label for e in films.entities] == ["Y"]  # X itself is where the path began
    assert [e.label for e in (await walk("X", "written_by", "~written_by", "release_year")).entities] == ["1985"]
    # V wrote only Z: walking back from V reaches nothing new, so it is not offered
    assert "~written_by" not in await offered(await walk("Z", "written_by"))


async def test_a_round_trip_comes_back_only_on_a_pair_the_kg_stores_both_ways(tmp_path):
    """PathQuestion stores X -spouse-> H and H -spouse-> X, X -parents-> M and M -children-> X,
    and asks "the spouse of X's spouse" (X); MetaQA stores film -> writer only, and a target
    among several (X among his siblings) is no answer (provenance.reached_back's rule)."""
    from traversals.llm.base import Usage
    from traversals.search.rwt.state import step

    kb = tmp_path / "kb.txt"
    kb.write_text("X|spouse|H\nH|spouse|X\nX|parents|M\nM|children|X\nS|parents|M\n"
                  "A|parents|P\nP|children|A\nP|children|B\nF|written_by|W\nL|self|L\n")
    kgs = KGSet(open_kgs([str(kb)]))
    usage = Usage()

    async def walk(start: str, *keys: str) -> list[str]:
        node = PathNode(0, tuple(await kgs.search(start, usage, limit=1)))
        for key in keys:
            rel = next(r for r in (await kgs.get_relations(list(node.entities), usage)).items if r.key == key)
            entities, edges, _ = await step(kgs, node, rel, usage)
            node = PathNode(node.id + 1, entities, parent=node, relation=rel, edges=edges, depth=node.depth + 1)
        return sorted(e.label for e in node.entities)

    assert await walk("X", "spouse", "spouse") == ["X"]
    assert await walk("X", "spouse", "spouse", "spouse") == ["H"]
    assert await walk("X", "parents", "children") == ["X"]  # M's only child the KG stores as such
    assert await walk("A", "parents", "children") == ["B"]  # A among P's children: his sibling
    assert await walk("X", "parents", "~parents") == ["S"]  # the edge X -> M walked back: S only
    assert await walk("F", "written_by", "~written_by") == []  # one stored edge, twice
    assert await walk("L", "self") == ["L"]  # a self-loop, as the tree has it


async def test_a_round_trip_comes_back_from_a_source_the_kg_did_not_cut(tmp_path):
    """The KG's bound cut Z's spouses: Y may be one of several, so it is no answer; C lost
    nothing, so B, its only spouse and stored both ways, comes back (before, any cut in the
    step kept every round trip out)."""
    from traversals.llm.base import Usage
    from traversals.search.rwt.state import step

    kb = tmp_path / "kb.txt"
    kb.write_text("B|spouse|C\nC|spouse|B\nY|spouse|Z\nZ|spouse|Y\n" + "".join(f"Z|spouse|z{i}\n" for i in range(4)))
    kgs = KGSet(open_kgs([str(kb)]), max_edges=3)
    usage = Usage()
    node = PathNode(0, tuple(await kgs.search("B", usage, limit=1) + await kgs.search("Y", usage, limit=1)))
    spouse = next(r for r in (await kgs.get_relations(list(node.entities), usage)).items if r.key == "spouse")
    entities, edges, _ = await step(kgs, node, spouse, usage)
    node = PathNode(1, entities, parent=node, relation=spouse, edges=edges, depth=1)
    entities, edges, omitted = await step(kgs, node, spouse, usage)
    assert omitted == 3 and ("C", "B") in {(e.subject.label, e.object.label) for e in edges}
    assert "B" in {e.label for e in entities} and "Y" not in {e.label for e in entities}


async def test_training_walks_each_relation_from_a_state_once():
    from traversals.llm.base import Usage
    from traversals.search.rwt.state import MemoEdges

    kgs = KGSet(open_kgs(["demo"]))
    memo, usage = MemoEdges(kgs), Usage()
    dylan = await kgs.search("Bob Dylan", usage, limit=1)
    mother = next(r for r in (await kgs.get_relations(dylan, usage)).items if r.label == "mother")
    before = usage.kg_calls
    first = await memo.get_edges(dylan, mother, usage)
    again = await memo.get_edges(list(reversed(dylan)), mother, usage)
    assert again is first and [e.object.label for e in first.edges] == ["Beatrice Stone"]
    assert usage.kg_calls == before + 1  # only the call made is counted


async def test_the_trace_keeps_both_parts_of_each_value():
    # Eq. 4's V̂ = (1 − λ)·V_rollout + λ·V_critical: the trace records both parts, so a
    # reader can tell which model made a state look good
    answer = await search(HopBeamSearch, beam_width=2, beam_branch=2, max_hops=2).ask(QUESTION, topic_entities=["Bob Dylan"])
    walked = [n for n in answer.trace["nodes"] if n["parent"] is not None and n["entity_count"]]
    assert walked
    for n in walked:
        assert n["entity_count"] == len(n["entities"])
        assert n["value"] == pytest.approx(0.85 * n["rollout"] + 0.15 * n["critical"], abs=2e-4)
        assert 0.0 <= n["rollout"] <= 1.0 and 0.0 <= n["critical"] <= 1.0


async def test_an_answer_cut_to_its_first_entities_says_so_and_supports_only_those():
    """A state reaching 15 entities answered with its first 10, without a word, while its
    supporting edges led to all 15."""
    import re

    from traversals.api import SearchConfig, build_solver
    from traversals.llm.scripted import ScriptedLLM

    from .kgdouble import DictKG

    kg = DictKG([("hub", "has", f"e{i:02d}") for i in range(15)],
                labels={"hub": "Hub", **{f"e{i:02d}": f"Item {i:02d}" for i in range(15)}})

    def score(prompt, options, prefix):
        if prefix.startswith("RATING"):
            return [0.0 if o == "1.0" else -9.0 for o in options]
        return [0.0 if o.endswith(": has") else -5.0 for o in options]

    llm = ScriptedLLM(rules=[("three most likely answers", "Item 00, B: x, C: y]")], score=score)
    for strategy in ("beam", "mcts"):
        answer = await build_solver(strategy, llm, [kg], SearchConfig(embedder="lexical", max_hops=1)).ask(
            "what does [Hub] have")
        listed = answer.text.split(", ")
        assert len(listed) == 10 and answer.trace["answer_entities_left_out"] == 5, strategy
        assert sorted(e.object.label for e in answer.supporting_edges) == sorted(listed)
        assert re.fullmatch(r"Item \d\d", listed[0])
        import argparse

        from traversals.cli import answer_notes

        notes = answer_notes(answer, argparse.Namespace(threshold=0.8, max_expansions=20, value_model="m.json"))
        assert any("lists the first 10 entities its best state reached; 5 more are in the trace" in n for n in notes)


def too_long_at(state: str, *, rating: bool):
    """The scorer, but the rating (``rating``) or the relation prompt of the state holding
    ``state`` does not fit the LLM's context."""
    def score(prompt, options, prefix):
        from traversals.errors import PromptTooLong

        if f"<current entity>[{state}" in prompt and prefix.startswith("RATING") == rating:
            raise PromptTooLong("the prompt has 9000 tokens but the context window is 8192")
        return scorer(prompt, options, prefix)
    return ScriptedLLM(rules=[("three most likely answers", "Florence Stone, B: Beatrice Stone, C: Abram Zimmerman]")],
                       score=score)


@pytest.mark.parametrize("cls", [HopBeamSearch, MonteCarloTreeSearch])
async def test_a_state_whose_rating_does_not_fit_the_context_is_valued_0_and_the_search_goes_on(cls):
    # errors.PromptTooLong: a search gives up that node, not the question (it failed the question)
    s = cls(too_long_at("Florence Stone", rating=True), KGSet(open_kgs(["demo"])),
            RwTConfig(beam_width=2, beam_branch=2, max_hops=2, simulations=8))
    answer = await s.ask(QUESTION, topic_entities=["Bob Dylan"])
    florence = [n for n in answer.trace["nodes"] if n["entities"] == ["Florence Stone"]]
    assert florence and all(n["value"] == 0.0 and "does not fit the LLM's context" in n["note"] for n in florence)
    assert answer.text == "Beatrice Stone"  # the next best state


@pytest.mark.parametrize("cls", [HopBeamSearch, MonteCarloTreeSearch])
async def test_a_state_whose_relations_prompt_does_not_fit_the_context_is_not_expanded(cls):
    s = cls(too_long_at("Beatrice Stone", rating=False), KGSet(open_kgs(["demo"])),
            RwTConfig(beam_width=2, beam_branch=2, max_hops=2, simulations=8))
    answer = await s.ask(QUESTION, topic_entities=["Bob Dylan"])
    beatrice = next(n for n in answer.trace["nodes"] if n["entities"] == ["Beatrice Stone"])
    assert "not expanded: its prompt does not fit the LLM's context" in beatrice["note"]
    assert not [n for n in answer.trace["nodes"] if n["parent"] == beatrice["id"]]
    assert answer.text == "Beatrice Stone"


@pytest.mark.parametrize("cls", [HopBeamSearch, MonteCarloTreeSearch])
async def test_a_root_whose_relations_prompt_does_not_fit_the_context_fails_the_question(cls):
    from traversals.errors import PromptTooLong

    s = cls(too_long_at("Bob Dylan", rating=False), KGSet(open_kgs(["demo"])), RwTConfig(max_hops=2, simulations=4))
    with pytest.raises(PromptTooLong, match="context window"):  # the context is too small for any prompt
        await s.ask(QUESTION, topic_entities=["Bob Dylan"])


class SignedEmbedder:
    """Fixed vectors of which some point away from others (cosine -1)."""

    name = "signed"
    table = {"Paris": [1.0, 0.0], "Berlin": [0.0, 1.0], "Lyon": [-1.0, 0.0]}

    async def embed(self, texts):
        return [self.table[t] for t in texts]


async def test_a_guess_opposite_to_every_entity_adds_nothing_to_the_critical_value_and_takes_nothing_away():
    # cosines Paris-Lyon -1 and Berlin-Lyon 0: each guess's best is at least 0, so the value
    # stays in [0, 1]
    crit = CriticalModel(SignedEmbedder())
    assert await crit.value(["Paris", "Berlin"], PathNode(1, (Entity("k", "Lyon"),))) == 0.0
    assert await crit.value(["Paris", "Berlin"], PathNode(2, (Entity("k", "Lyon"), Entity("k", "Berlin")))) == 0.5


def test_rwt_configs_defaults_are_the_search_configs():
    """A search built in code without sizes searches as ``traversals ask`` without flags does."""
    rwt, search = RwTConfig(), SearchConfig()
    assert (rwt.c_puct, rwt.beam_width, rwt.beam_branch, rwt.simulations) == (
        search.c_puct, search.beam_width, search.beam_branch, search.simulations) == (1.25, 3, 3, 16)
    built = build_solver("mcts", llm(), open_kgs(["demo"]), SearchConfig(embedder="lexical"))
    assert rwt.max_hops == built.config.max_hops == 3
