"""NT-LLM anchors: greedy k-centre against a brute-force networkx implementation, the 2-approximation
bound against the optimum over all k-subsets, disconnected graphs and the sentinel."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from structpos import Structure
from structpos.coords import compute, parse_spec
from structpos.coords.anchors import anchor_distances, covering_radius, kcenter_anchors
from structpos.coords.distance import hop_distances
from structpos.exceptions import SpecError, StructureError


def nx_graph(ei: np.ndarray, n: int) -> nx.Graph:
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from((int(u), int(v)) for u, v in ei.T if u != v)
    return G


def nx_dist(G: nx.Graph) -> np.ndarray:
    n = G.number_of_nodes()
    D = np.full((n, n), math.inf)
    for s, lengths in nx.all_pairs_shortest_path_length(G):
        for t, d in lengths.items():
            D[s, t] = d
    return D


def brute_greedy(G: nx.Graph, k: int) -> list[int]:
    """Farthest-point traversal written out loop by loop: first the max-degree node, then the
    node farthest from the chosen set; ties to the lowest index; ∞ for other components."""
    D = nx_dist(G)
    n = G.number_of_nodes()
    first = min(range(n), key=lambda v: (-G.degree(v), v))
    chosen = [first]
    while len(chosen) < min(k, n):
        best, best_d = None, -1.0
        for v in range(n):
            d = min(D[v, a] for a in chosen)
            if d > best_d:
                best, best_d = v, d
        if best_d == 0:
            break
        chosen.append(best)
    return chosen


def random_graph(n: int, m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, (2, m))
    return e[:, e[0] != e[1]].astype(np.int64)


CASES = [(8, 10, 0), (10, 9, 1), (12, 30, 2), (9, 5, 3), (11, 14, 4), (10, 12, 5)]


@pytest.mark.parametrize("n, m, seed", CASES)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_greedy_equals_brute_force_and_is_2_approximate(n, m, seed, k):
    ei = random_graph(n, m, seed)
    G = nx_graph(ei, n)
    r = kcenter_anchors(ei, n, k=k)
    ref = brute_greedy(G, k)
    got = [a for a in r.anchors.tolist() if a >= 0]
    assert got == ref
    D = nx_dist(G)
    expect = np.where(np.isfinite(D[:, got]), D[:, got], -1)
    np.testing.assert_array_equal(r.distances[:, : len(got)], expect)
    assert (r.distances[:, len(got) :] == -1).all() and r.mask.tolist() == [j < len(got) for j in range(k)]
    # the optimum over every k-subset, by brute force
    opt = min(D[:, list(S)].min(axis=1).max() for S in itertools.combinations(range(n), min(k, n)))
    radius = covering_radius(r.distances)
    if math.isfinite(opt):
        assert radius <= 2 * opt
    else:  # fewer anchors than components: nobody can cover every node
        assert radius == math.inf and nx.number_connected_components(G) > k


def test_disconnected_graph_gets_one_anchor_per_component_first():
    # components {0,1,2}, {3,4}, {5}, {6,7,8,9} (a star around 7)
    ei = np.array([[0, 1, 3, 7, 7, 7], [1, 2, 4, 6, 8, 9]])
    r = kcenter_anchors(ei, 10, k=3)
    assert r.anchors.tolist() == [7, 0, 3]  # 7 has degree 3; then lowest index of each uncovered component
    assert covering_radius(r.distances) == math.inf  # node 5 is alone and uncovered
    assert r.distances[5].tolist() == [-1, -1, -1]
    r4 = kcenter_anchors(ei, 10, k=4)
    assert sorted(r4.anchors.tolist()) == [0, 3, 5, 7] and covering_radius(r4.distances) == 2


def test_anchor_distances_match_hop_distances_and_spec():
    ei = random_graph(15, 25, 7)
    anchors = [3, 9, 0]
    np.testing.assert_array_equal(anchor_distances(ei, 15, anchors), hop_distances(ei, 15)[:, anchors])
    s = Structure("graph", [str(i) for i in range(15)], edge_index=ei, directed=True)
    assert parse_spec("anchor:4") == [("anchor", "4")]
    c = compute(s, "anchor:4")
    r = kcenter_anchors(ei, 15, k=4)  # direction ignored: the structure being directed changes nothing
    np.testing.assert_array_equal(c["anchor_dist"], r.distances)
    np.testing.assert_array_equal(c["anchor_node"], np.tile(r.anchors, (15, 1)))
    with pytest.raises(SpecError, match="anchor:0"):
        parse_spec("anchor:0")
    with pytest.raises(SpecError, match="k"):
        kcenter_anchors(ei, 15, k=0)
    with pytest.raises(StructureError, match="sources"):
        anchor_distances(ei, 15, [15])


def test_empty_graph():
    r = kcenter_anchors(np.zeros((2, 0), np.int64), 0, k=2)
    assert r.anchors.tolist() == [-1, -1] and r.distances.shape == (0, 2)
