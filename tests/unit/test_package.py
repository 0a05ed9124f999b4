"""The package's front names: each resolves, and importing the package stays cheap; what
``pyproject.toml`` declares is what the package needs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import traversals

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _lower_bound(requirements: list[str], name: str) -> tuple[int, ...]:
    """The ``>=`` version of ``name`` among PEP 508 requirement strings, as a tuple of ints."""
    for req in requirements:
        if m := re.fullmatch(rf"{re.escape(name)}\s*>=\s*([0-9.]+)(,.*)?", req.strip(), re.IGNORECASE):
            return tuple(int(part) for part in m.group(1).split("."))
    raise AssertionError(f"no {name}>=... in {requirements}")


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


def test_pyoxigraph_lower_bound_has_query_substitutions():
    # kg/store.py binds every value with Store.query(..., substitutions=...), which
    # pyoxigraph has from 0.4.6 on (0.4.0-0.4.5 refuse the keyword)
    assert _lower_bound(_pyproject()["project"]["dependencies"], "pyoxigraph") >= (0, 4, 6)


def test_build_backend_understands_the_license_expression():
    # `license = "Apache-2.0"` (a PEP 639 SPDX string) is a configuration error before setuptools 77
    data = _pyproject()
    assert isinstance(data["project"]["license"], str)
    assert _lower_bound(data["build-system"]["requires"], "setuptools") >= (77,)


def test_the_license_ships_and_the_sdist_carries_tests_and_docs():
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert _pyproject()["project"]["license-files"] == ["LICENSE"]
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()
    for line in ("graft tests", "graft docs", "graft examples", "graft bench", "prune runs", "prune models"):
        assert line in manifest, line


def test_the_package_says_it_is_typed():
    # PEP 561: without py.typed in the installed package, a user's mypy ignores its hints
    assert (Path(traversals.__file__).parent / "py.typed").is_file()
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"]["traversals"]


def test_a_type_checker_sees_every_front_name_from_its_module():
    # __getattr__ loads them at run time, which a type checker cannot follow: each needs its
    # import under TYPE_CHECKING, from the module that defines it, or a user's mypy gets Any
    # (and `X as X`, or mypy --strict says the package does not export it)
    import ast

    tree = ast.parse(Path(traversals.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
    typed = {alias.name: "traversals." + imp.module for imp in block.body if isinstance(imp, ast.ImportFrom)
             for alias in imp.names if imp.module and alias.asname == alias.name}  # `X as X`: re-exported
    assert typed == traversals._EXPORTS


def test_every_runtime_dependency_is_imported_by_the_package():
    # a dependency nothing imports costs every user an install; one only tests use belongs to the test extra
    import ast

    imported = set()
    for path in Path(traversals.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    import_names = {"pyyaml": "yaml"}
    project = _pyproject()["project"]
    for req in project["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()
        assert import_names.get(name, name) in imported, req
    assert any(req.startswith("PyYAML") for req in project["optional-dependencies"]["test"])


def test_python_m_traversals_is_the_command(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(traversals.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-m", "traversals", "--version"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["traversals", traversals.__version__]
    bad = subprocess.run([sys.executable, "-m", "traversals", "no-such-command"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "usage: traversals" in bad.stderr  # the exit code is the command's
