"""pandas DataFrames (and lists of rows) as tables: synthesize CSV source, point into it.

The frame is written with :meth:`pandas.DataFrame.to_csv` (so cell text is exactly what pandas
prints: ``NaN`` → empty, numbers in pandas' formatting); the structure's ``source`` is that CSV
text and every span points into it. Column labels form the header rows (one per column level
of a MultiIndex); ``index=True`` adds the index as leading column(s).
"""

from __future__ import annotations

import csv
import io
from typing import Any, Sequence

from ..limits import Limits
from ..structure import Structure
from .table_csv import parse_csv_table

__all__ = ["parse_dataframe", "parse_rows"]


def parse_dataframe(
    df: Any, *, name: str = "<dataframe>", header: bool | str = True, index: bool = False, limits: Limits | None = None
) -> Structure:
    """A DataFrame as a table Structure whose source is its CSV rendering."""
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
    """A list of rows (cells converted with ``str``) as a table; source is their CSV rendering."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows([[("" if v is None else v) for v in r] for r in rows])
    return parse_csv_table(buf.getvalue(), name=name, header=header, fmt="rows", limits=limits)
