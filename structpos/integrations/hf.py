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
    """``dataset.map(EncodeBatch(...), batched=True, with_indices=True, num_proc=num_proc)``.

    ``dataset`` is a ``datasets.Dataset``; the result is a new ``Dataset`` with one row per
    encoded structure (and, with ``keep_errors``, one per failed record).
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
