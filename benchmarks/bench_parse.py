"""Code -> coordinates vs bare tree-sitter parsing, on CPython's standard library.

One run: read every stdlib ``.py`` file's bytes first (files that are not valid UTF-8 are
skipped and counted), then time bare ``parser.parse`` over all of them, then time
``parse_code`` + ``tree_coords`` over the same bytes, each phase dropping its results as it goes
(kept alive, the 1,786 bare trees slowed that phase by ~10 %, which flattered the ratio), and print
MB/s, nodes/s and the ratio (goal: full <= 1.3 x bare), in wall time and in process CPU time,
for the compiled parse + walk (``structpos._native_code``, when built) and for the pure-Python
walk (:func:`structpos.native.pure_python`).
``--repeat k`` alternates the phases ``k`` times and keeps each one's best time (the machine may be
shared). ``--quick`` uses every 10th file. ``--in-process`` parses with ``record_timeout=None`` (no
helper process): the CPU ratio then counts the parse, which a helper process's CPU time would hide.
In the default mode a last line per path adds the helper's CPU time (read from ``/proc``, 10 ms
ticks) to this process's, and gives the best wall ratio over the repeats.

    python benchmarks/bench_parse.py [--quick] [--named-only] [--in-process] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sysconfig
import time
from pathlib import Path

import tree_sitter
import tree_sitter_python

from structpos.coords.tree import tree_coords
from structpos.limits import Limits
from structpos.native import native_module, pure_python
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


def helper_cpu() -> float:
    """CPU seconds spent so far by this process's idle parse helpers (``/proc``; 0 where there is none)."""
    from structpos.parsers import _guard

    total = 0
    for helper in list(_guard._pool.idle):
        try:
            fields = Path(f"/proc/{helper.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def stop_helpers() -> None:
    """Stop this process's idle parse helpers (the next guarded parse forks a fresh one)."""
    from structpos.parsers import _guard

    while _guard._pool.idle:
        _guard._pool.idle.pop().stop()


class Clock:
    """Wall time, this process's CPU time (the CPU ratio is steadier on a shared machine) and
    ``both``: that plus the parse helpers' CPU time (10 ms ticks), the whole work in the default mode."""

    def __enter__(self) -> "Clock":
        self.wall, self.cpu, self.both = time.perf_counter(), time.process_time(), helper_cpu()
        return self

    def __exit__(self, *exc) -> None:
        cpu = time.process_time() - self.cpu
        self.both = cpu + helper_cpu() - self.both
        self.wall, self.cpu = time.perf_counter() - self.wall, cpu


def bare(data: list[bytes]) -> tuple[Clock, int]:
    """Bare parses, each tree dropped when the next is made (as ``full`` drops its Structures)."""
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    nodes = 0
    with Clock() as clock:
        for b in data:
            nodes += parser.parse(b).root_node.descendant_count
    return clock, nodes


def full(data: list[bytes], named_only: bool, limits: Limits | None) -> tuple[Clock, float, int]:
    """``parse_code`` + ``tree_coords`` of each file, dropped when the next is made: the clock, the CPU
    seconds of ``tree_coords`` alone and the node count."""
    coords_cpu, nodes = 0.0, 0
    with Clock() as clock:
        for b in data:
            s = parse_code(b, "python", named_only=named_only, limits=limits)
            t = time.process_time()
            tree_coords(s)
            coords_cpu += time.process_time() - t
            nodes += len(s)
    return clock, coords_cpu, nodes


def interleaved(data: list[bytes], named_only: bool, limits: Limits | None) -> tuple[list[float], list[float]]:
    """Per file, wall seconds of a bare parse, then of ``parse_code`` + ``tree_coords`` of the same bytes.

    Timed file by file, the two alternate within milliseconds, so a drift in the machine's speed
    (a shared VM's varies by tens of percent over seconds) hits both alike.
    """
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    bare_s, full_s = [], []
    for b in data:
        t0 = time.perf_counter()
        parser.parse(b)
        t1 = time.perf_counter()
        tree_coords(parse_code(b, "python", named_only=named_only, limits=limits))
        t2 = time.perf_counter()
        bare_s.append(t1 - t0)
        full_s.append(t2 - t1)
    return bare_s, full_s


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every 10th stdlib file")
    ap.add_argument("--named-only", action="store_true", help="parse_code(named_only=True)")
    ap.add_argument("--in-process", action="store_true", help="record_timeout=None: parse in this process")
    ap.add_argument("--repeat", type=int, default=1, help="alternate the phases k times, keep the best")
    args = ap.parse_args(argv)
    data, skipped = load(args.quick)
    mb = sum(map(len, data)) / 1e6
    limits = Limits(record_timeout=None) if args.in_process else None
    parse_code(data[0], "python", limits=limits)  # warm the Language/Parser caches and imports
    paths = ["native", "pure"] if native_module("code") is not None else ["pure"]
    bares: list[Clock] = []
    fulls: dict[str, list[tuple[Clock, float]]] = {p: [] for p in paths}
    per_file: dict[str, list[list[float]]] = {p: [[], []] for p in paths}  # per file, best over the repeats
    nodes = nodes_ts = 0
    for _ in range(args.repeat):
        tb, nodes_ts = bare(data)
        bares.append(tb)
        for path in paths:
            stop_helpers()  # each path's parses run in a helper forked in its own mode, warmed up first
            with pure_python() if path == "pure" else contextlib.nullcontext():
                full(data[:20], args.named_only, limits)
                tf, tc, nodes = full(data, args.named_only, limits)
                pairs = interleaved(data, args.named_only, limits)
            fulls[path].append((tf, tc))
            per_file[path] = [
                [min(a, b) for a, b in zip(old, new)] if old else new for old, new in zip(per_file[path], pairs)
            ]
    tb = min(bares, key=lambda c: c.cpu)
    print(f"{len(data)} stdlib files ({skipped} skipped: not UTF-8), {mb:.1f} MB, {nodes_ts} tree-sitter nodes")
    print(f"bare tree-sitter parse      : {tb.wall:6.2f} s wall {tb.cpu:6.2f} s CPU  {mb / tb.cpu:6.2f} MB/s CPU")
    for path in paths:
        tf, tc = min(fulls[path], key=lambda r: r[0].cpu)
        print(
            f"parse_code+tree_coords {path:6s}: {tf.wall:6.2f} s wall {tf.cpu:6.2f} s CPU  {mb / tf.cpu:6.2f} MB/s CPU"
            f"  ({nodes} nodes{', named only' if args.named_only else ''}; tree_coords {tc:.2f} s CPU)"
        )
        print(
            f"ratio {path:6s} / bare         : {tf.wall / tb.wall:.2f}x wall, {tf.cpu / tb.cpu:.2f}x CPU  (goal <= 1.3x)"
        )
        bare_s, full_s = per_file[path]
        print(
            f"ratio {path:6s} / bare, interleaved file by file: {sum(full_s) / sum(bare_s):.2f}x wall"
            f"  (each file's best of {args.repeat}; {sum(bare_s):.2f} s bare)"
        )
        if not args.in_process:
            best = min(fulls[path], key=lambda r: r[0].both)[0]
            print(
                f"ratio {path:6s} / bare, CPU with the helper's: {best.both / tb.cpu:.2f}x"
                f"  (best wall {min(r[0].wall for r in fulls[path]) / min(c.wall for c in bares):.2f}x)"
            )


if __name__ == "__main__":
    main()
