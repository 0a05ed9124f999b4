"""Safe serialisation of RDF terms into SPARQL query text.

Every value that reaches a query string -- an entity IRI that came back from a server,
a label, a question typed by a user -- goes through one of these functions, so a query
is never malformed and never carries injected syntax.

* :func:`iri` checks the value against the SPARQL 1.1 ``IRIREF`` production
  (``'<' ([^<>"{}|^`\\]-[#x00-#x20])* '>'``) and requires a scheme; anything else is
  :class:`~traversals.errors.BadInput`. It deliberately does *not* apply the stricter
  RFC 3987 validation of ``pyoxigraph.NamedNode``: remote servers return IRIs with
  e.g. stray ``%`` signs and we must be able to send them back. The character check is
  what matters for safety: no character that can end the ``<...>`` token gets through.
  :func:`is_unnameable_iri` tells an IRI a server may hold but :func:`iri` refuses (a
  space in it: a dead end to the search, never sent) from text that was never an IRI.
* :func:`literal` uses ``pyoxigraph.Literal``'s N-Triples serialisation, which escapes
  ``\\`` ``"`` LF CR TAB and every other control character (checked by
  ``tests/unit/test_sparql_text.py``, including a hypothesis round trip through
  pyoxigraph's own SPARQL parser). Text that is not valid Unicode (lone surrogates)
  is :class:`BadInput`.
* :func:`language_tag` validates ``LANGTAG`` (``[a-zA-Z]+('-'[a-zA-Z0-9]+)*``).
"""

from __future__ import annotations

import re
from typing import Iterable

import pyoxigraph

from ..errors import BadInput
from .iris import RDF, XSD

# Characters the IRIREF production forbids: <>"{}|^`\ and U+0000..U+0020.
_IRI_FORBIDDEN = re.compile(r'[<>"{}|^`\\\x00-\x20]')
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_LANGTAG = re.compile(r"[a-zA-Z]+(?:-[a-zA-Z0-9]+)*\Z")
_VARNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

XSD_STRING = XSD + "string"
RDF_LANG_STRING = RDF + "langString"


def _show(value: str, n: int = 60) -> str:
    text = value if len(value) <= n else value[: n - 1] + "…"
    return repr(text)


def iri(value: str) -> str:
    """``<value>`` for an absolute IRI, or :class:`BadInput` if it cannot be one."""
    if not isinstance(value, str) or not value:
        raise BadInput("an IRI must be a non-empty string")
    bad = _IRI_FORBIDDEN.search(value)
    if bad:
        raise BadInput(
            f"not a valid IRI (character {bad.group()!r} is not allowed): {_show(value)}"
        )
    if not _SCHEME.match(value):
        raise BadInput(f"not an absolute IRI (no scheme): {_show(value)}")
    _check_unicode(value)
    return f"<{value}>"


def is_iri(value: str) -> bool:
    """Whether :func:`iri` would accept ``value``."""
    try:
        iri(value)
    except BadInput:
        return False
    return True


def is_strict_iri(value: str) -> bool:
    """Whether ``value`` is also an IRI by RFC 3987 (``pyoxigraph.NamedNode``'s check),
    which some servers apply to queries: a stray ``%`` passes :func:`iri` but not this."""
    if not is_iri(value):
        return False
    try:
        pyoxigraph.NamedNode(value)
    except ValueError:
        return False
    return True


def is_unnameable_iri(value: str) -> bool:
    """Whether ``value`` is an absolute IRI a server may hold and return (a lenient load,
    Virtuoso) that :func:`iri` refuses for a character no query can name (a space, ``|``,
    ``{`` ...), so that no query can ask about it. Not so for text with ``<`` or ``>``,
    which was never one IRI read from ``<...>``, nor for text that is not Unicode."""
    if not isinstance(value, str) or not _SCHEME.match(value) or "<" in value or ">" in value:
        return False
    try:
        _check_unicode(value)
    except BadInput:
        return False
    return not is_iri(value)


def language_tag(tag: str) -> str:
    """A validated language tag (returned unchanged)."""
    if not isinstance(tag, str) or not _LANGTAG.match(tag):
        raise BadInput(f"not a valid language tag: {_show(str(tag))}")
    return tag


def _check_unicode(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadInput(f"text is not valid Unicode (lone surrogate at {e.start})") from None


#: ``"1984"^^xsd:gYear``: the ``xsd:`` prefix a literal id may use for its datatype
_XSD_SHORT = re.compile(r"\^\^xsd:([A-Za-z][A-Za-z0-9_-]*)\Z")


def parse_literal(ident: str) -> pyoxigraph.Literal | None:
    """The literal written in N-Triples form (``"x"@en``, ``"1984"^^xsd:gYear``), parsed by
    pyoxigraph's N-Triples parser, never pasted into a query; ``None`` if it is not one
    literal; :class:`BadInput` if it is not valid Unicode (pyoxigraph took such a string
    for a file and raised AttributeError)."""
    _check_unicode(ident)
    text = _XSD_SHORT.sub(lambda m: f"^^<{XSD}{m.group(1)}>", ident.strip())
    try:
        quads = list(pyoxigraph.parse(f"<urn:x:s> <urn:x:p> {text} .", pyoxigraph.RdfFormat.N_TRIPLES))
    except (SyntaxError, ValueError):
        return None
    if len(quads) != 1 or not isinstance(quads[0].object, pyoxigraph.Literal):
        return None
    return quads[0].object


def literal(value: str, *, language: str | None = None, datatype: str | None = None) -> str:
    """A SPARQL string literal for ``value``: ``"..."``, ``"..."@en`` or ``"..."^^<dt>``."""
    if not isinstance(value, str):
        raise BadInput(f"a literal must be a string, not {type(value).__name__}")
    if language is not None and datatype is not None:
        raise BadInput("a literal has a language tag or a datatype, not both")
    _check_unicode(value)
    if language is not None:
        return str(pyoxigraph.Literal(value, language=language_tag(language)))
    text = str(pyoxigraph.Literal(value))
    if datatype is not None and datatype != XSD_STRING:
        return f"{text}^^{iri(datatype)}"
    return text


def variable(name: str) -> str:
    """``?name`` for a safe variable name."""
    if not _VARNAME.match(name):
        raise BadInput(f"not a valid SPARQL variable name: {_show(name)}")
    return "?" + name


def values(var: str, terms: Iterable[str]) -> str:
    """``VALUES ?var { t1 t2 }`` from already serialised terms."""
    return f"VALUES {variable(var)} {{ {' '.join(terms)} }}"


def iri_list(iris: Iterable[str]) -> str:
    """Serialised IRIs separated by spaces (for ``VALUES`` and ``IN``)."""
    return " ".join(iri(i) for i in iris)
