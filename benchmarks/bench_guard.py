"""The guarded helper's round trip alone (``structpos.parsers._guard.call_guarded``), per stdlib file.

The columns of every stdlib file are computed here first; the helper, forked after, inherits them
and returns file ``i``'s for a call with ``(i, bytes)``: no parse, only what the default mode of
``bench_parse.py`` adds to it per file (arguments out, columns back). Prints CPU time in this
process and in the helper (``/proc``, 10 ms ticks: hence the mean over all ``--repeat`` passes)
and wall time per file.

    python benchmarks/bench_guard.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from bench_parse import helper_cpu, load

from structpos.parsers import code
from structpos.parsers._guard import call_guarded

COLUMNS: list = []


def give(i: int, data: bytes):
    """In the helper: file ``i``'s precomputed columns."""
    return COLUMNS[i]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every 10th stdlib file")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    data, _ = load(args.quick)
    COLUMNS.extend(code._helper_columns("python", b, False, False, None, "x", True) for b in data)  # before the fork
    call_guarded(give, (0, data[0]), time.monotonic() + 60, what="round trip", timeout=60, name="x")  # the fork
    h, p, w = helper_cpu(), time.process_time(), time.perf_counter()
    for _ in range(args.repeat):
        for i, b in enumerate(data):
            call_guarded(give, (i, b), time.monotonic() + 60, what="round trip", timeout=60, name="x")
    n = len(data) * args.repeat / 1e6
    best = ((helper_cpu() - h) / n, (time.process_time() - p) / n, (time.perf_counter() - w) / n)
    print(
        f"{len(data)} files, round trip per file: helper {best[0]:.1f} us CPU, this process {best[1]:.1f} us CPU,"
        f" {best[2]:.1f} us wall"
    )


if __name__ == "__main__":
    main()
