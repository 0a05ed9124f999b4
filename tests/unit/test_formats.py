"""Plain triple files (s|r|o, TAB, TSV, CSV) and their conversion to N-Triples."""

from __future__ import annotations

import csv
import gzip
import logging
from pathlib import Path

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traversals.errors import BadInput
from traversals.kg import formats, iris

LABEL = iris.RDFS_LABEL


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def read_nt(path: Path) -> set[tuple[str, str, str]]:
    """(subject IRI, predicate IRI, object IRI or literal value) of an N-Triples file."""
    out = set()
    for q in ox.parse(path=str(path), format=ox.RdfFormat.N_TRIPLES):
        o = q.object.value
        out.add((q.subject.value, q.predicate.value, o))
    return out


# ------------------------------------------------------------------ detection, sniffing


@pytest.mark.parametrize(
    "name, kind, suffix, delimiter",
    [
        ("kb.nt", "rdf", ".nt", None),
        ("KB.TTL", "rdf", ".ttl", None),
        ("x.nq", "rdf", ".nq", None),
        ("x.nt.gz", "rdf", ".nt", None),
        ("kb.txt", "plain", ".txt", None),
        ("kb.tsv", "plain", ".tsv", "\t"),
        ("kb.csv", "plain", ".csv", ","),
        ("kb.csv.gz", "plain", ".csv", ","),
    ],
)
def test_detect_format(name, kind, suffix, delimiter):
    fmt = formats.detect_format(name)
    assert fmt is not None
    assert (fmt.kind, fmt.suffix, fmt.delimiter) == (kind, suffix, delimiter)
    assert fmt.compressed == name.endswith(".gz")


def test_detect_format_unknown():
    assert formats.detect_format("notes.md") is None
    assert formats.detect_format("noext") is None


def test_sniff_delimiter():
    assert formats.sniff_delimiter(["a|b|c", "d|e|f"]) == "|"
    assert formats.sniff_delimiter(["a\tb\tc", "d\t\te\tf"]) == "\t"
    # A name with a pipe inside a TAB file: most lines decide.
    assert formats.sniff_delimiter(["a|x\tb\tc", "d\te\tf", "g\th\ti"]) == "\t"
    assert formats.sniff_delimiter(["a b c"]) is None


@pytest.mark.parametrize(
    "line, delimiter, expected",
    [
        ("a|b|c", "|", ("a", "b", "c")),
        (" a | b | c ", "|", ("a", "b", "c")),
        ("a\tb\tc", "\t", ("a", "b", "c")),
        ("a\t\tb\t\t c ", "\t", ("a", "b", "c")),  # PathQuestion-style double tabs, blanks
        ("a|b", "|", None),
        ("a|b|c|d", "|", None),
        ("a||c", "|", None),
        ("a\tb", "\t", None),
        ("", "|", None),
    ],
)
def test_split_line(line, delimiter, expected):
    assert formats.split_line(line, delimiter) == expected


# ------------------------------------------------------------------------- plain readers


def test_pipe_txt(tmp_path):
    p = write(tmp_path / "kb.txt", "Kismet|directed_by|William Dieterle\nKismet|release_year|1944\n")
    stats = formats.ReadStats()
    triples = list(formats.iter_plain_triples(p, stats=stats))
    assert triples == [
        ("Kismet", "directed_by", "William Dieterle"),
        ("Kismet", "release_year", "1944"),
    ]
    assert (stats.delimiter, stats.triples, stats.skipped, stats.lines) == ("|", 2, 0, 2)


def test_tab_txt_with_double_tabs_and_blanks(tmp_path):
    p = write(tmp_path / "kb.txt", "ludwig_ii\tparents\t\tmaximilian_ii \n  joan\t spouse\tphillip_terry\r\n")
    stats = formats.ReadStats()
    assert list(formats.iter_plain_triples(p, stats=stats)) == [
        ("ludwig_ii", "parents", "maximilian_ii"),
        ("joan", "spouse", "phillip_terry"),
    ]
    assert stats.delimiter == "\t" and stats.skipped == 0


def test_tsv(tmp_path):
    p = write(tmp_path / "kb.tsv", "a\tr\tb\nc|d\tr\te\n")
    # .tsv never sniffs: the pipe is part of a name.
    assert list(formats.iter_plain_triples(p)) == [("a", "r", "b"), ("c|d", "r", "e")]


def test_csv_with_header_and_quoting(tmp_path):
    p = tmp_path / "kb.csv"
    with open(p, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["Subject", "Relation", "Object"])
        w.writerow(["Smith, John", "born in", 'The "Big" Apple'])
        w.writerow(["multi\nline name", "r", "x"])
        w.writerow(["only", "two"])
    stats = formats.ReadStats()
    triples = list(formats.iter_plain_triples(p, stats=stats))
    assert triples == [
        ("Smith, John", "born in", 'The "Big" Apple'),
        ("multi\nline name", "r", "x"),
    ]
    assert stats.skipped == 1 and stats.skipped_lines == [5]


def test_a_stray_quote_in_a_csv_is_an_error_naming_its_line_not_the_rest_of_the_file_dropped(tmp_path):
    rows = ["x0,r,y0", '"Heat" (film),r,y1', '"Bob,r,y2', *(f"x{i},r,y{i}" for i in range(1, 500))]
    p = write(tmp_path / "kb.csv", "\n".join(rows) + "\n")
    with pytest.raises(BadInput, match=r"kb.csv: line 3: a quote opens a field that is not closed"):
        list(formats.iter_plain_triples(p))
    # near the end too (strict: not read as one last field up to the end of the file)
    p = write(tmp_path / "end.csv", "x0,r,y0\n\"Bob,r,y2\nx1,r,y1\n")
    with pytest.raises(BadInput, match=r"end.csv: line 2: a quote opens a field"):
        list(formats.iter_plain_triples(p))
    # a quoted name with more after it is read as before, and a line break inside quotes is fine
    p = write(tmp_path / "ok.csv", 'x0,r,y0\n"Heat" (film),r,y1\nx2,r,"a\nb"\n')
    assert list(formats.iter_plain_triples(p)) == [("x0", "r", "y0"), ("Heat (film)", "r", "y1"), ("x2", "r", "a\nb")]


def test_csv_without_header(tmp_path):
    p = write(tmp_path / "kb.csv", "a,r,b\n")
    assert list(formats.iter_plain_triples(p)) == [("a", "r", "b")]


def test_malformed_and_blank_lines_are_counted_not_fatal(tmp_path, caplog):
    p = write(tmp_path / "kb.txt", "a|r|b\n\nbroken line\na|r\n   \nc|r|d\na|r|b|x\n")
    stats = formats.ReadStats()
    with caplog.at_level(logging.WARNING, logger="traversals.kg.formats"):
        triples = list(formats.iter_plain_triples(p, stats=stats))
    assert triples == [("a", "r", "b"), ("c", "r", "d")]
    assert stats.skipped == 5
    assert stats.skipped_lines == [2, 3, 4, 5, 7]
    assert "skipped 5" in caplog.text and "kb.txt" in caplog.text


def test_bom_and_gzip(tmp_path):
    p = tmp_path / "kb.txt.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write("\ufeffa|r|b\n")
    assert list(formats.iter_plain_triples(p)) == [("a", "r", "b")]
    # One mark is read as the encoding's; a second is the first name's own.
    q = write(tmp_path / "two.txt", "\ufeff\ufeffa|r|b\n")
    assert list(formats.iter_plain_triples(q)) == [("\ufeffa", "r", "b")]


def test_errors(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        formats.iter_plain_triples(tmp_path / "missing.txt")
    with pytest.raises(BadInput, match="delimiter"):
        list(formats.iter_plain_triples(write(tmp_path / "spaces.txt", "a b c\n")))
    with pytest.raises(BadInput, match="not a plain triple file"):
        formats.iter_plain_triples(write(tmp_path / "x.nt", "<a> <b> <c> .\n"))
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"a|r|b\nb\xe9|r|c\n")
    with pytest.raises(BadInput, match=r"latin1.txt: line 2: not valid UTF-8"):
        list(formats.iter_plain_triples(bad))


def test_shared_pathquestion_file_reads_cleanly(SHARED):
    stats = formats.ReadStats()
    triples = list(formats.iter_plain_triples(SHARED / "data/pathquestion/2H-kb.txt", stats=stats))
    assert stats.delimiter == "\t" and stats.skipped == 0
    assert ("ludwig_ii_of_bavaria", "parents", "maximilian_ii_of_bavaria") in triples


# ------------------------------------------------------------------------- to RDF / .nt


def test_plain_to_rdf_labels_once_per_name():
    stats = formats.ReadStats()
    triples = list(
        formats.plain_to_rdf(
            [("Kismet", "directed_by", "William Dieterle"), ("Kismet", "release_year", "1944")],
            stats,
        )
    )
    spo = {(t.subject.value, t.predicate.value, t.object.value) for t in triples}
    assert (iris.entity_iri("Kismet"), iris.relation_iri("directed_by"), iris.entity_iri("William Dieterle")) in spo
    assert (iris.relation_iri("directed_by"), LABEL, "directed by") in spo
    assert (iris.entity_iri("1944"), LABEL, "1944") in spo  # years are entities (MetaQA)
    labels = [t for t in triples if t.predicate.value == LABEL]
    assert len(labels) == 5 == stats.entities + stats.relations
    assert (stats.entities, stats.relations) == (3, 2)


def test_plain_to_rdf_puts_a_camelcase_relation_in_words_not_an_entity():
    """A relation named ``bornIn`` is labelled "born in" (its inverse is then made from
    words: "inverse of born in", not "is bornIn of"); an entity named ``iPhone`` keeps
    its name."""
    triples = list(formats.plain_to_rdf([("iPhone", "madeBy", "Apple"), ("Steve_Jobs", "bornIn", "San Francisco")]))
    labels = {t.subject.value: t.object.value for t in triples if t.predicate.value == LABEL}
    assert labels[iris.relation_iri("bornIn")] == "born in"
    assert labels[iris.relation_iri("madeBy")] == "made by"
    assert labels[iris.entity_iri("iPhone")] == "iPhone"
    assert labels[iris.entity_iri("Steve_Jobs")] == "Steve Jobs"


@pytest.mark.parametrize(
    "name, words",
    [
        ("headquarteredIn", "headquartered in"),
        ("birthPlace", "birth place"),
        ("hasURL", "has URL"),
        ("XMLSchema", "XML schema"),
        ("directed_by", "directed by"),
        ("P25", "P25"),
        ("ISBN13", "ISBN13"),
        ("Hauptstadt", "Hauptstadt"),
        ("", ""),
    ],
)
def test_a_relation_name_in_words(name, words):
    assert iris.relation_name_label(name) == words


def test_write_ntriples(tmp_path):
    src = write(tmp_path / "kb.txt", "Kismet|directed_by|William Dieterle\n\nbad\nKismet|has_genre|Drama\n")
    out = tmp_path / "kb.nt"
    stats = formats.write_ntriples(src, out)
    assert (stats.triples, stats.entities, stats.relations, stats.skipped) == (2, 3, 2, 2)
    spo = read_nt(out)
    assert len(spo) == 2 + 5
    assert (iris.entity_iri("Kismet"), iris.relation_iri("has_genre"), iris.entity_iri("Drama")) in spo
    assert (iris.relation_iri("has_genre"), LABEL, "has genre") in spo
    assert not list(tmp_path.glob("*.part"))


def test_write_ntriples_gzip(tmp_path):
    src = write(tmp_path / "kb.txt", "Kismet|directed_by|William Dieterle\nKismet|has_genre|Drama\n")
    formats.write_ntriples(src, tmp_path / "kb.nt")
    formats.write_ntriples(src, tmp_path / "kb.nt.gz")
    assert gzip.decompress((tmp_path / "kb.nt.gz").read_bytes()) == (tmp_path / "kb.nt").read_bytes()
    assert sorted(f.name for f in tmp_path.iterdir()) == ["kb.nt", "kb.nt.gz", "kb.txt"]
    with pytest.raises(BadInput, match=r"\.nt or \.nt\.gz"):
        formats.write_ntriples(src, tmp_path / "kb.ttl.gz")


def test_write_ntriples_refusals(tmp_path):
    src = write(tmp_path / "kb.txt", "a|r|b\n")
    with pytest.raises(BadInput, match=r"\.nt"):
        formats.write_ntriples(src, tmp_path / "out.ttl")
    with pytest.raises(BadInput, match="already an RDF file"):
        formats.write_ntriples(write(tmp_path / "x.nt", "<http://a> <http://b> <http://c> .\n"), tmp_path / "y.nt")
    with pytest.raises(BadInput, match="no such file"):
        formats.write_ntriples(tmp_path / "missing.txt", tmp_path / "y.nt")
    with pytest.raises(BadInput, match="does not exist"):
        formats.write_ntriples(src, tmp_path / "nodir" / "y.nt")
    (tmp_path / "taken.nt").mkdir()  # a directory where the output should go
    with pytest.raises(BadInput, match="cannot write the output"):
        formats.write_ntriples(src, tmp_path / "taken.nt")
    assert not list(tmp_path.glob("*.part"))


def test_failed_conversion_leaves_no_output(tmp_path):
    bad = tmp_path / "kb.txt"
    bad.write_bytes(b"a|r|b\n\xff|r|c\n")
    out = tmp_path / "kb.nt"
    with pytest.raises(BadInput):
        formats.write_ntriples(bad, out)
    assert not out.exists() and not list(tmp_path.glob("*.part"))


HOSTILE = [
    'quote " inside',
    "back\\slash",
    "braces {} and <angles>",
    "new\nline",
    "tab\there",
    "semi; colon . dot",
    "émoji 🎬 ünïcode 中文",
    "___",
    "%20 already percent",
    "?s ?p ?o } DROP ALL",
    "'single' `tick`",
]


def expected_label(name: str) -> str:
    return iris.name_label(name) or name.strip()


def test_hostile_names_round_trip_through_csv_and_nt(tmp_path):
    src = tmp_path / "hostile.csv"
    with open(src, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        for i, name in enumerate(HOSTILE):
            w.writerow([name, HOSTILE[-1 - i], HOSTILE[(i + 3) % len(HOSTILE)]])
    out = tmp_path / "hostile.nt"
    stats = formats.write_ntriples(src, out)
    assert stats.skipped == 0 and stats.triples == len(HOSTILE)
    spo = read_nt(out)
    for name in HOSTILE:
        assert (iris.entity_iri(name), LABEL, expected_label(name)) in spo
        assert (iris.relation_iri(name), LABEL, expected_label(name)) in spo


names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=30,
).filter(lambda s: s.strip())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(names, names, names), min_size=1, max_size=5))
def test_any_names_survive_csv_to_ntriples(tmp_path, rows):
    src = tmp_path / "any.csv"
    # "utf-8-sig": a leading U+FEFF is the file's byte-order mark, the first name keeps its own.
    with open(src, "w", newline="", encoding="utf-8-sig") as fh:
        csv.writer(fh).writerows(rows)
    out = tmp_path / "any.nt"
    stats = formats.write_ntriples(src, out)
    header = tuple(f.strip().casefold() for f in rows[0]) in formats._HEADERS
    assert stats.skipped == 0
    assert stats.triples == len(rows) - header
    spo = read_nt(out)
    for s, r, o in rows[header:]:
        s, r, o = s.strip(), r.strip(), o.strip()
        assert (iris.entity_iri(s), iris.relation_iri(r), iris.entity_iri(o)) in spo
        assert (iris.entity_iri(s), LABEL, expected_label(s)) in spo
        assert (iris.relation_iri(r), LABEL, expected_label(r)) in spo


# ------------------------------------------------------------- damaged gzip, empty files


def gzip_bytes(text: str) -> bytes:
    return gzip.compress(text.encode("utf-8"))


def damaged_gzips(tmp_path: Path, suffix: str, text: str) -> list[Path]:
    """The same content as a non-gzip file, a truncated gzip and one with a bad CRC."""
    good = gzip_bytes(text)
    not_gzip = write(tmp_path / f"notgzip{suffix}.gz", "notgzip\n")
    truncated = tmp_path / f"truncated{suffix}.gz"
    truncated.write_bytes(good[: len(good) // 2])
    bad_crc = tmp_path / f"badcrc{suffix}.gz"
    bad_crc.write_bytes(good[:-8] + bytes(b ^ 0xFF for b in good[-8:-4]) + good[-4:])
    return [not_gzip, truncated, bad_crc]


@pytest.mark.parametrize("suffix", [".txt", ".tsv", ".csv"])
def test_damaged_gzip_is_bad_input(tmp_path, suffix):
    sep = {".txt": "|", ".tsv": "\t", ".csv": ","}[suffix]
    text = "".join(f"s{i}{sep}r{sep}o{i}\n" for i in range(200))
    for path in damaged_gzips(tmp_path, suffix, text):
        with pytest.raises(BadInput, match=rf"cannot read .*{path.name}: not a valid gzip file \(.+\)"):
            list(formats.iter_plain_triples(path))


def test_kg_convert_of_a_damaged_gzip_is_bad_input_and_writes_nothing(tmp_path):
    out = tmp_path / "out.nt"
    for path in damaged_gzips(tmp_path, ".txt", "a|r|b\nc|r|d\n"):
        with pytest.raises(BadInput, match="not a valid gzip file"):
            formats.write_ntriples(path, out)
        assert not out.exists() and not list(tmp_path.glob("*.part"))


@pytest.mark.parametrize("text", ["", "\n\n   \n", "just words\nno|delimiters\n"])
def test_kg_convert_refuses_a_file_without_triples(tmp_path, text):
    src = write(tmp_path / "empty.txt", text)
    out = tmp_path / "out.nt"
    with pytest.raises(BadInput, match=r"empty\.txt holds no triples"):
        formats.write_ntriples(src, out)
    assert not out.exists() and not list(tmp_path.glob("*.part"))


def test_two_converts_to_one_output_do_not_share_a_temporary_file(tmp_path, monkeypatch):
    from traversals.kg import formats

    src = tmp_path / "kb.txt"
    src.write_text("a|r|b\n")
    seen = []
    real = formats.tempfile.mkstemp
    monkeypatch.setattr(formats.tempfile, "mkstemp", lambda **kw: seen.append(real(**kw)) or seen[-1])
    for _ in range(2):
        formats.write_ntriples(src, tmp_path / "kb.nt")
    assert len({name for _, name in seen}) == 2 and "/relation/r> " in (tmp_path / "kb.nt").read_text()
    assert not list(tmp_path.glob("*.part"))
