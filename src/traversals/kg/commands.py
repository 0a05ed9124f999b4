"""``traversals kg ...`` sub-commands.

``traversals kg convert IN OUT``
    Convert a plain triple file (``s|r|o`` such as MetaQA's ``kb.txt``, TAB-separated
    such as PathQuestion's ``*-kb.txt``, ``.tsv`` or ``.csv``; each may be gzipped) into
    N-Triples (``.nt``, or ``.nt.gz``) with the
    IRI scheme of :mod:`traversals.kg.iris` and one ``rdfs:label`` per entity and
    relation, ready for ``oxigraph load`` or any SPARQL server
    (:func:`traversals.kg.formats.write_ntriples`).

Extending: write ``_add_<name>(kg_sub)`` that adds a parser to the ``kg``
sub-parsers and sets ``func`` (a callable taking the parsed args and returning an exit
code), then append it to :data:`KG_SUBCOMMANDS`. The CLI calls
:func:`add_kg_commands` once and then ``args.func(args)``.
"""

from __future__ import annotations

import argparse
from typing import Callable

from . import formats

_DELIMITERS = {"auto": None, "pipe": "|", "tab": "\t", "comma": ","}


def _convert(args: argparse.Namespace) -> int:
    stats = formats.write_ntriples(args.input, args.output, delimiter=_DELIMITERS[args.delimiter])
    print(
        f"wrote {args.output}: {stats.triples} triples, {stats.entities} entities, "
        f"{stats.relations} relations (+{stats.label_triples} label triples)"
    )
    detail = ""
    if stats.skipped:
        more = ", ..." if stats.skipped > len(stats.skipped_lines) else ""
        detail = f" (line {', '.join(map(str, stats.skipped_lines))}{more})"
    print(f"skipped {stats.skipped} blank or malformed line(s){detail}")  # the summary, on stdout
    return 0


def _add_convert(kg_sub: argparse._SubParsersAction) -> None:
    p = kg_sub.add_parser(
        "convert",
        help="convert an s|r|o, TSV or CSV triple file to N-Triples",
        description=(
            "Convert a plain triple file to N-Triples: names become IRIs "
            "(http://traversals.local/entity/..., .../relation/...) with rdfs:label "
            "triples. Blank and malformed lines are skipped and counted."
        ),
    )
    p.add_argument("input", metavar="IN", help="triple file: .txt (s|r|o or TAB), .tsv or .csv, each also .gz")
    p.add_argument(
        "output", metavar="OUT", help="N-Triples file to write: .nt, or .nt.gz compressed (replaced if it exists)"
    )
    p.add_argument(
        "--delimiter",
        choices=tuple(_DELIMITERS),
        default="auto",
        help="field separator (default: from the extension; sniffed for .txt)",
    )
    p.set_defaults(func=_convert)


#: Functions that each add one ``kg`` sub-command; append to extend.
KG_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_convert]


def add_kg_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``kg`` and its sub-commands to the top-level sub-parsers."""
    kg = subparsers.add_parser("kg", help="knowledge-graph tools (convert ...)")
    kg_sub = kg.add_subparsers(dest="kg_command", metavar="COMMAND", required=True)
    for add in KG_SUBCOMMANDS:
        add(kg_sub)
