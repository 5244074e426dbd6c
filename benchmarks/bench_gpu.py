"""CUDA vs CPU for the graph PEs and StructuralRoPE, in one run (issue 24: "a GPU path where CUDA
is available ... ratios vs the CPU path recorded").

Rows (each timed as the best of ``--repeats`` calls after one untimed warm-up call; CUDA calls
end with the results on the host, or with ``torch.cuda.synchronize()`` for RoPE):

1. ``laplacian_pe_batch(k=8)`` on bench_graph's 2,000 graphs of 10–40 nodes (the same generator,
   rebuilt here without PyG): the numpy/LAPACK path (one worker and ``workers=None``) against
   ``device="cuda"`` (``bucket=1``, ``8``, and ``32``, which pads the graphs of <= 32 nodes into
   one stack: cuSOLVER's batched Jacobi ``eigh``, which some torch builds use, takes matrices up
   to 32 only), float64
   and float32. Check (against the CPU path, one worker, ``bucket=1``): the largest eigenvalue
   difference, equal masks and ambiguity flags, and on modes with a simple eigenvalue the
   largest entry difference up to sign and the count of sign flips (the basis of a degenerate
   space is the solver's choice). In float32 a few flips and flag differences are rounding: the
   numpy path shows them too between ``bucket=1`` and ``bucket=8``.
2. ``random_walk_pe_batch(16)`` on the same graphs, float32 and float64. Check: largest
   difference to the CPU path.
3. The 102,400-node grid (LapPE(8)): there is no GPU path for it (``device=`` covers the
   dense size groups; graphs above ``dense_max`` use the CPU sparse solvers). Only stated.
4. ``StructuralRoPE`` (3 axes, sectioned) applied to q and k of shape ``(4, 2048, 16, 128)``:
   float32 on CPU against float32 and bfloat16 on CUDA. Check: largest difference to the CPU
   result (float32).
5. PyG's ``AddLaplacianEigenvectorPE(8)`` / ``AddRandomWalkPE(16)`` per graph on the CPU, as
   anchors, only when ``torch_geometric`` is installed.

Needs only numpy, scipy, torch and this repository. A row that fails prints its error and the run
goes on; rows still waiting after ``--budget`` seconds (default 150) are reported as skipped.
Without CUDA the CUDA rows are reported as skipped; ``--device cpu`` runs the same torch code on
the CPU instead (a dry run of the script).

    python benchmarks/bench_gpu.py [--quick] [--out results.md] [--repeats R] [--budget S]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's structpos


@dataclass
class Row:
    section: str
    name: str
    device: str
    seconds: float | None = None
    check: str = ""
    error: str = ""
    ref: str | None = None  # name of the CPU row it is compared with
    ref_1: str | None = None  # name of the single-threaded CPU row
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------- inputs
def small_graphs(count: int, seed: int = 0, nodes: tuple[int, int] = (10, 40)) -> list[tuple[np.ndarray, int]]:
    """bench_graph.py's graphs without PyG: per graph a random recursive tree plus ``n // 2``
    random extra edges (self-loops dropped), made undirected and coalesced as PyG's
    ``to_undirected`` does (both directions, sorted by (row, col), duplicates removed)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in rng.integers(nodes[0], nodes[1] + 1, count):
        n = int(n)
        parent = [int(rng.integers(0, i)) for i in range(1, n)]
        tree = np.array([parent, list(range(1, n))], dtype=np.int64)
        extra = rng.integers(0, n, (2, n // 2)).astype(np.int64)
        ei = np.concatenate([tree, extra], 1)
        ei = ei[:, ei[0] != ei[1]]
        both = np.concatenate([ei, ei[::-1]], 1)
        key = np.unique(both[0] * n + both[1])
        out.append((np.stack([key // n, key % n]).astype(np.int64), n))
    return out


DEADLINE = [np.inf]  # perf_counter time after which rows are skipped (set by --budget)


def best_of(fn, repeats: int, *, budget_s: float = 8.0, sync: bool = False, warmed_s: float | None = None) -> float:
    """One untimed warm-up call (none when the caller made it, taking ``warmed_s``), then the
    best of ``repeats`` timed calls (fewer when the calls together pass ``budget_s``)."""

    def once() -> float:
        t = time.perf_counter()
        fn()
        if sync:
            torch.cuda.synchronize()
        return time.perf_counter() - t

    first = once() if warmed_s is None else warmed_s
    best, spent = np.inf, first
    for _ in range(repeats):
        if (spent > budget_s or time.perf_counter() > DEADLINE[0]) and best < np.inf:
            break
        t = once()
        best, spent = min(best, t), spent + t
    return best


# ---------------------------------------------------------------- checks
def lap_check(out, ref) -> str:
    """Largest |Δλ|; masks and flags equal; on modes with a simple eigenvalue (gap > 1e-6 to the
    other kept ones, float32: 1e-3) and not ambiguous, the largest |ΔPE| up to each column's
    sign and how many columns came out with the other sign (a float32 eigenvector's largest
    entries can tie within rounding, so its sign rule may pick another entry)."""
    ev, ev_ref = np.asarray(out.eigvals, dtype=np.float64), np.asarray(ref.eigvals, dtype=np.float64)
    same_mask = np.array_equal(np.asarray(out.mask), np.asarray(ref.mask))
    same_amb = np.array_equal(np.asarray(out.ambiguous), np.asarray(ref.ambiguous))
    gap = 1e-3 if np.asarray(ref.pe).dtype == np.float32 else 1e-6
    gaps = np.abs(ev_ref[:, :, None] - ev_ref[:, None, :]) + np.eye(ev.shape[1]) * 9
    simple = np.asarray(ref.mask) & ~np.asarray(ref.ambiguous) & (gaps.min(axis=2) > gap)
    ptr = np.asarray(ref.ptr)
    a, b = np.asarray(out.pe, dtype=np.float64), np.asarray(ref.pe, dtype=np.float64)
    nonempty = np.flatnonzero(np.diff(ptr) > 0)
    same = np.maximum.reduceat(np.abs(a - b), ptr[nonempty], axis=0)  # (graphs, k)
    flipped = np.maximum.reduceat(np.abs(a + b), ptr[nonempty], axis=0)
    sel = simple[nonempty]
    d = np.minimum(same, flipped)[sel]
    flips = int(((flipped < same) & (same > 1e-3))[sel].sum())
    return (
        f"max abs Δλ {np.abs(ev - ev_ref).max():.1e}; masks {'equal' if same_mask else 'DIFFER'}; "
        f"ambiguous {'equal' if same_amb else 'DIFFER'}; simple modes ({sel.sum()} of {int(np.asarray(ref.mask).sum())}): "
        f"max abs ΔPE up to sign {d.max() if d.size else 0:.1e}, {flips} sign flips"
    )


def max_diff(a, b) -> str:
    a = a.float().cpu() if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a, dtype=np.float64))
    b = b.float().cpu() if isinstance(b, torch.Tensor) else torch.as_tensor(np.asarray(b, dtype=np.float64))
    return f"max abs Δ vs CPU {(a.double() - b.double()).abs().max().item():.1e}"


# ---------------------------------------------------------------- rows
def graph_rows(graphs, repeats: int, cuda: bool, dev: str = "cuda") -> list[Row]:
    from structpos.coords.laplacian import laplacian_pe_batch
    from structpos.coords.random_walk import random_walk_pe_batch

    rows: list[Row] = []

    def add(section, name, device, fn, check=None, ref=None, ref_1=None):
        row = Row(section, name, device, ref=ref, ref_1=ref_1)
        rows.append(row)
        if device == dev and dev != "cpu" and not cuda:
            row.error = f"skipped: no {dev}"
            return None
        if time.perf_counter() > DEADLINE[0]:
            row.error = "skipped: past the --budget"
            return None
        try:
            t0 = time.perf_counter()
            result = fn()  # also the warm-up
            row.seconds = best_of(fn, repeats, warmed_s=time.perf_counter() - t0)
            if check is not None:
                row.check = check(result)
            return result
        except Exception as e:  # a failing row is reported, the run goes on
            row.error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            traceback.print_exc()
            return None

    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        sec = f"LapPE(8) {tag}"
        cpu1 = f"lap {tag} CPU workers=1"
        cpu = f"lap {tag} CPU workers=auto"
        ref = add(sec, cpu1, "cpu", lambda dt=dt: laplacian_pe_batch(graphs, 8, dtype=dt, workers=1))
        add(sec, cpu, "cpu", lambda dt=dt: laplacian_pe_batch(graphs, 8, dtype=dt))
        for bucket in (1, 8, 32):
            add(
                sec,
                f"lap {tag} torch {dev} bucket={bucket}",
                dev,
                lambda dt=dt, b=bucket: laplacian_pe_batch(graphs, 8, dtype=dt, bucket=b, device=dev),
                check=(lambda out, ref=ref: lap_check(out, ref)) if ref is not None else None,
                ref=cpu,
                ref_1=cpu1,
            )
    for dt, tag in ((np.float32, "f32"), (np.float64, "f64")):
        sec = f"RWSE(16) {tag}"
        cpu1 = f"rw {tag} CPU workers=1"
        cpu = f"rw {tag} CPU workers=auto"
        ref = add(sec, cpu1, "cpu", lambda dt=dt: random_walk_pe_batch(graphs, 16, dtype=dt, workers=1))
        add(sec, cpu, "cpu", lambda dt=dt: random_walk_pe_batch(graphs, 16, dtype=dt))
        for bucket in (1, 8):
            add(
                sec,
                f"rw {tag} torch {dev} bucket={bucket}",
                dev,
                lambda dt=dt, b=bucket: random_walk_pe_batch(graphs, 16, dtype=dt, bucket=b, device=dev),
                check=(lambda out, ref=ref: max_diff(out[0], ref[0])) if ref is not None else None,
                ref=cpu,
                ref_1=cpu1,
            )
    rows.append(
        Row(
            "102k grid LapPE(8)",
            "320x320 grid",
            "-",
            error="no GPU path: device= covers the dense size groups; graphs above dense_max "
            "use the CPU sparse solvers (shift-invert / Lanczos / AMG-LOBPCG)",
        )
    )
    return rows


def pyg_rows(graphs, repeats: int) -> list[Row]:
    try:
        from torch_geometric.data import Data
        from torch_geometric.transforms import AddLaplacianEigenvectorPE, AddRandomWalkPE
    except ImportError:
        return [Row("PyG anchors", "PyG transforms", "cpu", error="skipped: torch_geometric not installed")]
    data = [Data(edge_index=torch.from_numpy(ei), num_nodes=n) for ei, n in graphs]
    rows = []
    for name, T in (
        ("PyG AddLaplacianEigenvectorPE(8)", AddLaplacianEigenvectorPE(8)),
        ("PyG AddRandomWalkPE(16)", AddRandomWalkPE(16)),
    ):
        row = Row("PyG anchors", name, "cpu")
        if time.perf_counter() > DEADLINE[0]:
            row.error = "skipped: past the --budget"
            rows.append(row)
            continue
        try:
            row.seconds = best_of(lambda T=T: [T(d) for d in data], max(1, repeats - 2), budget_s=6.0)
        except Exception as e:
            row.error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        rows.append(row)
    return rows


def rope_rows(shape, repeats: int, cuda: bool, dev: str = "cuda") -> list[Row]:
    from structpos.encoders import StructuralRoPE

    B, L, H, D = shape
    sec = f"StructuralRoPE apply {shape}"
    rows = [Row(sec, "rope f32 CPU", "cpu")]
    try:
        torch.manual_seed(0)
        q, k = torch.randn(B, L, H, D), torch.randn(B, L, H, D)
        pos = torch.arange(L).expand(B, L)
        coords = torch.stack([pos // 64, pos % 64, pos], dim=-1).contiguous()
        rope = StructuralRoPE(D, 3, allocation="sectioned")
        with torch.no_grad():
            ref = rope(q, k, coords)
            rows[0].seconds = best_of(lambda: rope(q, k, coords), repeats)
    except Exception as e:
        rows[0].error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        return rows
    for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        row = Row(sec, f"rope {tag} {dev}", dev, ref="rope f32 CPU")
        rows.append(row)
        if not cuda:
            row.error = f"skipped: no {dev}"
            continue
        if time.perf_counter() > DEADLINE[0]:
            row.error = "skipped: past the --budget"
            continue
        try:
            rc = rope.to(dev)
            qc, kc, cc = q.to(dev, dtype), k.to(dev, dtype), coords.to(dev)
            with torch.no_grad():
                out = rc(qc, kc, cc)
                row.seconds = best_of(lambda rc=rc, qc=qc, kc=kc, cc=cc: rc(qc, kc, cc), repeats, sync=dev != "cpu")
            row.check = max_diff(out[0], ref[0]) + ", " + max_diff(out[1], ref[1]).replace("max abs Δ vs CPU", "k")
        except Exception as e:
            row.error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            traceback.print_exc()
    return rows


# ---------------------------------------------------------------- report
def fmt_s(t: float | None) -> str:
    return "—" if t is None else (f"{t * 1e3:.2f} ms" if t < 1 else f"{t:.3f} s")


def table(rows: list[Row]) -> list[str]:
    by_name = {r.name: r for r in rows}
    lines = [
        "| work | contender | device | time | CPU (workers=auto) ÷ this | CPU (1 worker) ÷ this | check / note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratios = []
        for ref in (r.ref, r.ref_1):
            base = by_name.get(ref) if ref else None
            ok = base is not None and base.seconds and r.seconds
            ratios.append(f"{base.seconds / r.seconds:.2f}×" if ok else "")
        note = r.error or r.check
        lines.append(
            f"| {r.section} | {r.name} | {r.device} | {fmt_s(r.seconds)} | {ratios[0]} | {ratios[1]} | {note} |"
        )
    return lines


def header(args, count: int, nodes: int, cuda: bool) -> list[str]:
    gpu = torch.cuda.get_device_name(0) if cuda else "none (CUDA not available)"
    try:
        load = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "n/a"
    return [
        f"# bench_gpu.py — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"- GPU: {gpu}; torch {torch.__version__} (CUDA {torch.version.cuda}); numpy {np.__version__}",
        f"- CPU: {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, {platform.processor() or platform.machine()}; "
        f"load average {load}",
        f"- graphs: {count} of {args.nodes.replace(',', '–')} nodes ({nodes} nodes; bench_graph's generator); best of {args.repeats} after a warm-up; "
        f"{'--quick' if args.quick else 'full'}",
        "- ratio columns: CPU time ÷ this row's time (> 1: faster than the CPU path)",
        "",
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="300 graphs, RoPE on (1, 512, 8, 64)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--graphs", type=int, default=None)
    ap.add_argument(
        "--nodes", default="10,40", help="LO,HI: graph sizes drawn uniformly in [LO, HI] (default bench_graph's 10,40)"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument(
        "--budget", type=float, default=150.0, help="seconds after which the remaining rows are skipped (default 150)"
    )
    ap.add_argument(
        "--device", default="cuda", help="device of the torch rows (default cuda; cpu: a dry run of the same code)"
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    DEADLINE[0] = t0 + args.budget
    dev = args.device
    cuda = dev == "cpu" or torch.cuda.is_available()
    count = args.graphs or (300 if args.quick else 2000)
    shape = (1, 512, 8, 64) if args.quick else (4, 2048, 16, 128)
    lo, hi = (int(x) for x in args.nodes.split(","))
    graphs = small_graphs(count, nodes=(lo, hi))
    rows: list[Row] = []
    for part in (
        lambda: graph_rows(graphs, args.repeats, cuda, dev),
        lambda: rope_rows(shape, args.repeats, cuda, dev),
        lambda: pyg_rows(graphs, args.repeats),
    ):
        try:
            rows += part()
        except Exception as e:  # e.g. an import error: reported, the other parts still run
            rows.append(Row("?", "part failed", "-", error=f"{type(e).__name__}: {e}".splitlines()[0][:300]))
            traceback.print_exc()
    lines = header(args, count, sum(n for _, n in graphs), torch.cuda.is_available()) + table(rows)
    lines += ["", f"total wall time {time.perf_counter() - t0:.1f} s"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
