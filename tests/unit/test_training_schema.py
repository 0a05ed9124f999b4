"""A model of another KG is warned about even when both KGs state ``rdf:type``: most Turtle
files do, and one known relation had settled that the model was this KG's."""

from __future__ import annotations

import warnings

import pytest

from traversals.errors import ValueModelMismatch
from traversals.search.rwt import ValueModel

HEAD = "@prefix ex: <http://example.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"


def _relation_ids(tmp_path, name: str, body: str) -> set[str]:
    from traversals.kg.factory import open_kgs

    path = tmp_path / name
    path.write_text(HEAD + body)
    return set(open_kgs([str(path)])[0].relation_ids())


def _model() -> ValueModel:  # trained on a KG of people who know each other, typed
    return ValueModel({"stop|path=knows": 1.0, "stop|path=type": 0.5, "go|path=~knows>type": 0.2},
                      {"kg": ["people"]}, source="people.json")


def test_a_model_of_another_typed_kg_is_warned_about(tmp_path):
    firms = _relation_ids(tmp_path, "firms.ttl", 'ex:a a ex:Firm ; rdfs:label "Acme" ; ex:ownedBy ex:b .\n'
                                                 'ex:b a ex:Firm ; rdfs:label "Bigco" .\n')
    assert "type" in firms
    with pytest.warns(ValueModelMismatch, match=r"trained on the relations knows \(of people\); the KG searched "
                                                 r"has ownedBy, none of them"):
        _model().check_kg(firms)


def test_the_model_of_its_own_kg_or_a_kg_of_types_alone_is_not(tmp_path):
    people = _relation_ids(tmp_path, "people.ttl", 'ex:a a ex:Person ; rdfs:label "Ann" ; ex:knows ex:b .\n')
    types = _relation_ids(tmp_path, "types.ttl", 'ex:a a ex:Person ; rdfs:label "Ann" .\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _model().check_kg(people)
        _model().check_kg(types)  # nothing to tell by


def test_during_a_search_a_path_of_types_alone_settles_nothing():
    model = _model()
    with pytest.warns(ValueModelMismatch, match="none of them"):
        model.predict(["who"], ["type"])  # shared by every KG: not evidence either way
        assert model.check_schema
        for rel in ("ownedBy", "foundedBy", "locatedIn"):
            model.predict(["who"], [rel])
