"""``structpos encode`` throughput: records/s with 1 and 2 workers (goal: speed-up >= 1.7x).

Input: CPython's standard library ``.py`` files (real code, every machine has it), copied
into a temporary directory (``--quick``: every 4th file), encoded as ``--kind code --coords
tree`` (add e.g. ``--coords tree,lap:8`` for a heavier load) with the full pipeline: read,
parse, coordinates, Parquet shards, manifest. Each worker count runs ``--repeat`` times
(best kept: the machine may be shared), process-pool start-up included. Prints records/s,
MB/s of source (anchor: bare tree-sitter parsing runs ~7 MB/s here, ANCHORS.md) and the
2-worker/1-worker ratio against the 1.7x goal.

    python benchmarks/bench_encode.py [--quick] [--coords tree] [--repeat 2] [--engine local|ray]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sysconfig
import tempfile
import time
from pathlib import Path

from structpos.pipeline import encode_to_parquet

GOAL_SPEEDUP = 1.7
ANCHOR_BARE_PARSE_MB_S = 7.0


def stage_input(dst: Path, quick: bool) -> tuple[int, int]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "__pycache__" not in p.parts)
    if quick:
        files = files[::4]
    size = 0
    for p in files:
        rel = p.relative_to(root)
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dst / rel)
        size += p.stat().st_size
    return len(files), size


def run_once(src: Path, workers: int, coords: str, shard_size: int, engine: str) -> tuple[float, int, int]:
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        s = encode_to_parquet(src, out, kind="code", language="python", coords=coords, shard_size=shard_size,
                              workers=workers, engine=engine, progress=False)
        elapsed = time.perf_counter() - t
    assert s.records == s.encoded + s.errors
    return elapsed, s.records, s.errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="every 4th stdlib file")
    ap.add_argument("--coords", default="tree")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=16)
    ap.add_argument("--engine", default="local", choices=["local", "ray"])
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "stdlib"
        n_files, size = stage_input(src, args.quick)
        print(f"input: {n_files} stdlib .py files, {size / 1e6:.1f} MB; coords={args.coords}; "
              f"shard size {args.shard_size}; engine {args.engine}; {os.cpu_count()} CPUs")
        best: dict[int, float] = {}
        for _ in range(args.repeat):
            for workers in (1, 2):
                elapsed, records, errors = run_once(src, workers, args.coords, args.shard_size, args.engine)
                best[workers] = min(best.get(workers, float("inf")), elapsed)
        for workers, elapsed in best.items():
            mb_s = size / 1e6 / elapsed
            print(f"  workers={workers}: {elapsed:6.2f} s  {records / elapsed:7.1f} records/s  {mb_s:5.2f} MB/s "
                  f"({mb_s / ANCHOR_BARE_PARSE_MB_S:.2f}x bare tree-sitter parse anchor)  errors={errors}")
        speedup = best[1] / best[2]
        print(f"speed-up 2 workers / 1 worker: {speedup:.2f}x (goal >= {GOAL_SPEEDUP}x: "
              f"{'met' if speedup >= GOAL_SPEEDUP else 'NOT met'}; ratio to goal {speedup / GOAL_SPEEDUP:.2f})")


if __name__ == "__main__":
    main()
