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


def path_cosine_mode(n, c=1):
    """Unit eigenvector ``cos(π c (i + ½) / n)`` of the path's ``D − A`` (eigenvalue ``2 − 2cos(π c/n)``)."""
    v = torch.cos(math.pi * c * (torch.arange(n, dtype=torch.float64) + 0.5) / n)
    return v / v.norm()


def sign_is_canonical(t):
    """Every column's first entry within 1e-6 (relative) of its largest magnitude is positive."""
    mag = t.abs()
    first = (mag >= mag.max(dim=0).values * (1 - 1e-6)).to(torch.int8).argmax(dim=0)
    return bool((t[first, torch.arange(t.shape[1])] > 0).all())


def test_spectral_coords_on_path_are_the_cosine_mode():
    n = 12
    t = spectral_coords(path_edges(n), n, k=2)
    closed = path_cosine_mode(n)
    assert torch.allclose(t[:, 0], closed, atol=1e-10) or torch.allclose(t[:, 0], -closed, atol=1e-10)
    f = fiedler_by_hand(n)
    torch.testing.assert_close(t[:, 0].abs(), f.abs())
    assert sign_is_canonical(t)  # deterministic sign (both ends tie: node 0 is positive)
    lam = 2 - 2 * torch.cos(math.pi * torch.arange(1, 3, dtype=torch.float64) / n)
    torch.testing.assert_close(spectral_coords(path_edges(n), n, k=2, eigval_scale=True), t / lam.sqrt())
    tn = spectral_coords(path_edges(n), n, k=1, normalized=True)[:, 0]
    deg = torch.full((n,), 2.0, dtype=torch.float64)
    deg[[0, -1]] = 1.0
    tn = tn / deg.sqrt()  # the random-walk eigenvector D^{-1/2}u of the path is monotone
    assert (tn[1:] < tn[:-1]).all() or (tn[1:] > tn[:-1]).all()
    with pytest.raises(ValueError, match="k must be"):
        spectral_coords(path_edges(n), n, k=n)


def test_spectral_coords_drop_every_zero_mode_of_a_forest_of_paths():
    # paths of 7 and 5 nodes plus an isolated node: three zero modes of D − A are dropped
    e7, e5 = path_edges(7), path_edges(5) + 7
    n = 13
    t = spectral_coords(torch.cat([e7, e5], dim=1), n, k=3)
    assert sign_is_canonical(t)
    # the smallest non-zero eigenvalues: 2 − 2cos(π/7) < 2 − 2cos(π/5) < 2 − 2cos(2π/7)
    for col, (lo, hi, c) in enumerate([(0, 7, 1), (7, 12, 1), (0, 7, 2)]):
        mode = torch.zeros(n, dtype=torch.float64)
        mode[lo:hi] = path_cosine_mode(hi - lo, c)
        assert torch.allclose(t[:, col], mode, atol=1e-10) or torch.allclose(t[:, col], -mode, atol=1e-10)
    assert t[12].abs().max() == 0  # the isolated node takes no mode
    padded = spectral_coords(torch.cat([e7, e5], dim=1), n, k=12)  # only 13 − 3 modes exist
    assert padded[:, 10:].abs().max() == 0 and padded[:, :10].abs().sum(0).min() > 0


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
    with pytest.raises(ValueError, match=r"must have shape \(\.\.\., N, 3\)"):
        wire(q, k, torch.zeros(2, 10, 2))
