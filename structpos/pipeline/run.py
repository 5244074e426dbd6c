"""``encode_to_parquet``: input -> sharded Parquet + manifest + errors, resumable.

The driver locks the output directory (:mod:`.lock`), reads records in input order, cuts
them into shards of ``shard_size``, skips the shards the manifest already holds with the same
content (``resume=True``; a shard whose records changed, or whose files are damaged, is
encoded again; records already in its errors stay errors unless ``retry_errors``), hands the
rest to an engine, and records each finished shard in the manifest. At the end it checks the
invariant ``records = encoded + errors`` over all shards and writes the merged ``errors.jsonl``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import ResumeError, SpecError
from ..limits import DEFAULT_LIMITS, Limits
from .encode import EncodeOptions
from .engines import ENGINES
from .lock import lock_output
from .manifest import ERRORS, MANIFEST, Manifest
from .records import JSONL_SUFFIXES, PARQUET_SUFFIXES, Record, check_input, count_records, read_records, record_digest
from .shard_io import atomic_write_bytes, shard_files
from .shard_writer import ShardTask
from .trace import span

__all__ = [
    "EncodeConfig",
    "EncodeSummary",
    "encode_to_parquet",
    "read_output",
    "read_errors",
    "ResumeError",
    "DEFAULT_SHARD_SIZE",
]

DEFAULT_SHARD_SIZE = 1000


@dataclass
class EncodeSummary:
    """What a run did: record counts (``records == encoded + errors``), shards, time, skipped files.

    Parameters
    ----------
    records, encoded, errors : int
        Records read, records encoded, records in ``errors.jsonl``.
    rows : int
        Output rows (more than ``encoded`` when a record holds several structures).
    shards, shards_skipped : int
        Shards of the input, and those kept from a previous run (``--resume``).
    seconds : float
        Wall time of the run.
    out_dir : Path
        The output directory.
    files_skipped : int, optional
        Directory entries not read (reasons in ``manifest.json``).

    Examples
    --------
    >>> from pathlib import Path
    >>> s = EncodeSummary(10, 9, 1, 12, 1, 0, 2.0, Path("out"))
    >>> s.records == s.encoded + s.errors, s.records_per_second
    (True, 5.0)
    """

    records: int
    encoded: int
    errors: int
    rows: int
    shards: int
    shards_skipped: int
    seconds: float
    out_dir: Path
    files_skipped: int = 0

    @property
    def records_per_second(self) -> float:
        """Records read per second of wall time (``inf`` for a run of no measurable time)."""
        return self.records / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class EncodeConfig:
    """Every option of :func:`encode_to_parquet` (and of ``structpos encode``).

    What to compute: ``kind``, ``coords``, ``language``, ``parser_options``, ``limits``,
    ``extra_parsers`` (``{kind: "module:function"}``, parsers from outside structpos).
    How to read: ``field``, ``id_field`` (JSONL / Parquet), ``glob``, ``follow_symlinks``
    (directories), ``max_records``. How to run: ``shard_size``, ``workers``, ``engine``,
    ``ray_address``, ``resume``, ``retry_errors``, ``overwrite``, ``progress``.

    Parameters
    ----------
    kind : str, optional
        The input kind (default: each file's own, from its suffix).
    coords : str, optional
        The coordinate spec (default ``"tree"``).
    language : str, optional
        Code language(s), comma separated.
    parser_options : mapping, optional
        More parser keyword arguments.
    limits : Limits, optional
        Per-record limits (size, nodes, time, memory).
    extra_parsers : mapping of str to str, optional
        More input kinds, ``{kind: "module:function"}``.
    field, id_field : str, optional
        JSONL / Parquet: the payload field (default ``"text"``) and the id field (default: line / row number).
    glob : str, optional
        Directories: read only the files matching this pattern, each as ``kind``.
    follow_symlinks : bool, optional
        Directories: follow symlinks.
    max_records : int, optional
        Encode only the first records.
    shard_size : int, optional
        Records per shard.
    workers : int, optional
        Worker processes (0: this process).
    engine : {"local", "ray"}, optional
        Who runs the shards.
    ray_address : str, optional
        An existing Ray cluster.
    resume, retry_errors, overwrite : bool, optional
        Continue a run in the output directory (retrying its errors), or replace it.
    progress : bool, optional
        Show a progress bar (default: when stderr is a terminal).
    tokenizer : str, optional
        A tokenizer path: rows gain ``input_ids`` and per-token coordinates.

    Examples
    --------
    >>> EncodeConfig(kind="json", coords="tree").validate().workers
    1
    >>> EncodeConfig(kind="json", coords="lap:abc").validate()
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --coords lap:abc: k must be an integer >= 1 (got 'abc')
    """

    kind: str | None = None
    coords: str = "tree"
    language: str | None = None
    parser_options: Mapping[str, Any] | None = None
    limits: Limits = DEFAULT_LIMITS
    extra_parsers: Mapping[str, str] | None = None
    field: str = "text"
    id_field: str | None = None
    glob: str | None = None
    follow_symlinks: bool = False
    max_records: int | None = None
    shard_size: int = DEFAULT_SHARD_SIZE
    workers: int = 1
    engine: str = "local"
    ray_address: str | None = None
    resume: bool = False
    retry_errors: bool = False
    overwrite: bool = False
    progress: bool | None = None
    tokenizer: str | None = None

    def encode_options(self) -> EncodeOptions:
        """The per-record options the workers get.

        Returns
        -------
        EncodeOptions

        Examples
        --------
        >>> EncodeConfig(kind="json", coords="lap:2", parser_options={"max_depth": 3}).encode_options().parser_options
        (('max_depth', 3),)
        """
        return EncodeOptions(
            self.kind,
            self.coords,
            self.language,
            tuple(sorted((self.parser_options or {}).items())),
            self.limits,
            tuple(sorted((self.extra_parsers or {}).items())),
            tokenizer=self.tokenizer,
        )

    def validate(self) -> "EncodeConfig":
        """Check every option before any work starts (:class:`~structpos.exceptions.SpecError` naming it).

        Returns
        -------
        EncodeConfig
            ``self``.

        Raises
        ------
        SpecError
            A count out of range, an unknown engine, ``resume`` with ``overwrite``, or a bad
            per-record option (see :meth:`EncodeOptions.validate`).

        Examples
        --------
        >>> EncodeConfig(kind="json", shard_size=0).validate()
        Traceback (most recent call last):
        ...
        structpos.exceptions.SpecError: --shard-size: must be >= 1, got 0
        """
        for name, value, low in (
            ("--shard-size", self.shard_size, 1),
            ("--workers", self.workers, 0),
            ("--max-records", self.max_records, 0),
        ):
            if value is not None and value < low:
                raise SpecError(f"must be >= {low}, got {value}", name=name)
        if self.engine not in ENGINES:
            raise SpecError(f"unknown engine {self.engine!r}; known: {', '.join(ENGINES)}", name="--engine")
        if self.resume and self.overwrite:
            raise SpecError("--resume and --overwrite exclude each other", name="--resume")
        self.encode_options().validate()
        return self

    def described(self, input: Path) -> dict:
        """The options that determine the output (a resume with other ones is refused).

        Parameters
        ----------
        input : Path
            The input (kept as an absolute path).

        Returns
        -------
        dict
            JSON-serializable; how to read the input plus :meth:`EncodeOptions.as_dict`.

        Examples
        --------
        >>> from pathlib import Path
        >>> d = EncodeConfig(kind="json", glob="*.json").described(Path("corpus"))
        >>> d["glob"], d["kind"], Path(d["input"]).is_absolute()
        ('*.json', 'json', True)
        """
        return {
            "input": str(input.resolve()),
            "field": self.field,
            "id_field": self.id_field,
            "glob": self.glob,
            "follow_symlinks": self.follow_symlinks,
            "limit": self.max_records,
            **self.encode_options().as_dict(),
        }


def _chunks(records: Iterator[Record], size: int) -> Iterator[tuple[int, list[Record]]]:
    for index in itertools.count():
        chunk = list(itertools.islice(records, size))
        if not chunk:
            return
        yield index, chunk


def _prepare_out_dir(out: Path, resume: bool, overwrite: bool) -> None:
    if (out / MANIFEST).exists() and not (resume or overwrite):
        raise ResumeError(
            "already holds an encoding; pass --resume to continue it or --overwrite to replace it", name=str(out)
        )
    if overwrite and not resume:
        for p in list(out.glob("part-*.parquet")) + [out / MANIFEST, out / ERRORS]:
            p.unlink(missing_ok=True)
        shutil.rmtree(out / "errors", ignore_errors=True)
        shutil.rmtree(out / "index", ignore_errors=True)
    _remove_partial_writes(out)


def _remove_partial_writes(out: Path) -> None:
    """Delete the temporary files of writers that were killed mid-write (a killed run, a cancelled
    or crashed worker); they are never part of the output."""
    for tmp in list(out.glob(".*.tmp-*")) + list(out.glob("*/.*.tmp-*")):
        tmp.unlink(missing_ok=True)


def _progress(count: Callable[[], int | None], enabled: bool | None):
    """The progress bar, or ``None`` when none is shown (then the input is not counted: a walk of
    the input and tqdm's import are time during which the workers' cores wait)."""
    if not ((sys.stderr.isatty()) if enabled is None else enabled):
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the io extra
        return None
    return tqdm(total=count(), unit="rec", desc="encode", file=sys.stderr)


class _Encoding:
    """One run of :func:`encode_to_parquet` on a locked output directory."""

    def __init__(self, input: Path, out: Path, config: EncodeConfig):
        self.input, self.out, self.config = input, out, config
        self.options = config.encode_options()
        described = config.described(input)
        _prepare_out_dir(out, config.resume, config.overwrite)
        if config.resume:
            self.manifest = Manifest.load_for_resume(out, described, config.shard_size)
        else:
            self.manifest = Manifest(out, described, config.shard_size)
        self.manifest.complete = False
        self.manifest.save()
        self.n_shards = 0
        self.resumed = 0
        self.skipped: list = []
        self.bar = None

    def _selection(self) -> dict[str, Any]:
        """What :func:`read_records` and :func:`count_records` share: which files and records to take."""
        c = self.config
        return {
            "kind": c.kind,
            "language": c.language,
            "glob": c.glob,
            "follow_symlinks": c.follow_symlinks,
            "exclude": [self.out],
        }

    def records(self) -> Iterator[Record]:
        c = self.config
        records = read_records(
            self.input,
            field=c.field,
            id_field=c.id_field,
            max_input_bytes=c.limits.max_input_bytes,
            skipped=self.skipped,
            default_encoding=(c.parser_options or {}).get("default_encoding"),
            **self._selection(),
        )
        return records if c.max_records is None else itertools.islice(records, c.max_records)

    @property
    def _workers_hash(self) -> bool:
        """Whether the workers compute the records' content hashes (:meth:`ShardTask.record_digests`) rather
        than this driver: when nothing is resumed (no hash to compare here) and the workers take every core,
        so that the driver, which shares one with them, does the least; with a core to spare it hashes itself."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return self.config.workers >= cores

    def tasks(self) -> Iterator[ShardTask]:
        """The shards still to encode (those done with the same content are skipped on resume)."""
        workers_hash = not self.config.resume and self._workers_hash
        for index, chunk in _chunks(self.records(), self.config.shard_size):
            self.n_shards = index + 1
            if workers_hash:
                yield ShardTask(index, chunk, self.options, str(self.out), None)
                continue
            digests = [record_digest(r) for r in chunk]
            if self.manifest.is_done(index, chunk, digests, retry_errors=self.config.retry_errors):
                self.resumed += 1
                if self.bar is not None:
                    self.bar.update(len(chunk))
                continue
            known = {} if self.config.retry_errors else self.manifest.known_errors(index, chunk, digests)
            yield ShardTask(index, chunk, self.options, str(self.out), digests, known)

    def encode(self) -> None:
        c = self.config

        def count() -> int | None:
            with span("count"):
                total = count_records(self.input, **self._selection())
            return total if c.max_records is None or total is None else min(total, c.max_records)

        self.bar = _progress(count, c.progress)
        try:
            for res in ENGINES[c.engine](self.tasks(), workers=c.workers, address=c.ray_address):
                with span("manifest", shard=res.index):
                    self.manifest.add(res)
                    self.manifest.skipped = [asdict(s) for s in self.skipped]
                    self.manifest.save(min_interval=0.5)
                if self.bar is not None:
                    self.bar.update(res.records)
                    self.bar.set_postfix(errors=self.manifest.totals()["errors"], refresh=False)
        finally:
            if self.bar is not None:
                self.bar.close()
            self.manifest.save()

    def finish(self) -> dict[str, int]:
        """Drop shards past the input's end, check the invariant, merge the errors, mark complete."""
        m = self.manifest
        m.skipped = [asdict(s) for s in self.skipped]
        missing = sorted(set(range(self.n_shards)) - set(m.shards))
        if missing:  # pragma: no cover - an engine that loses a shard is a bug
            raise RuntimeError(f"shards {missing[:10]} were not written")
        for stale in [i for i in m.shards if i >= self.n_shards]:  # the input shrank since the last run
            m.drop(stale)
        totals = m.totals()
        if totals["records"] != totals["encoded"] + totals["errors"]:  # pragma: no cover - invariant
            raise RuntimeError(
                f"records {totals['records']} != encoded {totals['encoded']} + errors {totals['errors']}"
            )
        merged = b"".join(shard_files(self.out, i).errors.read_bytes() for i in range(self.n_shards))
        atomic_write_bytes(self.out / ERRORS, merged)
        _remove_partial_writes(self.out)  # every shard is in: no writer is left whose file this could be
        m.complete = True
        m.save()
        return totals


def encode_to_parquet(
    input: str | Path, out_dir: str | Path, config: EncodeConfig | None = None, **options: Any
) -> EncodeSummary:
    """Encode ``input`` into Parquet shards under ``out_dir`` (see the module docstring).

    Parameters
    ----------
    input : str or Path
        A JSONL / Parquet file, a directory, or a single file (see :func:`~structpos.pipeline.read_records`).
    out_dir : str or Path
        The output directory (created; locked for the run).
    config : EncodeConfig, optional
        The options; keyword arguments replace single fields (``kind="json", coords="tree"``;
        ``limit=`` is accepted for ``max_records``). With ``workers >= 1`` (the default) records
        are encoded in spawned worker processes, which import the calling script again: a script
        must call this under ``if __name__ == "__main__":``; ``workers=0`` encodes in this process.

    Returns
    -------
    EncodeSummary

    Raises
    ------
    SpecError
        A bad option (before any work starts).
    ResumeError
        ``out_dir`` holds another encoding (different options), or another run holds it.
    OSError
        The output cannot be written (disk full, permission).

    Examples
    --------
    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> src = os.path.join(d, "in.jsonl")
    >>> _ = open(src, "w").write(json.dumps({"text": "[1, [2]]"}) + "\\n" + json.dumps({"text": "[1,"}) + "\\n")
    >>> s = encode_to_parquet(src, os.path.join(d, "out"), kind="json", coords="tree", workers=0, progress=False)
    >>> s.records, s.encoded, s.errors
    (2, 1, 1)
    """
    if "limit" in options:
        options["max_records"] = options.pop("limit")
    config = replace(config or EncodeConfig(), **options).validate()
    t0 = time.perf_counter()
    input, out = check_input(input), Path(out_dir)
    if config.kind is None and input.name.lower().endswith(JSONL_SUFFIXES + PARQUET_SUFFIXES):
        raise SpecError(
            f"{input.name}: the records of a JSONL or Parquet file carry no suffix to tell their kind: pass --kind",
            name="--kind",
        )
    with span("run", busy=False), lock_output(out):
        with span("prepare"):
            run = _Encoding(input, out, config)
        run.encode()
        with span("finish"):
            totals = run.finish()
    return EncodeSummary(
        totals["records"],
        totals["encoded"],
        totals["errors"],
        totals["rows"],
        run.n_shards,
        run.resumed,
        time.perf_counter() - t0,
        out,
        len(run.skipped),
    )


def read_output(out_dir: str | Path) -> pa.Table:
    """All rows of an encoding, shards concatenated in input order (schemas unified).

    Parameters
    ----------
    out_dir : str or Path
        The output directory of :func:`encode_to_parquet`.

    Returns
    -------
    pyarrow.Table
        Empty when no shard was written.

    Raises
    ------
    FileNotFoundError
        ``out_dir`` holds no ``manifest.json``.

    Examples
    --------
    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> src = os.path.join(d, "in.jsonl")
    >>> _ = open(src, "w").write("".join(json.dumps({"text": t}) + "\\n" for t in ["[1]", "[2, [3]]"]))
    >>> _ = encode_to_parquet(src, os.path.join(d, "out"), kind="json", coords="tree", workers=0,
    ...                       shard_size=1, progress=False)
    >>> t = read_output(os.path.join(d, "out"))
    >>> t.column("id").to_pylist(), t.column("num_nodes").to_pylist()
    (['1', '2'], [2, 4])
    """
    out = Path(out_dir)
    data = json.loads((out / MANIFEST).read_text())
    tables = [pq.read_table(out / e["file"]) for _, e in sorted(data["shards"].items())]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def read_errors(out_dir: str | Path) -> list[dict]:
    """The entries of ``errors.jsonl``.

    Parameters
    ----------
    out_dir : str or Path
        The output directory of a finished :func:`encode_to_parquet`.

    Returns
    -------
    list of dict
        One per failed record, in input order (keys ``id``, ``shard``, ``stage``, ``error_type``, ``message``, ...).

    Raises
    ------
    FileNotFoundError
        ``out_dir`` holds no ``errors.jsonl`` (the run has not finished).

    Examples
    --------
    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> src = os.path.join(d, "in.jsonl")
    >>> _ = open(src, "w").write("".join(json.dumps({"text": t}) + "\\n" for t in ["[1]", "[2,"]))
    >>> _ = encode_to_parquet(src, os.path.join(d, "out"), kind="json", coords="tree", workers=0, progress=False)
    >>> [(e["id"], e["stage"], e["error_type"]) for e in read_errors(os.path.join(d, "out"))]
    [('2', 'parse', 'ParseError')]
    """
    text = (Path(out_dir) / ERRORS).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]
