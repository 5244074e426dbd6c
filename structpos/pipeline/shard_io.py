"""A shard's files and their atomic writes: ``part-<i>.parquet``, ``errors/part-<i>.jsonl``, ``index/part-<i>.json``.

Each file is written to a temporary name beside it and then ``os.replace``-d into place (atomic
on POSIX), so a reader or a resumed run sees the old file or the whole new one, never part of
it. :func:`write_shard` writes the index file, then the errors file, then the Parquet file, and
returns the SHA-256 of each (kept in the manifest, :mod:`.manifest`). :func:`shard_digest` is the
one hash of a shard's record ids and content hashes that ``--resume`` compares.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "ShardFiles",
    "shard_files",
    "atomic_write_bytes",
    "file_sha256",
    "shard_digest",
    "write_shard",
]


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
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as e:  # disk full, permission: no temporary file left, and the message names the file
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None


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
