"""Encoders: torch.compile(fullgraph=True) without graph breaks, (B, H, L, D) layout, ShapeError before compute."""

from __future__ import annotations

import pytest
import torch

from structpos.encoders import WIRE, AWRoPE, HierarchicalRoPE, StructuralRoPE, apply_rotary
from structpos.exceptions import ShapeError, SpecError

ALLOCS = ["sectioned", "interleaved", "per_head", "mixed"]


def make(alloc, qk_layout="blhd"):
    torch.manual_seed(0)
    kw = {"mixing": torch.randn(8, 3)} if alloc == "mixed" else {}
    return StructuralRoPE(16, 3, alloc, num_heads=4, qk_layout=qk_layout, **kw)


@pytest.mark.parametrize("alloc", ALLOCS)
@pytest.mark.parametrize("coord_dtype", [torch.int64, torch.float32])
def test_fullgraph_compile_matches_eager(alloc, coord_dtype):
    torch._dynamo.reset()
    rope = make(alloc, "bhld")
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 2, 9, 16)
    c = torch.randint(0, 300, (2, 9, 3)).to(coord_dtype)
    if alloc == "per_head":
        rope = StructuralRoPE(16, 3, "per_head", sections=[2, 2, 0], num_heads=4, qk_layout="bhld")
    compiled = torch.compile(rope, fullgraph=True, backend="eager")  # raises on any graph break
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            a, b = compiled(q, k, c), rope(q, k, c)
        torch.testing.assert_close(a[0], b[0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(a[1], b[1], rtol=1e-5, atol=1e-5)


def test_fullgraph_compile_inductor_hierarchical_and_wire():
    torch._dynamo.reset()
    h = HierarchicalRoPE(16, "document")
    q = torch.randn(1, 7, 2, 16)
    c = torch.randint(0, 20, (1, 7, 3))
    out = torch.compile(h, fullgraph=True)(q, q, c)
    torch.testing.assert_close(out[0], h(q, q, c)[0], rtol=1e-5, atol=1e-5)
    w = WIRE(16, 2, qk_layout="bhld")
    t = torch.randn(1, 7, 2)
    qb = q.transpose(1, 2)
    out = torch.compile(w, fullgraph=True, backend="eager")(qb, qb, t)
    torch.testing.assert_close(out[0], w(qb, qb, t)[0])


@pytest.mark.parametrize("alloc", ALLOCS)
def test_bhld_layout_equals_blhd(alloc):
    a, b = make(alloc, "blhd"), make(alloc, "bhld")
    q, k = torch.randn(2, 6, 4, 16), torch.randn(2, 6, 4, 16)
    c = torch.randint(0, 50, (2, 6, 3))
    qa, ka = a(q, k, c)
    qb, kb = b(q.transpose(1, 2), k.transpose(1, 2), c)
    assert qb.shape == (2, 4, 6, 16)
    torch.testing.assert_close(qb.transpose(1, 2), qa, rtol=0, atol=0)
    torch.testing.assert_close(kb.transpose(1, 2), ka, rtol=0, atol=0)
    # packed (H, T, D) as well
    qp = b.rotate(q[0].transpose(0, 1).contiguous(), c[0])
    torch.testing.assert_close(qp.transpose(0, 1), qa[0], rtol=0, atol=1e-5)  # mixed: another matmul blocking


def test_wire_bhld_equals_blhd():
    q = torch.randn(2, 5, 3, 8)
    t = torch.randn(2, 5, 2)
    a = WIRE(8, 2)(q, q, t)[0]
    b = WIRE(8, 2, qk_layout="bhld")(q.transpose(1, 2), q.transpose(1, 2), t)[0]
    torch.testing.assert_close(b.transpose(1, 2), a, rtol=0, atol=0)


@pytest.mark.parametrize(
    "bad,match",
    [
        (
            torch.zeros(2, 6, 4, 16, dtype=torch.int64),
            r"floating tensor \(B, L, H, 16\).*given torch.int64 with shape \(2, 6, 4, 16\)",
        ),
        (torch.zeros(2, 6, 4, 12), r"shape \(B, L, H, 16\).*given \(2, 6, 4, 12\)"),
        (torch.zeros(6, 16), r"given \(6, 16\)"),
    ],
)
def test_bad_q_raises_shape_error_before_compute(bad, match, monkeypatch):
    rope = make("sectioned")
    calls = []
    monkeypatch.setattr(rope, "cos_sin", lambda *a, **k: calls.append(1))
    with pytest.raises(ShapeError, match=match):
        rope(bad, torch.zeros(2, 6, 4, 16), torch.zeros(2, 6, 3, dtype=torch.int64))
    assert not calls


@pytest.mark.parametrize(
    "coords,match",
    [
        (torch.zeros(2, 6, 2, dtype=torch.int64), r"expected \(\.\.\., 3\), given \(2, 6, 2\)"),
        (torch.zeros(2, 5, 3, dtype=torch.int64), r"must have shape \(2, 6, 3\).*given \(2, 5, 3\)"),
        (torch.zeros(2, 6, 3, dtype=torch.bfloat16), r"bfloat16.*given \(2, 6, 3\)"),
    ],
)
def test_bad_coords_raise_shape_error_naming_expected_and_given(coords, match):
    rope = make("interleaved")
    with pytest.raises(ShapeError, match=match):
        rope(torch.zeros(2, 6, 4, 16), torch.zeros(2, 6, 4, 16), coords)


def test_other_encoders_reject_integer_inputs():
    with pytest.raises(ShapeError, match="floating"):
        WIRE(8, 2)(torch.zeros(5, 2, 8, dtype=torch.int32), torch.zeros(5, 2, 8), torch.zeros(5, 2))
    with pytest.raises(ShapeError, match="floating"):
        AWRoPE(8)(
            torch.zeros(3, 8, dtype=torch.int64),
            torch.zeros(3, 8),
            torch.tensor([[0, 1], [1, 0]]),
            a=torch.tensor([0.5, -0.5]),
        )
    with pytest.raises(ShapeError, match="floating"):
        apply_rotary(torch.zeros(2, 4, dtype=torch.int64), torch.zeros(2, 2), torch.zeros(2, 2))
    with pytest.raises(SpecError, match="qk_layout"):
        StructuralRoPE(8, 2, qk_layout="lbhd")
