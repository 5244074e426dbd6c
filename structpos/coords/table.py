"""Table coordinates: grid position, spans, header flag and TAPAS-style row/column ids.

For a table Structure (see :mod:`structpos.parsers.table`), per node:

* ``row``, ``col`` — 0-based grid slot of the cell's top-left corner (``-1`` for non-cells);
* ``rowspan``, ``colspan`` — the cell covers grid rows ``row .. row+rowspan-1`` and columns
  ``col .. col+colspan-1`` (``-1`` for non-cells); :func:`cell_grid` expands this to the
  ``R × C`` grid of node ids, so a merged cell owns every slot of its rectangle;
* ``header`` — 1 for header cells (header row or ``<th>``), 0 for other cells, ``-1`` else;
* ``tapas_row`` — TAPAS row id: 0 for the header rows and for non-cell nodes, data rows
  numbered from 1 (``row − header_rows + 1``);
* ``tapas_col`` — TAPAS column id: ``col + 1`` for cells, 0 for non-cell nodes.

``header_rows`` comes from ``structure.table.header_rows`` when the parser recorded it, else it is the
number of leading grid rows whose cells are all header cells.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import SpecError
from ..node_attrs import table_cells
from ..structure import Structure, StructureError, raise_at_first

__all__ = ["table_coords", "cell_grid", "header_row_count"]


def _cell_arrays(s: Structure) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(is_cell, row, col, rowspan, colspan, header)`` (:func:`~structpos.node_attrs.table_cells`)."""
    t = table_cells(s)
    is_cell = t.is_cell
    raise_at_first(is_cell & ((t.rowspan < 1) | (t.colspan < 1)), "cell with a span below 1", name=s.name)
    return is_cell, t.row, t.col, t.rowspan, t.colspan, t.header


def header_row_count(s: Structure) -> int:
    """Number of leading header rows (``s.table.header_rows``, else inferred from ``header``).

    Parameters
    ----------
    s : Structure
        A table.

    Returns
    -------
    int
        0 when the table has no header row.

    Raises
    ------
    StructureError
        If the structure has no ``row``/``col`` attributes.

    Examples
    --------
    >>> import structpos
    >>> t = structpos.parse("a,b\\n1,2\\n", "table")
    >>> header_row_count(t)
    1
    """
    if s.table is not None and s.table.header_rows is not None:
        return int(s.table.header_rows)
    is_cell, row, _, rs, _, hd = _cell_arrays(s)
    if not is_cell.any():
        return 0
    r = row[is_cell]
    n_rows = int((r + rs[is_cell]).max())
    # a grid row is a header row when every cell anchored in it is a header cell
    non_header_rows = np.unique(r[hd[is_cell] <= 0])
    anchored = np.zeros(n_rows, dtype=bool)
    anchored[r] = True
    is_header = anchored.copy()
    is_header[non_header_rows] = False
    count = 0
    while count < n_rows and is_header[count]:
        count += 1
    return count


def cell_grid(s: Structure) -> np.ndarray:
    """The expanded ``(R, C)`` grid of cell node ids (``-1`` where no cell covers a slot).

    A cell with ``rowspan = h`` and ``colspan = w`` fills the ``h × w`` rectangle from its
    top-left slot. Overlapping cells (malformed input) raise StructureError.

    Parameters
    ----------
    s : Structure
        A table.

    Returns
    -------
    numpy.ndarray
        ``(R, C)`` int64 node ids.

    Raises
    ------
    StructureError
        On overlapping cells or missing ``row``/``col`` attributes.

    Examples
    --------
    >>> import structpos
    >>> t = structpos.parse("a,b\\n1,2\\n", "table")
    >>> cell_grid(t).tolist()
    [[2, 3], [5, 6]]
    """
    is_cell, row, col, rs, cs, _ = _cell_arrays(s)
    ids = np.flatnonzero(is_cell)
    if ids.size == 0:
        return np.full((0, 0), -1, dtype=np.int64)
    r0, c0, h, w = row[ids], col[ids], rs[ids], cs[ids]
    R, C = int((r0 + h).max()), int((c0 + w).max())
    # one (slot, node) pair per covered slot, vectorized: repeat each cell h*w times
    area = h * w
    owner = np.repeat(ids, area)
    local = np.arange(int(area.sum())) - np.repeat(np.cumsum(area) - area, area)
    rr = np.repeat(r0, area) + local // np.repeat(w, area)
    cc = np.repeat(c0, area) + local % np.repeat(w, area)
    flat = rr * C + cc
    if np.unique(flat).size != flat.size:
        _, first = np.unique(flat, return_index=True)
        dup = np.setdiff1d(np.arange(flat.size), first)[0]
        raise StructureError(
            f"cells overlap at grid slot ({int(rr[dup])}, {int(cc[dup])})",
            name=s.name,
            position=f"node {int(owner[dup])}",
        )
    grid = np.full(R * C, -1, dtype=np.int64)
    grid[flat] = owner
    return grid.reshape(R, C)


def table_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Per-node table coordinates (see the module docstring); ``arg`` is unused.

    Parameters
    ----------
    structure : Structure
        A table (``row``, ``col`` and optionally ``rowspan``, ``colspan``, ``header`` attributes).
    arg : str, optional
        Must be empty.

    Returns
    -------
    dict of str to numpy.ndarray
        ``row``, ``col``, ``rowspan``, ``colspan``, ``header``, ``tapas_row``, ``tapas_col``, each ``(N,)`` int64.

    Raises
    ------
    StructureError
        If the structure has no ``row``/``col`` attributes.
    SpecError
        If ``arg`` is given.

    Examples
    --------
    >>> import structpos
    >>> t = structpos.parse("a,b\\n1,2\\n", "table")
    >>> c = table_coords(t)
    >>> c["row"].tolist(), c["tapas_row"].tolist()
    ([-1, -1, 0, 0, -1, 1, 1], [0, 0, 0, 0, 0, 1, 1])
    """
    if arg not in (None, ""):
        raise SpecError(f"coordinate family 'table' takes no argument (got {arg!r})")
    is_cell, row, col, rs, cs, hd = _cell_arrays(structure)
    n_header = header_row_count(structure)
    tapas_row = np.where(is_cell & (row >= n_header), row - n_header + 1, 0)
    tapas_col = np.where(is_cell, col + 1, 0)
    neg = np.int64(-1)
    return {
        "row": np.where(is_cell, row, neg),
        "col": np.where(is_cell, col, neg),
        "rowspan": np.where(is_cell, rs, neg),
        "colspan": np.where(is_cell, cs, neg),
        "header": np.where(is_cell, hd, neg),
        "tapas_row": tapas_row.astype(np.int64),
        "tapas_col": tapas_col.astype(np.int64),
    }
