"""Magnetic Laplacian PE against an independent construction, the directed-cycle spectrum,
the ordinary Laplacian at q = 0, and its own sparse path."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from structpos import Structure
from structpos.coords import compute
from structpos.coords.laplacian import laplacian_pe
from structpos.coords.magnetic import magnetic_laplacian_pe, magnetic_laplacian_pe_batch


def reference_matrix(ei: np.ndarray, n: int, q: float) -> np.ndarray:
    """L^(q) built entry by entry from the definition (unweighted, no self-loops)."""
    dir_ = {(int(u), int(v)) for u, v in ei.T if u != v}
    und = {frozenset(e) for e in dir_}
    deg = np.zeros(n)
    for e in und:
        for u in e:
            deg[u] += 1
    L = np.eye(n, dtype=complex)
    for e in und:
        u, v = tuple(e)
        theta = 2 * np.pi * q * (((u, v) in dir_) - ((v, u) in dir_))
        L[u, v] = -np.exp(1j * theta) / np.sqrt(deg[u] * deg[v])
        L[v, u] = np.conj(L[u, v])
    return L


def random_digraph(n, p, seed):
    G = nx.gnp_random_graph(n, p, seed=seed, directed=True)
    G.add_edges_from((i, i + 1) for i in range(n - 1))  # connected
    return np.array(list(G.edges()), dtype=np.int64).T


@pytest.mark.parametrize("q", [0.05, 0.25])
def test_matches_independent_construction(q):
    ei = random_digraph(30, 0.08, 1)
    L = reference_matrix(ei, 30, q)
    assert np.allclose(L, L.conj().T)
    lam, U = np.linalg.eigh(L)
    k = 5
    pe, ev, mask = magnetic_laplacian_pe(ei, 30, k, q)
    assert mask.all() and np.iscomplexobj(pe)
    np.testing.assert_allclose(ev, lam[:k], atol=1e-10)
    if lam[k] - lam[k - 1] > 1e-6:
        np.testing.assert_allclose(pe @ pe.conj().T, U[:, :k] @ U[:, :k].conj().T, atol=1e-8)
    np.testing.assert_allclose(L @ pe, pe * ev, atol=1e-10)


@pytest.mark.parametrize("n, q", [(7, 0.25), (10, 0.1)])
def test_directed_cycle_spectrum(n, q):
    """One-way cycle: L = I − ½(e^{2πiq}S + e^{−2πiq}Sᵀ), eigenvalues 1 − cos(2π(j/n + q))."""
    ei = np.array([np.arange(n), (np.arange(n) + 1) % n])
    _, ev, _ = magnetic_laplacian_pe(ei, n, n, q)
    np.testing.assert_allclose(ev, np.sort(1 - np.cos(2 * np.pi * (np.arange(n) / n + q))), atol=1e-12)


def test_q_zero_is_the_ordinary_laplacian():
    G = nx.connected_watts_strogatz_graph(24, 4, 0.3, seed=3)
    e = np.array(list(G.edges())).T
    _, ev, _ = magnetic_laplacian_pe(e, 24, 5, q=0.0)
    _, lap_ev, _ = laplacian_pe(np.concatenate([e, e[::-1]], axis=1), 24, 4)
    np.testing.assert_allclose(ev, np.concatenate([[0.0], lap_ev]), atol=1e-12)


def test_reversing_edges_conjugates_and_phase_is_canonical():
    ei = random_digraph(25, 0.1, 4)
    pe, ev, _ = magnetic_laplacian_pe(ei, 25, 4)
    pe_r, ev_r, _ = magnetic_laplacian_pe(ei[::-1], 25, 4)
    np.testing.assert_allclose(ev_r, ev, atol=1e-12)
    np.testing.assert_allclose(pe_r, pe.conj(), atol=1e-9)
    top = np.argmax(np.abs(pe), axis=0)
    pivot = pe[top, np.arange(4)]
    assert np.all(pivot.real > 0) and np.allclose(pivot.imag, 0, atol=1e-12)


@pytest.mark.parametrize("method", ["shift-invert", "lobpcg"])
def test_sparse_solvers_match_dense(method):
    ei = random_digraph(80, 0.03, 7)
    pe, ev, _ = magnetic_laplacian_pe(ei, 80, 4)
    pe2, ev2, _ = magnetic_laplacian_pe(ei, 80, 4, method=method)
    np.testing.assert_allclose(ev2, ev, atol=1e-8)
    np.testing.assert_allclose(pe2 @ pe2.conj().T, pe @ pe.conj().T, atol=1e-5)


def test_isolated_nodes_tiny_graphs_and_relative_q():
    ei = np.array([[0, 1], [1, 2]])
    pe, ev, mask = magnetic_laplacian_pe(ei, 5, 4)  # nodes 3, 4 isolated
    assert mask.tolist() == [True, True, True, False] and not pe[3:].any()
    for n in (0, 1):
        pe, ev, mask = magnetic_laplacian_pe(np.zeros((2, 0), np.int64), n, 2)
        assert pe.shape == (n, 2) and not mask.any()
    a = magnetic_laplacian_pe(ei, 3, 2, q=0.5, q_relative=True)  # two one-way pairs → q = 0.25
    b = magnetic_laplacian_pe(ei, 3, 2, q=0.25)
    np.testing.assert_allclose(a[1], b[1], atol=1e-12)
    with pytest.raises(ValueError, match="potential q"):
        magnetic_laplacian_pe(ei, 3, 2, q=float("nan"))


def test_batch_equals_single_graphs():
    graphs = [(random_digraph(int(n), 0.1, int(n)), int(n)) for n in (5, 9, 9, 14, 20)]
    graphs.append((torch.zeros((2, 0), dtype=torch.long), 1))
    out = magnetic_laplacian_pe_batch(graphs, 3, 0.2, bucket=4)
    for g, (ei, n) in enumerate(graphs):
        pe, ev, mask = out.graph(g)
        ref = magnetic_laplacian_pe(ei, n, 3, 0.2)
        np.testing.assert_allclose(ev, np.asarray(ref[1]), atol=1e-10)
        np.testing.assert_allclose(pe, np.asarray(ref[0]), atol=1e-8)


def test_tree_family_uses_parent_to_child_direction():
    s = Structure(kind="tree", labels=list("abcde"), parent=np.array([-1, 0, 0, 1, 1]))
    out = compute(s, "maglap:3:0.25")
    assert out["maglap_re"].shape == (5, 3) and np.abs(out["maglap_im"]).max() > 1e-3
