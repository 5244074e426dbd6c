"""Batch encoding pipeline: records -> parse -> coordinates -> sharded Parquet.

* :mod:`.records` — reading JSONL / Parquet / directories as a deterministic record stream;
* :mod:`.encode` — the per-record work and the picklable :class:`EncodeBatch` (HF
  ``datasets.map``, Ray Data ``map_batches``);
* :mod:`.walk` — safe directory walking (regular files only; everything else skipped with a reason);
* :mod:`.shards` — atomic shard writes and the manifest behind ``--resume``;
* :mod:`.isolation` — worker processes with per-record timeout, memory limit and replacement;
* :mod:`.engines` — in-process, isolated worker processes and Ray execution;
* :mod:`.lock` — the exclusive lock on an output directory;
* :mod:`.run` — :func:`encode_to_parquet`, what ``structpos encode`` calls.
"""

from .encode import EncodeBatch, EncodeOptions, encode_payload, encode_records
from .records import Record, read_records
from .run import (
    DEFAULT_SHARD_SIZE,
    EncodeConfig,
    EncodeSummary,
    ResumeError,
    encode_to_parquet,
    read_errors,
    read_output,
)

__all__ = [
    "EncodeBatch",
    "EncodeConfig",
    "EncodeOptions",
    "EncodeSummary",
    "Record",
    "ResumeError",
    "DEFAULT_SHARD_SIZE",
    "encode_payload",
    "encode_records",
    "encode_to_parquet",
    "read_errors",
    "read_output",
    "read_records",
]
