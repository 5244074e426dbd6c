"""Node positions for drawing a :class:`~structpos.Structure` (no graphviz needed).

* :func:`tree_layout` — a layered tidy layout: leaves take consecutive x slots in preorder,
  a parent sits midway between its first and last child, ``y = -depth``.
* :func:`grid_layout` — table cells at ``(col, -row)`` from the ``row``/``col`` attributes.
* :func:`graph_layout` — classical multidimensional scaling of the hop-distance matrix
  (``B = -½ J D² J``, coordinates = top-2 eigenvectors of ``B`` scaled by ``√λ``), which is
  deterministic (up to a fixed sign convention) and places nodes so that Euclidean distance
  approximates shortest-path distance. Disconnected components are laid out side by side.
  (networkx has no classical MDS: its force-directed and Kamada-Kawai layouts are iterative
  and only approximate the distances; MDS reproduces a path's distances exactly.)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..coords.tree import check_parent
from ..coords.tree import depth as tree_depth  # re-exported: depth of every node of a forest
from ..node_attrs import has_table_cells, table_cells
from ..structure import Structure, StructureError

__all__ = ["tree_depth", "tree_layout", "grid_layout", "graph_layout", "layout"]


def _check_tree(s: Structure) -> np.ndarray:
    if s.parent is None:
        raise StructureError("tree layout needs a tree (parent array)", name=s.name)
    return check_parent(s.parent, name=s.name)


def tree_layout(s: Structure) -> np.ndarray:
    """``(N, 2)`` positions: ``x`` from a leaf-order tidy layout, ``y = -depth``.

    Parameters
    ----------
    s : Structure
        A tree in preorder.

    Returns
    -------
    numpy.ndarray
        ``(N, 2)`` float ``(x, y)`` per node; a parent sits midway over its children.

    Raises
    ------
    StructureError
        If ``s`` is not a preorder tree.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> tree_layout(s).tolist()  # leaves 1, 3, 4 at x = 0, 1, 2; parents midway
    [[0.75, -0.0], [0.0, -1.0], [1.5, -1.0], [1.0, -2.0], [2.0, -2.0]]
    """
    parent = _check_tree(s)
    n = len(parent)
    if n == 0:
        return np.zeros((0, 2))
    depth = tree_depth(parent)
    has_child = np.zeros(n, dtype=bool)
    has_child[parent[parent >= 0]] = True
    x = np.full(n, np.nan)
    leaves = np.flatnonzero(~has_child)
    x[leaves] = np.arange(len(leaves), dtype=float)
    # children come after parents in preorder: one reverse sweep sees all children first
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    for i in range(n - 1, -1, -1):
        if has_child[i]:
            x[i] = 0.5 * (lo[i] + hi[i])
        p = parent[i]
        if p >= 0:
            if x[i] < lo[p]:
                lo[p] = x[i]
            if x[i] > hi[p]:
                hi[p] = x[i]
    return np.stack([x, -depth.astype(float)], axis=1)


def grid_layout(s: Structure) -> np.ndarray:
    """``(N, 2)`` cell centres ``(col + (colspan-1)/2, -(row + (rowspan-1)/2))``; NaN for non-cells.

    Parameters
    ----------
    s : Structure
        A table (``row``/``col`` attributes).

    Returns
    -------
    numpy.ndarray
        ``(N, 2)`` float ``(x, y)`` per node; rows go down (``y <= 0``).

    Raises
    ------
    StructureError
        Without ``row``/``col`` attributes.

    Examples
    --------
    >>> import structpos
    >>> grid_layout(structpos.parse("a,b\\n1,2\\n", "table"))[2:4].tolist()
    [[0.0, -0.0], [1.0, -0.0]]
    """
    t = table_cells(s, needed_by="grid layout")
    row, col = t.row.astype(float), t.col.astype(float)
    rs, cs = t.rowspan.astype(float), t.colspan.astype(float)
    pos = np.stack([col + (np.maximum(cs, 1) - 1) / 2, -(row + (np.maximum(rs, 1) - 1) / 2)], axis=1)
    pos[(row < 0) | (col < 0)] = np.nan
    return pos


def hop_distance(s: Structure) -> np.ndarray:
    """Unweighted shortest-path (hop) distances over undirected edges.

    The ``spd`` coordinate family (:mod:`structpos.coords.distance`) on ``s`` read as undirected;
    tree edges are parent → child.

    Parameters
    ----------
    s : Structure
        A tree or graph (a structure without edges gives ``inf`` off the diagonal).

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` float distances, ``inf`` where unreachable.

    Raises
    ------
    StructureError
        If an edge refers to a node that does not exist.

    Examples
    --------
    >>> import numpy as np
    >>> s = Structure("graph", list("abcd"), edge_index=np.array([[0, 1], [1, 2]]), directed=True)
    >>> hop_distance(s)[0].tolist()
    [0.0, 1.0, 2.0, inf]
    """
    from ..coords import compute

    undirected = dataclasses.replace(s, directed=False) if s.directed else s
    d = compute(undirected, "spd")["spd"].astype(float)
    d[d < 0] = np.inf
    return d


def _mds(d: np.ndarray) -> np.ndarray:
    n = len(d)
    if n == 1:
        return np.zeros((1, 2))
    d2 = d**2
    j = np.eye(n) - 1.0 / n
    b = -0.5 * j @ d2 @ j
    w, v = np.linalg.eigh(b)
    order = np.argsort(w)[::-1][:2]
    xy = v[:, order] * np.sqrt(np.maximum(w[order], 0))
    if xy.shape[1] < 2:
        xy = np.concatenate([xy, np.zeros((n, 2 - xy.shape[1]))], axis=1)
    # sign convention: node 0 of the component on the non-negative side of each axis
    xy *= np.where(xy[0] < 0, -1.0, 1.0)
    return xy


def graph_layout(s: Structure, distance: np.ndarray | None = None) -> np.ndarray:
    """``(N, 2)`` classical-MDS positions from hop distances, components side by side.

    Parameters
    ----------
    s : Structure
        A graph (or tree).
    distance : numpy.ndarray, optional
        ``(N, N)`` distances (default :func:`hop_distance`).

    Returns
    -------
    numpy.ndarray
        ``(N, 2)`` float.

    Examples
    --------
    >>> import numpy as np
    >>> s = Structure("graph", list("abc"), edge_index=np.array([[0, 1], [1, 2]]))
    >>> xy = graph_layout(s)
    >>> np.round(np.linalg.norm(xy[0] - xy[2]), 6)
    np.float64(2.0)
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = s.num_nodes
    if n == 0:
        return np.zeros((0, 2))
    d = hop_distance(s) if distance is None else distance
    ei, _ = s.edges()
    a = csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n))
    ncomp, comp = connected_components(a, directed=False)
    pos = np.zeros((n, 2))
    x_off = 0.0
    for c in range(ncomp):
        idx = np.flatnonzero(comp == c)
        xy = _mds(d[np.ix_(idx, idx)])
        xy[:, 0] -= xy[:, 0].min()
        xy[:, 1] -= xy[:, 1].mean()
        pos[idx] = xy + [x_off, 0.0]
        x_off += xy[:, 0].max() + 1.5
    return pos


def layout(s: Structure) -> tuple[str, np.ndarray]:
    """Pick the drawing style for ``s``: ``("tree"|"grid"|"graph", positions)``.

    Parameters
    ----------
    s : Structure

    Returns
    -------
    style : {"tree", "grid", "graph"}
    positions : numpy.ndarray
        ``(N, 2)``.

    Examples
    --------
    >>> import structpos
    >>> layout(structpos.parse("[1]", "json"))[0], layout(structpos.parse("a\\n1\\n", "table"))[0]
    ('tree', 'grid')
    """
    if s.parent is not None and s.kind != "table":
        return "tree", tree_layout(s)
    if has_table_cells(s):
        return "grid", grid_layout(s)
    if s.parent is not None:
        return "tree", tree_layout(s)
    return "graph", graph_layout(s)
