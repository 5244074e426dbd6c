"""One unit of the quality suite's work: one task, one seed (imported by worker processes)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from .tasks import TASKS

FULL_SEEDS = 5


def seed_list(spec: str, size: str) -> list[int]:
    if not spec:
        return list(range(FULL_SEEDS)) if size == "full" else [0]
    if "," in spec:
        return [int(s) for s in spec.split(",") if s.strip()]
    return list(range(int(spec)))


def pick_lr(runs: list[dict]) -> dict:
    """The sweep run with the best validation accuracy (ties: the smaller rate)."""
    return max(runs, key=lambda r: (r["val_acc"], -r["lr"]))


def _write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    tmp.replace(path)  # readers never see half a file


SWEEP_FAILED = "__sweep_failed__"
"""The key a sweeping unit writes into ``<task>.lr.json`` when it stops on an error: nobody waits on it."""


def _chosen_lr(path: Path, enc: str, wait_until: float) -> float | None:
    """The rate the first seed's sweep chose for ``enc`` (waits for it, up to ``wait_until``);
    ``None`` past the deadline or once the sweep has failed."""
    while True:
        if path.exists():
            chosen = json.loads(path.read_text())
            if enc in chosen:
                return chosen[enc]
            if SWEEP_FAILED in chosen:
                return None
        if time.perf_counter() > wait_until:
            return None
        time.sleep(0.5)


def _publish(lr_path: Path, key: str, value) -> None:
    """Add ``key: value`` to the rates file the other seeds read."""
    chosen = json.loads(lr_path.read_text()) if lr_path.exists() else {}
    _write_json(lr_path, chosen | {key: value})


@contextmanager
def _failure_published(lr_path: Path, sweep: bool):
    """A sweeping unit that stops on an error says so in the rates file, so no other seed waits on it."""
    try:
        yield
    except BaseException:
        if sweep:
            _publish(lr_path, SWEEP_FAILED, True)
        raise


def _device_name(device: str) -> str:
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name()})"
    return str(device)


def run_unit(name: str, seed: int, sweep: bool, args: argparse.Namespace, t_start: float) -> str:
    """One task and one seed: data build, probe and heuristics, every encoding.

    The sweeping unit (the first seed, ``--full``) trains every encoding at every rate of the
    sweep, keeps the best by validation score and publishes it in ``results/<task>.lr.json``;
    the other seeds' units build their data meanwhile and train each encoding at its published
    rate. Results go to ``results/<task>.s<seed>.json`` after every run.
    """
    size = "full" if args.full else "quick"
    if not sweep and args.jobs > 1:
        os.nice(5)  # side by side: the sweeping units are the critical path, give them the CPU first
    torch.set_num_threads(args.threads)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    wanted = {e.strip() for e in args.encodings.split(",") if e.strip()}
    task = TASKS[name]()
    encs = [e for e in task.encodings if not wanted or e in wanted]
    lrs = [float(x) for x in args.lrs.split(",") if x.strip()] or (list(task.lrs) if size == "full" else [task.lr])
    folder = args.out / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path, lr_path = folder / f"{name}.s{seed}.json", folder / f"{name}.lr.json"
    out = {
        "task": name,
        "size": size,
        "seeds": [seed],
        "lrs": lrs,
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {_device_name(device)}, {args.threads} torch thread(s), torch {torch.__version__}",
        "command": getattr(args, "command", ""),
        "tasks": {},
        "runs": [],
        "sweep": [],
        "chosen_lr": {},
    }
    steps = int(task.steps[size] * args.steps)
    deadline = t_start + args.deadline if args.deadline else float("inf")
    t0 = time.perf_counter()

    def save():
        out["elapsed_s"] = round(time.perf_counter() - t0, 1)
        _write_json(path, out)

    with _failure_published(lr_path, sweep):
        task.prepare(size, seed, device)
        out["tasks"][name] = task.describe() | {
            "build_s": round(time.perf_counter() - t0, 1),
            "encodings": {e: task.encodings[e].about for e in encs},
            "params": task.parameter_counts(encs),
            "steps": steps,
        }
        out["runs"] += task.reference_runs(seed)
        save()
        for enc in encs:
            if time.perf_counter() > deadline:
                break
            if sweep and len(lrs) > 1:
                tried = [task.train_eval(enc, seed, size, steps=steps, lr=lr, device=device) for lr in lrs]
                best = pick_lr(tried)
                out["chosen_lr"][enc] = best["lr"]
                _publish(lr_path, enc, best["lr"])
                out["sweep"] += tried
                out["runs"].append(best)
            else:
                lr = _chosen_lr(lr_path, enc, deadline) if len(lrs) > 1 else lrs[0]
                if lr is None:
                    break
                out["chosen_lr"][enc] = lr
                out["runs"].append(task.train_eval(enc, seed, size, steps=steps, lr=lr, device=device))
            if not args.no_progress:
                r = out["runs"][-1]
                print(
                    f"{name}/{enc}/s{seed} lr={r['lr']:g} {task.main_split}={r[task.main_split + '_acc']:.3f}",
                    flush=True,
                )
            save()
        save()
    return f"{name}/s{seed}"
