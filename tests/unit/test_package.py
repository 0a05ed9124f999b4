"""The package's front names: each resolves, and importing the package stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest

import traversals


def test_every_public_name_resolves_to_the_defining_modules_object():
    from traversals.api import build_solver
    from traversals.kg.factory import open_kg

    assert traversals.build_solver is build_solver and traversals.open_kg is open_kg
    for name in traversals.__all__:
        assert getattr(traversals, name) is not None, name
    assert traversals.__version__ and "build_solver" in dir(traversals)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        traversals.nope  # noqa: B018


def test_importing_the_package_loads_no_backend():
    code = "import sys, traversals; print(sorted(m for m in ('pyoxigraph', 'llama_cpp', 'httpx') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
