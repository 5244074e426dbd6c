"""Run the quality benchmark suite: ``python -m benchmarks.quality --quick | --full``.

Every task trains the same small transformer once per (encoding, seed) and evaluates its
validation and test splits. **Seeds vary the data build** (which tables, files, graphs and
masks), the initialisation and the order. With ``--full`` the first seed is a learning-rate
sweep (``Task.lrs``, the same values for every encoding): the rate with the best
*validation* score is kept for that encoding and its other seeds. Beside the encodings each
seed records the coordinates-only probe and the trivial heuristics (see ``_common.py``).

Results go to ``<out>/results/<task>.json`` (rewritten after every run, so a cut run keeps
what finished; tasks can run in separate processes, ``--jobs``, or separate sessions, and
``--report`` merges whatever files are there) and are rendered into ``<out>/RESULTS.md`` and
``<out>/results.png`` with the verdicts of ``report.py``. ``--quick`` prints numbers and
**no verdict**.

Examples::

    python -m benchmarks.quality --quick                       # 1 seed, every task, ≤ 10 min on 2 cores
    python -m benchmarks.quality --full --tasks tree_root      # 5 seeds, LR sweep on the first
    python -m benchmarks.quality --full --jobs 10 --device cuda --deadline 480
    python -m benchmarks.quality --report                      # re-render from results/*.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from .report import readme_table, write_plot, write_results_md
from .runner import FULL_SEEDS, run_unit, seed_list
from .tasks import TASKS

HERE = Path(__file__).resolve().parent


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.quality", description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="1 seed, fewer steps and examples, no verdict (default)")
    size.add_argument("--full", action="store_true", help=f"{FULL_SEEDS} seeds, LR sweep on the first, verdicts")
    ap.add_argument("--tasks", default="", help=f"comma-separated subset of {', '.join(TASKS)}")
    ap.add_argument("--encodings", default="", help="comma-separated encoding names (a task runs those it has)")
    ap.add_argument("--seeds", default="", help="number of seeds (e.g. 5) or a list (0,1,2)")
    ap.add_argument("--lrs", default="", help="comma-separated learning rates for the sweep (default: the task's)")
    ap.add_argument("--steps", type=float, default=1.0, help="multiply every task's step budget")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    ap.add_argument("--jobs", type=int, default=1, help="tasks run in this many processes side by side")
    ap.add_argument("--deadline", type=float, default=0.0, help="seconds after which no new run starts (0: none)")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where results/, RESULTS.md, results.png go (default: here; --quick: quick/)",
    )
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--report", action="store_true", help="only re-render RESULTS.md / results.png from results/")
    return ap.parse_args(argv)


def load_results(out: Path) -> dict:
    """Merge ``out/results/<task>.s<seed>[.<more>].json`` into one results dict.

    A task and seed may have several files (encodings added by a later run, e.g. ``.cpu``); a run
    of the same task, encoding and seed is kept once, the first in file-name order.
    """
    parts = [json.loads(p.read_text()) for p in sorted((out / "results").glob("*.s*.json"))]
    if not parts:
        raise SystemExit(f"no results in {out / 'results'}")
    merged = {
        "size": parts[0]["size"],
        "seeds": sorted({s for p in parts for s in p["seeds"]}),
        "started": min(p["started"] for p in parts),
        "elapsed_s": max(p.get("elapsed_s", 0) for p in parts),
        "wall_s": {},
        "machine": parts[0]["machine"],
        "tasks": {},
        "runs": [],
        "sweep": [],
        "chosen_lr": {},
        "command": "; ".join(dict.fromkeys(p["command"] for p in parts if p.get("command"))),
    }
    sizes = {p["size"] for p in parts}
    merged["machine"] = "; ".join(dict.fromkeys(p["machine"] for p in parts))
    if len(sizes) > 1:
        merged["size"] = "mixed (" + ", ".join(sorted(sizes)) + ")"
    seen = set()
    for p in parts:
        desc = merged["tasks"].setdefault(p["task"], dict(p["tasks"][p["task"]]))
        for key in ("encodings", "params"):  # a later run may add encodings to a task
            desc[key] = {**desc.get(key, {}), **p["tasks"][p["task"]].get(key, {})}
        for r in p["runs"]:  # the probe and heuristics are recorded by every file of a seed: keep one
            key = (r["task"], r["encoding"], r["seed"])
            if key not in seen:
                seen.add(key)
                merged["runs"].append(r)
        merged["sweep"] += p.get("sweep", [])
        merged["chosen_lr"].setdefault(p["task"], {}).update(p.get("chosen_lr", {}))
        merged["wall_s"][p["task"]] = max(merged["wall_s"].get(p["task"], 0), p.get("elapsed_s", 0))
    return merged


def render(out: Path) -> str:
    results = load_results(out)
    write_results_md(results, out / "RESULTS.md")
    try:
        write_plot(results, out / "results.png")
    except ImportError:  # pragma: no cover - matplotlib is in the viz extra
        print("matplotlib missing: no plot", file=sys.stderr)
    return readme_table(results)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.command = "python -m benchmarks.quality " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.out is None:  # a quick run never overwrites the published --full results
        args.out = HERE if args.full or args.report else HERE / "quick"
    if args.report:
        print(render(args.out))
        return 0
    names = [t.strip() for t in args.tasks.split(",") if t.strip()] or list(TASKS)
    unknown = [t for t in names if t not in TASKS]
    if unknown:
        print(f"unknown task(s) {unknown}; choose from {list(TASKS)}", file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    size = "full" if args.full else "quick"
    seeds = seed_list(args.seeds, size)
    for name in names:  # a fresh run: no rate chosen by an earlier sweep
        (args.out / "results" / f"{name}.lr.json").unlink(missing_ok=True)
    # every task's sweeping seed first: the other seeds wait for its rates
    units = [(n, s, i == 0 and args.full) for i, s in enumerate(seeds) for n in names]
    if args.jobs > 1 and len(units) > 1:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(run_unit, n, s, w, args, t_start) for n, s, w in units]
            for f in futures:
                print(f"finished {f.result()} ({time.perf_counter() - t_start:.0f} s)", flush=True)
    else:
        for n, s, w in units:
            run_unit(n, s, w, args, t_start)
    print(render(args.out))
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
