"""Batched LapPE / RWSE through the torch kernels (``device=``): equal to the numpy path and to
references computed another way. Every test runs with ``device="cpu"`` (the same torch code as
CUDA) and again on CUDA when there is one; only numpy, torch and pytest are needed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos.coords._graph_utils import canonical_sign_rows
from structpos.coords._torch_dense import resolve_device, sign_rows_torch
from structpos.coords.laplacian import laplacian_pe_batch
from structpos.coords.random_walk import random_walk_pe_batch
from structpos.exceptions import SpecError

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


def undirected(e: np.ndarray) -> np.ndarray:
    return np.concatenate([e, e[::-1]], axis=1).astype(np.int64)


def cycle(n: int) -> np.ndarray:
    i = np.arange(n)
    return undirected(np.stack([i, (i + 1) % n]))


def random_connected(n: int, extra: int, rng) -> np.ndarray:
    parent = [rng.integers(0, i) for i in range(1, n)]
    e = [(p, i) for i, p in zip(range(1, n), parent)]
    e += [tuple(x) for x in rng.integers(0, n, (extra, 2)) if x[0] != x[1]]
    return undirected(np.array(e, dtype=np.int64).T.reshape(2, -1))


def mixed_batch(seed: int = 3):
    """Random graphs of 3..45 nodes (groups on both sides of cuSOLVER's 32-node batched Jacobi),
    two components with isolated nodes, edgeless and empty graphs, graphs with fewer than k
    modes, identical cycles (degenerate spaces cut by k) and a weighted graph."""
    rng = np.random.default_rng(seed)
    gs = [(random_connected(n, n // 2, rng), int(n)) for n in rng.integers(3, 46, 60)]
    two = np.concatenate([random_connected(6, 2, rng), random_connected(7, 3, rng) + 6], axis=1)
    gs += [(two, 16), (np.zeros((2, 0), np.int64), 5), (np.zeros((2, 0), np.int64), 0), (cycle(3), 3)]
    gs += [(cycle(12), 12), (cycle(12), 12), (cycle(40), 40)]
    ei = random_connected(20, 10, rng)
    gs += [(ei, 20, rng.uniform(0.1, 2.0, ei.shape[1]))]
    return gs


def laplacian_ref(g) -> np.ndarray:
    """``I − D^{-1/2} max(A, Aᵀ) D^{-1/2}`` (no self-loops; isolated rows zero), built directly."""
    ei, n = g[0], g[1]
    w = g[2] if len(g) == 3 else np.ones(ei.shape[1])
    A = np.zeros((n, n))
    np.add.at(A, (ei[0], ei[1]), w)
    np.fill_diagonal(A, 0)
    A = np.maximum(A, A.T)
    d = A.sum(1)
    s = np.where(d > 0, 1 / np.sqrt(np.where(d > 0, d, 1)), 0)
    return np.diag((d > 0).astype(float)) - s[:, None] * A * s[None, :]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bucket", [1, 8])
def test_lap_device_equals_numpy_path_and_the_reference_spectrum(device, bucket):
    """Eigenvalues, masks and ambiguity flags equal the numpy path; eigenvectors of simple
    eigenvalues are equal column by column (so the sign convention is the same), those of
    degenerate eigenvalues span the same space, and every kept pair solves ``L v = λ v`` of a
    Laplacian built independently, with the eigenvalues those of its ``eigvalsh``."""
    gs = mixed_batch()
    k = 6
    ref = laplacian_pe_batch(gs, k, bucket=bucket)
    out = laplacian_pe_batch(gs, k, bucket=bucket, device=device)
    assert isinstance(out.pe, np.ndarray) and out.pe.dtype == ref.pe.dtype and out.pe.shape == ref.pe.shape
    np.testing.assert_array_equal(out.ptr, ref.ptr)
    np.testing.assert_array_equal(out.mask, ref.mask)
    np.testing.assert_array_equal(out.ambiguous, ref.ambiguous)
    np.testing.assert_allclose(out.eigvals, ref.eigvals, atol=1e-10)
    simple_cols = 0
    for b, g in enumerate(gs):
        pe, ev, mask = out.graph(b)
        pe_ref = ref.graph(b)[0]
        L = laplacian_ref(g)
        full = np.linalg.eigvalsh(L) if g[1] else np.zeros(0)
        nontrivial = full[np.abs(full) > 1e-9][:k]
        np.testing.assert_allclose(ev[mask], nontrivial, atol=1e-9)
        assert not pe[:, ~mask].any()
        np.testing.assert_allclose(L @ pe[:, mask], pe[:, mask] * ev[mask], atol=1e-8)
        for j in np.flatnonzero(mask):
            mult = np.abs(full - ev[j]) < 1e-7
            if mult.sum() == 1:
                np.testing.assert_allclose(pe[:, j], pe_ref[:, j], atol=1e-8)
                simple_cols += 1
            elif not out.ambiguous[b, j]:  # a whole degenerate space is kept: equal projectors
                c = np.flatnonzero(mask & (np.abs(ev - ev[j]) < 1e-7))
                np.testing.assert_allclose(pe[:, c] @ pe[:, c].T, pe_ref[:, c] @ pe_ref[:, c].T, atol=1e-8)
    assert simple_cols > 200 and out.ambiguous.any()  # both kinds of mode were checked


@pytest.mark.parametrize("device", DEVICES)
def test_lap_device_float32_and_torch_output(device):
    gs = [(torch.from_numpy(e), n) for e, n, *_ in mixed_batch(5)[:40]]
    out = laplacian_pe_batch(gs, 4, dtype=np.float32, device=device)
    ref = laplacian_pe_batch(gs, 4)
    assert isinstance(out.pe, torch.Tensor) and out.pe.device.type == "cpu" and out.pe.dtype == torch.float32
    torch.testing.assert_close(out.eigvals.double(), ref.eigvals, atol=2e-5, rtol=0)
    torch.testing.assert_close(out.mask, ref.mask)


@pytest.mark.parametrize("device", DEVICES)
def test_lap_device_is_permutation_equivariant(device):
    """Relabelling the nodes of a graph with simple eigenvalues permutes its PE rows (the sign
    rule picks the same entry) and leaves the eigenvalues unchanged."""
    rng = np.random.default_rng(9)
    ei, n = random_connected(30, 20, rng), 30
    perm = rng.permutation(n)
    a = laplacian_pe_batch([(ei, n)], 5, device=device)
    b = laplacian_pe_batch([(perm[ei], n)], 5, device=device)
    np.testing.assert_allclose(b.eigvals, a.eigvals, atol=1e-12)
    np.testing.assert_allclose(b.pe[perm], a.pe, atol=1e-9)


def rwse_ref(ei: np.ndarray, n: int, K: int, symmetrize: bool) -> np.ndarray:
    """Diagonals of ``P^k``, ``P = D^{-1} A`` (self-loops kept), by repeated dense products."""
    A = np.zeros((n, n))
    np.add.at(A, (ei[0], ei[1]), 1.0)
    if symmetrize:
        A = np.maximum(A, A.T)
    d = A.sum(1, keepdims=True)
    P = np.divide(A, d, out=np.zeros_like(A), where=d > 0)
    out, Pk = [], np.eye(n)
    for _ in range(K):
        Pk = Pk @ P
        out.append(np.diag(Pk))
    return np.stack(out, axis=1) if n else np.zeros((0, K))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("symmetrize", [True, False])
@pytest.mark.parametrize("K", [1, 7, 16])
def test_rwse_device_equals_numpy_path_and_matrix_powers(device, symmetrize, K):
    rng = np.random.default_rng(K)
    gs = [(rng.integers(0, n, (2, 2 * n)), int(n)) for n in rng.integers(1, 46, 50)]  # self-loops, duplicates
    gs += [(np.zeros((2, 0), np.int64), 4), (np.zeros((2, 0), np.int64), 0)]
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
        ref, ptr = random_walk_pe_batch(gs, K, symmetrize=symmetrize, dtype=dtype)
        out, ptr2 = random_walk_pe_batch(gs, K, symmetrize=symmetrize, dtype=dtype, device=device, bucket=4)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        np.testing.assert_array_equal(ptr2, ptr)
        np.testing.assert_allclose(out, ref, atol=tol)
    out, ptr = random_walk_pe_batch(gs, K, symmetrize=symmetrize, dtype=np.float64, device=device)
    for b, (ei, n) in enumerate(gs):
        np.testing.assert_allclose(out[ptr[b] : ptr[b + 1]], rwse_ref(ei, n, K, symmetrize), atol=1e-12)


def test_sign_rule_equals_the_numpy_rule_on_ties_and_zeros():
    """Exact ties, near ties (inside and outside the 1e-6 band), zero rows and negative pivots."""
    rng = np.random.default_rng(0)
    V = rng.standard_normal((50, 4, 9))
    V[:30, :, 2] = V[:30, :, 3] = 5.0  # the largest entries, positive...
    V[:10, :, 3] = -5.0  # ... an exact tie, the first (negative) wins: flipped
    V[10:20, :, 7] = -5.0 * (1 + 5e-7)  # a later, larger entry inside the band: index 2 wins
    V[20:30, :, 7] = -5.0 * (1 + 5e-6)  # outside the band: index 7 wins, flipped
    V[30:35] = 0.0
    got = sign_rows_torch(torch.from_numpy(V)).numpy()
    np.testing.assert_array_equal(got, canonical_sign_rows(V))


def test_bad_device_raises_spec_error():
    with pytest.raises(SpecError, match="device"):
        laplacian_pe_batch([(cycle(4), 4)], 2, device="gpu0")
    with pytest.raises(SpecError, match="device"):
        random_walk_pe_batch([(cycle(4), 4)], 2, device=3.5)
    if not torch.cuda.is_available():
        with pytest.raises(SpecError, match="CUDA is not available"):
            resolve_device("cuda")
