"""What ``traversals`` itself does with a :class:`~traversals.errors.TraversalsError`, for
the bench scripts: one line on stderr and exit code 2 instead of a traceback.

A script ends with ``raise SystemExit(run_script(main, args))``, importing this module in
its ``__main__`` block (the bench folder is on the path when a script runs; tests that load
a script as a module do not need it).
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Any, Callable

from traversals.errors import TraversalsError


def run_script(main: Callable[..., Any], *args: Any) -> int:
    """Call ``main(*args)`` — run it to the end if it is a coroutine function — and return
    the exit code: its own (``None``: 0); 2 after a :class:`TraversalsError` (a wrong
    dataset name, a missing ``--data`` folder or model file …) or a file not found (a run
    folder without ``results.jsonl``), told in one line; 130 on Ctrl-C."""
    prog = Path(sys.argv[0]).name
    try:
        result = main(*args)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except (TraversalsError, FileNotFoundError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
