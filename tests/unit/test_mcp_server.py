"""`traversals mcp`: the KG interface and the search as MCP tools, through the MCP SDK's
client over the real protocol (in memory), on the embedded demo store. The command over
stdio: tests/integration/test_mcp_stdio.py."""

from __future__ import annotations

import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from traversals.api import SearchConfig  # noqa: E402
from traversals.embed.lexical import LexicalEmbedder  # noqa: E402
from traversals.kg.factory import open_kgs  # noqa: E402
from traversals.llm.scripted import ScriptedLLM  # noqa: E402
from traversals.mcp_server import create_mcp_server  # noqa: E402


def server(llm=None, **kw):
    return create_mcp_server(llm or ScriptedLLM([]), open_kgs(["demo"]), **kw)


async def test_an_agent_walks_the_kg_with_the_interface_tools():
    async with Client(server()) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        found = (await c.call_tool("kg_search", {"text": "Bob Dylan"})).structured_content["entities"]
        dylan = found[0]
        rels = (await c.call_tool("kg_relations", {"entity_id": dylan["id"]})).structured_content
        mother = (await c.call_tool("kg_edges", {"entity_id": dylan["id"], "relation": "P25"})).structured_content
        beatrice = mother["entities"][0]
        grandmother = (await c.call_tool("kg_edges", {"entity_id": beatrice["id"], "relation": "P25"})).structured_content
        child_of = (await c.call_tool("kg_edges", {"entity_id": beatrice["id"], "relation": "~P25"})).structured_content
    assert names == {"kg_search", "kg_relations", "kg_edges", "answer_question"}
    assert (dylan["id"], dylan["label"], dylan["kg"]) == ("Q392", "Bob Dylan", "demo")
    assert {"key": "P25", "label": "mother", "kg": "demo"} in rels["relations"] and rels["omitted"] == 0
    assert beatrice["label"] == "Beatrice Stone"
    assert [e["label"] for e in grandmother["entities"]] == ["Florence Stone"]
    assert mother["edges"][0] == {"subject": {"id": "Q392", "label": "Bob Dylan", "kg": "demo"},
                                  "relation": {"id": "P25", "label": "mother", "iri": "http://www.wikidata.org/prop/direct/P25"},
                                  "object": {"id": beatrice["id"], "label": "Beatrice Stone", "kg": "demo"}, "kg": "demo"}
    assert [e["label"] for e in child_of["entities"]] == ["Bob Dylan"]  # ~P25: walked backwards


@pytest.mark.parametrize(
    "tool, args, says",
    [
        ("kg_edges", {"entity_id": "Q392", "relation": "P9999"}, "has no relation 'P9999'"),
        ("kg_relations", {"entity_id": "Q392", "kg": "musicbrainz"}, "unknown kg 'musicbrainz'"),
        ("kg_relations", {"entity_id": " "}, "entity_id must be"),
        ("kg_search", {"text": ""}, "text must not be empty"),
        ("answer_question", {"question": "q", "strategy": "nope"}, "strategy must be one of"),
        ("answer_question", {"question": "q", "strategy": ""}, "strategy must be one of"),  # not the default
    ],
)
async def test_mistakes_come_back_as_tool_errors_the_agent_can_read(tool, args, says):
    async with Client(server()) as c:
        r = await c.call_tool(tool, args)
    assert r.is_error and says in r.content[0].text


async def test_answer_question_runs_the_search_with_the_servers_llm():
    llm = ScriptedLLM(rules=[("Bob Dylan", "Thought: ...\nANSWER: Florence Stone")])
    async with Client(server(llm, default_strategy="cot")) as c:
        r = await c.call_tool("answer_question", {"question": "Who is Bob Dylan's maternal grandmother?"})
    out = r.structured_content
    assert not r.is_error and out["answer"] == "Florence Stone" and out["strategy"] == "cot" and out["llm_calls"] == 1


async def test_a_bug_in_the_llm_backend_is_a_tool_error_with_its_traceback_in_the_log(caplog):
    """As serve logs it: the tool error names the backend, the server's log has the lines that raised."""
    def reply(prompt, prefix, n, temperature):
        raise RuntimeError("boom in the user's backend")

    caplog.set_level("ERROR", logger="traversals.mcp")
    async with Client(server(ScriptedLLM(reply), default_strategy="cot")) as c:
        r = await c.call_tool("answer_question", {"question": "Who is Bob Dylan's mother?"})
    assert r.is_error and "generate() raised RuntimeError" in r.content[0].text
    assert "RuntimeError: boom in the user's backend" in caplog.text and ", in reply" in caplog.text


def recorded_builds(monkeypatch) -> list:
    """The (strategy, config) of every solver the MCP server builds, in order (the first: its
    start-up check of the defaults)."""
    import traversals.mcp_server as module

    built: list = []
    real = module.build_solver
    monkeypatch.setattr(module, "build_solver", lambda name, *a, **kw: built.append((name, a[2])) or real(name, *a, **kw))
    return built


async def test_answer_question_takes_max_hops_checked_as_the_http_service_checks_it(monkeypatch):
    built = recorded_builds(monkeypatch)
    llm = ScriptedLLM(rules=[("Facts:", "ANSWER: Florence Stone"), ("Find the names in a text", "Bob Dylan")])
    async with Client(server(llm, embedder=LexicalEmbedder())) as c:
        ok = await c.call_tool("answer_question", {"question": "Who is Bob Dylan's maternal grandmother?",
                                                   "strategy": "retrieve", "max_hops": 3})
        too_far = await c.call_tool("answer_question", {"question": "q", "strategy": "retrieve", "max_hops": 4})
        unread = await c.call_tool("answer_question", {"question": "q", "strategy": "tree", "max_hops": 2})
        capped = await c.call_tool("answer_question", {"question": "q", "strategy": "mcts", "max_hops": 6})
        await c.call_tool("answer_question", {"question": "q", "strategy": "chain"})  # its answer aside: built with k 1
    assert not ok.is_error and ok.structured_content["answer"] == "Florence Stone"
    name, config = built[1]  # built[0]: the start-up check of the defaults
    assert name == "retrieve" and config.max_hops == 3
    assert too_far.is_error and "'max_hops' with retrieve is 1 to 3" in too_far.content[0].text
    assert unread.is_error and "'max_hops' is read by mcts, beam, retrieve, not by strategy tree" in unread.content[0].text
    assert capped.is_error and "'max_hops' must be between 1 and 5" in capped.content[0].text
    assert built[-1][0] == "chain" and built[-1][1].k == 1
    assert len(built) == 3  # the refused calls built no solver


async def test_answer_question_takes_the_search_sizes_a_strategy_reads(monkeypatch):
    built = recorded_builds(monkeypatch)
    llm = ScriptedLLM(rules=[("Facts:", "ANSWER: Florence Stone"), ("Find the names in a text", "Bob Dylan")])
    q = "Who is Bob Dylan's maternal grandmother?"
    async with Client(server(llm, embedder=LexicalEmbedder())) as c:
        few = await c.call_tool("answer_question", {"question": q, "strategy": "retrieve", "top_facts": 3})
        tree = await c.call_tool("answer_question", {"question": "q", "strategy": "tree", "top_facts": 3})
        wide = await c.call_tool("answer_question", {"question": "q", "strategy": "tree", "k": 9})
        chain = await c.call_tool("answer_question", {"question": "q", "strategy": "chain", "k": 2})
    assert not few.is_error and built[1][0] == "retrieve" and built[1][1].top_facts == 3
    assert few.structured_content["answer"] == "Florence Stone"
    assert tree.is_error and "'top_facts' is read by retrieve, not by strategy tree" in tree.content[0].text
    assert wide.is_error and "'k' must be between 1 and 8" in wide.content[0].text
    assert chain.is_error and "'chain' is the k = 1 search" in chain.content[0].text
    assert len(built) == 2  # the refused calls built no solver


async def test_answer_question_for_chain_with_the_servers_own_k_runs_k_1(monkeypatch):
    """`mcp --k 5`: k 5 is the server's own (tree calls'), so a chain call passing it back is not
    refused as asking for k > 1; another k still is."""
    built = recorded_builds(monkeypatch)
    async with Client(server(ScriptedLLM(lambda *a: "ANSWER: x"), defaults=SearchConfig(k=5),
                             embedder=LexicalEmbedder())) as c:
        same = await c.call_tool("answer_question", {"question": "q", "strategy": "chain", "k": 5})
        other = await c.call_tool("answer_question", {"question": "q", "strategy": "chain", "k": 4})
    assert not same.is_error, same.content[0].text
    assert built[-1][0] == "chain" and built[-1][1].k == 1
    assert other.is_error and "'chain' is the k = 1 search" in other.content[0].text


@pytest.mark.parametrize("tool, args", [
    ("answer_question", {"k": True}), ("answer_question", {"k": "3"}), ("answer_question", {"k": 3.0}),
    ("answer_question", {"max_expansions": "5"}), ("answer_question", {"strategy": "mcts", "simulations": False}),
    ("kg_search", {"limit": "3"}), ("kg_search", {"limit": True}),
])
async def test_an_integer_argument_of_another_json_type_is_refused_as_post_v1_ask_refuses_it(monkeypatch, tool, args):
    """The SDK's lax validation took "k": true as 1 and "k": "3" as 3."""
    built = recorded_builds(monkeypatch)
    base = {"question": "Who is Bob Dylan's mother?", "strategy": "tree"} if tool == "answer_question" else {
        "text": "Bob Dylan"}
    async with Client(server(ScriptedLLM(lambda *a: "ANSWER: x"))) as c:
        r = await c.call_tool(tool, {**base, **args})
        exact = await c.call_tool("kg_search", {"text": "Bob Dylan", "limit": 1})
    name = next(iter(args.keys() - {"strategy"}))
    assert r.is_error and name in r.content[0].text and "valid integer" in r.content[0].text
    assert len(built) == 1  # the start-up check alone: no search was built
    assert not exact.is_error and len(exact.structured_content["entities"]) == 1


async def test_a_relation_past_the_listed_ones_can_still_be_walked():
    async with Client(server(max_relations=2)) as c:
        rels = (await c.call_tool("kg_relations", {"entity_id": "Q392"})).structured_content
        listed = {r["key"] for r in rels["relations"]}
        assert len(listed) == 2 and rels["omitted"] > 0
        every = (await c.call_tool("kg_relations", {"entity_id": "Q392"})).structured_content
        assert every == rels  # the tool's list stays capped
        assert "P25" not in listed or "~P25" not in listed
        hidden = "~P25" if "P25" in listed else "P25"
        got = await c.call_tool("kg_edges", {"entity_id": "Q392", "relation": hidden})
    assert not got.is_error and got.structured_content["edges"]


@pytest.mark.parametrize(
    "tool, args, says",
    [
        ("answer_question", {"question": "who is \ud800"}, "question is not valid Unicode"),
        ("kg_search", {"text": "Bob \udfff"}, "text is not valid Unicode"),
        ("kg_relations", {"entity_id": "Q\ud800"}, "entity_id is not valid Unicode"),
        ("answer_question", {"question": "x" * 2001}, "question is longer than 2000 characters"),
    ],
)
async def test_text_the_server_cannot_use_is_a_readable_tool_error_not_an_internal_one(tool, args, says):
    llm = ScriptedLLM(rules=[("", "ANSWER: x")])
    async with Client(server(llm, default_strategy="cot")) as c:
        r = await c.call_tool(tool, args)
    assert r.is_error and says in r.content[0].text
    assert llm.calls == []  # nothing reached the LLM


async def test_the_question_cap_is_the_servers_to_set():
    llm = ScriptedLLM(rules=[("", "Thought: ...\nANSWER: x")])
    async with Client(server(llm, default_strategy="cot", max_question_chars=5)) as c:
        long = await c.call_tool("answer_question", {"question": "who is it"})
        short = await c.call_tool("answer_question", {"question": " who "})
    assert long.is_error and "longer than 5 characters" in long.content[0].text
    assert not short.is_error and short.structured_content["question"] == "who"


def test_default_search_settings_out_of_range_stop_the_server_from_starting():
    from traversals.api import SearchConfig
    from traversals.errors import BadInput

    with pytest.raises(BadInput, match="the server's default search settings: --threshold"):
        server(defaults=SearchConfig(threshold=float("nan")))


class SlowLLM(ScriptedLLM):
    """A scripted LLM whose generation takes ``delay`` seconds; counts searches in flight."""

    def __init__(self, delay, **kw):
        super().__init__(rules=[("", "Thought: ...\nANSWER: Florence Stone")], **kw)
        self.delay, self.running, self.most = delay, 0, 0

    async def generate(self, *args, **kw):
        import asyncio

        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.delay)
            return await super().generate(*args, **kw)
        finally:
            self.running -= 1


async def test_answer_question_gives_up_after_the_timeout_and_runs_one_search_at_a_time():
    import asyncio

    async with Client(server(SlowLLM(5.0), default_strategy="cot", timeout=0.1)) as c:
        r = await c.call_tool("answer_question", {"question": "Who is Bob Dylan's grandmother?"})
    assert r.is_error and "the search took longer than 0.1 s" in r.content[0].text
    llm = SlowLLM(0.05)
    async with Client(server(llm, default_strategy="cot")) as c:
        done = await asyncio.gather(*(c.call_tool("answer_question", {"question": f"q{i}"}) for i in range(3)))
    assert not any(r.is_error for r in done) and llm.most == 1  # the others waited their turn
    with pytest.raises(Exception, match="must be a number of seconds over 0"):
        server(default_strategy="cot", timeout=float("nan"))


async def test_answer_question_refuses_at_once_when_max_queue_calls_are_waiting_already():
    import asyncio

    llm = SlowLLM(0.5)
    async with Client(server(llm, default_strategy="cot", max_queue=2)) as c:
        calls = [asyncio.create_task(c.call_tool("answer_question", {"question": f"q{i}"})) for i in range(5)]
        # one search runs and two calls wait; the other two are refused before the first search ends
        done, _ = await asyncio.wait(calls, timeout=0.3)
        refused = [t.result() for t in done]
        assert len(refused) == 2 and llm.running == 1
        assert all(r.is_error for r in refused)
        assert "the server is busy: 1 search(es) running and 2 call(s) waiting" in refused[0].content[0].text
        assert "start the server with a larger max_queue (traversals mcp --max-queue N)" in refused[0].content[0].text
        answered = await asyncio.gather(*(t for t in calls if t not in done))
        assert [r.structured_content["answer"] for r in answered] == ["Florence Stone"] * 3
        assert llm.most == 1 and len(llm.generate_calls) == 3  # the refused calls never reached the LLM
        # once the queue has drained a call is taken again
        again = await c.call_tool("answer_question", {"question": "q5"})
    assert not again.is_error


async def test_the_default_queue_is_small_and_max_queue_0_takes_one_call_at_a_time():
    import asyncio

    from traversals.mcp_server import MAX_QUEUE

    assert MAX_QUEUE == 4
    llm = SlowLLM(0.2)
    async with Client(server(llm, default_strategy="cot")) as c:
        out = await asyncio.gather(*(c.call_tool("answer_question", {"question": f"q{i}"}) for i in range(MAX_QUEUE + 3)))
    assert sum(r.is_error for r in out) == 2 and len(llm.generate_calls) == MAX_QUEUE + 1
    llm = SlowLLM(0.2)
    async with Client(server(llm, default_strategy="cot", max_queue=0)) as c:
        out = await asyncio.gather(*(c.call_tool("answer_question", {"question": f"q{i}"}) for i in range(3)))
    assert [r.is_error for r in out].count(True) == 2 and len(llm.generate_calls) == 1
    with pytest.raises(Exception, match="max_queue .* must be a whole number of at least 0"):
        server(default_strategy="cot", max_queue=-1)


async def test_an_id_no_kg_knows_is_a_tool_error_not_an_empty_list():
    """An agent that pastes a label or a mistyped id learns it is not an id, rather than
    reading 'no relations' as a fact about the entity."""
    async with Client(server()) as c:
        r = await c.call_tool("kg_relations", {"entity_id": "Bob Dylan"})
        known = await c.call_tool("kg_relations", {"entity_id": "Q392"})
    assert r.is_error and "'Bob Dylan' has no relations in kg demo" in r.content[0].text
    assert "kg_search" in r.content[0].text
    assert not known.is_error and known.structured_content["relations"]


@pytest.mark.parametrize("chars", [0, -1, 2.5, True])
def test_a_question_cap_that_refuses_every_question_stops_the_server_from_starting(chars):
    from traversals.errors import BadInput

    with pytest.raises(BadInput, match="max_question_chars must be a whole number of at least 1"):
        server(max_question_chars=chars)


async def test_a_max_hops_beyond_retrieves_is_refused_at_start_or_told_to_the_agent():
    from traversals.api import SearchConfig
    from traversals.errors import BadInput

    with pytest.raises(BadInput, match="the server's default search settings: --max-hops with retrieve"):
        server(defaults=SearchConfig(max_hops=4, embedder="lexical"), default_strategy="retrieve")
    async with Client(server(defaults=SearchConfig(max_hops=4, embedder="lexical"))) as c:  # tree's default
        r = await c.call_tool("answer_question", {"question": "who is Bob Dylan's mother", "strategy": "retrieve"})
    assert r.is_error and "give 'max_hops' 1 to 3 with a retrieve question" in r.content[0].text


async def test_with_several_kgs_an_id_is_looked_up_in_each_kg_as_traversals_kg_looks_it_up(tmp_path):
    """Without `kg`, kg_relations and kg_edges took an id for the first KG's: an id of the
    second was an entity of the first, its edges naming it {"label": ID, "kg": "demo"}; an id
    of no KG was "no relations in kg demo"; an id of two was the first's. As `traversals kg
    relations|edges` now: each KG is asked, an id of two asks for `kg`, an id of none says
    each KG was asked."""
    music = tmp_path / "music.ttl"
    music.write_text('@prefix m: <http://music.example/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n'
                     'm:hz rdfs:label "Hans Zimmer" ; m:born m:frankfurt .\nm:frankfurt rdfs:label "Frankfurt" .\n')
    frankfurt = "http://music.example/frankfurt"
    async with Client(create_mcp_server(ScriptedLLM([]), open_kgs(["demo", str(music)]))) as c:
        rels = await c.call_tool("kg_relations", {"entity_id": frankfurt})
        born = await c.call_tool("kg_edges", {"entity_id": frankfurt, "relation": "~born"})
        dylan = await c.call_tool("kg_relations", {"entity_id": "Q392"})  # the first KG's, as before
        nowhere = await c.call_tool("kg_relations", {"entity_id": "http://music.example/nowhere"})
    assert not rels.is_error and rels.structured_content["relations"] == [{"key": "~born", "label": "is born of",
                                                                           "kg": "music"}]
    assert not born.is_error and [e["label"] for e in born.structured_content["entities"]] == ["Hans Zimmer"]
    [edge] = born.structured_content["edges"]
    assert edge["object"] == {"id": frankfurt, "label": "Frankfurt", "kg": "music"} and edge["kg"] == "music"
    assert not dylan.is_error and {"key": "P25", "label": "mother", "kg": "demo"} in dylan.structured_content["relations"]
    assert nowhere.is_error and ("no KG has relations for 'http://music.example/nowhere' (each of demo, music was "
                                 "asked)") in nowhere.content[0].text
    # two triple files mint one IRI for "Alice": the id alone names neither, `kg` names one
    (tmp_path / "a.txt").write_text("Alice|knows|Bob\n")
    (tmp_path / "b.txt").write_text("Alice|likes|Carol\n")
    alice = "http://traversals.local/entity/Alice"
    async with Client(create_mcp_server(ScriptedLLM([]), open_kgs([str(tmp_path / "a.txt"),
                                                                   str(tmp_path / "b.txt")]))) as c:
        both = await c.call_tool("kg_relations", {"entity_id": alice})
        b = await c.call_tool("kg_edges", {"entity_id": alice, "relation": "likes", "kg": "b"})
    assert both.is_error and f"'{alice}' is an entity of 2 KGs (a, b): give its kg" in both.content[0].text
    assert not b.is_error and [e["label"] for e in b.structured_content["entities"]] == ["Carol"]
