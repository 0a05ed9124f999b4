"""The triple files users bring to ``--kg FILE``: what loads, and the one line that says why not."""

from __future__ import annotations

import bz2
import gzip
import logging
from pathlib import Path

import pyoxigraph as ox
import pytest

from traversals.cli import main
from traversals.errors import BadInput
from traversals.kg import formats
from traversals.kg.factory import open_kg
from traversals.kg.store import OxigraphKG

BOM = b"\xef\xbb\xbf"


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def labels(kg: OxigraphKG) -> set[str]:
    return {e.label for e in kg.sample_entities_sync(1000)}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ---------------------------------------------------------------------- header rows


@pytest.mark.parametrize(
    "name, text",
    [
        ("kb.tsv", "subject\trelation\tobject\nAlice\tknows\tBob\n"),
        ("kb.txt", "Subject|Relation|Object\r\nAlice|knows|Bob\r\n"),
        ("kb.txt", "head\trelation\ttail\nAlice\tknows\tBob\n"),
        ("kb.tsv", "# exported 2024-01-01\n\nsubject\tpredicate\tobject\nAlice\tknows\tBob\n"),
        ("kb.csv", "\n# my graph\ns,p,o\nAlice,knows,Bob\n"),
    ],
)
def test_a_header_row_is_not_a_triple(tmp_path, name, text):
    kg = open_kg(str(write(tmp_path / name, text)))
    assert labels(kg) == {"Alice", "Bob"}
    assert kg.relation("knows") is not None and kg.relation("relation") is None


def test_only_the_first_well_formed_row_can_be_a_header(tmp_path):
    p = write(tmp_path / "kb.txt", "a|r|b\nsubject|relation|object\n")
    assert list(formats.iter_plain_triples(p)) == [("a", "r", "b"), ("subject", "relation", "object")]


# ----------------------------------------------------------- trailing delimiters


@pytest.mark.parametrize(
    "name, text",
    [
        ("kb.txt", "Alice|knows|Bob|\nBob|knows|Carol| \n"),
        ("kb.csv", "Alice,knows,Bob,\nBob,knows,Carol,,\n"),
        ("kb.tsv", "Alice\tknows\tBob\t\nBob\tknows\tCarol\t\n"),
    ],
)
def test_trailing_delimiters_are_ignored(tmp_path, name, text):
    stats = formats.ReadStats()
    triples = list(formats.iter_plain_triples(write(tmp_path / name, text), stats=stats))
    assert triples == [("Alice", "knows", "Bob"), ("Bob", "knows", "Carol")]
    assert stats.skipped == 0


@pytest.mark.parametrize(
    "line, expected",
    [
        ("a|r|b|", ("a", "r", "b")),
        ("a|r|b| |", ("a", "r", "b")),
        ("a|r||", None),  # the object is missing, not a trailing field
        ("|a|r|b", None),
    ],
)
def test_split_line_with_trailing_delimiters(line, expected):
    assert formats.split_line(line, "|") == expected


# ------------------------------------------------------- wrong number of columns


@pytest.mark.parametrize(
    "name, text, fault",
    [
        ("four.tsv", "Alice\tknows\tBob\tsrc1\nBob\tknows\tCarol\tsrc2\n", "line 1: 4 fields, expected 3 (separated by TAB)"),
        ("two.tsv", "Alice\tknows\nBob\tknows\n", "line 1: 2 fields, expected 3 (separated by TAB)"),
        ("semi.csv", "\nAlice;knows;Bob\n", "line 2: 1 field, expected 3 (separated by ',')"),
        ("gap.txt", "Alice||Bob\n", "line 1: an empty field (separated by '|')"),
    ],
)
def test_a_file_with_only_malformed_lines_says_what_is_wrong(tmp_path, name, text, fault):
    p = write(tmp_path / name, text)
    with pytest.raises(BadInput, match=rf"{name} holds no triples: \d blank or malformed line\(s\); ") as info:
        open_kg(str(p))
    assert str(info.value).endswith(fault)
    out = tmp_path / "out.nt"
    with pytest.raises(BadInput, match=r"holds no triples: .*expected 3|an empty field"):
        formats.write_ntriples(p, out)
    assert sorted(f.name for f in tmp_path.iterdir()) == [name]


def test_ask_with_a_four_column_file_is_one_error_line(tmp_path, capsys):
    p = write(tmp_path / "kb.tsv", "Alice\tknows\tBob\t0.9\n")
    assert main(["ask", "who does [Alice] know", "--kg", str(p), "--k", "1"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("traversals: error: ") and line.endswith("line 1: 4 fields, expected 3 (separated by TAB)")


def test_the_skipped_lines_warning_names_the_first_fault(tmp_path, caplog):
    p = write(tmp_path / "kb.txt", "a|r|b\n\n# a comment\nc|r|d|e\n")
    with caplog.at_level(logging.WARNING, logger="traversals.kg.formats"):
        assert list(formats.iter_plain_triples(p)) == [("a", "r", "b")]
    assert "skipped 3 blank or malformed line(s) (line 2, 3, 4); line 3: 1 field, expected 3" in caplog.text


# ------------------------------------------------------- RDF files with a byte-order mark


@pytest.mark.parametrize(
    "name, text",
    [
        ("kb.nt", "<http://x/a> <http://x/r> <http://x/b> .\r\n\r\n# c\r\n<http://x/b> <http://x/r> \"x\"@en .\r\n"),
        ("kb.ttl", "@prefix : <http://x/> .\r\n:a :r :b .\r\n:b :r \"x\"@en .\r\n"),
        ("kb.nq", "<http://x/a> <http://x/r> <http://x/b> <http://g> .\n<http://x/b> <http://x/r> \"x\"@en .\n"),
    ],
)
def test_rdf_files_with_a_byte_order_mark_load(tmp_path, name, text):
    plain = open_kg(str(write(tmp_path / name, text)))
    marked = open_kg(str(write(tmp_path / ("bom-" + name), BOM + text.encode("utf-8"))))
    zipped = open_kg(str(write(tmp_path / ("bom-" + name + ".gz"), gzip.compress(BOM + text.encode("utf-8")))))
    assert plain.summary()["triples"] == marked.summary()["triples"] == zipped.summary()["triples"] == 2
    assert labels(marked) == labels(plain) == {"a", "b"}


def test_a_byte_order_mark_does_not_shift_the_error_line(tmp_path):
    p = write(tmp_path / "bad.ttl", BOM + b"@prefix : <http://x/> .\n:a :r :b .\n:b :r :c :d .\n")
    with pytest.raises(BadInput, match=r"bad\.ttl \(line 3\)"):
        open_kg(str(p))


# ---------------------------------------------------------------------------- JSON-LD

needs_jsonld = pytest.mark.skipif(not hasattr(ox.RdfFormat, "JSON_LD"), reason="pyoxigraph < 0.5")


@needs_jsonld
def test_jsonld_loads(tmp_path):
    p = write(
        tmp_path / "kb.jsonld",
        '{"@context": {"x": "http://x/", "label": "http://www.w3.org/2000/01/rdf-schema#label"},'
        ' "@id": "x:alice", "label": "Alice", "x:knows": {"@id": "x:bob", "label": "Bob"}}',
    )
    kg = open_kg(str(p))
    assert labels(kg) == {"Alice", "Bob"}
    assert kg.relation("knows") is not None
    assert open_kg(str(write(tmp_path / "kb.jsonld.gz", gzip.compress(p.read_bytes())))).summary() == {
        **kg.summary(),
        "name": "kb",
    }


@needs_jsonld
def test_jsonld_syntax_error_names_the_line(tmp_path):
    p = write(tmp_path / "bad.jsonld", '{"@context": {"x": "http://x/"},\n "@id": "x:a",\n "x:r": {"@id": "x:b"},,\n}\n')
    with pytest.raises(BadInput, match=r"bad\.jsonld \(line 3\)"):
        open_kg(str(p))


# ---------------------------------------------------------------------- compression


@pytest.mark.parametrize("suffix", [".bz2", ".xz", ".zip"])
def test_other_compressions_are_refused_with_a_hint(tmp_path, suffix):
    p = write(tmp_path / f"kb.nt{suffix}", bz2.compress(b"<http://x/a> <http://x/r> <http://x/b> .\n"))
    with pytest.raises(BadInput, match=rf"kb\.nt{suffix}: {suffix} files are not read; .*gzip \(\.gz\)"):
        open_kg(str(p))


# ------------------------------------------------------------------------ a large hub


def test_a_big_hub_is_bounded_counted_and_shows_its_first_edges_by_label(tmp_path):
    n = 25_000
    p = tmp_path / "hub.txt"
    with open(p, "w", encoding="utf-8") as fh:
        fh.writelines(f"Hub|links_to|Node {i}\n" for i in range(n))
    kg = open_kg(str(p))
    (hub,) = kg.search_sync("Hub", limit=1)
    rels = kg.get_relations_sync([hub])
    assert [(r.id, r.inverse) for r in rels.items] == [("links_to", False)]
    edges = kg.get_edges_sync([hub], rels.items[0], limit=30)
    assert len(edges.edges) == 30 and edges.omitted == n - 30
    # the first 30 by label of all 25,000, as for a small entity (not of the first rows stored)
    assert [e.object.label for e in edges.edges] == sorted((f"Node {i}" for i in range(n)), key=str.casefold)[:30]
    assert all(e.subject == hub for e in edges.edges)
    (node,) = kg.search_sync("Node 12345", limit=1)
    back = kg.get_edges_sync([node], kg.get_relations_sync([node]).items[0])
    assert [e.subject.label for e in back.edges] == ["Hub"] and back.omitted == 0


# -------------------------------------------------------------- RDF with a plain name


@pytest.mark.parametrize(
    "name, text, line",
    [
        ("kb.txt", "<http://x/a> <http://x/r> <http://x/b> .\n", 1),
        ("kb.txt", "<http://x/a>\t<http://x/r>\t<http://x/b> .\n", 1),  # read as TAB fields before
        ("kb.tsv", "# a Freebase-style dump\n\n<http://x/a>\t<http://x/r>\t<http://x/b>\t.\n", 3),
        ("kb.txt", "_:b0 <http://x/r> \"x\"@en .\n", 1),
        ("kb.txt", "@prefix : <http://x/> .\n:a :r :b .\n", 1),
        ("kb.txt", "PREFIX : <http://x/>\n:a :r :b .\n", 1),
    ],
)
def test_an_rdf_file_with_a_plain_extension_is_named_as_such(tmp_path, name, text, line):
    p = write(tmp_path / name, text)
    with pytest.raises(BadInput, match=rf"{name}: line {line} is RDF \(N-Triples or Turtle\), .*name the file \.nt or \.ttl"):
        open_kg(str(p))
    with pytest.raises(BadInput, match="is RDF"):
        formats.write_ntriples(p, tmp_path / "out.nt")
    assert sorted(f.name for f in tmp_path.iterdir()) == [name]


def test_names_that_only_resemble_rdf_stay_names(tmp_path):
    p = write(tmp_path / "kb.txt", "Prefix|is a|Morpheme\n<x>|r|<y> .\nBase|r|<z>\n")
    assert list(formats.iter_plain_triples(p)) == [
        ("Prefix", "is a", "Morpheme"),
        ("<x>", "r", "<y> ."),
        ("Base", "r", "<z>"),
    ]


# --------------------------------------------------------------------------- UTF-16


@pytest.mark.parametrize("name", ["kb.txt", "kb.tsv", "kb.csv", "kb.nt", "kb.txt.gz"])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_utf16_file_is_refused_with_the_encoding_named(tmp_path, name, encoding):
    sep = "," if name == "kb.csv" else "\t"
    text = "<http://x/a> <http://x/r> <http://x/b> .\n" if name == "kb.nt" else f"Alice{sep}knows{sep}Bob\r\n"
    data = ("\ufeff" + text).encode(encoding) if encoding == "utf-16-be" else text.encode(encoding)
    p = write(tmp_path / name, gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(BadInput, match=rf"{name} is UTF-16 text .*; save it as UTF-8"):
        open_kg(str(p))


@needs_jsonld
def test_a_jsonld_file_with_a_remote_context_says_to_inline_it(tmp_path):
    p = write(tmp_path / "ctx.jsonld", '{"@context": "https://schema.org/", "@id": "http://x/a", "name": "A"}')
    with pytest.raises(BadInput, match=r"ctx.jsonld: its @context is a URL, and remote contexts are not fetched"):
        open_kg(str(p))


def test_an_rdf_xml_error_without_a_position_claims_no_line(tmp_path):
    p = write(tmp_path / "bad.rdf", '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"'
              ' xmlns:x="http://x/">\n<rdf:Description rdf:about="http://x/a"><x:r rdf:resource="http://x/b">\n</rdf:RDF>\n')
    with pytest.raises(BadInput) as err:
        open_kg(str(p))
    assert str(err.value).startswith(f"cannot parse {p}: ") and "line" not in str(err.value).split(": ", 1)[0]


@pytest.mark.parametrize("name, text", [
    ("b.nt", '_:x <http://www.w3.org/2000/01/rdf-schema#label> "Blanky" .\n'
             '_:x <http://e.org/p> _:y .\n_:y <http://www.w3.org/2000/01/rdf-schema#label> "Other" .\n'),
    ("b.ttl", '@prefix e: <http://e.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n'
              '_:x rdfs:label "Blanky" ; e:p [ rdfs:label "Other" ] .\n'
              '_:anon-1 rdfs:label "Its own" .\n'),  # a file's own name like a made-up one's: kept apart
])
def test_blank_node_ids_are_the_same_at_every_load(tmp_path, name, text):
    """Store.bulk_load gave every blank node a new random id at each load: the id `kg search`
    printed was unknown to the next command. The file's own ids are kept; unnamed ones
    (`[ ... ]`) are numbered in the order the file mentions them."""
    path = tmp_path / name
    path.write_text(text)
    ids = []
    for _ in range(2):
        kg = OxigraphKG.from_file(path)
        [blanky] = kg.search_sync("Blanky")
        [other] = kg.search_sync("Other")
        ids.append((blanky.id, other.id))
        assert kg.entity("_:x") == blanky
        if name.endswith(".ttl"):
            assert [e.id for e in kg.search_sync("Its own")] == ["_:anon-1"]
    assert ids[0] == ids[1] and ids[0][0] == "_:x"
    assert ids[0][1] == ("_:y" if name.endswith(".nt") else "_:anon:1")


def test_a_date_or_years_time_zone_z_is_not_in_its_label_but_in_its_id(tmp_path):
    """An xsd:date or xsd:gYear written with its zone was shown with it ('1999-03-31Z',
    '1999Z'): the LLM read and answered a date with a stray Z. A dateTime keeps its zone
    unless its time is midnight (a time of day is in UTC or not)."""
    import asyncio

    from traversals.kg import iris

    xsd = "http://www.w3.org/2001/XMLSchema#"
    path = tmp_path / "d.nt"
    path.write_text('<http://e.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "A" .\n'
                    f'<http://e.org/a> <http://e.org/born> "1999-03-31Z"^^<{xsd}date> .\n'
                    f'<http://e.org/a> <http://e.org/founded> "-0500Z"^^<{xsd}gYear> .\n')
    kg = OxigraphKG.from_file(path)
    [a] = kg.search_sync("A")
    [born] = asyncio.run(kg.get_edges([a], kg.relation("born"))).edges
    assert (born.object.label, born.object.id) == ("1999-03-31", '"1999-03-31Z"^^xsd:date')
    [founded] = asyncio.run(kg.get_edges([a], kg.relation("founded"))).edges
    assert founded.object.label == "-0500"
    assert iris.literal_label("1999Z", iris.XSD + "gYear") == "1999"
    assert iris.literal_label("1999-03-31T10:00:00Z", iris.XSD + "dateTime") == "1999-03-31T10:00:00Z"
    assert iris.literal_label("1999-03-31+02:00", iris.XSD + "date") == "1999-03-31+02:00"
    assert iris.literal_label("Z", iris.XSD + "string") == "Z"


def test_a_literal_with_line_breaks_is_shown_on_one_line_and_keeps_its_value_in_its_id(tmp_path):
    """Labels read through label predicates were collapsed, literal values were not: `kg edges`
    printed one entity over two lines (both back ends share iris.literal_label)."""
    import asyncio

    from traversals.kg import iris

    path = tmp_path / "n.nt"
    path.write_text('<http://e.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "A" .\n'
                    '<http://e.org/a> <http://e.org/nick> "first line\\nsecond\\tline" .\n')
    kg = OxigraphKG.from_file(path)
    [a] = kg.search_sync("A")
    [edge] = asyncio.run(kg.get_edges([a], kg.relation("nick"))).edges
    assert edge.object.label == "first line second line"
    assert edge.object.id == '"first line\\nsecond\\tline"'
    assert iris.literal_label("+1929-01-01T00:00:00Z", iris.XSD + "dateTime") == "1929-01-01"
    assert iris.literal_label("   ") == "   "  # blanks alone: shown as they are, never an empty label


STAR_PREFIXES = "@prefix ex: <http://e.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"


@pytest.mark.parametrize("name, text, reifier", [
    ("star.ttl", STAR_PREFIXES + 'ex:a rdfs:label "Ann" ; ex:knows ex:b ~ ex:r1 {| ex:since "2001" |} .\n'
                 'ex:b rdfs:label "Ben" .\n', "http://e.org/r1"),  # RDF 1.2: a reifier and an annotation
    ("star.ttl", STAR_PREFIXES + 'ex:a rdfs:label "Ann" ; ex:knows ex:b .\nex:b rdfs:label "Ben" .\n'
                 '<< ex:a ex:knows ex:b >> ex:since "2001" .\n', None),  # RDF-star's quoted triple
    ("star.nt", '<http://e.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "Ann" .\n'
                '<http://e.org/a> <http://e.org/knows> <http://e.org/b> .\n'
                '<http://e.org/b> <http://www.w3.org/2000/01/rdf-schema#label> "Ben" .\n'
                '<http://e.org/r1> <http://www.w3.org/1999/02/22-rdf-syntax-ns#reifies> '
                '<<( <http://e.org/a> <http://e.org/knows> <http://e.org/b> )>> .\n'
                '<http://e.org/r1> <http://e.org/since> "2001" .\n', "http://e.org/r1"),
])
def test_triple_terms_are_no_entities_and_the_asserted_triples_load(tmp_path, name, text, reifier):
    """An RDF 1.2 / RDF-star file loaded, then indexing it failed with a traceback (a triple
    term read as a literal). The asserted triples are the KG; a triple term is no entity,
    no edge's end and counts for no relation (what it reifies is said of a node, not read)."""
    import asyncio

    kg = OxigraphKG.from_file(write(tmp_path / name, text))
    [ann] = kg.search_sync("Ann")
    assert ann.id == "http://e.org/a"
    assert [r.key for r in kg.get_relations_sync([ann]).items] == ["knows"]
    [edge] = asyncio.run(kg.get_edges([ann], kg.relation("knows"))).edges
    assert edge.object.label == "Ben"
    if reifier is not None:  # a node: its annotation is its edge, the triple it reifies none
        node = kg.entity(reifier)
        assert node is not None and [r.key for r in kg.get_relations_sync([node]).items] == ["since"]
        assert not asyncio.run(kg.get_edges([node], kg.relation("reifies"))).edges
    assert all(not e.id.startswith("<<") for e in kg.sample_entities_sync(100))
