"""Declared per-node attributes: the names and dtypes of ``Structure.attrs`` for each input kind.

``Structure.attrs`` maps a name to an ``(N, *shape)`` array. Which names a structure may carry is
declared by its input kind (the :data:`~structpos.parsers.kinds.PARSERS` entry's ``node_attrs``,
a tuple of :class:`~structpos.registry.Column`): the tuples below are the built-in kinds'
declarations, and the name constants are what producers and readers use instead of string
literals (``s.attrs[ROW]``; :func:`table_cells` for the five table arrays with their defaults).

:func:`check_node_attrs` holds a structure to a declaration: every attribute declared, of the
declared dtype and number of dimensions, and every non-optional one present.
:func:`structpos.parse` and the encode pipeline call it on what each registered kind's parser
returns. A kind registered from outside (a :class:`~structpos.parsers.kinds.ParserKind` added to
``PARSERS``) declares its attributes the same way, or leaves ``node_attrs`` at ``None``: its
attributes are then free-form (not checked), as are those of a parser given to ``structpos
encode`` through ``extra_parsers`` (a bare ``"module:function"``, no entry to declare them in).

A declared dtype ``"str"`` means a string per node: a NumPy object array (whose entries may be
``None``, as a JSON key is for a node that has none) or a unicode array.

Examples
--------
>>> import structpos
>>> s = structpos.parse("a,b\\n1,2\\n", "table")
>>> check_node_attrs(s, TABLE_ATTRS, kind="table") is s
True
>>> s.attrs[ROW].tolist()
[-1, -1, 0, 0, -1, 1, 1]
>>> s.attrs["colour"] = s.attrs[ROW]
>>> check_node_attrs(s, TABLE_ATTRS, kind="table")
Traceback (most recent call last):
...
structpos.exceptions.ParseError: <csv>: attribute 'colour' is not declared for input kind 'table' (declared: row, col, rowspan, colspan, header)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .exceptions import StructureError
from .registry import Column
from .structure import Structure

__all__ = [
    "ROW",
    "COL",
    "ROWSPAN",
    "COLSPAN",
    "HEADER",
    "KEY",
    "INDEX",
    "TAG_INDEX",
    "IS_NAMED",
    "IS_ERROR",
    "FIELD",
    "TOKEN_INDEX",
    "HEAD",
    "UPOS",
    "FORM",
    "SENTENCE",
    "PARAGRAPH",
    "TOKEN",
    "SECTION",
    "SECTION_DEPTH",
    "SECTION_PATH",
    "LEVEL",
    "IS_TOKEN",
    "TABLE_ATTRS",
    "TREE_KEY_ATTRS",
    "XML_ATTRS",
    "CODE_ATTRS",
    "CONLLU_ATTRS",
    "SPACY_ATTRS",
    "DOCUMENT_ATTRS",
    "MARKDOWN_ATTRS",
    "GRAMMAR_ATTRS",
    "TableCells",
    "check_node_attrs",
    "has_table_cells",
    "table_cells",
]

# ------------------------------------------------------------------------------ the names
ROW, COL, ROWSPAN, COLSPAN, HEADER = "row", "col", "rowspan", "colspan", "header"
KEY, INDEX = "key", "index"
TAG_INDEX = "tag_index"
IS_NAMED, IS_ERROR, FIELD = "is_named", "is_error", "field"
TOKEN_INDEX, HEAD, UPOS, FORM = "token_index", "head", "upos", "form"
PARAGRAPH, SENTENCE, TOKEN = "paragraph", "sentence", "token"
SECTION, SECTION_DEPTH, SECTION_PATH, LEVEL = "section", "section_depth", "section_path", "level"
IS_TOKEN = "is_token"

# ------------------------------------------------------------------------ the declarations
TABLE_ATTRS = (
    Column(ROW, "int64", (), "grid row of a cell's top-left slot (-1 for table and row nodes)"),
    Column(COL, "int64", (), "grid column of a cell's top-left slot (-1 for table and row nodes)"),
    Column(ROWSPAN, "int64", (), "grid rows the cell covers (-1 for non-cells)"),
    Column(COLSPAN, "int64", (), "grid columns the cell covers (-1 for non-cells)"),
    Column(HEADER, "int64", (), "1 for a header cell, 0 for another cell, -1 for non-cells"),
)
"""Tables (CSV, TSV, HTML, DataFrames)."""

TREE_KEY_ATTRS = (
    Column(KEY, "str", (), "the member's key (None for a node that is not a member)"),
    Column(INDEX, "int64", (), "position in the enclosing array (-1 outside arrays)"),
)
"""JSON and YAML trees."""

XML_ATTRS = (Column(TAG_INDEX, "int64", (), "1-based position among same-tag siblings (0 for non-elements)"),)
"""XML trees."""

CODE_ATTRS = (
    Column(IS_NAMED, "bool", (), "tree-sitter named node"),
    Column(IS_ERROR, "bool", (), "an ERROR node or a zero-width MISSING node"),
    Column(FIELD, "str", (), "field name under the tree-sitter parent ('' if none); with fields=True", optional=True),
)
"""Source code through tree-sitter."""

CONLLU_ATTRS = (
    Column(TOKEN_INDEX, "int64", (), "the original 1-based word id"),
    Column(HEAD, "int64", (), "the original 1-based head id, 0 for the root"),
    Column(UPOS, "str", (), "universal part of speech"),
    Column(FORM, "str", (), "word form"),
)
"""CoNLL-U dependency trees (the DEPREL is the node label)."""

SPACY_ATTRS = (
    Column(TOKEN_INDEX, "int64", (), "spaCy's 0-based token.i"),
    Column(HEAD, "int64", (), "token.head.i (equal to token_index for a root)"),
    Column(SENTENCE, "int64", (), "0-based sentence number"),
    Column(UPOS, "str", (), "token.pos_ ('' when unset)"),
)
"""spaCy Docs (the dependency label is the node label)."""

_SECTION_ATTRS = (
    Column(SECTION, "int64", (), "ordinal of the innermost enclosing section (-1 outside); with sections", True),
    Column(SECTION_DEPTH, "int64", (), "number of enclosing sections; with sections", True),
    Column(SECTION_PATH, "int64", ("D",), "sibling ordinals of the enclosing sections, -1-padded; with sections", True),
)

DOCUMENT_ATTRS = (
    Column(PARAGRAPH, "int64", (), "ordinal of the enclosing block (-1 outside blocks)"),
    Column(SENTENCE, "int64", (), "ordinal of the enclosing sentence in its block (-1 outside)"),
    Column(TOKEN, "int64", (), "ordinal of a token in its sentence (-1 for non-tokens)"),
)
"""Plain-text documents (see :mod:`structpos.coords.hierarchy` for the ids)."""

MARKDOWN_ATTRS = (
    *DOCUMENT_ATTRS,
    *_SECTION_ATTRS,
    Column(LEVEL, "int64", (), "heading level of a section (0 for other nodes)"),
)
"""Markdown documents."""

GRAMMAR_ATTRS = (Column(IS_TOKEN, "bool", (), "a lark token (a leaf), not a rule"),)
"""Text parsed by a lark grammar."""


# ------------------------------------------------------------------------------ the check
def _dtype_fits(dtype: np.dtype, declared: str) -> bool:
    if declared == "str":
        return dtype.kind in "OU"
    return dtype == np.dtype(declared)


def check_node_attrs(structure: Structure, declared: Sequence[Column], *, kind: str) -> Structure:
    """Hold ``structure.attrs`` to a declaration; return the structure.

    Parameters
    ----------
    structure : Structure
        What a parser returned.
    declared : sequence of Column
        The input kind's declared attributes (``ParserKind.node_attrs``).
    kind : str
        The input kind, for the message.

    Returns
    -------
    Structure
        ``structure``, unchanged.

    Raises
    ------
    ParseError
        An attribute that is not declared, of another dtype or number of dimensions, or a
        non-optional declared attribute that is missing.

    Examples
    --------
    >>> s = Structure("tree", ["a", "b"], parent=[-1, 0], attrs={"is_token": [False, True]})
    >>> check_node_attrs(s, GRAMMAR_ATTRS, kind="grammar").attrs[IS_TOKEN].tolist()
    [False, True]
    >>> check_node_attrs(Structure("tree", ["a"], attrs={"is_token": [1]}), GRAMMAR_ATTRS, kind="grammar")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <input>: attribute 'is_token' has dtype int64 and 1 dimension(s); input kind 'grammar' declares bool with 1
    """
    by_name = {c.name: c for c in declared}
    for key, values in structure.attrs.items():
        column = by_name.get(key)
        if column is None:
            names = ", ".join(by_name) or "none"
            raise StructureError(
                f"attribute {key!r} is not declared for input kind {kind!r} (declared: {names})", name=structure.name
            )
        ndim = 1 + len(column.shape)
        if not _dtype_fits(values.dtype, column.dtype) or values.ndim != ndim:
            raise StructureError(
                f"attribute {key!r} has dtype {values.dtype} and {values.ndim} dimension(s); "
                f"input kind {kind!r} declares {column.dtype} with {ndim}",
                name=structure.name,
            )
    missing = [c.name for c in declared if not c.optional and c.name not in structure.attrs]
    if missing:
        raise StructureError(
            f"declared attribute(s) {', '.join(missing)} missing for input kind {kind!r}", name=structure.name
        )
    return structure


# ------------------------------------------------------------------------ named accessors
class TableCells(NamedTuple):
    """The five table arrays of :data:`TABLE_ATTRS` (int64, one entry per node; see :func:`table_cells`).

    Examples
    --------
    >>> import structpos
    >>> t = table_cells(structpos.parse("a,b\\n1,2\\n", "table"))
    >>> t.col[t.is_cell].tolist(), t.header[t.is_cell].tolist()
    ([0, 1, 0, 1], [1, 1, 0, 0])
    """

    row: np.ndarray
    col: np.ndarray
    rowspan: np.ndarray
    colspan: np.ndarray
    header: np.ndarray

    @property
    def is_cell(self) -> np.ndarray:
        """Nodes with a grid slot (``row >= 0`` and ``col >= 0``)."""
        return (self.row >= 0) & (self.col >= 0)


def has_table_cells(structure: Structure) -> bool:
    """Whether ``structure`` carries the ``row`` and ``col`` attributes of a table.

    Examples
    --------
    >>> has_table_cells(Structure("table", ["t"], attrs={"row": [-1], "col": [-1]}))
    True
    """
    return ROW in structure.attrs and COL in structure.attrs


def table_cells(structure: Structure, *, needed_by: str = "table coordinates") -> TableCells:
    """The table arrays of ``structure``; a missing span or header takes its default.

    The defaults: ``rowspan``/``colspan`` 1 for cells and -1 elsewhere, ``header`` 0 for cells
    and -1 elsewhere (what the table parsers write for a plain cell).

    Parameters
    ----------
    structure : Structure
        A table (with ``row`` and ``col`` attributes).
    needed_by : str, optional
        What needs them, for the error message.

    Returns
    -------
    TableCells
        ``row, col, rowspan, colspan, header`` as int64 arrays.

    Raises
    ------
    ParseError
        ``structure`` has no ``row`` or no ``col`` attribute.

    Examples
    --------
    >>> t = table_cells(Structure("table", ["t", "c"], attrs={"row": [-1, 0], "col": [-1, 2]}))
    >>> t.rowspan.tolist(), t.header.tolist(), t.is_cell.tolist()
    ([-1, 1], [-1, 0], [False, True])
    >>> table_cells(Structure("tree", ["a"]), needed_by="grid layout")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <input>: grid layout needs 'row' and 'col' attributes
    """
    if not has_table_cells(structure):
        raise StructureError(f"{needed_by} needs {ROW!r} and {COL!r} attributes", name=structure.name)
    attrs = structure.attrs
    row = np.asarray(attrs[ROW], dtype=np.int64)
    col = np.asarray(attrs[COL], dtype=np.int64)
    is_cell = (row >= 0) & (col >= 0)

    def read(key: str, cell: int) -> np.ndarray:
        return np.asarray(attrs[key] if key in attrs else np.where(is_cell, cell, -1), dtype=np.int64)

    return TableCells(row, col, read(ROWSPAN, 1), read(COLSPAN, 1), read(HEADER, 0))
