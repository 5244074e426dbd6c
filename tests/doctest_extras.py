"""A pytest plugin: doctests of optional extras skip, rather than fail, where the extra is not installed.

``tests/conftest.py`` registers it as a plugin (not a conftest), so its hooks reach the doctests of
``structpos/`` and ``docs/`` too: the suite's ``testpaths`` always load ``tests/conftest.py``
(a run of ``pytest structpos/...`` alone does not, unless it names ``tests/conftest.py`` or passes
``-p doctest_extras`` with ``tests/`` on the path).

The package's docstring Examples and the docs' ``>>>`` snippets run as doctests
(``--doctest-modules --doctest-glob=*.md``, see ``pyproject.toml``). An example that needs an
optional dependency (lark, PyYAML, tree-sitter, pyarrow, ...) fails with an ImportError where
its extra is missing: at collection when its module imports the dependency at the top, or when
the example runs and :func:`structpos.parsers.require` (or a plain ``import``) does not find it.
Both become skips here, naming the missing module, but only when that module really is not
installed (``importlib.util.find_spec`` finds nothing) and is not one of the core dependencies
or structpos itself: an ImportError from broken code still fails.
"""

from __future__ import annotations

import doctest
import importlib.util

import pytest
from _pytest.doctest import DoctestItem, DoctestModule, MultipleDoctestFailures

CORE = frozenset({"structpos", "numpy", "scipy", "torch", "threadpoolctl"})
"""Never skipped for: structpos and its required dependencies (their absence is a broken install)."""


def _not_installed(module: str) -> bool:
    """Whether the top-level package of ``module`` cannot be imported because it is not installed."""
    root = module.split(".")[0]
    if root in CORE:
        return False
    try:
        return importlib.util.find_spec(root) is None
    except (ImportError, ValueError):  # blocked (None in sys.modules) or a broken spec
        return True


def missing_dependency(exc: BaseException | None) -> str | None:
    """The optional module whose absence caused ``exc`` (through its causes), else ``None``."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, doctest.UnexpectedException):
            exc = exc.exc_info[1]
            continue
        if isinstance(exc, MultipleDoctestFailures):
            causes = [missing_dependency(f) for f in exc.failures]
            return causes[0] if causes and all(c is not None and c == causes[0] for c in causes) else None
        if isinstance(exc, ImportError) and exc.name and _not_installed(exc.name):
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


def _reason(module: str) -> str:
    return f"optional dependency {module!r} is not installed (its structpos extra is missing)"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A doctest module that cannot be imported for lack of an optional dependency: skipped."""
    if isinstance(collector, DoctestModule):
        collect = collector.collect

        def collect_or_skip():
            try:
                return list(collect())
            except Exception as e:  # pytest's CollectError, caused by the ImportError
                module = missing_dependency(e)
                if module is None:
                    raise
                pytest.skip(f"{collector.path.name}: {_reason(module)}")

        collector.collect = collect_or_skip
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A doctest example that stops on a missing optional dependency: skipped."""
    report = yield
    if isinstance(item, DoctestItem) and call.when == "call" and report.failed and call.excinfo is not None:
        module = missing_dependency(call.excinfo.value)
        if module is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.reportinfo()[1] or 0, f"Skipped: {_reason(module)}")
    return report
