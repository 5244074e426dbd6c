"""Parsers: one module per input kind, each returning a :class:`~structpos.Structure`.

``parse(obj, kind, **options)`` dispatches by kind through :data:`~structpos.parsers.kinds.PARSERS`
(one :class:`~structpos.parsers.kinds.ParserKind` per kind); the per-kind functions can also be
imported directly. Optional dependencies are imported lazily, with a clear message naming
the extra to install when they are missing.

The contract every parser keeps:

* **Inputs**: every text kind takes ``str``, ``bytes`` or a path (``os.PathLike``; a path
  names the input). Bytes and files are decoded by their byte-order mark, else by what the
  format declares (a PEP 263 line for Python code, an XML declaration, an HTML ``<meta>``
  charset), else in ``default_encoding`` (every text parser's option; default UTF-8), by
  :func:`~structpos.parsers._input.decode_input`, which ``structpos encode`` reads files with
  too; UTF-16/32 without a byte-order mark and a declared codec that is not a text encoding
  are ParseErrors saying so.
* **Errors**: everything a user's input or options can cause raises a
  :class:`~structpos.exceptions.StructposError` — :class:`~structpos.exceptions.ParseError`
  naming the input and the position (``line:col``, ``byte N`` for undecodable bytes,
  ``char N`` for a lone surrogate in ``str`` input, ``node``/``word``/``edge`` numbers),
  :class:`~structpos.exceptions.LimitError` naming the limit,
  :class:`~structpos.exceptions.SpecError` for bad options, and
  :class:`~structpos.exceptions.InputError` naming the accepted types for an input of a type
  the kind does not read (``None``, a number; ``parse(None, "json")`` too, unless
  ``from_object=True`` asks for the JSON value ``null``).
* **Limits**: ``limits=`` (a :class:`~structpos.limits.Limits`, default
  :data:`~structpos.limits.DEFAULT_LIMITS`) bounds the input bytes, the nodes, the table cells
  after span expansion and the graph nodes implied by node ids, checked before the work they
  guard.
* **Labels** always encode as UTF-8: lone surrogates that a format lets through (JSON/YAML
  ``"\\ud800"`` escapes in keys) become U+FFFD in labels; the ``key`` attribute keeps the value
  as the format's reference reader (``json.loads``, PyYAML) returns it.
* **Attributes**: ``Structure.attrs`` holds only the attributes the kind declares
  (``ParserKind.node_attrs``, names and dtypes in :mod:`structpos.node_attrs`), checked by
  :func:`parse` on every result.
* **No silent defaults that change results**: code needs a language (argument, or the suffix
  of the path / name); a table's format comes from the argument, then a known suffix, and
  only then from sniffing the content; networkx edge weights are read from ``weight="weight"``
  unless ``weight=None`` (see :func:`~structpos.parsers.graph.parse_graph`).
"""

from __future__ import annotations

from typing import Any

from .._optional import require
from ..structure import Structure
from .kinds import PARSERS, ParserKind, get_parser

__all__ = ["PARSERS", "ParserKind", "get_parser", "parse", "require"]


def parse(obj: Any, kind: str, **options: Any) -> Structure | list[Structure]:
    """Parse ``obj`` as input of ``kind`` (see :data:`PARSERS`) into a Structure.

    Parameters
    ----------
    obj : str, bytes, os.PathLike or a kind-specific object
        Text, bytes or a file path for every text kind (code, json, xml, yaml, conllu,
        table, document, markdown, grammar); a graph object for ``graph``, a Doc for ``spacy``,
        a DataFrame or rows for ``table``.
    kind : str
        A key of :data:`PARSERS`.
    **options
        Passed to the parser: ``name``, ``limits`` (a :class:`~structpos.limits.Limits`),
        ``language`` for code, ``format`` for tables, ...

    Returns
    -------
    Structure or list of Structure
        (CoNLL-U gives one Structure per sentence.)

    Raises
    ------
    ParseError, LimitError, SpecError
        Bad input (naming the input and position), a limit reached, a bad option.

    Examples
    --------
    >>> parse('{"a": 1}', "json").num_nodes
    3
    """
    parsed = get_parser(kind)(obj, **options)
    return PARSERS[kind].check(parsed)
