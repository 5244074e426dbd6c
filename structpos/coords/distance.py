r"""Pairwise graph distances for attention biases: shortest-path (hop) distance and
resistance distance.

* **Shortest-path distance** (SPD, Graphormer): ``SPD[i, j]`` = the number of edges on a
  shortest path ``i → j`` (edge weights ignored), found by breadth-first search from every
  node (scipy's C implementation, ``O(N·(N + E))``), stopped at ``max_dist`` hops. Pairs further
  apart than ``max_dist``, or unreachable, get ``unreachable`` (default ``-1``).
  ``directed=False`` (default) follows edges both ways.
* **Resistance distance** (effective resistance with edge weights as conductances): with the
  combinatorial Laplacian ``L = D − A_s`` of the symmetrised graph and ``L⁺`` its pseudo-inverse,
  ``R_ij = L⁺_ii + L⁺_jj − 2 L⁺_ij = Σ_{λ_k > 0} (u_k(i) − u_k(j))² / λ_k``.
  Computed per connected component as ``L⁺ = (L_C + J/n)^{-1} − J/n``; pairs in different
  components get ``inf``. Dense ``O(n³)`` per component: graphs over ``max_nodes`` nodes raise.

Both return dense ``(N, N)`` matrices; the ``*_batch`` functions return a list, and
:func:`pad_pairwise` stacks a list into ``(B, N_max, N_max)`` with a validity mask.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra

from ..structure import Structure, StructureError
from ._graph_utils import edge_weights, adjacency, as_graph, output_like, to_output

__all__ = [
    "shortest_path_distance",
    "shortest_path_distance_batch",
    "resistance_distance",
    "resistance_distance_batch",
    "pad_pairwise",
    "spd_coords",
    "resistance_coords",
]

RESISTANCE_MAX_NODES = 20000


def shortest_path_distance(
    edge_index: Any,
    num_nodes: int | None = None,
    max_dist: int | None = None,
    *,
    directed: bool = False,
    unreachable: int = -1,
):
    """``(N, N)`` int64 hop distances, capped at ``max_dist`` (farther/unreachable → ``unreachable``;
    zero-weight edges are absent, other weights ignored)."""
    g = as_graph(edge_index, num_nodes)
    if max_dist is not None and (int(max_dist) != max_dist or max_dist < 0):
        raise ValueError(f"max_dist must be a non-negative integer or None, got {max_dist!r}")
    n = g.num_nodes
    present = edge_weights(g) > 0
    row, col = g.edge_index[:, present]
    A = sp.csr_matrix((np.ones(row.shape[0]), (row, col)), shape=(n, n))
    if n == 0:
        return to_output(np.zeros((0, 0), dtype=np.int64), output_like(edge_index))
    limit = np.inf if max_dist is None else float(max_dist)
    D = dijkstra(A, directed=directed, unweighted=True, limit=limit)
    out = np.where(np.isfinite(D), D, unreachable).astype(np.int64)
    return to_output(out, output_like(edge_index))


def resistance_distance(
    edge_index: Any,
    num_nodes: int | None = None,
    edge_weight: Any = None,
    *,
    max_nodes: int = RESISTANCE_MAX_NODES,
):
    """``(N, N)`` float64 effective resistances (``inf`` across components, 0 on the diagonal)."""
    g = as_graph(edge_index, num_nodes, edge_weight)
    n = g.num_nodes
    if n > max_nodes:
        raise StructureError(
            f"resistance distance is a dense N×N computation; {n} nodes exceeds max_nodes={max_nodes}",
            name=g.name,
        )
    A = adjacency(g)
    R = np.full((n, n), np.inf)
    np.fill_diagonal(R, 0.0)
    if n == 0:
        return to_output(R, output_like(edge_index))
    ncomp, labels = connected_components(A, directed=False)
    order = np.argsort(labels, kind="stable")
    for nodes in np.split(order, np.cumsum(np.bincount(labels, minlength=ncomp))[:-1]):
        s = len(nodes)
        if s < 2:
            continue
        Ac = A[nodes][:, nodes].toarray()
        Lc = np.diag(Ac.sum(1)) - Ac
        J = np.full((s, s), 1.0 / s)
        Lp = np.linalg.inv(Lc + J) - J
        d = np.diag(Lp)
        R[np.ix_(nodes, nodes)] = np.maximum(d[:, None] + d[None, :] - 2 * Lp, 0.0)
        R[nodes, nodes] = 0.0
    return to_output(R, output_like(edge_index))


def shortest_path_distance_batch(graphs: Sequence[Any], max_dist: int | None = None, *,
                                 directed: bool = False, unreachable: int = -1) -> list:
    """:func:`shortest_path_distance` of every graph (a list of ``(N_g, N_g)`` matrices)."""
    return [shortest_path_distance(g, max_dist=max_dist, directed=directed, unreachable=unreachable)
            for g in graphs]


def resistance_distance_batch(graphs: Sequence[Any], *, max_nodes: int = RESISTANCE_MAX_NODES) -> list:
    """:func:`resistance_distance` of every graph (a list of ``(N_g, N_g)`` matrices)."""
    return [resistance_distance(g, max_nodes=max_nodes) for g in graphs]


def pad_pairwise(mats: Sequence[Any], pad_value: float = 0.0):
    """Stack ``(N_g, N_g)`` matrices into ``(B, N_max, N_max)`` plus a bool mask of real pairs
    (torch when the inputs are torch)."""
    torch_in = bool(mats) and type(mats[0]).__module__.startswith("torch")
    arrs = [m.numpy() if torch_in else np.asarray(m) for m in mats]
    nmax = max((a.shape[0] for a in arrs), default=0)
    dtype = np.result_type(*arrs) if arrs else np.float64
    out = np.full((len(arrs), nmax, nmax), pad_value, dtype=dtype)
    mask = np.zeros((len(arrs), nmax, nmax), dtype=bool)
    for b, a in enumerate(arrs):
        n = a.shape[0]
        out[b, :n, :n] = a
        mask[b, :n, :n] = True
    if torch_in:
        import torch

        return torch.from_numpy(out), torch.from_numpy(mask)
    return out, mask


def spd_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``spd[:max_dist]``: ``spd (N, N)`` hop distances (-1 beyond/unreachable);
    undirected unless the structure is ``directed``."""
    max_dist = int(arg) if arg else None
    return {"spd": shortest_path_distance(as_graph(structure), max_dist=max_dist, directed=structure.directed)}


def resistance_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``resistance``: ``resistance (N, N)`` effective resistances."""
    return {"resistance": resistance_distance(as_graph(structure))}
