"""Directional random walks: backward = forward on the reversed graph, forward = RWSE on undirected
graphs, pair rows are distributions, all against dense matrix powers built here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos import Structure
from structpos.coords import COORDS, compute, parse_spec
from structpos.coords.directed_walk import directed_walk_matrices, directed_walk_pe, transition_matrix
from structpos.coords.random_walk import random_walk_pe
from structpos.exceptions import LimitError, SpecError


def random_digraph(n: int, m: int, seed: int, *, loops: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, (2, m))
    if not loops:
        e = e[:, e[0] != e[1]]
    w = rng.uniform(0.5, 2.0, e.shape[1])
    return e.astype(np.int64), w


def reference_powers(ei: np.ndarray, n: int, w: np.ndarray, K: int, dangling: str) -> np.ndarray:
    """``(N, N, K)`` powers of ``D_out^{-1} A`` from a dense matrix built edge by edge."""
    A = np.zeros((n, n))
    for (u, v), x in zip(ei.T, w):
        A[u, v] += x
    for u in range(n):
        if A[u].sum() == 0 and dangling == "stay":
            A[u, u] = 1.0
    P = np.array([row / row.sum() if row.sum() > 0 else row for row in A])
    return np.stack([np.linalg.matrix_power(P, k) for k in range(1, K + 1)], axis=-1)


@pytest.mark.parametrize("dangling", ["stay", "vanish"])
@pytest.mark.parametrize("n, m, seed", [(7, 12, 0), (20, 30, 1), (30, 25, 2)])
def test_matches_dense_matrix_powers_and_reversal(n, m, seed, dangling):
    ei, w = random_digraph(n, m, seed, loops=seed == 1)
    K = 6
    fwd_ref = reference_powers(ei, n, w, K, dangling)
    bwd_ref = reference_powers(ei[::-1], n, w, K, dangling)  # forward walk on the reversed graph
    pe = directed_walk_pe(ei, n, K, w, dangling=dangling, dtype=np.float64)
    np.testing.assert_allclose(pe.forward, np.einsum("iik->ik", fwd_ref), atol=1e-12)
    np.testing.assert_allclose(pe.backward, np.einsum("iik->ik", bwd_ref), atol=1e-12)
    pairs = directed_walk_matrices(ei, n, K, w, dangling=dangling, dtype=np.float64)
    np.testing.assert_allclose(pairs.forward, fwd_ref, atol=1e-12)
    np.testing.assert_allclose(pairs.backward, bwd_ref, atol=1e-12)
    # backward on G == forward on reversed G, through the public functions
    rev = directed_walk_pe(ei[::-1].copy(), n, K, w, dangling=dangling, dtype=np.float64)
    np.testing.assert_allclose(pe.backward, rev.forward, atol=1e-12)
    np.testing.assert_allclose(rev.backward, pe.forward, atol=1e-12)
    revp = directed_walk_matrices(ei[::-1].copy(), n, K, w, dangling=dangling, dtype=np.float64)
    np.testing.assert_allclose(pairs.backward, revp.forward, atol=1e-12)


def test_pair_rows_are_distributions_with_dangling_nodes():
    ei, w = random_digraph(25, 20, 3)  # sparse: many nodes without out- or in-edges
    out_deg = np.bincount(ei[0], minlength=25)
    assert (out_deg == 0).sum() >= 5
    pairs = directed_walk_matrices(ei, 25, 8, w, dtype=np.float64)
    for mats in pairs:
        assert (mats >= 0).all()
        np.testing.assert_allclose(mats.sum(axis=1), 1.0, atol=1e-12)
    # "vanish": a dangling node's row is zero, and rows never exceed 1
    v = directed_walk_matrices(ei, 25, 8, w, dangling="vanish", dtype=np.float64).forward
    assert np.all(v[out_deg == 0] == 0) and (v.sum(axis=1) <= 1 + 1e-12).all()
    # a dangling node waits where it is: its return probability is 1 at every step
    pe = directed_walk_pe(ei, 25, 8, w, dtype=np.float64)
    np.testing.assert_array_equal(pe.forward[out_deg == 0], 1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_forward_equals_rwse_on_undirected_graphs(seed):
    rng = np.random.default_rng(seed)
    e = rng.integers(0, 30, (2, 60))
    e = e[:, e[0] != e[1]]
    e = np.unique(np.concatenate([e, e[::-1]], axis=1), axis=1)
    n = int(e.max()) + 1
    assert (np.bincount(e[0], minlength=n) > 0).all()  # no dangling node: both conventions agree
    pe = directed_walk_pe(e, n, 10, dtype=np.float64)
    rwse = random_walk_pe(e, n, walk_length=10, dtype=np.float64)
    np.testing.assert_allclose(pe.forward, rwse, atol=1e-12)
    np.testing.assert_allclose(pe.backward, rwse, atol=1e-12)


def test_sparse_path_equals_dense():
    ei, w = random_digraph(60, 150, 4)
    dense = directed_walk_pe(ei, 60, 7, w, dtype=np.float64)
    sparse = directed_walk_pe(ei, 60, 7, w, dtype=np.float64, dense_max=10)
    np.testing.assert_allclose(sparse.forward, dense.forward, atol=1e-12)
    np.testing.assert_allclose(sparse.backward, dense.backward, atol=1e-12)


def test_families_from_spec_strings():
    ei, _ = random_digraph(12, 20, 5)
    s = Structure("graph", [str(i) for i in range(12)], edge_index=ei, directed=True)
    assert parse_spec("rwdir:5,rwdir_pair:3") == [("rwdir", "5"), ("rwdir_pair", "3")]
    c = compute(s, "rwdir:5,rwdir_pair:3")
    assert set(c) == {col.name for f in ("rwdir", "rwdir_pair") for col in COORDS[f].columns}
    assert c["rwdir_fwd"].shape == (12, 5) and c["rwdir_pair_bwd"].shape == (12, 12, 3)
    ref = reference_powers(ei, 12, np.ones(ei.shape[1]), 5, "stay")
    np.testing.assert_allclose(c["rwdir_fwd"], np.einsum("iik->ik", ref), atol=1e-6)
    np.testing.assert_allclose(c["rwdir_pair_fwd"], ref[..., :3], atol=1e-6)
    with pytest.raises(SpecError, match="rwdir:0"):
        parse_spec("rwdir:0")


def test_torch_in_torch_out_limits_and_bad_options():
    ei, _ = random_digraph(5, 8, 6)
    pe = directed_walk_pe(torch.from_numpy(ei), 5, 3)
    assert isinstance(pe.forward, torch.Tensor) and pe.forward.shape == (5, 3)
    with pytest.raises(LimitError, match="max_entries"):
        directed_walk_matrices(ei, 5, 3, max_entries=10)
    with pytest.raises(SpecError, match="dangling"):
        directed_walk_pe(ei, 5, 3, dangling="teleport")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="walk_length"):
        directed_walk_pe(ei, 5, 0)
    with pytest.raises(SpecError, match="direction"):
        transition_matrix(ei, 5, direction="both")  # type: ignore[arg-type]
