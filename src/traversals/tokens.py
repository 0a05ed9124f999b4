"""Bearer tokens that expire, printed by a command of the user's: ``--llm-token-command
'gcloud auth print-access-token'`` (Vertex AI's OpenAI-compatible endpoint), ``'az account
get-access-token --resource https://cognitiveservices.azure.com'`` (Azure OpenAI with Entra
ID), a vault's CLI. A token lasts an hour or so and an
evaluation runs for many: the command is run again when the server refuses the token it
printed, and the refused request is sent once more with the new one.

The command runs through the shell, with the process's environment, as the user typed it
(it is their own command line, as in git's credential helpers or kubectl's exec plugins).
Its output is the token: stripped, one line of printable ASCII, or a JSON object holding it
(``accessToken``, ``access_token`` or ``token``, as ``az account get-access-token`` and OAuth
token endpoints print it). The token is never shown: messages name the command, and the
HTTP clients hide every token it printed.

When the token says when it expires — a JSON object's ``expires_on`` / ``expires_at``
(seconds since the epoch) or ``expires_in`` (seconds from now), else a JWT's ``exp`` claim —
the command is run again :data:`REFRESH_MARGIN` seconds before then, so no request is
refused for it; a token already that close to expiring when printed (a clock skew, a cached
token) is used until a server refuses it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import signal
import time
from typing import Any, Callable

from .aio import LoopLock
from .errors import BadInput, TraversalsError

__all__ = ["CommandToken"]

#: how long the command may run (an interactive login prompt would hang otherwise)
COMMAND_TIMEOUT = 60.0
#: a token that says when it expires is fetched anew this many seconds before
REFRESH_MARGIN = 60.0
#: the keys a JSON object printed by the command may hold its token under, in this order
TOKEN_KEYS = ("accessToken", "access_token", "token")


class CommandToken:
    """A bearer token printed by ``command`` (module doc). :meth:`get` runs the command the
    first time and returns its token afterwards; :meth:`refresh` runs it again after the
    server refused ``stale`` (once for many concurrent requests refused together). A command
    that fails, times out or prints no usable token raises :class:`TraversalsError` naming
    ``what`` and the command; the HTTP clients raise it again as their own class (an
    unreachable LLM, a refused KG: an evaluation stops, resumable)."""

    def __init__(self, command: str, *, what: str = "--llm-token-command", timeout: float = COMMAND_TIMEOUT,
                 clock: Callable[[], float] = time.time) -> None:
        if not isinstance(command, str) or not command.strip():
            raise BadInput(f"{what}: the command is empty")
        self.command = command.strip()
        self.what = what
        self.timeout = timeout
        #: every token the command printed (the HTTP clients hide them in messages)
        self.issued: list[str] = []
        self.fetches = 0
        self._token: str | None = None
        #: when the current token expires (seconds since the epoch), if it says
        self.expires: float | None = None
        self._clock = clock
        #: one lock per event loop: a token kept across asyncio.run calls (a library user's
        #: LLM) is fetched again in a later loop, where a single asyncio.Lock would refuse
        self._lock = LoopLock()

    def _due(self) -> bool:
        return self._token is None or (self.expires is not None and self._clock() >= self.expires - REFRESH_MARGIN)

    async def get(self) -> str:
        """The current token, fetched on first use and again shortly before it expires."""
        if self._due():
            async with self._lock:
                if self._due():
                    await self._fetch()
        assert self._token is not None
        return self._token

    async def refresh(self, stale: str) -> str | None:
        """A new token after the server refused ``stale`` (the command run once for all the
        requests refused together); None when the command prints ``stale`` again. A request
        asks once: a server that refuses every token fails it, it does not loop here."""
        async with self._lock:
            if self._token != stale:  # another request refreshed it meanwhile
                return self._token
            await self._fetch()
            return self._token if self._token != stale else None

    async def _fetch(self) -> None:
        shown = f"{self.what} {self.command!r}"
        try:
            proc = await asyncio.create_subprocess_shell(
                self.command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True)  # its own group: stopped whole
        except OSError as e:
            raise TraversalsError(f"{shown} could not be run: {e.strerror or e}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):  # the shell and what it started
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise TraversalsError(f"{shown} printed no token within {self.timeout:g} s (does it wait for a login?)") from None
        self.fetches += 1
        if proc.returncode != 0:
            tail = " ".join(err.decode("utf-8", "replace").split())[-200:]
            raise TraversalsError(f"{shown} failed (exit status {proc.returncode})" + (f": {tail}" if tail else ""))
        token = out.decode("utf-8", "replace").strip()
        if not token:
            raise TraversalsError(f"{shown} printed nothing: it should print the token alone")
        expires: float | None = None
        if token.startswith("{"):
            token, expires = _from_json(token, shown, self._clock())
        if not all(" " < c <= "~" for c in token):  # the token itself is not shown: it may be one
            raise TraversalsError(f"{shown} printed more than a token (spaces, several lines or non-ASCII characters): "
                             "it should print the token alone, or a JSON object with an accessToken")
        if expires is None:
            expires = jwt_expiry(token)
        # printed already (nearly) expired: renewing before each request would run the command for each
        self.expires = expires if expires is not None and expires - REFRESH_MARGIN > self._clock() else None
        self._token = token
        self.issued.append(token)


def _from_json(text: str, shown: str, now: float) -> tuple[str, float | None]:
    """The token and its expiry (seconds since the epoch, if given) in a JSON object printed by a command."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    token = next((data[k] for k in TOKEN_KEYS if isinstance(data, dict) and isinstance(data.get(k), str)), None)
    if not token:
        raise TraversalsError(f"{shown} printed JSON with no token in it: it should print the token alone, or a JSON "
                              f"object with one of {', '.join(TOKEN_KEYS)}")
    for key, base in (("expires_on", 0.0), ("expires_at", 0.0), ("expires_in", now)):
        value = data.get(key)
        if isinstance(value, str) and value.strip().isdigit():  # az prints expires_on as a string of digits
            value = int(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return token, base + float(value)
    return token, None


def jwt_expiry(token: str) -> float | None:
    """A JSON Web Token's ``exp`` claim (seconds since the epoch), or None: not a JWT, or none given."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None
