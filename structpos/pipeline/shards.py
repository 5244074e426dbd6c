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
a resume against changed input is refused instead of silently mixing two inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .arrow import rows_to_table
from .encode import EncodeOptions, conform, encode_records, output_schema
from .records import Record
from ..exceptions import ResumeError

__all__ = ["ShardResult", "Manifest", "ResumeError", "shard_paths", "encode_shard", "write_shard", "options_hash", "atomic_write_bytes"]

MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"
MANIFEST_VERSION = 1


def shard_paths(out_dir: Path, index: int) -> tuple[Path, Path]:
    """``(parquet file, errors file)`` of shard ``index``."""
    return out_dir / f"part-{index:05d}.parquet", out_dir / "errors" / f"part-{index:05d}.jsonl"


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _atomic_write_table(path: Path, table: pa.Table) -> None:
    tmp = _tmp(path)
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


@dataclass
class ShardResult:
    index: int
    records: int
    encoded: int
    errors: int
    rows: int
    first_id: str | None
    last_id: str | None
    seconds: float


def write_shard(out_dir: Path, index: int, table: pa.Table, errors: Sequence[dict]) -> None:
    """Atomically write shard ``index``: its errors file, then its Parquet file."""
    parquet, errfile = shard_paths(out_dir, index)
    lines = "".join(json.dumps({"id": e["id"], "shard": index, **{k: v for k, v in e.items() if k != "id"}}) + "\n" for e in errors)
    atomic_write_bytes(errfile, lines.encode("utf-8"))
    _atomic_write_table(parquet, table)


def encode_shard_table(index: int, records: Sequence[Record], options: EncodeOptions) -> tuple[pa.Table, list[dict], ShardResult]:
    """Encode one shard's records (no I/O): ``(table, errors, result)``."""
    t0 = time.perf_counter()
    rows, errors, n = encode_records(records, options)
    table = conform(rows_to_table(rows), output_schema(options))
    encoded = n - len(errors)
    res = ShardResult(index, n, encoded, len(errors), table.num_rows,
                      records[0].id if records else None, records[-1].id if records else None,
                      time.perf_counter() - t0)
    return table, errors, res


def encode_shard(index: int, records: Sequence[Record], options: EncodeOptions, out_dir: str | Path) -> ShardResult:
    """Encode shard ``index`` and write it atomically (the worker-side unit of the local engines)."""
    table, errors, res = encode_shard_table(index, records, options)
    write_shard(Path(out_dir), index, table, errors)
    return res


def options_hash(options: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the options that determine the output."""
    return hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:16]


class Manifest:
    """``manifest.json``: options, their hash, and one entry per finished shard."""

    def __init__(self, out_dir: Path, options: dict[str, Any], shard_size: int):
        self.out_dir = out_dir
        self.options = options
        self.hash = options_hash({**options, "shard_size": shard_size})
        self.shard_size = shard_size
        self.shards: dict[int, dict] = {}
        self.complete = False
        self._saved_at = 0.0

    @property
    def path(self) -> Path:
        return self.out_dir / MANIFEST

    @classmethod
    def load_for_resume(cls, out_dir: Path, options: dict[str, Any], shard_size: int) -> "Manifest":
        """The manifest to continue, or a fresh one when ``out_dir`` has none.

        Raises :class:`ResumeError` when it was written with other options."""
        m = cls(out_dir, options, shard_size)
        if not m.path.exists():
            return m
        try:
            data = json.loads(m.path.read_text())
        except json.JSONDecodeError as e:  # cannot happen with atomic writes, but say so if it does
            raise ResumeError(f"{m.path}: unreadable manifest ({e})") from None
        if data.get("options_hash") != m.hash:
            raise ResumeError(
                f"{out_dir} was written with different options; refusing to resume.\n"
                f"  before: {json.dumps(data.get('options'), sort_keys=True)} shard_size={data.get('shard_size')}\n"
                f"  now:    {json.dumps(options, sort_keys=True)} shard_size={shard_size}"
            )
        m.shards = {int(k): v for k, v in data.get("shards", {}).items()}
        return m

    def is_done(self, index: int, records: Sequence[Record]) -> bool:
        """Shard ``index`` is finished: entry and files exist, and it holds these records."""
        e = self.shards.get(index)
        if e is None:
            return False
        parquet, errfile = shard_paths(self.out_dir, index)
        if not (parquet.exists() and errfile.exists()):
            del self.shards[index]
            return False
        if e["records"] != len(records) or e["first_id"] != records[0].id or e["last_id"] != records[-1].id:
            raise ResumeError(
                f"shard {index} of {self.out_dir} was made from other input records "
                f"({e['records']} records {e['first_id']!r}..{e['last_id']!r}, now {len(records)} records "
                f"{records[0].id!r}..{records[-1].id!r}); refusing to resume"
            )
        return True

    def add(self, res: ShardResult) -> None:
        parquet, errfile = shard_paths(self.out_dir, res.index)
        self.shards[res.index] = {
            "file": parquet.name,
            "errors_file": f"errors/{errfile.name}",
            **{k: v for k, v in asdict(res).items() if k not in ("index", "seconds")},
        }

    def totals(self) -> dict[str, int]:
        keys = ("records", "encoded", "errors", "rows")
        return {k: sum(int(e[k]) for e in self.shards.values()) for k in keys}

    def save(self, *, min_interval: float = 0.0) -> None:
        """Write the manifest atomically (skipped if the last save is under ``min_interval`` s old)."""
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
            "shards": {f"{k:05d}": self.shards[k] for k in sorted(self.shards)},
        }
        atomic_write_bytes(self.path, (json.dumps(data, indent=1) + "\n").encode())
        self._saved_at = now
