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

from ..structure import Structure, StructureError
from .table_csv import parse_csv_table
from .table_frame import parse_dataframe, parse_rows
from .table_html import parse_html_table, parse_html_tables

__all__ = ["parse_table", "parse_html_tables", "cell_text"]

_EXT_FORMAT = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".html": "html", ".htm": "html"}
_HTML_HINT = re.compile(r"<\s*table\b", re.IGNORECASE)


def _read(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", newline="") as f:  # keep \r\n: spans index the exact text
            return f.read()
    except UnicodeDecodeError as e:
        raise StructureError(f"not UTF-8 text ({e.reason})", name=str(path), position=f"byte {e.start}") from None


def _looks_like_path(obj: Any) -> bool:
    if isinstance(obj, os.PathLike):
        return True
    return isinstance(obj, str) and "\n" not in obj and len(obj) < 4096 and Path(obj).suffix.lower() in _EXT_FORMAT and Path(obj).is_file()


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
) -> Structure:
    """Parse a table into a Structure of kind ``"table"``.

    ``obj``: CSV/TSV/HTML text, a path to a ``.csv``/``.tsv``/``.html`` file, a pandas
    DataFrame, or a list of rows. ``format`` (``"csv"``, ``"tsv"``, ``"html"``, ``"dataframe"``,
    ``"rows"``) overrides detection (extension; text containing ``<table`` is HTML, else CSV).
    ``header``: ``True`` (first row is the header; default for CSV/DataFrame), ``False``,
    or ``"auto"`` (CSV: :func:`~structpos.parsers.table_csv.sniff_header`; HTML, the default:
    ``<thead>`` rows or leading all-``<th>`` rows). ``delimiter`` defaults to ``,`` (``\\t``
    for TSV); ``quotechar`` defaults to ``"`` for CSV and to ``None`` (no quoting) for TSV, as
    the IANA TSV format has no quoting; ``escapechar`` as in :mod:`csv` (WikiTableQuestions
    CSVs need ``"\\"``). HTML: ``table`` picks the top-level table, ``displayed_only`` leaves
    ``display:none`` content out of cell text. ``index`` includes a DataFrame's index.
    """
    if format is None:
        if isinstance(obj, (str, os.PathLike)) and _looks_like_path(obj):
            format = _EXT_FORMAT.get(Path(obj).suffix.lower(), "csv")
        elif hasattr(obj, "to_csv") and hasattr(obj, "columns"):
            format = "dataframe"
        elif isinstance(obj, (list, tuple)):
            format = "rows"
        elif isinstance(obj, str):
            format = "html" if _HTML_HINT.search(obj) else "csv"
        else:
            raise TypeError(f"cannot parse a table from {type(obj).__name__}")
    format = format.lower()
    if format in ("csv", "tsv", "html") and _looks_like_path(obj):
        name = name or str(obj)
        obj = _read(Path(obj))
    if format == "dataframe":
        return parse_dataframe(obj, name=name or "<dataframe>", header=True if header is None else header, index=index)
    if format == "rows":
        return parse_rows(obj, name=name or "<rows>", header=True if header is None else header)
    if not isinstance(obj, str):
        raise TypeError(f"{format} input must be text or a path, not {type(obj).__name__}")
    if format == "html":
        return parse_html_table(
            obj, name=name or "<html>", header="auto" if header is None else header, table=table, displayed_only=displayed_only
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
        )
    raise ValueError(f"unknown table format {format!r}; known: csv, tsv, html, dataframe, rows")


def cell_text(structure: Structure, i: int) -> str | None:
    """The text of cell node ``i`` (decoded CSV value / visible HTML text), ``None`` for non-cells."""
    return None if structure.node_texts is None else structure.node_texts[i]
