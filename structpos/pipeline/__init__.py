"""Batch encoding pipeline: records -> parse -> coordinates -> sharded Parquet.

* :mod:`.records` — reading JSONL / Parquet / directories as a deterministic record stream;
* :mod:`.payloads` — what a record's payload and id may be (one rule for the readers and :class:`EncodeBatch`);
* :mod:`.options` — :class:`EncodeOptions` and the checks made before any record is read;
* :mod:`.dispatch` — the parser of a record's kind, called with the hints it takes;
* :mod:`.encode` — the per-record work (parse, coordinates, rows or one error entry);
* :mod:`.timer` — the per-record time budget (``SIGALRM``) in the encoding thread;
* :mod:`.schema` — the Parquet schema, built from the parsers' and coordinate families' column declarations;
* :mod:`.adapters` — the picklable :class:`EncodeBatch` (HF ``datasets.map``, Ray Data ``map_batches``);
* :mod:`.walk` — safe directory walking (regular files only; everything else skipped with a reason);
* :mod:`.shards` — the shard names gathered from :mod:`.shard_io` (a shard's files, written atomically),
  :mod:`.shard_writer` (encoding and writing one shard) and :mod:`.manifest` (the manifest behind ``--resume``);
* :mod:`.isolation` — worker processes with per-record timeout, memory limit and replacement;
* :mod:`.engines` — in-process, isolated worker processes and Ray execution;
* :mod:`.lock` — the exclusive lock on an output directory;
* :mod:`.run` — :func:`encode_to_parquet`, what ``structpos encode`` calls.
"""

from .adapters import EncodeBatch
from .encode import EncodeOptions, encode_payload, encode_records
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
from .schema import output_schema

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
    "output_schema",
    "read_errors",
    "read_output",
    "read_records",
]
