"""Code -> coordinates vs bare tree-sitter parsing, on CPython's standard library.

One run: read every stdlib ``.py`` file's bytes first (files that are not valid UTF-8 are
skipped and counted), then time bare ``parser.parse`` over all of them, then time
``parse_code`` + ``tree_coords`` over the same bytes, and print MB/s, nodes/s and the ratio
(goal: full <= 1.5 x bare), in wall time and in process CPU time. ``--repeat k`` alternates the phases ``k`` times and keeps each one's
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
from structpos.parsers.code import parse_code


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


class Clock:
    """Wall time and this process's CPU time (the CPU ratio is steadier on a shared machine)."""

    def __enter__(self) -> "Clock":
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def bare(data: list[bytes]) -> tuple[Clock, int]:
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    with Clock() as clock:
        trees = [parser.parse(b) for b in data]
    return clock, sum(tr.root_node.descendant_count for tr in trees)


def full(data: list[bytes], named_only: bool) -> tuple[Clock, Clock, int]:
    with Clock() as clock:
        structures = [parse_code(b, "python", named_only=named_only) for b in data]
        with Clock() as coords:
            for s in structures:
                tree_coords(s)
    return clock, coords, sum(len(s) for s in structures)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every 10th stdlib file")
    ap.add_argument("--named-only", action="store_true", help="parse_code(named_only=True)")
    ap.add_argument("--repeat", type=int, default=1, help="alternate both phases k times, keep the best")
    args = ap.parse_args(argv)
    data, skipped = load(args.quick)
    mb = sum(map(len, data)) / 1e6
    parse_code(data[0], "python")  # warm the Language/Parser caches and imports
    runs = []
    for _ in range(args.repeat):
        (tb, nodes_ts), (tf, tc, nodes) = bare(data), full(data, args.named_only)
        runs.append((tb, tf, tc))
    tb = min((r[0] for r in runs), key=lambda c: c.wall)
    tf, tc = min(((r[1], r[2]) for r in runs), key=lambda c: c[0].wall)
    print(f"{len(data)} stdlib files ({skipped} skipped: not UTF-8), {mb:.1f} MB, {nodes_ts} tree-sitter nodes")
    print(
        f"bare tree-sitter parse : {tb.wall:6.2f} s  {mb / tb.wall:6.2f} MB/s  {nodes_ts / tb.wall / 1e6:5.2f} M nodes/s"
    )
    print(
        f"parse_code+tree_coords: {tf.wall:6.2f} s  {mb / tf.wall:6.2f} MB/s  {nodes / tf.wall / 1e6:5.2f} M nodes/s"
        f"  ({nodes} nodes{', named only' if args.named_only else ''}; tree_coords {tc.wall:.2f} s)"
    )
    print(f"ratio full / bare     : {tf.wall / tb.wall:.2f}x wall, {tf.cpu / tb.cpu:.2f}x CPU  (goal <= 1.5x)")


if __name__ == "__main__":
    main()
