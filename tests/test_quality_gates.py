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


# Modules whose every public function and class has a numpydoc docstring with an Examples section
# (run as doctests). TODO(integrator): add the other modules as their owners document them; the
# goal is the whole package (``pkgutil.walk_packages(structpos.__path__)``).
DOCUMENTED = [
    "structpos",
    "structpos.align",
    "structpos.cli",
    "structpos.commands.demo",
    "structpos.commands.encode",
    "structpos.commands.show",
    "structpos.coords",
    "structpos.coords.distance",
    "structpos.coords.hierarchy",
    "structpos.coords.table",
    "structpos.coords.tree",
    "structpos.encoders.additive",
    "structpos.encoders.attention_bias",
    "structpos.encoders.aw_rope",
    "structpos.encoders.batching",
    "structpos.encoders.registry",
    "structpos.encoders.rope",
    "structpos.encoders.rope_tables",
    "structpos.encoders.wire",
    "structpos.exceptions",
    "structpos.integrations",
    "structpos.integrations.collate",
    "structpos.integrations.flex",
    "structpos.integrations.hf",
    "structpos.integrations.transformers",
    "structpos.limits",
    "structpos.parsers",
    "structpos.parsers.code",
    "structpos.parsers.conllu_tree",
    "structpos.parsers.document",
    "structpos.parsers.grammar",
    "structpos.parsers.graph",
    "structpos.parsers.json_tree",
    "structpos.parsers.markdown",
    "structpos.parsers.spacy_doc",
    "structpos.parsers.table",
    "structpos.parsers.table_csv",
    "structpos.parsers.table_frame",
    "structpos.parsers.table_html",
    "structpos.parsers.xml_tree",
    "structpos.parsers.yaml_tree",
    "structpos.pipeline.arrow",
    "structpos.pipeline.encode",
    "structpos.pipeline.engines",
    "structpos.pipeline.isolation",
    "structpos.pipeline.lock",
    "structpos.pipeline.records",
    "structpos.pipeline.run",
    "structpos.pipeline.shards",
    "structpos.pipeline.tokens",
    "structpos.pipeline.walk",
    "structpos.registry",
    "structpos.structure",
    "structpos.viz.draw",
    "structpos.viz.export",
    "structpos.viz.layout",
    "structpos.viz.similarity",
]


@pytest.mark.parametrize("module", DOCUMENTED)
def test_public_api_has_examples(module):
    import importlib
    import inspect

    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    public = [getattr(mod, n) for n in names]
    public = [o for o in public if (inspect.isfunction(o) or inspect.isclass(o)) and o.__module__ == module]
    if not public:  # a package that only re-exports (``structpos``): its own docstring carries the example
        doc = mod.__doc__ or ""
        assert "Examples\n" in doc and ">>>" in doc, f"{module} defines nothing public and has no module Examples"
        return
    lacking = [o.__name__ for o in public if "Examples\n" not in (o.__doc__ or "") or ">>>" not in o.__doc__]
    assert not lacking, f"{module}: no Examples section in {lacking}"
