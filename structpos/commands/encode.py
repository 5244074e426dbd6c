"""``structpos encode``: encode a corpus into Parquet shards of per-node coordinates.

Example::

    structpos encode corpus.jsonl --kind code --language python --coords tree,lap:8 --out enc/ --workers 2
    structpos encode enc_input/ --coords tree --out enc/ --resume      # continue a killed run

Output: ``part-NNNNN.parquet`` shards (columns ``id, kind, num_nodes, labels, start, end,
parent`` and one list column per coordinate), ``errors/part-NNNNN.jsonl`` per shard plus the
merged ``errors.jsonl``, and ``manifest.json``. Always: records = encoded + errors.
"""

from __future__ import annotations

import argparse
import json
import sys


def _parser_option(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _with_tokenizer(options: dict, tokenizer: str | None) -> dict:
    """Carry ``--tokenizer`` to the workers inside the parser options (checked here, loaded there)."""
    if tokenizer:
        from ..pipeline.tokens import TOKENIZER_OPTION, load_tokenizer

        load_tokenizer(tokenizer)  # fail fast, before any record is read
        options[TOKENIZER_OPTION] = str(tokenizer)
    return options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "encode",
        help="encode JSONL / Parquet / a directory of files into Parquet shards of coordinates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", help="a .jsonl/.ndjson file, a .parquet file, a directory, or a single file")
    p.add_argument("--kind", help="input kind (code, json, conllu, table, document, graph, ...); "
                   "for directories the default is guessed from each file's suffix")
    p.add_argument("--language", help="code language (default: from the file suffix)")
    p.add_argument("--coords", default="tree", help="coordinate spec, e.g. tree,lap:8,rw:16 (default: tree)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--field", default="text", help="JSONL/Parquet payload field (default: text)")
    p.add_argument("--id-field", help="JSONL/Parquet id field (default: line number / row number)")
    p.add_argument("--glob", help="directory inputs: only files matching this pattern (every one read as --kind)")
    p.add_argument("--parser-opt", action="append", type=_parser_option, default=[], metavar="KEY=VALUE",
                   help="extra parser option (VALUE parsed as JSON when it is JSON); repeatable")
    p.add_argument("--tokenizer", help="local tokenizer.json or tokenizer directory: also write input_ids and "
                   "per-token coordinates (tok_<name>, token_node, token_flags); never downloads")
    p.add_argument("--shard-size", type=int, default=None, help="records per shard (default 1000)")
    p.add_argument("--limit", type=int, help="encode only the first N records")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--engine", choices=["local", "ray"], default="local", help="local processes or Ray (default local)")
    p.add_argument("--ray-address", help="address of an existing Ray cluster (default: start a local one)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help="continue an interrupted run in --out (same options)")
    g.add_argument("--overwrite", action="store_true", help="replace an existing encoding in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..pipeline import DEFAULT_SHARD_SIZE, ResumeError, encode_to_parquet

    try:
        s = encode_to_parquet(
            args.input,
            args.out,
            kind=args.kind,
            coords=args.coords,
            language=args.language,
            field=args.field,
            id_field=args.id_field,
            glob=args.glob,
            parser_options=_with_tokenizer(dict(args.parser_opt), args.tokenizer),
            shard_size=args.shard_size or DEFAULT_SHARD_SIZE,
            limit=args.limit,
            workers=args.workers,
            engine=args.engine,
            ray_address=args.ray_address,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=False if args.no_progress else None,
        )
    except (ResumeError, ValueError, FileNotFoundError, ImportError) as e:
        print(f"structpos encode: error: {e}", file=sys.stderr)
        return 2
    print(
        f"{s.records} records: {s.encoded} encoded ({s.rows} rows), {s.errors} errors; "
        f"{s.shards} shards ({s.shards_skipped} resumed) in {s.seconds:.1f}s "
        f"({s.records_per_second:.0f} records/s) -> {s.out_dir}"
    )
    if s.errors:
        print(f"errors: {s.out_dir / 'errors.jsonl'}", file=sys.stderr)
    return 0 if s.encoded or not s.records else 1
