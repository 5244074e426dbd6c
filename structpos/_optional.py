"""Optional dependencies: import one, or say which ``structpos[extra]`` installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import an optional dependency, or raise an ImportError naming the pip extra that installs it.

    Parameters
    ----------
    module : str
        The module to import (``"yaml"``, ``"tree_sitter"``, ...).
    extra : str
        The ``structpos[extra]`` that installs it.
    what : str
        The feature that needs it, for the message (``"parse_yaml"``).

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    ImportError
        The module is not installed; the message says what needs it and how to install it.

    Examples
    --------
    >>> require("math", "core", "sqrt").sqrt(16.0)
    4.0
    >>> require("no_such_module_xyz", "text", "parse_foo")
    Traceback (most recent call last):
    ...
    ImportError: parse_foo needs the optional dependency 'no_such_module_xyz': pip install 'structpos[text]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:  # pragma: no cover - depends on environment
        raise ImportError(f"{what} needs the optional dependency {module!r}: pip install 'structpos[{extra}]'") from e
