"""AW-RoPE: exact solve vs sparse series, gauge equivalence with node-wise RoPE, gradcheck."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos.encoders import AWRoPE, StructuralRoPE, aw_propagate_exact, aw_propagate_sparse, rope_inv_freq


def small_graph(n=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    edges = {(i, i + 1) for i in range(n - 1)}  # connected
    extra = torch.randint(0, n, (2, n), generator=g)
    edges |= {(int(a), int(b)) for a, b in extra.T if a != b}
    und = sorted(edges | {(b, a) for a, b in edges})
    return torch.tensor(und).T.contiguous()


def antisym_phases(ei, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = int(ei.max()) + 1
    r = torch.randn(n, n, generator=g, dtype=torch.float64)
    anti = r - r.T
    return anti[ei[0], ei[1]]


def numpy_exact(x, ei, a, omega, z):
    """Independent dense reference: T = P ⊙ exp(iωa) per channel, complex numpy solve."""
    x, ei, a, omega = x.numpy(), ei.numpy(), a.numpy(), omega.double().numpy()
    n, C = x.shape[0], x.shape[-1] // 2
    A = np.zeros((n, n))
    A[ei[0], ei[1]] = 1.0
    P = A / A.sum(1, keepdims=True)
    phase = np.zeros((n, n))
    phase[ei[0], ei[1]] = a
    X = x[..., :C] + 1j * x[..., C:]
    out = np.empty_like(X)
    for c in range(C):
        T = P * np.exp(1j * omega[c] * phase)
        out[..., c] = np.linalg.solve(np.eye(n) - z * T, X[..., c].reshape(n, -1)).reshape(X[..., c].shape)
    return torch.from_numpy(np.concatenate([out.real, out.imag], axis=-1))


def test_exact_matches_dense_reference_and_sparse_converges():
    ei = small_graph()
    n, D, z = 7, 8, 0.8
    x = torch.randn(n, 2, D, dtype=torch.float64)
    a = antisym_phases(ei)
    omega = rope_inv_freq(D).double()
    exact = aw_propagate_exact(x, ei, a, omega, z)
    torch.testing.assert_close(exact, numpy_exact(x, ei, a, omega, z))
    errs = []
    for K in (0, 2, 4, 8, 16, 32, 64, 128):
        err = (aw_propagate_sparse(x, ei, a, omega, z, K) - exact).abs().max().item()
        bound = z ** (K + 1) / (1 - z) * x.abs().max().item()
        assert err <= bound * (1 + 1e-9) + 1e-12
        errs.append(err)
    assert all(e2 < e1 for e1, e2 in zip(errs, errs[1:]))
    assert errs[-1] < 1e-10


def test_gradient_field_is_gauge_equivalent_to_nodewise_rope():
    ei = small_graph(9, seed=2)
    n, D, z = 9, 8, 0.6
    g = torch.randn(n, dtype=torch.float64) * 5
    a = g[ei[1]] - g[ei[0]]
    x = torch.randn(n, 3, D, dtype=torch.float64)
    rope = StructuralRoPE(D, 1)
    # plain propagation (no phases) by a real solve: (I - zP)^{-1}
    A = torch.zeros(n, n, dtype=torch.float64)
    A[ei[0], ei[1]] = 1.0
    P = A / A.sum(1, keepdim=True)
    rotated = rope.rotate(x, g[:, None])
    plain = torch.linalg.solve(torch.eye(n, dtype=torch.float64) - z * P, rotated.reshape(n, -1)).reshape(x.shape)
    ref = rope.rotate(plain, -g[:, None])
    for mode in ("exact", "sparse"):
        aw = AWRoPE(D, z=z, K=200, mode=mode)
        yq, yk = aw(x, x, ei, a=a)
        torch.testing.assert_close(yq, ref)
    aw_coords = AWRoPE(D, z=z, mode="exact", phase="coords")
    torch.testing.assert_close(aw_coords(x, x, ei, pos=g)[0], ref)


@pytest.mark.parametrize("mode", ["sparse", "exact"])
def test_gradcheck(mode):
    ei = small_graph(5, seed=1)
    omega = rope_inv_freq(4).double()
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    r = torch.randn(5, 5, dtype=torch.float64)

    def fn(x, r):
        a = (r - r.T)[ei[0], ei[1]]
        if mode == "sparse":
            return aw_propagate_sparse(x, ei, a, omega, 0.7, 4)
        return aw_propagate_exact(x, ei, a, omega, 0.7)

    assert torch.autograd.gradcheck(fn, (x, r.requires_grad_(True)))


def test_learned_phase_is_antisymmetric_and_trains():
    torch.manual_seed(0)
    ei = small_graph(6)
    aw = AWRoPE(8, phase="learned", feature_dim=5, K=4)
    h = torch.randn(6, 5)
    a = aw.edge_phases(ei, 6, h=h).detach()
    key = {(int(u), int(v)): float(p) for u, v, p in zip(ei[0], ei[1], a)}
    assert all(abs(p + key[(v, u)]) < 1e-6 for (u, v), p in key.items())
    assert a.abs().max() <= torch.pi
    q = torch.randn(6, 2, 8)
    yq, yk = aw(q, q, ei, h=h)
    yq.square().sum().backward()
    assert all(p.grad is not None for p in aw.edge_phase.parameters())


def test_bad_phases_raise():
    ei = small_graph(5)
    aw = AWRoPE(8)
    x = torch.randn(5, 8)
    sym = torch.ones(ei.shape[1])
    with pytest.raises(ValueError, match="antisymmetric"):
        aw(x, x, ei, a=sym)
    with pytest.raises(ValueError, match="more than once"):
        aw(x, x, torch.cat([ei, ei[:, :1]], 1), a=torch.zeros(ei.shape[1] + 1))
    with pytest.raises(ValueError, match="outside"):
        aw(x, x, ei + 10, a=torch.zeros(ei.shape[1]))
    with pytest.raises(ValueError, match="z must be"):
        AWRoPE(8, z=1.0)
