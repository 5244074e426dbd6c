"""Graph input parsers: networkx, edge_index arrays/tensors and PyG ``Data`` agree.

The independent reference for the PyG path is ``torch_geometric.utils.from_networkx`` (PyG's
own networkx → Data conversion, which stores undirected edges in both directions), so the
networkx and PyG readings must give the same adjacency matrix, labels and direction flag.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from structpos import StructureError
from structpos.parsers import parse
from structpos.parsers.graph import adjacency, parse_graph

tg_utils = pytest.importorskip("torch_geometric.utils")
Data = pytest.importorskip("torch_geometric.data").Data


def nx_adjacency(G) -> np.ndarray:
    """networkx's own dense adjacency (weights, node order = list(G.nodes))."""
    return nx.to_numpy_array(G, nodelist=list(G.nodes), weight="weight", multigraph_weight=max)


@st.composite
def weighted_graphs(draw):
    n = draw(st.integers(1, 12))
    directed = draw(st.booleans())
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30, unique=True))
    for u, v in pairs:
        G.add_edge(u, v, weight=draw(st.floats(0.1, 5.0)))
    return G


@settings(max_examples=60, deadline=None)
@given(weighted_graphs())
def test_networkx_edge_index_and_pyg_agree(G):
    s_nx = parse_graph(G)
    assert s_nx.kind == "graph" and s_nx.directed == G.is_directed()
    assert s_nx.num_nodes == G.number_of_nodes() and s_nx.edge_index.shape[1] == G.number_of_edges()
    assert np.allclose(adjacency(s_nx), nx_adjacency(G))

    data = tg_utils.from_networkx(G)  # both directions for undirected graphs
    s_pyg = parse_graph(data)
    assert s_pyg.num_nodes == s_nx.num_nodes
    assert np.allclose(adjacency(s_pyg), adjacency(s_nx))
    if G.number_of_edges() and not G.is_directed():
        assert not s_pyg.directed  # symmetric edge_index with symmetric weights
    if G.is_directed() and any(not G.has_edge(v, u) for u, v in G.edges):
        assert s_pyg.directed

    # a bare edge_index (torch or numpy) with explicit weights is stored exactly as given
    ei = data.edge_index
    s_t = parse_graph(ei, num_nodes=G.number_of_nodes(), edge_weight=data.weight if G.number_of_edges() else None)
    s_np = parse_graph(
        ei.numpy(), num_nodes=G.number_of_nodes(), edge_weight=None if not G.number_of_edges() else data.weight.numpy()
    )
    assert np.array_equal(s_t.edge_index, ei.numpy()) and np.array_equal(s_np.edge_index, ei.numpy())
    assert np.allclose(adjacency(s_t), adjacency(s_pyg)) and s_t.directed == s_pyg.directed
    assert list(s_t.labels) == [str(i) for i in range(G.number_of_nodes())] == list(s_nx.labels)


def test_same_edge_list_gives_identical_structures():
    edges = np.array([[0, 1, 2, 3, 3], [1, 2, 0, 0, 4]])
    w = np.array([1.0, 2.0, 0.5, 1.5, 3.0])
    G = nx.DiGraph()
    G.add_nodes_from(range(5))
    for (u, v), x in zip(edges.T, w):
        G.add_edge(int(u), int(v), weight=float(x))
    a = parse_graph(G)
    b = parse_graph(torch.tensor(edges), edge_weight=torch.tensor(w))
    c = parse_graph(Data(edge_index=torch.tensor(edges), edge_weight=torch.tensor(w), num_nodes=5))
    d = parse(Data(edge_index=torch.tensor(edges), edge_attr=torch.tensor(w)[:, None], num_nodes=5), "graph")
    for s in (a, b, c, d):
        assert s.directed and np.array_equal(s.edge_index, edges) and np.allclose(s.edge_weight, w)
        ei, ew = s.edges()
        assert ei is s.edge_index and ew is s.edge_weight
        assert (s.start == -1).all() and s.source is None
    # an explicit flag overrides the inference; edges are still stored as given
    u = parse_graph(edges, directed=False)
    assert not u.directed and np.array_equal(u.edge_index, edges) and u.edge_weight is None
    assert np.array_equal(adjacency(u), adjacency(u).T)


def test_labels_node_text_and_node_ids():
    G = nx.Graph()
    G.add_node("x", label="X", text="first node")
    G.add_node(("t", 1), text="é second")
    G.add_edge("x", ("t", 1))
    s = parse_graph(G, node_text="text", name="g1")
    assert list(s.labels) == ["X", "('t', 1)"] and s.node_ids == ["x", ("t", 1)]
    assert [s.node_text(i) for i in range(2)] == ["first node", "é second"]
    assert s.edge_weight is None and s.name == "g1"
    t = parse_graph(np.zeros((2, 0), dtype=np.int64), num_nodes=3, node_text=["a", "bb", ""])
    assert [t.node_text(i) for i in range(3)] == ["a", "bb", ""] and t.edge_index.shape == (2, 0)


@pytest.mark.parametrize(
    "obj, kwargs, match",
    [
        (np.array([[0, 1, 5], [1, 2, 0]]), {"num_nodes": 4}, r"edge 2\b.*\(5, 0\)"),
        (np.array([[0, -1], [1, 2]]), {}, r"edge 1\b"),
        (np.array([[0, 1], [1, 2]]), {"edge_weight": [1.0, -2.0]}, r"edge 1\b.*-2"),
        (np.array([[0, 1, 2], [1, 2, 0]]), {"edge_weight": [1.0, 1.0, float("nan")]}, r"edge 2\b.*nan"),
        (np.array([[0.0, 1.5], [1.0, 2.0]]), {}, r"edge 1\b.*integers"),
        (np.array([0, 1, 2]), {}, r"shape \(2, E\)"),
        (np.array([[0, 1], [1, 0]]), {"edge_weight": [1.0]}, r"shape \(2,\)"),
    ],
)
def test_bad_edge_index_raises_with_position(obj, kwargs, match):
    with pytest.raises(StructureError, match=match):
        parse_graph(obj, name="bad", **kwargs)


def test_bad_networkx_and_pyg_inputs():
    G = nx.Graph()
    G.add_edge("a", "b", weight=1.0)
    G.add_edge("b", "c", weight=-3.0)
    with pytest.raises(StructureError, match=r"edge 1\b"):
        parse_graph(G)
    G2 = nx.Graph()
    G2.add_edge(0, 1, weight="heavy")
    with pytest.raises(StructureError, match=r"edge 0\b"):
        parse_graph(G2)
    with pytest.raises(StructureError, match=r"edge 1\b.*outside 0\.\.2"):
        parse_graph(Data(edge_index=torch.tensor([[0, 1], [1, 3]]), num_nodes=3))
    with pytest.raises(StructureError, match="edge 0"):
        parse_graph(Data(edge_index=torch.tensor([[0], [1]]), edge_weight=torch.tensor([float("inf")]), num_nodes=2))


@pytest.mark.parametrize("directed", ["maybe", "false", "true", 1, 0, 1.0, [True]])
def test_directed_must_be_a_bool(directed):
    with pytest.raises(
        StructureError, match=r"g: directed must be true, false or absent"
    ):  # "false" read as True before
        parse_graph([[0, 1], [1, 2]], directed=directed, name="g")


def test_directed_bools_are_kept():
    for flag in (True, False, np.bool_(True), np.bool_(False)):
        s = parse_graph([[0, 1], [1, 2]], directed=flag)
        assert s.directed is bool(flag)
    assert parse_graph([[0, 1], [1, 2]]).directed is True  # inferred: (1, 0) is missing
