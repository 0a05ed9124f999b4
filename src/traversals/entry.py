"""The ``traversals`` command's entry point: :func:`traversals.cli.main`, imported here so that
a Ctrl-C while the command starts (its imports take about half a second) is the usual one
line and exit 130, not a traceback through the imports."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        print("traversals: interrupted", file=sys.stderr)
        return 130
    return cli_main()
