"""Small vectorized tree helpers shared by the additive encodings and attention biases.

Trees are parent arrays in the IR's convention: ``parent[i] < i`` (``-1`` for roots), children
in sibling order by index.
"""

from __future__ import annotations

import numpy as np

from ..structure import Structure, StructureError

__all__ = ["as_parent", "tree_depth", "sibling_index", "ancestor_matrix", "ancestors_upto"]


def as_parent(tree) -> tuple[np.ndarray, str]:
    """Parent array (int64) and a name for messages, from a :class:`Structure` or an array."""
    name = "<parent array>"
    if isinstance(tree, Structure):
        if tree.parent is None:
            raise StructureError("not a tree (no parent array)", name=tree.name)
        name = tree.name
        tree = tree.parent
    parent = np.asarray(tree)
    if parent.ndim != 1 or (parent.size and not np.issubdtype(parent.dtype, np.integer)):
        raise StructureError(f"parent must be a 1-D integer array, got shape {parent.shape} {parent.dtype}", name=name)
    parent = parent.astype(np.int64)
    bad = np.flatnonzero((parent >= np.arange(parent.size)) | (parent < -1))
    if bad.size:
        i = int(bad[0])
        raise StructureError(f"parent[{i}] = {parent[i]} breaks preorder (need -1 <= parent < child)", name=name, position=f"node {i}")
    return parent, name


def tree_depth(parent: np.ndarray) -> np.ndarray:
    """Depth of every node (roots 0), by pointer chasing: ``O(N · max depth)`` vectorized."""
    depth = np.zeros(parent.size, dtype=np.int64)
    cur = parent.copy()
    while True:
        live = cur >= 0
        if not live.any():
            return depth
        depth += live
        cur = np.where(live, parent[np.maximum(cur, 0)], -1)


def sibling_index(parent: np.ndarray) -> np.ndarray:
    """0-based position of every node among the children of its parent (roots: among roots)."""
    n = parent.size
    order = np.argsort(parent, kind="stable")
    sp = parent[order]
    first = np.ones(n, dtype=bool)
    first[1:] = sp[1:] != sp[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) - group_start
    return out


def ancestors_upto(parent: np.ndarray, levels: int) -> np.ndarray:
    """``anc[i, l]`` = the ancestor ``l`` steps above ``i`` (``anc[:, 0] = i``), ``-1`` above the root."""
    n = parent.size
    anc = np.full((n, levels), -1, dtype=np.int64)
    cur = np.arange(n)
    for lv in range(levels):
        anc[:, lv] = cur
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
    return anc


def ancestor_matrix(parent: np.ndarray, depth: np.ndarray | None = None) -> np.ndarray:
    """``M[i, a]`` True when ``a`` is ``i`` or an ancestor of ``i`` (filled level by level)."""
    n = parent.size
    depth = tree_depth(parent) if depth is None else depth
    m = np.zeros((n, n), dtype=bool)
    idx = np.arange(n)
    m[idx, idx] = True
    for d in range(1, int(depth.max(initial=0)) + 1):
        nodes = np.flatnonzero(depth == d)
        m[nodes] |= m[parent[nodes]]
    return m
