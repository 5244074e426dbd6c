"""StructuralRoPE: relative property, identities, references (HF Llama, Qwen2-VL, Qwen3-VL)."""

from __future__ import annotations

import pytest
import torch

from structpos.encoders import StructuralRoPE, apply_rotary, layout_permutation

ALLOCS = ["sectioned", "interleaved", "per_head", "mixed"]


# ---- independent references (written from the HF sources' formulas) -------------------------
def hf_inv_freq(dim, base=10000.0):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def hf_rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + hf_rotate_half(q) * sin, k * cos + hf_rotate_half(k) * sin


def hf_llama_cos_sin(dim, position_ids, dtype):
    inv = hf_inv_freq(dim)
    freqs = (inv[None, :, None].expand(position_ids.shape[0], -1, 1) @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def qwen2vl_cos_sin(dim, position_ids_3, mrope_section):
    """Qwen2-VL: position_ids (3, B, L); split the duplicated cos along mrope_section*2."""
    inv = hf_inv_freq(dim)
    freqs = position_ids_3[..., None].float() * inv  # (3, B, L, P)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    sec = list(mrope_section) * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(sec, dim=-1))], dim=-1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(sec, dim=-1))], dim=-1)
    return cos, sin


def qwen3vl_cos_sin(dim, position_ids_3, mrope_section):
    """Qwen3-VL apply_interleaved_mrope: THWTHW..., leftover pairs to T."""
    inv = hf_inv_freq(dim)
    freqs = position_ids_3[..., None].float() * inv  # (3, B, L, P)
    freqs_t = freqs[0].clone()
    for d, offset in ((1, 1), (2, 2)):
        idx = slice(offset, mrope_section[d] * 3, 3)
        freqs_t[..., idx] = freqs[d, ..., idx]
    emb = torch.cat((freqs_t, freqs_t), dim=-1)
    return emb.cos(), emb.sin()


def scores(q, k):
    return torch.einsum("blhd,bmhd->bhlm", q, k)


def make(alloc, D=32, A=3, H=4, **kw):
    torch.manual_seed(0)
    if alloc == "mixed":
        kw.setdefault("mixing", torch.randn(D // 2, A))
    return StructuralRoPE(D, A, allocation=alloc, num_heads=H, **kw)


# ---- properties ---------------------------------------------------------------------------------
@pytest.mark.parametrize("alloc", ALLOCS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_norms_preserved_and_zero_is_identity(alloc, layout):
    rope = make(alloc, layout=layout)
    q, k = torch.randn(2, 9, 4, 32, dtype=torch.float64), torch.randn(2, 9, 4, 32, dtype=torch.float64)
    c = torch.randint(0, 500, (2, 9, 3))
    qr, kr = rope(q, k, c)
    torch.testing.assert_close(qr.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(kr.norm(dim=-1), k.norm(dim=-1))
    assert not torch.allclose(qr, q)
    q0, k0 = rope(q, k, torch.zeros(2, 9, 3, dtype=torch.int64))
    torch.testing.assert_close(q0, q, rtol=0, atol=0)
    torch.testing.assert_close(k0, k, rtol=0, atol=0)


@pytest.mark.parametrize("alloc", ALLOCS)
@pytest.mark.parametrize("float_coords", [False, True])
def test_scores_invariant_to_joint_shift(alloc, float_coords):
    rope = make(alloc)
    q, k = torch.randn(1, 12, 4, 32, dtype=torch.float64), torch.randn(1, 12, 4, 32, dtype=torch.float64)
    c = torch.randint(0, 40, (1, 12, 3))
    if float_coords:
        c = c.double() + torch.rand(1, 12, 3, dtype=torch.float64)
    base = scores(*rope(q, k, c))
    for shift in ([7, 0, 0], [0, 13, 0], [0, 0, 5], [3, 11, 29]):
        s = torch.tensor(shift, dtype=c.dtype)
        torch.testing.assert_close(scores(*rope(q, k, c + s)), base, rtol=1e-9, atol=1e-9)
    # a non-trivial change of relative coordinates does change the scores
    c2 = c.clone()
    c2[0, 0] += torch.tensor([1, 2, 3], dtype=c.dtype)
    assert not torch.allclose(scores(*rope(q, k, c2)), base)


def test_scores_shift_invariant_fp32_int_table():
    rope = make("sectioned")
    q, k = torch.randn(1, 16, 4, 32), torch.randn(1, 16, 4, 32)
    c = torch.randint(0, 64, (1, 16, 3))
    base = scores(*rope(q, k, c))
    torch.testing.assert_close(scores(*rope(q, k, c + 100)), base, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "alloc,sections", [("sectioned", None), ("sectioned", [4, 6, 6]), ("interleaved", None), ("interleaved", [6, 5, 5])]
)
def test_equal_coords_reproduce_1d_rope_and_hf(alloc, sections):
    D = 32
    rope3 = StructuralRoPE(D, 3, allocation=alloc, sections=sections)
    rope1 = StructuralRoPE(D, 1)
    q, k = torch.randn(2, 20, 4, D), torch.randn(2, 20, 4, D)
    pos = torch.randint(0, 3000, (2, 20))
    q3, k3 = rope3(q, k, pos[..., None].expand(2, 20, 3))
    q1, k1 = rope1(q, k, pos[..., None])
    assert torch.equal(q3, q1) and torch.equal(k3, k1)
    cos, sin = hf_llama_cos_sin(D, pos, q.dtype)
    qh, kh = hf_apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(q1, qh, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k1, kh, rtol=1e-5, atol=1e-5)
    # default positions (coords=None) are the token index
    qd, _ = rope3(q, k)
    qa, _ = rope1(q, k, torch.arange(20).expand(2, 20)[..., None])
    assert torch.equal(qd, qa)


def test_sectioned_matches_qwen2vl_mrope():
    D, sec = 128, [16, 24, 24]
    pos3 = torch.stack([torch.randint(0, 50, (2, 30)), torch.randint(0, 20, (2, 30)), torch.randint(0, 20, (2, 30))])
    q, k = torch.randn(2, 30, 2, D), torch.randn(2, 30, 2, D)
    cos, sin = qwen2vl_cos_sin(D, pos3, sec)
    qh, kh = hf_apply_rotary_pos_emb(q, k, cos, sin)
    rope = StructuralRoPE(D, 3, allocation="sectioned", sections=sec)
    qr, kr = rope(q, k, pos3.permute(1, 2, 0))
    torch.testing.assert_close(qr, qh, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kr, kh, rtol=1e-5, atol=1e-5)


def test_interleaved_matches_qwen3vl():
    D, sec = 128, [24, 20, 20]
    pos3 = torch.randint(0, 300, (3, 1, 25))
    q, k = torch.randn(1, 25, 2, D), torch.randn(1, 25, 2, D)
    cos, sin = qwen3vl_cos_sin(D, pos3, sec)
    qh, kh = hf_apply_rotary_pos_emb(q, k, cos, sin)
    rope = StructuralRoPE(D, 3, allocation="interleaved", sections=sec)
    qr, kr = rope(q, k, pos3.permute(1, 2, 0))
    torch.testing.assert_close(qr, qh, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kr, kh, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("alloc", ALLOCS)
def test_half_split_equals_interleaved_under_permutation(alloc):
    half, inter = make(alloc, layout="half"), make(alloc, layout="interleaved")
    q, k = torch.randn(2, 7, 4, 32), torch.randn(2, 7, 4, 32)
    c = torch.randint(0, 100, (2, 7, 3))
    perm = layout_permutation(32)
    qh, kh = half(q, k, c)
    qi, ki = inter(q[..., perm], k[..., perm], c)
    torch.testing.assert_close(qi, qh[..., perm], rtol=0, atol=0)
    torch.testing.assert_close(qi[..., perm.argsort()], qh, rtol=0, atol=0)


def test_bf16_inputs_large_coordinates_get_distinct_angles():
    rope = StructuralRoPE(64, 2)
    pos = torch.arange(256, 300)
    c = torch.stack([pos, pos], dim=-1)[None]
    ang = rope.angles(c)
    assert ang.dtype == torch.float32
    assert ang[0, :, 0].unique().numel() == pos.numel()  # 257, 258, ... not rounded as bf16 would
    q = torch.randn(1, 1, 1, 64).expand(1, pos.numel(), 1, 64).to(torch.bfloat16)
    qr, _ = rope(q, q, c)
    assert qr[0, :, 0].float().unique(dim=0).shape[0] == pos.numel()
    ref, _ = rope(q.float(), q.float(), c)
    torch.testing.assert_close(qr.float(), ref, rtol=0.05, atol=0.05)
    with pytest.raises(ValueError, match="bfloat16"):
        rope(q, q, c.to(torch.bfloat16))


@pytest.mark.parametrize("alloc", ["sectioned", "interleaved", "per_head"])
def test_table_path_matches_direct_angles(alloc):
    rope = make(alloc)
    c = torch.randint(0, 1000, (3, 11, 3))
    cos_t, sin_t = rope.cos_sin(c)  # cached integer tables
    ang = rope.angles(c)
    if alloc != "per_head":
        ang = ang.unsqueeze(-2)
    torch.testing.assert_close(cos_t, ang.cos(), rtol=0, atol=1e-6)
    torch.testing.assert_close(sin_t, ang.sin(), rtol=0, atol=1e-6)
    cos_f, _ = rope.cos_sin(c.float())  # real coordinates: direct path
    torch.testing.assert_close(cos_f, cos_t, rtol=0, atol=1e-6)


def test_unused_axis_and_stacked_table():
    rope = StructuralRoPE(32, 3, sections=[8, 8, 0])
    c = torch.randint(0, 300, (2, 5, 3))
    cos, _ = rope.cos_sin(c)
    torch.testing.assert_close(cos, rope.angles(c).cos().unsqueeze(-2), rtol=0, atol=1e-6)
    c2 = c.clone()
    c2[..., 2] += 7  # the axis without pairs has no effect
    assert torch.equal(rope.cos_sin(c2)[0], cos)


def test_huge_integer_coordinates_use_exact_angles():
    rope = StructuralRoPE(8, 1)
    c = torch.tensor([[(1 << 25) + 1], [(1 << 25) + 2]])
    cos, sin = rope.cos_sin(c)
    ref = c.double() * rope.inv_freq.double()
    torch.testing.assert_close(cos[:, 0].double(), ref.cos(), rtol=0, atol=1e-6)
    assert not torch.equal(cos[0], cos[1])  # fp32 would round both to the same value


def test_table_cache_keyed_by_extent_not_length():
    rope = StructuralRoPE(32, 2)
    for length in (5, 17, 33, 60):
        rope.cos_sin(torch.randint(0, 50, (length, 2)))
    assert len(rope.cache) == 1
    ((extent, device, dtype),) = rope.cache.keys()
    assert extent == 64 and device == torch.device("cpu") and dtype == torch.float32
    rope.cos_sin(torch.randint(0, 50, (4, 2)), torch.bfloat16)
    rope.cos_sin(torch.tensor([[1000, 3]]))
    keys = sorted((k[0], str(k[2])) for k in rope.cache.keys())
    assert keys == [(64, "torch.bfloat16"), (1024, "torch.float32")]


def test_per_head_allocation_and_gqa():
    rope = StructuralRoPE(16, 2, allocation="per_head", num_heads=4)  # heads 0,1 -> axis 0; 2,3 -> axis 1
    c = torch.tensor([[[5, 9]]])
    one_d = StructuralRoPE(16, 1)
    q = torch.randn(1, 1, 4, 16)
    qr, kr = rope(q, q[:, :, :2], c)  # k has 2 heads (GQA groups of 2)
    qa, _ = one_d(q, q, c[..., :1])
    qb, _ = one_d(q, q, c[..., 1:])
    torch.testing.assert_close(qr[:, :, :2], qa[:, :, :2])
    torch.testing.assert_close(qr[:, :, 2:], qb[:, :, 2:])
    torch.testing.assert_close(kr, torch.stack([qa[:, :, 0], qb[:, :, 1]], dim=2))  # k head g follows q group g
    uneven = StructuralRoPE(16, 2, allocation="per_head", num_heads=4, sections=[1, 3])
    with pytest.raises(ValueError, match="group"):
        uneven(q, q[:, :, :2], c)


def test_mask_makes_padding_identity():
    rope = StructuralRoPE(16, 2)
    q = torch.randn(2, 5, 2, 16)
    c = torch.randint(1, 9, (2, 5, 2))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    qr, _ = rope(q, q, c, mask=mask)
    torch.testing.assert_close(qr[0, 3:], q[0, 3:], rtol=0, atol=0)
    full, _ = rope(q, q, c)
    torch.testing.assert_close(qr[mask], full[mask])


def test_learnable_mixing_gets_gradients_and_keeps_relative_property():
    torch.manual_seed(1)
    rope = StructuralRoPE(16, 2, allocation="mixed", mixing=torch.randn(8, 2), learnable=True)
    q, k = torch.randn(1, 6, 2, 16), torch.randn(1, 6, 2, 16)
    c = torch.rand(1, 6, 2) * 10
    s = scores(*rope(q, k, c))
    s.square().sum().backward()
    assert rope.mixing.grad is not None and rope.mixing.grad.abs().sum() > 0
    with torch.no_grad():
        torch.testing.assert_close(scores(*rope(q, k, c + torch.tensor([2.5, -4.0]))), s, rtol=1e-4, atol=1e-4)
    lf = StructuralRoPE(16, 2, learnable=True)
    q.requires_grad_(True)
    lf(q, k, torch.randint(0, 9, (1, 6, 2)))[0].sum().backward()
    assert lf.inv_freq.grad is not None and q.grad is not None
    c = torch.randint(0, 9, (1, 6, 2))
    with torch.no_grad():  # no stale cached tables after a parameter update
        before = lf(q, k, c)[0]
        lf.inv_freq.mul_(0.5)
        after = lf(q, k, c)[0]
        ref = StructuralRoPE(16, 2, base=10000.0)
        ref.inv_freq.copy_(lf.inv_freq)
        assert not torch.equal(before, after)
        torch.testing.assert_close(after, ref.rotate(q, c), rtol=1e-5, atol=1e-5)


def test_apply_rotary_autograd_matches_fast_path():
    x = torch.randn(3, 4, 2, 8)
    ang = torch.rand(3, 4, 1, 4) * 6
    for layout in ("half", "interleaved"):
        fast = apply_rotary(x, ang.cos(), ang.sin(), layout)
        slow = apply_rotary(x.clone().requires_grad_(True), ang.cos(), ang.sin(), layout)
        torch.testing.assert_close(slow.detach(), fast)


@pytest.mark.parametrize(
    "kwargs,call,match",
    [
        ({}, lambda r: r(torch.randn(1, 3, 2, 16), torch.randn(1, 3, 2, 16), torch.zeros(1, 3, 3)), "num_axes"),
        ({}, lambda r: r(torch.randn(1, 3, 2, 16), torch.randn(1, 3, 2, 16), torch.zeros(1, 4, 2)), "token shape"),
        ({}, lambda r: r(torch.randn(1, 3, 2, 8), torch.randn(1, 3, 2, 8), torch.zeros(1, 3, 2)), "16"),
        (
            {},
            lambda r: r(
                torch.randn(1, 2, 1, 16), torch.randn(1, 2, 1, 16), torch.tensor([[[0.0, float("nan")], [1, 1]]])
            ),
            "non-finite",
        ),
        (
            {},
            lambda r: r(torch.randn(4, 1, 16), torch.randn(4, 1, 16), None, torch.tensor([0, 3, 2, 4])),
            "non-decreasing",
        ),
        ({}, lambda r: r(torch.randn(4, 1, 16), torch.randn(4, 1, 16), None, torch.tensor([0, 3])), "end at"),
    ],
)
def test_bad_input_raises(kwargs, call, match):
    with pytest.raises(ValueError, match=match):
        call(StructuralRoPE(16, 2, **kwargs))


def test_bad_construction_raises():
    with pytest.raises(ValueError, match="sections"):
        StructuralRoPE(16, 2, sections=[3, 3])
    with pytest.raises(ValueError, match="num_heads"):
        StructuralRoPE(16, 2, allocation="per_head")
    with pytest.raises(ValueError, match="allocation"):
        StructuralRoPE(16, 2, allocation="diagonal")
    with pytest.raises(ValueError, match="even"):
        StructuralRoPE(15, 2)
    with pytest.raises(ValueError, match="mixing"):
        StructuralRoPE(16, 2, allocation="mixed", mixing=torch.randn(8, 3))


# ---- CUDA ---------------------------------------------------------------------------------------
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("alloc", ALLOCS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_cuda_equals_cpu_forward_and_backward(alloc, layout):
    """The same module moved to CUDA rotates q, k and passes gradients as on the CPU (float32,
    coordinates up to 5,000: the angle table is built on the device), packed sequences included."""
    rope = make(alloc, layout=layout)
    torch.manual_seed(1)
    q, k = torch.randn(2, 33, 4, 32), torch.randn(2, 33, 4, 32)
    c = torch.randint(0, 5000, (2, 33, 3))
    out_cpu = [t.detach() for t in rope(q, k, c)]
    qc = q.cuda().requires_grad_()
    out = rope.cuda()(qc, k.cuda(), c.cuda())
    for a, b in zip(out, out_cpu):
        assert a.device.type == "cuda"
        torch.testing.assert_close(a.cpu(), b, atol=2e-5, rtol=1e-5)
    out[0].pow(2).sum().backward()  # rotations keep norms: d|R q|²/dq = 2 q
    torch.testing.assert_close(qc.grad.cpu(), 2 * q, atol=1e-4, rtol=1e-5)
    packed = rope(q.reshape(1, 66, 4, 32).cuda(), k.reshape(1, 66, 4, 32).cuda(), c.reshape(1, 66, 3).cuda())
    torch.testing.assert_close(packed[0].reshape(2, 33, 4, 32).cpu(), out_cpu[0], atol=2e-5, rtol=1e-5)
