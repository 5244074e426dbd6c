"""RESULTS.md and results.png from the runner's JSON, with verdicts computed from the numbers.

**The verdict rule** (per claimed encoding, on the task's main split's accuracy):

1. Pair it with the best baseline (highest mean; 1-D RoPE / NoPE / the symmetric encodings)
   seed by seed — both were trained on the same data build, order and initialisation — and
   take the 95 % confidence interval of the mean paired difference (Student t, ``n − 1``
   degrees of freedom). At least :data:`MIN_SEEDS` paired seeds are needed for any verdict.
2. The claim **holds** for it only if the interval lies above 0 **and** its mean clears the
   best trivial heuristic and the coordinates-only probe by :data:`FLOOR`.
3. It is **refuted** if the interval lies below 0, **not shown** otherwise.

A task's word: **yes** (every claimed encoding holds), **partly** (some do), **no** (none
does), **inconclusive** (every trained encoding is below the best trivial heuristic: the
budget shows nothing), **no verdict** (``--quick`` or fewer than :data:`MIN_SEEDS` seeds).
Ceilings (fed the label) and oracles (fed gold structure) are reported, never counted as
wins. Every *zero-structure control* (a claimed encoding fed zero structure) is paired with
1-D RoPE the same way: **kept** if the interval contains 0 or its mean difference is within
:data:`FLOOR`, **costs 1-D skill** if the interval lies below ``−FLOOR``.

The notes under each table are generated from these numbers; nothing is hand-written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MIN_SEEDS = 5
FLOOR = 0.02  # absolute accuracy (or loss) a winner must clear the heuristics and the probe by


# ---------------------------------------------------------------------- numbers
def scores_by_seed(runs: list[dict[str, Any]], task: str, split: str) -> dict[str, dict[int, float]]:
    """``encoding → {seed: accuracy}`` on ``split``."""
    key = f"{split}_acc"
    out: dict[str, dict[int, float]] = {}
    for r in runs:
        if r["task"] == task and key in r and r[key] is not None and not math.isnan(r[key]):
            out.setdefault(r["encoding"], {})[int(r["seed"])] = float(r[key])
    return out


def summarise(
    runs: list[dict[str, Any]], task: str, split: str, metric: str = "acc"
) -> dict[str, tuple[float, float, int]]:
    """``encoding → (mean, std, number of seeds)`` of ``{split}_{metric}``."""
    vals: dict[str, list[float]] = {}
    for r in runs:
        key = f"{split}_{metric}"
        if r["task"] == task and key in r and r[key] is not None and not math.isnan(r[key]):
            vals.setdefault(r["encoding"], []).append(float(r[key]))
    return {e: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v)) for e, v in vals.items()}


def t_quantile(dof: int) -> float:
    """Two-sided 95 % Student-t quantile with ``dof`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.975, dof))


@dataclass(frozen=True)
class Paired:
    """The mean paired difference ``a − b`` over common seeds and its 95 % t interval."""

    mean: float
    lo: float
    hi: float
    n: int

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.mean:+.3f} (n={self.n})"
        return f"{self.mean:+.3f} [{self.lo:+.3f}, {self.hi:+.3f}]"


def paired(a: dict[int, float], b: dict[int, float]) -> Paired:
    """Paired comparison of two encodings' per-seed scores (only seeds both have)."""
    common = sorted(set(a) & set(b))
    d = np.array([a[s] - b[s] for s in common])
    if len(d) == 0:
        return Paired(float("nan"), float("nan"), float("nan"), 0)
    m = float(d.mean())
    if len(d) < 2:
        return Paired(m, float("nan"), float("nan"), len(d))
    half = t_quantile(len(d) - 1) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return Paired(m, m - half, m + half, len(d))


# ---------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """A task's verdict: the word, one line per claimed encoding, the zero-control lines."""

    word: str
    lines: list[str]
    zero: list[str]
    best: str = ""
    baseline: str = ""


def _mean(scores: dict[int, float]) -> float:
    return float(np.mean(list(scores.values()))) if scores else float("nan")


def task_verdict(by_seed: dict[str, dict[int, float]], roles: dict[str, str], size: str) -> Verdict:
    """Apply the rule of the module docstring to one task's per-seed scores.

    ``roles`` maps encodings to their role (``claimed``, ``baseline``, ``zero``, …); the probe
    (``probe``) and heuristics (``h_*``) are found by name. ``size`` other than ``"full"`` gives
    no verdict.
    """
    claimed = [e for e, r in roles.items() if r == "claimed" and e in by_seed]
    baselines = [e for e, r in roles.items() if r == "baseline" and e in by_seed]
    refs = {e: s for e, s in by_seed.items() if e == "probe" or e.startswith("h_")}
    if not claimed or not baselines:
        return Verdict("n/a", ["claimed or baseline encodings not run"], [])
    base = max(baselines, key=lambda e: _mean(by_seed[e]))
    best = max(claimed, key=lambda e: _mean(by_seed[e]))
    seeds = min(len(by_seed[e]) for e in claimed + [base])
    zero = _zero_lines(by_seed, roles)
    if size != "full" or seeds < MIN_SEEDS:
        why = "quick size" if size != "full" else f"{seeds} seed(s) < {MIN_SEEDS}"
        return Verdict("no verdict", [f"no verdict at this size ({why})"], zero, best, base)
    ref_name = max(refs, key=lambda e: _mean(refs[e])) if refs else ""
    ref = _mean(refs[ref_name]) if refs else -math.inf
    trained = [e for e, r in roles.items() if r in ("claimed", "baseline", "zero", "control") and e in by_seed]
    if trained and all(_mean(by_seed[e]) < ref for e in trained):
        line = f"every trained encoding is below the heuristic/probe `{ref_name}` ({ref:.3f}): the budget shows nothing"
        return Verdict("inconclusive", [line], zero, best, base)
    holds, lines = [], []
    for c in claimed:
        p = paired(by_seed[c], by_seed[base])
        clears = _mean(by_seed[c]) >= ref + FLOOR
        if p.lo > 0 and clears:
            holds.append(c)
            state = "holds"
        elif p.hi < 0:
            state = "refuted (below the baseline)"
        elif p.lo > 0:
            state = f"not shown: above `{base}` but within {FLOOR} of `{ref_name}` ({ref:.3f})"
        else:
            state = "not shown: the interval contains 0"
        lines.append(f"`{c}` − `{base}` = {p}: {state}")
    word = "yes" if len(holds) == len(claimed) else "partly" if holds else "no"
    return Verdict(word, lines, zero, best, base)


def _zero_lines(by_seed: dict[str, dict[int, float]], roles: dict[str, str]) -> list[str]:
    ref = "rope1d" if "rope1d" in by_seed else ""
    out = []
    for z in (e for e, r in roles.items() if r == "zero" and e in by_seed):
        if not ref:
            out.append(f"`{z}`: no 1-D RoPE run to compare with")
            continue
        p = paired(by_seed[z], by_seed[ref])
        if p.n < 2:
            state = "too few seeds"
        elif p.lo <= 0 <= p.hi or abs(p.mean) <= FLOOR:
            state = "keeps 1-D skill"
        elif p.hi < -FLOOR:
            state = "**costs 1-D skill**"
        elif p.lo > 0:
            state = "above 1-D RoPE"
        else:
            state = "slightly below 1-D RoPE"
        out.append(f"zero-structure `{z}` − `rope1d` = {p}: {state}")
    return out


def verdict_of(out: dict[str, Any], name: str) -> Verdict:
    desc = out["tasks"][name]
    by_seed = scores_by_seed(out["runs"], name, desc["main_split"])
    roles = desc["roles"]
    size = out["size"] if out["size"] in ("full", "quick") else "mixed"
    return task_verdict(by_seed, roles, size)


# ---------------------------------------------------------------------- rendering
def fmt(m: float, s: float) -> str:
    return f"{m:.3f} ± {s:.3f}"


ROLE_LABEL = {
    "claimed": "claimed",
    "baseline": "baseline",
    "zero": "zero-structure control",
    "control": "control",
    "ceiling": "ceiling (fed the label)",
    "oracle": "oracle (gold structure)",
}


def _role(enc: str, roles: dict[str, str]) -> str:
    if enc == "probe":
        return "coordinates-only probe"
    if enc == "bayes":
        return "Bayes-optimal limit (exact BP)"
    if enc.startswith("h_"):
        return "trivial heuristic"
    return ROLE_LABEL.get(roles.get(enc, ""), roles.get(enc, ""))


def task_section(out: dict[str, Any], name: str) -> list[str]:
    desc, runs = out["tasks"][name], out["runs"]
    main = desc["main_split"]
    roles = desc["roles"]
    v = verdict_of(out, name)
    splits = list(desc["splits"])
    loss = desc.get("report_loss")
    cols = [(s, "acc") for s in splits] + ([(s, "loss") for s in splits] if loss else [])
    table = {(s, m): summarise(runs, name, s, m) for s, m in cols}
    stats = table[(main, "acc")]
    by_seed = scores_by_seed(runs, name, main)
    base = v.baseline
    params = desc.get("params", {})
    lrs = out.get("chosen_lr", {}).get(name, {})
    lines = [f"## {name}", "", f"**Verdict: {v.word}.** Claim: {desc['claim']}", ""]
    lines += [f"- {x}" for x in v.lines + v.zero]
    head = " | ".join(f"{s} {m}{' ★' if s == main and m == 'acc' else ''}" for s, m in cols)
    lines += [
        "",
        f"| encoding | role | {head} | paired Δ vs `{base}` (95 % CI) | params (enc) | lr | seeds | what |",
        "|---|---|" + "---|" * len(cols) + "---|---|---|---|---|",
    ]
    for enc in sorted(stats, key=lambda e: -stats[e][0]):
        cells = " | ".join(fmt(*table[c][enc][:2]) if enc in table[c] else "–" for c in cols)
        delta = str(paired(by_seed[enc], by_seed[base])) if base and enc != base and enc in by_seed else ""
        p = params.get(enc)
        ptxt = f"{p[0]:,} ({p[1]:,})" if p else ""
        about = desc.get("encodings", {}).get(enc, "")
        lr = f"{lrs[enc]:g}" if enc in lrs else ""
        lines.append(
            f"| `{enc}` | {_role(enc, roles)} | {cells} | {delta} | {ptxt} | {lr} | {stats[enc][2]} | {about} |"
        )
    info = ", ".join(f"{k}: {v}" for k, v in desc.get("info", {}).items())
    lines += [
        "",
        f"Train examples {desc['train']} (+{desc.get('val', 0)} validation); test splits {desc['splits']}; "
        f"{desc.get('steps', '?')} steps; probe reads {desc.get('probe_keys') or 'nothing'}; {info}.",
        "",
    ]
    return lines


def write_results_md(out: dict[str, Any], path: Path) -> None:
    lines = [
        "# Quality benchmarks: measured results",
        "",
        (
            f"Size `{out['size']}`, seeds {out['seeds']}, started {out['started']}, "
            f"longest task {out.get('elapsed_s', 0):.0f} s of wall time; {out['machine']}. "
            f"Produced by `{out.get('command') or 'python -m benchmarks.quality --' + out['size']}`; every run is in `results/`."
        ),
        (
            "Numbers are test-set accuracy (pointer / per-token / exact match, see each task), mean ± std over "
            "seeds that vary the data build, initialisation and order; ★ marks the split and metric of the verdict. "
            "The verdict rule (paired 95 % t intervals, floors over the trivial heuristics and the coordinates-only "
            "probe) is in `benchmarks/quality/report.py`; every sentence below is generated from the numbers."
        ),
        "",
        readme_table(out),
        "",
    ]
    if out.get("wall_s"):
        lines += ["Wall time per task (s): " + ", ".join(f"{k} {v:.0f}" for k, v in out["wall_s"].items()), ""]
    for name in out["tasks"]:
        if summarise(out["runs"], name, out["tasks"][name]["main_split"]):
            lines += task_section(out, name)
    Path(path).write_text("\n".join(lines) + "\n")


def readme_table(out: dict[str, Any]) -> str:
    """The compact task table of the README: verdict, best claimed vs best baseline, references."""
    lines = [
        "| task (split ★) | verdict | best claimed | best baseline | best heuristic / probe | zero-structure control |",
        "|---|---|---|---|---|---|",
    ]
    for name, desc in out["tasks"].items():
        stats = summarise(out["runs"], name, desc["main_split"])
        if not stats:
            continue
        v = verdict_of(out, name)
        refs = [e for e in stats if e == "probe" or e.startswith("h_")]
        ref = max(refs, key=lambda e: stats[e][0]) if refs else ""

        def cell(e: str, stats=stats) -> str:
            return f"`{e}` {stats[e][0]:.3f}±{stats[e][1]:.3f}" if e in stats else "–"

        zero = "; ".join(f"{z.split('`')[1]}: {z.split(': ')[-1]}" for z in v.zero) or "–"
        lines.append(
            f"| {name} ({desc['main_split']}) | **{v.word}** | {cell(v.best)} | {cell(v.baseline)} | {cell(ref)} | {zero} |"
        )
    return "\n".join(lines)


def write_plot(out: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [(n, d) for n, d in out["tasks"].items() if summarise(out["runs"], n, d["main_split"])]
    if not tasks:
        return
    cols = min(4, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.8 * rows), squeeze=False)
    palette = {"claimed": "tab:green", "baseline": "tab:gray", "zero": "tab:blue", "ceiling": "tab:purple"}
    for ax, (name, desc) in zip(axes.flat, tasks):
        stats = summarise(out["runs"], name, desc["main_split"])
        roles = desc["roles"]
        encs = sorted(stats, key=lambda e: -stats[e][0])
        colors = [
            "black" if e == "probe" or e.startswith("h_") else palette.get(roles.get(e, ""), "tab:orange") for e in encs
        ]
        ax.bar(range(len(encs)), [stats[e][0] for e in encs], yerr=[stats[e][1] for e in encs], color=colors, capsize=3)
        ax.set_xticks(range(len(encs)), encs, rotation=65, ha="right", fontsize=6)
        ax.set_ylim(0, 1)
        ax.set_title(f"{name} ({desc['main_split']}): {verdict_of(out, name).word}", fontsize=9)
        ax.set_ylabel("accuracy", fontsize=8)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    fig.suptitle(
        f"structpos quality suite ({out['size']}, seeds {out['seeds']}): green claimed, gray baseline, "
        "blue zero-structure, purple ceiling, black heuristic/probe, orange other",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
