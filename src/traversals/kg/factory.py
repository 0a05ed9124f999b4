"""Turn a ``--kg`` spec into a :class:`~traversals.kg.base.KnowledgeGraph`.

Accepted specs (see :data:`SPEC_HELP`):

``demo``
    the built-in Wikidata-shaped demo KG (:func:`~traversals.kg.store.demo_kg_path`);
``wikidata``
    Wikidata through its public services (:class:`~traversals.kg.wikidata.WikidataKG`);
``wikidata:URL``
    a Wikidata mirror's SPARQL endpoint (QLever's Wikidata, a local WDQS): Wikidata's
    vocabulary and labels, entities found by SPARQL label matching (a mirror has no
    MediaWiki search API), no public-service rate limit; credentials as for ``sparql:URL``;
``sparql:URL`` or any ``http://`` / ``https://`` URL
    a SPARQL 1.1 endpoint (:class:`~traversals.kg.sparql.SparqlKG`);
a file ``*.nt *.ttl *.nq *.trig *.rdf *.owl *.jsonld *.txt *.tsv *.csv`` (optionally
    ``.gz``; other compressions are refused with a hint to use gzip)
    loaded into memory (:meth:`OxigraphKG.from_file
    <traversals.kg.store.OxigraphKG.from_file>`);
a directory
    a persistent Oxigraph store (:meth:`OxigraphKG.open
    <traversals.kg.store.OxigraphKG.open>`), opened read-only: nothing is written into
    the directory and several processes (``serve`` and ``eval``) may read it at once; a
    directory that is not a store is refused.

Any spec may be prefixed with ``NAME=`` to name the KG (``movies=kb.txt``); the name is
what entities and relations carry in ``.kg`` and what multi-KG prompts show. The
SPARQL and Wikidata back ends are imported only when asked for.

``label_predicates`` (the ``--label-predicate`` flag) replaces the predicates an entity's
label is read from (by default ``rdfs:label``, ``skos:prefLabel``, ``schema:name``) for
every KG opened but Wikidata, which keeps its own: given for Wikidata alone, it is refused
(:func:`label_predicates_for`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypedDict, Unpack, cast

from ..errors import BadInput
from ..headers import has_authorization
from ..validate import shown_url
from . import formats, iris
from . import sparql_text as st
from .base import KnowledgeGraph
from .credentials import assign_kg_headers, assign_token_commands, parse_kg_header, shown_kg_spec, split_userinfo
from .specs import endpoint_parts, split_name

if TYPE_CHECKING:
    from ..tokens import CommandToken
    from .cache import QueryCache
    from .http import HttpClient, RateLimit

SPEC_HELP = (
    "demo | wikidata | wikidata:URL (a mirror) | sparql:URL | http(s)://ENDPOINT | a triple file ("
    + " ".join(formats.ACCEPTED_EXTENSIONS)
    + ", optionally .gz) | a store directory; prefix NAME= to name it"
)

LABEL_PREDICATE_HELP = (
    "a full IRI (http://..., https://... or urn:...) or a prefixed name: "
    + ", ".join(f"{prefix}:NAME" for prefix in iris.LABEL_PREFIXES)
    + " (e.g. foaf:name)"
)

_FULL_IRI = re.compile(r"(?i)(https?://|urn:)")
#: Compressions a triple file may come in that are not read (only ``.gz`` is).
_OTHER_COMPRESSIONS = (".bz2", ".xz", ".zst", ".lz4", ".zip", ".7z")


class RemoteOptions(TypedDict, total=False):
    """The keywords of :func:`open_kg` that go to the SPARQL and Wikidata back ends (both
    take them); ``None`` keeps the back end's default."""

    cache: QueryCache | None
    user_agent: str | None
    timeout: float | None
    max_retries: int | None
    rate_limit: RateLimit | None
    http: HttpClient | None
    scan_limit: int | None
    count_limit: int | None
    order_limit: int | None
    search_stages: Sequence[str] | None
    language: str | None


class _BackendOptions(TypedDict, total=False):
    """:class:`RemoteOptions` without the ``None`` values, and the KG's name if given."""

    name: str
    cache: QueryCache
    user_agent: str
    timeout: float
    max_retries: int
    rate_limit: RateLimit
    http: HttpClient
    scan_limit: int
    count_limit: int
    order_limit: int
    search_stages: Sequence[str]
    language: str


def open_kg(
    spec: str,
    *,
    name: str | None = None,
    label_predicates: Sequence[str] | None = None,
    headers: Mapping[str, str] | None = None,
    token: CommandToken | None = None,
    **remote: Unpack[RemoteOptions],
) -> KnowledgeGraph:
    """Open the KG described by ``spec``; raises :class:`BadInput` for an unusable spec.

    ``label_predicates`` (IRIs or prefixed names, most preferred first:
    :func:`check_label_predicates`) replace the default label predicates of a file, a store,
    the demo KG or an endpoint; Wikidata keeps its own, and is refused them. ``remote``
    keyword arguments (``cache=``, ``user_agent=``, ``timeout=`` …) go to the
    SPARQL and Wikidata back ends only; files and stores ignore them. ``None`` values
    are dropped, so each back end keeps its own default (``timeout``: 30 s, 60 s for
    Wikidata). ``headers`` go with every request to a SPARQL endpoint (``{"Authorization":
    "Bearer TOKEN"}``; a user and password go in its URL, ``https://USER:PASSWORD@host/...``);
    any other KG is refused them, and so is ``token`` (a bearer token a command prints,
    :class:`~traversals.tokens.CommandToken`, fetched anew when the endpoint refuses it)."""
    preds = label_predicates_for([spec], label_predicates, what="label_predicates")
    kind, target, given = check_kg_spec(spec)
    name = name or given
    if (headers or token) and (kind not in ("sparql", "wikidata") or target == "wikidata"):
        raise BadInput(f"headers and tokens go to a SPARQL endpoint; {shown_kg_spec(spec)!r} is not one")
    if kind == "demo":
        from .store import OxigraphKG

        return OxigraphKG.demo(name=name or "demo", label_predicates=preds)
    if kind == "wikidata":
        from .wikidata import WikidataKG

        if target == "wikidata":  # the public services
            return WikidataKG(**_backend_options(name, remote))
        # a mirror: its SPARQL endpoint alone, and no rate limit meant for the public service unless given
        mirror: dict[str, Any] = {"rate_limit": None, **_backend_options(name, remote)}
        return WikidataKG(target, api_url=None, headers=headers, token=token, **mirror)
    if kind == "sparql":
        from .sparql import SparqlKG

        return SparqlKG(
            target, headers=headers, token=token, label_predicates=preds or iris.DEFAULT_LABEL_PREDICATES,
            **_backend_options(name, remote),
        )
    from .store import OxigraphKG

    if kind == "store":
        return OxigraphKG.open(Path(target), name=name, read_only=True, label_predicates=preds)
    return OxigraphKG.from_file(Path(target), name=name, label_predicates=preds)


def check_label_predicates(values: Sequence[str], *, what: str = "label_predicates") -> tuple[str, ...]:
    """The label predicates ``values`` names, as full IRIs, in the order given and without
    repeats: each a full ``http://``, ``https://`` or ``urn:`` IRI, or a name with one of the
    prefixes of :data:`iris.LABEL_PREFIXES <traversals.kg.iris.LABEL_PREFIXES>`
    (``foaf:name`` -> ``http://xmlns.com/foaf/0.1/name``). Anything else, or none at all,
    is :class:`BadInput` naming ``what`` (``--label-predicate`` on the command line) and
    the accepted forms; nothing is read or contacted."""
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        text = value.strip() if isinstance(value, str) else ""
        prefix, colon, local = text.partition(":")
        if colon and prefix in iris.LABEL_PREFIXES and not local.startswith("//"):
            full = iris.LABEL_PREFIXES[prefix] + local if local else ""
        else:
            scheme = _FULL_IRI.match(text)
            full = text if scheme and len(text) > scheme.end() else ""
        if full and st.is_strict_iri(full):
            out.append(full)
            continue
        raise BadInput(f"{what} {value!r}: not a label predicate; give {LABEL_PREDICATE_HELP}")
    if not out:
        raise BadInput(f"{what}: no label predicate given; give {LABEL_PREDICATE_HELP}")
    return tuple(dict.fromkeys(out))


def label_predicates_for(
    specs: Sequence[str], values: Sequence[str] | None, *, what: str = "--label-predicate"
) -> tuple[str, ...] | None:
    """The label predicates the KGs of ``specs`` are opened with (:func:`check_label_predicates`),
    None when none are given (each back end's default). Checked before anything is opened: a
    malformed one, and label predicates for Wikidata alone, which keeps its own labels
    (``rdfs:label`` in its languages; among other KGs it keeps them and the others take these),
    are :class:`BadInput`."""
    if values is None:
        return None
    preds = check_label_predicates(values, what=what)
    if specs and all(is_wikidata(spec) for spec in specs):
        raise BadInput(
            f"{what} sets the labels of triple files, stores and SPARQL endpoints, not Wikidata's, which keeps "
            "its own (rdfs:label in its languages), and every KG here is Wikidata: drop it"
        )
    return preds


def check_kg_spec(spec: str) -> tuple[str, str, str | None]:
    """What ``spec`` names, checked without reading or contacting anything: ``(kind, target,
    name)`` with kind ``demo``, ``wikidata`` (target ``wikidata``, or a mirror's URL),
    ``sparql`` (target: the URL), ``store`` (a directory) or ``file`` (a triple file that
    exists), and the ``NAME=`` given or None.
    Raises the :class:`BadInput` :func:`open_kg` gives for an empty spec, ``sparql:``
    without an http(s) URL, a missing file, a file of no accepted type or an unknown name;
    what only opening shows (a file that does not parse, an endpoint down) is not checked."""
    spec = (spec or "").strip()
    if not spec:
        raise BadInput(f"empty KG spec; accepted: {SPEC_HELP}")
    given, spec = split_name(spec)
    low = spec.lower()
    if low in ("demo", "wikidata"):
        return low, low, given
    if low.startswith("wikidata:"):
        url = spec[len("wikidata:"):].strip()
        if not url.lower().startswith(("http://", "https://")):
            raise BadInput(f"wikidata:URL names a Wikidata mirror's SPARQL endpoint by an http(s) URL, got "
                           f"{shown_url(url)!r} (the public Wikidata is plain 'wikidata')")
        return "wikidata", url, given
    if low.startswith("sparql:") or low.startswith(("http://", "https://")):
        url = spec[len("sparql:"):].strip() if low.startswith("sparql:") else spec
        if not url.lower().startswith(("http://", "https://")):
            raise BadInput(f"sparql:URL needs an http(s) URL, got {shown_url(url)!r}")
        return "sparql", url, given
    path = Path(spec).expanduser()
    if path.is_dir():
        return "store", str(path), given
    if formats.detect_format(path) is not None:
        if not path.exists():
            raise BadInput(f"no such file: {path}")
        return "file", str(path), given
    if path.exists():
        if path.suffix.lower() in _OTHER_COMPRESSIONS:
            raise BadInput(
                f"{path}: {path.suffix} files are not read; decompress it, or compress it "
                f"with gzip (.gz) instead"
            )
        raise BadInput(f"{path}: unknown triple file type; accepted KG specs: {SPEC_HELP}")
    raise BadInput(f"unknown KG {spec!r}: no such file or directory; accepted: {SPEC_HELP}")


def is_wikidata(spec: str) -> bool:
    """Whether ``spec`` opens Wikidata (``wikidata``, or a mirror, ``wikidata:URL``), which
    keeps its own labels."""
    return _identity(spec).startswith("wikidata")


def _is_endpoint(spec: str) -> bool:
    """Whether ``spec`` is an endpoint that may take credentials: ``sparql:URL``, a URL, or
    a Wikidata mirror (``wikidata:URL``; not the public services)."""
    return _identity(spec).removeprefix("wikidata:").startswith(("http://", "https://"))


def _identity(spec: str) -> str:
    """What ``spec`` opens, as :func:`open_kg` reads it: a resolved path, a URL without
    its trailing slash, or a keyword — so one KG given twice, by two paths or names, is
    seen as one."""
    spec = split_name(spec)[1]
    low = spec.lower()
    if low.startswith("wikidata:") and low != "wikidata:":  # a mirror: one KG however its URL is written
        return "wikidata:" + _identity(spec[len("wikidata:"):].strip())
    if low.startswith("sparql:"):
        spec, low = spec[len("sparql:"):].strip(), low[len("sparql:"):].strip()
    if low in ("demo", "wikidata"):
        return low
    if low.startswith(("http://", "https://")):
        return _url_identity(spec)
    try:
        return str(Path(spec).expanduser().resolve())
    except (OSError, RuntimeError):
        return spec


def _url_identity(url: str) -> str:
    """An endpoint URL as one KG: scheme and host in lower case (they are
    case-insensitive), the path without a trailing slash, the query string as given (a
    path or ``?default-graph-uri=`` differing in case names another repository or graph)."""
    scheme, rest = url.split("://", 1)
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    host, tail = rest[:cut], rest[cut:]
    path, query = tail.split("?", 1) if "?" in tail else (tail, None)
    path = path.rstrip("/")
    return f"{scheme.lower()}://{host.lower()}{path}" + (f"?{query}" if query is not None else "")


def _backend_options(name: str | None, remote: RemoteOptions) -> _BackendOptions:
    # Every value left is of its key's type in RemoteOptions, without None.
    options = cast(_BackendOptions, {k: v for k, v in remote.items() if v is not None})
    if name:
        options["name"] = name
    return options


def headers_for(specs: Sequence[str], kg_headers: Sequence[str]) -> list[dict[str, str]]:
    """The headers each of ``specs`` is opened with, from ``--kg-header`` values
    (``[KG=]Name: value``; :func:`~traversals.kg.credentials.assign_kg_headers`), checked
    without opening anything: :class:`BadInput` for a header no endpoint would take."""
    return assign_kg_headers(
        specs, [parse_kg_header(h) for h in kg_headers],
        endpoints=[_is_endpoint(spec) for spec in specs],
        names=[split_name(spec)[0] for spec in specs],
    )


def credentials_for(
    specs: Sequence[str], kg_headers: Sequence[str], kg_token_commands: Sequence[str] = (),
) -> list[tuple[dict[str, str], CommandToken | None]]:
    """The headers and the token command each of ``specs`` is opened with
    (:func:`headers_for`, :func:`~traversals.kg.credentials.assign_token_commands`), checked
    without opening or running anything: :class:`BadInput` for credentials no endpoint
    would take, and for a token command beside an ``Authorization`` header or a user in
    the URL of the same endpoint."""
    headers = headers_for(specs, kg_headers)
    tokens = assign_token_commands(
        specs, kg_token_commands, endpoints=[_is_endpoint(spec) for spec in specs],
        names=[split_name(spec)[0] for spec in specs],
    )
    for spec, h, token in zip(specs, headers, tokens):
        url = (endpoint_parts(spec) or ("", ""))[1]  # a token goes to endpoints only
        if token is not None and (has_authorization(h) or split_userinfo(url)[1] is not None):
            raise BadInput(f"--kg-token-command for {shown_kg_spec(spec)} sets the Authorization header, which a "
                           "user in the URL or an --kg-header Authorization sets too; give one")
    return list(zip(headers, tokens))


def open_kgs(
    specs: Sequence[str] | None,
    *,
    label_predicates: Sequence[str] | None = None,
    kg_headers: Sequence[str] = (),
    kg_token_commands: Sequence[str] = (),
    **remote: Unpack[RemoteOptions],
) -> list[KnowledgeGraph]:
    """Open several KGs (``[]`` or ``None`` -> the demo KG).

    Names are made unique (a second ``kb`` becomes ``kb-2``) because entities and
    relations are told apart by ``.kg``: a name given as ``NAME=SPEC`` is kept and a
    default name gives way to it; one NAME given twice, one KG given twice, or Wikidata
    twice (the public service and a mirror, ``wikidata:URL``), is :class:`BadInput`. ``label_predicates`` (:func:`label_predicates_for`) go to every KG
    but Wikidata, checked before any is opened. ``kg_headers`` are ``--kg-header`` values,
    ``[KG=]Name: value``, each sent to the SPARQL endpoint named KG or to the only one given
    (:func:`~traversals.kg.credentials.assign_kg_headers`), and ``kg_token_commands``
    ``--kg-token-command`` values, ``[KG=]COMMAND`` (:func:`credentials_for`), checked before
    any is opened too.
    """
    if not specs:
        specs = ["demo"]
    preds = label_predicates_for(specs, label_predicates)
    first: dict[str, str] = {}  # what a spec opens -> the spec that named it first
    for spec in specs:
        key = _identity(spec)
        if key in first:
            same = first[key]
            same_shown, spec_shown = shown_kg_spec(same), shown_kg_spec(spec)
            said = f"{same_shown!r} and {spec_shown!r} are" if same.strip() != spec.strip() else f"{spec_shown!r} is"
            raise BadInput(
                f"{said} the same KG given twice; give it once (two copies would be searched as "
                "two KGs, every entity linked to itself)"
            )
        first[key] = spec
    wikidatas = [spec for key, spec in first.items() if key == "wikidata" or key.startswith("wikidata:")]
    if len(wikidatas) > 1:  # the public service and a mirror, or two mirrors: one KG's QIDs twice
        raise BadInput(f"{' and '.join(repr(shown_kg_spec(s)) for s in wikidatas)} are each Wikidata, with the same "
                       "QIDs; give one (two would be searched as two KGs, every entity linked to itself)")
    given = [split_name(spec)[0] for spec in specs]
    named = [g for g in given if g]
    for g in set(named):
        if named.count(g) > 1:
            raise BadInput(f"two KGs are named {g!r} (NAME=SPEC); give each its own name")
    credentials = credentials_for(specs, kg_headers, kg_token_commands)
    kgs = [
        open_kg(spec, label_predicates=None if is_wikidata(spec) else preds, headers=h, token=token, **remote)
        for spec, (h, token) in zip(specs, credentials)
    ]
    taken = {kg.name for kg in kgs}  # a suffix never takes a name another KG has (NAME=SPEC)
    seen: set[str] = set(named)  # a name the user gave stays; a default name gives way
    for kg, name in zip(kgs, given):
        base = kg.name
        if not name and base in seen:
            n = 2
            while f"{base}-{n}" in taken:
                n += 1
            try:
                kg.name = f"{base}-{n}"
            except AttributeError:  # pragma: no cover - read-only name
                pass
            taken.add(kg.name)
        seen.add(kg.name)
    return kgs
