"""``structpos encode`` peak memory against input size: flat, bounded by the shard (issue 24).

Input: a generated JSONL file of Python source records (CPython's standard library ``.py``
files, cycled until the file reaches each ``--sizes`` MB), encoded as ``--kind code --coords
tree`` with the local engine. Every process of the run (driver, workers, their helpers) is
sampled every 0.2 s (:mod:`benchmarks.proctree`): the peak of their summed resident memory
(RSS, shared pages counted once per process: an upper bound), the driver's peak and the largest
single worker's. Beside them the shard's size: the most input bytes any shard held, and the
largest Parquet file written. Memory is flat when the peaks stay put while the input grows.

    python benchmarks/bench_encode_memory.py [--sizes 128,512] [--workers 2] [--shard-size 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.proctree import TreeSampler, load_average
from structpos.pipeline import encode_to_parquet

MB = 1 << 20


def stdlib_sources() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "__pycache__" not in p.parts)
    texts = []
    for p in files:
        try:
            texts.append(p.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return texts


def write_input(path: Path, size_mb: int, sources: list[str], shard_size: int) -> tuple[int, int, int]:
    """A JSONL file of about ``size_mb`` MiB: ``(records, bytes, most bytes in one shard)``."""
    target, written, n, shard_bytes, most = size_mb * MB, 0, 0, 0, 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < target:
            line = json.dumps({"text": sources[n % len(sources)]}) + "\n"
            fh.write(line)
            size = len(line.encode("utf-8"))
            written += size
            shard_bytes += size
            n += 1
            if n % shard_size == 0:
                most, shard_bytes = max(most, shard_bytes), 0
    return n, written, max(most, shard_bytes)


def run(size_mb: int, workers: int, shard_size: int, sources: list[str], tmp: Path) -> dict:
    src = tmp / f"in-{size_mb}.jsonl"
    records, nbytes, shard_in = write_input(src, size_mb, sources, shard_size)
    out = tmp / f"out-{size_mb}"
    with TreeSampler(interval=0.2) as tree:
        t = time.perf_counter()
        s = encode_to_parquet(
            src,
            out,
            kind="code",
            language="python",
            coords="tree",
            shard_size=shard_size,
            workers=workers,
            progress=False,
        )
        wall = time.perf_counter() - t
    parts = sorted(out.glob("part-*.parquet"))
    result = {
        "size_mb": nbytes / MB,
        "records": records,
        "errors": s.errors,
        "shards": len(parts),
        "shard_in_mb": shard_in / MB,
        "largest_parquet_mb": max(p.stat().st_size for p in parts) / MB,
        "output_mb": sum(p.stat().st_size for p in parts) / MB,
        "peak_total_mb": tree.peak_rss_total / MB,
        "peak_driver_mb": tree.peak_rss_self / MB,
        "peak_worker_mb": tree.peak_rss_child / MB,
        "wall": wall,
        "load": os.getloadavg()[0],
    }
    assert s.records == records == s.encoded + s.errors
    for p in [src, *out.rglob("*")]:  # keep the disk free for the next size
        if p.is_file():
            p.unlink()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="128,512", help="input sizes in MiB, comma separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=64)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    sources = stdlib_sources()
    print(f"{len(sources)} stdlib sources cycled; {args.workers} workers; shard size {args.shard_size} records")
    print(f"before: {load_average()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            r = run(size, args.workers, args.shard_size, sources, Path(tmp))
            rows.append(r)
            print(
                f"  input {r['size_mb']:7.1f} MiB, {r['records']} records, {r['shards']} shards "
                f"(most input in a shard {r['shard_in_mb']:.1f} MiB, largest Parquet shard {r['largest_parquet_mb']:.1f} MiB, "
                f"output {r['output_mb']:.0f} MiB): peak RSS all processes {r['peak_total_mb']:.0f} MiB, "
                f"driver {r['peak_driver_mb']:.0f} MiB, largest worker {r['peak_worker_mb']:.0f} MiB; "
                f"{r['wall']:.0f} s; load {r['load']:.1f}",
                flush=True,
            )
    first, last = rows[0], rows[-1]
    print(
        f"input x{last['size_mb'] / first['size_mb']:.1f} -> peak RSS of all processes "
        f"x{last['peak_total_mb'] / first['peak_total_mb']:.2f}, driver x{last['peak_driver_mb'] / first['peak_driver_mb']:.2f}, "
        f"largest worker x{last['peak_worker_mb'] / first['peak_worker_mb']:.2f}"
    )
    print(f"after: {load_average()}")


if __name__ == "__main__":
    main()
