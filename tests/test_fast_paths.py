"""The fast paths of issue 24 against the paths they replace or an independent reference.

Graph PE: the row-layout sign fix equals the column convention (and the formula it replaced); the
batched LapPE of graphs with unequal component counts (the gather branch) equals each graph
decomposed alone (the common branch); RWSE equals explicit matrix powers for every walk length
around the baby-step/giant-step boundaries, symmetric and not.
"""

from __future__ import annotations

import numpy as np
import pytest

from structpos.coords._graph_utils import canonical_phase, canonical_sign_rows
from structpos.coords.laplacian import laplacian_pe, laplacian_pe_batch
from structpos.coords.random_walk import random_walk_pe_batch


def _vectors(rng, shape):
    U = rng.standard_normal(shape)
    U[..., 0, :] = U[..., 1, :] * -1  # exact magnitude ties: the lower index must win
    U[..., 2, :3] = 0.0
    U[0, :, 4] = 0.0  # an all-zero column stays as it is
    return U


def _phase_formula(U):
    """The general formula ``u · conj(u_j)/|u_j|`` (the code the real fast path replaced)."""
    mag = np.abs(U)
    j = np.argmax(mag >= mag.max(axis=-2, keepdims=True) * (1 - 1e-6), axis=-2)[..., None, :]
    pivot = np.take_along_axis(U, j, axis=-2)
    pmag = np.abs(pivot)
    return U * np.where(pmag > 0, np.conj(pivot) / np.where(pmag > 0, pmag, 1), 1)


def test_sign_rows_equal_column_convention_and_complex_formula():
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        U = _vectors(rng, (5, 9, 6)).astype(dtype)
        cols = canonical_phase(U)
        assert cols.dtype == dtype
        rows = canonical_sign_rows(np.ascontiguousarray(U.swapaxes(-1, -2)))
        np.testing.assert_array_equal(rows.swapaxes(-1, -2), cols)
        np.testing.assert_array_equal(cols, _phase_formula(U))
        top = np.take_along_axis(cols, np.abs(cols).argmax(axis=-2)[:, None, :], axis=-2)
        assert (top >= 0).all()


def _graph(rng, n, comps):
    """``comps`` random connected pieces (plus isolated nodes when they do not use every node)."""
    cuts = np.sort(rng.choice(np.arange(2, n - 1), comps - 1, replace=False)) if comps > 1 else []
    edges = []
    for lo, hi in zip([0, *cuts], [*cuts, n - 1]):
        for i in range(lo + 1, hi):
            edges.append((int(rng.integers(lo, i)), i))
    e = np.array(edges, dtype=np.int64).T.reshape(2, -1)
    return np.concatenate([e, e[::-1]], axis=1), n


def test_batch_with_mixed_components_equals_graphs_alone():
    # float64 (numpy's eigh decomposes matrix by matrix); torch's float32 stacks may depend on the stack
    dtype = np.float64
    rng = np.random.default_rng(1)
    graphs = [_graph(rng, n, c) for n, c in [(14, 1), (14, 2), (14, 3), (9, 1), (9, 2), (30, 1), (30, 4)]]
    out = laplacian_pe_batch(graphs, 5, dtype=dtype, workers=1)
    for g, (ei, n) in enumerate(graphs):
        one = laplacian_pe_batch([(ei, n)], 5, dtype=dtype, workers=1)
        np.testing.assert_array_equal(out.pe[out.ptr[g] : out.ptr[g + 1]], one.pe)
        for name in ("eigvals", "mask", "ambiguous"):
            np.testing.assert_array_equal(getattr(out, name)[g], getattr(one, name)[0])
    r = laplacian_pe(*graphs[2], k=5)  # the single-graph API agrees as well
    np.testing.assert_allclose(np.abs(r.pe), np.abs(out.pe[out.ptr[2] : out.ptr[3]]), atol=1e-5)


@pytest.mark.parametrize("symmetrize", [True, False])
def test_rwse_equals_matrix_powers_for_every_length(symmetrize):
    rng = np.random.default_rng(2)
    graphs = []
    for n in (5, 8, 8, 13):
        e = rng.integers(0, n, (2, 2 * n))
        graphs.append((e, n))
    for K in (1, 2, 3, 4, 5, 9, 10, 16, 17):
        pe, ptr = random_walk_pe_batch(graphs, K, symmetrize=symmetrize, dtype=np.float64, workers=1)
        for g, (e, n) in enumerate(graphs):
            A = np.zeros((n, n))
            np.add.at(A, (e[0], e[1]), 1.0)
            if symmetrize:
                A = np.maximum(A, A.T)
            deg = A.sum(1)
            P = A / np.where(deg > 0, deg, 1)[:, None]
            Pk, ref = np.eye(n), []
            for _ in range(K):
                Pk = Pk @ P
                ref.append(np.diag(Pk))
            np.testing.assert_allclose(pe[ptr[g] : ptr[g + 1]], np.stack(ref, 1), atol=1e-12)
