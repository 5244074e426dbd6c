"""Run the quality benchmark suite: ``python -m benchmarks.quality --quick | --full``.

Every task trains the same small transformer once per (encoding, seed) and evaluates its
test splits; the runner writes ``results.json`` (every run, rewritten after each one, so an
interrupted run keeps what finished), ``RESULTS.md`` (task × encoding, mean ± std over seeds,
the paper's claim and whether its direction is reproduced) and ``results.png`` (error bars).

Examples::

    python -m benchmarks.quality --quick                       # 1 seed, every task, ≤ 10 min on 2 cores
    python -m benchmarks.quality --full                        # 3 seeds
    python -m benchmarks.quality --quick --tasks addition,graph_distance --encodings nope,rope1d,coupled
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from .report import readme_table, write_plot, write_results_md
from .tasks import TASKS

HERE = Path(__file__).resolve().parent


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.quality", description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="1 seed, fewer steps and examples (default)")
    size.add_argument("--full", action="store_true", help="3 seeds, the step budgets of the published table")
    ap.add_argument("--tasks", default="", help=f"comma-separated subset of {', '.join(TASKS)}")
    ap.add_argument("--encodings", default="", help="comma-separated encoding names (a task runs those it has)")
    ap.add_argument("--seeds", default="", help="number of seeds (e.g. 3) or a list (0,1,2)")
    ap.add_argument("--steps", type=float, default=1.0, help="multiply every task's step budget")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the machine is shared)")
    ap.add_argument("--out", type=Path, default=HERE, help="where RESULTS.md / results.json / results.png go")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--report", action="store_true", help="only re-render RESULTS.md / results.png from results.json")
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="merge results.json files (e.g. one process per seed) into --out, then render",
    )
    return ap.parse_args(argv)


def seed_list(spec: str, size: str) -> list[int]:
    if not spec:
        return [0, 1, 2] if size == "full" else [0]
    if "," in spec:
        return [int(s) for s in spec.split(",") if s.strip()]
    return list(range(int(spec)))


def merge_runs(parts: list[dict]) -> dict:
    """One results dict from several (one per seed, run as separate processes); first copy of a run wins."""
    out = dict(parts[0], tasks={}, runs=[])
    seen = set()
    for part in parts:
        for name, desc in part["tasks"].items():
            out["tasks"].setdefault(name, desc)
        for r in part["runs"]:
            key = (r["task"], r["encoding"], r["seed"])
            if key not in seen:
                seen.add(key)
                out["runs"].append(r)
    out["seeds"] = sorted({r["seed"] for r in out["runs"]})
    out["elapsed_s"] = max(p.get("elapsed_s", 0) for p in parts)
    out["machine"] = parts[0]["machine"] + f"; merged from {len(parts)} processes run side by side"
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.merge:
        merged = merge_runs([json.loads(Path(p).read_text()) for p in args.merge])
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(merged, indent=1))
        args.report = True
    if args.report:
        out = json.loads((args.out / "results.json").read_text())
        write_results_md(out, args.out / "RESULTS.md")
        write_plot(out, args.out / "results.png")
        print(readme_table(out))
        return 0
    size = "full" if args.full else "quick"
    torch.set_num_threads(args.threads)
    names = [t.strip() for t in args.tasks.split(",") if t.strip()] or list(TASKS)
    unknown = [t for t in names if t not in TASKS]
    if unknown:
        print(f"unknown task(s) {unknown}; choose from {list(TASKS)}", file=sys.stderr)
        return 2
    wanted = {e.strip() for e in args.encodings.split(",") if e.strip()}
    seeds = seed_list(args.seeds, size)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the io extra
        tqdm = None

    tasks = {n: TASKS[n]() for n in names}
    plan = [(n, e) for n in names for e in tasks[n].encodings if not wanted or e in wanted]
    total_steps = sum(int(tasks[n].steps[size] * args.steps) for n, _ in plan) * len(seeds)
    out = {
        "size": size,
        "seeds": seeds,
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}",
        "tasks": {},
        "runs": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    bar = None
    if tqdm is not None:
        bar = tqdm(total=total_steps, unit="step", disable=args.no_progress, dynamic_ncols=True)
    t_all = time.perf_counter()
    todo = {}
    for name in names:  # build every task first: runs then go seed by seed, so a cut run has every task
        task = tasks[name]
        encs = [e for e in task.encodings if not wanted or e in wanted]
        if not encs:
            continue
        t0 = time.perf_counter()
        task.build(size)
        todo[name] = encs
        out["tasks"][name] = task.describe() | {
            "build_s": round(time.perf_counter() - t0, 1),
            "encodings": {e: task.encodings[e].about for e in encs},
        }
    for seed in seeds:
        for name, encs in todo.items():
            task = tasks[name]
            for enc in encs:
                if bar is not None:
                    bar.set_description(f"{name}/{enc}/s{seed}")
                steps = int(task.steps[size] * args.steps)
                run = task.train_eval(enc, seed, size, steps=steps, progress=bar)
                out["runs"].append(run)
                out["elapsed_s"] = round(time.perf_counter() - t_all, 1)
                (args.out / "results.json").write_text(json.dumps(out, indent=1))
                write_results_md(out, args.out / "RESULTS.md")
        try:
            write_plot(out, args.out / "results.png")
        except ImportError:  # pragma: no cover - matplotlib is in the viz extra
            pass
    if bar is not None:
        bar.close()
    out["elapsed_s"] = round(time.perf_counter() - t_all, 1)
    (args.out / "results.json").write_text(json.dumps(out, indent=1))
    write_results_md(out, args.out / "RESULTS.md")
    try:
        write_plot(out, args.out / "results.png")
    except ImportError:  # pragma: no cover - matplotlib is in the viz extra
        print("matplotlib missing: no plot", file=sys.stderr)
    print((args.out / "RESULTS.md").read_text())
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
