"""Parser dispatch: the parse function of a record's kind, called with the hints it takes.

A kind is a :data:`~structpos.parsers.kinds.PARSERS` entry, or one of the run's
``extra_parsers`` (``{kind: "module:function"}``, which win over a built-in kind of that name).
The record's name, format, limits and code language go to the parsers whose signature takes
them; the payload reaches the parser through the kind's payload adapter (a JSON value for
``json`` is serialized, a graph object for ``graph`` is unpacked; see
:mod:`structpos.parsers.payloads`). What a registered kind's parser returns is held to its
declared node attributes (:meth:`~structpos.parsers.kinds.ParserKind.check`), as
:func:`structpos.parse` does.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import SpecError
from ..limits import DEFAULT_LIMITS, Limits
from ..parsers.kinds import PARSERS, get_parser
from ..parsers.payloads import call_plain

__all__ = ["load_parser", "parser_for", "parser_accepts", "parse_payload"]


def load_parser(target: str) -> Callable[..., Any]:
    """The function named by ``"module:function"`` (a parser from outside structpos).

    Parameters
    ----------
    target : str
        ``"module:function"``; the module is imported.

    Returns
    -------
    callable

    Raises
    ------
    SpecError
        Not of the form ``module:function``, or the module or function cannot be found.

    Examples
    --------
    >>> load_parser("json:loads")("[1]")
    [1]
    """
    module, sep, name = target.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name) if sep else None
    except (ImportError, AttributeError) as e:
        raise SpecError(f"cannot load parser {target!r}: {e}", name="extra_parsers") from None
    if not callable(fn):
        raise SpecError(f"{target!r} is not 'module:function'", name="extra_parsers")
    return fn


def parser_for(kind: str, extra_parsers: Mapping[str, str] | None = None) -> Callable[..., Any]:
    """The parse function of ``kind``: the run's ``extra_parsers`` first, then :data:`~structpos.parsers.kinds.PARSERS`.

    An unknown kind, or an extra parser that does not import, is a
    :class:`~structpos.exceptions.SpecError` (:func:`load_parser`, :func:`~structpos.parsers.kinds.get_parser`).

    Examples
    --------
    >>> parser_for("json").__name__, parser_for("json", {"json": "json:loads"}).__name__
    ('parse_json', 'loads')
    """
    if extra_parsers and kind in extra_parsers:
        return load_parser(extra_parsers[kind])
    return get_parser(kind)


_ACCEPTS: dict[tuple[Callable[..., Any], str], bool] = {}


def parser_accepts(fn: Callable[..., Any], arg: str, *, declared: bool = False) -> bool:
    """Whether ``fn`` takes the keyword ``arg`` (by name, or through ``**kwargs`` unless ``declared``).

    Cached per function (not per kind: an ``extra_parsers`` override of a kind has its own answer).

    Parameters
    ----------
    fn : callable
        A parser.
    arg : str
        The keyword.
    declared : bool, optional
        Only an explicitly named parameter counts.

    Returns
    -------
    bool

    Examples
    --------
    >>> parser_accepts(lambda text, **kw: None, "format"), parser_accepts(lambda text, **kw: None, "language", declared=True)
    (True, False)
    """
    key = (fn, f"{arg}:{declared}")
    if key not in _ACCEPTS:
        try:
            params = inspect.signature(fn).parameters
            var_kw = not declared and any(p.kind is p.VAR_KEYWORD for p in params.values())
            _ACCEPTS[key] = arg in params or var_kw
        except (TypeError, ValueError):
            _ACCEPTS[key] = False
    return _ACCEPTS[key]


def parse_payload(
    payload: Any,
    kind: str,
    name: str,
    language: str | None = None,
    fmt: str | None = None,
    options: Mapping[str, Any] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    extra_parsers: Mapping[str, str] | None = None,
) -> Any:
    """Call the parser of ``kind`` on a record's payload, with the record's name, language and format hints.

    Parameters
    ----------
    payload : object
        The record's payload.
    kind : str
        The input kind.
    name : str
        The record (passed as ``name=`` to parsers that take it).
    language, fmt : str, optional
        The code language (to parsers with a ``language`` parameter) and the file format
        (to parsers that take ``format``).
    options : mapping, optional
        More parser keyword arguments (they win over the hints).
    limits : Limits, optional
        Per-record limits (to parsers that take ``limits``).
    extra_parsers : mapping of str to str, optional
        ``{kind: "module:function"}``.

    Returns
    -------
    Structure or list of Structure

    Examples
    --------
    >>> parse_payload({"a": [1]}, "json", "r1").num_nodes
    4
    >>> parse_payload("abc", "toy", "r1", extra_parsers={"toy": "builtins:len"})
    3
    """
    fn = parser_for(kind, extra_parsers)
    kw = dict(options or {})
    if parser_accepts(fn, "name"):
        kw.setdefault("name", name)
    if language is not None and parser_accepts(fn, "language", declared=True):
        kw.setdefault("language", language)
    if fmt is not None and parser_accepts(fn, "format"):
        kw.setdefault("format", fmt)
    if limits is not DEFAULT_LIMITS and parser_accepts(fn, "limits"):
        kw.setdefault("limits", limits)
    adapt = PARSERS[kind].adapter() if kind in PARSERS else call_plain
    parsed = adapt(fn, payload, kw, name)
    if kind in PARSERS and not (extra_parsers and kind in extra_parsers):  # an override is not the entry's parser
        PARSERS[kind].check(parsed)
    return parsed
