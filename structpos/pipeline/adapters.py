"""The batch function of the dataset engines: HF ``datasets.map`` and Ray Data ``map_batches``."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..exceptions import InputError
from ..limits import DEFAULT_LIMITS, Limits
from .arrow import rows_to_table
from .encode import cannot_store, encode_one, mark_unstorable
from .options import EncodeOptions
from .payloads import id_problem, payload_problem
from .records import Record
from .schema import conform, output_schema

__all__ = ["EncodeBatch"]


def _python(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (``np.int64(1)`` -> ``1``), ``pandas.NA`` as ``None``."""
    if isinstance(value, np.generic):
        return value.item()
    return None if type(value).__name__ == "NAType" else value  # the null of pandas' nullable columns


def _columns(batch: Any) -> Mapping[str, Sequence]:
    if isinstance(batch, pa.Table):
        return batch.to_pydict()
    if hasattr(batch, "to_dict") and hasattr(batch, "columns"):  # pandas DataFrame
        return {c: list(batch[c]) for c in batch.columns}
    return batch


class EncodeBatch:
    """Picklable batch function: a batch of records in, a ``pyarrow.Table`` of rows out.

    Works as ``datasets.Dataset.map(EncodeBatch(...), batched=True, with_indices=True,
    remove_columns=...)`` and as Ray Data ``ds.map_batches(EncodeBatch(...), batch_format=...)``.
    The batch is a mapping column -> values (dict of lists or numpy arrays), a
    ``pyarrow.Table`` or a pandas DataFrame. ``text_column`` holds the payload; ``id_column``
    the record id (else the ``indices`` passed by HF, else the position in the batch). A null id
    (or a boolean, an object, a list) fails its record, whose id is then that index or position,
    never ``"None"``: the rule of ``structpos encode``'s readers (:func:`~.payloads.id_problem`).

    With ``keep_errors=True`` (the default) a record that fails becomes one row with null
    coordinates and its ``error_type``/``error`` set, so rows out >= records in; successful
    rows have null error columns. With ``keep_errors=False`` failed records are dropped.
    A payload that is null, a number, a boolean or a date fails as an ``InputError`` naming the
    record and the value's type (:func:`~.payloads.payload_problem`); text, bytes and the objects a kind's
    parser takes (a JSON object for ``json``, a graph object for ``graph``) are parsed.
    ``limits`` (:class:`~structpos.limits.Limits`) bounds each record as in ``structpos encode``
    (no per-record timeout or address-space limit here: those need the encode workers; a record
    whose coordinates alone would exceed ``limits.max_memory_bytes`` still fails before computing them).

    Parameters
    ----------
    kind : str or None
        The input kind; ``None`` takes it from ``kind_column``.
    coords : str
        The coordinate spec.
    text_column : str, optional
        The payload column.
    id_column : str, optional
        The record id column.
    kind_column : str, optional
        A column holding each record's kind.
    language : str, optional
        The code language.
    keep_errors : bool, optional
        Keep a failed record as a row with its error (default) or drop it.
    limits : Limits, optional
        Per-record limits.
    tokenizer : str, optional
        A tokenizer path: rows gain ``input_ids`` and per-token coordinates.
    **parser_options
        More parser keyword arguments.

    Raises
    ------
    SpecError
        An unknown kind or a bad coordinate spec (at construction, before any batch).
    InputError
        A batch whose rows do not fit one Arrow table although each record's do (a record whose
        own rows cannot be stored is an error row of stage ``memory`` / ``write`` instead).

    Examples
    --------
    >>> fn = EncodeBatch("json", "tree")
    >>> out = fn({"text": ['{"a": 1}', "[1,"]})
    >>> out.column("id").to_pylist(), out.column("error_type").to_pylist()
    (['0', '1'], [None, 'ParseError'])
    """

    def __init__(
        self,
        kind: str | None,
        coords: str,
        *,
        text_column: str = "text",
        id_column: str | None = None,
        kind_column: str | None = None,
        language: str | None = None,
        keep_errors: bool = True,
        limits: Limits = DEFAULT_LIMITS,
        tokenizer: str | None = None,
        **parser_options: Any,
    ):
        self.options = EncodeOptions(
            kind, coords, language, tuple(sorted(parser_options.items())), limits, tokenizer=tokenizer
        ).validate()
        self.text_column = text_column
        self.id_column = id_column
        self.kind_column = kind_column
        self.keep_errors = keep_errors

    def records(self, batch: Any, indices: Sequence[int] | None = None) -> list[Record]:
        """The batch's records: payload, id and kind per row (a null or a number as payload is a record that fails).

        Parameters
        ----------
        batch : mapping, pyarrow.Table or pandas.DataFrame
            The batch (see the class docstring).
        indices : sequence of int, optional
            The rows' indices in the dataset (HF ``with_indices=True``): the ids when there is no
            ``id_column``, and those of the records whose id is null.

        Returns
        -------
        list of Record

        Raises
        ------
        InputError
            The batch has no ``text_column``, ``id_column`` or ``kind_column``.

        Examples
        --------
        >>> [(r.id, r.payload) for r in EncodeBatch("json", "tree").records({"text": ["[1]", None]}, [7, 8])]
        [('7', '[1]'), ('8', None)]
        >>> EncodeBatch("json", "tree").records({"text": [1.5]})[0].read_error
        ('InputError', "record 0: payload 'text' is of type float (1.5), not text or bytes")
        >>> [(r.id, r.read_error) for r in EncodeBatch("json", "tree", id_column="k").records({"k": [None], "text": ["[1]"]})]
        [('0', ('ParseError', "record 0: id 'k' is null"))]
        """
        cols = _columns(batch)
        for name in (self.text_column, self.id_column, self.kind_column):
            if name is not None and name not in cols:
                raise InputError(f"the batch has no column {name!r} (columns: {', '.join(map(str, cols))})")
        payloads = list(cols[self.text_column])
        positions = [str(int(i)) for i in indices] if indices is not None else [str(i) for i in range(len(payloads))]
        ids = list(cols[self.id_column]) if self.id_column is not None else positions
        kinds = [str(k) for k in cols[self.kind_column]] if self.kind_column else [None] * len(payloads)
        out = []
        for position, value, payload, kind in zip(positions, ids, payloads, kinds):
            # a null id is an error record with the record's index as id, as a JSONL line's is its line number
            bad_id = None if self.id_column is None else id_problem(_python(value), self.id_column)
            rid = position if bad_id is not None else str(value)
            where = f"record {rid}"
            payload = _python(payload)
            problem = payload_problem(payload, self.text_column)
            if bad_id is not None:
                out.append(Record(rid, None, where, kind, None, (bad_id[0], f"{where}: {bad_id[1]}")))
            elif problem is not None:  # never parsed: json would read the integer 1 as the document "1"
                out.append(Record(rid, None, where, kind, None, ("InputError", f"{where}: {problem}")))
            else:
                out.append(Record(rid, payload, where, kind))
        return out

    def __call__(self, batch: Any, indices: Sequence[int] | None = None) -> pa.Table:
        records = self.records(batch, indices)
        per_record = [encode_one(rec, self.options) for rec in records]
        try:
            return self._table(records, per_record)
        except Exception as e:
            if not cannot_store(e):
                raise
            first = e
        mark_unstorable(records, per_record, rows_to_table)  # rows that Arrow refuses: find the records at fault
        try:
            return self._table(records, per_record)
        except Exception as e:
            if not cannot_store(e):
                raise
            raise InputError(
                f"the rows of a batch of {len(records)} records do not fit one Arrow table "
                f"({type(first).__name__}: {' '.join(str(first).split())[:200]}); pass a smaller batch size"
            ) from e

    def _table(self, records: list[Record], per_record: list[tuple[list[dict], dict | None]]) -> pa.Table:
        rows: list[dict] = []
        error_type: list[str | None] = []
        error: list[str | None] = []
        for rec, (ok, e) in zip(records, per_record):
            rows.extend(ok)
            error_type.extend([None] * len(ok))
            error.extend([None] * len(ok))
            if e is not None and self.keep_errors:
                rows.append(
                    {
                        "id": e["id"],
                        "kind": rec.kind or self.options.kind,
                        "num_nodes": None,
                        "labels": None,
                        "start": None,
                        "end": None,
                        "parent": None,
                        "coords": {},
                    }
                )
                error_type.append(e["error_type"])
                error.append(e["message"])
        schema = output_schema(self.options)
        if not self.keep_errors:
            return conform(rows_to_table(rows), schema)
        return conform(rows_to_table(rows, {"error_type": error_type, "error": error}), schema)

    def __repr__(self) -> str:
        return f"EncodeBatch({self.options!r}, text_column={self.text_column!r}, id_column={self.id_column!r})"
