"""SPE: invariant to eigenvector sign flips and to rotations inside degenerate eigenspaces,
equivariant to node permutation (through the solver), Q equal to an explicit sum, gradcheck."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos.coords.laplacian import laplacian_pe
from structpos.encoders.registry import build
from structpos.encoders.spe import SPE
from structpos.exceptions import ShapeError


def cycle(n: int) -> np.ndarray:
    i = np.arange(n)
    return np.stack([i, (i + 1) % n])


def complete_bipartite(a: int, b: int) -> np.ndarray:
    return np.array([[u, a + v] for u in range(a) for v in range(b)]).T


GRAPHS = {"cycle8": (cycle(8), 8), "k34": (complete_bipartite(3, 4), 7), "k33": (complete_bipartite(3, 3), 6)}


def full_spectrum(ei: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    A = np.zeros((n, n))
    A[ei[0], ei[1]] = 1
    A = np.maximum(A, A.T)
    d = A.sum(1)
    w, U = np.linalg.eigh(np.eye(n) - A / np.sqrt(np.outer(d, d)))
    return w, U


def rotate_eigenspaces(w: np.ndarray, U: np.ndarray, rng) -> np.ndarray:
    U = U.copy()
    groups = np.split(np.arange(len(w)), np.flatnonzero(np.diff(w) > 1e-8) + 1)
    assert max(map(len, groups)) >= 2
    for g in groups:
        Q, _ = np.linalg.qr(rng.standard_normal((len(g), len(g))))
        U[:, g] = U[:, g] @ Q
    return U


@pytest.fixture
def spe():
    torch.manual_seed(0)
    return SPE(out_dim=6, num_filters=4, hidden=16).double()


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_invariant_to_signs_and_rotations_in_degenerate_eigenspaces(spe, graph):
    ei, n = GRAPHS[graph]
    w, U = full_spectrum(ei, n)  # the whole spectrum: no eigenspace is split
    rng = np.random.default_rng(1)
    lam = torch.from_numpy(w)
    ref = spe(torch.from_numpy(U), lam)
    for _ in range(3):
        signs = rng.choice([-1.0, 1.0], size=n)
        torch.testing.assert_close(spe(torch.from_numpy(U * signs), lam), ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(spe(torch.from_numpy(rotate_eigenspaces(w, U, rng)), lam), ref, atol=1e-5, rtol=0)
    # a plain random rotation of all modes is NOT allowed: the output changes (the test can fail)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    assert not torch.allclose(spe(torch.from_numpy(U @ Q), lam), ref, atol=1e-3)


@pytest.mark.parametrize("k", [3, 4])
def test_permutation_equivariant_through_the_solver(spe, k):
    # a 10-cycle: every non-trivial eigenvalue but 2 is doubly degenerate; the solver's basis inside
    # the pairs changes with the node order; k = 3 splits a pair, whose mode is masked out
    ei, n = cycle(10), 10

    def encode(edges):
        r = laplacian_pe(edges, n, k=k)
        keep = torch.from_numpy(np.asarray(r.mask) & ~np.asarray(r.ambiguous))
        return spe(torch.from_numpy(r.pe), torch.from_numpy(r.eigvals), keep)

    ref = encode(ei)
    rng = np.random.default_rng(k)
    for _ in range(3):
        perm = rng.permutation(n)  # new node perm[i] is old node i
        out = encode(perm[ei])
        torch.testing.assert_close(out[torch.from_numpy(perm)], ref, atol=1e-5, rtol=0)


def test_projections_equal_explicit_sum_and_padding(spe):
    rng = np.random.default_rng(2)
    V = torch.from_numpy(rng.standard_normal((5, 3)))
    lam = torch.from_numpy(rng.uniform(0, 2, 3))
    mask = torch.tensor([True, False, True])
    Q = spe.projections(V, lam, mask)
    phi = spe.phi(lam[:, None]).detach()
    for ell in range(spe.num_filters):
        ref = sum(float(mask[j]) * phi[j, ell] * torch.outer(V[:, j], V[:, j]) for j in range(3))
        torch.testing.assert_close(Q[..., ell].detach(), ref)
    # a padded batch equals the graphs one by one
    V2 = torch.from_numpy(rng.standard_normal((3, 3)))
    batch = torch.zeros(2, 5, 3, dtype=torch.float64)
    batch[0], batch[1, :3] = V, V2
    node_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    out = spe(batch, torch.stack([lam, lam]), torch.stack([mask, mask]), node_mask)
    torch.testing.assert_close(out[0], spe(V, lam, mask))
    torch.testing.assert_close(out[1, :3], spe(V2, lam, mask))
    assert (out[1, 3:] == 0).all()


def test_gradcheck_float64_and_registry(spe):
    rng = np.random.default_rng(3)
    V = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    lam = torch.tensor(rng.uniform(0, 2, 3), requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: spe(a, b), (V, lam))
    m = build("spe", out_dim=2)
    assert isinstance(m, SPE) and m.out_dim == 2
    with pytest.raises(ShapeError, match="eigvals"):
        spe(V, lam[:2])
    with pytest.raises(ShapeError, match="eigvecs"):
        spe(V[0], lam)
