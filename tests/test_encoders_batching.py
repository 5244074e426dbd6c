"""Padded (B, L, H, D) + mask and packed (T, H, D) + cu_seqlens give identical results."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from structpos.encoders import HierarchicalRoPE, StructuralRoPE, collate, pack_padded, unpack_packed


def examples(lengths, axes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 200, (n, axes), generator=g) for n in lengths]


@pytest.mark.parametrize("alloc", ["sectioned", "interleaved", "per_head", "mixed"])
def test_padded_equals_packed_rotation(alloc):
    lengths = [5, 1, 9, 3]
    batch = collate(examples(lengths))
    assert batch.coords.shape == (4, 9, 3) and batch.cu_seqlens.tolist() == [0, 5, 6, 15, 18]
    assert batch.max_seqlen == 9 and batch.mask.sum().item() == 18
    rope = StructuralRoPE(32, 3, allocation=alloc, num_heads=4)
    q_packed, k_packed = torch.randn(18, 4, 32), torch.randn(18, 4, 32)
    q_pad, k_pad = batch.unpack(q_packed), batch.unpack(k_packed)
    qp, kp = rope(q_packed, k_packed, batch.packed, batch.cu_seqlens)
    qd, kd = rope(q_pad, k_pad, batch.coords, mask=batch.mask)
    assert torch.equal(batch.pack(qd), qp) and torch.equal(batch.pack(kd), kp)
    assert torch.equal(qd[~batch.mask], q_pad[~batch.mask])  # padding untouched


def test_padded_equals_packed_attention():
    lengths = [4, 7, 2]
    batch = collate(examples(lengths, axes=2, seed=3))
    rope = StructuralRoPE(16, 2)
    T = sum(lengths)
    q, k, v = torch.randn(T, 2, 16), torch.randn(T, 2, 16), torch.randn(T, 2, 16)
    qp, kp = rope(q, k, batch.packed, batch.cu_seqlens)
    packed_out = []
    cu = batch.cu_seqlens.tolist()
    for s, e in zip(cu[:-1], cu[1:]):  # one sequence at a time
        o = F.scaled_dot_product_attention(qp[s:e].transpose(0, 1), kp[s:e].transpose(0, 1), v[s:e].transpose(0, 1))
        packed_out.append(o.transpose(0, 1))
    packed_out = torch.cat(packed_out)
    qd, kd = rope(batch.unpack(q), batch.unpack(k), batch.coords, mask=batch.mask)
    attn_mask = batch.mask[:, None, None, :]  # True = attend (PyTorch's convention)
    out = F.scaled_dot_product_attention(
        qd.transpose(1, 2), kd.transpose(1, 2), batch.unpack(v).transpose(1, 2), attn_mask=attn_mask
    )
    torch.testing.assert_close(batch.pack(out.transpose(1, 2)), packed_out, rtol=1e-5, atol=1e-5)


def test_default_positions_packed_match_padded():
    lengths = [3, 6, 2]
    batch = collate([torch.zeros(n, 1, dtype=torch.int64) for n in lengths])
    rope = HierarchicalRoPE(16, levels=("a", "b"))
    x = torch.randn(11, 2, 16)
    qp, _ = rope(x, x, None, batch.cu_seqlens)
    qd, _ = rope(batch.unpack(x), batch.unpack(x), None)
    assert torch.equal(batch.pack(qd), qp)
    pos = torch.arange(6).expand(3, 6)[..., None].expand(3, 6, 2)
    qe, _ = rope(batch.unpack(x), batch.unpack(x), pos)
    assert torch.equal(qe, qd)


def test_collate_forms_roundtrip_and_errors():
    ex = [torch.rand(4, 2), torch.rand(0, 2), torch.rand(2, 2)]
    b = collate(ex, pad_to_multiple=8)
    assert b.coords.dtype == torch.float32 and b.coords.shape == (3, 8, 2) and b.lengths.tolist() == [4, 0, 2]
    torch.testing.assert_close(b.packed, torch.cat(ex))
    x = torch.randn(3, 8, 5)
    assert torch.equal(b.unpack(b.pack(x)), torch.where(b.mask[..., None], x, torch.zeros(())))
    assert torch.equal(pack_padded(b.coords, b.mask), b.packed)
    with pytest.raises(ValueError, match="axes"):
        collate([torch.zeros(2, 2), torch.zeros(3, 3)])
    with pytest.raises(ValueError, match="non-finite"):
        collate([torch.tensor([[0.0], [float("inf")]])])
    with pytest.raises(ValueError, match="cu_seqlens"):
        unpack_packed(torch.zeros(5, 2), torch.tensor([0, 3, 4]))
    one_d = collate([[1, 2, 3], [4]])
    assert one_d.coords.shape == (2, 3, 1) and one_d.coords.dtype == torch.int64
