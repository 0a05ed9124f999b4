"""MCP server: ``traversals mcp`` gives an agent the KG interface and the whole search.

An MCP host (a chat app, an IDE agent) connects to it over stdio or streamable HTTP and
gets four tools:

- ``kg_search(text, limit)`` -- entities whose label matches, in every KG;
- ``kg_relations(entity_id, kg)`` -- the relations of an entity, both directions, with
  the key to pass to ``kg_edges`` (``P25``, ``~P25`` walks it backwards); without ``kg``,
  the KG whose id it is (:func:`~.search.browse.entity_of_id`);
- ``kg_edges(entity_id, relation, kg)`` -- the edges along a relation and the entities
  they reach;
- ``answer_question(question, strategy, max_hops, k, max_expansions, simulations,
  top_facts)`` -- Tree-of-Traversals (or chain, mcts, beam, retrieve, or CoT) with the
  server's own LLM: the answer, its value and the KG edges that support it.

The first three are the paper's KG interface (``initialize`` / ``get_relations`` /
``get_edges``) handed to the host's model, so a strong hosted model can walk the KG
itself; the fourth runs the search here. Answers are bounded like the search's own
(``max_relations``, ``max_edges``, with a count of what was left out). Failures a caller
can act on (an unknown KG, a timeout, an id the KG does not know) come back as tool
errors with the message; the ``mcp`` extra provides the SDK.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from contextlib import asynccontextmanager
from typing import Any, Awaitable, Callable, Sequence

from .api import STRATEGIES, SearchConfig, build_solver, close_all, load_value_model
from .search.templates import load_prompts
from .embed import Embedder, open_embedder
from .errors import BadInput, TraversalsError
from .kg.base import DEFAULT_MAX_EDGES, DEFAULT_MAX_RELATIONS, Entity, KnowledgeGraph
from .llm.base import LLM
from .search import browse
from .search.kgset import KGSet
from .service import ServiceLimits, log_backend_bug, parse_ask_request
from .validate import unicode_text

try:  # the mcp extra's pydantic: a tool's integer argument taken only as a JSON integer
    from pydantic import StrictInt
except ImportError:  # pragma: no cover - without the extra no tool is made (create_mcp_server refuses)
    StrictInt = int  # type: ignore[misc, assignment]

__all__ = ["MAX_QUEUE", "create_mcp_server"]

#: ``answer_question`` calls that may wait while the searches run (more are refused at once)
MAX_QUEUE = 4

INSTRUCTIONS = (
    "Knowledge-graph tools. To answer a factual question yourself: kg_search for the entity "
    "named in it, kg_relations on that entity, kg_edges along the relation that leads towards "
    "the answer, and repeat from the entities reached. Or call answer_question to let the "
    "server's Tree-of-Traversals search answer it, with the supporting edges."
)


def create_mcp_server(
    llm: LLM,
    kgs: Sequence[KnowledgeGraph],
    *,
    defaults: SearchConfig | None = None,
    default_strategy: str = "tree",
    max_relations: int = DEFAULT_MAX_RELATIONS,
    max_edges: int = DEFAULT_MAX_EDGES,
    close_on_shutdown: bool = True,
    embedder: Embedder | None = None,
    max_question_chars: int = ServiceLimits.max_question_chars,
    timeout: float | None = None,
    max_concurrency: int = ServiceLimits.max_concurrency,
    max_queue: int = MAX_QUEUE,
    prepare: Callable[[LLM], Awaitable[None]] | None = None,
):
    """The MCP server (``mcp.server.mcpserver.MCPServer``). The LLM and KGs (and
    ``embedder``, RwT's critical model, by default ``defaults.embedder`` opened here) are
    closed when it shuts down unless ``close_on_shutdown`` is false. ``answer_question``
    refuses a question over ``max_question_chars`` (the HTTP service's cap), runs at most
    ``max_concurrency`` searches at once, lets at most ``max_queue`` more calls wait their
    turn (one more is refused at once with a tool error saying the server is busy: a
    search takes minutes, and callers piling up behind it would wait for ever) and gives
    up a search after ``timeout`` seconds (None: no limit) with a tool error that says so.
    ``prepare(llm)`` runs once when the server starts (``traversals.options.prepare_llm``
    probes an endpoint's log-probabilities, as :func:`~traversals.service.create_app` does)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BadInput("the MCP server needs the MCP SDK: pip install 'traversals[mcp]'") from exc
    if not kgs:
        raise BadInput("at least one knowledge graph is needed")
    defaults = defaults or SearchConfig()
    # built once, with the same range checks as serve; the tools read their limits from it
    limits = ServiceLimits(max_concurrency=max_concurrency, max_queue=max_queue, timeout=timeout,
                           max_question_chars=max_question_chars).covering(defaults)
    searches = asyncio.Semaphore(limits.max_concurrency)
    admitted = 0  # answer_question calls searching or waiting for a search slot
    if default_strategy not in STRATEGIES:
        raise BadInput(f"unknown strategy {default_strategy!r}; choose one of {', '.join(STRATEGIES)}")
    kgset = KGSet(kgs, max_relations=max_relations, max_edges=max_edges)
    if embedder is None:  # RwT's critical model, loaded on first use, shared
        embedder = open_embedder(defaults.embedder)
    value_model = load_value_model(defaults)  # read once, not per answer_question
    prompts = load_prompts(defaults.prompts)  # the same
    try:  # a default out of range (--threshold nan) fails here, not in every answer_question
        for strategy in dict.fromkeys(("tree", default_strategy)):  # --max-hops 4 is no default of retrieve's
            config = dataclasses.replace(defaults, k=1) if strategy == "chain" else defaults  # chain: k = 1 always
            build_solver(strategy, llm, kgs, config, embedder=embedder, value_model=value_model, prompts=prompts)
    except BadInput as exc:
        raise BadInput(f"the server's default search settings: {exc}") from None

    def text_arg(value: str, what: str) -> str:
        """``value`` stripped; a tool error if it is empty or not valid Unicode (a lone
        surrogate from a ``\\ud800`` escape)."""
        if not value.strip():
            raise ToolError(f"{what} must not be empty")
        try:
            return unicode_text(value, what).strip()
        except BadInput as exc:
            raise ToolError(str(exc)) from None

    async def entity(entity_id: str, kg: str | None) -> Entity:
        """The entity ``entity_id`` names in ``kg``, else in the KG whose id it is (each KG
        asked, as ``traversals kg relations|edges`` asks them: an id of a later KG was looked
        up in the first only); an id of several KGs, or of none, is a tool error."""
        if not entity_id or not entity_id.strip():
            raise ToolError("entity_id must be an entity id from kg_search, kg_relations or kg_edges")
        text = text_arg(entity_id, "entity_id")
        try:
            named = browse.entity_ref(kgset, text, kg)  # a KG this server does not have: refused here
        except BadInput as exc:
            raise ToolError(str(exc)) from None
        if kg is not None or len(kgset.kgs) == 1:  # the one KG to ask: its relations say whether it is an id
            return named
        found = await call(browse.entity_of_id(kgset, text, give="its kg"))
        if found is None:
            raise ToolError(f"no KG has relations for {text!r} (each of {', '.join(k.name for k in kgset.kgs)} "
                            "was asked): is it an id, not a label? Search its label for its id (kg_search)")
        return found

    async def call(coro: Any) -> Any:
        try:
            return await coro
        except TraversalsError as exc:  # a timeout, a bad id, a KG that is down: the caller reads why
            log_backend_bug(exc, logging.getLogger("traversals.mcp"))  # a bug in a backend: the traceback too
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    @asynccontextmanager
    async def lifespan(server: Any):
        if prepare is not None:
            await prepare(llm)
        try:
            yield {}
        finally:
            if close_on_shutdown:
                await close_all(llm, kgs, embedder)

    server = MCPServer(name="traversals", instructions=INSTRUCTIONS, lifespan=lifespan)

    @server.tool(structured_output=True)
    # integers are StrictInt: the SDK's lax validation took "k": true as 1 and "k": "3" as 3,
    # which POST /v1/ask refuses (docs/mcp.md: arguments are checked as it checks them)
    async def kg_search(text: str, limit: StrictInt = 5) -> dict[str, Any]:
        """Entities whose label matches `text` (exact, then case-insensitive, then partial), in every KG."""
        return await call(browse.find(kgset, text_arg(text, "text"), limit=limit))

    @server.tool(structured_output=True)
    async def kg_relations(entity_id: str, kg: str | None = None) -> dict[str, Any]:
        """Relations of an entity in both directions, the most frequent first; `omitted` counts
        those past the list (kg_edges takes their keys too). Pass a relation's `key` to kg_edges;
        a key starting with ~ walks the relation backwards (who has this entity as its value)."""
        return await call(browse.relations(kgset, await entity(entity_id, kg)))

    @server.tool(structured_output=True)
    async def kg_edges(entity_id: str, relation: str, kg: str | None = None) -> dict[str, Any]:
        """Edges along `relation` (a key from kg_relations) from the entity, and the entities they reach."""
        return await call(browse.edges(kgset, await entity(entity_id, kg), relation))

    @server.tool(structured_output=True)
    async def answer_question(question: str, strategy: str | None = None, max_hops: StrictInt | None = None,
                              k: StrictInt | None = None, max_expansions: StrictInt | None = None,
                              simulations: StrictInt | None = None, top_facts: StrictInt | None = None) -> dict[str, Any]:
        """Answer a question with the server's own LLM searching the KGs (Tree-of-Traversals by
        default; `chain` is faster, `retrieve` asks once with the KG facts most similar to the
        question, `cot` uses no KG). Search sizes, each omitted for the server's default and
        refused by a strategy that does not read it: `max_hops` (retrieve, mcts, beam): the hops
        of facts retrieve gathers, 1 to 3, best set to the question's own (2 for "the films of
        X's director"), or the most hops mcts/beam walk; `k` (tree): the branches tried at each
        step; `max_expansions` (tree, chain): the nodes expanded before the best answer found is
        given; `simulations` (mcts): the searches from the root; `top_facts` (retrieve): the
        facts put before the LLM. Returns the answer, its value and the KG edges that support it."""
        chosen = default_strategy if strategy is None else strategy  # "" is a mistake, as in the service
        if chosen not in STRATEGIES:
            raise ToolError(f"strategy must be one of {', '.join(STRATEGIES)}")
        question = text_arg(question, "question")
        if len(question) > limits.max_question_chars:
            raise ToolError(f"question is longer than {limits.max_question_chars} characters; ask it shorter")
        # the HTTP service's checks of the same settings: its caps, and a setting the strategy does not read
        sizes = {"max_hops": max_hops, "k": k, "max_expansions": max_expansions, "simulations": simulations,
                 "top_facts": top_facts}
        body: dict[str, Any] = {"question": question, "strategy": chosen,
                                **{name: n for name, n in sizes.items() if n is not None}}
        try:
            config = parse_ask_request(body, default_strategy, defaults, limits).config
        except BadInput as exc:
            raise ToolError(str(exc)) from None
        try:
            solver = build_solver(chosen, llm, kgs, config, embedder=embedder, value_model=value_model, prompts=prompts)
        except BadInput as exc:
            raise ToolError(str(exc)) from None
        nonlocal admitted
        if admitted >= limits.max_concurrency + limits.max_queue:  # no await since the check: no other call slips in
            running = min(admitted, limits.max_concurrency)
            raise ToolError(
                f"the server is busy: {running} search(es) running and {admitted - running} call(s) waiting, "
                f"the most its max_queue ({limits.max_queue}) lets wait; call again when a search has finished, "
                "or start the server with a larger max_queue (traversals mcp --max-queue N)"
            )
        admitted += 1
        try:
            async with searches:
                try:
                    answer = await call(asyncio.wait_for(solver.ask(question), limits.timeout))
                except asyncio.TimeoutError:
                    raise ToolError(f"the search took longer than {limits.timeout:g} s (the server's --timeout); ask a "
                                    "simpler question, or strategy 'chain'") from None
        finally:  # answered, failed, or the caller gave up waiting
            admitted -= 1
        return answer.to_json()

    return server
