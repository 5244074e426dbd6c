"""``manifest.json``: the finished shards of a run, and what makes ``--resume`` exact.

Only after a shard's files are all in place (:mod:`.shard_io`) does the driver record the shard
in ``manifest.json`` (itself replaced atomically). A shard counts as done when its manifest
entry *and* its files exist; anything else is redone from scratch, and since a shard's content
depends only on its records and the options, redoing it can neither lose nor duplicate a
record, whatever moment a ``kill -9`` struck.

Per shard the manifest keeps ``records = encoded + errors`` (and ``rows``, which exceeds
``encoded`` when a record yields several structures), plus the first and last record id, so
a resume against changed input is refused instead of silently mixing two inputs, and the
SHA-256 of each of the shard's three files (``sha256``), so that a resume re-encodes a shard
whose bytes changed in any way (a flipped byte, another shard's file copied over it), not
only one that no longer reads.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Sequence

import pyarrow.parquet as pq

from ..exceptions import ResumeError
from .records import Record
from .shard_io import _relative, atomic_write_bytes, file_sha256, shard_digest, shard_files
from .shard_writer import ShardResult

__all__ = ["Manifest", "ResumeError", "options_hash", "MANIFEST", "ERRORS"]

MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"
MANIFEST_VERSION = 3
"""3: each shard entry has ``sha256`` (its files' checksums); 2 had none (checked by counts only)."""
MAX_SKIPPED_LISTED = 1000
"""Skipped directory entries listed by path in the manifest (all are counted by reason)."""


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


_OPTION_NAMES = {"limit": "max_records"}
"""How a refused resume names an options key that differs from its option's name."""


def _changed_options(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``"name: old -> new"`` for each option that differs; for a dict (``limits``) only its changed fields.

    Examples
    --------
    >>> _changed_options({"limit": None, "limits": {"a": 1, "b": 2}}, {"limit": 3, "limits": {"a": 1, "b": 5}})
    ['limits.b: 2 -> 5', 'max_records: None -> 3']
    """
    out = []
    for k in sorted(set(before) | set(now)):
        old, new = before.get(k), now.get(k)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            out += [
                f"{k}.{f}: {old.get(f)!r} -> {new.get(f)!r}"
                for f in sorted(set(old) | set(new))
                if old.get(f) != new.get(f)
            ]
        else:
            out.append(f"{_OPTION_NAMES.get(k, k)}: {old!r} -> {new!r}")
    return sorted(out)


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
    >>> from structpos.pipeline.shard_writer import ShardTask, encode_shard
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
        self._rendered: dict[int, tuple[dict, str]] = {}
        """Each shard's entry as last rendered, and its JSON text: a save renders only new or changed entries."""

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
            changed = ", ".join(_changed_options(before, now))
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
        >>> from structpos.pipeline.shard_writer import ShardTask, encode_shard
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
            **{f.name: _plain(getattr(res, f.name)) for f in fields(res) if f.name not in ("index", "seconds")},
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
        head = {
            "version": MANIFEST_VERSION,
            "options": self.options,
            "options_hash": self.hash,
            "shard_size": self.shard_size,
            "complete": self.complete,
            "totals": self.totals(),
            "skipped": _skipped_summary(self.skipped),
        }
        atomic_write_bytes(self.path, (_with_shards(head, self._shard_texts()) + "\n").encode())
        self._saved_at = now

    def _shard_texts(self) -> list[tuple[str, str]]:
        """``(key, JSON text)`` of every shard entry, in order, each rendered once while it is unchanged
        (the manifest is saved while the run goes: rendering every entry each time grows with the square of the shards)."""
        for k in [k for k in self._rendered if k not in self.shards]:
            del self._rendered[k]
        out = []
        for k in sorted(self.shards):
            entry = self.shards[k]
            cached = self._rendered.get(k)
            if cached is None or cached[0] != entry:
                text = json.dumps(entry, indent=1)
                cached = (json.loads(text), text.replace("\n", "\n  "))  # the entry as it was (a copy)
                self._rendered[k] = cached
            out.append((f"{k:05d}", cached[1]))
        return out


def _plain(value: Any) -> Any:
    """A copy of a :class:`ShardResult` field as ``dataclasses.asdict`` gives it (its fields are plain values, a dict of str)."""
    return dict(value) if isinstance(value, dict) else value


def _with_shards(head: dict[str, Any], shards: list[tuple[str, str]]) -> str:
    """``json.dumps({**head, "shards": {key: entry}}, indent=1)``, from the entries' texts already rendered
    (at their depth: two more spaces after each newline; a JSON string holds no raw newline)."""
    body = json.dumps(head, indent=1)
    if not shards:
        return body[:-2] + ',\n "shards": {}\n}' if head else '{\n "shards": {}\n}'
    items = ",\n".join(f"  {json.dumps(key)}: {text}" for key, text in shards)
    lead = body[:-2] + "," if head else "{"
    return f'{lead}\n "shards": {{\n{items}\n }}\n}}'
