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

from ...exceptions import InputError, ShapeError
from ._common import DistanceFn, ScoreMod, _built_for, _id_bound, _token_sizes, _tokens
from .bias import distance_score_mod


def _spd_values(t: torch.Tensor, where: str) -> torch.Tensor:
    """Distances ``t`` as int64 after checking them: hop counts ``≥ 0``, ``-1`` unreachable; in a
    floating table ``+inf`` (SciPy's and NetworkX-to-NumPy's "no path") becomes ``-1``, and NaN,
    fractions, other negatives and ``-inf`` are refused (never truncated or wrapped)."""

    def at(mask: torch.Tensor) -> str:
        pos = tuple(int(i) for i in torch.nonzero(mask)[0])
        return f"{where}: distance at {pos} is {t[pos].item()}"

    if t.dtype == torch.bool or t.is_complex():
        raise ShapeError(f"{where}: distances must be integer hop counts; given {t.dtype}")
    if t.is_floating_point():
        t = t.to(torch.float64)
        if torch.isnan(t).any():
            raise ShapeError(f"{at(torch.isnan(t))}; mark unreachable pairs with -1 or inf")
        t = torch.where(t == float("inf"), -1.0, t)
    if (t < -1).any():
        raise ShapeError(f"{at(t < -1)}; distances are ≥ 0, and -1 (or inf) marks an unreachable pair")
    if t.is_floating_point():
        if (t != t.round()).any():
            raise ShapeError(f"{at(t != t.round())}, not a whole number of hops")
        if (t > 2**53).any():
            raise ShapeError(f"{at(t > 2**53)}: too large for an exact integer distance")
    return t.to(torch.int64)


def spd_tables(distances: list) -> torch.Tensor:
    """Stack per-graph ``(N_g, N_g)`` distance matrices into one ``(G, N, N)`` int64 table padded with ``-1``.

    Parameters
    ----------
    distances : list of array-like
        One square distance matrix per graph: whole hop counts ``≥ 0``, ``-1`` for an unreachable
        pair. A floating matrix may mark unreachable pairs with ``inf`` instead (as
        ``scipy.sparse.csgraph.shortest_path`` does); it becomes ``-1``.

    Returns
    -------
    torch.Tensor
        ``(G, N, N)`` int64, ``N`` the largest graph; unreachable pairs and padding are ``-1``.

    Raises
    ------
    ShapeError
        No graphs, a matrix that is not square or not numeric, or a distance that is NaN,
        fractional, ``-inf`` or negative other than ``-1`` (naming the graph and the entry).

    Examples
    --------
    >>> spd_tables([np.array([[0, 1], [1, 0]]), np.zeros((1, 1), dtype=int)]).tolist()
    [[[0, 1], [1, 0]], [[0, -1], [-1, -1]]]
    >>> spd_tables([np.array([[0.0, np.inf], [np.inf, 0.0]])]).tolist()   # inf: no path
    [[[0, -1], [-1, 0]]]
    >>> spd_tables([np.array([[0, 1.5], [1.5, 0]])])
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: graph 0: distance at (0, 1) is 1.5, not a whole number of hops
    >>> spd_tables([np.zeros((2, 3))])
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: graph 0: distance matrix must be square (N, N); given (2, 3)
    """
    try:
        distances = list(distances)
    except TypeError:
        raise InputError(
            f"spd_tables: distances must be a list of (N, N) matrices; given {type(distances).__name__}"
        ) from None
    if not distances:
        raise ShapeError("spd_tables: no graphs given")
    mats = []
    for g, d in enumerate(distances):
        try:
            m = d.detach().cpu() if torch.is_tensor(d) else torch.as_tensor(np.asarray(d))
        except (TypeError, ValueError, RuntimeError) as e:
            raise ShapeError(f"graph {g}: distance matrix must be a numeric (N, N) array ({e})") from None
        if m.dim() != 2 or m.shape[0] != m.shape[1]:
            raise ShapeError(f"graph {g}: distance matrix must be square (N, N); given {tuple(m.shape)}")
        mats.append(_spd_values(m, f"graph {g}"))
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
        ``graph_id``/``node`` not integer ``(B, L)`` of one shape (a floating ``graph_id`` must
        hold whole numbers), ``spd`` not an integer ``(G, N, N)`` table of distances ``≥ -1``, a
        graph id ``>= G``, a node id ``>= N`` or a node that is padding in its graph's table
        (diagonal ``-1``), bad ``slopes``/``table``.
    SpecError
        Neither or both of ``slopes`` and ``table`` given.

    Notes
    -----
    The score_mod is built for the ``(B, L)`` of ``graph_id`` and the ``H`` of ``slopes``/``table``:
    :func:`~structpos.integrations.flex.flex` refuses larger inputs with a
    :class:`~structpos.exceptions.ShapeError`.

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
    gid = torch.as_tensor(graph_id)
    if gid.is_floating_point():  # whole-number graph ids in a float tensor are accepted, never truncated
        if not bool((gid == gid.round()).all()):
            raise ShapeError(
                f"graph_id must hold whole numbers; given {gid.dtype} values such as {gid[gid != gid.round()][0].item()}"
            )
        gid = gid.to(torch.int64)
    gid = _tokens(gid, "graph_id", 2)
    nid = _tokens(node, "node", 2)
    if gid.shape != nid.shape:
        raise ShapeError(f"graph_id and node must both be (B, L); given {tuple(gid.shape)} and {tuple(nid.shape)}")
    spd = torch.as_tensor(spd)
    if spd.dim() != 3 or spd.shape[1] != spd.shape[2] or spd.is_floating_point():
        raise ShapeError(f"spd must be an integer (G, N, N) table; given {spd.dtype} {tuple(spd.shape)}")
    spd = _spd_values(spd, "spd").contiguous()
    G, N = spd.shape[0], spd.shape[1]
    _id_bound(gid, G, "graph_id", f"G = {G} (spd is {tuple(spd.shape)})")
    _id_bound(nid, N, "node", f"N = {N} (spd is {tuple(spd.shape)})")
    real = (gid >= 0) & (nid >= 0)
    padding = real.clone()
    padding[real] = spd[gid[real], nid[real], nid[real]] < 0
    if padding.any():
        b, i = (int(x) for x in torch.nonzero(padding)[0])
        g, n = int(gid[b, i]), int(nid[b, i])
        raise ShapeError(
            f"token ({b}, {i}): node {n} is not a node of graph {g} (spd[{g}, {n}, {n}] is -1, padding); "
            "graph ids or node ids do not match the table"
        )

    def dist(b, q_idx, kv_idx):
        gq, gk, nq, nk = gid[b, q_idx], gid[b, kv_idx], nid[b, q_idx], nid[b, kv_idx]
        ok = (gq == gk) & (gq >= 0) & (nq >= 0) & (nk >= 0)
        d = spd[gq.clamp(min=0), nq.clamp(min=0), nk.clamp(min=0)]
        return torch.where(ok, d, torch.full_like(d, -1))

    return _built_for(dist, **_token_sizes(gid, "graph_id", "spd_distance_fn"))
