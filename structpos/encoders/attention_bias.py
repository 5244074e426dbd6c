"""Attention biases from structural distances: tree distance, shortest-path distance (SPD).

* :func:`tree_distance` — number of edges between two nodes of a tree,
  ``d(i, j) = depth_i + depth_j − 2·depth(lca(i, j))``
  (:func:`structpos.coords.tree.tree_distance`: LCA by range-minimum over the preorder).
* :func:`shortest_path_distance` — unweighted all-pairs BFS distances (Graphormer's SPD),
  from :func:`structpos.coords.distance.hop_distances`.

Unreachable pairs (different trees of a forest, different components) are ``-1``. A distance
matrix becomes a bias added to attention logits by :class:`SPDBias` (one learned scalar per
head and distance bucket, Graphormer) or :func:`alibi_distance_bias` (``−slope_h · d``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..coords import tree as _tree_coords
from ..coords._graph_utils import as_graph
from ..coords.distance import hop_distances as _coords_spd
from ..exceptions import ShapeError, SpecError
from ..structure import Structure
from ._checks import check_count, check_table_size, is_compiling
from ._tree import as_parent

__all__ = ["tree_distance", "shortest_path_distance", "SPDBias", "alibi_slopes", "alibi_distance_bias"]


def tree_distance(tree) -> np.ndarray:
    """All-pairs tree distances ``d(i, j) = depth_i + depth_j − 2·depth(lca(i, j))``.

    Parameters
    ----------
    tree : Structure or array_like of int
        A tree :class:`~structpos.Structure` or a preorder parent array (``-1`` for roots).

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` int64 edge counts; ``-1`` between different trees of a forest.

    Raises
    ------
    StructureError
        ``tree`` is not a preorder parent array, or a structure without one.

    Examples
    --------
    Root 0 with children 1 and 3, node 2 under node 1: the path 2 → 1 → 0 → 3 has 3 edges.

    >>> tree_distance([-1, 0, 1, 0]).tolist()
    [[0, 1, 2, 1], [1, 0, 1, 2], [2, 1, 0, 3], [1, 2, 3, 0]]
    >>> tree_distance([-1, 0, -1]).tolist()  # a forest: node 2 is another root
    [[0, 1, -1], [1, 0, -1], [-1, -1, 0]]
    """
    parent, _ = as_parent(tree)
    return _tree_coords.tree_distance(parent)


def shortest_path_distance(
    graph, num_nodes: int | None = None, directed: bool = False, max_distance: int | None = None
) -> np.ndarray:
    """All-pairs hop distances (Graphormer's SPD) of a graph or tree.

    A thin wrapper over :func:`structpos.coords.distance.hop_distances` that keeps
    this module's conventions: the result is always numpy, ``num_nodes`` defaults to
    ``max(edge_index) + 1``, and a Structure with an edge list uses its own ``directed``.

    Parameters
    ----------
    graph : Structure or array_like or torch.Tensor
        A :class:`~structpos.Structure` (its edges; a tree gives parent–child edges) or an
        edge index ``(2, E)``.
    num_nodes : int, optional
        Node count (default: the structure's, or ``max(edge_index) + 1``).
    directed : bool
        Follow edges only in their direction (ignored for a Structure with an edge list,
        which uses its own ``directed``).
    max_distance : int, optional
        Cap of the breadth-first search: farther pairs count as unreachable.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` int64 hop counts; ``-1`` for unreachable pairs.

    Raises
    ------
    StructureError
        An edge names a node outside ``0..num_nodes-1``.
    SpecError
        ``max_distance`` is negative or not an integer.

    Examples
    --------
    A star with centre 0: leaves are two hops apart, or unreachable with ``max_distance=1``.

    >>> star = torch.tensor([[0, 0, 0], [1, 2, 3]])
    >>> shortest_path_distance(star).tolist()
    [[0, 1, 1, 1], [1, 0, 2, 2], [1, 2, 0, 2], [1, 2, 2, 0]]
    >>> shortest_path_distance(star, max_distance=1)[1].tolist()
    [1, 0, -1, -1]
    """
    if isinstance(graph, Structure):
        ei, ew = graph.edges()
        directed = graph.directed if graph.edge_index is not None else directed
        g = as_graph(ei, graph.num_nodes if num_nodes is None else num_nodes, ew, name=graph.name)
    else:
        ei = graph.detach().cpu().numpy() if isinstance(graph, torch.Tensor) else np.asarray(graph)
        if num_nodes is None:
            num_nodes = int(ei.max()) + 1 if ei.size else 0
        g = as_graph(ei, num_nodes, name="<edge_index>")
    if max_distance is not None:
        max_distance = check_count(max_distance, "max_distance", minimum=0, maximum=None)
    return _coords_spd(g, max_dist=max_distance, directed=directed)


class SPDBias(nn.Module):
    """Learned attention bias per head and distance: ``b[h, i, j] = E[bucket(d_ij), h]``.

    Buckets: ``0..max_distance`` (larger distances clip to ``max_distance``) and one extra
    bucket for unreachable pairs (``d < 0``). The table ``E`` (``self.table``) starts at zero.

    Parameters
    ----------
    num_heads : int
        Attention heads ``H`` (one bias column each).
    max_distance : int
        Largest distance with its own bucket.

    Notes
    -----
    ``forward(dist)`` maps ``(…, N, N)`` integer distances to a ``(…, H, N, N)`` float bias.

    Examples
    --------
    Fill the table with ``E[bucket, h] = 2·bucket + h``: distance 3 clips to bucket 2,
    unreachable (``-1``) goes to bucket 3.

    >>> bias = SPDBias(num_heads=2, max_distance=2)
    >>> with torch.no_grad():
    ...     _ = bias.table.weight.copy_(torch.arange(8.0).view(4, 2))
    >>> bias(torch.tensor([[0, 3], [-1, 1]])).tolist()
    [[[0.0, 4.0], [6.0, 2.0]], [[1.0, 5.0], [7.0, 3.0]]]
    """

    def __init__(self, num_heads: int, max_distance: int = 16):
        super().__init__()
        self.num_heads = check_count(num_heads, "num_heads")
        self.max_distance = check_count(max_distance, "max_distance", minimum=0)
        check_table_size("SPDBias table (max_distance + 2) × num_heads", self.max_distance + 2, self.num_heads)
        self.table = nn.Embedding(self.max_distance + 2, self.num_heads)
        nn.init.zeros_(self.table.weight)

    def forward(self, dist) -> torch.Tensor:
        """Bias ``(…, H, N, N)`` of integer distances ``(…, N, N)``; anything else (floating, bool,
        complex or non-numeric distances, fewer than 2 dimensions) raises ShapeError."""
        d = _as_distances(dist, "SPDBias", self.table.weight.device)
        if d.is_floating_point() or d.dtype == torch.bool:
            raise ShapeError(f"SPDBias expects integer distances, given {d.dtype}")
        bucket = torch.where(d < 0, torch.full_like(d, self.max_distance + 1), d.clamp(max=self.max_distance))
        return self.table(bucket).movedim(-1, -3)


def _as_distances(dist, who: str, device=None) -> torch.Tensor:
    """``dist`` as a real tensor of at least 2 dimensions ``(…, N, N)``, else :class:`ShapeError`."""
    try:
        d = torch.as_tensor(dist, device=device)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ShapeError(f"{who} expects a numeric (…, N, N) distance tensor ({e})") from None
    if d.ndim < 2 or d.is_complex():
        raise ShapeError(f"{who} expects real (…, N, N) distances, given {d.dtype} {tuple(d.shape)}")
    return d


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi head slopes ``2^{−8h/n}`` (``h = 1..n``).

    For ``n`` not a power of two, the slopes of the largest power of two ``m < n`` followed by
    every other slope of ``2m`` (the interpolation of the ALiBi reference code).

    Parameters
    ----------
    num_heads : int
        ``n ≥ 1``.

    Returns
    -------
    torch.Tensor
        ``(n,)`` float32 slopes.

    Raises
    ------
    SpecError
        ``num_heads`` not an integer ``≥ 1``.

    Examples
    --------
    >>> alibi_slopes(8).tolist() == [2.0**-h for h in range(1, 9)]
    True
    >>> alibi_slopes(3).tolist()  # slopes of 2 heads, then the first of 4 heads' every other
    [0.0625, 0.00390625, 0.25]
    """

    def pow2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    num_heads = check_count(num_heads, "num_heads")
    if math.log2(num_heads).is_integer():
        return torch.tensor(pow2(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(pow2(closest) + pow2(2 * closest)[0::2][: num_heads - closest])


def alibi_distance_bias(dist, num_heads: int, unreachable: float = float("-inf"), dtype=torch.float32) -> torch.Tensor:
    """ALiBi-style bias on structural distances: ``b[h, i, j] = −slope_h · d_ij``.

    Parameters
    ----------
    dist : array_like or torch.Tensor
        ``(…, N, N)`` distances, negative for unreachable pairs.
    num_heads : int
        Heads ``H`` (slopes from :func:`alibi_slopes`).
    unreachable : float
        Bias where ``d < 0`` (``-inf`` masks the pair).
    dtype : torch.dtype
        Output dtype.

    Returns
    -------
    torch.Tensor
        ``(…, H, N, N)`` bias.

    Raises
    ------
    SpecError
        ``num_heads`` not an integer ``≥ 1``, or ``dtype`` not a floating torch dtype (an integer
        one would round every slope to 0).
    ShapeError
        ``dist`` not a real tensor of at least 2 dimensions, or holding NaN.

    Examples
    --------
    With two heads the slopes are ``2^-4`` and ``2^-8``; a distance of 2 costs ``2·2^-4``:

    >>> b = alibi_distance_bias(torch.tensor([[0, 2], [-1, 0]]), num_heads=2)
    >>> b.shape, b[0, 0, 1].item(), b[1, 0, 1].item()
    (torch.Size([2, 2, 2]), -0.125, -0.0078125)
    >>> b[:, 1, 0].tolist()
    [-inf, -inf]
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise SpecError(f"alibi_distance_bias: dtype must be a floating torch dtype, got {dtype!r}")
    d = _as_distances(dist, "alibi_distance_bias")
    if d.is_floating_point() and not is_compiling() and bool(torch.isnan(d).any()):
        bad = torch.nonzero(torch.isnan(d))[0].tolist()
        raise ShapeError(f"alibi_distance_bias: distance at index {bad} is NaN (use a negative value for unreachable)")
    slopes = alibi_slopes(num_heads).to(device=d.device, dtype=dtype)
    shape = (num_heads,) + (1, 1)
    bias = -slopes.view(shape) * d.unsqueeze(-3).to(dtype)
    return torch.where(d.unsqueeze(-3) < 0, torch.full_like(bias, unreachable), bias)
