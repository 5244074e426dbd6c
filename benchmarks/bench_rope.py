"""Benchmark: StructuralRoPE (3 axes) vs 1-D RoPE of the same shape vs an eager HF-style apply.

Each variant takes q, k of shape (B, L, H, D) plus positions/coordinates and returns the
rotated q, k, including the cos/sin computation (HF recomputes cos/sin every call, as
``LlamaRotaryEmbedding.forward`` + ``apply_rotary_pos_emb`` do). Goals: StructuralRoPE(3 axes)
≤ 1.1× our 1-D RoPE and ≤ 1.0× the HF-style eager apply.

    python benchmarks/bench_rope.py            # B=4, L=2048, H=16, D=128
    python benchmarks/bench_rope.py --quick    # small shapes, a few seconds
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes = [(2, 512, 8, 64)] if args.quick else [(4, 2048, 16, 128), (1, 8192, 8, 64)]
    repeat = args.repeat or (7 if args.quick else 15)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for shape in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            run(*shape, dtype, repeat)


if __name__ == "__main__":
    main()
