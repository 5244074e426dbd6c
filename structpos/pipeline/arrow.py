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

from ..native import native_module

__all__ = ["list_column", "string_list_column", "numeric_array", "string_array", "rows_to_table", "BASE_COLUMNS"]

BASE_COLUMNS = ("id", "kind", "num_nodes", "labels", "start", "end", "parent")


def _validity(valid: np.ndarray) -> pa.Buffer | None:
    """Arrow validity bitmap (LSB first) of a boolean mask, or ``None`` when all are valid."""
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def numeric_array(a: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """Zero-copy Arrow array of a 1-D numeric/bool numpy array.

    Built from buffers rather than ``pa.array`` because that call imports pandas (~1 s of CPU
    in every fresh worker process).

    Parameters
    ----------
    a : numpy.ndarray
        A 1-D array of a numeric or boolean dtype.
    valid : numpy.ndarray, optional
        Boolean mask, ``False`` where the value is null (default: all valid).

    Returns
    -------
    pyarrow.Array
        Of the Arrow type matching ``a.dtype``.

    Examples
    --------
    >>> import numpy as np
    >>> numeric_array(np.array([1, 2, 3]), np.array([True, False, True])).to_pylist()
    [1, None, 3]
    >>> numeric_array(np.array([True, False])).type
    DataType(bool)
    """
    a = np.ascontiguousarray(a)
    n = len(a)
    bitmap = None if valid is None else _validity(valid)
    if a.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), n, [bitmap, pa.py_buffer(np.packbits(a, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), n, [bitmap, pa.py_buffer(a)])


def string_array(values: Sequence[object | None]) -> pa.Array:
    """Arrow ``string`` array (``None`` -> null) built from UTF-8 buffers (see :func:`numeric_array`).

    Parameters
    ----------
    values : sequence of object or None
        Each value is stored as ``str(value)``; ``None`` becomes null.

    Returns
    -------
    pyarrow.Array
        ``string``, or ``large_string`` once the text passes 2 GiB.

    Examples
    --------
    >>> string_array(["a", None, 3]).to_pylist()
    ['a', None, '3']
    """
    offsets, data, validity = _utf8_buffers(values)
    n = len(offsets) - 1
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(offsets.astype(np.int32)), data])
    return pa.Array.from_buffers(pa.large_string(), n, [validity, pa.py_buffer(offsets), data])


def _utf8_buffers(values: Sequence[object | None]) -> tuple[np.ndarray, pa.Buffer, pa.Buffer | None]:
    """``(offsets, data, validity)`` of a string column: int64 offsets of each value's UTF-8 text in
    ``data``, and the validity bitmap (``None`` when no value is ``None``).

    ``native/text.c``'s ``utf8_column`` when it is built (one C loop), else a Python loop; the same buffers.
    """
    native = native_module("text")
    if native is not None:
        raw_offsets, joined, valid = native.utf8_column(values)
        offsets = np.frombuffer(raw_offsets, dtype=np.int64)
        validity = None if valid is None else _validity(np.frombuffer(valid, dtype=bool))
        return offsets, pa.py_buffer(joined), validity
    data = [b"" if v is None else str(v).encode("utf-8") for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(b) for b in data), dtype=np.int64, count=len(data)), out=offsets[1:])
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    return offsets, pa.py_buffer(b"".join(data)), _validity(valid)


def _values(flat: np.ndarray) -> pa.Array:
    if flat.dtype == object or flat.dtype.kind in "US":
        return string_array(flat.tolist())
    return numeric_array(flat)


def list_column(arrays: Sequence[np.ndarray | None]) -> pa.Array:
    """One Arrow list column from per-row arrays of equal rank (``None`` -> null).

    Parameters
    ----------
    arrays : sequence of numpy.ndarray or None
        One array per row, all of the same rank ``>= 1``; the first axis may differ between rows.

    Returns
    -------
    pyarrow.Array
        ``list<T>`` for rank 1, ``list<list<T>>`` for rank 2, ...; a null array when every row is ``None``.

    Raises
    ------
    ValueError
        A 0-d array, rows of different rank, or more than ``2**31`` values in one nesting level.

    Examples
    --------
    >>> import numpy as np
    >>> list_column([np.array([[1, 2], [3, 4]]), None, np.zeros((0, 2), int)]).to_pylist()
    [[[1, 2], [3, 4]], None, []]
    """
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
    if not mask.any():
        return pa.ListArray.from_arrays(_offsets(outer), values)
    offsets = np.zeros(len(outer) + 1, dtype=np.int32)
    np.cumsum(outer, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.list_(values.type), len(arrays), [_validity(~mask), pa.py_buffer(offsets)], children=[values]
    )


def string_list_column(arrays: Sequence[np.ndarray | None]) -> pa.Array:
    """``list<string>`` column (node labels), typed even when every row is ``None``.

    Parameters
    ----------
    arrays : sequence of numpy.ndarray or None
        One 1-D string array per row.

    Returns
    -------
    pyarrow.Array
        Of type ``list<string>``.

    Examples
    --------
    >>> import numpy as np
    >>> string_list_column([np.array(["a", "b"]), None]).to_pylist()
    [['a', 'b'], None]
    >>> string_list_column([None]).type
    ListType(list<item: string>)
    """
    col = list_column(arrays)
    if pa.types.is_null(col.type):
        return pa.nulls(len(arrays), type=pa.list_(pa.string()))
    return col


def _offsets(lengths: np.ndarray) -> pa.Array:
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    if off[-1] >= 2**31:
        raise ValueError("a shard holds more than 2**31 values in one column; use a smaller --shard-size")
    return numeric_array(off.astype(np.int32))


def rows_to_table(rows: list[dict], extra: dict[str, list] | None = None) -> pa.Table:
    """Build the output table from encoded rows (see :func:`structpos.pipeline.encode.encode_payload`).

    Columns: ``id``, ``kind``, ``num_nodes``, ``labels``, ``start``, ``end``, ``parent`` (null
    for non-trees), then one list column per coordinate in order of first appearance, then the
    ``extra`` columns (plain Python lists, e.g. error columns).

    Parameters
    ----------
    rows : list of dict
        Rows as :func:`~structpos.pipeline.encode.encode_payload` returns them.
    extra : dict of str to list, optional
        More string columns, one value per row.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    ValueError
        A coordinate whose rows differ in rank (see :func:`list_column`).

    Examples
    --------
    >>> from structpos.pipeline.encode import encode_payload
    >>> t = rows_to_table(encode_payload("r1", "[1, 2]", "json", "tree"))
    >>> t.column_names[:7] == list(BASE_COLUMNS)
    True
    >>> t.column("num_nodes").to_pylist()
    [3]
    """
    cols: dict[str, pa.Array] = {
        "id": string_array([r["id"] for r in rows]),
        "kind": string_array([r["kind"] for r in rows]),
        "num_nodes": numeric_array(
            np.array([r["num_nodes"] or 0 for r in rows], dtype=np.int64),
            np.array([r["num_nodes"] is not None for r in rows], dtype=bool),
        ),
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
        cols[k] = string_array(v)
    return pa.Table.from_arrays(list(cols.values()), names=list(cols))
