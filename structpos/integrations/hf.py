"""Hugging Face ``datasets`` drop-in: ``encode_dataset(ds, kind, coords)``.

Runs the same picklable :class:`~structpos.pipeline.EncodeBatch` that the CLI's workers run,
through ``Dataset.map(batched=True, num_proc=N)``: ``num_proc`` worker processes each get
batches of rows; the input columns are replaced by the output columns ``id, kind, num_nodes,
labels, start, end, parent``, one list column per coordinate, and ``error_type``/``error``
(null for rows that encoded; a failed record keeps one row with null coordinates, so no
record disappears silently). Without an ``id_column`` the id is the dataset row index.
"""

from __future__ import annotations

from typing import Any

from ..pipeline.adapters import EncodeBatch

__all__ = ["encode_dataset", "EncodeBatch"]


def encode_dataset(
    dataset: Any,
    kind: str | None,
    coords: str,
    *,
    batch_size: int = 64,
    num_proc: int | None = None,
    **options: Any,
):
    """``dataset.map(EncodeBatch(kind, coords, **options), batched=True, with_indices=True, num_proc=num_proc)``.

    Parameters
    ----------
    dataset : datasets.Dataset
        The input rows.
    kind : str or None
        The input kind of every row, or ``None`` with a ``kind_column``.
    coords : str
        The coordinate spec.
    batch_size : int
        Rows per ``map`` batch.
    num_proc : int, optional
        Worker processes (``None``: this process).
    **options
        The options of :class:`~structpos.pipeline.EncodeBatch` (``text_column``, ``id_column``,
        ``kind_column``, ``language``, ``keep_errors``, ``limits``) and parser keyword arguments.

    Returns
    -------
    datasets.Dataset
        One row per encoded structure (and, with ``keep_errors``, one per failed record).

    Raises
    ------
    SpecError
        An unknown kind or a bad coordinate spec, before any row is read.

    Examples
    --------
    A failed record keeps its row, with the error instead of coordinates:

    >>> import datasets
    >>> ds = datasets.Dataset.from_dict({"text": ['{"a": 1}', "[1, 2", "[]"]})
    >>> out = encode_dataset(ds, "json", "tree")
    >>> list(out["num_nodes"]), list(out["depth"]), list(out["error_type"])
    ([3, None, 1], [[0, 1, 2], None, [0]], [None, 'ParseError', None])
    """
    return dataset.map(
        EncodeBatch(kind, coords, **options),
        batched=True,
        batch_size=batch_size,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=list(dataset.column_names),
        desc="structpos encode",
    )
