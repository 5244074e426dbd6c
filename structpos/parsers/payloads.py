"""Payload adapters: a record's payload that is not the parser's own input type, made into one.

A record of ``structpos encode`` (a JSONL line, a Parquet row, an HF batch row) may carry a JSON
value rather than text. An input kind's :class:`~structpos.parsers.kinds.ParserKind` names the
adapter that turns such a payload into a call of its parser, ``adapt(fn, payload, options, name)``;
kinds without one call ``fn(payload, **options)``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..exceptions import ParseError

__all__ = ["call_plain", "json_payload", "graph_payload", "option_names"]


def option_names(fn: Callable[..., Any]) -> set[str] | None:
    """The keyword options ``fn`` takes after its input (``name`` and ``limits`` aside), or ``None`` for ``**kwargs``.

    Parameters
    ----------
    fn : callable
        A parser, ``fn(input, **options)``.

    Returns
    -------
    set of str or None

    Examples
    --------
    >>> sorted(option_names(lambda text, name="", limits=None, depth=2, *, strict=False: None))
    ['depth', 'strict']
    >>> option_names(lambda text, **kw: None) is None
    True
    """
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    names = {p.name for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names - {"name", "limits"}


def call_plain(fn: Callable[..., Any], payload: Any, options: Mapping[str, Any], name: str) -> Any:
    """``fn(payload, **options)``: the adapter of kinds that take the payload as it is.

    Parameters
    ----------
    fn : callable
        The parser.
    payload : object
        The record's payload.
    options : mapping
        The parser's keyword arguments.
    name : str
        The record (unused: the parser names it through ``options``).

    Returns
    -------
    Structure or list of Structure

    Examples
    --------
    >>> call_plain(lambda text, n=1: text * n, "ab", {"n": 2}, "r")
    'abab'
    """
    return fn(payload, **options)


def json_payload(fn: Callable[..., Any], payload: Any, options: Mapping[str, Any], name: str) -> Any:
    """A JSON value that is not text (a JSONL ``"text": {...}``) is serialized first, so spans index text.

    Parameters
    ----------
    fn : callable
        The parser.
    payload : object
        Text, bytes, or a JSON value.
    options : mapping
        The parser's keyword arguments.
    name : str
        The record.

    Returns
    -------
    Structure

    Examples
    --------
    >>> json_payload(lambda text: text, {"a": [1]}, {}, "r")
    '{"a": [1]}'
    """
    if not isinstance(payload, (str, bytes)):
        payload = json.dumps(payload)
    return fn(payload, **options)


def graph_payload(fn: Callable[..., Any], payload: Any, options: Mapping[str, Any], name: str) -> Any:
    """A graph object ``{"edge_index": [[src...], [dst...]], **options}``: its other keys are parser options.

    Everything wrong with the object is a :class:`~structpos.exceptions.ParseError` naming the record
    (as ``parse(edge_index, "graph")`` raises); a payload that is not a mapping goes to ``fn`` as it is.

    Parameters
    ----------
    fn : callable
        The parser (:func:`~structpos.parsers.graph.parse_graph`).
    payload : object
        The graph object, or what ``fn`` takes directly.
    options : mapping
        The parser's keyword arguments (they win over the object's keys).
    name : str
        The record, for errors.

    Returns
    -------
    Structure

    Raises
    ------
    ParseError
        No ``edge_index``, a key the parser does not take, or a value of the wrong type.

    Examples
    --------
    >>> from structpos.parsers.graph import parse_graph
    >>> graph_payload(parse_graph, {"edge_index": [], "num_nodes": 3}, {}, "g").num_nodes
    3
    >>> graph_payload(parse_graph, {"edge_index": [[0], [1]], "colour": 1}, {}, "g")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: g: graph payload object: unknown key 'colour' (known: edge_index, ...)
    """
    if not isinstance(payload, Mapping):
        return fn(payload, **options)
    payload = dict(payload)
    if "edge_index" not in payload:
        raise ParseError(
            "a graph payload object needs an 'edge_index' entry "
            '(graph JSONL records: {"text": {"edge_index": [[src, ...], [dst, ...]], '
            '"num_nodes": n}})',
            name=name,
        )
    edge_index = payload.pop("edge_index")
    if isinstance(edge_index, (list, tuple)) and len(edge_index) == 0:
        edge_index = np.zeros((2, 0), dtype=np.int64)  # no edges: isolated nodes (num_nodes says how many)
    known = option_names(fn)
    unknown = [] if known is None else sorted(set(payload) - known)
    if known is not None and unknown:
        listed = ", ".join(["edge_index", *sorted(known)])
        raise ParseError(f"graph payload object: unknown key {unknown[0]!r} (known: {listed})", name=name)
    try:
        return fn(edge_index, **{**payload, **options})
    except (TypeError, OverflowError) as e:  # a key of the wrong type
        raise ParseError(f"graph payload object: {e}", name=name) from None
