"""HTTP headers a user adds to the requests of a client: ``--kg-header`` for a SPARQL
endpoint (:mod:`traversals.kg.credentials`), ``--llm-header`` for an OpenAI-compatible
server (an Azure ``api-key``, a gateway's key, OpenRouter's ``HTTP-Referer``).

A header's value may be a secret, so no message here shows one: :func:`parse_header`
refuses a malformed flag without echoing it, :func:`check_headers` names the header and
never its value, and :func:`shown_header` hides the value where a command line is shown.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from .errors import BadInput

__all__ = ["check_headers", "has_authorization", "parse_header", "shown_header"]

#: an HTTP header name (RFC 9110 ``token``)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
#: a header value that is only an environment reference: it names no secret
_ENV_ONLY = re.compile(r"\s*\$\{?[A-Za-z_][A-Za-z0-9_]*\}?\s*")


def parse_header(text: str, flag: str, scope: str = "") -> tuple[str, str]:
    """``Name: value`` as ``(name, value)``. A header name holds no ``:``, so the first one
    ends it; the value may hold more (``Authorization: Basic YWxpY2U6cHc=``). A value
    without a colon or a name is :class:`BadInput` naming ``flag``, and is not echoed: it
    may be the secret alone. ``scope`` is the extra form the flag takes, for the message."""
    name, colon, value = text.partition(":")
    name = name.strip()
    if not colon or not name:
        raise BadInput(f"{flag}: a header is given as 'Name: value' (e.g. 'Authorization: Bearer TOKEN')"
                       f"{', or ' + scope if scope else ''}; this one has {'no name' if colon else 'no colon'}")
    return name, value.strip()


def has_authorization(headers: Mapping[str, str] | Sequence[str]) -> bool:
    """Whether ``headers`` (or their names) hold an ``Authorization`` header, in any case:
    the one an API key, a user and password or a token command would also set."""
    return any(name.lower() == "authorization" for name in headers)


def shown_header(text: str) -> str:
    """A header flag's value with its value hidden (``Authorization: ***``), for messages
    and recorded command lines; a value that is only ``${VAR}`` names no secret and stays."""
    head, colon, value = text.partition(":")
    if not colon or _ENV_ONLY.fullmatch(value):
        return text
    return f"{head}: ***"


def check_headers(
    headers: Mapping[str, str] | None, where: str, *, own: Mapping[str, str], client: str,
) -> dict[str, str]:
    """``headers`` as a dict, each name an HTTP token and each value one line of printable
    ASCII (tabs and spaces inside, the ends stripped); otherwise :class:`BadInput` naming
    ``where`` and the header, never its value. ``own`` holds the (lower-case) names of the
    headers ``client`` sets itself, each with a hint to add (``" (use --user-agent)"``, or
    ``""``): those are refused."""
    out: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise BadInput(f"{where}: {name!r} is not an HTTP header name (letters, digits and -, no spaces)")
        if name.lower() in own:
            raise BadInput(f"{where}: {name} is set by {client} itself{own[name.lower()]}; it cannot be given as a header")
        if not isinstance(value, str) or not all(c == "\t" or 32 <= ord(c) < 127 for c in value):
            raise BadInput(f"{where}: the value of header {name} must be one line of printable ASCII "
                           "(a line break or a non-ASCII character cannot travel in a header)")
        if not value.strip():
            raise BadInput(f"{where}: header {name} has an empty value")
        if name.lower() in (n.lower() for n in out):
            raise BadInput(f"{where}: header {name} is given twice; give it once")
        out[name] = value.strip()
    return out
