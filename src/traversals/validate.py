"""Checks of user-supplied text at the edges (CLI flags, HTTP requests, constructors), so
that a typo is one clear :class:`~traversals.errors.BadInput` line (or the caller's own
error class) before any request is made, not a traceback from deep inside ``httpx``."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import httpx

from .errors import BadInput

__all__ = ["http_url", "shown_url", "unicode_text"]


def shown_url(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***`` (for messages and
    run records): ``http://u:pw@host/v1`` -> ``http://u:***@host/v1``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # a port that is not a number: no password can be told apart
        return url
    if not password:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def http_url(url: object, what: str, error: type[Exception] = BadInput) -> str:
    """``url`` unchanged if it is an absolute http(s) URL with a host and a port in
    0-65535 (the scheme in any case); otherwise ``error`` naming ``what`` and the URL."""
    if not isinstance(url, str) or not url.strip():
        raise error(f"{what} must be an http(s) URL, got {url!r}")
    try:
        parsed = httpx.URL(url)
        port = parsed.port  # httpx checks the digits, not the range
    except (httpx.InvalidURL, ValueError, TypeError) as e:
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
