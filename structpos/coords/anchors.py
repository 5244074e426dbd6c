r"""Anchor distances (NT-LLM): pick ``k`` key nodes, describe every node by its hop distances to them.

**Anchor selection** is greedy ``k``-centre (farthest-point traversal, Gonzalez 1985) on the
hop (shortest-path) distance ``d`` of the undirected graph:

.. math::

    a_1 = \arg\max_v \deg(v), \qquad
    a_{j+1} = \arg\max_v \min_{i \le j} d(v, a_i),

with ties broken by the **lowest node index** (for ``a_1``: the lowest index among the nodes of
maximum degree). Unreachable pairs count as ``d = ∞``, so while some connected component has no
anchor, the next anchor is the lowest-index node of an uncovered component. Selection stops early
when every node is an anchor (``k > N``). The covering radius
``r(S) = max_v min_{a ∈ S} d(v, a)`` of the greedy set is at most twice the optimum over all
``k``-subsets (the classic 2-approximation; it holds with ``∞`` distances as soon as ``k`` is at
least the number of components).

**Anchor distances** of node ``v``: ``(d(v, a_1), …, d(v, a_k))`` — integer coordinates usable as
RoPE axes or additive features (NT-LLM, Ji et al. 2024).

Sentinel: an unreachable anchor (another component) and a missing anchor (fewer than ``k``
nodes) give ``unreachable`` (default ``-1``, as :func:`~structpos.coords.distance.hop_distances`);
``mask`` tells the missing anchors apart. Each anchor costs one breadth-first search
(:func:`~structpos.coords.distance.hop_distances` with ``sources``): ``O(k (N + E))`` in all.
Edge direction and weights are ignored (``k``-centre's bound needs a symmetric distance).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..structure import Structure
from ._args import MAX_K, check_int
from ._graph_utils import as_graph, edge_weights, output_like, to_output
from .distance import hop_distances

__all__ = ["AnchorPE", "kcenter_anchors", "anchor_distances", "covering_radius", "anchor_coords"]


class AnchorPE(NamedTuple):
    """Anchor nodes ``(k,)`` (``-1`` padded), distances ``(N, k)`` and the mask of real anchors ``(k,)``.

    Examples
    --------
    >>> AnchorPE(np.array([0, -1]), np.zeros((3, 2), int), np.array([True, False])).anchors.tolist()
    [0, -1]
    """

    anchors: Any
    distances: Any
    mask: Any


def _check_k(k: Any) -> int:
    return check_int(k, "k (number of anchors)", 1, MAX_K)


def kcenter_anchors(edge_index: Any, num_nodes: int | None = None, k: int = 8) -> AnchorPE:
    """Greedy ``k``-centre anchors and every node's hop distance to them (see the module docstring).

    Parameters
    ----------
    edge_index, num_nodes
        The graph (any input of :func:`._graph_utils.as_graph`); used undirected and unweighted.
    k : int
        Number of anchors.

    Returns
    -------
    AnchorPE
        ``anchors (k,)`` int64 in selection order (``-1`` when ``k > N``), ``distances (N, k)``
        int64 (``-1``: unreachable or missing anchor), ``mask (k,)`` bool. Torch in, torch out.

    Raises
    ------
    SpecError
        ``k`` below 1.

    Examples
    --------
    On the path ``0 - 1 - 2 - 3 - 4`` the first anchor is node 1 (degree 2, lowest index), the
    farthest node from it is 4, then nodes 0, 2 and 3 are all 1 from the nearest anchor and
    the lowest index, 0, wins:

    >>> ei = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    >>> r = kcenter_anchors(ei, 5, k=3)
    >>> r.anchors.tolist(), r.distances[2].tolist()
    ([1, 4, 0], [1, 2, 2])
    >>> kcenter_anchors(ei, 2 + 3, k=7).mask.tolist()
    [True, True, True, True, True, False, False]
    """
    k = _check_k(k)
    g = as_graph(edge_index, num_nodes)
    n = g.num_nodes
    anchors = np.full(k, -1, dtype=np.int64)
    dist = np.full((n, k), -1, dtype=np.int64)
    if n:
        present = (edge_weights(g) > 0) & (g.edge_index[0] != g.edge_index[1])
        row, col = g.edge_index[:, present]
        pairs = np.unique(np.concatenate([np.stack([row, col]), np.stack([col, row])], axis=1), axis=1)
        deg = np.bincount(pairs[0], minlength=n)
        nearest = np.full(n, np.inf)
        nxt = int(np.argmax(deg))  # argmax returns the first (lowest-index) maximum
        for j in range(min(k, n)):
            anchors[j] = nxt
            d = hop_distances(g, sources=[nxt])[0]
            dist[:, j] = d
            nearest = np.minimum(nearest, np.where(d >= 0, d, np.inf))
            nxt = int(np.argmax(nearest))
            if nearest[nxt] == 0:  # every node is an anchor
                break
    like = output_like(edge_index)
    return AnchorPE(to_output(anchors, like), to_output(dist, like), to_output(anchors >= 0, like))


def anchor_distances(edge_index: Any, num_nodes: int | None, anchors: Any, *, unreachable: int = -1) -> np.ndarray:
    """Hop distances ``(N, len(anchors))`` from every node to given anchors (e.g. chosen on another split).

    Parameters
    ----------
    edge_index, num_nodes
        The graph, used undirected.
    anchors : array_like of int
        Anchor nodes.
    unreachable : int
        Value for an anchor in another component.

    Returns
    -------
    numpy.ndarray
        ``(N, len(anchors))`` int64.

    Examples
    --------
    >>> ei = np.array([[0, 1], [1, 2]])
    >>> anchor_distances(ei, 4, [0, 2]).tolist()
    [[0, 2], [1, 1], [2, 0], [-1, -1]]
    """
    return hop_distances(as_graph(edge_index, num_nodes), sources=anchors, unreachable=unreachable).T


def covering_radius(distances: np.ndarray) -> float:
    """``max_v min_j d(v, a_j)`` of an anchor-distance matrix (``-1`` = unreachable = ``∞``).

    Parameters
    ----------
    distances : numpy.ndarray
        ``(N, k)`` distances with ``-1`` for unreachable or missing anchors.

    Returns
    -------
    float
        The covering radius (``inf`` when some node reaches no anchor, ``0`` for no nodes).

    Examples
    --------
    >>> covering_radius(np.array([[0, 2], [1, 1], [2, 0], [-1, -1]]))
    inf
    >>> covering_radius(np.array([[0, 2], [1, 1], [2, 0]]))
    1.0
    """
    d = np.where(np.asarray(distances) >= 0, np.asarray(distances, dtype=np.float64), np.inf)
    return float(d.min(axis=1).max()) if d.shape[0] else 0.0


def anchor_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``anchor[:k]`` (default 8): hop distances to ``k`` greedy ``k``-centre anchors.

    Parameters
    ----------
    structure : Structure
        A graph or tree (used undirected).
    arg : str, optional
        ``k`` as text.

    Returns
    -------
    dict
        ``{"anchor_dist": (N, k) int64, "anchor_node": (N, k) int64}``: the distances (``-1``
        unreachable or missing) and the anchors' node indices repeated per node (``-1`` missing).

    Examples
    --------
    ``[1, [2, 3]]`` is the tree ``0 → 1, 0 → 2, 2 → 3, 2 → 4``: the inner array (node 2, degree 3)
    is the first anchor, the leaf ``1`` (3 hops away) the second:

    >>> import structpos
    >>> c = anchor_coords(structpos.parse("[1, [2, 3]]", kind="json"), "2")
    >>> c["anchor_node"][0].tolist(), c["anchor_dist"].tolist()
    ([2, 1], [[1, 1], [2, 0], [0, 2], [1, 3], [1, 3]])
    """
    k = int(arg) if arg else 8
    r = kcenter_anchors(as_graph(structure), k=k)
    return {"anchor_dist": r.distances, "anchor_node": np.tile(r.anchors, (structure.num_nodes, 1))}
