"""pandas DataFrames (and lists of rows) as tables: synthesize CSV source, point into it.

The frame is written with :meth:`pandas.DataFrame.to_csv` (so cell text is exactly what pandas
prints: ``NaN`` → empty, numbers in pandas' formatting); the structure's ``source`` is that CSV
text and every span points into it. Column labels form the header rows (one per column level
of a MultiIndex); ``index=True`` adds the index as leading column(s).
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any, Sequence

from ..exceptions import ParseError
from ..limits import Limits
from ..structure import Structure
from ._input import wrong_type
from .table_csv import parse_csv_table

__all__ = ["parse_dataframe", "parse_rows"]


def parse_dataframe(
    df: Any, *, name: str = "<dataframe>", header: bool | str = True, index: bool = False, limits: Limits | None = None
) -> Structure:
    """A DataFrame as a table Structure whose source is its CSV rendering.

    Parameters
    ----------
    df : pandas.DataFrame
        The frame; cell text is what :meth:`~pandas.DataFrame.to_csv` writes (``NaN`` →
        empty, numbers in pandas' formatting).
    name : str
        The table's name in error messages.
    header : bool
        Write the column labels as header rows (one per level of a MultiIndex).
    index : bool
        Include the index as leading column(s).
    limits : Limits, optional
        ``max_input_bytes``, ``max_nodes`` and ``max_table_cells`` apply.

    Returns
    -------
    Structure
        ``kind="table"``, ``format="dataframe"``; ``source`` is the CSV text (``\\r\\n``
        line ends) and every span points into it.

    Raises
    ------
    InputError
        ``df`` is not a DataFrame.
    LimitError
        ``max_input_bytes``, ``max_nodes`` or ``max_table_cells`` exceeded.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"city": ["Oslo", "Rome"], "t": [4.5, None]})
    >>> s = parse_dataframe(df)
    >>> s.source
    'city,t\\r\\nOslo,4.5\\r\\nRome,\\r\\n'
    >>> s.table.grid, s.table.header_rows
    ([['city', 't'], ['Oslo', '4.5'], ['Rome', '']], 1)
    >>> columns = pd.MultiIndex.from_tuples([("a", "x"), ("a", "y")])
    >>> parse_dataframe(pd.DataFrame([[1, 2]], columns=columns)).table.header_rows  # one per level
    2
    """
    if not (hasattr(df, "to_csv") and hasattr(df, "columns")):
        raise wrong_type(df, name, "a pandas DataFrame")
    text = df.to_csv(index=index, header=bool(header), lineterminator="\r\n")  # \r\n: fields with \r or \n get quoted
    levels = getattr(df.columns, "nlevels", 1) if header else 0
    # to_csv writes one header line per column level (plus an index-name line when index=True
    # and the index is named with MultiIndex columns); count the header lines it produced
    if header and index and levels > 1 and any(n is not None for n in df.index.names):
        levels += 1
    s = parse_csv_table(text, name=name, header_rows=levels, fmt="dataframe", limits=limits)
    return s


def parse_rows(
    rows: Sequence[Sequence[Any]], *, name: str = "<rows>", header: bool | str = True, limits: Limits | None = None
) -> Structure:
    """A list of rows (cells converted with ``str``) as a table; source is their CSV rendering.

    Parameters
    ----------
    rows : sequence of sequences
        The rows; ``None`` becomes an empty cell, anything else ``str(value)``.
    name : str
        The table's name in error messages.
    header : bool or "auto"
        Whether the first row is the header; ``"auto"``: sniffed
        (:func:`~structpos.parsers.table_csv.sniff_header`).
    limits : Limits, optional
        ``max_input_bytes``, ``max_nodes`` and ``max_table_cells`` apply.

    Returns
    -------
    Structure
        ``kind="table"``, ``format="rows"``; ``source`` is the rows written by
        :func:`csv.writer` (fields with delimiters or quotes get quoted).

    Raises
    ------
    InputError
        ``rows`` is not a sequence of rows; :class:`~structpos.exceptions.ParseError` (naming
        the row) for a row that is not a sequence of cells (a string, a number).
    SpecError
        A bad ``header``.
    LimitError
        ``max_input_bytes``, ``max_nodes`` or ``max_table_cells`` exceeded.

    Examples
    --------
    >>> s = parse_rows([["name", "note"], ["ann", "a, b"], ["bob", None]])
    >>> s.source
    'name,note\\r\\nann,"a, b"\\r\\nbob,\\r\\n'
    >>> s.table.grid[1], s.node_text(6)  # the span of a quoted field is inside its quotes
    (['ann', 'a, b'], 'a, b')
    """
    if not _iterable(rows):
        raise wrong_type(rows, name, "a list of rows (each a list of cells)")
    rows = list(rows)
    for k, r in enumerate(rows):
        if not _iterable(r):
            raise ParseError(f"a row must be a list of cells, not {type(r).__name__}", name=name, position=f"row {k}")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows([[("" if v is None else v) for v in r] for r in rows])
    return parse_csv_table(buf.getvalue(), name=name, header=header, fmt="rows", limits=limits)


def _iterable(obj: Any) -> bool:
    """A sequence of values (a list, a tuple, an array), not text, bytes, a mapping or a scalar."""
    return hasattr(obj, "__iter__") and not isinstance(obj, (str, bytes, bytearray, memoryview, dict, os.PathLike))
