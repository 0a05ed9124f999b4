"""Checks of user-supplied text at the edges (CLI flags, HTTP requests, constructors), so
that a typo is one clear :class:`~traversals.errors.BadInput` line (or the caller's own
error class) before any request is made, not a traceback from deep inside ``httpx``."""

from __future__ import annotations

import hashlib
import re
from typing import Callable, TypeVar, cast
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

import httpx

from .errors import BadInput

__all__ = ["http_url", "keyed_url", "shown_url", "unicode_text", "url_secrets"]

#: the name of a query parameter that carries a credential (``?key=``, ``?api_key=``,
#: ``?access_token=``, Azure's SAS ``?sig=``): its value is a secret, as a password is
_SECRET_PARAM = re.compile(r"key|token|secret|passw|signature|^sig$|^auth", re.IGNORECASE)


#: a URL whose user info holds characters that end an authority: scheme, user info, and
#: the rest from the last "@" a host follows
_RAW_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>.*)@(?P<rest>[^@/?#\s]+(?:[/?#].*)?)$",
                           re.DOTALL)


def _secret_params(query: str) -> list[tuple[int, str]]:
    """The ``&``-separated pairs of ``query`` whose name carries a credential: their
    positions and raw values."""
    out = []
    for i, pair in enumerate(query.split("&")):
        name, eq, value = pair.partition("=")
        if eq and value and _SECRET_PARAM.search(unquote_plus(name)):
            out.append((i, value))
    return out


def url_secrets(url: str) -> list[str]:
    """The secrets ``url`` holds, as written and decoded, longest first: the password of
    its user info and the values of query parameters that carry a credential
    (:func:`shown_url` hides the same)."""
    try:
        parts = urlsplit(url)
        password = parts.password or ""
    except ValueError:
        return []
    found = {password, unquote(password)}  # user info is percent-decoded, a "+" kept
    found |= {s for _, v in _secret_params(parts.query) for s in (v, unquote_plus(v))}
    return sorted(found - {""}, key=len, reverse=True)


def shown_url(url: str) -> str:
    """``url`` with the password of its user info and the values of query parameters that
    carry a credential replaced by ``***`` (for messages and run records):
    ``http://u:pw@host/v1?key=K&v=1`` -> ``http://u:***@host/v1?key=***&v=1``."""
    return _secrets_replaced(url, lambda secret: "***")


def keyed_url(url: str) -> str:
    """``url`` with each secret :func:`shown_url` hides replaced by a digest of it: a key
    for a cache that another password or token must not share, with no secret in it."""
    return _secrets_replaced(url, lambda secret: "sha256-" + hashlib.sha256(secret.encode()).hexdigest()[:16])


def _secrets_replaced(url: str, by: Callable[[str], str]) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is no number
        password = parts.password
    except ValueError:  # not a URL urllib can read: a password with a "#", "/", "?" or "["
        # not percent-encoded ends the host early ("http://u:pa#ss@host": port "pa"); all
        # before the last "@" that a host follows is hidden
        raw = _RAW_USERINFO.match(url)
        return f"{raw['scheme']}***@{raw['rest']}" if raw else url
    secret = dict(_secret_params(parts.query))
    if not password and not secret:
        return url
    if password:
        parts = parts._replace(netloc=f"{parts.username or ''}:{by(password)}@{parts.netloc.rsplit('@', 1)[1]}")
    if secret:
        pairs = parts.query.split("&")
        parts = parts._replace(query="&".join(p.partition("=")[0] + "=" + by(secret[i]) if i in secret else p
                                              for i, p in enumerate(pairs)))
    return urlunsplit(parts)


def http_url(url: object, what: str, error: type[Exception] = BadInput) -> str:
    """``url`` unchanged if it is an absolute http(s) URL with a host and a port in
    0-65535 (the scheme in any case); otherwise ``error`` naming ``what`` and the URL."""
    if not isinstance(url, str) or not url.strip():
        raise error(f"{what} must be an http(s) URL, got {url!r}")
    try:
        parsed = httpx.URL(url)
        port = parsed.port  # httpx checks the digits, not the range
    except (httpx.InvalidURL, ValueError, TypeError) as e:
        if shown_url(url) != url:  # the parser's words may quote a part of the password
            raise error(f"{what} is not a valid URL: {shown_url(url)!r} (a password with '#', '/', '?', '@' "
                        "or '[' in it must be percent-encoded: '#' is %23)") from None
        raise error(f"{what} is not a valid URL ({e}): {shown_url(url)!r}") from None
    if parsed.scheme not in ("http", "https"):
        raise error(f"{what} must be an http(s) URL, got {shown_url(url)!r}")
    if not parsed.host:
        raise error(f"{what} has no host: {shown_url(url)!r}")
    if port is not None and not 0 < port < 65536:
        raise error(f"{what} has port {port}, outside 1-65535: {shown_url(url)!r}")
    return url


def unicode_text(text: str, what: str) -> str:
    """``text`` unchanged if it can be encoded as UTF-8 (no lone surrogates, which a
    terminal in another encoding or a JSON ``\\ud800`` escape can produce)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadInput(
            f"{what} is not valid Unicode text (character {e.start} cannot be encoded; "
            "check the terminal's or the request's encoding)"
        ) from None
    return text


T = TypeVar("T")
#: a UTF-16 surrogate code point: in a decoded ``str`` always a lone one (JSON's
#: ``"\ud83d\ude00"`` decodes to one character), which UTF-8 cannot encode
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(value: T) -> T:
    """``value`` (a decoded JSON document: strings, lists, dicts) with every lone surrogate
    replaced by U+FFFD. A server's ``"\\ud800"`` escape is legal JSON and decodes to a
    string nothing can write as UTF-8: one label or LLM reply holding one crashed the
    answer's printing, its trace and the eval run at every resume. Applied where text
    from a server or a plug-in comes in, and when run files are written."""
    scrubbed: object = value
    if isinstance(value, str):
        scrubbed = _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    elif isinstance(value, list):
        scrubbed = [scrub_surrogates(v) for v in value]
    elif isinstance(value, tuple):
        scrubbed = tuple(scrub_surrogates(v) for v in value)
    elif isinstance(value, dict):
        scrubbed = {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    return cast(T, scrubbed)


#: C0 controls but tab and line feed, DEL, and C1 controls: what makes a terminal act (clear
#: the screen, set the window's title, colour what follows) rather than show
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_text(text: str) -> str:
    """``text`` to print on a terminal: each control character shown as ``\\xNN``. A KG label
    or an LLM reply is text from elsewhere, and "\\x1b[2J" in one cleared the screen of
    whoever printed it."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
