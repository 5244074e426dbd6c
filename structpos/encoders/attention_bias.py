"""Attention biases from structural distances: tree distance, shortest-path distance (SPD).

* :func:`tree_distance` — number of edges between two nodes of a tree,
  ``d(i, j) = depth_i + depth_j − 2·depth(lca(i, j))``; with ``M`` the ancestor-or-self
  indicator matrix, ``(M Mᵀ)_{ij} = depth(lca) + 1``, so the whole matrix is one product.
* :func:`shortest_path_distance` — unweighted all-pairs BFS distances (Graphormer's SPD),
  via ``scipy.sparse.csgraph``.

Unreachable pairs (different trees of a forest, different components) are ``-1``. A distance
matrix becomes a bias added to attention logits by :class:`SPDBias` (one learned scalar per
head and distance bucket, Graphormer) or :func:`alibi_distance_bias` (``−slope_h · d``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..structure import Structure, StructureError
from ._tree import ancestor_matrix, as_parent, tree_depth

__all__ = ["tree_distance", "shortest_path_distance", "SPDBias", "alibi_slopes", "alibi_distance_bias"]


def tree_distance(tree) -> np.ndarray:
    """``(N, N)`` int64 tree distances (``-1`` across trees of a forest)."""
    parent, _ = as_parent(tree)
    n = parent.size
    if n == 0:
        return np.zeros((0, 0), dtype=np.int64)
    depth = tree_depth(parent)
    m = ancestor_matrix(parent, depth).astype(np.float32)
    common = np.rint(m @ m.T).astype(np.int64)  # depth(lca) + 1, or 0 across trees
    dist = depth[:, None] + depth[None, :] - 2 * (common - 1)
    dist[common == 0] = -1
    return dist


def shortest_path_distance(graph, num_nodes: int | None = None, directed: bool = False, max_distance: int | None = None) -> np.ndarray:
    """``(N, N)`` int64 hop distances; ``graph`` is a :class:`Structure` or an edge index ``(2, E)``.

    ``max_distance`` caps the BFS (farther pairs count as unreachable, ``-1``).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    name = "<edge_index>"
    if isinstance(graph, Structure):
        name = graph.name
        ei, _ = graph.edges()
        num_nodes = graph.num_nodes if num_nodes is None else num_nodes
        directed = graph.directed if graph.edge_index is not None else directed
    else:
        ei = graph.detach().cpu().numpy() if isinstance(graph, torch.Tensor) else np.asarray(graph)
    ei = np.asarray(ei)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise StructureError(f"edge_index must have shape (2, E), got {ei.shape}", name=name)
    if num_nodes is None:
        num_nodes = int(ei.max()) + 1 if ei.size else 0
    if ei.size:
        bad = np.flatnonzero((ei < 0).any(0) | (ei >= num_nodes).any(0))
        if bad.size:
            e = int(bad[0])
            raise StructureError(f"edge {e} = {ei[:, e].tolist()} is outside 0..{num_nodes - 1}", name=name, position=f"edge {e}")
    adj = coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(num_nodes, num_nodes)).tocsr()
    dist = shortest_path(adj, directed=directed, unweighted=True)
    unreachable = ~np.isfinite(dist)
    if max_distance is not None:
        unreachable |= dist > max_distance
    out = np.where(unreachable, -1, dist).astype(np.int64)
    return out


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
