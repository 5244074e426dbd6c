"""RWSE against PyG's AddRandomWalkPE, the spectral formula, and its own sparse path."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from structpos import Structure, StructureError
from structpos.coords import compute
from structpos.coords.random_walk import random_walk_pe, random_walk_pe_batch


def random_graph(n: int, m: int, rng, *, undirected=True, loops=False) -> np.ndarray:
    e = rng.integers(0, n, (2, m)) if n else np.zeros((2, 0), np.int64)
    if not loops:
        e = e[:, e[0] != e[1]]
    e = np.unique(e, axis=1)  # simple graph: PyG keeps only one copy of a duplicate edge in A
    if undirected:
        e = np.unique(np.concatenate([e, e[::-1]], axis=1), axis=1)
    return e.astype(np.int64)


def pyg_rwse(ei, n, K, w=None):
    from torch_geometric.data import Data
    from torch_geometric.transforms import AddRandomWalkPE

    d = Data(edge_index=torch.from_numpy(ei), num_nodes=n)
    if w is not None:
        d.edge_weight = torch.from_numpy(w).float()
    return AddRandomWalkPE(K)(d).random_walk_pe.double().numpy()


@pytest.mark.parametrize(
    "n, m, loops, weighted",
    [(1, 0, False, False), (6, 4, False, False), (25, 40, False, False), (30, 50, True, False), (40, 30, False, False)],
)
def test_equals_pyg_on_undirected_graphs(n, m, loops, weighted):
    rng = np.random.default_rng(n + m)
    ei = random_graph(n, m, rng, loops=loops)
    ours = random_walk_pe(ei, n, 12)
    np.testing.assert_allclose(ours, pyg_rwse(ei, n, 12), atol=2e-6)


def test_weighted_walk_equals_dense_matrix_powers():
    """P = D⁻¹A with A weighted (PyG instead puts 1/weighted-degree on every edge)."""
    rng = np.random.default_rng(9)
    ei = random_graph(20, 60, rng, loops=True)
    half = {tuple(sorted(e)): rng.uniform(0.1, 3) for e in ei.T}
    w = np.array([half[tuple(sorted(e))] for e in ei.T])
    A = np.zeros((20, 20))
    A[ei[0], ei[1]] = w
    deg = A.sum(1)
    P = np.divide(A, deg[:, None], out=np.zeros_like(A), where=deg[:, None] > 0)
    ref = np.stack([np.diag(np.linalg.matrix_power(P, k)) for k in range(1, 13)], axis=1)
    np.testing.assert_allclose(random_walk_pe(ei, 20, 12, w, dtype=np.float64), ref, atol=1e-12)
    np.testing.assert_allclose(random_walk_pe(ei, 20, 12, w), ref, atol=1e-6)  # float32 default


def test_equals_pyg_on_directed_graph_without_symmetrizing():
    rng = np.random.default_rng(5)
    ei = random_graph(30, 90, rng, undirected=False)
    ours = random_walk_pe(ei, 30, 8, symmetrize=False)
    np.testing.assert_allclose(ours, pyg_rwse(ei, 30, 8), atol=2e-6)
    assert not np.allclose(ours, random_walk_pe(ei, 30, 8))  # symmetrising changes a directed walk


def test_matches_spectral_formula():
    """diag(P^k)_i = Σ_j (1 − λ_j)^k U_ij² with L_sym = U Λ Uᵀ (no self-loops, no isolated nodes)."""
    G = nx.connected_watts_strogatz_graph(20, 4, 0.3, seed=1)
    L = nx.normalized_laplacian_matrix(G, nodelist=range(20)).toarray()
    lam, U = np.linalg.eigh(L)
    K = 10
    ref = np.stack([(U**2) @ (1 - lam) ** k for k in range(1, K + 1)], axis=1)
    e = np.array(list(G.edges())).T
    ours = random_walk_pe(np.concatenate([e, e[::-1]], axis=1), 20, K, dtype=np.float64)
    np.testing.assert_allclose(ours, ref, atol=1e-12)


@pytest.mark.parametrize("K", [1, 2, 5, 16])
def test_sparse_path_equals_dense(K):
    rng = np.random.default_rng(K)
    ei = random_graph(60, 150, rng, loops=True)
    np.testing.assert_allclose(
        random_walk_pe(ei, 60, K, dense_max=0, dtype=np.float64),
        random_walk_pe(ei, 60, K, dtype=np.float64),
        atol=1e-12,
    )


def test_batch_equals_single_graphs():
    rng = np.random.default_rng(2)
    graphs = [(random_graph(int(n), int(2 * n), rng), int(n)) for n in rng.integers(0, 30, 25)]
    for bucket in (1, 8):
        pe, ptr = random_walk_pe_batch(graphs, 9, bucket=bucket, dtype=np.float64)
        for g, (ei, n) in enumerate(graphs):
            ref = random_walk_pe(ei, n, 9, dtype=np.float64)
            np.testing.assert_allclose(pe[ptr[g] : ptr[g + 1]], ref, atol=1e-12)
    pe32, _ = random_walk_pe_batch(graphs, 9)
    assert pe32.dtype == np.float32
    np.testing.assert_allclose(pe32, pe, atol=1e-5)


def test_torch_in_torch_out_and_bad_input():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    out = random_walk_pe(ei, 3, 4)
    assert isinstance(out, torch.Tensor) and out.shape == (3, 4)
    with pytest.raises(StructureError, match="edge 3"):
        random_walk_pe(ei, 3, 4, torch.tensor([1.0, 1.0, 1.0, float("nan")]))
    with pytest.raises(ValueError, match="walk_length"):
        random_walk_pe(ei, 3, 0)


def test_tree_structure_is_walked_undirected():
    parent = np.array([-1, 0, 0, 1, 1, 1])
    s = Structure(kind="tree", labels=list("abcdef"), parent=parent)
    rw = compute(s, "rw:4")["rw"]
    deg = np.array([2, 4, 1, 1, 1, 1.0])
    nbrs = {0: [1, 2], 1: [0, 3, 4, 5], 2: [0], 3: [1], 4: [1], 5: [1]}
    np.testing.assert_array_equal(rw[:, 0], 0)  # no self-loops: no 1-step return
    two = [sum(1 / (deg[i] * deg[j]) for j in nbrs[i]) for i in range(6)]
    np.testing.assert_allclose(rw[:, 1], two, atol=1e-6)  # float32 by default


def test_directed_graph_structure_walks_edges_as_given():
    ei = np.array([[0, 1, 2, 2], [1, 2, 0, 1]])
    s = Structure(kind="graph", labels=["a", "b", "c"], edge_index=ei, directed=True)
    np.testing.assert_allclose(compute(s, "rw:3")["rw"], random_walk_pe(ei, 3, 3, symmetrize=False))
    s_und = Structure(kind="graph", labels=["a", "b", "c"], edge_index=ei)
    np.testing.assert_allclose(compute(s_und, "rw:3")["rw"], random_walk_pe(ei, 3, 3))


def test_threaded_batch_is_identical_to_serial():
    """Size groups multiplied by a thread pool give bit-identical output (one group above the
    single-BLAS-thread size runs outside the pool), and bad ``workers`` raise."""
    rng = np.random.default_rng(5)
    graphs = []
    for n in [*rng.integers(2, 30, 40), 140]:
        ei = rng.integers(0, n, (2, 2 * n))
        graphs.append((ei, int(n)))
    for dtype in (np.float32, np.float64):
        serial, ptr = random_walk_pe_batch(graphs, 7, dtype=dtype, workers=1)
        threaded, _ = random_walk_pe_batch(graphs, 7, dtype=dtype, workers=2)
        np.testing.assert_array_equal(serial, threaded)
    ei, n = graphs[-1]  # independent reference: diagonals of powers of P = D^-1 max(A, Aᵀ)
    A = np.zeros((n, n))
    np.add.at(A, (ei[0], ei[1]), 1.0)
    A = np.maximum(A, A.T)
    P = A / np.maximum(A.sum(1, keepdims=True), 1e-300)
    ref = np.stack([np.diag(np.linalg.matrix_power(P, j)) for j in range(1, 8)], axis=1)
    np.testing.assert_allclose(serial[ptr[-2] :], ref, atol=1e-12)
    with pytest.raises(ValueError, match="workers"):
        random_walk_pe_batch(graphs, 7, workers=0)


@pytest.mark.parametrize("symmetrize", [True, False])
def test_blocked_sparse_path_equals_dense_matrix_powers(symmetrize):
    """The sparse path works on blocks of rows (here 7, so blocks split the graph unevenly) and
    equals the diagonals of dense matrix powers of P = D^{-1} A, walked directed or not."""
    from structpos.coords._graph_utils import as_graph
    from structpos.coords.random_walk import _sparse_rwse

    rng = np.random.default_rng(2)
    ei = random_graph(50, 120, rng, undirected=False, loops=True)
    w = rng.uniform(0.5, 2.0, ei.shape[1])
    got = _sparse_rwse(as_graph(ei, 50, w), 9, symmetrize, block_rows=7)
    A = np.zeros((50, 50))
    np.add.at(A, (ei[0], ei[1]), w)
    if symmetrize:
        A = np.maximum(A, A.T)
    d = A.sum(1)
    P = A / np.where(d > 0, d, 1)[:, None]
    want = np.stack([np.diagonal(np.linalg.matrix_power(P, k)) for k in range(1, 10)], axis=1)
    np.testing.assert_allclose(got, want, atol=1e-12)


def _random_tree(n, seed):
    rng = np.random.default_rng(seed)
    e = np.stack([[int(rng.integers(0, i)) for i in range(1, n)], np.arange(1, n)])
    return np.concatenate([e, e[::-1]], 1)


def test_medium_graphs_take_the_sparse_products_only_where_their_walks_stay_local(monkeypatch):
    """Above ``SPARSE_FIRST`` nodes a tree's walks stay local: the sparse products (float64, rounded
    once) serve it; a random graph's walks cover it in a few steps: the dense powers (in float32)
    serve it. The bytes tell which path ran; both agree with float64 matrix powers."""
    from structpos.coords import random_walk as rw

    tree = (_random_tree(600, 0), 600)
    rng = np.random.default_rng(1)
    e = rng.integers(0, 400, (2, 1600))
    expander = (np.concatenate([e, e[::-1]], 1), 400)
    sparse = {
        name: random_walk_pe(*g, walk_length=8, dense_max=0) for name, g in (("tree", tree), ("expander", expander))
    }
    auto = {name: random_walk_pe(*g, walk_length=8) for name, g in (("tree", tree), ("expander", expander))}
    monkeypatch.setattr(rw, "SPARSE_FIRST", 10**9)
    dense = {name: random_walk_pe(*g, walk_length=8) for name, g in (("tree", tree), ("expander", expander))}
    assert auto["tree"].tobytes() == sparse["tree"].tobytes() != dense["tree"].tobytes()
    assert auto["expander"].tobytes() == dense["expander"].tobytes() != sparse["expander"].tobytes()
    for name in auto:
        np.testing.assert_allclose(auto[name], sparse[name], atol=1e-6)  # float32 rounding apart
    # a work cap below the sparse try's budget sends the graph to the dense path, not to a LimitError
    assert random_walk_pe(*tree, walk_length=8, max_work=10).tobytes() == dense["tree"].tobytes()
