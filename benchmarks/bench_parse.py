"""Code -> coordinates vs bare tree-sitter parsing, on CPython's standard library.

One run: read every stdlib ``.py`` file's bytes first (files that are not valid UTF-8 are
skipped and counted), then time bare ``parser.parse`` over all of them, then time
``parse_code`` + ``tree_coords`` over the same bytes, and print MB/s, nodes/s and the ratio
(goal: full <= 1.5 x bare). A third phase times the pipelined batch API
``iter_parse_code`` (a background thread parses while the caller walks; it only helps with
a second free core). ``--repeat k`` alternates the phases ``k`` times and keeps each one's
best time (the machine may be shared). ``--quick`` uses every 10th file.

    python benchmarks/bench_parse.py [--quick] [--named-only] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sysconfig
import time
from pathlib import Path

import tree_sitter
import tree_sitter_python

from structpos.coords.tree import tree_coords
from structpos.parsers.code import iter_parse_code, parse_code


def load(quick: bool) -> tuple[list[bytes], int]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    if quick:
        files = files[::10]
    data, skipped = [], 0
    for p in files:
        b = p.read_bytes()
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            skipped += 1
            continue
        data.append(b)
    return data, skipped


def bare(data: list[bytes]) -> tuple[float, int]:
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    t = time.perf_counter()
    trees = [parser.parse(b) for b in data]
    elapsed = time.perf_counter() - t
    return elapsed, sum(tr.root_node.descendant_count for tr in trees)


def full(data: list[bytes], named_only: bool) -> tuple[float, float, int]:
    t = time.perf_counter()
    structures = [parse_code(b, "python", named_only=named_only) for b in data]
    t_parse = time.perf_counter() - t
    for s in structures:
        tree_coords(s)
    elapsed = time.perf_counter() - t
    return elapsed, elapsed - t_parse, sum(len(s) for s in structures)


def pipelined(data: list[bytes], named_only: bool) -> float:
    t = time.perf_counter()
    for s in iter_parse_code(data, "python", named_only=named_only):
        tree_coords(s)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every 10th stdlib file")
    ap.add_argument("--named-only", action="store_true", help="parse_code(named_only=True)")
    ap.add_argument("--repeat", type=int, default=1, help="alternate both phases k times, keep the best")
    args = ap.parse_args(argv)
    data, skipped = load(args.quick)
    mb = sum(map(len, data)) / 1e6
    parse_code(data[0])  # warm the Language/Parser caches and imports
    best_bare = best_full = best_coords = best_pipe = float("inf")
    for _ in range(args.repeat):
        tb, nodes_ts = bare(data)
        tf, tc, nodes = full(data, args.named_only)
        tp = pipelined(data, args.named_only)
        best_bare, best_full, best_coords = min(best_bare, tb), min(best_full, tf), min(best_coords, tc)
        best_pipe = min(best_pipe, tp)
    print(f"{len(data)} stdlib files ({skipped} skipped: not UTF-8), {mb:.1f} MB, {nodes_ts} tree-sitter nodes")
    print(f"bare tree-sitter parse : {best_bare:6.2f} s  {mb / best_bare:6.2f} MB/s  {nodes_ts / best_bare / 1e6:5.2f} M nodes/s")
    print(
        f"parse_code+tree_coords: {best_full:6.2f} s  {mb / best_full:6.2f} MB/s  {nodes / best_full / 1e6:5.2f} M nodes/s"
        f"  ({nodes} nodes{', named only' if args.named_only else ''}; tree_coords {best_coords:.2f} s)"
    )
    print(f"iter_parse_code (2 threads) + tree_coords: {best_pipe:6.2f} s  {mb / best_pipe:6.2f} MB/s")
    print(f"ratio full / bare     : {best_full / best_bare:.2f}x  (goal <= 1.5x); pipelined: {best_pipe / best_bare:.2f}x")


if __name__ == "__main__":
    main()
