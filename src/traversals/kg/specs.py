"""The grammar of a ``--kg`` spec, read without opening anything: an optional ``NAME=`` in
front, and for an endpoint ``[sparql:|wikidata:]http(s)://...``. :mod:`.factory` opens
what a spec names; :mod:`.credentials` hides an endpoint's password in it. Both read the
spec here, so the two never disagree on where a name ends or a URL starts."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["endpoint_parts", "file_kg_name", "is_kg_name", "split_name"]

#: a KG's name given as ``NAME=SPEC``
_NAME = r"[A-Za-z][A-Za-z0-9_.-]*"
_NAME_PREFIX = re.compile(rf"^({_NAME})=(.+)$")
#: a spec naming an endpoint by URL: what comes before the URL (a name, a kind, spaces), the URL
_ENDPOINT = re.compile(rf"^(\s*(?:{_NAME}=)?\s*(?:sparql:|wikidata:)?\s*)(https?://.*)$", re.IGNORECASE | re.DOTALL)


def split_name(spec: str) -> tuple[str | None, str]:
    """``NAME=SPEC`` -> (NAME, SPEC); a spec without a name (or a file whose name has an
    ``=``) -> (None, spec)."""
    spec = (spec or "").strip()
    m = _NAME_PREFIX.match(spec)
    return (m.group(1), m.group(2).strip()) if m and not Path(spec).exists() else (None, spec)


def is_kg_name(name: str) -> bool:
    """Whether ``name`` can be given as ``NAME=`` (a letter, then letters, digits, ``_.-``)."""
    return re.fullmatch(_NAME, name) is not None


def file_kg_name(path: str | Path) -> str:
    """The name of a KG read from the file ``path`` without ``NAME=``: the file's name
    without its extension (and ``.gz``): ``films.txt`` and ``films.nt.gz`` are "films"."""
    name = Path(path).name
    if name.lower().endswith(".gz"):
        name = name[:-3]
    return Path(name).stem or name


def endpoint_parts(spec: str) -> tuple[str, str] | None:
    """A spec naming an endpoint by URL as ``(head, url)``: the text before the URL as typed
    (``movies=``, ``sparql:``, ``wikidata:``) and the URL; None for any other spec."""
    m = _ENDPOINT.match(spec)
    return (m.group(1), m.group(2)) if m else None
