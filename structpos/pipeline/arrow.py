"""Per-node numpy arrays -> Arrow list columns, without a Python loop over values.

A column holds one array per row. An ``(n_i,)`` array becomes ``list<T>``, an ``(n_i, k)``
array ``list<list<T>>`` and so on: the values of all rows are concatenated once and every
nesting level is an offsets vector, ``offsets = [0, cumsum(lengths)]``, where the lengths at
level ``l`` of a row with shape ``s`` are ``s[l]`` repeated ``prod(s[:l])`` times. A row whose
array is ``None`` becomes a null list.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["list_column", "string_list_column", "rows_to_table", "BASE_COLUMNS"]

BASE_COLUMNS = ("id", "kind", "num_nodes", "labels", "start", "end", "parent")


def _values(flat: np.ndarray) -> pa.Array:
    if flat.dtype == object:
        return pa.array([None if v is None else str(v) for v in flat], type=pa.string())
    return pa.array(flat)


def list_column(arrays: Sequence[np.ndarray | None]) -> pa.Array:
    """One Arrow list column from per-row arrays of equal rank (``None`` -> null)."""
    present = [np.asarray(a) for a in arrays if a is not None]
    if not present:
        return pa.nulls(len(arrays))
    ndim = present[0].ndim
    if ndim == 0:
        raise ValueError("list_column needs arrays with at least one dimension")
    for a in present:
        if a.ndim != ndim:
            raise ValueError(f"rows of one column must have the same rank, got {ndim} and {a.ndim}")
    if len(present) > 1 and all(a.dtype != object for a in present):
        dtype = np.result_type(*present)
    else:
        dtype = present[0].dtype
    flat = np.concatenate([a.reshape(-1).astype(dtype, copy=False) for a in present]) if present else np.zeros(0, dtype)
    values: pa.Array = _values(flat)
    shapes = [a.shape for a in present]
    for level in range(ndim - 1, 0, -1):
        lengths = np.concatenate([np.full(int(np.prod(s[:level])), s[level], dtype=np.int64) for s in shapes])
        values = pa.ListArray.from_arrays(_offsets(lengths), values)
    outer = np.array([0 if a is None else np.shape(a)[0] for a in arrays], dtype=np.int64)
    mask = np.array([a is None for a in arrays])
    return pa.ListArray.from_arrays(_offsets(outer), values, mask=pa.array(mask) if mask.any() else None)


def string_list_column(arrays: Sequence[np.ndarray | None]) -> pa.Array:
    """``list<string>`` column (node labels)."""
    col = list_column(arrays)
    if pa.types.is_null(col.type):
        return pa.nulls(len(arrays), type=pa.list_(pa.string()))
    return col


def _offsets(lengths: np.ndarray) -> pa.Array:
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    if off[-1] >= 2**31:
        raise ValueError("a shard holds more than 2**31 values in one column; use a smaller --shard-size")
    return pa.array(off.astype(np.int32))


def rows_to_table(rows: list[dict], extra: dict[str, list] | None = None) -> pa.Table:
    """Build the output table from encoded rows (see :func:`structpos.pipeline.encode.encode_payload`).

    Columns: ``id``, ``kind``, ``num_nodes``, ``labels``, ``start``, ``end``, ``parent`` (null
    for non-trees), then one list column per coordinate in order of first appearance, then the
    ``extra`` columns (plain Python lists, e.g. error columns).
    """
    cols: dict[str, pa.Array] = {
        "id": pa.array([r["id"] for r in rows], type=pa.string()),
        "kind": pa.array([r["kind"] for r in rows], type=pa.string()),
        "num_nodes": pa.array([r["num_nodes"] for r in rows], type=pa.int64()),
        "labels": string_list_column([r["labels"] for r in rows]),
    }
    for name in ("start", "end", "parent"):
        col = list_column([r[name] for r in rows])
        cols[name] = col if not pa.types.is_null(col.type) else pa.nulls(len(rows), type=pa.list_(pa.int64()))
    coord_names: list[str] = []
    for r in rows:
        for k in r["coords"]:
            if k not in coord_names:
                coord_names.append(k)
    for k in coord_names:
        cols[k] = list_column([r["coords"].get(k) for r in rows])
    for k, v in (extra or {}).items():
        cols[k] = pa.array(v, type=pa.string())
    return pa.table(cols)
