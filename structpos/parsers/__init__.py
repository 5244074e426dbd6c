"""Parsers: one module per input kind, each returning a :class:`~structpos.Structure`.

``parse(obj, kind, **options)`` dispatches by kind; the per-kind functions can also be
imported directly. Optional dependencies are imported lazily, with a clear message naming
the extra to install when they are missing.

The contract every parser keeps:

* **Inputs**: every text kind takes ``str``, ``bytes`` or a path (``os.PathLike``; a path
  names the input). Bytes and files are decoded by their byte-order mark, else by what the
  format declares (a PEP 263 line for Python code, an XML declaration), else as UTF-8, by
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
* **No silent defaults that change results**: code needs a language (argument, or the suffix
  of the path / name); a table's format comes from the argument, then a known suffix, and
  only then from sniffing the content; networkx edge weights are read from ``weight="weight"``
  unless ``weight=None`` (see :func:`~structpos.parsers.graph.parse_graph`).
"""

from __future__ import annotations

import importlib
from typing import Any

from ..exceptions import SpecError
from ..structure import Structure

# kind -> (module, function)
PARSERS: dict[str, tuple[str, str]] = {
    "code": ("code", "parse_code"),
    "json": ("json_tree", "parse_json"),
    "xml": ("xml_tree", "parse_xml"),
    "yaml": ("yaml_tree", "parse_yaml"),
    "conllu": ("conllu_tree", "parse_conllu"),
    "spacy": ("spacy_doc", "parse_spacy"),
    "table": ("table", "parse_table"),
    "document": ("document", "parse_document"),
    "markdown": ("markdown", "parse_markdown"),
    "grammar": ("grammar", "parse_grammar"),
    "graph": ("graph", "parse_graph"),
}


def get_parser(kind: str):
    """The parse function registered for ``kind`` in :data:`PARSERS`, imported on first use.

    Parameters
    ----------
    kind : str
        An input kind: a key of :data:`PARSERS` (``"code"``, ``"json"``, ``"table"``, ...).

    Returns
    -------
    callable
        The kind's parse function (e.g. :func:`~structpos.parsers.json_tree.parse_json`).

    Raises
    ------
    SpecError
        ``kind`` is not a known input kind (the message lists the known ones).

    Examples
    --------
    >>> get_parser("json").__name__
    'parse_json'
    >>> get_parser("jsn")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: unknown input kind 'jsn'; known kinds: code, conllu, document, grammar, graph, json, markdown, spacy, table, xml, yaml
    """
    try:
        mod, fn = PARSERS[kind]
    except KeyError:
        raise SpecError(f"unknown input kind {kind!r}; known kinds: {', '.join(sorted(PARSERS))}") from None
    return getattr(importlib.import_module(f"{__name__}.{mod}"), fn)


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
    return get_parser(kind)(obj, **options)


def require(module: str, extra: str, what: str):
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
