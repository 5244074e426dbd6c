"""Shortest-path and resistance distances against networkx and closed forms."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from structpos import Structure, StructureError
from structpos.coords import compute
from structpos.coords.distance import (
    hop_distances,
    hop_distances_batch,
    pad_pairwise,
    resistance_distance,
    resistance_distance_batch,
    resistance_distance_pairs,
)


def edges(G):
    return np.array(list(G.edges()), dtype=np.int64).reshape(-1, 2).T


@pytest.mark.parametrize("directed", [False, True])
def test_spd_matches_networkx_bfs(directed):
    G = nx.gnp_random_graph(40, 0.06, seed=2, directed=directed)
    D = hop_distances(edges(G), 40, directed=directed)
    ref = np.full((40, 40), -1)
    for u, dist in nx.all_pairs_shortest_path_length(G):
        for v, d in dist.items():
            ref[u, v] = d
    np.testing.assert_array_equal(D, ref)
    capped = hop_distances(edges(G), 40, 2, directed=directed)
    np.testing.assert_array_equal(capped, np.where(ref <= 2, ref, -1))


def test_spd_edge_cases():
    assert hop_distances(np.zeros((2, 0), np.int64), 0).shape == (0, 0)
    np.testing.assert_array_equal(hop_distances(np.zeros((2, 0), np.int64), 2), [[0, -1], [-1, 0]])
    D = hop_distances(torch.tensor([[0, 1], [1, 2]]), 3, unreachable=99)
    assert isinstance(D, torch.Tensor) and D[0, 2] == 2
    with pytest.raises(ValueError, match="max_dist"):
        hop_distances(np.array([[0], [1]]), 2, -1)


def test_resistance_matches_networkx_and_closed_forms():
    G = nx.connected_watts_strogatz_graph(15, 4, 0.4, seed=1)
    R = resistance_distance(edges(G), 15)
    ref = np.array([[nx.resistance_distance(G, u, v) if u != v else 0 for v in range(15)] for u in range(15)])
    np.testing.assert_allclose(R, ref, atol=1e-10)
    n = 9
    i = np.arange(n)
    np.testing.assert_allclose(resistance_distance(edges(nx.path_graph(n)), n), np.abs(i[:, None] - i), atol=1e-10)
    d = np.abs(i[:, None] - i)
    np.testing.assert_allclose(resistance_distance(edges(nx.cycle_graph(n)), n), d * (n - d) / n, atol=1e-10)
    T = nx.random_labeled_tree(12, seed=3) if hasattr(nx, "random_labeled_tree") else nx.random_tree(12, seed=3)
    np.testing.assert_allclose(resistance_distance(edges(T), 12), hop_distances(edges(T), 12), atol=1e-10)


def test_resistance_weights_disconnection_and_errors():
    ei = np.array([[0, 1], [1, 2]])
    R = resistance_distance(ei, 4, np.array([2.0, 4.0]))  # conductances in series, node 3 isolated
    assert R[0, 2] == pytest.approx(1 / 2 + 1 / 4)
    assert np.isinf(R[0, 3]) and R[3, 3] == 0
    with pytest.raises(StructureError, match="max_nodes"):
        resistance_distance(ei, 4, max_nodes=3)
    with pytest.raises(StructureError, match="edge 1"):
        resistance_distance(ei, 4, np.array([1.0, -1.0]))
    with pytest.raises(StructureError) as e:  # the first bad pair, in plain numbers
        resistance_distance_pairs(ei, [[0, 1], [0, 7], [9, 0]], num_nodes=4)
    assert e.value.position == "pair 1" and "pair (0, 7) names a node outside 0..3" in str(e.value)


def test_batches_and_padding():
    graphs = [(edges(nx.path_graph(n)), n) for n in (1, 3, 5)]
    spd = hop_distances_batch(graphs, max_dist=3)
    res = resistance_distance_batch(graphs)
    for (ei, n), s, r in zip(graphs, spd, res):
        np.testing.assert_array_equal(s, hop_distances(ei, n, 3))
        np.testing.assert_allclose(r, resistance_distance(ei, n))
    stacked, mask = pad_pairwise(spd, pad_value=-1)
    assert stacked.shape == (3, 5, 5) and mask.sum() == 1 + 9 + 25
    np.testing.assert_array_equal(stacked[1, :3, :3], spd[1])
    assert (stacked[~mask] == -1).all()


def test_structure_families():
    s = Structure(kind="tree", labels=list("abcd"), parent=np.array([-1, 0, 1, 0]))
    out = compute(s, "spd:5,resistance")
    ref = np.array([[0, 1, 2, 1], [1, 0, 1, 2], [2, 1, 0, 3], [1, 2, 3, 0]])
    np.testing.assert_array_equal(out["spd"], ref)
    np.testing.assert_allclose(out["resistance"], ref, atol=1e-12)


@pytest.mark.parametrize("method", ["factor", "amg-cg", "auto"])
def test_resistance_pairs_match_networkx_and_the_dense_matrix(method):
    """Requested pairs by grounded solves (no pseudo-inverse) equal networkx's resistance and the
    dense L⁺ formula, on a weighted graph with two components, an isolated node and i == j."""
    rng = np.random.default_rng(5)
    G = nx.disjoint_union(nx.connected_watts_strogatz_graph(300, 4, 0.2, seed=1), nx.grid_2d_graph(8, 9))
    G = nx.convert_node_labels_to_integers(G)
    G.add_node(G.number_of_nodes())  # isolated
    n = G.number_of_nodes()
    for u, v in G.edges():
        G[u][v]["weight"] = float(rng.uniform(0.5, 2.0))
    e = np.array(list(G.edges()), dtype=np.int64).T
    w = np.array([G[u][v]["weight"] for u, v in e.T])
    ei, ww = np.concatenate([e, e[::-1]], 1), np.concatenate([w, w])
    pairs = np.concatenate(
        [rng.integers(0, 300, (20, 2)), rng.integers(300, 372, (5, 2)), [[3, 3], [0, 310], [5, n - 1]]]
    )
    got = resistance_distance_pairs(ei, pairs, n, ww, method=method)
    dense = resistance_distance(ei, n, ww)
    np.testing.assert_allclose(got, dense[pairs[:, 0], pairs[:, 1]], rtol=1e-8, atol=1e-10)
    assert got[-3] == 0 and np.isinf(got[-2]) and np.isinf(got[-1])
    H = G.subgraph(range(300))  # networkx wants a connected graph
    for (i, j), r in list(zip(pairs, got))[:4]:
        if i != j:
            assert abs(r - nx.resistance_distance(H, int(i), int(j), weight="weight", invert_weight=False)) < 1e-8
    with pytest.raises(StructureError, match="pair 1"):
        resistance_distance_pairs(ei, [[0, 1], [0, n]], n)
