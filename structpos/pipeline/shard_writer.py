"""Encoding one shard and writing it: :class:`ShardTask` in, :class:`ShardResult` out.

Shard ``i`` is records ``[i*S, (i+1)*S)`` of the input in reading order. :func:`encode_shard`
encodes its records (:func:`~structpos.pipeline.encode.encode_each`) and writes its files
(:func:`~structpos.pipeline.shard_io.write_shard`, each atomically), in the worker that encoded
it; only the counts (:class:`ShardResult`) travel back to the driver.

A shard whose rows Arrow or Parquet refuse as one table (out of memory, more than ``2**31``
values in a column) is written record by record, one row group each; a record whose own rows
cannot be stored becomes an error entry of stage ``memory`` (or ``write``), so one record
with a huge output (``--coords tree:4096`` on a large file) never fails the run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .arrow import rows_to_table
from .encode import EncodeOptions, cannot_store, encode_each, mark_unstorable, store_error
from .records import Record, record_digest
from .schema import conform, output_schema
from .shard_io import _relative, _tmp, file_sha256, shard_digest, shard_files, write_shard

__all__ = [
    "ShardResult",
    "ShardTask",
    "encode_shard",
    "encode_shard_table",
    "write_shard_records",
]


@dataclass
class ShardResult:
    """The counts of one finished shard, as the manifest keeps them.

    Parameters
    ----------
    index : int
        The shard's index.
    records, encoded, errors : int
        Records of the shard (``records == encoded + errors``).
    rows : int
        Rows written (more than ``encoded`` when a record holds several structures).
    first_id, last_id : str or None
        The ids of the shard's first and last records.
    seconds : float
        Time spent encoding it.
    digest : str, optional
        :func:`shard_digest` of its records, set once the shard is written.
    sha256 : dict of str to str, optional
        The SHA-256 of each of its files by path relative to the output directory, set once written.

    Examples
    --------
    >>> import tempfile
    >>> from structpos.pipeline.encode import EncodeOptions
    >>> res = encode_shard(ShardTask(0, [Record("a", "[1]", "a")], EncodeOptions("json", "tree"), tempfile.mkdtemp(), ["d"]))
    >>> res.records == res.encoded + res.errors, res.first_id, res.digest == shard_digest(["a"], ["d"])
    (True, 'a', True)
    """

    index: int
    records: int
    encoded: int
    errors: int
    rows: int
    first_id: str | None
    last_id: str | None
    seconds: float
    digest: str | None = None
    sha256: dict[str, str] | None = None


@dataclass(frozen=True)
class ShardTask:
    """One shard's work: its records, the options, where to write, and errors already known.

    ``digests`` are the records' content hashes (:func:`~structpos.pipeline.records.record_digest`),
    kept in the shard's index file for ``--resume``; ``None`` has them computed where the shard is
    encoded (:meth:`record_digests`: a run that resumes nothing leaves that hashing to its
    workers instead of its driver); ``preset`` maps a record's position to an
    error entry used instead of encoding it (a record that killed a worker, or one in the errors
    of the run being resumed).

    Parameters
    ----------
    index : int
        The shard's index.
    records : sequence of Record
        Its records, in input order.
    options : EncodeOptions
        How to encode them.
    out_dir : str
        The output directory.
    digests : sequence of str or None, optional
        The records' content hashes (``None``: computed from the records when needed).
    preset : dict of int to dict, optional
        Error entries to use instead of encoding the records at these positions.
    retries : int, optional
        How often the shard was started again after a worker died.

    Examples
    --------
    >>> import tempfile
    >>> from structpos.pipeline.encode import EncodeOptions, error_entry
    >>> recs = [Record("a", "[1]", "a"), Record("b", "[2]", "b")]
    >>> known = {1: error_entry(recs[1], "MemoryError", "killed its worker", "worker")}
    >>> task = ShardTask(0, recs, EncodeOptions("json", "tree"), tempfile.mkdtemp(), ["d1", "d2"], known)
    >>> res = encode_shard(task)
    >>> res.encoded, res.errors
    (1, 1)
    """

    index: int
    records: Sequence[Record]
    options: EncodeOptions
    out_dir: str
    digests: Sequence[str] | None = ()
    preset: dict[int, dict] = field(default_factory=dict)
    retries: int = 0

    def record_digests(self) -> Sequence[str]:
        """:attr:`digests`, or when ``None`` each record's :func:`~structpos.pipeline.records.record_digest`.

        Returns
        -------
        sequence of str

        Examples
        --------
        >>> from structpos.pipeline.encode import EncodeOptions
        >>> recs = [Record("a", "[1]", "a")]
        >>> ShardTask(0, recs, EncodeOptions("json", "tree"), "out", None).record_digests() == [record_digest(recs[0])]
        True
        """
        if self.digests is None:
            return [record_digest(r) for r in self.records]
        return self.digests


PerRecord = list[tuple[list[dict], "dict | None"]]
"""``(rows, error entry or None)`` per record of a shard, as :func:`~structpos.pipeline.encode.encode_each` yields them."""


def _rows_table(per_record: PerRecord, records: Sequence[Record]) -> pa.Table:
    """The shard's table; a record whose rows cannot be stored (text Arrow refuses) becomes an error instead.

    Raises what Arrow raised when each record's rows can be stored alone but not all together
    (:func:`write_shard_records` then writes the shard record by record).
    """
    rows = [r for ok, _ in per_record for r in ok]
    try:
        return rows_to_table(rows)
    except Exception as e:  # find the record(s) at fault, one by one
        if not cannot_store(e):
            raise
        mark_unstorable(records, per_record, rows_to_table)
        return rows_to_table([r for ok, _ in per_record for r in ok])


def _conformed(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    try:
        return conform(table, schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return table  # a coordinate of another type than declared: keep it as it is (readers unify schemas)


def _shard_table(per_record: PerRecord, records: Sequence[Record], options: EncodeOptions) -> pa.Table:
    return _conformed(_rows_table(per_record, records), output_schema(options))


def _result(index: int, records: Sequence[Record], per_record: PerRecord, rows: int, t0: float) -> ShardResult:
    n, n_errors = len(records), sum(err is not None for _, err in per_record)
    return ShardResult(
        index,
        n,
        n - n_errors,
        n_errors,
        rows,
        records[0].id if records else None,
        records[-1].id if records else None,
        time.perf_counter() - t0,
    )


def encode_shard_table(
    index: int,
    records: Sequence[Record],
    options: EncodeOptions,
    *,
    preset: Mapping[int, dict] | None = None,
    on_record: Callable[[int], None] | None = None,
) -> tuple[pa.Table, list[dict], ShardResult]:
    """Encode one shard's records (no I/O): ``(table, errors, result)``.

    Parameters
    ----------
    index : int
        The shard's index.
    records : sequence of Record
        Its records.
    options : EncodeOptions
        How to encode them.
    preset : mapping of int to dict, optional
        Error entries to use instead of encoding the records at these positions.
    on_record : callable, optional
        Called with each record's position before it is encoded.

    Returns
    -------
    table : pyarrow.Table
        The rows, conformed to :func:`~structpos.pipeline.schema.output_schema` when possible.
    errors : list of dict
        One entry per failed record.
    result : ShardResult
        The counts (no ``digest`` yet).

    Raises
    ------
    MemoryError, ValueError, pyarrow.ArrowException
        The records' rows can each be stored but not in one table (too large a shard); the
        record-by-record writer of :func:`write_shard_records` can still write them.

    Examples
    --------
    >>> from structpos.pipeline.encode import EncodeOptions
    >>> recs = [Record("a", "[1, 2]", "a"), Record("b", "{", "b")]
    >>> table, errors, res = encode_shard_table(0, recs, EncodeOptions("json", "tree"))
    >>> table.num_rows, [e["id"] for e in errors], res.records
    (1, ['b'], 2)
    """
    t0 = time.perf_counter()
    per_record = list(encode_each(records, options, preset=preset, on_record=on_record))
    table = _shard_table(per_record, records, options)
    errors = [err for _, err in per_record if err is not None]
    return table, errors, _result(index, records, per_record, table.num_rows, t0)


def write_shard_records(
    out_dir: Path,
    index: int,
    records: Sequence[Record],
    per_record: PerRecord,
    options: EncodeOptions,
    digests: Sequence[str] = (),
    *,
    by_record: bool = False,
    on_record: Callable[[int], None] | None = None,
    t0: float | None = None,
) -> ShardResult:
    """Write shard ``index`` from its records' outcomes; rows that cannot be stored become errors.

    First as one table (:func:`write_shard`). When Arrow or Parquet refuse it (out of memory,
    more than ``2**31`` values in a column), or when the rows alone hold more than a quarter of
    ``max_memory_bytes`` (``ONE_TABLE_SHARE``), the Parquet file is written record by record, one
    row group each, so memory holds one record's table at a time; a record whose own rows
    cannot be stored becomes an error entry (stage ``memory`` for ``MemoryError``, else
    ``write``) and the others are still written: ``records = encoded + errors`` holds. I/O
    errors (disk full) are raised.

    Parameters
    ----------
    out_dir : Path
        The output directory.
    index : int
        The shard's index.
    records : sequence of Record
        Its records.
    per_record : list of (rows, error or None)
        Their outcomes (:func:`~structpos.pipeline.encode.encode_each`); updated in place.
    options : EncodeOptions
        The options (for the output schema).
    digests : sequence of str, optional
        The records' content hashes.
    by_record : bool, optional
        Go record by record at once (a worker started again after dying while writing).
    on_record : callable, optional
        Called with a record's position before its rows are written record by record, ``-1`` after.
    t0 : float, optional
        ``time.perf_counter()`` when the shard's encoding started.

    Returns
    -------
    ShardResult
        With its ``digest`` and ``sha256`` set.

    Raises
    ------
    OSError
        A file cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> from structpos.pipeline.encode import EncodeOptions, encode_each
    >>> recs, opts = [Record("a", "[1, 2]", "a"), Record("b", "[", "b")], EncodeOptions("json", "tree")
    >>> res = write_shard_records(Path(tempfile.mkdtemp()), 0, recs, list(encode_each(recs, opts)), opts, ["d1", "d2"])
    >>> res.records, res.encoded, res.errors, res.rows
    (2, 1, 1, 1)
    """
    t0 = time.perf_counter() if t0 is None else t0
    ids = [r.id for r in records]
    sums, rows = None, 0
    budget = options.limits.max_memory_bytes
    if budget is not None and _rows_bytes(per_record) > budget // ONE_TABLE_SHARE:
        by_record = True  # one table (and Parquet's buffers) would take several times the rows' memory
    if not by_record:
        try:
            table = _shard_table(per_record, records, options)
            errors = [err for _, err in per_record if err is not None]
            sums, rows = write_shard(out_dir, index, table, errors, ids, digests), table.num_rows
        except Exception as e:
            if not cannot_store(e):
                raise
    if sums is None:
        sums, rows = _write_by_record(out_dir, index, records, per_record, options, ids, digests, on_record)
    res = _result(index, records, per_record, rows, t0)
    res.sha256, res.digest = sums, shard_digest(ids, digests)
    return res


ONE_TABLE_SHARE = 4
"""A shard whose rows hold more than ``max_memory_bytes / ONE_TABLE_SHARE`` bytes is written record by
record from the start: one Arrow table of it plus Parquet's buffers take a few times the rows'
memory, and an allocation failing inside Arrow's C++ can abort the worker rather than raise."""


def _rows_bytes(per_record: PerRecord) -> int:
    """The bytes of the rows' arrays (coordinates, spans, parents; labels counted as 8 bytes each)."""
    total = 0
    for ok, _ in per_record:
        for row in ok:
            total += sum(getattr(a, "nbytes", 0) for a in row["coords"].values())
            total += sum(getattr(row.get(k), "nbytes", 0) for k in ("start", "end", "parent"))
            labels = row.get("labels")
            total += 8 * len(labels) if labels is not None else 0
    return total


def _record_table(rows: list[dict], schema: pa.Schema | None) -> pa.Table:
    return _conformed(rows_to_table(rows), schema)


def _write_by_record(
    out_dir: Path,
    index: int,
    records: Sequence[Record],
    per_record: PerRecord,
    options: EncodeOptions,
    ids: Sequence[str],
    digests: Sequence[str],
    on_record: Callable[[int], None] | None,
) -> tuple[dict[str, str], int]:
    """The record-by-record writer of :func:`write_shard_records`: ``(sha256 of the files, rows)``."""
    files = shard_files(out_dir, index)
    tmp = _tmp(files.parquet)
    _release_arrow_memory()  # what the failed one-table attempt left in Arrow's pool
    schema = _union_schema(records, per_record, output_schema(options))
    while True:
        rows = _write_row_groups(tmp, records, per_record, schema, on_record)
        if rows is not None:
            break
    try:
        parquet_sum = file_sha256(tmp)
        errors = [err for _, err in per_record if err is not None]
        sums = write_shard(out_dir, index, None, errors, ids, digests)
        os.replace(tmp, files.parquet)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sums[_relative(out_dir, files.parquet)] = parquet_sum
    return sums, rows


def _release_arrow_memory() -> None:
    try:
        pa.default_memory_pool().release_unused()
    except Exception:  # pragma: no cover - an old pyarrow or a pool without it
        pass


def _union_schema(records: Sequence[Record], per_record: PerRecord, schema: pa.Schema | None) -> pa.Schema:
    """The file's schema: the declared one (when known) and every record's columns; a record whose rows
    cannot be made into a table becomes an error here."""
    schemas = [] if schema is None else [schema]
    for k, (ok, _) in enumerate(per_record):
        if ok:
            try:
                schemas.append(_record_table(ok, schema).schema)
            except Exception as e:
                if not cannot_store(e):
                    raise
                per_record[k] = ([], store_error(records[k], e))
    if not schemas:
        return rows_to_table([]).schema
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # records disagree on a column's type: the first wins
        return schemas[0]


def _write_row_groups(
    tmp: Path,
    records: Sequence[Record],
    per_record: PerRecord,
    schema: pa.Schema,
    on_record: Callable[[int], None] | None,
) -> int | None:
    """One row group per record into ``tmp``: the rows written, or ``None`` when a record failed
    inside the writer (it is then an error entry and the file must be written again)."""
    writer = pq.ParquetWriter(tmp, schema, compression="zstd")
    rows, done = 0, False
    try:
        for k, (ok, _) in enumerate(per_record):
            if not ok:
                continue
            if on_record is not None:
                on_record(k)
            try:
                table = conform(rows_to_table(ok), schema)
                if table.schema != schema:
                    raise ValueError(f"its columns {table.schema.names} differ from the shard's {schema.names}")
            except Exception as e:  # before the writer saw it: the file is still good
                if not cannot_store(e):
                    raise
                per_record[k] = ([], store_error(records[k], e))
                continue
            try:
                writer.write_table(table)
            except Exception as e:  # inside the writer: start the file again without this record
                if not cannot_store(e):
                    raise
                per_record[k] = ([], store_error(records[k], e))
                _release_arrow_memory()
                return None
            rows += table.num_rows
        if on_record is not None:
            on_record(-1)
        writer.close()
        done = True
        return rows
    finally:
        if not done:
            try:
                writer.close()
            except Exception:
                pass
            tmp.unlink(missing_ok=True)


def encode_shard(task: ShardTask, *, on_record: Callable[[int], None] | None = None) -> ShardResult:
    """Encode a shard and write it atomically (the worker-side unit of the local engines).

    Rows that cannot be stored (a record whose output is too large) become error entries,
    see :func:`write_shard_records`. A shard started again after its worker died outside
    any record (``task.retries > 0``) is written record by record, with ``on_record``
    naming the record being written.

    Parameters
    ----------
    task : ShardTask
        The shard.
    on_record : callable, optional
        Called with each record's position before it is encoded (and written, record by record).

    Returns
    -------
    ShardResult
        With its ``digest`` set.

    Raises
    ------
    OSError
        The shard's files cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> from structpos.pipeline.encode import EncodeOptions
    >>> recs = [Record("a", "[1, 2]", "a"), Record("b", "[", "b")]
    >>> res = encode_shard(ShardTask(0, recs, EncodeOptions("json", "tree"), tempfile.mkdtemp(), ["d1", "d2"]))
    >>> res.records, res.encoded, res.errors
    (2, 1, 1)
    """
    t0 = time.perf_counter()
    per_record = list(encode_each(task.records, task.options, preset=task.preset, on_record=on_record))
    return write_shard_records(
        Path(task.out_dir),
        task.index,
        task.records,
        per_record,
        task.options,
        task.record_digests(),
        by_record=task.retries > 0,
        on_record=on_record,
        t0=t0,
    )
