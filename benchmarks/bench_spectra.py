"""Spectra at scale: structpos's checked eigensolver layer vs scipy's methods, in one run.

For k = 8 LapPE modes (the 9 smallest eigenpairs of the normalised Laplacian, the trivial one
dropped) on

* a 1M-node path, a 1M-node 2-D grid (1000 x 1000), a random 4-regular graph (100k nodes),
  a Barabási–Albert graph (100k nodes, m = 3) and a 500 x 500 torus grid (``--quick``: 100k
  path, 300 x 300 grid, 20k regular and BA graphs, 100 x 100 torus),

it times ``laplacian_pe(edge_index, n, 8)`` end to end (from the edge list: Laplacian build,
method choice, solve, checks) against the best of three scipy methods on a **prebuilt**
normalised Laplacian (its build is not timed):

* ``eigsh(L, k=9, which='SA', tol=1e-10)`` (Lanczos),
* ``eigsh(L, k=9, sigma=-1e-6, which='LM', tol=1e-10)`` (shift-invert with scipy's SuperLU;
  σ = −1e-6 is the shift structpos used before, slightly below the trivial eigenvalue 0),
* ``lobpcg(L, X (n x 9, seeded), tol=1e-8, largest=False)`` (plain LOBPCG).

Every contender runs in its own fresh process (``spawn``) with a wall-clock cap
(``--cap`` seconds; killed beyond it, shown as ``>cap``) and an address-space limit
(``--mem-gib``), so a method that stalls or whose factorisation fills in cannot stop the
benchmark; each process reports its own peak RSS. A scipy answer counts as correct when its 8
non-trivial eigenvalues agree with the reference to 1e-6 relative and its residuals are below
1e-6; only correct answers compete for "best scipy".

Correctness columns (structpos): ``resid`` = max ‖Lu − λu‖, ``ortho`` = max |UᵀU − I| (and
|zᵀU| for the trivial mode z), ``Δλ/λ`` = max relative eigenvalue error against the closed form
(path, torus) or, where none exists (grid, regular, BA), against the best correct scipy answer,
``amb`` = modes flagged ambiguous.

    python benchmarks/bench_spectra.py [--quick] [--cap SECONDS] [--only path,grid,...] [--threads T]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
import traceback

import numpy as np

K = 8
TOL = 1e-10
SIGMA = -1e-6


# ---------------------------------------------------------------- graphs
def path_edges(n: int) -> np.ndarray:
    e = np.stack([np.arange(n - 1), np.arange(1, n)])
    return e


def grid_edges(side: int, periodic: bool = False) -> np.ndarray:
    idx = np.arange(side * side).reshape(side, side)
    if periodic:
        h = np.stack([idx.ravel(), np.roll(idx, -1, axis=1).ravel()])
        v = np.stack([idx.ravel(), np.roll(idx, -1, axis=0).ravel()])
    else:
        h = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()])
        v = np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])
    return np.concatenate([h, v], axis=1)


def nx_edges(G) -> np.ndarray:
    return np.array(list(G.edges()), dtype=np.int64).T


def path_reference(n: int) -> np.ndarray:
    """``1 − cos(πj/(n−1))`` written as ``2 sin²(πj/(2(n−1)))``: no cancellation (``1 − cos x``
    loses ~1e-6 relative at ``x ~ 1e-5``)."""
    return 2 * np.sin(np.pi * np.arange(1, K + 1) / (2 * (n - 1))) ** 2


def torus_reference(side: int) -> np.ndarray:
    s = np.sin(np.pi * np.arange(side) / side) ** 2  # (1 − cos 2x) / 2 = sin² x
    lam = np.sort((s[:, None] + s[None, :]).ravel())
    return lam[1 : K + 1]


def build_graphs(quick: bool, workdir: str) -> list[dict]:
    import networkx as nx

    big, mid = (100_000, 20_000) if quick else (1_000_000, 100_000)
    side, tside = (300, 100) if quick else (1000, 500)
    specs = [
        dict(
            name="path",
            label=f"path {big:,}",
            n=big,
            make=lambda: path_edges(big),
            ref=path_reference(big),
            ref_kind="closed form",
        ),
        dict(
            name="grid",
            label=f"grid {side}x{side}",
            n=side * side,
            make=lambda: grid_edges(side),
            ref=None,
            ref_kind="best scipy",
        ),
        dict(
            name="regular",
            label=f"4-regular {mid:,}",
            n=mid,
            make=lambda: nx_edges(nx.random_regular_graph(4, mid, seed=0)),
            ref=None,
            ref_kind="best scipy",
        ),
        dict(
            name="ba",
            label=f"BA(m=3) {mid:,}",
            n=mid,
            make=lambda: nx_edges(nx.barabasi_albert_graph(mid, 3, seed=0)),
            ref=None,
            ref_kind="best scipy",
        ),
        dict(
            name="torus",
            label=f"torus {tside}x{tside}",
            n=tside * tside,
            make=lambda: grid_edges(tside, periodic=True),
            ref=torus_reference(tside),
            ref_kind="closed form",
        ),
    ]
    for s in specs:
        e = s.pop("make")()
        s["path"] = os.path.join(workdir, f"{s['name']}.npy")
        np.save(s["path"], np.concatenate([e, e[::-1]], axis=1))  # both directions (the PyG convention)
        s["edges"] = e.shape[1]
    return specs


# ---------------------------------------------------------------- contenders (run in a child process)
def normalized_laplacian(ei: np.ndarray, n: int):
    import scipy.sparse as sp

    A = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n))
    d = np.asarray(A.sum(1)).ravel()
    dinv = sp.diags(1 / np.sqrt(d))
    return (sp.identity(n) - dinv @ A @ dinv).tocsr(), d


def _child(contender: str, edge_path: str, n: int, mem_gib: float, verbose: bool, conn) -> None:
    try:
        limit = int(mem_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        ei = np.load(edge_path)
        out = run_contender(contender, ei, n, verbose)
        out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        conn.send(out)
    except BaseException as e:
        conn.send(
            {
                "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:120],
                "trace": traceback.format_exc(limit=3),
                "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )


def run_contender(contender: str, ei: np.ndarray, n: int, verbose: bool) -> dict:
    from scipy.sparse.linalg import eigsh, lobpcg

    if contender == "structpos":
        from structpos.coords.laplacian import laplacian_pe

        say = (
            (lambda s: print(f"    [{time.perf_counter() - t0:6.1f}s] {s}", file=sys.stderr, flush=True))
            if verbose
            else None
        )
        t0, c0 = time.perf_counter(), time.process_time()
        r = laplacian_pe(ei, n, K, progress=say)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        L, d = normalized_laplacian(ei, n)  # the checks below are computed independently
        U, w = np.asarray(r.pe), np.asarray(r.eigvals)
        z = np.sqrt(d / d.sum())
        return dict(
            wall=wall,
            cpu=cpu,
            eigvals=w,
            resid=float(np.linalg.norm(L @ U - U * w, axis=0).max()),
            ortho=float(max(np.abs(U.T @ U - np.eye(K)).max(), np.abs(z @ U).max())),
            method="+".join(dict.fromkeys(r.report.methods)),
            notes=list(r.report.notes),
            ambiguous=int(np.asarray(r.ambiguous).sum()),
        )
    L, _ = normalized_laplacian(ei, n)
    rng = np.random.default_rng(0)
    t0, c0 = time.perf_counter(), time.process_time()
    if contender == "eigsh SA":
        w, U = eigsh(L, k=K + 1, which="SA", tol=TOL, v0=rng.standard_normal(n))
    elif contender == "shift-invert":
        w, U = eigsh(L.tocsc(), k=K + 1, sigma=SIGMA, which="LM", tol=TOL, v0=rng.standard_normal(n))
    elif contender == "lobpcg":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w, U = lobpcg(L, rng.standard_normal((n, K + 1)), tol=1e-8, maxiter=100_000, largest=False)
    else:
        raise ValueError(contender)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    order = np.argsort(w)
    w, U = w[order][1:], U[:, order][:, 1:]
    return dict(
        wall=wall,
        cpu=cpu,
        eigvals=w,
        resid=float(np.linalg.norm(L @ U - U * w, axis=0).max()),
        ortho=float(np.abs(U.T @ U - np.eye(K)).max()),
    )


def run_capped(contender: str, g: dict, cap: float, mem_gib: float, verbose: bool) -> dict:
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(contender, g["path"], g["n"], mem_gib, verbose, send))
    t0 = time.perf_counter()
    p.start()
    send.close()
    out = None
    if recv.poll(cap + 30):  # + start-up (imports, loading the edges); the solve itself is timed inside
        try:
            out = recv.recv()
        except EOFError:
            out = None
    if out is None:
        p.kill()
        p.join()
        return {"error": f">{cap:.0f}s" if time.perf_counter() - t0 >= cap else "crashed", "timeout": True}
    p.join()
    if "wall" in out and out["wall"] > cap:
        out["timeout"] = True
    return out


# ---------------------------------------------------------------- report
def rel_err(w: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(w - ref) / np.abs(ref)))


def fmt_time(r: dict, cap: float) -> str:
    if "wall" not in r or r.get("timeout"):
        return r.get("error", "?")[:14] if not r.get("timeout") else f">{cap:.0f}s"
    return f"{r['wall']:.1f}s"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller graphs (100k path, 300x300 grid, 20k ...)")
    ap.add_argument("--cap", type=float, default=None, help="seconds per scipy contender (default 60, quick 20)")
    ap.add_argument("--mem-gib", type=float, default=10.0, help="address-space limit per contender process")
    ap.add_argument("--only", default=None, help="comma-separated graph names: path,grid,regular,ba,torus")
    ap.add_argument("--verbose", action="store_true", help="structpos's progress messages on stderr")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="BLAS/OpenMP threads of every contender (1 is fairer on a machine busy with other work)",
    )
    args = ap.parse_args(argv)
    if args.threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)  # inherited by the spawned contender processes
    cap = args.cap or (20.0 if args.quick else 60.0)
    scipy_methods = ["eigsh SA", "shift-invert", "lobpcg"]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        graphs = build_graphs(args.quick, tmp)
        if args.only:
            graphs = [g for g in graphs if g["name"] in args.only.split(",")]
        print(
            f"k = {K}; graphs built in {time.perf_counter() - t:.1f} s; cap {cap:.0f} s per scipy method; "
            f"{os.cpu_count()} CPUs, BLAS threads {args.threads or 'default'}, "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        rows = []
        for g in graphs:
            res = {"structpos": run_capped("structpos", g, max(cap, 120.0), args.mem_gib, args.verbose)}
            for m in scipy_methods:
                res[m] = run_capped(m, g, cap, args.mem_gib, False)
            rows.append((g, res))
            report_row(g, res, cap, scipy_methods)
        summary(rows, cap, scipy_methods)


def report_row(g: dict, res: dict, cap: float, methods: list[str]) -> None:
    ref, ref_kind = g["ref"], g["ref_kind"]
    correct = {}
    for m in methods:
        r = res[m]
        ok = "wall" in r and not r.get("timeout") and r["resid"] <= 1e-6
        if ok and ref is not None:
            ok = rel_err(r["eigvals"], ref) <= 1e-6
        correct[m] = ok
    if ref is None:
        done = [m for m in methods if correct[m]]
        if done:
            best = min(done, key=lambda m: res[m]["wall"])
            ref = res[best]["eigvals"]
            for m in done:  # a scipy answer must also agree with the other converged ones
                correct[m] = rel_err(res[m]["eigvals"], ref) <= 1e-6
    g["correct"] = correct
    print(f"\n{g['label']}: {g['n']:,} nodes, {g['edges']:,} edges (reference: {ref_kind})")
    print(
        f"  {'contender':14s} {'wall':>9s} {'cpu':>8s} {'peak RSS':>9s} {'resid':>9s} {'ortho':>9s} {'Δλ/λ':>9s}  note"
    )
    for m in ["structpos"] + methods:
        r = res[m]
        if "wall" not in r:
            print(f"  {m:14s} {fmt_time(r, cap):>9s}          {r.get('rss_mib', 0):8.0f}M  {r.get('error', '')}")
            continue
        err = f"{rel_err(r['eigvals'], ref):9.1e}" if ref is not None else f"{'-':>9s}"
        if m == "structpos":
            note = f"method {r['method']}, {r['ambiguous']} ambiguous" + (
                f"; {'; '.join(r['notes'])}" if r["notes"] else ""
            )
        else:
            note = "correct" if correct[m] else ("time cap" if r.get("timeout") else "WRONG / not converged")
        print(
            f"  {m:14s} {fmt_time(r, cap):>9s} {r['cpu']:7.1f}s {r['rss_mib']:8.0f}M {r['resid']:9.1e} "
            f"{r['ortho']:9.1e} {err}  {note}",
            flush=True,
        )
    g["ref_used"] = ref


def summary(rows, cap: float, methods: list[str]) -> None:
    print(f"\n{'summary':22s} {'structpos':>10s} {'best scipy':>22s} {'ratio':>8s} {'correct':>8s} {'RSS':>8s}")
    for g, res in rows:
        ours = res["structpos"]
        ok_methods = [m for m in methods if g["correct"][m]]
        if ok_methods:
            best = min(ok_methods, key=lambda m: res[m]["wall"])
            bt = res[best]["wall"]
            best_s = f"{best} {bt:.1f}s"
        else:
            best, bt = None, cap
            best_s = f"none in {cap:.0f}s"
        if "wall" in ours:
            ref = g["ref_used"]
            ok = (
                ours["resid"] <= 1e-6
                and ours["ortho"] <= 1e-8
                and (ref is None or rel_err(ours["eigvals"], ref) <= 1e-6)
            )
            ratio = ours["wall"] / bt
            ratio_s = f"{ratio:.2f}x" if best else f"<{ratio:.2f}x"
            print(
                f"{g['label']:22s} {ours['wall']:9.1f}s {best_s:>22s} {ratio_s:>8s} {ok!s:>8s} {ours['rss_mib']:7.0f}M"
            )
        else:
            print(f"{g['label']:22s} {ours.get('error', '?'):>10s} {best_s:>22s}")


if __name__ == "__main__":
    main()
