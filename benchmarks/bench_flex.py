"""Benchmark: structural biases in FlexAttention vs the dense bias + SDPA anchor (CPU, fp32).

Batch 1, 8 heads, head_dim 64, L = 1k, 4k, 8k tokens. Two biases:

* ``tree`` — tree distance (ALiBi-style ``−slope_h·d``) between the AST nodes of real code
  (CPython's ``typing.py`` and following stdlib files, first L regex tokens);
  flex: :func:`structpos.integrations.flex.tree_distance_score_mod` (Euler-tour tables, O(N log N));
  dense: ``tree_distance`` (N×N) gathered to L×L, ``alibi_distance_bias`` → ``(1, 8, L, L)``;
* ``spd`` — shortest-path distance on packed graphs of 256 nodes (Watts–Strogatz), one token per
  node; flex: :func:`~structpos.integrations.flex.spd_score_mod` on a ``(G, 256, 256)`` table;
  dense: the block-diagonal L×L distance matrix → ``(1, 8, L, L)`` bias.

Every (L, method) runs in a fresh process: a warm-up call (compiles flex), then ``--repeat``
timed calls, of which the fastest is reported (wall time, and CPU time of the process: on a
shared machine the CPU time moves much less with the other jobs, notably with ``--threads 1``).
``extra MiB`` is the peak resident memory during the timed calls above the resident memory
before them (Linux ``/proc/self/clear_refs`` + ``VmHWM``), so it includes building the dense bias. Ratios are flex / dense. A run that exceeds
``--timeout`` seconds is reported as such. ``--baseline DIR`` also runs every flex method with
``DIR`` (another checkout of the repository) first on ``PYTHONPATH``, in the same run, interleaved,
to compare a change against the tree before it.

    python benchmarks/bench_flex.py                  # L = 1024 4096 8192
    python benchmarks/bench_flex.py --quick          # L = 256 1024
    PYTHONPATH=. python benchmarks/bench_flex.py --methods dense_tree flex_tree --baseline /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
import warnings
from pathlib import Path

H, D, GRAPH_N = 8, 64, 256
METHODS = ("dense_tree", "flex_tree", "dense_spd", "flex_spd")
CODE_FILES = ["typing.py", "argparse.py", "inspect.py", "subprocess.py"]


def _rss_kib() -> tuple[int, int]:
    vals = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                vals[line.split(":")[0]] = int(line.split()[1])
    return vals["VmRSS"], vals["VmHWM"]


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def tree_inputs(L: int):
    """Per-token nodes of real code (several stdlib files as one forest) and the node-level tree."""
    import numpy as np

    import structpos
    from structpos.align import align

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parents, nodes, base = [], [], 0
    for name in CODE_FILES:
        text = (stdlib / name).read_text()
        tree = structpos.parse(text, "code", language="python")
        offsets = [(m.start(), m.end()) for m in re.finditer(r"\w+|\S", text)]
        node = align(tree, offsets).node
        parents.append(np.where(tree.parent >= 0, tree.parent + base, -1))
        nodes.append(np.where(node >= 0, node + base, -1))
        base += tree.num_nodes
        if sum(len(n) for n in nodes) >= L:
            break
    node = np.concatenate(nodes)[:L]
    node = np.where(node >= 0, node, 0)  # the few tokens outside every node: the first root
    parent = np.concatenate(parents)[: node.max() + 1]  # a preorder prefix is still a forest
    return parent, node


def graph_inputs(L: int):
    import networkx as nx
    import numpy as np

    from structpos.encoders import shortest_path_distance

    G = -(-L // GRAPH_N)
    mats = []
    for g in range(G):
        graph = nx.connected_watts_strogatz_graph(GRAPH_N, 4, 0.1, seed=g)
        ei = np.array(list(graph.edges())).T
        ei = np.concatenate([ei, ei[::-1]], axis=1)
        mats.append(shortest_path_distance(ei, GRAPH_N))
    gid = np.repeat(np.arange(G), GRAPH_N)[:L]
    nid = np.tile(np.arange(GRAPH_N), G)[:L]
    return mats, gid, nid


def child(L: int, method: str, repeat: int = 1, threads: int = 0) -> dict:
    import torch
    import torch.nn.functional as F

    from structpos.encoders import alibi_distance_bias, alibi_slopes, tree_distance
    from structpos.integrations.flex import flex, spd_score_mod, spd_tables, tree_distance_score_mod

    warnings.filterwarnings("ignore")
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, H, L, D) for _ in range(3))
    slopes = alibi_slopes(H)
    if method.endswith("tree"):
        parent, node = tree_inputs(L)
        node_t = torch.as_tensor(node)
        if method == "dense_tree":
            dist_nodes = torch.as_tensor(tree_distance(parent))  # N×N, input of the dense path

            def run():
                bias = alibi_distance_bias(dist_nodes[node_t][:, node_t], H)[None]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        else:
            mod = tree_distance_score_mod(parent, node_t[None], slopes=slopes)

            def run():
                return flex(q, k, v, mod, compile=True)
    else:
        mats, gid, nid = graph_inputs(L)
        spd = spd_tables(mats)
        gid_t, nid_t = torch.as_tensor(gid), torch.as_tensor(nid)
        if method == "dense_spd":

            def run():
                same = gid_t[:, None] == gid_t[None, :]
                d = torch.where(same, spd[gid_t[:, None], nid_t[:, None], nid_t[None, :]], -1)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=alibi_distance_bias(d, H)[None])
        else:
            mod = spd_score_mod(gid_t[None], nid_t[None], spd, slopes=slopes)

            def run():
                return flex(q, k, v, mod, compile=True)

    t0 = time.perf_counter()
    out = run()  # warm-up (compiles flex)
    warm = time.perf_counter() - t0
    del out
    rss0, _ = _rss_kib()
    _reset_peak()
    times, cpu = [], []
    for _ in range(repeat):
        out = None  # only one output alive at a time: the peak is one call's
        t0, c0 = time.perf_counter(), time.process_time()
        out = run()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    _, peak = _rss_kib()
    import structpos

    return {
        "L": L,
        "method": method,
        "threads": torch.get_num_threads(),
        "seconds": min(times),
        "cpu_seconds": min(cpu),
        "times": times,
        "structpos": str(Path(structpos.__file__).parent.parent),
        "first_call_s": warm,
        "extra_mib": (peak - rss0) / 1024,
        "finite": bool(torch.isfinite(out).all()),
    }


def run_one(
    L: int, method: str, timeout: float, repeat: int = 1, pythonpath: str | None = None, threads: int = 0
) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--child", str(L), method, str(repeat), str(threads)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"L": L, "method": method, "error": f"timeout after {timeout:.0f}s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        return {"L": L, "method": method, "error": (p.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(lines[-1])


def fmt(r: dict | None, key: str, spec: str) -> str:
    if r is None or "error" in r:
        return "—"
    return format(r[key], spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="*", default=[1024, 4096, 8192])
    ap.add_argument("--quick", action="store_true", help="L = 256 1024")
    ap.add_argument("--methods", nargs="*", default=list(METHODS), choices=METHODS)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per (L, method) process")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per process; the fastest is reported")
    ap.add_argument("--baseline", metavar="DIR", help="also run the flex methods with DIR first on PYTHONPATH")
    ap.add_argument("--threads", type=int, default=0, help="torch threads in every process (default: torch's)")
    ap.add_argument("--child", nargs=4, metavar=("L", "METHOD", "REPEAT", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        L, method, repeat, threads = args.child
        print(json.dumps(child(int(L), method, int(repeat), int(threads))), flush=True)
        return 0
    lengths = [256, 1024] if args.quick else args.lengths
    print(
        f"FlexAttention structural bias vs dense bias + SDPA: B=1, H={H}, D={D}, fp32, CPU "
        f"(each row: fresh process, warm-up then the fastest of {args.repeat} timed calls; "
        f"threads {args.threads or 'default'})"
    )
    runs = [(m, m, None) for m in args.methods]
    if args.baseline:
        runs += [(f"{m}@base", m, args.baseline) for m in args.methods if m.startswith("flex")]
    results = {}
    for L in lengths:
        for label, m, path in runs:
            r = run_one(L, m, args.timeout, args.repeat, path, args.threads)
            results[(L, label)] = r
            extra = "" if "error" not in r else f"  [{r['error']}]"
            print(
                f"  L={L:5d} {label:15s} time {fmt(r, 'seconds', '8.3f')} s (CPU {fmt(r, 'cpu_seconds', '8.3f')} s)"
                f"   first call {fmt(r, 'first_call_s', '7.1f')} s"
                f"   extra {fmt(r, 'extra_mib', '8.1f')} MiB   structpos {r.get('structpos', '?')}{extra}",
                flush=True,
            )
    print("\nratios flex / dense (time, extra memory):")
    for bias in ("tree", "spd", "tree@base", "spd@base"):
        for L in lengths:
            f, d = results.get((L, f"flex_{bias}")), results.get((L, f"dense_{bias.split('@')[0]}"))
            if f is None or d is None:
                continue
            if f and d and "error" not in f and "error" not in d:
                print(
                    f"  {bias:9s} L={L:5d}: time {f['seconds'] / d['seconds']:6.2f}x   "
                    f"CPU time {f['cpu_seconds'] / d['cpu_seconds']:6.2f}x   "
                    f"memory {f['extra_mib'] / max(d['extra_mib'], 1e-3):6.3f}x "
                    f"({f['extra_mib']:.1f} vs {d['extra_mib']:.1f} MiB)"
                )
            else:
                print(f"  {bias:9s} L={L:5d}: not measured (see errors above)")
    for m, _, _ in runs:
        rows = [results[(L, m)] for L in lengths if "error" not in results.get((L, m), {"error": 1})]
        if len(rows) >= 2:
            a, b = rows[0], rows[-1]
            growth = b["extra_mib"] / max(a["extra_mib"], 1e-3)
            print(
                f"  {m:15s} extra memory ×{growth:.1f} from L={a['L']} to L={b['L']} "
                f"(O(L): ×{b['L'] / a['L']:.0f}, O(L²): ×{(b['L'] / a['L']) ** 2:.0f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
