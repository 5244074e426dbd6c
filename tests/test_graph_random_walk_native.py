"""The compiled RWSE kernel (native/rwse.c) against the pure BLAS path and against matrix powers."""

from __future__ import annotations

import numpy as np
import pytest

from structpos import native
from structpos.coords import random_walk as rw
from structpos.coords.random_walk import random_walk_pe_batch

nat = native.native_module("rwse")
pytestmark = pytest.mark.skipif(nat is None, reason="native rwse not built")


def mixed_graphs(rng, count=60):
    """Simple, weighted, directed-looking, self-loop, duplicate-edge, empty and edgeless graphs."""
    out = []
    for i in range(count):
        n = int(rng.integers(0, 45))
        m = int(rng.integers(0, 3 * n + 1))
        ei = rng.integers(0, max(n, 1), (2, m)) if n else np.zeros((2, 0), np.int64)
        w = rng.uniform(0.1, 2.0, ei.shape[1]) if i % 3 == 0 else None
        out.append((ei.astype(np.int64), n) if w is None else (ei.astype(np.int64), n, w))
    out.append((np.array([[0, 0, 1], [1, 1, 0]]), 2))  # duplicate edge, summed
    out.append((np.array([[0, 1], [0, 1]]), 3))  # self-loops only, one isolated node
    return out


def powers(ei, n, K, w, symmetrize):
    A = np.zeros((n, n))
    np.add.at(A, (ei[0], ei[1]), 1.0 if w is None else w)
    if symmetrize:
        A = np.maximum(A, A.T)
    d = A.sum(1, keepdims=True)
    P = A / np.where(d > 0, d, 1)
    return np.stack([np.diag(np.linalg.matrix_power(P, k)) for k in range(1, K + 1)], axis=1).reshape(n, K)


@pytest.mark.parametrize("symmetrize", [True, False])
@pytest.mark.parametrize("K", [1, 2, 3, 8, 16, 17])
def test_native_equals_pure_and_matrix_powers(symmetrize, K):
    gs = mixed_graphs(np.random.default_rng(K))
    got, ptr = random_walk_pe_batch(gs, K, symmetrize=symmetrize, dtype=np.float64, workers=1)
    with native.pure_python():
        pure, ptr2 = random_walk_pe_batch(gs, K, symmetrize=symmetrize, dtype=np.float64, workers=1)
    np.testing.assert_array_equal(ptr, ptr2)
    np.testing.assert_allclose(got, pure, rtol=0, atol=1e-14)
    for g, t in enumerate(gs):
        ref = powers(t[0], t[1], K, t[2] if len(t) == 3 else None, symmetrize)
        np.testing.assert_allclose(got[ptr[g] : ptr[g + 1]], ref, rtol=0, atol=1e-12)
    got32, _ = random_walk_pe_batch(gs, K, symmetrize=symmetrize, workers=1)
    assert got32.dtype == np.float32
    np.testing.assert_array_equal(got32, got.astype(np.float32))  # float64, rounded once
    with native.pure_python():
        pure32, _ = random_walk_pe_batch(gs, K, symmetrize=symmetrize, workers=1)
    np.testing.assert_allclose(got32, pure32, rtol=0, atol=2e-6)


def test_large_graphs_and_small_batches_keep_the_blas_path(monkeypatch):
    rng = np.random.default_rng(1)
    gs = mixed_graphs(rng, 40)
    monkeypatch.setattr(rw, "NATIVE_MAX", 20)  # graphs above 20 nodes: the BLAS path, same batch
    got, _ = random_walk_pe_batch(gs, 6, dtype=np.float64, workers=1)
    with native.pure_python():
        pure, _ = random_walk_pe_batch(gs, 6, dtype=np.float64, workers=1)
    np.testing.assert_allclose(got, pure, rtol=0, atol=1e-14)
    few = gs[: rw.NATIVE_MIN_GRAPHS - 1]  # below the batch threshold: bit for bit the BLAS path
    a, _ = random_walk_pe_batch(few, 6, workers=1)
    with native.pure_python():
        b, _ = random_walk_pe_batch(few, 6, workers=1)
    np.testing.assert_array_equal(a, b)


def test_native_entry_point_checks_its_buffers():
    row = np.array([0, 1], dtype=np.int64)
    col = np.array([1, 0], dtype=np.int64)
    w = np.ones(2)
    eptr = np.array([0, 2], dtype=np.int64)
    ptr = np.array([0, 2], dtype=np.int64)
    out = np.zeros((2, 4))
    assert nat.rwse(row, col, w, eptr, ptr, out, 4, True, 256) == 1
    np.testing.assert_array_equal(out, [[0, 1, 0, 1], [0, 1, 0, 1]])
    assert nat.rwse(row, col, w, eptr, ptr, out, 4, True, 1) == 0  # above max_nodes: skipped
    with pytest.raises(ValueError, match="graph 0, edge 1"):
        nat.rwse(np.array([0, 5]), col, w, eptr, ptr, out, 4, True, 256)  # node 5 of a 2-node graph
    with pytest.raises(ValueError, match="edge"):
        nat.rwse(row, col, np.array([1.0, np.nan]), eptr, ptr, out, 4, True, 256)
    with pytest.raises(ValueError, match="offsets"):
        nat.rwse(row, col, w, np.array([0, 3]), ptr, out, 4, True, 256)  # 3 edges of 2
    with pytest.raises(ValueError, match="offsets"):
        nat.rwse(row, col, w, eptr, np.array([0, 3]), out, 4, True, 256)  # 3 rows of 2
    with pytest.raises(ValueError, match="lengths"):
        nat.rwse(row, col, w, eptr, ptr, np.zeros((2, 3)), 4, True, 256)  # K does not fit out
    with pytest.raises(ValueError, match="lengths"):
        nat.rwse(row, col, w, eptr, ptr, out, 0, True, 256)
    with pytest.raises(TypeError, match="int64"):
        nat.rwse(row.astype(np.int32), col, w, eptr, ptr, out, 4, True, 256)
    with pytest.raises(TypeError, match="float64"):
        nat.rwse(row, col, w, eptr, ptr, out.astype(np.float32), 4, True, 256)
    with pytest.raises(MemoryError, match="workspace"):
        big = np.array([0, 3000], dtype=np.int64)
        nat.rwse(row, col, w, eptr, big, np.zeros((3000, 8)), 8, False, 5000)
