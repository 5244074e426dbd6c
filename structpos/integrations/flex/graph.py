"""Graph shortest-path distance per score from a per-graph ``(G, N, N)`` table: O(N²) per graph, not O(L²).

Examples
--------
>>> spd = spd_tables([np.array([[0, 1], [1, 0]]), np.zeros((1, 1), dtype=int)])
>>> dist = spd_distance_fn(torch.tensor([[0, 0, 1]]), torch.tensor([[0, 1, 0]]), spd)
>>> i = torch.arange(3)
>>> dist(0, i[:, None], i[None, :]).tolist()   # tokens of different graphs are unreachable
[[0, 1, -1], [1, 0, -1], [-1, -1, 0]]
"""

from __future__ import annotations

import numpy as np
import torch

from ...exceptions import ShapeError
from ._common import DistanceFn, ScoreMod, _tokens
from .bias import distance_score_mod


def spd_tables(distances: list) -> torch.Tensor:
    """Stack per-graph ``(N_g, N_g)`` distance matrices into one ``(G, N, N)`` int64 table padded with ``-1``.

    Parameters
    ----------
    distances : list of array-like
        One square integer distance matrix per graph (``-1``: unreachable).

    Returns
    -------
    torch.Tensor
        ``(G, N, N)`` int64, ``N`` the largest graph; padding is ``-1`` (unreachable).

    Raises
    ------
    ShapeError
        No graphs, or a matrix that is not square (naming the graph).

    Examples
    --------
    >>> spd_tables([np.array([[0, 1], [1, 0]]), np.zeros((1, 1), dtype=int)]).tolist()
    [[[0, 1], [1, 0]], [[0, -1], [-1, -1]]]
    >>> spd_tables([np.zeros((2, 3))])
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: graph 0: distance matrix must be square (N, N); given (2, 3)
    """
    if not distances:
        raise ShapeError("spd_tables: no graphs given")
    mats = [torch.as_tensor(np.asarray(d), dtype=torch.int64) for d in distances]
    for g, m in enumerate(mats):
        if m.dim() != 2 or m.shape[0] != m.shape[1]:
            raise ShapeError(f"graph {g}: distance matrix must be square (N, N); given {tuple(m.shape)}")
    n = max(m.shape[0] for m in mats)
    out = torch.full((len(mats), n, n), -1, dtype=torch.int64)
    for g, m in enumerate(mats):
        out[g, : m.shape[0], : m.shape[0]] = m
    return out


def spd_score_mod(
    graph_id: torch.Tensor,
    node: torch.Tensor,
    spd: torch.Tensor,
    *,
    slopes: torch.Tensor | None = None,
    table: torch.Tensor | None = None,
    unreachable: float = float("-inf"),
) -> ScoreMod:
    """``score + bias(SPD(q, kv), h)`` with distances read from a per-graph ``(G, N, N)`` table.

    Parameters
    ----------
    graph_id, node : torch.Tensor
        ``(B, L)``: which graph of ``spd`` each token belongs to and its node there (``-1``: none).
        Several graphs may be packed in one row; tokens of different graphs are unreachable.
    spd : torch.Tensor
        ``(G, N, N)`` int distances, ``-1`` unreachable (:func:`spd_tables`).
    slopes, table, unreachable
        See :func:`distance_to_bias`.

    Returns
    -------
    callable
        ``score_mod(score, b, h, q_idx, kv_idx)``: one table lookup per score.

    Raises
    ------
    ShapeError
        ``graph_id``/``node`` not integer ``(B, L)`` of one shape, ``spd`` not an integer
        ``(G, N, N)`` table, bad ``slopes``/``table``.

    Examples
    --------
    >>> spd = spd_tables([np.array([[0, 1], [1, 0]])])
    >>> mod = spd_score_mod(torch.zeros(1, 2), torch.tensor([[0, 1]]), spd, slopes=torch.ones(1))
    >>> float(mod(torch.tensor(0.0), torch.tensor(0), torch.tensor(0), torch.tensor(0), torch.tensor(1)))
    -1.0
    """
    return distance_score_mod(spd_distance_fn(graph_id, node, spd), slopes=slopes, table=table, unreachable=unreachable)


def spd_distance_fn(graph_id, node, spd) -> DistanceFn:
    """``d(b, q_idx, kv_idx)``: shortest-path distance read from a ``(G, N, N)`` table, ``-1`` if unreachable.

    The distance part of :func:`spd_score_mod` (same inputs and checks).

    Parameters
    ----------
    graph_id, node, spd
        See :func:`spd_score_mod`.

    Returns
    -------
    callable
        ``dist(b, q_idx, kv_idx)`` → int64 distance (one table lookup).

    Raises
    ------
    ShapeError
        As :func:`spd_score_mod`.

    Examples
    --------
    >>> spd = spd_tables([np.array([[0, 1], [1, 0]])])
    >>> dist = spd_distance_fn(torch.zeros(1, 3), torch.tensor([[0, 1, -1]]), spd)
    >>> i = torch.arange(3)
    >>> dist(0, i[:, None], i[None, :]).tolist()
    [[0, 1, -1], [1, 0, -1], [-1, -1, -1]]
    """
    gid = _tokens(
        graph_id if not torch.is_tensor(graph_id) or not graph_id.is_floating_point() else graph_id.to(torch.int64),
        "graph_id",
        2,
    )
    nid = _tokens(node, "node", 2)
    if gid.shape != nid.shape:
        raise ShapeError(f"graph_id and node must both be (B, L); given {tuple(gid.shape)} and {tuple(nid.shape)}")
    spd = torch.as_tensor(spd)
    if spd.dim() != 3 or spd.shape[1] != spd.shape[2] or spd.is_floating_point():
        raise ShapeError(f"spd must be an integer (G, N, N) table; given {spd.dtype} {tuple(spd.shape)}")
    spd = spd.to(torch.int64).contiguous()

    def dist(b, q_idx, kv_idx):
        gq, gk, nq, nk = gid[b, q_idx], gid[b, kv_idx], nid[b, q_idx], nid[b, kv_idx]
        ok = (gq == gk) & (gq >= 0) & (nq >= 0) & (nk >= 0)
        d = spd[gq.clamp(min=0), nq.clamp(min=0), nk.clamp(min=0)]
        return torch.where(ok, d, torch.full_like(d, -1))

    return dist
