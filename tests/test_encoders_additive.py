"""Tree path PE, LapPE features, tree distance and SPD biases against independent references."""

from __future__ import annotations

import ast

import networkx as nx
import numpy as np
import pytest
import torch

from structpos import Structure, StructureError
from structpos.encoders import (
    LapPEEmbedding,
    SPDBias,
    alibi_distance_bias,
    alibi_slopes,
    shortest_path_distance,
    tree_depth_sibling,
    tree_distance,
    tree_path_pe,
)


def python_ast_parent(path):
    """Preorder parent array of a real Python file's AST (children in field order)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parent, stack = [], [(tree, -1)]
    while stack:
        node, p = stack.pop()
        me = len(parent)
        parent.append(p)
        stack.extend((c, me) for c in reversed(list(ast.iter_child_nodes(node))))
    return np.array(parent)


def push_reference(parent, max_depth, max_branch, decay):
    """Shiv & Quirk's stack: child = [onehot(b)] + parent's blocks shifted, weighted per level."""
    n = len(parent)
    raw = np.zeros((n, max_depth, max_branch))
    counts = {}
    for i, p in enumerate(parent):
        if p < 0:
            continue
        b = counts.get(p, 0)
        counts[p] = b + 1
        raw[i, 1:] = raw[p, :-1]
        raw[i, 0] = 0
        raw[i, 0, b] = 1
    weights = decay ** np.arange(max_depth)
    return (raw * weights[None, :, None]).reshape(n, -1)


def test_tree_path_pe_matches_push_reference_on_stdlib(stdlib):
    parent = python_ast_parent(stdlib / "textwrap.py")
    got = tree_path_pe(parent, max_depth=6, max_branch=64, decay=0.8)
    ref = push_reference(parent, 6, 64, 0.8)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    depth, sib = tree_depth_sibling(parent)
    nx_depth = nx.shortest_path_length(nx.Graph([(p, i) for i, p in enumerate(parent) if p >= 0]), 0)
    assert all(depth[i] == d for i, d in nx_depth.items())
    assert (sib[1:] >= 0).all() and sib[0] == 0
    with pytest.raises(StructureError, match="max_branch"):
        tree_path_pe(parent, 6, 2)
    clipped = tree_path_pe(parent, 6, 2, clip=True)
    assert clipped.shape == (len(parent), 12)


def test_tree_path_pe_rejects_bad_parents():
    with pytest.raises(StructureError, match="preorder"):
        tree_path_pe(np.array([-1, 2, 0]), 3, 3)
    s = Structure(kind="tree", labels=["a", "b"], parent=[-1, 0], name="toy.json")
    assert tree_path_pe(s, 2, 2).tolist() == [[0, 0, 0, 0], [1, 0, 0, 0]]
    with pytest.raises(StructureError, match="not a tree"):
        tree_path_pe(Structure(kind="graph", labels=["a"], name="g"), 2, 2)


def test_tree_distance_matches_networkx(stdlib):
    parent = python_ast_parent(stdlib / "colorsys.py")
    parent = np.concatenate([parent, [-1, len(parent), len(parent)]])  # a second tree: a forest
    dist = tree_distance(parent)
    g = nx.Graph()
    g.add_nodes_from(range(len(parent)))
    g.add_edges_from((p, i) for i, p in enumerate(parent) if p >= 0)
    sources = np.random.default_rng(0).choice(len(parent) - 3, 40, replace=False).tolist() + [len(parent) - 2]
    for s in sources:  # BFS from a sample of sources (a full all-pairs loop is slow in Python)
        ref = np.full(len(parent), -1)
        for t, d in nx.single_source_shortest_path_length(g, s).items():
            ref[t] = d
        np.testing.assert_array_equal(dist[s], ref)
    np.testing.assert_array_equal(dist, dist.T)


def test_spd_matches_networkx_and_structure():
    g = nx.gnm_random_graph(30, 45, seed=4)
    ei = np.array(list(g.edges())).T
    ei = np.concatenate([ei, ei[::-1]], axis=1)
    dist = shortest_path_distance(ei, 30)
    for s, lengths in nx.all_pairs_shortest_path_length(g):
        for t in range(30):
            assert dist[s, t] == lengths.get(t, -1)
    capped = shortest_path_distance(torch.as_tensor(ei), 30, max_distance=2)
    assert ((capped == -1) | (capped <= 2)).all() and (
        capped[(dist >= 0) & (dist <= 2)] == dist[(dist >= 0) & (dist <= 2)]
    ).all()
    tree = Structure(kind="tree", labels=list("abcd"), parent=[-1, 0, 1, 0])
    np.testing.assert_array_equal(shortest_path_distance(tree), tree_distance(tree))
    directed = shortest_path_distance(np.array([[0, 1], [1, 2]]), 3, directed=True)
    assert directed[0, 2] == 2 and directed[2, 0] == -1
    with pytest.raises(StructureError, match="outside"):
        shortest_path_distance(np.array([[0], [5]]), 3)


def test_distance_biases():
    dist = torch.tensor([[0, 1, 5, -1], [1, 0, 4, -1], [5, 4, 0, -1], [-1, -1, -1, 0]])
    spd = SPDBias(num_heads=3, max_distance=4)
    with torch.no_grad():
        spd.table.weight.copy_(torch.arange(18.0).view(6, 3))
    b = spd(dist)
    assert b.shape == (3, 4, 4)
    assert b[1, 0, 1] == spd.table.weight[1, 1] and b[0, 0, 2] == spd.table.weight[4, 0]  # 5 clips to 4
    assert b[2, 0, 3] == spd.table.weight[5, 2]  # unreachable bucket
    assert torch.allclose(alibi_slopes(8), 2.0 ** -torch.arange(1.0, 9.0))
    assert alibi_slopes(6).shape == (6,)
    ab = alibi_distance_bias(dist, 8)
    assert ab.shape == (8, 4, 4) and torch.isinf(ab[:, 0, 3]).all() and ab[0, 0, 1] == -0.5


def test_lappe_embedding_masks_missing_modes_and_flips_signs():
    torch.manual_seed(0)
    emb = LapPEEmbedding(k=4, dim=6)
    vecs = torch.randn(5, 4)
    vals = torch.rand(4)
    padded = vecs.clone()
    padded[:, 3] = float("nan")
    zeroed = vecs.clone()
    zeroed[:, 3] = 0
    vals_zeroed = vals.clone()
    vals_zeroed[3] = 0
    emb.eval()
    torch.testing.assert_close(emb(padded, vals), emb(zeroed, vals_zeroed))
    assert torch.equal(emb(vecs, vals), emb(vecs, vals))
    emb.train()
    outs = {tuple(emb(vecs, vals).flatten().tolist()) for _ in range(12)}
    assert len(outs) > 1  # random sign flips in training
    with pytest.raises(ValueError, match="needs eigvals"):
        emb(vecs)
