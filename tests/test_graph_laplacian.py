"""LapPE against analytic spectra, PyG's transform, networkx's Laplacian, and its own sparse path."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from structpos import Structure, StructureError
from structpos.coords import compute
from structpos.coords._graph_utils import EigenConvergenceError
from structpos.coords.laplacian import laplacian_pe, laplacian_pe_batch


def random_connected(n: int, extra: int, rng) -> np.ndarray:
    """Undirected edge list (both directions): a random spanning tree plus ``extra`` random edges."""
    parent = [rng.integers(0, i) for i in range(1, n)]
    e = [(p, i) for i, p in zip(range(1, n), parent)]
    e += [tuple(x) for x in rng.integers(0, n, (extra, 2)) if x[0] != x[1]]
    e = np.array(e, dtype=np.int64).T.reshape(2, -1)
    return np.concatenate([e, e[::-1]], axis=1)


def edges_of(G: nx.Graph) -> np.ndarray:
    e = np.array(list(G.edges()), dtype=np.int64).reshape(-1, 2).T
    return np.concatenate([e, e[::-1]], axis=1)


def nx_reference(ei: np.ndarray, n: int, weight=None):
    """Spectrum of networkx's normalized Laplacian (isolated rows zero) and its component count."""
    G = nx.Graph()
    G.add_nodes_from(range(n))
    w = np.ones(ei.shape[1]) if weight is None else weight
    for (u, v), x in zip(ei.T, w):
        if u != v:
            G.add_edge(int(u), int(v), weight=float(x))
    L = nx.normalized_laplacian_matrix(G, nodelist=range(n), weight="weight").toarray()
    lam, U = np.linalg.eigh(L)
    return L, lam, U, nx.number_connected_components(G)


def assert_same_modes(pe_a, pe_b, ev, L, tol=1e-6):
    """Equal eigenspaces: for each eigenvalue cluster wholly inside the k kept modes the
    projectors agree; a cluster cut by the k-th mode only needs eigenvector residuals."""
    full = np.linalg.eigvalsh(L)
    k = len(ev)
    j = 0
    while j < k:
        c = np.flatnonzero(np.abs(ev - ev[j]) < 1e-7)
        c = c[c >= j]
        mult_full = int(np.sum(np.abs(full - ev[j]) < 1e-7))
        if len(c) == mult_full or ev[j] == 0:
            Pa = pe_a[:, c] @ pe_a[:, c].T
            Pb = pe_b[:, c] @ pe_b[:, c].T
            np.testing.assert_allclose(Pa, Pb, atol=tol)
        for pe in (pe_a, pe_b):
            np.testing.assert_allclose(L @ pe[:, c], pe[:, c] * ev[j], atol=tol)
        j = c[-1] + 1


# ------------------------------------------------------------------ analytic spectra
@pytest.mark.parametrize("n", [2, 3, 10, 31])
def test_path_graph_matches_analytic_spectrum(n):
    k = min(4, n - 1)
    pe, ev, mask = laplacian_pe(edges_of(nx.path_graph(n)), n, k)
    j = np.arange(1, k + 1)
    np.testing.assert_allclose(ev, 1 - np.cos(np.pi * j / (n - 1)), atol=1e-12)
    # eigenvectors: u_j ∝ D^{1/2} cos(π j i / (n-1)) (random-walk eigenvectors scaled by √d)
    i = np.arange(n)
    d = np.where((i == 0) | (i == n - 1), 1.0, 2.0)
    ref = np.sqrt(d)[:, None] * np.cos(np.pi * np.outer(i, j) / (n - 1))
    ref /= np.linalg.norm(ref, axis=0)
    np.testing.assert_allclose(np.abs(np.sum(ref * pe, axis=0)), 1.0, atol=1e-10)
    assert mask.all()


@pytest.mark.parametrize("n", [7, 9, 12])
def test_cycle_graph_matches_analytic_spectrum_and_eigenspaces(n):
    k = 4  # two complete doubly-degenerate pairs j = 1, 2
    pe, ev, _ = laplacian_pe(edges_of(nx.cycle_graph(n)), n, k)
    np.testing.assert_allclose(ev, 1 - np.cos(2 * np.pi * np.array([1, 1, 2, 2]) / n), atol=1e-12)
    diff = np.subtract.outer(np.arange(n), np.arange(n))
    for pair, j in ((slice(0, 2), 1), (slice(2, 4), 2)):
        P = pe[:, pair] @ pe[:, pair].T
        np.testing.assert_allclose(P, 2 / n * np.cos(2 * np.pi * j * diff / n), atol=1e-10)


# ------------------------------------------------------------------ PyG
@pytest.mark.parametrize("seed", range(6))
def test_matches_pyg_on_connected_graphs(seed):
    from torch_geometric.data import Data
    from torch_geometric.transforms import AddLaplacianEigenvectorPE
    from torch_geometric.utils import get_laplacian, to_scipy_sparse_matrix

    rng = np.random.default_rng(seed)
    n = int(rng.integers(10, 60)) if seed < 5 else 130  # 130 nodes: PyG's sparse ARPACK path
    k = 6
    ei = random_connected(n, n, rng)
    w = rng.uniform(0.5, 2.0, ei.shape[1] // 2) if seed % 2 else None
    if w is not None:
        w = np.concatenate([w, w])
    data = Data(edge_index=torch.from_numpy(ei), num_nodes=n)
    if w is not None:
        data.edge_weight = torch.from_numpy(w)
    ref = AddLaplacianEigenvectorPE(k, is_undirected=seed == 5)(data.clone()).laplacian_eigenvector_pe.numpy()
    li, lw = get_laplacian(data.edge_index, data.edge_weight, normalization="sym", num_nodes=n)
    L = to_scipy_sparse_matrix(li, lw, n).toarray()
    ref_ev = np.einsum("ij,ij->j", ref, L @ ref)  # Rayleigh quotients of PyG's eigenvectors
    pe, ev, mask = laplacian_pe(ei, n, k, w)
    assert mask.all()
    # PyG builds L in float32 without weights, so its eigenpairs carry float32 rounding
    tol = 1e-10 if w is not None else 1e-6
    np.testing.assert_allclose(ev, ref_ev, atol=tol)
    assert_same_modes(pe, ref, ev, L, tol=max(tol, 1e-6) * 10)


def test_torch_in_torch_out():
    ei = torch.from_numpy(edges_of(nx.path_graph(5)))
    pe, ev, mask = laplacian_pe(ei, 5, 2)
    assert isinstance(pe, torch.Tensor) and isinstance(ev, torch.Tensor) and mask.dtype == torch.bool


# ------------------------------------------------------------------ edge cases
def test_disconnected_graph_drops_one_trivial_mode_per_component():
    G = nx.disjoint_union_all([nx.path_graph(5), nx.cycle_graph(6), nx.complete_graph(4), nx.empty_graph(2)])
    n = G.number_of_nodes()
    ei = edges_of(G)
    L, lam, _, c = nx_reference(ei, n)
    assert c == 5
    k = n - c
    pe, ev, mask = laplacian_pe(ei, n, k + 2)
    np.testing.assert_allclose(ev[:k], lam[c:], atol=1e-10)
    assert mask.tolist() == [True] * k + [False, False]
    assert np.all(pe[:, k:] == 0) and np.all(ev[k:] == 0)
    assert_same_modes(pe[:, :k], pe[:, :k], ev[:k], L)
    # every kept mode is orthogonal to every component's trivial mode D^{1/2} 1_C
    deg = np.bincount(ei[0], minlength=n).astype(float)
    for comp in nx.connected_components(G):
        triv = np.zeros(n)
        triv[list(comp)] = np.sqrt(deg[list(comp)])
        assert np.abs(triv @ pe).max() < 1e-10


def test_isolated_nodes_have_zero_rows_and_add_no_mode():
    ei = edges_of(nx.path_graph(4))
    pe, ev, mask = laplacian_pe(ei, 7, 3)  # nodes 4, 5, 6 isolated
    pe0, ev0, _ = laplacian_pe(ei, 4, 3)
    np.testing.assert_array_equal(pe[4:], 0)
    np.testing.assert_allclose(pe[:4], pe0, atol=1e-12)
    np.testing.assert_allclose(ev, ev0, atol=1e-12)
    assert mask.all()


def test_self_loops_are_ignored():
    ei = edges_of(nx.cycle_graph(6))
    loops = np.array([[0, 3], [0, 3]])
    a = laplacian_pe(ei, 6, 3)
    b = laplacian_pe(np.concatenate([ei, loops], axis=1), 6, 3)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=1e-12)


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_graphs_are_padded_and_masked(n):
    pe, ev, mask = laplacian_pe(np.zeros((2, 0), dtype=np.int64), n, 4)
    assert pe.shape == (n, 4) and ev.shape == (4,) and not mask.any() and not pe.any()


def test_fewer_nodes_than_k_pads_instead_of_raising():
    pe, ev, mask = laplacian_pe(edges_of(nx.path_graph(3)), 3, 5)
    assert mask.tolist() == [True, True, False, False, False]
    np.testing.assert_allclose(ev[:2], [1.0, 2.0], atol=1e-12)


@pytest.mark.parametrize(
    "weight, pos",
    [([1.0, np.nan, 1.0, 1.0], "edge 1"), ([1.0, 1.0, -2.0, 1.0], "edge 2"), ([np.inf, 1.0, 1.0, 1.0], "edge 0")],
)
def test_bad_weights_raise_naming_the_edge(weight, pos):
    ei = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])
    with pytest.raises(StructureError, match=pos):
        laplacian_pe(ei, 3, 1, np.array(weight))


def test_bad_edge_index_raises():
    with pytest.raises(StructureError, match="edge 1"):
        laplacian_pe(np.array([[0, 5], [1, 0]]), 3, 1)
    with pytest.raises(StructureError, match="shape"):
        laplacian_pe(np.array([0, 1, 2]), 3, 1)
    with pytest.raises(ValueError, match="k must"):
        laplacian_pe(np.array([[0], [1]]), 2, 0)


def test_sign_convention_is_deterministic_and_documented():
    rng = np.random.default_rng(3)
    ei = random_connected(25, 20, rng)
    pe, _, _ = laplacian_pe(ei, 25, 5)
    perm = rng.permutation(ei.shape[1])
    pe2, _, _ = laplacian_pe(ei[:, perm], 25, 5)  # same graph, edges in another order
    np.testing.assert_allclose(pe, pe2, atol=1e-12)
    top = np.argmax(np.abs(pe) >= np.abs(pe).max(0) * (1 - 1e-6), axis=0)
    assert np.all(pe[top, np.arange(5)] > 0)


# ------------------------------------------------------------------ sparse path
def _mixed_graph():
    G = nx.disjoint_union_all([nx.grid_2d_graph(12, 15), nx.path_graph(40), nx.cycle_graph(25), nx.empty_graph(3)])
    return edges_of(nx.convert_node_labels_to_integers(G)), G.number_of_nodes()


@pytest.mark.parametrize("method", ["shift-invert", "lobpcg"])
def test_sparse_solvers_match_dense(method):
    ei, n = _mixed_graph()
    pe, ev, _ = laplacian_pe(ei, n, 6, method="dense")
    pe2, ev2, mask2 = laplacian_pe(ei, n, 6, method=method, dense_max=30)  # grid + path go sparse
    np.testing.assert_allclose(ev2, ev, atol=1e-9)
    assert mask2.all()
    L, *_ = nx_reference(ei, n)
    assert_same_modes(pe, pe2, ev, L, tol=1e-5)


def test_non_convergence_is_reported():
    ei, n = _mixed_graph()
    with pytest.raises(EigenConvergenceError, match="did not converge"):
        laplacian_pe(ei, n, 6, method="lobpcg", dense_max=30, maxiter=2)


# ------------------------------------------------------------------ batch
def test_batch_equals_single_graphs_and_never_mixes_graphs():
    rng = np.random.default_rng(7)
    graphs = [(edges_of(nx.cycle_graph(8)), 8), (np.zeros((2, 0), np.int64), 0), (np.zeros((2, 0), np.int64), 1)]
    graphs += [(random_connected(n, n // 2, rng), n) for n in rng.integers(5, 20, 12)]
    graphs += [(edges_of(nx.cycle_graph(8)), 8), _mixed_graph()]  # identical cycles: degenerate spaces
    for bucket in (1, 8):
        out = laplacian_pe_batch(graphs, 5, bucket=bucket, dense_max=100)
        assert out.pe.shape == (sum(n for _, n in graphs), 5)
        for g, (ei, n) in enumerate(graphs):
            pe, ev, mask = out.graph(g)
            ref = laplacian_pe(ei, n, 5, dense_max=100)
            np.testing.assert_allclose(ev, ref[1], atol=1e-9)
            np.testing.assert_array_equal(mask, ref[2])
            np.testing.assert_allclose(pe @ pe.T, ref[0] @ ref[0].T, atol=1e-6)


def test_batch_float32_and_torch_output():
    rng = np.random.default_rng(1)
    graphs = [(torch.from_numpy(random_connected(n, n, rng)), int(n)) for n in rng.integers(10, 30, 10)]
    out64 = laplacian_pe_batch(graphs, 4)
    out32 = laplacian_pe_batch(graphs, 4, dtype=np.float32)
    assert isinstance(out64.pe, torch.Tensor) and out32.pe.dtype == torch.float32
    torch.testing.assert_close(out32.eigvals.double(), out64.eigvals, atol=1e-4, rtol=0)


# ------------------------------------------------------------------ registry
def test_structure_family_on_a_tree():
    parent = np.array([-1, 0, 0, 1, 1, 2])
    s = Structure(kind="tree", labels=list("abcdef"), parent=parent)
    out = compute(s, "lap:3")
    assert out["lap"].shape == (6, 3) and out["lap_eigvals"].shape == (6, 3) and out["lap_mask"].all()
    child = np.arange(1, 6)
    ref = laplacian_pe(np.concatenate([[parent[child], child], [child, parent[child]]], axis=1), 6, 3)
    np.testing.assert_allclose(out["lap"], ref[0], atol=1e-12)


def test_threaded_batch_is_identical_to_serial_and_correct():
    """Size groups decomposed by a thread pool give bit-identical output (graphs of mixed sizes,
    components and isolated nodes), and each graph's modes match the networkx reference."""
    rng = np.random.default_rng(11)
    simple = lambda n, extra: np.unique(random_connected(n, extra, rng), axis=1)  # noqa: E731 (no duplicates)
    graphs = [(simple(n, n // 3), int(n)) for n in rng.integers(3, 25, 40)]
    two = np.concatenate([simple(6, 2), simple(7, 3) + 6], axis=1)
    graphs += [(two, 15), (np.zeros((2, 0), np.int64), 4)]  # 2 components + 2 isolated; all isolated
    graphs += [(simple(140, 20), 140)]  # above SMALL: decomposed outside the pool, BLAS threads kept
    blas_threads = [(i["filepath"], i["num_threads"]) for i in threadpool_info()]
    serial = laplacian_pe_batch(graphs, 6, workers=1)
    for workers in (2, 3):
        threaded = laplacian_pe_batch(graphs, 6, workers=workers)
        for a, b in zip(serial, threaded):
            np.testing.assert_array_equal(a, b)
    assert [(i["filepath"], i["num_threads"]) for i in threadpool_info()] == blas_threads  # restored
    for g, (ei, n) in enumerate(graphs):
        pe, ev, mask = serial.graph(g)
        L, lam, _, c = nx_reference(ei, n)
        nontrivial = lam[np.abs(lam) > 1e-9][:6]  # zero modes: one per component of >= 2 nodes
        np.testing.assert_allclose(ev[mask], nontrivial, atol=1e-9)
        assert_same_modes(pe[:, mask], pe[:, mask], ev[mask], L)


@pytest.mark.parametrize("workers", [0, -1, 1.5])
def test_bad_workers_raise(workers):
    with pytest.raises(ValueError, match="workers"):
        laplacian_pe_batch([(random_connected(5, 1, np.random.default_rng(0)), 5)] * 300, 2, workers=workers)
