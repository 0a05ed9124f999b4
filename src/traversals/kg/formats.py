"""Triple files: RDF serialisations and plain ``subject|relation|object`` tables.

Two families of input are recognised by file extension (optionally followed by ``.gz``):

* **RDF** – ``.nt`` (N-Triples), ``.ttl`` (Turtle), ``.nq`` (N-Quads), ``.trig`` (TriG),
  ``.rdf``/``.owl`` (RDF/XML), ``.jsonld`` (JSON-LD, pyoxigraph 0.5 or later; remote
  ``@context`` URLs are not fetched). They are parsed by pyoxigraph; this module only
  names the format (:func:`detect_format`) and opens the file (:func:`open_binary`, which
  skips a UTF-8 byte-order mark the parsers would refuse). Quads are later flattened
  into the default graph.
* **Plain** – one fact per line, three fields:

  - ``.txt``: the delimiter is sniffed from the first non-empty lines – ``|`` (MetaQA's
    ``kb.txt``) or TAB (PathQuestion's ``*-kb.txt``); runs of tabs and blanks around the
    fields are tolerated.
  - ``.tsv``: TAB-separated, same tolerance.
  - ``.csv``: three columns read with :mod:`csv` (quoted fields may contain commas and
    newlines).

  In every plain format a header row ``subject,relation,object`` (or
  ``subject,predicate,object`` / ``s,r,o`` / ``s,p,o`` / ``head,relation,tail``, in any
  case, with the file's delimiter) is skipped if it is the first well-formed row, and
  trailing empty fields (``a|r|b|``, ``a,r,b,`` from spreadsheet exports) are ignored.

  Every name becomes an IRI with the shared scheme of :mod:`traversals.kg.iris`
  (``entity_iri`` for subjects *and objects* – MetaQA's years and ratings are entities,
  as in MetaQA's own setup – and ``relation_iri`` for relations). Each distinct entity
  and relation gets one ``rdfs:label`` triple whose text is ``iris.name_label(name)``
  (``directed_by`` -> ``directed by``; a relation's camelCase in words too,
  ``iris.relation_name_label``: ``bornIn`` -> ``born in``), or the stripped name if that
  is empty.

  Blank lines and malformed lines (not exactly three non-empty fields) are skipped and
  counted in a :class:`ReadStats`; a summary naming the first malformed line's fault
  (``line 4: 2 fields, expected 3``) is logged as a warning. A file whose non-blank
  lines are all malformed is refused with :class:`~traversals.errors.BadInput` naming
  that fault. A file that is not valid UTF-8 is refused with
  :class:`~traversals.errors.BadInput` naming the line, and so is a damaged or truncated
  ``.gz`` file (:func:`open_binary`), and so is an N-Triples or Turtle file named
  ``.txt`` or ``.tsv`` (its first statement is checked).

:func:`write_ntriples` is the ``traversals kg convert`` back end: it streams the data
triples plus the label triples through pyoxigraph's N-Triples serialiser (never
hand-built strings), so any name – quotes, braces, backslashes, newlines inside CSV
fields, any Unicode – comes out correctly escaped. :class:`~traversals.kg.store.OxigraphKG`
loads plain files through the same generator (:func:`iter_plain_rdf`), so a converted
file and a directly loaded file have identical IRIs and labels.
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
import os
import re
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO, Callable, Iterable, Iterator, Literal, cast, overload

import pyoxigraph as ox

from ..errors import BadInput
from . import iris

log = logging.getLogger(__name__)

#: RDF serialisations by extension.
RDF_EXTENSIONS: dict[str, ox.RdfFormat] = {
    ".nt": ox.RdfFormat.N_TRIPLES,
    ".ttl": ox.RdfFormat.TURTLE,
    ".nq": ox.RdfFormat.N_QUADS,
    ".trig": ox.RdfFormat.TRIG,
    ".rdf": ox.RdfFormat.RDF_XML,
    ".owl": ox.RdfFormat.RDF_XML,
}
if hasattr(ox.RdfFormat, "JSON_LD"):  # pyoxigraph 0.5 and later
    RDF_EXTENSIONS[".jsonld"] = ox.RdfFormat.JSON_LD
#: Plain triple tables by extension; ``None`` means "sniff the delimiter".
PLAIN_EXTENSIONS: dict[str, str | None] = {".txt": None, ".tsv": "\t", ".csv": ","}
#: Every accepted extension, for error messages.
ACCEPTED_EXTENSIONS = tuple(RDF_EXTENSIONS) + tuple(PLAIN_EXTENSIONS)

#: Header rows (casefolded), skipped when one is a plain file's first well-formed row.
_HEADERS = {
    ("subject", "relation", "object"),
    ("subject", "predicate", "object"),
    ("s", "r", "o"),
    ("s", "p", "o"),
    ("head", "relation", "tail"),
}
_SNIFF_LINES = 20
_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_DELIMITER_NAMES = {"|": "'|'", "\t": "TAB", ",": "','"}
#: An N-Triples / N-Quads statement (terms apart by blanks or tabs, a final ``.``) or a
#: Turtle / SPARQL-style prefix or base directive: an RDF file given a plain extension.
_RDF_LINE = re.compile(
    r"(?:<[^<>\s]*>|_:\S+)\s+<[^<>\s]*>\s+\S.*\.$"
    r"|@(?:prefix|base)\s"
    r"|(?i:prefix\s+[\w.-]*:\s*<|base\s+<)"
)
_MAX_REPORTED = 10  # skipped line numbers kept for the report


@dataclass(frozen=True)
class FileFormat:
    """What :func:`detect_format` found out from a file name."""

    kind: str  # "rdf" or "plain"
    suffix: str  # ".nt", ".txt", ... (without ".gz")
    compressed: bool = False
    rdf_format: ox.RdfFormat | None = None
    delimiter: str | None = None  # plain files: "\t", "|", ","; None = sniff


@dataclass
class ReadStats:
    """Counts gathered while reading a plain triple file (filled in as it streams)."""

    path: str = ""
    delimiter: str = ""
    lines: int = 0
    triples: int = 0
    skipped: int = 0
    skipped_lines: list[int] = field(default_factory=list)  # first few, 1-based
    problem: str = ""  # the first malformed line's fault: "line 4: 2 fields, expected 3"
    entities: int = 0  # distinct entity names (set by iter_plain_rdf)
    relations: int = 0  # distinct relation names (set by iter_plain_rdf)

    def skip(self, lineno: int, why: str = "") -> None:
        """Count a skipped line; ``why`` (empty for a blank line) says what is wrong."""
        self.skipped += 1
        if len(self.skipped_lines) < _MAX_REPORTED:
            self.skipped_lines.append(lineno)
        if why and not self.problem:
            sep = _DELIMITER_NAMES.get(self.delimiter)
            self.problem = f"line {lineno}: {why}" + (f" (separated by {sep})" if sep else "")

    @property
    def label_triples(self) -> int:
        return self.entities + self.relations

    def report(self) -> None:
        """Log a warning if lines were skipped."""
        if self.skipped:
            more = "" if self.skipped <= len(self.skipped_lines) else ", ..."
            log.warning(
                "%s: skipped %d blank or malformed line(s) (line %s%s)%s",
                self.path,
                self.skipped,
                ", ".join(map(str, self.skipped_lines)),
                more,
                f"; {self.problem}" if self.problem else "",
            )


def detect_format(path: str | os.PathLike[str]) -> FileFormat | None:
    """The format of a triple file from its extension, or ``None`` if unknown."""
    name = Path(path).name.lower()
    compressed = name.endswith(".gz")
    if compressed:
        name = name[:-3]
    suffix = Path(name).suffix
    if suffix in RDF_EXTENSIONS:
        return FileFormat("rdf", suffix, compressed, rdf_format=RDF_EXTENSIONS[suffix])
    if suffix in PLAIN_EXTENSIONS:
        return FileFormat("plain", suffix, compressed, delimiter=PLAIN_EXTENSIONS[suffix])
    return None


def check_readable(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`Path`, or :class:`BadInput` if it is not a readable file."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"no such file: {p}")
    if not p.is_file():
        raise BadInput(f"not a file: {p}")
    return p


def open_binary(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a (possibly gzip-compressed) file for binary reading.

    A ``.gz`` file is decompressed as it is read; a damaged or truncated one raises
    :class:`BadInput` ("cannot read FILE: not a valid gzip file (...)") from whichever
    read hits the damage, not :mod:`gzip`'s own exceptions. An RDF file's UTF-8
    byte-order mark (Windows editors write one) is skipped: pyoxigraph's parsers refuse
    it. A plain file keeps its mark; its readers tell it from a name's own U+FEFF. A
    UTF-16 file (Excel's "Unicode Text") is refused with :class:`BadInput` saying so.
    """
    p = check_readable(path)
    try:
        fh: io.BufferedReader
        if p.name.lower().endswith(".gz"):
            fh = io.BufferedReader(_CheckedGzip(gzip.open(p, "rb"), p))  # type: ignore[arg-type]
        else:
            fh = open(p, "rb")
    except OSError as exc:
        raise BadInput(f"cannot read {p}: {exc}") from exc
    fmt = detect_format(p)
    try:
        head = fh.peek(len(_BOM))
        if head.startswith(_UTF16_BOMS):
            raise BadInput(
                f"{p} is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8"
            )
        if fmt is not None and fmt.kind == "rdf" and head.startswith(_BOM):
            fh.read(len(_BOM))
    except BaseException:
        fh.close()
        raise
    return fh


#: What :mod:`gzip` raises for damaged data: bad header or CRC (``BadGzipFile``, an
#: ``OSError``), a truncated stream (``EOFError``), corrupt deflate data (``zlib.error``).
_GZIP_ERRORS = (OSError, EOFError, zlib.error)


class _CheckedGzip(io.RawIOBase):
    """A raw stream over a :class:`gzip.GzipFile` that reports damage as :class:`BadInput`.

    Every read of the :class:`io.BufferedReader` around it (``read``, ``readline``,
    iteration, pyoxigraph's parser) goes through :meth:`readinto`.
    """

    def __init__(self, inner: gzip.GzipFile, path: Path) -> None:
        super().__init__()
        self._inner = inner
        self._path = path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        try:
            return self._inner.readinto(buffer)
        except _GZIP_ERRORS as exc:
            detail = str(exc) or type(exc).__name__
            raise BadInput(f"cannot read {self._path}: not a valid gzip file ({detail})") from exc

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


# --------------------------------------------------------------------------- plain files


def sniff_delimiter(lines: Iterable[str]) -> str | None:
    """``"\\t"`` or ``"|"``: the separator most of the sample lines contain (TAB wins ties).

    Returns ``None`` when no sample line contains either.
    """
    tabs = pipes = 0
    for line in lines:
        if "\t" in line:
            tabs += 1
        if "|" in line:
            pipes += 1
    if not tabs and not pipes:
        return None
    return "\t" if tabs >= pipes else "|"


def split_fields(line: str, delimiter: str) -> list[str]:
    """The stripped fields of a plain line, without trailing empty ones (``a|r|b|``).

    With TAB every empty field is dropped (PathQuestion's runs of tabs)."""
    parts = [p.strip() for p in line.split(delimiter)]
    if delimiter == "\t":
        return [p for p in parts if p]
    return _without_trailing_empties(parts)


def _without_trailing_empties(parts: list[str]) -> list[str]:
    while parts and not parts[-1]:
        parts.pop()
    return parts


def split_line(line: str, delimiter: str) -> tuple[str, str, str] | None:
    """The three stripped fields of a plain line, or ``None`` if it is malformed."""
    parts = split_fields(line, delimiter)
    if fault(parts):
        return None
    return parts[0], parts[1], parts[2]


def fault(fields: list[str]) -> str:
    """What is wrong with a plain line's fields (``"2 fields, expected 3"``), or ``""``."""
    if len(fields) != 3:
        return f"{len(fields)} field{'' if len(fields) == 1 else 's'}, expected 3"
    return "" if all(fields) else "an empty field"


def is_header(fields: Iterable[str]) -> bool:
    """Is this row a header such as ``subject|relation|object`` (any case)?"""
    return tuple(f.casefold() for f in fields) in _HEADERS


def _decoded_lines(fh: BinaryIO, path: Path) -> Iterator[tuple[int, str]]:
    for lineno, raw in enumerate(fh, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{path}: line {lineno}: not valid UTF-8 ({exc.reason})") from exc
        if lineno == 1:  # one byte-order mark; a name may itself begin with U+FEFF
            line = line.removeprefix("\ufeff")
        yield lineno, line.rstrip("\r\n")


def iter_plain_triples(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    stats: ReadStats | None = None,
) -> Iterator[tuple[str, str, str]]:
    """Yield ``(subject, relation, object)`` names from a plain triple file.

    ``delimiter`` overrides the one implied by the extension (``"|"``, ``"\\t"`` or
    ``","``; ``","`` means CSV). ``stats``, if given, is filled in while the iterator
    runs. Blank and malformed lines are skipped and counted; a warning is logged at
    the end. Raises :class:`BadInput` for a missing file, an unknown extension (when no
    ``delimiter`` is given), an undetectable delimiter, invalid UTF-8 or (once read) a
    file with malformed lines and no triple ("FILE holds no triples: ...; line 1: 4
    fields, expected 3 (separated by TAB)").
    """
    p = check_readable(path)
    st = stats if stats is not None else ReadStats()
    st.path = str(p)
    if delimiter is None:
        fmt = detect_format(p)
        if fmt is None or fmt.kind != "plain":
            raise BadInput(
                f"{p}: not a plain triple file (expected .txt with s|r|o or tab-separated "
                f"lines, .tsv or .csv)"
            )
        delimiter = fmt.delimiter
    elif delimiter not in ("|", "\t", ","):
        raise BadInput(f"unsupported delimiter {delimiter!r}: use '|', TAB or ','")
    # Checks above run eagerly; reading happens lazily in the generator.
    return _iter_plain(p, delimiter, st)


def _iter_plain(p: Path, delimiter: str | None, st: ReadStats) -> Iterator[tuple[str, str, str]]:
    if delimiter == ",":
        yield from _iter_csv(p, st)
    else:
        yield from _iter_delimited(p, delimiter, st)
    if not st.triples and st.problem:
        raise BadInput(f"{p} holds no triples: {st.skipped} blank or malformed line(s); {st.problem}")
    st.report()


def _refuse_rdf(p: Path) -> None:
    """:class:`BadInput` if the first statement of a plain file (blank and ``#`` lines
    aside) is N-Triples or Turtle: read as a table, its IRIs would become names."""
    with open_binary(p) as fh:
        for lineno, line in _decoded_lines(fh, p):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            if _RDF_LINE.match(text):
                raise BadInput(
                    f"{p}: line {lineno} is RDF (N-Triples or Turtle), not subject|relation|object; "
                    f"name the file .nt or .ttl"
                )
            return


def _iter_delimited(p: Path, delimiter: str | None, st: ReadStats) -> Iterator[tuple[str, str, str]]:
    _refuse_rdf(p)
    if delimiter is None:
        sample: list[str] = []
        with open_binary(p) as fh:
            for _, line in _decoded_lines(fh, p):
                if line.strip():
                    sample.append(line)
                    if len(sample) >= _SNIFF_LINES:
                        break
        if not sample:
            st.delimiter = ""
            return
        delimiter = sniff_delimiter(sample)
        if delimiter is None:
            raise BadInput(
                f"{p}: cannot tell the delimiter: expected subject|relation|object or "
                f"tab-separated lines"
            )
    st.delimiter = delimiter
    with open_binary(p) as fh:
        rows = ((n, split_fields(line, delimiter) if line.strip() else None) for n, line in _decoded_lines(fh, p))
        yield from _triples(rows, st)


def _triples(rows: Iterable[tuple[int, list[str] | None]], st: ReadStats) -> Iterator[tuple[str, str, str]]:
    """The triples of a plain file's ``(line number, fields)`` rows (None: a blank
    line): malformed rows skipped with their fault, a first well-formed row that is a
    header (``subject, relation, object``) skipped."""
    header_checked = False
    for lineno, fields in rows:
        st.lines = lineno
        if fields is None:
            st.skip(lineno)
            continue
        why = fault(fields)
        if why:
            st.skip(lineno, why)
            continue
        if not header_checked:
            header_checked = True
            if is_header(fields):
                continue
        st.triples += 1
        yield fields[0], fields[1], fields[2]


#: lines one CSV row may span (a quoted literal with line breaks in it); more is a stray quote
MAX_CSV_ROW_LINES = 100


def _iter_csv(p: Path, st: ReadStats) -> Iterator[tuple[str, str, str]]:
    st.delimiter = ","
    with open_binary(p) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        consumed: list[str] = []  # the lines of the row being read

        def lines() -> Iterator[str]:
            for line in text:
                consumed.append(line)
                yield line

        # strict: a quote never closed is an error at the end, not every line after it read as one field
        reader = csv.reader(lines(), strict=True)

        def unclosed(start: int) -> BadInput:
            return BadInput(f"{p}: line {start}: a quote opens a field that is not closed before line {reader.line_num} "
                            f"(a stray '\"' at the start of a field? a field with a quote in it is quoted, its quotes "
                            "doubled: \"\"\"Heat\"\" (film)\")")

        def rows() -> Iterator[tuple[int, list[str] | None]]:
            while True:
                start = reader.line_num + 1
                consumed.clear()
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except UnicodeDecodeError as exc:
                    raise BadInput(
                        f"{p}: near line {reader.line_num + 1}: not valid UTF-8 ({exc.reason})"
                    ) from exc
                except csv.Error as exc:
                    if "unexpected end of data" in str(exc):  # every line after the quote read into one field
                        raise unclosed(start) from None
                    # a quoted field with more after it ('"Heat" (film)'), read leniently as before: "Heat (film)"
                    lenient = list(csv.reader(consumed)) if len(consumed) == 1 else []
                    if len(lenient) != 1:
                        st.skip(reader.line_num, str(exc))
                        continue
                    row = lenient[0]
                if reader.line_num - start >= MAX_CSV_ROW_LINES:  # a field of lines that are rows of their own
                    raise unclosed(start)
                yield reader.line_num, _without_trailing_empties([f.strip() for f in row]) or None

        yield from _triples(rows(), st)


# --------------------------------------------------------------------- plain files -> RDF


def _label_literal(name: str, words: Callable[[str], str] = iris.name_label) -> ox.Literal:
    return ox.Literal(words(name) or name.strip())


@overload
def plain_to_rdf(
    triples: Iterable[tuple[str, str, str]], stats: ReadStats | None = None, *, quads: Literal[False] = False
) -> Iterator[ox.Triple]: ...
@overload
def plain_to_rdf(
    triples: Iterable[tuple[str, str, str]], stats: ReadStats | None = None, *, quads: Literal[True]
) -> Iterator[ox.Quad]: ...
@overload
def plain_to_rdf(
    triples: Iterable[tuple[str, str, str]], stats: ReadStats | None = None, *, quads: bool
) -> Iterator[ox.Triple] | Iterator[ox.Quad]: ...
def plain_to_rdf(
    triples: Iterable[tuple[str, str, str]],
    stats: ReadStats | None = None,
    *,
    quads: bool = False,
) -> Iterator[ox.Triple | ox.Quad]:
    """Turn name triples into RDF triples with minted IRIs.

    Before the first triple that mentions an entity or relation, its ``rdfs:label``
    triple is yielded, so every distinct name gets exactly one label. ``stats.entities``
    and ``stats.relations`` count the distinct names. With ``quads=True`` the items are
    :class:`pyoxigraph.Quad` in the default graph (ready for ``Store.bulk_extend``).
    """
    make: Callable[[ox.NamedNode, ox.NamedNode, ox.NamedNode | ox.Literal], ox.Triple | ox.Quad]
    make = ox.Quad if quads else ox.Triple
    label = ox.NamedNode(iris.RDFS_LABEL)
    entities: dict[str, ox.NamedNode] = {}
    relations: dict[str, ox.NamedNode] = {}

    def mint(
        name: str, table: dict[str, ox.NamedNode], iri: Callable[[str], str], words: Callable[[str], str] = iris.name_label
    ) -> tuple[ox.NamedNode, ox.Triple | ox.Quad]:
        node = ox.NamedNode(iri(name))
        table[name] = node
        return node, make(node, label, _label_literal(name, words))

    # Written out (no inner loop) because it runs once per line of files like MetaQA's.
    for s, r, o in triples:
        sn = entities.get(s)
        if sn is None:
            sn, t = mint(s, entities, iris.entity_iri)
            yield t
        rn = relations.get(r)
        if rn is None:
            rn, t = mint(r, relations, iris.relation_iri, iris.relation_name_label)
            yield t
        on = entities.get(o)
        if on is None:
            on, t = mint(o, entities, iris.entity_iri)
            yield t
        if stats is not None:
            stats.entities = len(entities)
            stats.relations = len(relations)
        yield make(sn, rn, on)


@overload
def iter_plain_rdf(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    stats: ReadStats | None = None,
    quads: Literal[False] = False,
) -> Iterator[ox.Triple]: ...
@overload
def iter_plain_rdf(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    stats: ReadStats | None = None,
    quads: Literal[True],
) -> Iterator[ox.Quad]: ...
def iter_plain_rdf(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    stats: ReadStats | None = None,
    quads: bool = False,
) -> Iterator[ox.Triple] | Iterator[ox.Quad]:
    """RDF triples (data + labels) of a plain triple file; see :func:`plain_to_rdf`."""
    st = stats if stats is not None else ReadStats()
    return plain_to_rdf(iter_plain_triples(path, delimiter=delimiter, stats=st), st, quads=quads)


def write_ntriples(
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
) -> ReadStats:
    """Convert a plain triple file (``s|r|o``, TSV, CSV) to N-Triples (``.nt``, or
    gzip-compressed ``.nt.gz``).

    Writes the data triples and one ``rdfs:label`` triple per distinct entity and
    relation. The output is written to a temporary file next to ``out_path`` and moved
    into place only when complete. Returns the counts (``triples``, ``entities``,
    ``relations``, ``skipped``...). A file without a single triple (empty, or only
    blank or malformed lines) is refused with :class:`BadInput` and nothing is written.
    """
    src = check_readable(in_path)
    dst = Path(out_path)
    compressed = dst.name.lower().endswith(".nt.gz")
    if not compressed and not dst.name.lower().endswith(".nt"):
        raise BadInput(f"{dst}: the output of kg convert must be an N-Triples file (.nt or .nt.gz)")
    if dst.exists() and dst.resolve() == src.resolve():
        raise BadInput(f"{dst}: output would overwrite the input")
    if delimiter is None:
        fmt = detect_format(src)
        if fmt is not None and fmt.kind == "rdf":
            raise BadInput(f"{src}: already an RDF file; kg convert reads s|r|o, TSV or CSV files")
    if not dst.parent.exists():
        raise BadInput(f"{dst}: directory {dst.parent} does not exist")

    stats = ReadStats()
    triples = iter_plain_rdf(src, delimiter=delimiter, stats=stats)
    # a name of its own: two converts to one output never write the same temporary file
    try:
        fd, tmp_name = tempfile.mkstemp(dir=dst.parent, prefix=dst.name + ".", suffix=".part")
    except OSError as e:  # a folder that cannot be written, a path through a file
        raise BadInput(f"{dst}: cannot write the output ({e.strerror or type(e).__name__})") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with gzip.open(tmp, "wb") if compressed else open(tmp, "wb") as out:
            ox.serialize(triples, cast(IO[bytes], out), ox.RdfFormat.N_TRIPLES)
        if not stats.triples:
            skipped = f" ({stats.skipped} blank or malformed lines)" if stats.skipped else ""
            raise BadInput(f"{src} holds no triples{skipped}")
        os.replace(tmp, dst)
    except OSError as e:  # a directory of that name, no permission, a read-only disk...
        tmp.unlink(missing_ok=True)
        raise BadInput(f"{dst}: cannot write the output ({e.strerror or type(e).__name__})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return stats
