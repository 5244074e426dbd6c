"""``structpos encode``: encode a corpus into Parquet shards of per-node coordinates."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import threading
from typing import Callable

DESCRIPTION = """\
Encode a corpus into Parquet shards of per-node coordinates, unattended: a record that cannot
be read, parsed or encoded, that runs past --record-timeout, exceeds a limit, kills its worker
process or has rows too large to store goes to errors.jsonl and the run goes on. Always: records in = rows' records + error rows.

examples:
  structpos encode corpus.jsonl --kind code --language python --coords tree,lap:8 --out enc/ --workers 2
  structpos encode src/ --kind code --language python,go --out enc/           # a directory of files
  structpos encode graphs.jsonl --kind graph --coords lap:8,rw:16 --id-field name --out g/
  structpos encode src/ --out enc/ --resume                                  # continue a killed run

input formats:
  JSONL (.jsonl, .ndjson)  one record per non-blank line, a JSON object; the payload is its
                           --field (default "text"), the id its --id-field (default: the line
                           number). A payload that is a JSON object is serialized for --kind json.
  graph JSONL              --kind graph: the payload is an object
                             {"edge_index": [[src, ...], [dst, ...]], "num_nodes": N, ...}
                           (edge_index required; other keys are parse_graph options, e.g.
                           num_nodes, directed), for example
                             {"name": "g1", "text": {"edge_index": [[0, 1], [1, 2]], "num_nodes": 3}}
  Parquet (.parquet, .pq)  one record per row: payload column --field, id column --id-field
                           (default: the row number).
  a directory              one record per regular file (a CoNLL-U file: one per sentence, id
                           FILE#sent_id), id = the path relative to the directory, sorted. The
                           kind and language come from --kind/--language, else the suffix (.py
                           .js .java .go .rs .c .cpp .json .xml .yaml .conllu .csv .tsv .html .md
                           .txt); a known suffix also fixes the format (a .csv is read as CSV even
                           if it holds "<table"). With --glob every matching file is read as
                           --kind. Files with an unknown suffix, other kinds or languages,
                           symlinks (unless --follow-symlinks), FIFOs, sockets, devices and
                           unreadable entries are never opened: they are listed with the reason in
                           manifest.json ("skipped").
  any other file           one record (the whole file).

output (in --out):
  part-NNNNN.parquet       columns id, kind, num_nodes, labels, start, end, parent (null unless a
                           tree) and one list column per coordinate.
  errors.jsonl             one line per failed record: id, shard, input, position, stage (read,
                           parse, coords, timeout, memory, worker, write), error_type, message,
                           offset (the position inside the record), digest (its content hash).
  manifest.json            options, per-shard counts, content hashes (index/part-NNNNN.json:
                           record ids and their content hashes) and the SHA-256 of the shard's
                           files, totals, skipped entries.

--resume continues a run killed at any moment (kill -9, Ctrl-C, disk full): finished shards whose
records are unchanged are kept; a shard with a changed record, or files whose bytes changed
(their SHA-256 in manifest.json), is encoded again; records already in errors are not retried
unless --retry-errors. Resuming with other options is refused, except --record-timeout and --limit
max_memory_bytes (they decide only whether a record fails). One run at a time may write --out (an
exclusive lock; the holder is named).

exit status: 0 done; 1 no record could be encoded; 2 bad arguments, input or output directory;
130 interrupted by Ctrl-C or SIGTERM (then continue with --resume).
"""


def parser_option(text: str) -> tuple[str, object]:
    """``--parser-opt KEY=VALUE`` (an argparse ``type=``): VALUE read as JSON when it is JSON, else as text.

    Parameters
    ----------
    text : str
        ``KEY=VALUE``.

    Returns
    -------
    tuple of (str, object)

    Raises
    ------
    argparse.ArgumentTypeError
        No ``=``, or an empty key.

    Examples
    --------
    >>> parser_option("max_depth=3"), parser_option("sep=;"), parser_option('keys=["a"]')
    (('max_depth', 3), ('sep', ';'), ('keys', ['a']))
    """
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def add_parser_opt(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add the repeatable ``--parser-opt KEY=VALUE`` argument (read by :func:`parser_option`) to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
        Where the argument goes; ``args.parser_opt`` is then a list of ``(key, value)`` pairs.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_parser_opt(p)
    >>> p.parse_args(["--parser-opt", "max_depth=2", "--parser-opt", "sep=;"]).parser_opt
    [('max_depth', 2), ('sep', ';')]
    """
    parser.add_argument(
        "--parser-opt",
        action="append",
        type=parser_option,
        default=[],
        metavar="KEY=VALUE",
        help="extra parser option (VALUE parsed as JSON when it is JSON); repeatable",
    )


def _limit_item(text: str) -> tuple[str, str] | int:
    """``--limit NAME=VALUE`` (a resource limit) or ``--limit N`` (old spelling of ``--max-records N``)."""
    key, sep, value = text.partition("=")
    if sep:
        if not key:
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
        return key.strip().replace("-", "_"), value.strip()
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE (e.g. max_nodes=100000) or a record count, got {text!r}"
        ) from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"a record count must be >= 0, got {n}")
    return n


def _int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type=``: an integer ``>= low``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {n}")
        return n

    return parse


_positive_int = _int_at_least(1)
_count = _int_at_least(0)


def _limit_names() -> str:
    from dataclasses import fields

    from ..limits import Limits

    return ", ".join(f"{f.name} ({f.default})" for f in fields(Limits))


def _default_timeout() -> str:
    from ..limits import DEFAULT_LIMITS

    t = DEFAULT_LIMITS.record_timeout
    return "none" if t is None else f"{t:g}"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``structpos encode`` and its arguments (``func`` = :func:`run_command`).

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The subparsers of the ``structpos`` command line (:func:`structpos.cli.build_parser`).

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="structpos")
    >>> add_parser(p.add_subparsers())
    >>> args = p.parse_args(["encode", "in.jsonl", "--out", "enc", "--coords", "lap:4", "--workers", "0"])
    >>> args.coords, args.workers, args.func is run_command
    ('lap:4', 0, True)
    """
    from ..coords import spec_syntax
    from ..parsers import PARSERS

    p = sub.add_parser(
        "encode",
        help="encode JSONL / Parquet / a directory of files into Parquet shards of coordinates",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "input", help="a .jsonl/.ndjson file, a .parquet file, a directory, or a single file (see input formats)"
    )
    what = p.add_argument_group("what to compute")
    what.add_argument(
        "--kind",
        choices=sorted(PARSERS),
        metavar="KIND",
        help=f"input kind: {', '.join(sorted(PARSERS))}; it always wins over content sniffing. "
        "Directories: read only files of this kind (default: every known suffix, each as its kind)",
    )
    what.add_argument(
        "--language",
        help="code language(s), comma separated (python, javascript, java, go, rust, c, cpp); "
        "directories: read only these languages' files (default: from each file's suffix)",
    )
    what.add_argument(
        "--coords",
        default="tree",
        help=f"coordinate spec, comma separated: {spec_syntax()} (default: tree); checked before any work starts",
    )
    add_parser_opt(what)
    what.add_argument(
        "--tokenizer",
        help="a local tokenizer.json or transformers tokenizer directory: also write input_ids and per-token "
        "coordinates (tok_<name>, token_node, token_flags); never downloads",
    )
    src = p.add_argument_group("reading the input")
    src.add_argument("--field", default="text", help="JSONL/Parquet: the payload field (default: text)")
    src.add_argument("--id-field", help="JSONL/Parquet: the record id field (default: the line number / row number)")
    src.add_argument(
        "--glob",
        help="directories: read only files whose relative path or name matches this pattern "
        "(e.g. '*.txt'), each as --kind",
    )
    src.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="directories: follow symlinks (each directory entered once, so loops end); default: skip them",
    )
    src.add_argument("--max-records", type=_count, default=None, metavar="N", help="encode only the first N records")
    lim = p.add_argument_group("limits (per record; an overrun makes the record an error, named in the message)")
    lim.add_argument(
        "--limit",
        action="append",
        type=_limit_item,
        default=[],
        metavar="NAME=VALUE",
        help=f"override a limit ('none' turns it off); repeatable. Names (defaults): {_limit_names()}. "
        "A plain number N is the old spelling of --max-records N",
    )
    lim.add_argument(
        "--record-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"seconds one record may take before it is an error (default {_default_timeout()}, at most 1e6; "
        "same as --limit record_timeout=SECONDS; --limit record_timeout=none turns it off)",
    )
    run = p.add_argument_group("running")
    run.add_argument("--out", required=True, help="output directory (created; locked while the run lasts)")
    run.add_argument("--shard-size", type=_positive_int, default=None, help="records per shard (default 1000)")
    run.add_argument(
        "--workers",
        type=_count,
        default=1,
        help="worker processes (default 1); 0 encodes in this process, without protection from crashes, "
        "hung C code or memory growth (for debugging)",
    )
    run.add_argument(
        "--engine", choices=["local", "ray"], default="local", help="local worker processes or Ray (default local)"
    )
    run.add_argument("--ray-address", help="address of an existing Ray cluster (default: start a local one)")
    g = run.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help="continue an interrupted run in --out (same options)")
    g.add_argument("--overwrite", action="store_true", help="replace an existing encoding in --out")
    run.add_argument("--retry-errors", action="store_true", help="with --resume: encode again the records in errors")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_command)


def config_from_args(args: argparse.Namespace):
    """The :class:`~structpos.pipeline.EncodeConfig` of parsed ``encode`` arguments (validated).

    Parameters
    ----------
    args : argparse.Namespace
        Arguments parsed by the ``encode`` parser (:func:`add_parser`).

    Returns
    -------
    EncodeConfig

    Raises
    ------
    SpecError
        A bad option or combination (``--retry-errors`` without ``--resume``, a bad ``--coords``, ...).

    Examples
    --------
    >>> from structpos.cli import build_parser
    >>> args = build_parser().parse_args(["encode", "in.jsonl", "--out", "o", "--limit", "max_nodes=50", "--limit", "7"])
    >>> config = config_from_args(args)
    >>> config.limits.max_nodes, config.max_records
    (50, 7)
    >>> config_from_args(build_parser().parse_args(["encode", "in", "--out", "o", "--retry-errors"]))
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --retry-errors: only makes sense with --resume
    """
    from ..exceptions import SpecError
    from ..limits import DEFAULT_LIMITS, MAX_RECORD_TIMEOUT
    from ..pipeline import DEFAULT_SHARD_SIZE, EncodeConfig

    overrides: dict[str, str | int | float | None] = dict(x for x in args.limit if isinstance(x, tuple))
    counts = [x for x in args.limit if isinstance(x, int)]
    max_records = args.max_records if args.max_records is not None else (counts[-1] if counts else None)
    if args.record_timeout is not None:
        if not (math.isfinite(args.record_timeout) and 0 < args.record_timeout <= MAX_RECORD_TIMEOUT):
            raise SpecError(
                f"must be a finite number of seconds in (0, {MAX_RECORD_TIMEOUT:g}] "
                f"(--limit record_timeout=none turns it off), got {args.record_timeout:g}",
                name="--record-timeout",
            )
        overrides["record_timeout"] = str(args.record_timeout)
    if args.retry_errors and not args.resume:
        raise SpecError("only makes sense with --resume", name="--retry-errors")
    try:
        limits = DEFAULT_LIMITS.with_overrides(overrides) if overrides else DEFAULT_LIMITS
    except SpecError as e:  # "limit record_timeout: ..." -> "--limit record_timeout: ..."
        raise SpecError(f"--{e}") from None
    return EncodeConfig(
        kind=args.kind,
        coords=args.coords,
        language=args.language,
        parser_options=dict(args.parser_opt),
        tokenizer=str(args.tokenizer) if args.tokenizer else None,
        limits=limits,
        field=args.field,
        id_field=args.id_field,
        glob=args.glob,
        follow_symlinks=args.follow_symlinks,
        max_records=max_records,
        shard_size=args.shard_size or DEFAULT_SHARD_SIZE,
        workers=args.workers,
        engine=args.engine,
        ray_address=args.ray_address,
        resume=args.resume,
        retry_errors=args.retry_errors,
        overwrite=args.overwrite,
        progress=False if args.no_progress else None,
    ).validate()


@contextlib.contextmanager
def _terminate_as_interrupt():
    """``SIGTERM`` (a scheduler ending the job) stops the run like Ctrl-C: workers stopped, manifest saved."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_command(args: argparse.Namespace) -> int:
    """Run ``structpos encode``; errors propagate to :func:`structpos.cli.main` (one line each).

    Prints one summary line; the paths of ``errors.jsonl`` and of the skipped-entry list go to stderr.

    Parameters
    ----------
    args : argparse.Namespace
        Arguments parsed by the ``encode`` parser (:func:`add_parser`).

    Returns
    -------
    int
        0, or 1 when there were records and none could be encoded.

    Raises
    ------
    SpecError, ResumeError, InputError, OSError
        See :func:`~structpos.pipeline.encode_to_parquet`.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from structpos.cli import build_parser
    >>> d = tempfile.mkdtemp()
    >>> src = os.path.join(d, "in.jsonl")
    >>> _ = open(src, "w").write(json.dumps({"text": "[1, 2]"}) + "\\n")
    >>> argv = ["encode", src, "--kind", "json", "--out", os.path.join(d, "o"), "--workers", "0"]
    >>> run_command(build_parser().parse_args(argv))
    1 records: 1 encoded (1 rows), 0 errors; 1 shards (0 resumed) in ...s (... records/s) -> .../o
    0
    """
    from ..pipeline import encode_to_parquet

    config = config_from_args(args)
    with _terminate_as_interrupt():
        s = encode_to_parquet(args.input, args.out, config)
    print(
        f"{s.records} records: {s.encoded} encoded ({s.rows} rows), {s.errors} errors; "
        f"{s.shards} shards ({s.shards_skipped} resumed) in {s.seconds:.1f}s "
        f"({s.records_per_second:.0f} records/s) -> {s.out_dir}"
    )
    if s.files_skipped:
        print(
            f"{s.files_skipped} directory entries skipped (reasons in {s.out_dir / 'manifest.json'})", file=sys.stderr
        )
    if s.errors:
        print(f"errors: {s.out_dir / 'errors.jsonl'}", file=sys.stderr)
    return 0 if s.encoded or not s.records else 1


run = run_command
