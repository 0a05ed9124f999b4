"""Your KG and your LLM in one search: ``python examples/ask.py [chain|tree|cot|beam|mcts]``."""

from __future__ import annotations

import asyncio
import sys

from dict_kg import movies_kg
from my_llm import MyLLM, toy_complete

from traversals import KGError, LLMError, SearchConfig, TraversalsError, build_solver, close_all

QUESTION = "Where was the director of [Inception] born?"  # [brackets]: link this mention directly


async def main(strategy: str) -> None:
    kg, llm = movies_kg(), MyLLM(toy_complete)
    # beam and mcts rank states with sentence embeddings: "lexical" needs no model download
    config = SearchConfig(embedder="lexical", max_expansions=10)
    solver = build_solver(strategy, llm, [kg], config)
    try:
        answer = await asyncio.wait_for(solver.ask(QUESTION), timeout=60)  # your bound on the whole search
    except KGError as e:  # your KG raised, timed out or returned something malformed
        sys.exit(f"knowledge graph failed: {e}")
    except LLMError as e:
        sys.exit(f"LLM failed: {e}")
    except TraversalsError as e:  # any other error the library raises on purpose (BadInput, ...)
        sys.exit(str(e))
    finally:
        await close_all(llm, [kg])
    print(f"{strategy}: {answer.text} (value {answer.value}, found: {answer.found})")
    for edge in answer.supporting_edges:  # provenance: the KG edges from the question to the answer
        print(f"  {edge.subject.label} --{edge.relation.label}--> {edge.object.label}")
    print(f"  {answer.usage.llm_calls} LLM calls, {answer.usage.kg_calls} KG calls, stopped: {answer.stopped}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "chain"))
