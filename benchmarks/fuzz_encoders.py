"""Fuzz the encoders' argument space: every bad option or input must be a ``StructposError``.

Each trial builds one encoder (``StructuralRoPE`` in every allocation, ``HierarchicalRoPE``,
``WIRE``, ``AWRoPE``, ``SPDBias``, ``alibi_slopes``) from options drawn from a hostile pool
(zero, negative, odd, huge-ish and non-integer counts, NaN/inf reals, wrong types, sections of
wrong length, sign or sum), then, when it builds, runs it on random ``q``/``k`` and coordinates
(sometimes NaN, half precision, wrong shapes). A trial *escapes* when it raises anything that is
not a :class:`~structpos.exceptions.StructposError`, or when it succeeds with a wrong answer: a
non-finite output, a rotation that changes a vector's norm, or a coordinate axis that no pair
reads although no explicit ``sections`` asked for that. Sizes stay small (heads ≤ 64 wide), so
a trial is cheap.

Usage::

    python benchmarks/fuzz_encoders.py --n 3000 --seed 0      # prints counts; exit 1 on any escape
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from structpos.encoders import WIRE, AWRoPE, HierarchicalRoPE, StructuralRoPE
from structpos.encoders.attention_bias import SPDBias, alibi_slopes
from structpos.exceptions import StructposError

COUNTS = [-3, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 31, 32, 64, 2.0, 4.5, True, "8", None]
REALS = [-1.0, 0.0, 0.5, 0.99, 1.0, 2.0, 1e4, 1e308, float("nan"), float("inf"), -float("inf"), "x", None]
CHOICES = ["sectioned", "interleaved", "per_head", "mixed", "half", "blhd", "bhld", "diagonal", 3, None]


def _pick(rng: random.Random, pool: list, good):
    """A good value most of the time, a hostile one otherwise."""
    return good if rng.random() < 0.6 else rng.choice(pool)


def _sections(rng: random.Random, axes: int, total: int):
    kind = rng.randrange(6)
    if kind == 0 or axes < 1 or total < 0:
        return None
    if kind == 1:  # valid, possibly with zeros
        cuts = sorted(rng.randint(0, total) for _ in range(axes - 1))
        return [b - a for a, b in zip([0, *cuts], [*cuts, total])]
    if kind == 2:
        return [total] + [-1] * (axes - 1) + ([1] if axes > 1 else [])
    if kind == 3:
        return [1.5] * axes
    if kind == 4:
        return "ab"
    return [total // max(axes, 1)] * (axes + 1)


def _check_rotation(x: torch.Tensor, y: torch.Tensor, what: str) -> str | None:
    if not torch.isfinite(y).all():
        return f"{what}: non-finite output"
    if not torch.allclose(x.norm(dim=-1), y.norm(dim=-1), rtol=1e-4, atol=1e-4):
        return f"{what}: rotation changed a norm"
    return None


def _coords(rng: random.Random, shape: tuple, axes: int) -> torch.Tensor:
    kind = rng.randrange(6)
    if kind == 0:
        c = torch.randn(*shape, axes)
        c.view(-1)[0] = rng.choice([float("nan"), float("inf")]) if c.numel() else 0.0
        return c
    if kind == 1:
        return torch.randint(-3, 50, (*shape, axes)).to(torch.float16)
    if kind == 2:
        return torch.randint(0, 9, (*shape, axes + rng.choice([-1, 1])))
    if kind == 3:
        return torch.randint(-5, 1 << 20, (*shape, axes))
    return torch.randint(0, 9, (*shape, axes))


def trial_rope(rng: random.Random) -> str | None:
    head_dim = _pick(rng, COUNTS, rng.choice([2, 4, 8, 16, 32]))
    num_axes = _pick(rng, COUNTS, rng.randint(1, 6))
    allocation = _pick(rng, CHOICES, rng.choice(["sectioned", "interleaved", "per_head", "mixed"]))
    num_heads = _pick(rng, COUNTS, rng.choice([1, 2, 4, 6]))
    pairs = head_dim // 2 if isinstance(head_dim, int) else 4
    units = num_heads if allocation == "per_head" and isinstance(num_heads, int) else pairs
    axes = num_axes if isinstance(num_axes, int) else 1
    sections = _sections(rng, axes, units)
    kw = {
        "allocation": allocation,
        "sections": sections,
        "num_heads": num_heads,
        "base": _pick(rng, REALS, 10000.0),
        "layout": _pick(rng, CHOICES, rng.choice(["half", "interleaved"])),
        "qk_layout": _pick(rng, CHOICES, "blhd"),
        "max_table_extent": _pick(rng, COUNTS, 1 << 12),
    }
    if rng.random() < 0.2:
        shape = (max(pairs, 1), max(axes, 1))
        kw["mixing"] = rng.choice([torch.randn(shape), torch.full(shape, float("nan")), "w", [[1.0]]])
    if rng.random() < 0.3:
        rope = HierarchicalRoPE(
            head_dim,
            tuple(f"l{i}" for i in range(axes)),
            **{k: v for k, v in kw.items() if k not in ("mixing", "max_table_extent")},
        )
    else:
        rope = StructuralRoPE(head_dim, num_axes, **kw)
    # built: every axis must move some angle unless explicit sections gave it 0 (or a mixing matrix was given)
    if sections is None and "mixing" not in kw:
        eye = torch.eye(rope.num_axes)
        for a in range(rope.num_axes):
            if not rope.angles(eye[a]).abs().max() > 0:
                return f"built {rope!r} but axis {a} moves no angle"
    heads = rope.num_heads or 2
    q = torch.randn(2, 5, heads, rope.head_dim)
    if rope.qk_layout == "bhld":
        q = q.transpose(1, 2)
    c = _coords(rng, (2, 5), rope.num_axes)
    q_rot, k_rot = rope(q, q, c)
    return _check_rotation(q, q_rot, "StructuralRoPE")


def trial_wire(rng: random.Random) -> str | None:
    head_dim = _pick(rng, COUNTS, rng.choice([2, 4, 8, 16]))
    k = _pick(rng, COUNTS, rng.randint(1, 5))
    kw = {"scale": _pick(rng, REALS, 4.0), "base": _pick(rng, REALS, 10000.0), "layout": _pick(rng, CHOICES, "half")}
    if rng.random() < 0.2:
        kw["omega"] = rng.choice([torch.randn(3, 2), torch.full((2, 1), float("inf")), "w"])
    wire = WIRE(head_dim, k, **kw)
    if "omega" not in kw:
        eye = torch.eye(wire.k)
        for a in range(wire.k):
            if not wire.angles(eye[a]).abs().max() > 0 and kw["scale"] != 0.0:
                return f"built {wire!r} but spectral coordinate {a} moves no angle"
    q = torch.randn(6, 2, wire.head_dim)
    t = _coords(rng, (6,), wire.k).to(torch.float32) if rng.random() < 0.5 else torch.randn(6, wire.k)
    q_rot, _ = wire(q, q, t)
    return _check_rotation(q, q_rot, "WIRE")


def trial_aw(rng: random.Random) -> str | None:
    head_dim = _pick(rng, COUNTS, 8)
    aw = AWRoPE(
        head_dim,
        z=_pick(rng, REALS, 0.5),
        K=_pick(rng, COUNTS, 4),
        mode=_pick(rng, ["sparse", "exact", "dense", None], "sparse"),
        phase="coords",
        num_axes=_pick(rng, COUNTS, 1),
    )
    n = 5
    edges = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3]])
    if rng.random() < 0.2:
        edges = edges + rng.choice([7, -9])
    pos = torch.randn(n, aw.w.numel()) if rng.random() < 0.8 else torch.randn(n + 1)
    q = torch.randn(n, 2, aw.head_dim)
    yq, _ = aw(q, q, edges, pos=pos)
    return None if torch.isfinite(yq).all() else "AWRoPE: non-finite output"


def trial_bias(rng: random.Random) -> str | None:
    heads = _pick(rng, COUNTS, 4)
    if rng.random() < 0.5:
        slopes = alibi_slopes(heads)
        return None if torch.isfinite(slopes).all() and (slopes > 0).all() else "alibi_slopes: bad slopes"
    bias = SPDBias(heads, max_distance=_pick(rng, COUNTS, 8))
    d = torch.randint(-1, 12, (5, 5)) if rng.random() < 0.8 else torch.rand(5, 5)
    out = bias(d)
    return None if out.shape == (bias.num_heads, 5, 5) else f"SPDBias: shape {tuple(out.shape)}"


TRIALS = {"rope": trial_rope, "wire": trial_wire, "aw_rope": trial_aw, "bias": trial_bias}


def run(n: int, seed: int, findings_max: int = 20) -> dict:
    """Run ``n`` trials per encoder; return counts and the first findings."""
    report: dict = {"trials": 0, "built": 0, "refused": 0, "escapes": 0, "findings": []}
    for name, trial in TRIALS.items():
        rng = random.Random(f"{seed}-{name}")
        for i in range(n):
            report["trials"] += 1
            try:
                bad = trial(rng)
            except StructposError:
                report["refused"] += 1
                continue
            except Exception as e:
                bad = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
            else:
                report["built"] += 1
            if bad is not None:
                report["escapes"] += 1
                if len(report["findings"]) < findings_max:
                    report["findings"].append({"encoder": name, "trial": i, "finding": bad})
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="trials per encoder")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the report as JSON here")
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    report = run(args.n, args.seed)
    for f in report["findings"]:
        print(f"ESCAPE {f['encoder']} #{f['trial']}: {f['finding']}")
    print(
        f"trials {report['trials']}: built and checked {report['built']}, refused with a StructposError "
        f"{report['refused']}, escapes {report['escapes']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 1 if report["escapes"] else 0


if __name__ == "__main__":
    sys.exit(main())
