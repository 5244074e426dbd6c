"""Benchmark: StructuralRoPE (3 axes) vs 1-D RoPE of the same shape vs an eager HF-style apply.

Each variant takes q, k of shape (B, L, H, D) plus positions/coordinates and returns the
rotated q, k, including the cos/sin computation (HF recomputes cos/sin every call, as
``LlamaRotaryEmbedding.forward`` + ``apply_rotary_pos_emb`` do). Goals: StructuralRoPE(3 axes)
≤ 1.1× our 1-D RoPE and ≤ 1.0× the HF-style eager apply.

    python benchmarks/bench_rope.py            # B=4, L=2048, H=16, D=128
    python benchmarks/bench_rope.py --quick    # small shapes, a few seconds

``--encoders`` times forward + backward of every rotary / bias encoder registered in
:data:`structpos.encoders.registry.ENCODERS` against the fixed 3-axis StructuralRoPE at one shape
(default B=2, L=1024, H=8, D=64, A=3) and prints each one's time ratio, all in one run:

    python benchmarks/bench_rope.py --encoders --threads 1 [--quick] [--device cuda]

Encoders with the StructuralRoPE call shape (``enc(q, k, coords)``; e.g. the learned rotations
STRING / ComRoPE / LieRE / GRAPE when registered) are picked up by name through a generic
builder; a name that is not registered, or whose builder or call fails, is reported as skipped.
Bias encoders (CoPE, FIRE, SPD bias) produce an ``(H, L, L)`` / ``(B, H, L, L)`` bias, so they are
O(L²) where rotations are O(L): their ratios include that. The row ``(sdpa, ref.)`` is causal
scaled-dot-product attention itself at the same shape (not an encoder), the O(L²) work a bias is
added to.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from structpos.encoders import StructuralRoPE


# --- anchor: HF Llama-style rotary embedding + apply_rotary_pos_emb (eager) -----------------
def hf_cos_sin(inv_freq: torch.Tensor, position_ids: torch.Tensor, dtype: torch.dtype):
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    with torch.autocast(device_type=position_ids.device.type, enabled=False):
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
    return cos.to(dtype), sin.to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply(q, k, cos, sin, unsqueeze_dim=2):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def timeit_interleaved(fns: list, repeat: int, warmup: int = 2) -> list[list[float]]:
    """Seconds per round for each function; the functions run in turn every round, so load
    from other processes hits them alike and per-round ratios pair close-in-time runs."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return times


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of a/b (robust to a busy machine)."""
    return statistics.median(x / y for x, y in zip(a, b))


def run(B, L, H, D, dtype, repeat):
    torch.manual_seed(0)
    q = torch.randn(B, L, H, D, dtype=dtype)
    k = torch.randn(B, L, H, D, dtype=dtype)
    pos = torch.arange(L).expand(B, L)
    # 3 structural axes, e.g. (row, column, token) of a table: integer coordinates < L
    coords3 = torch.stack([pos // 64, pos % 64, pos], dim=-1).contiguous()
    coords1 = pos[..., None].contiguous()
    rope3 = StructuralRoPE(D, 3, allocation="sectioned")
    rope1 = StructuralRoPE(D, 1)
    inv_freq = rope1.inv_freq

    def hf():
        cos, sin = hf_cos_sin(inv_freq, pos, dtype)
        return hf_apply(q, k, cos, sin)

    # correctness check first: 1-D StructuralRoPE equals the HF-style reference
    ref_q, ref_k = hf()
    out_q, out_k = rope1(q, k, coords1)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert torch.allclose(out_q.float(), ref_q.float(), atol=tol, rtol=tol), "1-D RoPE differs from the HF reference"

    with torch.inference_mode():
        t3, t1, thf = timeit_interleaved([lambda: rope3(q, k, coords3), lambda: rope1(q, k, coords1), hf], repeat)
        # the only work that differs between 3 axes and 1: building cos/sin from coordinates
        c3, c1 = timeit_interleaved(
            [lambda: rope3.cos_sin(coords3, dtype), lambda: rope1.cos_sin(coords1, dtype)], repeat
        )
    r1, rhf = paired_ratio(t3, t1), paired_ratio(t3, thf)
    name = str(dtype).replace("torch.", "")
    print(
        f"B={B} L={L} H={H} D={D} {name:8s}  struct3={min(t3) * 1e3:8.2f} ms  rope1d={min(t1) * 1e3:8.2f} ms  "
        f"hf_eager={min(thf) * 1e3:8.2f} ms  cos/sin 3-axis {min(c3) * 1e3:6.3f} ms vs 1-axis {min(c1) * 1e3:6.3f} ms"
        f"  |  struct3/rope1d={r1:5.3f} (goal ≤1.1)  struct3/hf={rhf:5.3f} (goal ≤1.0)"
    )
    return r1, rhf


# --- every registered encoder vs fixed StructuralRoPE, forward + backward ----------------------
# names with a StructuralRoPE-like call that another module may register (tried if present)
LEARNED_ROTATIONS = ("string", "comrope", "liere", "grape", "grape_additive")


def _loss_of(out) -> torch.Tensor:
    """A scalar that depends on every output element (so backward touches everything)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum((o.float() * o.float()).mean() for o in outs if torch.is_tensor(o))


def encoder_cases(B, L, H, D, A, device):
    """name → (module, callable(q, k) -> output) for every registered encoder this benchmark can drive."""
    from structpos.encoders import registry as reg

    pos = torch.arange(L, device=device).expand(B, L)
    coords = torch.stack([pos // 64, pos % 64, pos], dim=-1)[..., :A].contiguous()
    i = torch.arange(L, device=device)
    token_dist = torch.where(i[:, None] >= i[None, :], i[:, None] - i[None, :], -1)
    cases, skipped = {}, {}

    def add(name, build, call, entry=None):
        if (entry or name) not in reg.ENCODERS:
            skipped[name] = "not registered"
            return
        try:
            enc = build().to(device)
            cases[name] = (enc, lambda q, k, enc=enc: call(enc, q, k))
        except Exception as e:  # a benchmark: report and go on
            skipped[name] = f"{type(e).__name__}: {e}"[:120]

    def rotate(e, q, k):
        return e(q, k, coords)

    yarn = {A - 1: {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}}
    add("rope", lambda: reg.build("rope", head_dim=D, num_axes=A), rotate)
    add("rope+yarn", lambda: reg.build("rope", head_dim=D, num_axes=A, scaling=yarn), rotate, "rope")
    add("hier_rope", lambda: reg.build("hier_rope", head_dim=D), rotate)
    t = torch.randn(B, L, 8, device=device)
    add("wire", lambda: reg.build("wire", head_dim=D, k=8), lambda e, q, k: e(q, k, t))
    add("cope", lambda: reg.build("cope", head_dim=D, max_positions=64), lambda e, q, k: e(q, k))
    add("fire", lambda: reg.build("fire", num_heads=H), lambda e, q, k: e(token_dist))
    add("spd_bias", lambda: reg.build("spd_bias", num_heads=H), lambda e, q, k: e(token_dist.clamp(min=0)))
    # not an encoder: causal SDPA itself at the same shape, the O(L²) work a bias encoder is added to
    cases["(sdpa, ref.)"] = (
        None,
        lambda q, k: F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), is_causal=True
        ),
    )
    for name in dict.fromkeys(LEARNED_ROTATIONS + tuple(reg.ENCODERS.names())):
        if name not in cases and name not in skipped:
            add(name, lambda name=name: _generic_build(reg, name, D, A, H), lambda e, q, k: e(q, k, coords.float()))
    return cases, skipped


def _generic_build(reg, name, D, A, H):
    """Build a StructuralRoPE-shaped encoder from the options it declares (head_dim, num_axes, num_heads)."""
    import inspect

    params = inspect.signature(reg.ENCODERS.load(name)).parameters
    known = {"head_dim": D, "num_axes": A, "num_heads": H, "dim": D}
    return reg.build(name, **{k: v for k, v in known.items() if k in params})


def run_encoders(B, L, H, D, A, repeat, device="cpu"):
    torch.manual_seed(0)
    q0 = torch.randn(B, L, H, D, device=device)
    k0 = torch.randn(B, L, H, D, device=device)
    cases, skipped = encoder_cases(B, L, H, D, A, device)

    def once(fn):
        q, k = q0.clone().requires_grad_(True), k0.clone().requires_grad_(True)
        _loss_of(fn(q, k)).backward()
        if device != "cpu":
            torch.cuda.synchronize()

    def block(fn, n):
        def go():
            for _ in range(n):
                once(fn)

        return go

    runs, inner = [], {}
    for name in cases:  # a trial call each (drops encoders whose call fails), then calls per timed block
        try:
            once(cases[name][1])
            t0 = time.perf_counter()
            once(cases[name][1])
            # blocks of ≥ ~0.2 s: one sub-millisecond call timed right after a multi-second O(L²) one
            # read tens of times slower (--quick: RoPE 0.6 ms back to back, ~40 ms interleaved singly)
            inner[name] = max(1, min(200, round(0.2 / max(time.perf_counter() - t0, 1e-6))))
            runs.append(name)
        except Exception as e:
            skipped[name] = f"{type(e).__name__}: {e}"[:120]
    blocks = timeit_interleaved([block(cases[n][1], inner[n]) for n in runs], repeat, warmup=1)
    times = [[t / inner[n] for t in ts] for n, ts in zip(runs, blocks)]
    base = times[runs.index("rope")]
    print(
        f"forward+backward, B={B} L={L} H={H} D={D} A={A}, {device}; {repeat} interleaved rounds, each a block of "
        "back-to-back calls (≥ ~0.2 s) per encoder; times per call"
    )
    print(f"{'encoder':<16} {'min ms':>9} {'median ms':>10} {'ratio vs rope':>14}  (median of per-round ratios)")
    for name, ts in zip(runs, times):
        print(f"{name:<16} {min(ts) * 1e3:9.2f} {statistics.median(ts) * 1e3:10.2f} {paired_ratio(ts, base):14.2f}")
    for name, why in skipped.items():
        print(f"{name:<16} skipped: {why}")
    return {n: paired_ratio(ts, base) for n, ts in zip(runs, times)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--encoders", action="store_true", help="every registered encoder vs fixed RoPE, fwd+bwd")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.encoders:
        shape = (1, 256, 4, 32, 3) if args.quick else (2, 1024, 8, 64, 3)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
        run_encoders(*shape, args.repeat or (3 if args.quick else 7), args.device)
        return
    shapes = [(2, 512, 8, 64)] if args.quick else [(4, 2048, 16, 128), (1, 8192, 8, 64)]
    repeat = args.repeat or (7 if args.quick else 15)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for shape in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            run(*shape, dtype, repeat)


if __name__ == "__main__":
    main()
