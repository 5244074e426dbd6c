"""The quality suite's verdict rule (benchmarks/quality/report.py) on synthetic numbers.

Each case builds per-seed runs with known differences and checks the verdict the rule must give;
the paired interval is checked against scipy's paired t-test.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.quality import report

scipy_stats = pytest.importorskip("scipy.stats")

ROLES = {"tree": "claimed", "rope1d": "baseline", "nope": "baseline", "tree_zero": "zero", "spd": "ceiling"}


def runs_for(means: dict[str, list[float]], split: str = "extrap") -> list[dict]:
    out = []
    for enc, vals in means.items():
        for seed, v in enumerate(vals):
            out.append({"task": "t", "encoding": enc, "seed": seed, f"{split}_acc": v})
    return out


def verdict(means, size="full", roles=ROLES):
    by_seed = report.scores_by_seed(runs_for(means), "t", "extrap")
    return report.task_verdict(by_seed, roles, size)


def test_paired_interval_equals_scipys_paired_t_test():
    rng = np.random.default_rng(0)
    a, b = rng.random(7), rng.random(7)
    p = report.paired(dict(enumerate(a)), dict(enumerate(b)))
    ci = scipy_stats.ttest_rel(a, b).confidence_interval(0.95)
    assert p.n == 7 and np.isclose(p.mean, np.mean(a - b))
    assert np.isclose(p.lo, ci.low) and np.isclose(p.hi, ci.high)


def test_pairs_only_common_seeds():
    p = report.paired({0: 1.0, 1: 2.0, 2: 5.0}, {1: 1.0, 2: 1.0, 3: 9.0})
    assert p.n == 2 and p.mean == pytest.approx(2.5)


def test_the_addition_case_0019_vs_0_is_not_a_win():
    """0.019 ± 0.015 against 0.000 over 5 seeds: the interval is just above 0, but 0.019 does not
    clear the floor over a trivial heuristic at 0, so the claim does not hold."""
    claimed = [0.0, 0.01, 0.02, 0.03, 0.035]  # mean 0.019, sd 0.015
    v = verdict({"tree": claimed, "rope1d": [0.0] * 5, "nope": [0.0] * 5, "h_majority": [0.0] * 5})
    assert report.paired(dict(enumerate(claimed)), dict(enumerate([0.0] * 5))).lo > 0
    assert v.word == "no" and "not shown" in v.lines[0]


def test_a_clear_paired_win_holds():
    v = verdict(
        {
            "tree": [0.90, 0.91, 0.89, 0.92, 0.90],
            "rope1d": [0.60, 0.62, 0.61, 0.59, 0.60],
            "nope": [0.3] * 5,
            "h_majority": [0.2] * 5,
            "probe": [0.25] * 5,
        }
    )
    assert v.word == "yes" and v.best == "tree" and v.baseline == "rope1d"


def test_pairing_finds_a_consistent_win_that_unpaired_noise_would_hide():
    """Seeds move both encodings together: the paired difference is always +0.02 (a win) although
    the per-encoding spread (0.1) is five times larger than the mean difference."""
    base = [0.5, 0.7, 0.6, 0.4, 0.65]
    v = verdict({"tree": [x + 0.03 for x in base], "rope1d": base, "nope": [0.1] * 5, "h_majority": [0.1] * 5})
    assert v.word == "yes"


def test_an_interval_containing_zero_is_not_shown():
    v = verdict(
        {
            "tree": [0.70, 0.55, 0.72, 0.50, 0.68],
            "rope1d": [0.60, 0.65, 0.60, 0.62, 0.60],
            "nope": [0.1] * 5,
            "h_majority": [0.1] * 5,
        }
    )
    assert v.word == "no" and "contains 0" in v.lines[0]


def test_a_significant_loss_is_refuted():
    v = verdict({"tree": [0.5, 0.51, 0.49, 0.5, 0.5], "rope1d": [0.6] * 5, "nope": [0.1] * 5, "h_majority": [0.1] * 5})
    assert v.word == "no" and "refuted" in v.lines[0]


def test_below_the_probe_is_not_a_win_even_above_the_baseline():
    v = verdict(
        {
            "tree": [0.41, 0.42, 0.41, 0.42, 0.41],
            "rope1d": [0.30, 0.31, 0.30, 0.30, 0.31],
            "nope": [0.1] * 5,
            "probe": [0.40] * 5,
        }
    )
    assert v.word == "no" and "probe" in v.lines[0]


def test_everything_below_the_simplest_heuristic_is_inconclusive():
    v = verdict(
        {
            "tree": [0.50, 0.52, 0.51, 0.50, 0.52],
            "rope1d": [0.40] * 5,
            "nope": [0.40] * 5,
            "h_shallowest_leaf": [0.65] * 5,
        }
    )
    assert v.word == "inconclusive"


def test_a_ceiling_is_never_a_win():
    v = verdict({"tree": [0.3] * 5, "rope1d": [0.3] * 5, "nope": [0.2] * 5, "spd": [1.0] * 5, "h_majority": [0.1] * 5})
    assert v.word == "no" and v.best == "tree"


@pytest.mark.parametrize("size,seeds", [("quick", 5), ("full", 4), ("full", 1)])
def test_quick_or_too_few_seeds_give_no_verdict(size, seeds):
    v = verdict({"tree": [0.9] * seeds, "rope1d": [0.1] * seeds, "nope": [0.1] * seeds}, size=size)
    assert v.word == "no verdict" and "no verdict at this size" in v.lines[0]


def test_zero_structure_control_kept_or_costing_1d_skill():
    base = [0.60, 0.62, 0.61, 0.59, 0.60]
    kept = verdict({"tree": [0.9] * 5, "rope1d": base, "nope": [0.1] * 5, "tree_zero": [x + 0.005 for x in base]})
    assert "keeps 1-D skill" in kept.zero[0]
    costs = verdict({"tree": [0.9] * 5, "rope1d": base, "nope": [0.1] * 5, "tree_zero": [0.30, 0.31, 0.29, 0.30, 0.31]})
    assert "costs 1-D skill" in costs.zero[0]


def test_rendered_markdown_carries_verdict_ci_and_roles(tmp_path):
    means = {
        "tree": [0.90, 0.91, 0.89, 0.92, 0.90],
        "rope1d": [0.60, 0.62, 0.61, 0.59, 0.60],
        "nope": [0.3] * 5,
        "tree_zero": [0.61, 0.60, 0.62, 0.60, 0.59],
        "h_majority": [0.2] * 5,
        "probe": [0.25] * 5,
    }
    out = {
        "size": "full",
        "seeds": list(range(5)),
        "started": "now",
        "machine": "test",
        "runs": runs_for(means),
        "tasks": {
            "t": {
                "claim": "c",
                "data": "d",
                "main_split": "extrap",
                "splits": {"extrap": 10},
                "train": 5,
                "roles": {e: r for e, r in ROLES.items() if e in means},
                "params": {"tree": [100, 10]},
            }
        },
    }
    path = tmp_path / "R.md"
    report.write_results_md(out, path)
    text = path.read_text()
    assert "**Verdict: yes.**" in text and "coordinates-only probe" in text and "zero-structure control" in text
    assert "100 (10)" in text and "[+" in text  # parameter counts and a paired interval


def test_a_failed_sweep_releases_the_seeds_waiting_for_its_rates(tmp_path):
    """Seeds wait for the first seed's learning rates; a sweep that stops on an error must say so,
    or they would wait forever (no deadline: the wait is bounded only by that marker)."""
    from benchmarks.quality import runner

    path = tmp_path / "t.lr.json"
    with pytest.raises(RuntimeError):
        with runner._failure_published(path, sweep=True):
            runner._publish(path, "rope1d", 3e-3)
            raise RuntimeError("the sweep broke")
    assert runner._chosen_lr(path, "rope1d", float("inf")) == 3e-3  # what it published stays
    assert runner._chosen_lr(path, "tree_plane", float("inf")) is None  # the rest: no wait
    other = tmp_path / "u.lr.json"
    with pytest.raises(RuntimeError):
        with runner._failure_published(other, sweep=False):  # a non-sweeping unit publishes nothing
            raise RuntimeError("a seed broke")
    assert not other.exists()
