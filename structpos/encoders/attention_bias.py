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
from ..structure import Structure
from ._tree import as_parent

__all__ = ["tree_distance", "shortest_path_distance", "SPDBias", "alibi_slopes", "alibi_distance_bias"]


def tree_distance(tree) -> np.ndarray:
    """``(N, N)`` int64 tree distances (``-1`` across trees of a forest) of a preorder tree."""
    parent, _ = as_parent(tree)
    return _tree_coords.tree_distance(parent)


def shortest_path_distance(
    graph, num_nodes: int | None = None, directed: bool = False, max_distance: int | None = None
) -> np.ndarray:
    """``(N, N)`` int64 hop distances; ``graph`` is a :class:`Structure` or an edge index ``(2, E)``.

    A thin wrapper over :func:`structpos.coords.distance.hop_distances` that keeps
    this module's conventions: the result is always numpy, ``num_nodes`` defaults to
    ``max(edge_index) + 1``, and a Structure with an edge list uses its own ``directed``.
    ``max_distance`` caps the BFS (farther pairs count as unreachable, ``-1``).
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
    return _coords_spd(g, max_dist=max_distance, directed=directed)


class SPDBias(nn.Module):
    """Learned attention bias per head and distance: ``b[h, i, j] = E[bucket(d_ij), h]``.

    Buckets: ``0..max_distance`` (larger distances clip to ``max_distance``) and one extra
    bucket for unreachable pairs (``d < 0``). ``forward(dist)`` maps ``(…, N, N)`` integer
    distances to a ``(…, H, N, N)`` float bias.
    """

    def __init__(self, num_heads: int, max_distance: int = 16):
        super().__init__()
        self.num_heads, self.max_distance = int(num_heads), int(max_distance)
        self.table = nn.Embedding(self.max_distance + 2, self.num_heads)
        nn.init.zeros_(self.table.weight)

    def forward(self, dist) -> torch.Tensor:
        d = torch.as_tensor(dist, device=self.table.weight.device)
        if d.is_floating_point():
            raise ValueError("SPDBias expects integer distances")
        bucket = torch.where(d < 0, torch.full_like(d, self.max_distance + 1), d.clamp(max=self.max_distance))
        return self.table(bucket).movedim(-1, -3)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi head slopes ``2^{−8h/n}`` (h = 1..n), with the usual interpolation for non-powers of two."""

    def pow2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if num_heads <= 0:
        raise ValueError(f"num_heads must be ≥ 1, got {num_heads}")
    if math.log2(num_heads).is_integer():
        return torch.tensor(pow2(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(pow2(closest) + pow2(2 * closest)[0::2][: num_heads - closest])


def alibi_distance_bias(dist, num_heads: int, unreachable: float = float("-inf"), dtype=torch.float32) -> torch.Tensor:
    """``b[h, i, j] = −slope_h · d_ij`` (``(…, H, N, N)``), ``unreachable`` where ``d < 0``."""
    d = torch.as_tensor(dist)
    slopes = alibi_slopes(num_heads).to(device=d.device, dtype=dtype)
    shape = (num_heads,) + (1, 1)
    bias = -slopes.view(shape) * d.unsqueeze(-3).to(dtype)
    return torch.where(d.unsqueeze(-3) < 0, torch.full_like(bias, unreachable), bias)
