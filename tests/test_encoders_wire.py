"""WIRE: spectral rotary encoding; on a path graph it orders nodes like 1-D RoPE."""

from __future__ import annotations

import math

import pytest
import torch

from structpos.encoders import WIRE, StructuralRoPE, spectral_coords


def path_edges(n):
    i = torch.arange(n - 1)
    return torch.stack([torch.cat([i, i + 1]), torch.cat([i + 1, i])])


def fiedler_by_hand(n):
    """Fiedler vector of the path's combinatorial Laplacian, from its own eigh (no helper)."""
    lap = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n - 1):
        lap[i, i] += 1
        lap[i + 1, i + 1] += 1
        lap[i, i + 1] = lap[i + 1, i] = -1
    return torch.linalg.eigh(lap).eigenvectors[:, 1]


def test_spectral_coords_on_path_are_the_cosine_mode():
    n = 12
    t = spectral_coords(path_edges(n), n, k=2)
    closed = torch.cos(math.pi * (torch.arange(n, dtype=torch.float64) + 0.5) / n)
    closed = closed / closed.norm()
    assert torch.allclose(t[:, 0], closed, atol=1e-10) or torch.allclose(t[:, 0], -closed, atol=1e-10)
    f = fiedler_by_hand(n)
    torch.testing.assert_close(t[:, 0].abs(), f.abs())
    assert t[t[:, 0].abs().argmax(), 0] > 0  # deterministic sign
    tn = spectral_coords(path_edges(n), n, k=1, normalized=True)[:, 0]
    deg = torch.full((n,), 2.0, dtype=torch.float64)
    deg[[0, -1]] = 1.0
    tn = tn / deg.sqrt()  # the random-walk eigenvector D^{-1/2}u of the path is monotone
    assert (tn[1:] < tn[:-1]).all() or (tn[1:] > tn[:-1]).all()
    with pytest.raises(ValueError, match="k must be"):
        spectral_coords(path_edges(n), n, k=n)


def test_wire_on_path_orders_like_1d_rope():
    n, D = 16, 2  # one rotation plane, so scores are cos of the angle difference
    t = torch.as_tensor(fiedler_by_hand(n))[:, None].float()
    scale = 1.0 / float(t.max() - t.min())  # the whole path spans < 1 radian: no wrap-around
    wire = WIRE(D, 1, scale=scale)
    ang = wire.angles(t)[:, 0]
    assert (ang[1:] < ang[:-1]).all() or (ang[1:] > ang[:-1]).all()  # monotone along the path
    x = torch.tensor([1.0, 0.3]).expand(n, 1, D)
    qw, kw = wire(x, x, t)
    rope = StructuralRoPE(D, 1, base=10000.0)
    qr, kr = rope(x, x, (torch.arange(n).float() / n)[:, None])  # 1-D RoPE, < 1 radian span too
    sw = torch.einsum("ihd,jhd->ij", qw, kw)
    sr = torch.einsum("ihd,jhd->ij", qr, kr)
    for i in range(n):
        for side in (torch.arange(0, i), torch.arange(i + 1, n)):
            if len(side) < 2:
                continue
            # the order of keys on each side of the query is the same under WIRE and 1-D RoPE
            assert torch.equal(sw[i, side].argsort(), sr[i, side].argsort())


def test_wire_relative_and_learnable():
    torch.manual_seed(0)
    wire = WIRE(16, 3, learnable=True, omega=torch.randn(8, 3) * 3)
    t = torch.randn(2, 10, 3)
    q, k = torch.randn(2, 10, 2, 16), torch.randn(2, 10, 2, 16)
    s = torch.einsum("bihd,bjhd->bhij", *wire(q, k, t))
    s2 = torch.einsum("bihd,bjhd->bhij", *wire(q, k, t + torch.tensor([0.7, -2.0, 5.0])))
    torch.testing.assert_close(s, s2, rtol=1e-4, atol=1e-4)
    s.square().sum().backward()
    assert wire.omega.grad is not None and wire.omega.grad.abs().sum() > 0
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 7:] = False
    qm, _ = wire(q, k, t, mask=mask)
    assert torch.equal(qm[1, 7:], q[1, 7:])
    with pytest.raises(ValueError, match="non-finite"):
        wire(q, k, torch.full((2, 10, 3), float("nan")))
    with pytest.raises(ValueError, match="end in k"):
        wire(q, k, torch.zeros(2, 10, 2))
