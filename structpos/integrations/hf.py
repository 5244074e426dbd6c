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

from ..pipeline.encode import EncodeBatch

__all__ = ["encode_dataset", "EncodeBatch"]


def encode_dataset(
    dataset: Any,
    kind: str | None,
    coords: str,
    *,
    text_column: str = "text",
    id_column: str | None = None,
    kind_column: str | None = None,
    language: str | None = None,
    keep_errors: bool = True,
    batch_size: int = 64,
    num_proc: int | None = None,
    **parser_options: Any,
):
    """Encode every row of a Hugging Face ``Dataset``: ``dataset.map(EncodeBatch(...), batched=True, ...)``.

    Parameters
    ----------
    dataset : datasets.Dataset
        The input rows.
    kind : str or None
        The input kind for every row (:data:`~structpos.parsers.PARSERS`), or ``None`` with
        ``kind_column``.
    coords : str
        The coordinate spec (``"tree"``, ``"lap:8,rw:4"``, ...).
    text_column : str
        The column holding each record's input.
    id_column : str, optional
        The column holding record ids (default: the row index).
    kind_column : str, optional
        The column holding each row's kind, when ``kind`` is ``None``.
    language : str, optional
        The language of ``kind="code"`` input.
    keep_errors : bool
        Keep one row (null coordinates, ``error_type``/``error`` set) per failed record.
    batch_size : int
        Rows per ``map`` batch.
    num_proc : int, optional
        Worker processes (``None``: this process).
    **parser_options
        Passed to the parser.

    Returns
    -------
    datasets.Dataset
        One row per encoded structure (and, with ``keep_errors``, one per failed record),
        with the columns of the module docstring instead of the input columns.

    Raises
    ------
    SpecError
        An unknown ``kind``, a bad ``coords`` spec or option (checked before any row is read).

    Examples
    --------
    A failed record keeps its row, with the error instead of coordinates:

    >>> import datasets
    >>> ds = datasets.Dataset.from_dict({"text": ['{"a": 1}', "[1, 2", "[]"]})
    >>> out = encode_dataset(ds, "json", "tree")
    >>> list(out["num_nodes"]), list(out["depth"]), list(out["error_type"])
    ([3, None, 1], [[0, 1, 2], None, [0]], [None, 'ParseError', None])
    """
    fn = EncodeBatch(
        kind,
        coords,
        text_column=text_column,
        id_column=id_column,
        kind_column=kind_column,
        language=language,
        keep_errors=keep_errors,
        **parser_options,
    )
    return dataset.map(
        fn,
        batched=True,
        batch_size=batch_size,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=list(dataset.column_names),
        desc="structpos encode",
    )
