"""``python -m traversals``: the ``traversals`` command (:func:`traversals.entry.main`), for
an environment whose scripts folder is not on ``PATH`` or an interpreter named explicitly."""

from __future__ import annotations

from .entry import main

if __name__ == "__main__":
    raise SystemExit(main())
