"""``traversals kg ...`` sub-commands.

``traversals kg convert IN OUT``
    Convert a plain triple file (``s|r|o`` such as MetaQA's ``kb.txt``, TAB-separated
    such as PathQuestion's ``*-kb.txt``, ``.tsv`` or ``.csv``; each may be gzipped) into
    N-Triples (``.nt``, or ``.nt.gz``) with the
    IRI scheme of :mod:`traversals.kg.iris` and one ``rdfs:label`` per entity and
    relation, ready for ``oxigraph load`` or any SPARQL server
    (:func:`traversals.kg.formats.write_ntriples`).

``traversals kg search TEXT``, ``kg relations ENTITY``, ``kg edges ENTITY RELATION`` (each with ``--kg SPEC``)
    Browse a KG as the search sees it (:mod:`traversals.search.browse`): the entities a
    mention links to, an entity's relations with their keys, the edges along one. ENTITY is
    an id (of any ``--kg``; ``--in-kg NAME`` names the KG), or a label that names one entity.
    ``--json`` prints the JSON the MCP tools return.

Extending: write ``_add_<name>(kg_sub)`` that adds a parser to the ``kg``
sub-parsers and sets ``func`` (a callable taking the parsed args and returning an exit
code), then append it to :data:`KG_SUBCOMMANDS`. The CLI calls
:func:`add_kg_commands` once and then ``args.func(args)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Callable

from ..options import whole_number
from ..validate import terminal_text
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


def _browse_flags(p: argparse.ArgumentParser) -> None:
    from ..options import add_kg_flags
    from .factory import SPEC_HELP

    p.add_argument("--kg", action="append", metavar="SPEC", help=f"{SPEC_HELP}; repeatable (default: demo)")
    add_kg_flags(p)
    p.add_argument("--json", action="store_true", help="print the JSON object (what the MCP tools return)")


def _browse(args: argparse.Namespace) -> int:
    return asyncio.run(_browse_async(args))


async def _browse_async(args: argparse.Namespace) -> int:
    from ..options import remote_kg_options
    from ..search import browse
    from ..search.kgset import KGSet
    from .factory import open_kgs

    kgset = KGSet(open_kgs(list(args.kg or ["demo"]), **remote_kg_options(args)))
    try:
        if args.kg_command == "search":
            got = await browse.find(kgset, args.text, limit=args.limit)
            lines = [_entity_line(e) for e in got["entities"]] or [f"no entity's label matches {args.text!r}"]
        else:
            entity = await _resolve(kgset, args.entity, args.in_kg)
            if args.kg_command == "relations":
                got = await browse.relations(kgset, entity)
                width = max((len(r["key"]) for r in got["relations"]), default=0)
                lines = [f"{entity.label}  {entity.id}  ({entity.kg}): {len(got['relations'])} relation(s)"]
                lines += [f"  {r['key']:<{width}}  {r['label']}" for r in got["relations"]]
                lines += [f"  ... and {got['omitted']} more (the search lists the most frequent)"] * bool(got["omitted"])
            else:
                got = await browse.edges(kgset, entity, args.relation)
                lines = [f"{entity.label} --{args.relation}--> {len(got['entities'])} entit{'y' if len(got['entities']) == 1 else 'ies'}"]
                lines += ["  " + _entity_line(e) for e in got["entities"]]
                lines += [f"  ... and {got['omitted']} more edge(s) the search does not see"] * bool(got["omitted"])
    finally:
        await kgset.close()
    print(json.dumps(got, ensure_ascii=False, indent=1) if args.json else terminal_text("\n".join(lines)))
    return 0


def _entity_line(e: dict) -> str:
    desc = f" - {e['description']}" if e.get("description") else ""
    return f"{e['label']}{desc}  {e['id']}  ({e['kg']})"


async def _resolve(kgset, text: str, kg: str | None):
    """The entity ``text`` names: an id a KG has relations for (with several KGs and no
    ``kg``, each KG is asked, as the MCP tools ask them, :func:`~traversals.search.browse.entity_of_id`:
    an id of two is a :class:`BadInput` asking for ``--in-kg``),
    else the one entity whose label it is (case and spacing aside); several or none is a
    :class:`BadInput` listing them."""
    from ..errors import BadInput
    from ..llm.base import Usage
    from ..search import browse
    from ..search.machine import normalise_label

    names = [k.name for k in kgset.kgs]
    entity = await browse.entity_of_id(kgset, text, kg, give="--in-kg NAME")
    if entity is not None:
        return await kgset.described(entity, Usage())  # shown by its label
    found = await kgset.search(text, Usage(), limit=20)
    exact = [e for e in found if normalise_label(e.label) == normalise_label(text) and (kg is None or e.kg == kg)]
    if len(exact) == 1:
        return exact[0]
    if exact:
        listed = "; ".join(f"{e.id} ({e.kg})" for e in exact[:10])
        count = f"at least {len(exact)}" if len(found) >= 20 else str(len(exact))  # the search stopped at 20
        if len({e.id for e in exact}) < len(exact):  # one id in several KGs: the id alone names none
            raise BadInput(f"{count} entities are labelled {text!r}, in several KGs: give --in-kg NAME ({listed})")
        raise BadInput(f"{count} entities are labelled {text!r}: give one's id ({listed})")
    hint = f"; near: {', '.join(e.label for e in found[:5])}" if found else ""
    where = (f" in kg {kg}" if kg is not None else
             f" in any of the KGs {', '.join(names)} (--in-kg NAME looks in one)" if len(names) > 1 else "")
    raise BadInput(f"no entity has the id or the label {text!r}{where}, or it has no relation{hint} "
                   "(traversals kg search TEXT lists candidates)")


#: ``--limit`` of ``kg search``: 1 to 50, as the search asks the KGs (refused outside, not cut in silence)
_search_limit = whole_number(1, 50)


def _add_browse(kg_sub: argparse._SubParsersAction) -> None:
    search = kg_sub.add_parser("search", help="the entities a mention links to, as the search finds them",
                               description="Entities whose label matches TEXT (exact, then case-insensitive, then "
                               "partial), in every KG: what a [bracketed] mention of a question links to.")
    search.add_argument("text", metavar="TEXT")
    search.add_argument("--limit", type=_search_limit, default=5, metavar="N", help="at most N entities (default 5, up to 50)")
    relations = kg_sub.add_parser("relations", help="an entity's relations and their keys, as the search lists them",
                                  description="The relations of ENTITY in both directions, the most frequent first, "
                                  "each with the key `kg edges` takes (~KEY walks a relation backwards).")
    edges = kg_sub.add_parser("edges", help="the edges along one relation of an entity, as the search sees them",
                              description="The entities ENTITY reaches along RELATION (a key `kg relations` printed), "
                              "cut where the search cuts them.")
    for p in (relations, edges):
        p.add_argument("entity", metavar="ENTITY", help="an entity id, or a label that names one entity")
        p.add_argument("--in-kg", default=None, metavar="NAME",
                       help="with several --kg: the KG the entity is in (default: the one whose id it is, "
                       "asking each KG)")
    edges.add_argument("relation", metavar="RELATION", help="a relation key from `traversals kg relations`")
    for p in (search, relations, edges):
        _browse_flags(p)
        p.set_defaults(func=_browse)


#: Functions that each add one ``kg`` sub-command; append to extend.
KG_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_convert, _add_browse]


def add_kg_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``kg`` and its sub-commands to the top-level sub-parsers."""
    kg = subparsers.add_parser("kg", help="knowledge-graph tools: convert a triple file; search, relations, edges")
    kg_sub = kg.add_subparsers(dest="kg_command", metavar="COMMAND", required=True)
    for add in KG_SUBCOMMANDS:
        add(kg_sub)
