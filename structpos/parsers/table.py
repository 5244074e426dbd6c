"""Tables (kind ``"table"``): CSV/TSV text or files, HTML text or files, DataFrames, row lists.

:func:`parse_table` picks the front end; all share one layout (see
:mod:`structpos.parsers._table_build`): node 0 the table, then each row followed by its cells
in preorder, attributes ``row``, ``col``, ``rowspan``, ``colspan``, ``header`` (``-1`` on
table/row nodes), spans = character offsets of each cell's content in ``source``, the cell
texts in ``structure.node_texts`` and the expanded grid of texts in ``structure.table.grid``.
Use :func:`structpos.coords.table.cell_grid` for the ``R × C`` grid of cell node ids.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..exceptions import SpecError
from ..limits import Limits
from ..structure import Structure
from ._input import HTML_TABLE_HINT, TABLE_SUFFIX_FORMATS, decode_input, decoding_kind, read_bytes, wrong_type
from .table_csv import parse_csv_table
from .table_frame import parse_dataframe, parse_rows
from .table_html import parse_html_table, parse_html_tables

__all__ = ["parse_table", "parse_html_tables", "cell_text", "detect_format"]

_EXT_FORMAT = TABLE_SUFFIX_FORMATS
_HTML_HINT = re.compile(HTML_TABLE_HINT, re.IGNORECASE)


def _read(path: Path, name: str, fmt: str, limits: Limits | None, default_encoding: str | None) -> str:
    """The file's text, byte for byte (``\\r\\n`` kept: spans index the exact text).

    UTF-8 unless a BOM, (HTML) a ``<meta>`` charset or ``default_encoding`` says otherwise.
    """
    return decode_input(read_bytes(path, name, limits), name, decoding_kind("table", fmt), None, default_encoding)


def _suffix_format(obj: Any) -> str | None:
    """The format a known file suffix names (``.csv``, ``.tsv``, ``.tab``, ``.html``, ``.htm``), else None."""
    if obj is None:
        return None
    try:
        return _EXT_FORMAT.get(Path(obj).suffix.lower())
    except (TypeError, ValueError):
        return None


def detect_format(obj: Any, name: str | None = None) -> str:
    """The table format of ``obj``: a path's suffix, else ``name``'s suffix, else the object's type, else content.

    A known suffix always wins over content sniffing (a ``.csv`` whose cells contain
    ``<table`` is CSV); only text with neither is sniffed (``<table`` → HTML, else CSV).

    Parameters
    ----------
    obj : str, os.PathLike, DataFrame or list of rows
        What :func:`parse_table` is given.
    name : str, optional
        The input's name; its suffix (``.csv``, ``.tsv``, ``.tab``, ``.html``, ``.htm``)
        names the format of text input.

    Returns
    -------
    str
        ``"csv"``, ``"tsv"``, ``"html"``, ``"dataframe"`` or ``"rows"``.

    Raises
    ------
    InputError
        ``obj`` is of no table type (naming the types accepted).

    Examples
    --------
    >>> detect_format("a,<table>", name="cells.csv"), detect_format("<table><tr><td>x</table>")
    ('csv', 'html')
    >>> detect_format([["a", 1]]), detect_format("a\\tb", name="t.tab")
    ('rows', 'tsv')
    """
    if isinstance(obj, (str, os.PathLike)) and _looks_like_path(obj):
        return _suffix_format(obj) or "csv"
    if isinstance(obj, str):
        by_name = _suffix_format(name)
        if by_name is not None:
            return by_name
        return "html" if _HTML_HINT.search(obj) else "csv"
    if hasattr(obj, "to_csv") and hasattr(obj, "columns"):
        return "dataframe"
    if isinstance(obj, (list, tuple)):
        return "rows"
    raise wrong_type(obj, name or "<table>", "str, bytes, a path, a DataFrame or a list of rows")


def _looks_like_path(obj: Any) -> bool:
    if isinstance(obj, os.PathLike):
        return True
    return (
        isinstance(obj, str)
        and "\n" not in obj
        and len(obj) < 4096
        and Path(obj).suffix.lower() in _EXT_FORMAT
        and Path(obj).is_file()
    )


def parse_table(
    obj: Any,
    format: str | None = None,
    name: str | None = None,
    header: bool | str | None = None,
    *,
    delimiter: str | None = None,
    quotechar: str | None = "auto",
    escapechar: str | None = None,
    table: int = 0,
    displayed_only: bool = True,
    index: bool = False,
    limits: Limits | None = None,
    default_encoding: str | None = None,
) -> Structure:
    """Parse a table (CSV/TSV, HTML, a DataFrame or rows) into a Structure of kind ``"table"``.

    Format detection (:func:`detect_format`): an explicit ``format`` wins, then the suffix of a
    path, then the suffix of ``name``, then the type (DataFrame, list of rows), and only then
    the content (text containing ``<table`` is HTML, else CSV).

    Parameters
    ----------
    obj : str, bytes, os.PathLike, pandas.DataFrame or list of rows
        CSV/TSV/HTML text or bytes, a path to a ``.csv``/``.tsv``/``.tab``/``.html``/``.htm``
        file, a DataFrame, or a list of rows.
    format : {"csv", "tsv", "html", "dataframe", "rows"}, optional
        Overrides detection.
    name : str, optional
        The input's name in error messages (default: the path, else ``"<csv>"``, ``"<html>"``...).
    header : bool or "auto", optional
        ``True``: the first row is the header (default for CSV, rows, DataFrames); ``False``;
        ``"auto"``: CSV by :func:`~structpos.parsers.table_csv.sniff_header`, HTML (its
        default) ``<thead>`` rows or leading all-``<th>`` rows.
    delimiter : str, optional
        Default ``,`` (``\\t`` for TSV).
    quotechar : str or None
        Default ``"`` for CSV and ``None`` (no quoting) for TSV, as the IANA TSV format has
        no quoting.
    escapechar : str, optional
        As in :mod:`csv` (WikiTableQuestions CSVs need ``"\\"``).
    table : int
        HTML: which top-level table.
    displayed_only : bool
        HTML: leave ``display:none`` content out of cell text.
    index : bool
        DataFrame: include the index as leading column(s).
    limits : Limits, optional
        ``max_input_bytes``, ``max_nodes``, ``max_table_cells`` (grid slots after span
        expansion); default :data:`~structpos.limits.DEFAULT_LIMITS`.
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    Structure
        ``kind="table"``: node 0 the table, then each row followed by its cells (layout in
        the module docstring), ``structure.table`` with the expanded grid.

    Raises
    ------
    ParseError
        Malformed CSV/HTML, bytes that do not decode (naming the position).
    SpecError
        An unknown ``format`` or a bad option.
    LimitError
        ``max_input_bytes``, ``max_nodes`` or ``max_table_cells`` exceeded.
    InputError
        ``obj`` is of no table type (naming the types accepted).

    Examples
    --------
    >>> s = parse_table('q,n\\n"say ""hi"" now",2\\n')
    >>> [str(l) for l in s.labels], s.attrs["row"].tolist(), s.attrs["col"].tolist()
    (['table', 'row', 'header', 'header', 'row', 'cell', 'cell'], [-1, -1, 0, 0, -1, 1, 1], [-1, -1, 0, 1, -1, 0, 1])
    >>> s.table.grid
    [['q', 'n'], ['say "hi" now', '2']]
    >>> s = parse_table("x,<table>\\n1,2\\n", name="t.csv")  # the suffix wins over the content
    >>> s.format, s.table.n_cols
    ('csv', 2)
    >>> parse_table("a,b", format="xlsx")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: unknown table format 'xlsx'; known: csv, tsv, html, dataframe, rows
    """
    if isinstance(obj, (bytes, bytearray, memoryview)):
        obj = decode_input(bytes(obj), name or "<table>", decoding_kind("table", format), None, default_encoding)
    if format is None:
        format = detect_format(obj, name)
    format = format.lower()
    if format in ("csv", "tsv", "html") and _looks_like_path(obj):
        name = name or str(obj)
        obj = _read(Path(obj), name, format, limits, default_encoding)
    if format == "dataframe":
        return parse_dataframe(
            obj, name=name or "<dataframe>", header=True if header is None else header, index=index, limits=limits
        )
    if format == "rows":
        return parse_rows(obj, name=name or "<rows>", header=True if header is None else header, limits=limits)
    if not isinstance(obj, str):
        raise wrong_type(obj, name or f"<{format}>", "text, bytes or a path")
    if format == "html":
        return parse_html_table(
            obj,
            name=name or "<html>",
            header="auto" if header is None else header,
            table=table,
            displayed_only=displayed_only,
            limits=limits,
        )
    if format in ("csv", "tsv"):
        sep = delimiter or ("\t" if format == "tsv" else ",")
        if quotechar == "auto":
            quotechar = None if format == "tsv" else '"'
        return parse_csv_table(
            obj,
            name=name or f"<{format}>",
            header=True if header is None else header,
            delimiter=sep,
            quotechar=quotechar,
            escapechar=escapechar,
            fmt=format,
            limits=limits,
        )
    raise SpecError(f"unknown table format {format!r}; known: csv, tsv, html, dataframe, rows")


def cell_text(structure: Structure, i: int) -> str | None:
    """The text of cell node ``i`` (decoded CSV value / visible HTML text), ``None`` for non-cells.

    Unlike ``structure.node_text(i)`` (the raw slice of the source), this is the value:
    CSV quotes undone, HTML tags and entities resolved.

    Parameters
    ----------
    structure : Structure
        A table Structure (:func:`parse_table`).
    i : int
        A node index.

    Returns
    -------
    str or None
        The cell's text; ``None`` for the table and row nodes.

    Examples
    --------
    >>> s = parse_table('q\\n"say ""hi"" now"\\n')
    >>> cell_text(s, 4), s.node_text(4), cell_text(s, 0)
    ('say "hi" now', 'say ""hi"" now', None)
    >>> cell_text(parse_table("<table><tr><td>a &amp; <b>b</b></td></tr></table>"), 2)
    'a & b'
    """
    return None if structure.node_texts is None else structure.node_texts[i]
