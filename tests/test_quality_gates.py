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


@pytest.mark.xfail(strict=False, reason="the package is formatted once by the integrator after the parallel branches merge")
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
