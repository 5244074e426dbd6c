"""Shards, their atomic writes, and the manifest that makes ``--resume`` exact.

Shard ``i`` is records ``[i*S, (i+1)*S)`` of the input in reading order. Its output is two
files, each written to a temporary name and then ``os.replace``-d into place (atomic on
POSIX): ``errors/part-<i>.jsonl`` first, then ``part-<i>.parquet``. Only after both exist does
the driver record the shard in ``manifest.json`` (itself replaced atomically). A shard counts
as done when its manifest entry *and* its files exist; anything else is redone from scratch,
and since a shard's content depends only on its records and the options, redoing it can
neither lose nor duplicate a record, whatever moment a ``kill -9`` struck.

Per shard the manifest keeps ``records = encoded + errors`` (and ``rows``, which exceeds
``encoded`` when a record yields several structures), plus the first and last record id, so
a resume against changed input is refused instead of silently mixing two inputs, and the
SHA-256 of each of the shard's three files (``sha256``), so that a resume re-encodes a shard
whose bytes changed in any way (a flipped byte, another shard's file copied over it), not
only one that no longer reads.

A shard whose rows Arrow or Parquet refuse as one table (out of memory, more than ``2**31``
values in a column) is written record by record, one row group each; a record whose own rows
cannot be stored becomes an error entry of stage ``memory`` (or ``write``), so one record
with a huge output (``--coords tree:4096`` on a large file) never fails the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import ResumeError
from .arrow import rows_to_table
from .encode import EncodeOptions, cannot_store, encode_each, mark_unstorable, store_error
from .records import Record
from .schema import conform, output_schema

__all__ = [
    "ShardResult",
    "ShardTask",
    "Manifest",
    "ResumeError",
    "ShardFiles",
    "shard_files",
    "encode_shard",
    "encode_shard_table",
    "write_shard",
    "write_shard_records",
    "shard_digest",
    "options_hash",
    "atomic_write_bytes",
    "file_sha256",
]

MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"
MANIFEST_VERSION = 3
"""3: each shard entry has ``sha256`` (its files' checksums); 2 had none (checked by counts only)."""
MAX_SKIPPED_LISTED = 1000
"""Skipped directory entries listed by path in the manifest (all are counted by reason)."""


class ShardFiles(NamedTuple):
    """The three files of one shard (see :func:`shard_files`).

    Examples
    --------
    >>> from pathlib import Path
    >>> files = shard_files(Path("out"), 0)
    >>> files.errors.parent.name, files.index_file.suffix
    ('errors', '.json')
    """

    parquet: Path
    """The rows."""
    errors: Path
    """One JSON line per failed record."""
    index_file: Path
    """The shard's record ids and content hashes."""


def shard_files(out_dir: Path, index: int) -> ShardFiles:
    """The files of shard ``index``: ``part-NNNNN`` in ``out_dir`` and its ``errors/`` and ``index/`` folders.

    Parameters
    ----------
    out_dir : Path
        The output directory.
    index : int
        The shard's index.

    Returns
    -------
    ShardFiles
        ``(parquet, errors, index_file)`` paths.

    Examples
    --------
    >>> from pathlib import Path
    >>> [p.as_posix() for p in shard_files(Path("out"), 3)]
    ['out/part-00003.parquet', 'out/errors/part-00003.jsonl', 'out/index/part-00003.json']
    """
    stem = f"part-{index:05d}"
    return ShardFiles(
        out_dir / f"{stem}.parquet", out_dir / "errors" / f"{stem}.jsonl", out_dir / "index" / f"{stem}.json"
    )


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then ``os.replace`` it into place.

    A reader (or a resumed run) sees the old file or the whole new one, never part of it.

    Parameters
    ----------
    path : Path
        The file to write; its parent directories are created.
    data : bytes

    Raises
    ------
    OSError
        The file cannot be written (disk full, permission).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "sub" / "f.json"
    >>> atomic_write_bytes(p, b"{}")
    >>> p.read_bytes(), [q.name for q in p.parent.iterdir()]
    (b'{}', ['f.json'])
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (hex), read in 1 MiB blocks.

    Parameters
    ----------
    path : Path
        The file.

    Returns
    -------
    str
        64 hex digits.

    Raises
    ------
    OSError
        The file cannot be read.

    Examples
    --------
    >>> import hashlib, tempfile
    >>> p = Path(tempfile.mkdtemp()) / "f"
    >>> _ = p.write_bytes(b"abc")
    >>> file_sha256(p) == hashlib.sha256(b"abc").hexdigest()
    True
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write_bytes_sha256(path: Path, data: bytes) -> str:
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def _atomic_write_table(path: Path, table: pa.Table) -> str:
    """Write ``table`` as Parquet atomically; the SHA-256 of the bytes written."""
    tmp = _tmp(path)
    try:
        pq.write_table(table, tmp, compression="zstd")
        digest = file_sha256(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return digest


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
    kept in the shard's index file for ``--resume``; ``preset`` maps a record's position to an
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
    digests : sequence of str, optional
        The records' content hashes.
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
    digests: Sequence[str] = ()
    preset: dict[int, dict] = field(default_factory=dict)
    retries: int = 0


def shard_digest(ids: Sequence[str], digests: Sequence[str]) -> str:
    """One hash of a shard's record ids and content hashes (what ``--resume`` compares).

    Parameters
    ----------
    ids : sequence of str
        The shard's record ids.
    digests : sequence of str
        Their content hashes.

    Returns
    -------
    str
        32 hex digits.

    Examples
    --------
    >>> shard_digest(["a", "b"], ["01", "02"]) == shard_digest(["a", "b"], ["01", "03"])
    False
    """
    h = hashlib.blake2b(digest_size=16)
    for rid, d in zip(ids, digests):
        h.update(rid.encode("utf-8", "surrogatepass") + b"\0" + d.encode() + b"\n")
    return h.hexdigest()


def write_shard(
    out_dir: Path,
    index: int,
    table: pa.Table | None,
    errors: Sequence[dict],
    ids: Sequence[str] = (),
    digests: Sequence[str] = (),
) -> dict[str, str]:
    """Atomically write shard ``index``: its index file, its errors file, then its Parquet file.

    Parameters
    ----------
    out_dir : Path
        The output directory.
    index : int
        The shard's index.
    table : pyarrow.Table or None
        The shard's rows (``None``: the caller writes the Parquet file itself).
    errors : sequence of dict
        Its error entries (:func:`~structpos.pipeline.encode.error_entry`).
    ids, digests : sequence of str, optional
        Its record ids and content hashes (the index file; an error line gets its record's hash).

    Returns
    -------
    dict of str to str
        The SHA-256 of each file written, by path relative to ``out_dir`` (kept in the manifest).

    Raises
    ------
    OSError
        A file cannot be written.

    Examples
    --------
    >>> import json, tempfile
    >>> import pyarrow as pa
    >>> out = Path(tempfile.mkdtemp())
    >>> sums = write_shard(out, 0, pa.table({"id": ["a"]}), [{"id": "b", "stage": "parse"}], ["a", "b"], ["d1", "d2"])
    >>> sorted(sums) == ["errors/part-00000.jsonl", "index/part-00000.json", "part-00000.parquet"]
    True
    >>> all(file_sha256(out / rel) == h for rel, h in sums.items())
    True
    >>> json.loads(shard_files(out, 0).errors.read_text())
    {'id': 'b', 'shard': 0, 'stage': 'parse', 'digest': 'd2'}
    >>> json.loads(shard_files(out, 0).index_file.read_text())["ids"]
    ['a', 'b']
    """
    files = shard_files(out_dir, index)
    digest_of = dict(zip(ids, digests))
    lines = "".join(
        json.dumps(
            {
                "id": e["id"],
                "shard": index,
                **{k: v for k, v in e.items() if k not in ("id", "digest")},
                "digest": digest_of.get(e["id"]),
            }
        )
        + "\n"
        for e in errors
    )
    index_data = json.dumps({"ids": list(ids), "digests": list(digests)}).encode()
    sums = {
        _relative(out_dir, files.index_file): _atomic_write_bytes_sha256(files.index_file, index_data),
        _relative(out_dir, files.errors): _atomic_write_bytes_sha256(files.errors, lines.encode("utf-8")),
    }
    if table is not None:
        sums[_relative(out_dir, files.parquet)] = _atomic_write_table(files.parquet, table)
    return sums


def _relative(out_dir: Path, path: Path) -> str:
    return path.relative_to(out_dir).as_posix()


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
        task.digests,
        by_record=task.retries > 0,
        on_record=on_record,
        t0=t0,
    )


def _skipped_summary(skipped: Sequence[dict]) -> dict:
    by_reason: dict[str, int] = {}
    for e in skipped:
        key = e["reason"].split(" (")[0].split(":")[0]
        by_reason[key] = by_reason.get(key, 0) + 1
    return {"count": len(skipped), "by_reason": by_reason, "entries": list(skipped[:MAX_SKIPPED_LISTED])}


def _bad_manifest(what: str) -> str:
    return f"not a structpos manifest: {what}; refusing to resume (pass --overwrite to start again)"


_COUNTS = ("records", "encoded", "errors", "rows")


def _shard_entries(shards: Any, path: Path) -> dict[int, dict]:
    """The ``shards`` of a manifest read for ``--resume``, checked: ``{index: entry}`` with integer counts.

    Raises
    ------
    ResumeError
        ``shards`` is not an object of shard entries (an edited or foreign manifest), naming the manifest.
    """
    if not isinstance(shards, dict):
        raise ResumeError(_bad_manifest(f"'shards' is a JSON {type(shards).__name__}, not an object"), name=str(path))
    entries = {}
    for key, entry in shards.items():
        try:
            index = int(key)
        except ValueError:
            index = -1
        if index < 0:
            raise ResumeError(_bad_manifest(f"shard key {key!r} is not a shard index"), name=str(path))
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), int) and not isinstance(entry.get(k), bool) for k in _COUNTS
        ):
            raise ResumeError(
                _bad_manifest(f"shard {key!r} is not an object with integer {', '.join(_COUNTS)}"), name=str(path)
            )
        entries[index] = entry
    return entries


def options_hash(options: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the options that determine the output (16 hex digits).

    Parameters
    ----------
    options : dict
        JSON-serializable options.

    Returns
    -------
    str

    Examples
    --------
    >>> options_hash({"a": 1, "b": 2}) == options_hash({"b": 2, "a": 1})
    True
    >>> options_hash({"a": 1}) == options_hash({"a": 2})
    False
    """
    return hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:16]


class Manifest:
    """``manifest.json``: options, their hash, and one entry per finished shard.

    Parameters
    ----------
    out_dir : Path
        The output directory.
    options : dict
        The options that determine the output (:meth:`EncodeConfig.described`).
    shard_size : int
        Records per shard.

    Examples
    --------
    >>> import tempfile
    >>> from structpos.pipeline.encode import EncodeOptions
    >>> out = Path(tempfile.mkdtemp())
    >>> recs = [Record("a", "[1]", "a")]
    >>> m = Manifest(out, {"coords": "tree"}, shard_size=1)
    >>> m.add(encode_shard(ShardTask(0, recs, EncodeOptions("json", "tree"), str(out), ["d"])))
    >>> m.save()
    >>> m.totals()
    {'records': 1, 'encoded': 1, 'errors': 0, 'rows': 1}
    >>> Manifest.load_for_resume(out, {"coords": "tree"}, 1).is_done(0, recs, ["d"])
    True
    >>> Manifest.load_for_resume(out, {"coords": "lap"}, 1)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ResumeError: ...: written with different options (coords: 'tree' -> 'lap'); ...
    """

    def __init__(self, out_dir: Path, options: dict[str, Any], shard_size: int):
        self.out_dir = out_dir
        self.options = options
        self.hash = options_hash({**options, "shard_size": shard_size})
        self.shard_size = shard_size
        self.shards: dict[int, dict] = {}
        self.skipped: list[dict] = []
        self.complete = False
        self._saved_at = 0.0

    @property
    def path(self) -> Path:
        """``out_dir / "manifest.json"``."""
        return self.out_dir / MANIFEST

    @classmethod
    def load_for_resume(cls, out_dir: Path, options: dict[str, Any], shard_size: int) -> "Manifest":
        """The manifest to continue, or a fresh one when ``out_dir`` has none.

        Parameters
        ----------
        out_dir : Path
            The output directory.
        options : dict
            The options of this run.
        shard_size : int
            Records per shard in this run.

        Returns
        -------
        Manifest
            With the finished shards of the previous run.

        Raises
        ------
        ResumeError
            The manifest was written with other options or shard size (the message lists the
            changes), it cannot be read, or it is not a structpos manifest (``shards`` not an
            object of shard entries with integer counts).

        Examples
        --------
        See :class:`Manifest`.
        """
        m = cls(out_dir, options, shard_size)
        if not m.path.exists():
            return m
        try:
            data = json.loads(m.path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:  # not with atomic writes, but say so if it happens
            raise ResumeError(f"unreadable manifest ({e}); pass --overwrite to start again", name=str(m.path)) from None
        if not isinstance(data, dict):
            raise ResumeError(_bad_manifest(f"a JSON {type(data).__name__}, not an object"), name=str(m.path))
        if data.get("options_hash") != m.hash:
            before = {**(data.get("options") or {}), "shard_size": data.get("shard_size")}
            now = {**options, "shard_size": shard_size}
            changed = ", ".join(
                f"{k}: {before.get(k)!r} -> {now.get(k)!r}"
                for k in sorted(set(before) | set(now))
                if before.get(k) != now.get(k)
            )
            hint = "run with the same options, or pass --overwrite"
            if before.get("shard_size") != shard_size and before.get("shard_size") is not None:
                hint = (
                    f"another --shard-size cuts the input into other shards: resume with --shard-size "
                    f"{before['shard_size']} (a record too large to store becomes an error, it does not stop "
                    "the run), or pass --overwrite"
                )
            raise ResumeError(
                f"written with different options ({changed or 'unknown'}); refusing to resume ({hint})",
                name=str(out_dir),
            )
        m.shards = _shard_entries(data.get("shards", {}), m.path)
        return m

    def is_done(
        self, index: int, records: Sequence[Record], digests: Sequence[str], *, retry_errors: bool = False
    ) -> bool:
        """Shard ``index`` is finished and still right: entry, intact files, the same records
        with the same content, and (with ``retry_errors``) no errors to retry.

        Parameters
        ----------
        index : int
            The shard's index.
        records : sequence of Record
            The records the input now holds for this shard.
        digests : sequence of str
            Their content hashes.
        retry_errors : bool, optional
            Count a shard with errors as not done.

        Returns
        -------
        bool

        Examples
        --------
        See :class:`Manifest`.
        """
        e = self.shards.get(index)
        if e is None:
            return False
        if e.get("digest") != shard_digest([r.id for r in records], digests) or not self._intact(index, e):
            return False
        if "sha256" not in e:  # a shard of a version-2 manifest, intact by its counts: checksummed from now on
            e["sha256"] = {_relative(self.out_dir, p): file_sha256(p) for p in shard_files(self.out_dir, index)}
        return not (retry_errors and e["errors"])

    def _intact(self, index: int, entry: dict) -> bool:
        """The shard's files exist and agree with its entry: their SHA-256 (any changed byte, or
        another shard's file copied over one, redoes the shard), rows and error lines."""
        files = shard_files(self.out_dir, index)
        sums = entry.get("sha256")
        try:
            if sums is not None:  # written by MANIFEST_VERSION >= 3
                if not isinstance(sums, dict) or set(sums) != {_relative(self.out_dir, p) for p in files}:
                    return False
                if any(file_sha256(self.out_dir / rel) != h for rel, h in sums.items()):
                    return False
            rows = pq.read_metadata(files.parquet).num_rows
            n_errors = sum(1 for line in files.errors.read_bytes().splitlines() if line.strip())
            files.index_file.stat()
        except Exception:  # missing, truncated, not Parquet
            return False
        return rows == entry["rows"] and n_errors == entry["errors"]

    def known_errors(self, index: int, records: Sequence[Record], digests: Sequence[str]) -> dict[int, dict]:
        """Errors of the previous run that still hold: ``{position: entry}`` for records of shard
        ``index`` that are unchanged (same id, same content) and were in its errors.

        Parameters
        ----------
        index : int
            The shard's index.
        records : sequence of Record
            The records the input now holds for this shard.
        digests : sequence of str
            Their content hashes.

        Returns
        -------
        dict of int to dict
            Empty when the shard is unknown or its files are damaged (:meth:`is_done`'s checks).

        Examples
        --------
        >>> import tempfile
        >>> from structpos.pipeline.encode import EncodeOptions
        >>> out, recs = Path(tempfile.mkdtemp()), [Record("a", "[1]", "a"), Record("b", "[", "b")]
        >>> m = Manifest(out, {}, shard_size=2)
        >>> m.add(encode_shard(ShardTask(0, recs, EncodeOptions("json", "tree"), str(out), ["d1", "d2"])))
        >>> {k: e["id"] for k, e in m.known_errors(0, recs, ["d1", "d2"]).items()}
        {1: 'b'}
        >>> m.known_errors(0, recs, ["d1", "changed"])
        {}
        """
        if index not in self.shards or not self._intact(index, self.shards[index]):
            return {}  # a damaged errors file is no evidence: its records are encoded again
        try:
            lines = shard_files(self.out_dir, index).errors.read_text().splitlines()
            errors = {e["id"]: e for e in (json.loads(x) for x in lines if x.strip())}
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        known = {}
        for k, (rec, d) in enumerate(zip(records, digests)):
            e = errors.get(rec.id)
            if e is not None and e.get("digest") == d:  # the error of this very content
                known[k] = {key: v for key, v in e.items() if key not in ("shard", "digest")}
        return known

    def drop(self, index: int) -> None:
        """Forget shard ``index`` and delete its files.

        Parameters
        ----------
        index : int
            The shard's index (one not recorded is a no-op).
        """
        self.shards.pop(index, None)
        for p in shard_files(self.out_dir, index):
            p.unlink(missing_ok=True)

    def add(self, res: ShardResult) -> None:
        """Record a finished shard (its files are already in place).

        Parameters
        ----------
        res : ShardResult
            The shard's counts and digest.
        """
        files = shard_files(self.out_dir, res.index)
        self.shards[res.index] = {
            "file": files.parquet.name,
            "errors_file": f"errors/{files.errors.name}",
            "index_file": f"index/{files.index_file.name}",
            **{k: v for k, v in asdict(res).items() if k not in ("index", "seconds")},
        }

    def totals(self) -> dict[str, int]:
        """``records``, ``encoded``, ``errors`` and ``rows`` summed over the finished shards."""
        keys = ("records", "encoded", "errors", "rows")
        return {k: sum(int(e[k]) for e in self.shards.values()) for k in keys}

    def save(self, *, min_interval: float = 0.0) -> None:
        """Write the manifest atomically (skipped if the last save is under ``min_interval`` s old).

        Parameters
        ----------
        min_interval : float, optional
            Seconds; 0 always writes.

        Raises
        ------
        OSError
            The manifest cannot be written.
        """
        now = time.monotonic()
        if min_interval and now - self._saved_at < min_interval:
            return
        data = {
            "version": MANIFEST_VERSION,
            "options": self.options,
            "options_hash": self.hash,
            "shard_size": self.shard_size,
            "complete": self.complete,
            "totals": self.totals(),
            "skipped": _skipped_summary(self.skipped),
            "shards": {f"{k:05d}": self.shards[k] for k in sorted(self.shards)},
        }
        atomic_write_bytes(self.path, (json.dumps(data, indent=1) + "\n").encode())
        self._saved_at = now
