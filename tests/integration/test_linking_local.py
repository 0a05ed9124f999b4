"""Linking with the real local model, on questions with no [brackets]: the entity must be
found whether the model copies the name or answers the question instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from traversals.kg.factory import open_kg
from traversals.llm.base import Usage
from traversals.search.kgset import KGSet
from traversals.search.linking import Linker

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]

TTL = """\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Acme rdfs:label "Acme Corporation" ; ex:headquarteredIn ex:Tucson ; ex:ceo ex:Jane .
ex:Globex rdfs:label "Globex" ; ex:headquarteredIn ex:Phoenix .
ex:Tucson rdfs:label "Tucson" ; ex:locatedIn ex:Arizona .
ex:Phoenix rdfs:label "Phoenix" ; ex:locatedIn ex:Arizona .
ex:Arizona rdfs:label "Arizona" .
ex:Jane rdfs:label "Jane Smith" .
ex:Dylan rdfs:label "Bob Dylan" ; ex:mother ex:Beatty .
ex:Beatty rdfs:label "Beatrice Stone" .
ex:Dream rdfs:label "A Midsummer Night's Dream" ; ex:releaseYear "1935" .
"""


@pytest.mark.parametrize("question, linked", [
    ("Which company is headquartered in Tucson?", ["Tucson"]),
    ("Who is the CEO of Acme Corporation?", ["Acme Corporation"]),
    ("Who is Bob Dylan's maternal grandmother?", ["Bob Dylan"]),  # the demo's question
    ("what year was the movie A Midsummer Night's Dream released", ["A Midsummer Night's Dream"]),
])
async def test_the_real_model_links_an_unmarked_question(local_llm, tmp_path: Path, question, linked):
    (tmp_path / "kg.ttl").write_text(TTL)
    kgs = KGSet([open_kg(str(tmp_path / "kg.ttl"))])
    try:
        got = await Linker(local_llm, kgs, constrained=True).initialize(question, Usage())
    finally:
        await kgs.close()
    assert [e.label for e in got] == linked
