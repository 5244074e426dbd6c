"""Tree coordinate functions against naive per-node references, networkx, and edge cases."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from structpos import Structure, StructureError
from structpos.coords import compute
from structpos.coords import tree as T


# ------------------------------------------------------------ random trees
def random_preorder_forest(rng: np.random.Generator, n: int, roots: int = 1, bushy: float = 0.5) -> np.ndarray:
    """A random forest relabelled into preorder (children kept in random insertion order)."""
    raw_parent = np.full(n, -1)
    for i in range(roots, n):
        # mix of deep (attach to a recent node) and bushy (attach anywhere) shapes
        raw_parent[i] = rng.integers(0, i) if rng.random() < bushy else max(0, i - 1 - rng.integers(0, 3))
    children: list[list[int]] = [[] for _ in range(n)]
    for i in range(roots, n):
        children[raw_parent[i]].append(i)
    for c in children:
        rng.shuffle(c)
    order, stack = [], list(range(roots - 1, -1, -1))
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(children[v]))
    new = np.empty(n, dtype=np.int64)
    new[order] = np.arange(n)
    parent = np.full(n, -1, dtype=np.int64)
    for old in range(n):
        if raw_parent[old] >= 0:
            parent[new[old]] = new[raw_parent[old]]
    return parent


# -------------------------------------------------------- naive references
def naive(parent: np.ndarray) -> dict[str, list]:
    n = len(parent)
    kids: dict[int, list[int]] = {}
    for i in range(n):
        kids.setdefault(int(parent[i]), []).append(i)
    depth, sib, nch, size = [0] * n, [0] * n, [0] * n, [1] * n
    for p, cs in kids.items():
        for k, c in enumerate(cs):
            sib[c] = k
        if p >= 0:
            nch[p] = len(cs)
    for i in range(n):
        depth[i] = 0 if parent[i] < 0 else depth[parent[i]] + 1
    for i in range(n - 1, -1, -1):
        if parent[i] >= 0:
            size[parent[i]] += size[i]
    paths = []
    for i in range(n):
        path, v = [], i
        while parent[v] >= 0:
            path.append(sib[v])
            v = parent[v]
        paths.append(path[::-1])
    return {"depth": depth, "sibling": sib, "num_children": nch, "subtree_size": size, "paths": paths}


def naive_root_path(paths, max_depth, max_width, keep):
    out = np.full((len(paths), max_depth), -1)
    flag = np.zeros(len(paths), dtype=bool)
    for i, path in enumerate(paths):
        kept = path[:max_depth] if keep == "top" else path[-max_depth:] if path else []
        clipped = [min(s, max_width - 1) for s in kept]
        out[i, : len(clipped)] = clipped
        flag[i] = clipped != path
    return out, flag


SHAPES = [(1, 1, 0.5), (2, 1, 0.5), (50, 1, 0.9), (200, 1, 0.1), (300, 4, 0.5), (500, 1, 1.0), (400, 7, 0.0)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n,roots,bushy", SHAPES)
def test_basic_arrays_match_naive(seed, n, roots, bushy):
    parent = random_preorder_forest(np.random.default_rng(seed), n, roots, bushy)
    ref = naive(parent)
    np.testing.assert_array_equal(T.depth(parent), ref["depth"])
    np.testing.assert_array_equal(T.sibling_index(parent), ref["sibling"])
    np.testing.assert_array_equal(T.num_children(parent), ref["num_children"])
    np.testing.assert_array_equal(T.subtree_size(parent), ref["subtree_size"])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("keep", ["top", "bottom"])
@pytest.mark.parametrize("max_depth,max_width", [(1, 1), (3, 2), (8, 4), (64, 64)])
def test_root_path_matches_naive(seed, keep, max_depth, max_width):
    parent = random_preorder_forest(np.random.default_rng(100 + seed), 300, 2, 0.4)
    ref = naive(parent)
    path, flag = T.root_path(parent, max_depth, max_width, keep=keep)
    want, want_flag = naive_root_path(ref["paths"], max_depth, max_width, keep)
    np.testing.assert_array_equal(path, want)
    np.testing.assert_array_equal(flag, want_flag)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("roots", [1, 3])
def test_tree_distance_matches_networkx(seed, roots):
    parent = random_preorder_forest(np.random.default_rng(7 + seed), 120, roots, 0.5)
    g = nx.Graph()
    g.add_nodes_from(range(len(parent)))
    g.add_edges_from((int(p), i) for i, p in enumerate(parent) if p >= 0)
    sp = dict(nx.all_pairs_shortest_path_length(g))
    n = len(parent)
    want = np.array([[sp[u].get(v, -1) for v in range(n)] for u in range(n)])
    np.testing.assert_array_equal(T.tree_distance(parent), want)
    # a subset, in arbitrary order with a repeat, and a tiny chunk to exercise chunking
    nodes = np.random.default_rng(seed).choice(n, 25)
    np.testing.assert_array_equal(T.tree_distance(parent, nodes, chunk=40), want[np.ix_(nodes, nodes)])


def test_lca_matches_networkx():
    parent = random_preorder_forest(np.random.default_rng(3), 200, 1, 0.5)
    g = nx.DiGraph((int(p), i) for i, p in enumerate(parent) if p >= 0)
    rng = np.random.default_rng(4)
    u, v = rng.integers(0, 200, 300), rng.integers(0, 200, 300)
    want = [nx.lowest_common_ancestor(g, int(a), int(b)) for a, b in zip(u, v)]
    np.testing.assert_array_equal(T.lca(parent, u, v), want)


def test_deep_chain_100k():
    n = 100_000
    parent = np.arange(-1, n - 1)
    np.testing.assert_array_equal(T.depth(parent), np.arange(n))
    np.testing.assert_array_equal(T.sibling_index(parent), np.zeros(n))
    np.testing.assert_array_equal(T.subtree_size(parent), n - np.arange(n))
    path, flag = T.root_path(parent, 32, 64)
    np.testing.assert_array_equal(flag, np.arange(n) > 32)
    assert (path[40] == 0).all() and (path[5, 5:] == -1).all() and (path[5, :5] == 0).all()
    nodes = np.array([0, 1, 50_000, n - 1])
    np.testing.assert_array_equal(T.tree_distance(parent, nodes), np.abs(nodes[:, None] - nodes[None, :]))


def test_deep_chain_with_side_branches():
    # chain of 50k where every node also has a leaf child after its chain child
    n_chain = 50_000
    parent = np.empty(2 * n_chain, dtype=np.int64)
    chain = np.arange(n_chain)  # chain node k at index k; leaves after the chain in reverse order
    parent[:n_chain] = chain - 1
    # leaf of chain node k sits after the whole subtree of chain node k+1: index 2*n_chain-1-k
    parent[2 * n_chain - 1 - chain] = chain
    sizes = T.subtree_size(parent)
    np.testing.assert_array_equal(sizes[:n_chain], 2 * (n_chain - chain))
    # every leaf follows its node's chain child, except the last chain node's (its only child)
    np.testing.assert_array_equal(T.sibling_index(parent)[n_chain:], np.r_[0, np.ones(n_chain - 1)])
    np.testing.assert_array_equal(T.depth(parent)[2 * n_chain - 1 - chain], chain + 1)


def test_forest_of_roots_and_empty():
    parent = np.array([-1, -1, 1, -1, 3, 3])
    np.testing.assert_array_equal(T.sibling_index(parent), [0, 1, 0, 2, 0, 1])
    np.testing.assert_array_equal(T.subtree_size(parent), [1, 2, 1, 3, 1, 1])
    d = T.tree_distance(parent)
    assert d[0, 1] == -1 and d[4, 5] == 2 and d[3, 5] == 1 and d[2, 2] == 0
    empty = np.zeros(0, dtype=np.int64)
    for fn in (T.depth, T.sibling_index, T.num_children, T.subtree_size):
        assert fn(empty).shape == (0,)
    assert T.root_path(empty)[0].shape == (0, 32)
    assert T.tree_distance(empty).shape == (0, 0)


@pytest.mark.parametrize(
    "parent,where",
    [([-1, 1], "node 1"), ([-1, 0, 5], "node 2"), ([-1, -2], "node 1"), ([-1, 0, 0, 1], "node 3")],
)
def test_bad_parent_arrays_raise(parent, where):
    with pytest.raises(StructureError, match=where):
        T.subtree_size(np.array(parent))


def test_tree_distance_bad_nodes():
    with pytest.raises(StructureError, match="out of range"):
        T.tree_distance(np.array([-1, 0]), [0, 2])


def test_tree_coords_family_and_spec():
    parent = random_preorder_forest(np.random.default_rng(11), 150, 1, 0.3)
    s = Structure(kind="tree", labels=["x"] * len(parent), parent=parent, name="rand")
    out = compute(s, "tree:4x3")
    ref = naive(parent)
    assert set(out) == {"depth", "sibling", "parent", "num_children", "subtree_size", "root_path", "root_path_overflow"}
    assert out["root_path"].shape == (150, 4)
    want, flag = naive_root_path(ref["paths"], 4, 3, "top")
    np.testing.assert_array_equal(out["root_path"], want)
    np.testing.assert_array_equal(out["root_path_overflow"], flag)
    for key in ("depth", "sibling", "num_children", "subtree_size"):
        np.testing.assert_array_equal(out[key], ref[key], err_msg=key)
    np.testing.assert_array_equal(out["parent"], parent)
    assert compute(s, "tree")["root_path"].shape == (150, T.DEFAULT_MAX_DEPTH)
    assert compute(s, "tree:8")["root_path"].shape == (150, 8)
    with pytest.raises(ValueError, match="tree:32x64"):
        compute(s, "tree:axb")
    with pytest.raises(StructureError, match="rand"):
        T.tree_coords(Structure(kind="graph", labels=["a"], name="rand"))


def is_preorder_by_dfs(parent) -> bool:
    kids: dict[int, list[int]] = {}
    for i, p in enumerate(parent):
        kids.setdefault(int(p), []).append(i)
    order, stack = [], list(reversed(kids.get(-1, [])))
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(kids.get(v, [])))
    return order == list(range(len(parent)))


def test_preorder_check_is_exact_on_all_small_forests():
    import itertools

    seen = 0
    for n in range(1, 7):
        for parent in itertools.product(*[range(-1, i) for i in range(n)]):
            want = is_preorder_by_dfs(parent)
            try:
                T.subtree_size(np.array(parent))
                got = True
            except StructureError:
                got = False
            assert got == want, parent
            seen += want
    assert seen == sum([1, 2, 5, 14, 42, 132])  # forests on n nodes: Catalan numbers


def test_root_path_keep_bottom_on_chain_with_branches():
    # chain 0-1-...-9; node 10 is a second child of node 9's parent (8)
    parent = np.r_[np.arange(-1, 9), 8]
    path, flag = T.root_path(parent, 3, 1, keep="bottom")
    np.testing.assert_array_equal(path[9], [0, 0, 0])
    np.testing.assert_array_equal(path[10], [0, 0, 0])  # child index 1 clipped to width 1
    assert flag[10] and flag[9] and not flag[3] and flag[4]
    path, _ = T.root_path(parent, 3, 4, keep="bottom")
    np.testing.assert_array_equal(path[10], [0, 0, 1])
