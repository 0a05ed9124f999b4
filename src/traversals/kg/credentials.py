"""Credentials for a SPARQL endpoint that wants them: HTTP Basic from the URL's user info
(``https://USER:PASSWORD@host/sparql``), and headers sent with every request to that
endpoint alone (``Authorization: Bearer TOKEN``, an API gateway's key header).

A password never appears where the endpoint is named: :func:`split_userinfo` takes it out
of the URL the back end keeps and prints, and :func:`shown_kg_spec` out of a ``--kg`` spec
written to a run directory. ``--kg-header`` is read by :func:`parse_kg_header` and sent to
one endpoint by :func:`assign_kg_headers`, never to another KG.
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

from ..errors import BadInput
from ..headers import check_headers as _check_headers
from ..headers import parse_header
from ..tokens import CommandToken
from ..validate import keyed_url, shown_url
from .specs import endpoint_parts

#: headers the SPARQL client sets itself, with a hint: a ``--kg-header`` for one of them is refused
_OWN_HEADERS = {name: "" for name in ("accept", "content-type", "content-length", "host", "transfer-encoding")} | {
    "user-agent": " (use --user-agent)"}


def split_userinfo(url: str) -> tuple[str, str | None, str]:
    """``url`` without its user info, and the user and password it held, percent-decoded
    (``s%40cret`` is ``s@cret``; no user: None). ``http://alice:pw@host/q`` ->
    ``("http://host/q", "alice", "pw")``: HTTP Basic credentials (:func:`basic_auth`)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL": a "[" in a password not percent-encoded
        raise BadInput(f"not a valid URL: {shown_url(url)!r} (a password with '#', '/', '?', '@' or '[' in it "
                       "must be percent-encoded: '[' is %5B)") from None
    if "@" not in parts.netloc:
        return url, None, ""
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), unquote(user), unquote(password)


def basic_auth(user: str | None, password: str) -> httpx.BasicAuth | None:
    """HTTP Basic credentials for ``user`` (None: none)."""
    return None if user is None else httpx.BasicAuth(user, password)


def cache_identity(url: str, user: str | None, headers: Mapping[str, str]) -> str:
    """What the query cache files an endpoint's answers under: its URL, and the user and a
    digest of the headers when given, since another user or token may be shown other data.
    No password or header value is stored (a digest of the headers' values only)."""
    key = keyed_url(url)  # a token in the query: a digest of it, as of the headers
    if user is not None:
        parts = urlsplit(key)
        key = urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}@{parts.netloc}"))
    if headers:
        text = "\n".join(f"{name.lower()}: {value}" for name, value in sorted(headers.items(), key=lambda h: h[0].lower()))
        key += f"#headers={hashlib.sha256(text.encode()).hexdigest()[:16]}"
    return key


def check_headers(headers: Mapping[str, str] | None, where: str) -> dict[str, str]:
    """``headers`` for a SPARQL endpoint as a dict, checked as
    :func:`traversals.headers.check_headers` checks them; the headers the SPARQL client sets
    itself (``Accept``, ``User-Agent`` ...) are refused: ``--user-agent`` sets that one."""
    return _check_headers(headers, where, own=_OWN_HEADERS, client="the SPARQL client")


def parse_kg_header(text: str) -> tuple[str | None, str, str]:
    """A ``--kg-header`` value, ``[KG=]Name: value``, as ``(KG or None, name, value)``: the
    header goes to the KG given as ``KG=URL`` (``movies=Authorization: Bearer TOKEN``), or to
    the only SPARQL endpoint among the ``--kg`` given. A header name holds no ``=`` or ``:``,
    so the first ``:`` ends it and an ``=`` before it ends the KG's name; the value may hold
    both (``Authorization: Basic YWxpY2U6cHc=``)."""
    head, colon, rest = text.partition(":")
    kg, eq, name = head.partition("=")
    if not eq:
        kg, name = "", head
    name, value = parse_header(f"{name}{colon}{rest}", "--kg-header", "'KG=Name: value' for the KG named KG")
    return (kg.strip() or None), name, value


def shown_kg_spec(spec: str) -> str:
    """A ``--kg`` spec with the password of an endpoint URL hidden
    (``movies=https://alice:***@host/sparql``), for run.json and messages."""
    parts = endpoint_parts(spec)
    return parts[0] + shown_url(parts[1]) if parts else spec


def assign_kg_headers(
    specs: Sequence[str], headers: Sequence[tuple[str | None, str, str]], endpoints: Sequence[bool],
    names: Sequence[str | None],
) -> list[dict[str, str]]:
    """The headers each of ``specs`` is opened with: ``headers`` are :func:`parse_kg_header`'s
    triples, ``endpoints`` says which specs are SPARQL endpoints and ``names`` the ``NAME=``
    each was given. A header naming a KG goes to that endpoint; one naming none goes to the
    only endpoint there is. :class:`BadInput` for a header no endpoint would take (no SPARQL
    endpoint given, an unknown name, a name that is not an endpoint) and for an unnamed one
    among several endpoints: a token meant for one server is never sent to another."""
    out: list[dict[str, str]] = [{} for _ in specs]
    endpoint_at = [i for i, is_endpoint in enumerate(endpoints) if is_endpoint]
    for kg, name, value in headers:
        shown = f"--kg-header {kg + '=' if kg else ''}{name}"
        if kg is None:
            if not endpoint_at:
                raise BadInput(f"{shown}: headers go to a SPARQL endpoint, and no --kg is one "
                               "(files, stores, the demo KG and the public wikidata take none; a mirror, "
                               "wikidata:URL, does)")
            if len(endpoint_at) > 1:
                raise BadInput(f"{shown}: {len(endpoint_at)} SPARQL endpoints are given; say which one the header "
                               "goes to: name it (--kg NAME=URL) and give --kg-header 'NAME=Header: value'")
            target = endpoint_at[0]
        else:
            found = [i for i, n in enumerate(names) if n == kg]
            if not found:
                raise BadInput(f"{shown}: no --kg is named {kg!r}; name the endpoint with --kg {kg}=URL")
            target = found[0]
            if not endpoints[target]:
                raise BadInput(f"{shown}: --kg {kg} is not a SPARQL endpoint; only endpoints take headers")
        if name.lower() in (n.lower() for n in out[target]):
            raise BadInput(f"{shown}: header {name} is given twice for {shown_kg_spec(specs[target])}; give it once")
        out[target][name] = value
    return [check_headers(h, f"--kg-header for {shown_kg_spec(spec)}") for h, spec in zip(out, specs)]


def assign_token_commands(
    specs: Sequence[str], commands: Sequence[str], endpoints: Sequence[bool], names: Sequence[str | None],
) -> list[CommandToken | None]:
    """The bearer token command each of ``specs`` is opened with, from ``--kg-token-command``
    values: ``KG=CMD`` for the endpoint given as ``--kg KG=URL`` when KG is such a name (a
    command may itself start with ``VAR=value``: only a name among the ``--kg`` given is read
    as one), else the command for the only endpoint there is. :class:`BadInput` as
    :func:`assign_kg_headers` says it, and for two commands for one endpoint. Nothing is run
    here: a command runs at the endpoint's first query."""
    out: list[CommandToken | None] = [None for _ in specs]
    endpoint_at = [i for i, is_endpoint in enumerate(endpoints) if is_endpoint]
    for text in commands:
        kg, eq, rest = text.partition("=")
        if eq and kg.strip() in {n for n in names if n}:
            target, command = names.index(kg.strip()), rest
            if not endpoints[target]:
                raise BadInput(f"--kg-token-command {kg.strip()}=...: --kg {kg.strip()} is not a SPARQL endpoint; "
                               "only endpoints take tokens")
        elif not endpoint_at:
            raise BadInput("--kg-token-command: tokens go to a SPARQL endpoint, and no --kg is one "
                           "(files, stores, the demo KG and the public wikidata take none)")
        elif len(endpoint_at) > 1:
            raise BadInput(f"--kg-token-command: {len(endpoint_at)} SPARQL endpoints are given; say which one the "
                           "token goes to: name it (--kg NAME=URL) and give --kg-token-command 'NAME=COMMAND'")
        else:
            target, command = endpoint_at[0], text
        if out[target] is not None:
            raise BadInput(f"--kg-token-command is given twice for {shown_kg_spec(specs[target])}; give it once")
        if not command.strip():
            raise BadInput(f"--kg-token-command for {shown_kg_spec(specs[target])}: the command is empty")
        out[target] = CommandToken(command, what="--kg-token-command")
    return out
