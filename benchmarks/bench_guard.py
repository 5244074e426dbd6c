"""The guarded helper's round trip alone (``structpos.parsers._guard``), per stdlib file.

The columns of every stdlib file are computed here first; the helper, forked after, inherits them
and returns file ``i``'s for a call with ``(i, bytes)``: no parse, only what a guarded
``parse_code`` adds to it per file (arguments out, columns back). Two ways: ``call_guarded``
(pickled, the generic path) and ``call_guarded_raw`` (a raw request, the columns as raw buffers:
the path the compiled code parse takes). Prints CPU time in this process and in the helper
(``/proc``, 10 ms ticks: hence the mean over all ``--repeat`` passes) and wall time per file.

    python benchmarks/bench_guard.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import struct
import time

from bench_parse import helper_cpu, load

from structpos.parsers import code
from structpos.parsers._guard import call_guarded, call_guarded_raw

COLUMNS: list = []
_INDEX = struct.Struct("<q")


def give(i: int, data: bytes):
    """In the helper: file ``i``'s precomputed columns."""
    return COLUMNS[i]


def give_raw(request: bytes, data: memoryview) -> tuple[bytes, list]:
    """In the helper: file ``request``'s precomputed columns as raw buffers (as ``code._serve_walk`` returns them)."""
    c = COLUMNS[_INDEX.unpack(request)[0]]
    reply = code._WALK_REPLY.pack(c.has_error, c.nodes, True)
    return reply, [c.kinds, c.starts, c.ends, c.parents, c.field_ids, c.missing]


def _pickled(i: int, b: bytes) -> None:
    call_guarded(give, (i, b), time.monotonic() + 60, what="round trip", timeout=60, name="x")


def _raw(i: int, b: bytes) -> None:
    call_guarded_raw(give_raw, _INDEX.pack(i), b, time.monotonic() + 60, what="round trip", timeout=60, name="x")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every 10th stdlib file")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    data, _ = load(args.quick)
    COLUMNS.extend(code._helper_columns("python", b, False, False, None, "x", True) for b in data)  # before the fork
    _pickled(0, data[0])  # the fork
    for label, call in (("pickled (call_guarded)", _pickled), ("raw (call_guarded_raw)", _raw)):
        h, p, w = helper_cpu(), time.process_time(), time.perf_counter()
        for _ in range(args.repeat):
            for i, b in enumerate(data):
                call(i, b)
        n = len(data) * args.repeat / 1e6
        best = ((helper_cpu() - h) / n, (time.process_time() - p) / n, (time.perf_counter() - w) / n)
        print(
            f"{len(data)} files, {label} round trip per file: helper {best[0]:.1f} us CPU,"
            f" this process {best[1]:.1f} us CPU, {best[2]:.1f} us wall"
        )


if __name__ == "__main__":
    main()
