"""Bearer tokens that expire, printed by a command of the user's: ``--llm-token-command
'gcloud auth print-access-token'`` (Vertex AI's OpenAI-compatible endpoint), ``'az account
get-access-token --resource https://cognitiveservices.azure.com --query accessToken -o
tsv'`` (Azure OpenAI with Entra ID), a vault's CLI. A token lasts an hour or so and an
evaluation runs for many: the command is run again when the server refuses the token it
printed, and the refused request is sent once more with the new one.

The command runs through the shell, with the process's environment, as the user typed it
(it is their own command line, as in git's credential helpers or kubectl's exec plugins).
Its output is the token: stripped, one line of printable ASCII. The token is never shown:
messages name the command, and the HTTP clients hide every token it printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from .errors import BadInput, TraversalsError

__all__ = ["CommandToken"]

#: how long the command may run (an interactive login prompt would hang otherwise)
COMMAND_TIMEOUT = 60.0


class CommandToken:
    """A bearer token printed by ``command`` (module doc). :meth:`get` runs the command the
    first time and returns its token afterwards; :meth:`refresh` runs it again after the
    server refused ``stale`` (once for many concurrent requests refused together). A command
    that fails, times out or prints no usable token raises :class:`TraversalsError` naming
    ``what`` and the command; the HTTP clients raise it again as their own class (an
    unreachable LLM, a refused KG: an evaluation stops, resumable)."""

    def __init__(self, command: str, *, what: str = "--llm-token-command", timeout: float = COMMAND_TIMEOUT) -> None:
        if not isinstance(command, str) or not command.strip():
            raise BadInput(f"{what}: the command is empty")
        self.command = command.strip()
        self.what = what
        self.timeout = timeout
        #: every token the command printed (the HTTP clients hide them in messages)
        self.issued: list[str] = []
        self.fetches = 0
        self._token: str | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        """The current token, fetched on first use."""
        if self._token is None:
            async with self._lock:
                if self._token is None:
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
        if not all(" " < c <= "~" for c in token):  # the token itself is not shown: it may be one
            raise TraversalsError(f"{shown} printed more than a token (spaces, several lines or non-ASCII characters): "
                             "it should print the token alone")
        self._token = token
        self.issued.append(token)
