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


def timeit_interleaved(fns: list, repeat: int, warmup: int = 2) -> list[float]:
    """Best-of-``repeat`` seconds per function, the functions run in turn each round so that
    load from other processes hits all of them alike."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return [min(t) for t in times]


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
    name = str(dtype).replace("torch.", "")
    print(
        f"B={B} L={L} H={H} D={D} {name:8s}  struct3={t3 * 1e3:8.2f} ms  rope1d={t1 * 1e3:8.2f} ms  "
        f"hf_eager={thf * 1e3:8.2f} ms  |  struct3/rope1d={t3 / t1:5.3f} (goal ≤1.1)  "
        f"struct3/hf={t3 / thf:5.3f} (goal ≤1.0)"
    )
    return t3 / t1, t3 / thf


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes = [(2, 512, 8, 64)] if args.quick else [(4, 2048, 16, 128), (1, 8192, 8, 64)]
    repeat = args.repeat or (5 if args.quick else 10)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for shape in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            run(*shape, dtype, repeat)


if __name__ == "__main__":
    main()
