"""Shared table machinery: the HTML grid-filling algorithm and the table → Structure layout.

Every table front end (CSV, DataFrame, HTML) reduces its input to a columnar
:class:`TableData` (the HTML scanner via :class:`RowRecord`/:class:`CellRecord` and
:meth:`TableData.from_records`) and calls :func:`build_table`.

Layout of the resulting ``Structure`` (kind ``"table"``), in preorder::

    node 0            table
    node 1            row 0            (parent 0)
    node 2 .. 1+c0    row 0's cells    (parent 1), in source order
    node 2+c0         row 1            (parent 0)
    ...

Per-node attributes (``-1`` on the table and row nodes):

* ``row``, ``col`` — 0-based grid position of the cell's top-left slot;
* ``rowspan``, ``colspan`` — how many grid rows/columns the cell covers (≥ 1);
* ``header`` — 1 when the cell is in a header row or is an HTML ``<th>``, else 0.

``node_texts`` (list of length N: the cell's text, ``None`` for table/row nodes — for CSV the
decoded field value, for HTML the visible text with whitespace runs collapsed), ``format``, and
``table`` (:class:`~structpos.structure.TableInfo`): ``grid`` (the expanded ``R × C`` grid of
texts as lists, a merged cell's text repeated over every slot it covers, ``None`` in holes of
ragged rows), ``header_rows`` (number of leading header rows), ``n_rows``, ``n_cols``.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..limits import Limits, check_limit, resolve_limits
from ..native import native_module
from ..node_attrs import COL, COLSPAN, HEADER, ROW, ROWSPAN, TABLE_ATTRS
from ..structure import Structure, StructureError, TableInfo

__all__ = ["CellRecord", "RowRecord", "TableData", "place_cells", "build_table"]


@dataclass
class CellRecord:
    """One cell as read from the source: content span, text and declared spans."""

    start: int
    end: int
    text: str
    rowspan: int = 1  # 0 = "to the end of the row group" (HTML)
    colspan: int = 1
    is_th: bool = False


@dataclass
class RowRecord:
    """One source row: its span, its cells, and the row group it belongs to."""

    start: int
    end: int
    cells: list[CellRecord] = field(default_factory=list)
    group: int = 0
    in_thead: bool = False


@dataclass
class TableData:
    """Columnar rows and cells of one table (cells in source order, row by row)."""

    row_start: list[int]
    row_end: list[int]
    row_count: list[int]  # cells per row
    cell_start: list[int]
    cell_end: list[int]
    cell_text: list[str]
    row_group: list[int] | None = None  # row group id per row (None: one group)
    rowspan: list[int] | None = None  # None: all 1
    colspan: list[int] | None = None
    is_th: list[bool] | None = None

    def text_rows(self) -> list[list[str]]:
        """The cell texts as a list of rows (what :func:`csv.reader` would return)."""
        out, k = [], 0
        for c in self.row_count:
            out.append(self.cell_text[k : k + c])
            k += c
        return out

    @classmethod
    def from_records(cls, rows: list[RowRecord]) -> "TableData":
        cells = [c for r in rows for c in r.cells]
        return cls(
            row_start=[r.start for r in rows],
            row_end=[r.end for r in rows],
            row_count=[len(r.cells) for r in rows],
            cell_start=[c.start for c in cells],
            cell_end=[c.end for c in cells],
            cell_text=[c.text for c in cells],
            row_group=[r.group for r in rows],
            rowspan=[c.rowspan for c in cells],
            colspan=[c.colspan for c in cells],
            is_th=[c.is_th for c in cells],
        )


def _group_ends(groups: np.ndarray) -> np.ndarray:
    """For each row, the index one past the last row of its (contiguous) row group."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    boundary = np.flatnonzero(np.diff(groups) != 0) + 1  # first row of each later group
    ends_of_groups = np.append(boundary, n)
    which = np.searchsorted(boundary, np.arange(n), side="right")
    return ends_of_groups[which]


def place_cells(
    row_count: np.ndarray,
    rowspan: np.ndarray | None,
    colspan: np.ndarray | None,
    row_group: np.ndarray | None,
    *,
    max_cells: int | None = None,
    name: str = "<table>",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The HTML table grid-filling algorithm (WHATWG "processing model", simplified).

    Row by row, each cell goes to the leftmost slot at or after the running column that no
    earlier cell (spanning down from a previous row) occupies; it then occupies the
    ``rowspan × colspan`` rectangle below-right of that slot. ``rowspan = 0`` and rowspans that
    run past the end of the row group (``<thead>``/``<tbody>``/``<tfoot>`` or the run of rows
    outside any section) are clipped to the group's last row, as browsers render them.

    Returns per-cell arrays ``(row, col, rowspan, colspan)`` in source order (effective spans).
    Without merged cells a cell's column is simply its index in its row (vectorized).

    ``max_cells``: the grid slots the cells may cover in all (``max_table_cells``); the budget
    is checked before each cell marks its slots, so huge spans fail fast with
    :class:`~structpos.exceptions.LimitError` instead of filling memory.

    Examples
    --------
    >>> row, col, rs, cs = place_cells(np.array([2, 1]), np.array([2, 1, 1]), None, None)
    >>> col.tolist(), rs.tolist()  # the second row's cell moves right of the rowspan
    ([0, 1, 1], [2, 1, 1])
    """
    n_rows = len(row_count)
    n_cells = int(row_count.sum())
    row = np.repeat(np.arange(n_rows, dtype=np.int64), row_count)
    merged = (rowspan is not None and bool((rowspan != 1).any())) or (
        colspan is not None and bool((colspan != 1).any())
    )
    if not merged:
        first = np.concatenate([[0], np.cumsum(row_count)[:-1]]).astype(np.int64) if n_rows else np.zeros(0, np.int64)
        col = np.arange(n_cells, dtype=np.int64) - np.repeat(first, row_count)
        ones = np.ones(n_cells, dtype=np.int64)
        return row, col, ones, ones.copy()

    groups = np.zeros(n_rows, dtype=np.int64) if row_group is None else np.asarray(row_group, dtype=np.int64)
    group_end = _group_ends(groups).tolist()
    rs_in = np.ones(n_cells, np.int64) if rowspan is None else np.asarray(rowspan, np.int64)
    cs_in = np.ones(n_cells, np.int64) if colspan is None else np.asarray(colspan, np.int64)
    col = np.empty(n_cells, dtype=np.int64)
    rs = np.empty(n_cells, dtype=np.int64)
    cs = np.maximum(cs_in, 1)
    # occupied[r] = columns of row r covered by a cell anchored in an earlier row
    occupied: list[set[int]] = [set() for _ in range(n_rows)]
    budget = float("inf") if max_cells is None else max_cells
    covered = 0
    k = 0
    for r, count in enumerate(row_count.tolist()):
        c = 0
        taken = occupied[r]
        last = group_end[r]
        for _ in range(count):
            while c in taken:
                c += 1
            want = int(rs_in[k])
            down = last - r if want == 0 else min(want, last - r)
            across = int(cs[k])
            covered += max(down, 1) * across
            if covered > budget:
                check_limit(
                    covered,
                    max_cells,
                    "max_table_cells",
                    "table cells after span expansion",
                    name=name,
                    position=f"row {r}, cell {k}",
                )
            for rr in range(r + 1, r + down):
                occupied[rr].update(range(c, c + across))
            col[k], rs[k] = c, down
            c += across
            k += 1
    return row, col, rs, cs


def _row_major(row: np.ndarray, col: np.ndarray, n_rows: int) -> bool:
    """Cells listed row by row, each row's cells in columns ``0, 1, 2, …`` (no holes)."""
    if row.size == 0:
        return True
    if bool((row[1:] < row[:-1]).any()):
        return False
    first = np.searchsorted(row, row, side="left")
    return bool((col == np.arange(row.size) - first).all())


def _row_major_grid(texts: list[str], counts: list[int], n_cols: int) -> list[list[str | None]]:
    """The grid of cells listed row by row in columns ``0, 1, …`` (``counts`` per row), ``None``-padded."""
    values = cast("list[str | None]", texts)
    if n_cols and len(values) == len(counts) * n_cols:  # rectangular: every row is full
        return [values[k : k + n_cols] for k in range(0, len(values), n_cols)]
    out: list[list[str | None]] = []
    k = 0
    for c in counts:
        out.append(values[k : k + c] + [None] * (n_cols - c) if c < n_cols else values[k : k + c])
        k += c
    return out


def _expanded_grid(
    texts: list[str], row: np.ndarray, col: np.ndarray, rs: np.ndarray, cs: np.ndarray, n_rows: int, n_cols: int
):
    """``n_rows × n_cols`` list grid of texts, merged cells repeated, ``None`` in holes."""
    simple = bool((rs == 1).all() and (cs == 1).all())
    if simple and _row_major(row, col, n_rows):  # CSV and most HTML: one slice of the texts per row
        return _row_major_grid(texts, np.bincount(row, minlength=n_rows).tolist(), n_cols)
    grid: list[list[str | None]] = [[None] * n_cols for _ in range(n_rows)]
    if simple:
        for t, r, c in zip(texts, row.tolist(), col.tolist()):
            grid[r][c] = t
        return grid
    for t, r0, c0, h, w in zip(texts, row.tolist(), col.tolist(), rs.tolist(), cs.tolist()):
        for rr in range(r0, r0 + h):
            grid[rr][c0 : c0 + w] = [t] * w
    return grid


def build_table(
    data: TableData,
    *,
    source: str,
    name: str,
    table_span: tuple[int, int],
    header_rows: int,
    fmt: str,
    table_index: int | None = None,
    limits: Limits | None = None,
) -> Structure:
    """Lay ``data`` out as a table Structure (see the module docstring).

    ``limits``: ``max_nodes`` (table + rows + cells) and ``max_table_cells`` (grid slots after
    span expansion, ``rows × columns``) raise :class:`~structpos.exceptions.LimitError`
    before the grid is built.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small lists: the cyclic GC would rescan them over and over
    try:
        return _build_table(data, source, name, table_span, header_rows, fmt, table_index, resolve_limits(limits))
    finally:
        if gc_was_enabled:
            gc.enable()


_NODE_LABELS = np.array(["table", "row", "cell", "header"], dtype=object)


@dataclass
class _NodeArrays:
    """The per-node arrays of a table's layout (module docstring), its column count and its grid."""

    parent: np.ndarray
    start: np.ndarray
    end: np.ndarray
    attrs: dict[str, np.ndarray]
    label_code: np.ndarray  # index into _NODE_LABELS
    node_texts: list[str | None]  # the cell texts at the cell nodes, None at the others
    n_cols: int
    grid: list[list[str | None]]  # TableInfo.grid


def _build_table(data: TableData, source, name, table_span, header_rows, fmt, table_index, limits: Limits) -> Structure:
    counts = np.asarray(data.row_count, dtype=np.int64)
    n_rows = len(counts)
    n_cells = len(data.cell_text)
    check_limit(1 + n_rows + n_cells, limits.max_nodes, "max_nodes", "nodes", name=name)
    native = native_module("table")
    if native is not None and data.rowspan is None and data.colspan is None and data.is_th is None:
        nodes = _unmerged_nodes(native, data, counts, header_rows, table_span, limits, name)
    else:
        nodes = _placed_nodes(data, counts, header_rows, table_span, limits, name)
    table = TableInfo(
        grid=nodes.grid, header_rows=int(header_rows), n_rows=n_rows, n_cols=nodes.n_cols, table_index=table_index
    )
    return Structure(
        kind="table",
        labels=_NODE_LABELS[nodes.label_code],  # an object gather: no str → object conversion
        start=nodes.start,
        end=nodes.end,
        parent=nodes.parent,
        source=source,
        name=name,
        attrs=nodes.attrs,
        format=fmt,
        node_texts=nodes.node_texts,
        table=table,
    )


def _check_grid_size(n_rows: int, n_cols: int, limits: Limits, name: str) -> None:
    """LimitError when the expanded grid would exceed ``max_table_cells`` (checked before it is built)."""
    check_limit(
        n_rows * n_cols,
        limits.max_table_cells,
        "max_table_cells",
        f"table cells after span expansion ({n_rows} rows × {n_cols} columns)",
        name=name,
    )


def _unmerged_nodes(
    native, data: TableData, counts: np.ndarray, header_rows: int, table_span, limits: Limits, name: str
) -> _NodeArrays:
    """The layout of a table whose cells each take one slot, row by row (``native/table.c``'s ``layout``).

    The grid is ``rows × the longest row``; that is at most ``rows × cells``, so the longest row is
    looked for only when that bound passes ``max_table_cells``.
    """
    n_rows, n_cells = len(counts), len(data.cell_text)
    if limits.max_table_cells is not None and n_rows * n_cells > limits.max_table_cells:
        _check_grid_size(n_rows, int(counts.max()), limits, name)
    texts = data.cell_text if type(data.cell_text) is list else list(data.cell_text)
    i8 = np.int64
    arrays, node_texts, grid = native.layout(
        counts,
        np.asarray(data.row_start, dtype=i8),
        np.asarray(data.row_end, dtype=i8),
        np.asarray(data.cell_start, dtype=i8),
        np.asarray(data.cell_end, dtype=i8),
        texts,
        int(header_rows),
        *table_span,
    )
    block = np.frombuffer(arrays, dtype=i8).reshape(9, -1)
    attrs = dict(zip((ROW, COL, ROWSPAN, COLSPAN, HEADER), block[3:8]))
    n_cols = len(grid[0]) if grid else 0  # each grid row is padded to the longest
    return _NodeArrays(block[0], block[1], block[2], attrs, block[8], node_texts, n_cols, grid)


def _placed_nodes(
    data: TableData, counts: np.ndarray, header_rows: int, table_span, limits: Limits, name: str
) -> _NodeArrays:
    """The layout of any table, cells placed by :func:`place_cells`."""
    n_rows, n_cells = len(counts), len(data.cell_text)
    n = 1 + n_rows + n_cells
    arr = lambda x: None if x is None else np.asarray(x, dtype=np.int64)  # noqa: E731
    cell_row, cell_col, cell_rs, cell_cs = place_cells(
        counts, arr(data.rowspan), arr(data.colspan), arr(data.row_group), max_cells=limits.max_table_cells, name=name
    )

    # node ids: row r sits after the table, the r earlier rows and their cells
    cells_before = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if n_rows else np.zeros(0, np.int64)
    row_node = 1 + np.arange(n_rows, dtype=np.int64) + cells_before
    cell_node = np.arange(n_cells, dtype=np.int64) + cell_row + 2

    parent = np.full(n, -1, dtype=np.int64)
    parent[row_node] = 0
    parent[cell_node] = row_node[cell_row]

    start = np.full(n, -1, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    start[0], end[0] = table_span
    start[row_node] = data.row_start
    end[row_node] = data.row_end
    start[cell_node] = data.cell_start
    end[cell_node] = data.cell_end

    is_th = np.zeros(n_cells, dtype=bool) if data.is_th is None else np.asarray(data.is_th, dtype=bool)
    header_flag = ((cell_row < header_rows) | is_th).astype(np.int64)

    attrs = {c.name: np.full(n, -1, dtype=np.int64) for c in TABLE_ATTRS}
    attrs[ROW][cell_node] = cell_row
    attrs[COL][cell_node] = cell_col
    attrs[ROWSPAN][cell_node] = cell_rs
    attrs[COLSPAN][cell_node] = cell_cs
    attrs[HEADER][cell_node] = header_flag

    label_code = np.zeros(n, dtype=np.int64)
    label_code[row_node] = 1
    label_code[cell_node] = 2 + header_flag
    text_arr = np.empty(n, dtype=object)
    text_arr[cell_node] = data.cell_text
    n_cols = int((cell_col + cell_cs).max()) if n_cells else 0
    _check_grid_size(n_rows, n_cols, limits, name)
    grid = _expanded_grid(data.cell_text, cell_row, cell_col, cell_rs, cell_cs, n_rows, n_cols)
    return _NodeArrays(parent, start, end, attrs, label_code, text_arr.tolist(), n_cols, grid)


def check_span_value(value: str | None, attr: str, *, name: str, where: str) -> int:
    """Parse a ``rowspan``/``colspan`` attribute: a non-negative integer, else StructureError."""
    if value is None:
        return 1
    v = value.strip()
    if not v.isdigit() or not v.isascii():
        raise StructureError(f"{attr}={value!r} is not a non-negative integer", name=name, position=where)
    n = int(v)
    if attr == "colspan":
        return min(max(n, 1), 1000)  # HTML: 0 → 1, clamp at 1000
    return min(n, 65534)  # HTML: 0 → to the end of the row group
