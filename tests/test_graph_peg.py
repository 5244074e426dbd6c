"""PEG distances: equal to a brute-force pairwise loop, invariant to sign flips, rotations inside
degenerate eigenspaces and node permutation; the bias module is equivariant and registered."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos import Structure
from structpos.coords import compute, parse_spec
from structpos.coords.laplacian import laplacian_pe
from structpos.coords.peg import peg_distances, positional_distances
from structpos.encoders.peg import PEGBias
from structpos.encoders.registry import build
from structpos.exceptions import ShapeError, SpecError


def cycle(n: int) -> np.ndarray:
    i = np.arange(n)
    return np.stack([i, (i + 1) % n])


def complete_bipartite(a: int, b: int) -> np.ndarray:
    return np.array([[u, a + v] for u in range(a) for v in range(b)]).T


def full_spectrum(ei: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """All non-trivial normalised-Laplacian eigenpairs of a connected graph, by dense eigh here."""
    A = np.zeros((n, n))
    A[ei[0], ei[1]] = 1
    A = np.maximum(A, A.T)
    d = A.sum(1)
    L = np.eye(n) - A / np.sqrt(np.outer(d, d))
    w, U = np.linalg.eigh(L)
    return w[1:], U[:, 1:]


def random_basis_change(w: np.ndarray, U: np.ndarray, rng) -> np.ndarray:
    """Random orthogonal rotation (with reflections) inside every eigenspace of ``w``."""
    U = U.copy()
    groups = np.split(np.arange(len(w)), np.flatnonzero(np.diff(w) > 1e-8) + 1)
    for g in groups:
        Q, _ = np.linalg.qr(rng.standard_normal((len(g), len(g))))
        U[:, g] = U[:, g] @ Q
    assert max(len(g) for g in groups) >= 2  # the graph really has a degenerate eigenspace
    return U


def brute(U: np.ndarray, f: np.ndarray) -> np.ndarray:
    n = U.shape[0]
    D = np.zeros((n, n))
    for u in range(n):
        for v in range(n):
            D[u, v] = np.sqrt(sum((f[j] * (U[u, j] - U[v, j])) ** 2 for j in range(U.shape[1])))
    return D


@pytest.mark.parametrize("scale", ["none", "inv_sqrt"])
@pytest.mark.parametrize("graph", ["cycle8", "k34"])
def test_invariant_to_signs_rotations_and_equal_to_brute_force(graph, scale):
    ei, n = (cycle(8), 8) if graph == "cycle8" else (complete_bipartite(3, 4), 7)
    w, U = full_spectrum(ei, n)
    rng = np.random.default_rng(0)
    f = np.ones_like(w) if scale == "none" else 1 / np.sqrt(w)
    D = positional_distances(U, w, scale=scale)
    np.testing.assert_allclose(D, brute(U, f), atol=1e-10)
    for _ in range(3):
        signs = rng.choice([-1.0, 1.0], size=U.shape[1])
        np.testing.assert_allclose(positional_distances(U * signs, w, scale=scale), D, atol=1e-10)
        np.testing.assert_allclose(positional_distances(random_basis_change(w, U, rng), w, scale=scale), D, atol=1e-10)


@pytest.mark.parametrize("k", [3, 4, 5])
def test_solver_distances_invariant_to_node_permutation(k):
    # a 10-cycle has pairs of equal eigenvalues: the solver's basis inside them is arbitrary and
    # changes with the node order; k = 3 and 5 split a pair, whose modes are then dropped
    ei, n = cycle(10), 10
    D = peg_distances(ei, n, k=k)
    w, U = full_spectrum(ei, n)
    keep = k if k % 2 == 0 else k - 1
    np.testing.assert_allclose(D, positional_distances(U[:, :keep]), atol=1e-8)
    rng = np.random.default_rng(k)
    for _ in range(3):
        perm = rng.permutation(n)  # new node perm[i] is old node i
        Dp = peg_distances(perm[ei], n, k=k)
        np.testing.assert_allclose(Dp[np.ix_(perm, perm)], D, atol=1e-8)
    # "keep" keeps the split pair: no longer basis-invariant, but what the user asked for
    r = laplacian_pe(ei, n, k=k)
    np.testing.assert_allclose(peg_distances(ei, n, k=k, ambiguous="keep"), positional_distances(r.pe), atol=1e-12)


def test_family_from_spec_and_bias_module():
    ei = complete_bipartite(2, 3)
    s = Structure("graph", list("abcde"), edge_index=ei)
    assert parse_spec("peg:3:inv_sqrt") == [("peg", "3:inv_sqrt")]
    c = compute(s, "peg:3:inv_sqrt")
    np.testing.assert_allclose(c["peg"], peg_distances(ei, 5, k=3, scale="inv_sqrt"), atol=1e-12)
    for bad in ("peg:0", "peg:2:cube", "peg:2:none:1"):
        with pytest.raises(SpecError, match="peg"):
            parse_spec(bad)
    torch.manual_seed(0)
    bias = build("peg_bias", num_heads=3)
    assert isinstance(bias, PEGBias)
    d = torch.from_numpy(c["peg"])
    out = bias(d)
    assert out.shape == (3, 5, 5)
    perm = torch.randperm(5)
    torch.testing.assert_close(bias(d[perm][:, perm]), out[:, perm][:, :, perm])
    # distances computed in torch equal the numpy ones, gradients finite on the diagonal
    w, U = full_spectrum(ei, 5)
    z = torch.tensor(U, requires_grad=True)
    dt = PEGBias.distances(z)
    torch.testing.assert_close(dt.detach(), torch.from_numpy(positional_distances(U)), atol=1e-10, rtol=0)
    dt.sum().backward()
    assert torch.isfinite(z.grad).all()
    with pytest.raises(ShapeError):
        bias(torch.zeros(3, 4))
    with pytest.raises(ShapeError):
        positional_distances(np.zeros(3))
