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

The work is split by concept: :mod:`.shard_io` (a shard's files and their atomic writes),
:mod:`.shard_writer` (encoding a shard and writing it, one table or record by record) and
:mod:`.manifest` (the manifest and ``--resume``). This module gathers their public names.
"""

from __future__ import annotations

from ..exceptions import ResumeError
from .manifest import ERRORS as ERRORS
from .manifest import MANIFEST as MANIFEST
from .manifest import MANIFEST_VERSION as MANIFEST_VERSION
from .manifest import MAX_SKIPPED_LISTED as MAX_SKIPPED_LISTED
from .manifest import Manifest, options_hash
from .shard_io import ShardFiles, atomic_write_bytes, file_sha256, shard_digest, shard_files, write_shard
from .shard_writer import (
    ONE_TABLE_SHARE as ONE_TABLE_SHARE,
)
from .shard_writer import (
    PerRecord as PerRecord,
)
from .shard_writer import (
    ShardResult,
    ShardTask,
    encode_shard,
    encode_shard_table,
    write_shard_records,
)

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
