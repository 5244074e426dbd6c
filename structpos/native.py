"""The optional compiled fast paths, and the switch that turns them off.

``pip install`` compiles each ``native/<name>.c`` into ``structpos._native_<name>`` when a C
compiler is present (the extensions are ``optional``: without one the install still succeeds).
Every native path has a pure-Python path that gives the same output; the tests run both and
compare them. Set ``STRUCTPOS_PURE_PYTHON=1`` (before import) or use :func:`pure_python` to
run without the native code.

Examples
--------
>>> with pure_python():
...     native_module("probe") is None
True
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["native_module", "native_available", "pure_python"]

_DISABLED = os.environ.get("STRUCTPOS_PURE_PYTHON", "") not in ("", "0")
_CACHE: dict[str, ModuleType | None] = {}


def native_module(name: str) -> ModuleType | None:
    """The compiled module ``structpos._native_<name>``, or ``None`` when it was not built or is switched off.

    Parameters
    ----------
    name : str
        The stem of its source file, ``native/<name>.c``.

    Returns
    -------
    module or None

    Examples
    --------
    >>> native_module("no_such_module") is None
    True
    """
    if _DISABLED:
        return None
    if name not in _CACHE:
        try:
            _CACHE[name] = importlib.import_module(f"structpos._native_{name}")
        except ImportError:
            _CACHE[name] = None
    return _CACHE[name]


def native_available() -> list[str]:
    """The stems of the compiled modules this install has (whether or not they are switched off).

    Examples
    --------
    >>> isinstance(native_available(), list)
    True
    """
    import pkgutil

    import structpos

    prefix = "_native_"
    return sorted(m.name[len(prefix) :] for m in pkgutil.iter_modules(structpos.__path__) if m.name.startswith(prefix))


@contextmanager
def pure_python() -> Iterator[None]:
    """Run the enclosed code on the pure-Python paths (for tests and benchmarks).

    Examples
    --------
    >>> from structpos.parsers.json_tree import parse_json
    >>> with pure_python():
    ...     list(parse_json("[1]").labels)
    ['array', 'number']
    """
    global _DISABLED
    was = _DISABLED
    _DISABLED = True
    try:
        yield
    finally:
        _DISABLED = was
