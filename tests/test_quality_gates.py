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


def _pytest_with_modules_missing(
    missing: list[str], *args: str, tests_on_path: bool = False
) -> subprocess.CompletedProcess:
    """pytest in a subprocess where the ``missing`` modules cannot be imported (as if their extra were absent)."""
    path = f"sys.path.insert(0, {str(REPO / 'tests')!r})\n" if tests_on_path else ""
    code = (
        f"import sys\n{path}"
        f"for m in {missing!r}: sys.modules[m] = None\n"
        "import pytest\n"
        f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-rs', *{list(args)!r}]))\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_doctests_of_a_missing_extra_skip_and_other_import_errors_still_fail(tmp_path):
    # the package's own doctests, with lark, PyYAML and pyarrow "not installed": lazy (require) and
    # top-level imports both become skips naming the module, instead of failures and collection errors
    # (naming tests/conftest.py loads the plugin, as the suite's testpaths do)
    r = _pytest_with_modules_missing(
        ["lark", "yaml", "pyarrow"],
        "tests/conftest.py",
        "structpos/parsers/grammar.py",
        "structpos/parsers/yaml_tree.py",
        "structpos/pipeline",
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0 and " failed" not in out and "error" not in out.lower(), out
    for module in ("lark", "yaml", "pyarrow"):
        assert f"optional dependency {module!r} is not installed" in out, (module, out)
    # with the extras installed, the same doctests run (and pass): skipping is only for what is missing
    r = _pytest_with_modules_missing([], "tests/conftest.py", "structpos/parsers/grammar.py")
    assert r.returncode == 0 and "passed" in r.stdout and "skipped" not in r.stdout, r.stdout
    # in docs pages: an optional module skips; an ImportError of structpos itself (a bug) still fails
    (tmp_path / "optional.md").write_text(">>> import no_such_optional_module_xyz\n")
    (tmp_path / "required.md").write_text(
        ">>> from structpos.parsers import require\n>>> require('no_such_module_q', 'text', 'x')\n"
    )
    (tmp_path / "bug.md").write_text(">>> from structpos import no_such_name_xyz\n")
    (tmp_path / "fine.md").write_text(">>> 1 + 1\n2\n")
    args = ["-p", "doctest_extras", "--doctest-glob=*.md", f"--rootdir={tmp_path}", str(tmp_path)]
    r = _pytest_with_modules_missing([], *args, tests_on_path=True)
    assert r.returncode == 1 and "1 failed, 1 passed, 2 skipped" in r.stdout, r.stdout
    assert "bug.md" in r.stdout.split("short test summary")[0]  # the failure is the structpos ImportError
