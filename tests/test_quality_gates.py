"""Quality gates run with the tests: lint, format, types, the documentation build.

Doctests of the package (every docstring ``Examples`` section) run through the pytest options in
``pyproject.toml`` (``--doctest-modules`` over ``structpos/``), not here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO


def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_ruff_check():
    pytest.importorskip("ruff")
    r = run("ruff", "check", "--no-cache", "structpos")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format():
    pytest.importorskip("ruff")
    r = run("ruff", "format", "--check", "--no-cache", "structpos")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy(tmp_path):
    pytest.importorskip("mypy")
    r = run("mypy", "--cache-dir", str(tmp_path / "mypy"), "structpos")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    r = run("mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def _public_modules() -> list[str]:
    """Every module of the package whose dotted path has no ``_``-prefixed part."""
    import pkgutil

    import structpos

    found = pkgutil.walk_packages(structpos.__path__, "structpos.")
    names = [m.name for m in found if not any(p.startswith("_") for p in m.name.split(".")[1:])]
    return ["structpos", *sorted(names)]


# Every public module: each public function and class it defines has a numpydoc docstring with an
# Examples section (run as doctests by ``--doctest-modules``).
DOCUMENTED = _public_modules()


def _own_public(module: str) -> list:
    import importlib
    import inspect

    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    public = [getattr(mod, n) for n in names]
    return [o for o in public if (inspect.isfunction(o) or inspect.isclass(o)) and o.__module__ == module]


def test_every_reexport_is_documented_at_home():
    """A package that only re-exports (``structpos.encoders``) is covered by its names' home modules."""
    import importlib
    import inspect

    for module in DOCUMENTED:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                home = obj.__module__
                private_home = any(p.startswith("_") for p in home.split(".")[1:])
                assert home in DOCUMENTED or (private_home and "Examples\n" in (obj.__doc__ or "")), (
                    f"{module}.{name} comes from {home}, which the Examples gate does not check"
                )


@pytest.mark.parametrize("module", DOCUMENTED)
def test_public_api_has_examples(module):
    public = _own_public(module)  # a package that only re-exports: test_every_reexport_is_documented_at_home
    lacking = [o.__name__ for o in public if "Examples\n" not in (o.__doc__ or "") or ">>>" not in o.__doc__]
    assert not lacking, f"{module}: no Examples section in {lacking}"
