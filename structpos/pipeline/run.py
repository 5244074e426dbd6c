"""``encode_to_parquet``: input -> sharded Parquet + manifest + errors, resumable.

The driver reads records in input order, cuts them into shards of ``shard_size``, skips the
shards the manifest already holds (``resume=True``), hands the rest to an engine, and
records each finished shard in the manifest. At the end it checks the invariant
``records = encoded + errors`` over all shards and writes the merged ``errors.jsonl``.
"""

from __future__ import annotations

import itertools
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from .encode import EncodeOptions
from .engines import ENGINES
from .records import Record, count_records, read_records
from .shards import ERRORS, MANIFEST, Manifest, ResumeError, atomic_write_bytes, shard_paths

__all__ = ["EncodeSummary", "encode_to_parquet", "read_output", "read_errors", "ResumeError", "DEFAULT_SHARD_SIZE"]

DEFAULT_SHARD_SIZE = 1000


@dataclass
class EncodeSummary:
    records: int
    encoded: int
    errors: int
    rows: int
    shards: int
    shards_skipped: int
    seconds: float
    out_dir: Path

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")


def _chunks(records: Iterator[Record], size: int) -> Iterator[tuple[int, list[Record]]]:
    for index in itertools.count():
        chunk = list(itertools.islice(records, size))
        if not chunk:
            return
        yield index, chunk


def _prepare_out_dir(out: Path, resume: bool, overwrite: bool) -> None:
    if (out / MANIFEST).exists() and not (resume or overwrite):
        raise ResumeError(f"{out} already holds an encoding; pass --resume to continue it or --overwrite to replace it")
    if overwrite and not resume:
        for p in list(out.glob("part-*.parquet")) + [out / MANIFEST, out / ERRORS]:
            p.unlink(missing_ok=True)
        shutil.rmtree(out / "errors", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    for tmp in list(out.glob(".*.tmp-*")) + list((out / "errors").glob(".*.tmp-*")):
        tmp.unlink(missing_ok=True)  # leftovers of a killed run; never part of the output


def _progress(total: int | None, enabled: bool | None):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the io extra
        return None
    return tqdm(total=total, unit="rec", desc="encode", disable=(not sys.stderr.isatty()) if enabled is None else not enabled, file=sys.stderr)


def encode_to_parquet(
    input: str | Path,
    out_dir: str | Path,
    *,
    kind: str | None,
    coords: str,
    language: str | None = None,
    field: str = "text",
    id_field: str | None = None,
    glob: str | None = None,
    parser_options: Mapping[str, Any] | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    limit: int | None = None,
    workers: int = 1,
    engine: str = "local",
    ray_address: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
) -> EncodeSummary:
    """Encode ``input`` into Parquet shards under ``out_dir`` (see the module docstring).

    Raises :class:`ResumeError` when ``out_dir`` holds another encoding (different options,
    or changed input) and ``ValueError`` for an unknown kind, coordinate family or engine.
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    t0 = time.perf_counter()
    input, out = Path(input), Path(out_dir)
    options = EncodeOptions(kind, coords, language, tuple(sorted((parser_options or {}).items()))).validate()
    described = {
        "input": str(input.resolve()),
        "field": field,
        "id_field": id_field,
        "glob": glob,
        "limit": limit,
        **options.as_dict(),
    }
    _prepare_out_dir(out, resume, overwrite)
    manifest = Manifest.load_for_resume(out, described, shard_size) if resume else Manifest(out, described, shard_size)
    manifest.complete = False
    manifest.save()

    records = read_records(input, kind=kind, language=language, field=field, id_field=id_field, glob=glob)
    if limit is not None:
        records = itertools.islice(records, limit)
    total = count_records(input, kind=kind, language=language, glob=glob)
    if total is not None and limit is not None:
        total = min(total, limit)
    bar = _progress(total, progress)
    n_shards = 0
    skipped = 0

    def pending() -> Iterator[tuple[int, list[Record]]]:
        nonlocal n_shards, skipped
        for index, chunk in _chunks(iter(records), shard_size):
            n_shards = index + 1
            if resume and manifest.is_done(index, chunk):
                skipped += 1
                if bar is not None:
                    bar.update(len(chunk))
                continue
            yield index, chunk

    try:
        for res in ENGINES[engine](pending(), options, out, workers=workers, address=ray_address):
            manifest.add(res)
            manifest.save(min_interval=0.5)
            if bar is not None:
                bar.update(res.records)
                bar.set_postfix(errors=manifest.totals()["errors"], refresh=False)
    finally:
        if bar is not None:
            bar.close()
        manifest.save()

    missing = sorted(set(range(n_shards)) - set(manifest.shards))
    if missing:  # pragma: no cover - an engine that loses a shard is a bug
        raise RuntimeError(f"shards {missing[:10]} were not written")
    for stale in [i for i in manifest.shards if i >= n_shards]:  # the input shrank since the last run
        del manifest.shards[stale]
        for p in shard_paths(out, stale):
            p.unlink(missing_ok=True)
    totals = manifest.totals()
    if totals["records"] != totals["encoded"] + totals["errors"]:  # pragma: no cover - invariant
        raise RuntimeError(f"records {totals['records']} != encoded {totals['encoded']} + errors {totals['errors']}")
    merged = b"".join(shard_paths(out, i)[1].read_bytes() for i in range(n_shards))
    atomic_write_bytes(out / ERRORS, merged)
    manifest.complete = True
    manifest.save()
    return EncodeSummary(totals["records"], totals["encoded"], totals["errors"], totals["rows"], n_shards, skipped, time.perf_counter() - t0, out)


def read_output(out_dir: str | Path) -> pa.Table:
    """All rows of an encoding, shards concatenated in input order (schemas unified)."""
    import json

    out = Path(out_dir)
    data = json.loads((out / MANIFEST).read_text())
    tables = [pq.read_table(out / e["file"]) for _, e in sorted(data["shards"].items())]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def read_errors(out_dir: str | Path) -> list[dict]:
    """The entries of ``errors.jsonl``."""
    import json

    text = (Path(out_dir) / ERRORS).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]
