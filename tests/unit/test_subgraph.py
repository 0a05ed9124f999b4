"""The local subgraph and its compact YAML rendering (paper Figure 3)."""

import yaml

from traversals.kg.base import Entity, Relation
from traversals.search.subgraph import Fact, Subgraph, yaml_scalar

DYLAN = Entity("Q392", "Bob Dylan", "American singer-songwriter")
BEATRICE = Entity("Q62519478", "Beatrice Stone")
MOTHER = Relation("P25", "mother", "is mother of")


def test_rendering_matches_figure_3():
    sg = Subgraph().with_entities([DYLAN]).extend([Fact(DYLAN, MOTHER, BEATRICE)])
    assert sg.render() == (
        "Knowledge Graph Entities:\n"
        "  Q392: Bob Dylan - American singer-songwriter\n"
        "  Q62519478: Beatrice Stone\n"
        "Knowledge Graph Edges:\n"
        "  Bob Dylan:\n"
        "    mother:\n"
        "      Beatrice Stone"
    )


def test_inverse_facts_render_under_the_walked_entity_and_keep_forward_edges():
    film = Entity("http://x/e/Gumball", "The Gumball Rally")
    bail = Entity("http://x/e/Bail", "Charles Bail")
    directed_by = Relation("directed_by", "directed by")
    sg = Subgraph().with_entities([bail]).extend([Fact(bail, directed_by.reversed(), film)])
    text = "\n".join(sg.render_edges())
    assert yaml.safe_load(text) == {"Charles Bail": {"directed": "The Gumball Rally"}}
    (edge,) = sg.edges()
    assert (edge.subject, edge.relation.inverse, edge.object) == (film, False, bail)
    # non-Wikidata ids get short handles in order of arrival
    assert sg.handles() == ["E1", "E2"]


def test_several_targets_become_a_list_with_omitted_marker():
    nolan = Entity("Q25191", "Christopher Nolan")
    films = [Entity(f"Q{i}", f"Film {i}") for i in range(3)]
    director = Relation("P57", "director")
    sg = Subgraph().with_entities([nolan]).extend(
        [Fact(nolan, director.reversed(), f) for f in films], [("Q25191", "~P57", 7)]
    )
    data = yaml.safe_load("\n".join(sg.render_edges()))
    assert data == {"Christopher Nolan": {"is director of": ["Film 0", "Film 1", "Film 2", "(7 more not shown)"]}}


def test_hostile_labels_keep_the_yaml_well_formed():
    nasty = ['He said "hi"', "{braces}: here", "back\\slash", "two\nlines", "- dash", "# hash", "a: b", "ünïcode ☃", ""]
    src = Entity("Q1", "source: 'x'")
    rel = Relation("P1", 'rel "quoted" {x}')
    sg = Subgraph().with_entities([src]).extend([Fact(src, rel, Entity(f"Q{i + 10}", s)) for i, s in enumerate(nasty)])
    data = yaml.safe_load("\n".join(sg.render_edges()))
    assert data == {"source: 'x'": {'rel "quoted" {x}': nasty}}
    for s in nasty:
        assert yaml.safe_load(f"k: {yaml_scalar(s)}") == {"k": s}


def test_extend_is_persistent_and_deduplicates():
    base = Subgraph().with_entities([DYLAN])
    child = base.extend([Fact(DYLAN, MOTHER, BEATRICE), Fact(DYLAN, MOTHER, BEATRICE)])
    assert base.facts == () and len(child.facts) == 1
    assert child.by_handle("Q62519478") == BEATRICE


def test_inverse_labels_read_naturally():
    from traversals.kg.base import inverse_label_for

    assert [inverse_label_for(x) for x in ["mother", "directed by", "has genre", "instance of", "is part of"]] == [
        "is mother of", "directed", "is genre of", "has instance", "has part"]
    # a label ending in another preposition has no "is … of" form
    assert [inverse_label_for(x) for x in ["born in", "links to", "adapted from", "Within"]] == [
        "inverse of born in", "inverse of links to", "inverse of adapted from", "inverse of Within"]
