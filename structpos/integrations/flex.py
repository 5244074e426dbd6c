"""Structural attention biases and masks for FlexAttention, computed on the fly from per-token inputs.

FlexAttention (``torch.nn.attention.flex_attention``) calls ``score_mod(score, b, h, q_idx,
kv_idx)`` for every score and keeps only blocks allowed by a ``BlockMask`` built from
``mask_mod(b, h, q_idx, kv_idx)``. The functions here close over per-token tensors of size
O(L) (or a small per-graph table) and never materialise an L×L tensor:

* :func:`tree_distance_score_mod` — tree distance ``d(m, n) = δ_m + δ_n − 2·δ(lca)``, the LCA
  depth (= the length of the longest common prefix of the two root paths, minus one) read as a
  range minimum over the Euler tour (:func:`euler_tables`): 8 independent lookups per score.
  (A binary search over root-path prefixes chains ``log₂ K`` dependent lookups, which the
  compiler inlines into a kernel that took minutes to build);
* :func:`spd_score_mod` — graph shortest-path distance from a per-graph ``(G, N, N)`` table
  indexed by (graph id, node id): O(N²) per graph, not O(L²);
* :func:`fire_score_mod` — FIRE's learned bias ``f_θ(ψ(d)/ψ(max(L_q, L_thr)))`` of any of these
  distances (:func:`token_distance_fn`, :func:`tree_distance_fn`, :func:`spd_distance_fn`);
* a distance ``d`` becomes a bias as in :mod:`structpos.encoders.attention_bias`: ALiBi-style
  ``−slope_h·d`` or a learned ``table[bucket(d), h]`` (:class:`~structpos.encoders.SPDBias`);
* masks: :func:`table_mask_mod` (same row / column / header), :func:`hierarchy_mask_mod`
  (same paragraph / sentence / section), :func:`document_mask_mod` (packed sequences from
  ``cu_seqlens``), :func:`graph_kv_mask_mod` (Graph-KV: a chunk reads itself and its source
  chunks), :func:`causal_mask_mod`; combine with ``and_masks`` / ``or_masks``.

Tokens with no node (special tokens: node ``-1`` / depth ``-1``) are *unreachable* in the
distance biases and *global* (attend and are attended) in the masks.

A score_mod goes straight into FlexAttention::

    from torch.nn.attention.flex_attention import flex_attention
    out = flex_attention(q, k, v, score_mod=mod)   # or structpos.integrations.flex.flex

Examples
--------
Evaluated on index grids, a score_mod gives the whole bias matrix FlexAttention adds (here
``−d`` for the tree distances of a 4-node tree; token 2 has no node, so it is unreachable):

>>> import torch
>>> parent = [-1, 0, 1, 0]                       # preorder: 0 → 1 → 2, and 0 → 3
>>> mod = tree_distance_score_mod(parent, torch.tensor([[0, 2, -1, 3]]), slopes=torch.ones(2))
>>> i = torch.arange(4)
>>> mod(torch.zeros(4, 4), 0, 0, i[:, None], i[None, :])
tensor([[ 0., -2., -inf, -1.],
        [-2.,  0., -inf, -3.],
        [-inf, -inf, -inf, -inf],
        [-1., -3., -inf,  0.]])
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Literal

import numpy as np
import torch

from ..coords.tree import check_parent
from ..coords.tree import depth as tree_depth
from ..exceptions import ParseError, ShapeError, SpecError

__all__ = [
    "block_mask",
    "causal_mask_mod",
    "dense_mask",
    "distance_to_bias",
    "document_mask_mod",
    "euler_tables",
    "fire_score_mod",
    "flex",
    "full_block_mask",
    "graph_kv_block_mask",
    "graph_kv_mask_mod",
    "hf_flex_attention",
    "hierarchy_mask_mod",
    "spd_distance_fn",
    "spd_score_mod",
    "spd_tables",
    "table_mask_mod",
    "token_distance_fn",
    "tree_distance_fn",
    "tree_distance_score_mod",
]

ScoreMod = Callable[..., torch.Tensor]
MaskMod = Callable[..., torch.Tensor]
DistanceFn = Callable[..., torch.Tensor]
TableMode = Literal["row", "column", "row_or_column", "row_column_header"]


def _flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention


def _tokens(x, name: str, dims: int, dtype=torch.int64) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.dim() != dims or t.is_floating_point() or t.is_complex():
        want = {1: "(L,)", 2: "(B, L)", 3: "(B, L, K)"}[dims]
        raise ShapeError(f"{name} must be an integer tensor of shape {want}; given {t.dtype} {tuple(t.shape)}")
    return t.to(dtype)


# ---------------------------------------------------------------------------- distances → bias
def distance_to_bias(
    d: torch.Tensor,
    h: torch.Tensor,
    slopes: torch.Tensor | None = None,
    table: torch.Tensor | None = None,
    unreachable: float = float("-inf"),
) -> torch.Tensor:
    """Bias of integer distance(s) ``d`` for head(s) ``h``; ``d < 0`` means unreachable.

    With ``slopes`` (``(H,)``): ``−slopes[h]·d`` and ``unreachable`` where ``d < 0``, as
    :func:`~structpos.encoders.alibi_distance_bias`. With ``table`` (``(M + 2, H)``, e.g.
    ``SPDBias.table.weight``): ``table[min(d, M), h]`` and row ``M + 1`` where ``d < 0``, as
    :class:`~structpos.encoders.SPDBias`.

    Parameters
    ----------
    d : torch.Tensor
        Integer distances (any shape); negative: unreachable.
    h : torch.Tensor
        Head index (broadcast with ``d``).
    slopes : torch.Tensor, optional
        ``(H,)`` ALiBi-style slopes.
    table : torch.Tensor, optional
        ``(M + 2, H)`` learned biases: rows ``0..M`` by distance (clamped to ``M``), row
        ``M + 1`` for unreachable.
    unreachable : float
        The bias of unreachable pairs with ``slopes``.

    Returns
    -------
    torch.Tensor
        The bias, shaped like ``d`` broadcast with ``h``.

    Raises
    ------
    SpecError
        Neither or both of ``slopes`` and ``table`` given.

    Examples
    --------
    >>> distance_to_bias(torch.tensor([0, 2, -1]), torch.tensor(0), slopes=torch.tensor([0.5]))
    tensor([-0., -1., -inf])
    >>> table = torch.arange(8.0).reshape(4, 2)  # M = 2; row 3 is "unreachable"
    >>> distance_to_bias(torch.tensor([0, 1, 5, -1]), torch.tensor(0), table=table)
    tensor([0., 2., 4., 6.])
    """
    if (slopes is None) == (table is None):
        raise SpecError("give exactly one of slopes (ALiBi-style) or table (learned, SPDBias-style)")
    if slopes is not None:
        bias = -slopes[h] * d.to(slopes.dtype)
        return torch.where(d < 0, torch.full_like(bias, unreachable), bias)
    assert table is not None  # exactly one of slopes / table is given (checked above)
    top = table.shape[0] - 2
    bucket = torch.where(d < 0, torch.full_like(d, top + 1), d.clamp(max=top))
    return table[bucket, h]


def _check_bias_params(slopes, table, num_heads: int | None = None):
    if slopes is not None:
        slopes = torch.as_tensor(slopes, dtype=torch.float32)
        if slopes.dim() != 1:
            raise ShapeError(f"slopes must have shape (H,); given {tuple(slopes.shape)}")
    if table is not None and (table.dim() != 2 or table.shape[0] < 2):
        raise ShapeError(f"table must have shape (max_distance + 2, H); given {tuple(table.shape)}")
    return slopes, table


# --------------------------------------------------------------------------------- tree distance
def euler_tables(parent) -> dict[str, torch.Tensor]:
    """Euler-tour tables of a preorder forest for O(1) LCA depths (range-minimum query).

    The Euler tour ``E`` lists a node when the walk enters it and again after each child
    (``2N − #roots`` entries per forest, trees one after another). With ``first[n]`` the first
    position of ``n`` in ``E``, ``depth(lca(u, v)) = min(depth[E[l..r]])`` for
    ``l, r = sorted(first[u], first[v])``, read from a sparse table
    ``sparse[j, i] = min(depth[E[i .. i + 2^j − 1]])`` with two lookups at level
    ``j = ⌊log₂(r − l + 1)⌋``. Memory O(N log N).

    Parameters
    ----------
    parent : array-like
        Preorder parent array (``-1`` for roots).

    Returns
    -------
    dict
        ``first``, ``depth``, ``root`` (``(N,)`` int64: Euler position, depth, root of each node) and
        ``sparse`` (``(J, M)`` int64).

    Raises
    ------
    ParseError
        ``parent`` is not a preorder forest (naming the first node out of order).

    Examples
    --------
    >>> t = euler_tables([-1, 0, 1, 0])
    >>> t["first"].tolist(), t["depth"].tolist(), t["root"].tolist()
    ([0, 1, 2, 5], [0, 1, 2, 1], [0, 0, 0, 0])
    >>> t["sparse"][0].tolist()   # depths along the tour 0 1 2 1 0 3 0
    [0, 1, 2, 1, 0, 1, 0]
    >>> euler_tables([-1, 0, 0, 1])  # node 3 is a child of node 1 but comes after node 2
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <parent> at node 3: node 3 (parent 1) is not in preorder: a subtree is interrupted or misordered near it
    """
    p = check_parent(parent)
    n = p.size
    dep = tree_depth(p).astype(np.int64)
    root = np.arange(n)
    for i in range(n):
        if p[i] >= 0:
            root[i] = root[p[i]]
    tour: list[int] = []
    stack: list[int] = []
    first = np.zeros(n, dtype=np.int64)
    for i in range(n):  # preorder: close the subtrees that i is not in, then enter i
        while stack and stack[-1] != p[i]:
            stack.pop()
            if stack:
                tour.append(stack[-1])
        if p[i] >= 0 and not stack:  # the parent is not on the path from the root to node i - 1
            raise ParseError(
                f"node {i} (parent {int(p[i])}) is not in preorder: a subtree is interrupted or misordered near it",
                name="<parent>",
                position=f"node {i}",
            )
        first[i] = len(tour)
        tour.append(i)
        stack.append(i)
    while stack:
        stack.pop()
        if stack:
            tour.append(stack[-1])
    level = dep[np.asarray(tour, dtype=np.int64)] if tour else np.zeros(0, dtype=np.int64)
    rows = [level]
    width = 1
    while 2 * width <= len(level):
        prev = rows[-1]
        nxt = prev.copy()
        nxt[: len(prev) - width] = np.minimum(prev[: len(prev) - width], prev[width:])
        rows.append(nxt)
        width *= 2
    return {
        "first": torch.from_numpy(first),
        "depth": torch.from_numpy(dep),
        "root": torch.from_numpy(root),
        "sparse": torch.from_numpy(np.stack(rows)) if len(level) else torch.zeros(1, 0, dtype=torch.int64),
    }


def tree_distance_fn(parent, node) -> DistanceFn:
    """``d(b, q_idx, kv_idx)``: tree distance ``δ_q + δ_kv − 2·δ(lca)`` of two tokens' nodes, ``-1`` if unreachable.

    The distance part of :func:`tree_distance_score_mod`, for score_mods that turn it into a bias
    another way (:func:`fire_score_mod`).

    Parameters
    ----------
    parent : array-like
        ``(N,)`` preorder parent array (see :func:`tree_distance_score_mod`).
    node : torch.Tensor
        ``(B, L)`` node of each token (``-1``: none → unreachable).

    Returns
    -------
    callable
        ``dist(b, q_idx, kv_idx)`` → int64 distance: 8 lookups, no chain of dependent lookups.

    Raises
    ------
    ParseError
        ``parent`` is not a preorder forest.
    ShapeError
        ``node`` not an integer ``(B, L)`` tensor, or a node id ``>= N``.

    Examples
    --------
    >>> dist = tree_distance_fn([-1, 0, 1, 0], torch.tensor([[0, 2, 3, -1]]))
    >>> i = torch.arange(4)
    >>> dist(0, i[:, None], i[None, :])[1].tolist()
    [2, 0, 3, -1]
    """
    nid = _tokens(node, "node", 2)
    t = euler_tables(parent)
    n = t["first"].numel()
    if nid.numel() and int(nid.max()) >= n:
        raise ShapeError(f"node ids must be < N = {n} (the parent array's length); given max {int(nid.max())}")
    safe = nid.clamp(min=0)
    first = torch.where(nid >= 0, t["first"][safe], torch.zeros_like(nid)).contiguous()
    dep = torch.where(nid >= 0, t["depth"][safe], torch.full_like(nid, -1)).contiguous()
    root = torch.where(nid >= 0, t["root"][safe], torch.full_like(nid, -1)).contiguous()
    sparse = t["sparse"].reshape(-1).contiguous()
    m = t["sparse"].shape[1]

    def dist(b, q_idx, kv_idx):
        fq, fk = first[b, q_idx], first[b, kv_idx]
        lo, hi = torch.minimum(fq, fk), torch.maximum(fq, fk)
        level = torch.floor(torch.log2((hi - lo + 1).to(torch.float32))).to(torch.int64)
        span = torch.bitwise_left_shift(torch.ones_like(level), level)
        lca = torch.minimum(sparse[level * m + lo], sparse[level * m + hi - span + 1])
        dq, dk = dep[b, q_idx], dep[b, kv_idx]
        ok = (root[b, q_idx] == root[b, kv_idx]) & (dq >= 0) & (dk >= 0)
        return torch.where(ok, dq + dk - 2 * lca, torch.full_like(dq, -1))

    return dist


def tree_distance_score_mod(
    parent,
    node,
    *,
    slopes: torch.Tensor | None = None,
    table: torch.Tensor | None = None,
    unreachable: float = float("-inf"),
) -> ScoreMod:
    """``score + bias(d_tree(q, kv), h)`` with ``d = δ_q + δ_kv − 2·δ(lca)`` from Euler-tour tables.

    Parameters
    ----------
    parent : array-like
        ``(N,)`` preorder parent array of the forest the tokens point into (several structures:
        concatenate them as one forest with offset node ids).
    node : torch.Tensor
        ``(B, L)`` node of each token (``-1``: none → unreachable).
    slopes, table, unreachable
        See :func:`distance_to_bias`.

    Returns
    -------
    callable
        ``score_mod(score, b, h, q_idx, kv_idx)``: 8 lookups per score (no chain of dependent
        lookups), per-token inputs O(L), tables O(N log N).

    Raises
    ------
    ParseError
        ``parent`` is not a preorder forest.
    ShapeError
        ``node`` not an integer ``(B, L)`` tensor, a node id ``>= N``, bad ``slopes``/``table``.

    Examples
    --------
    >>> mod = tree_distance_score_mod([-1, 0, 0], torch.tensor([[0, 1, 2]]), slopes=torch.ones(1))
    >>> float(mod(torch.tensor(0.0), torch.tensor(0), torch.tensor(0), torch.tensor(1), torch.tensor(2)))
    -2.0
    """
    dist = tree_distance_fn(parent, node)
    slopes, table = _check_bias_params(slopes, table)

    def score_mod(score, b, h, q_idx, kv_idx):
        d = dist(b, q_idx, kv_idx)
        return score + distance_to_bias(d, h, slopes, table, unreachable).to(score.dtype)

    return score_mod


# -------------------------------------------------------------------------------- graph SPD
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
    dist = spd_distance_fn(graph_id, node, spd)
    slopes, table = _check_bias_params(slopes, table)

    def score_mod(score, b, h, q_idx, kv_idx):
        d = dist(b, q_idx, kv_idx)
        return score + distance_to_bias(d, h, slopes, table, unreachable).to(score.dtype)

    return score_mod


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


def token_distance_fn(causal: bool = True, offset: int = 0) -> DistanceFn:
    """``d(b, q_idx, kv_idx)``: token distance, ``q − kv`` (``-1`` for future keys) or ``|q − kv|``.

    Parameters
    ----------
    causal : bool
        ``q + offset − kv`` with keys after the query unreachable (``-1``); else ``|q + offset − kv|``.
    offset : int
        Cached tokens before the first query.

    Returns
    -------
    callable

    Examples
    --------
    >>> i = torch.arange(3)
    >>> token_distance_fn()(0, i[:, None], i[None, :]).tolist()
    [[0, -1, -1], [1, 0, -1], [2, 1, 0]]
    """

    def dist(b, q_idx, kv_idx):
        d = q_idx + offset - kv_idx
        if causal:
            return torch.where(d < 0, torch.full_like(d, -1), d)
        return d.abs()

    return dist


def fire_score_mod(fire, distance: DistanceFn, query_scale: torch.Tensor) -> ScoreMod:
    """``score + FIRE bias`` of a structural distance, computed per score (no ``L × L`` tensor).

    The bias is :class:`~structpos.encoders.FIRE`'s ``f_θ(ψ(d)/ψ(max(L_q, L_thr)))_h`` with the
    same parameters (``c``, ``threshold``, the MLP) and ``unreachable`` for ``d < 0``; gradients
    reach them through FlexAttention.

    Parameters
    ----------
    fire : FIRE
        The module whose parameters are used.
    distance : callable
        ``dist(b, q_idx, kv_idx)`` (:func:`token_distance_fn`, :func:`tree_distance_fn`,
        :func:`spd_distance_fn`, or any function of those indices).
    query_scale : torch.Tensor
        ``(B, L)`` per-query ``L_q`` (for causal token distance: the query position;
        :func:`~structpos.encoders.row_max_distance` of a dense distance matrix gives FIRE's default).

    Returns
    -------
    callable
        ``score_mod(score, b, h, q_idx, kv_idx)``.

    Raises
    ------
    ShapeError
        ``query_scale`` not 2-D.

    Examples
    --------
    The score_mod on index grids is the dense bias :class:`~structpos.encoders.FIRE` computes:

    >>> from structpos.encoders import FIRE
    >>> fire = FIRE(num_heads=2)
    >>> i = torch.arange(4)
    >>> mod = fire_score_mod(fire, token_distance_fn(), i[None].float())
    >>> dense = fire(token_distance_fn()(0, i[:, None], i[None, :]), i.float())
    >>> torch.allclose(mod(torch.zeros(4, 4), 0, torch.tensor(1), i[:, None], i[None, :]), dense[1], atol=1e-6)
    True
    """
    scale = torch.as_tensor(query_scale)
    if scale.dim() != 2:
        raise ShapeError(f"query_scale must be (B, L); given {tuple(scale.shape)}")
    scale = scale.to(fire.c.dtype).to(fire.c.device)
    # a 1-element tensor, not a Python float (dynamo would make it an unbacked symbol under dynamic shapes)
    unreachable = torch.tensor([fire.unreachable], dtype=fire.c.dtype, device=fire.c.device)

    def score_mod(score, b, h, q_idx, kv_idx):
        d = distance(b, q_idx, kv_idx)
        x = fire.normalize(d, scale[b, q_idx])
        bias = fire.head_bias(x, h)
        bias = torch.where(d < 0, unreachable[0], bias)
        return score + bias.to(score.dtype)

    return score_mod


# ------------------------------------------------------------------------------------ masks
def causal_mask_mod(offset: int = 0) -> MaskMod:
    """``kv_idx ≤ q_idx + offset`` (``offset`` = cached tokens before the queries).

    Parameters
    ----------
    offset : int
        How many keys (a KV cache) precede the first query.

    Returns
    -------
    callable
        ``mask_mod(b, h, q_idx, kv_idx)``.

    Examples
    --------
    >>> m = causal_mask_mod()
    >>> bool(m(0, 0, torch.tensor(1), torch.tensor(2)))
    False
    >>> q_idx, kv_idx = torch.arange(2)[:, None], torch.arange(3)[None, :]
    >>> causal_mask_mod(offset=1)(0, 0, q_idx, kv_idx).int().tolist()  # one cached key
    [[1, 1, 0], [1, 1, 1]]
    """

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    return mask_mod


def table_mask_mod(row, col, header=None, mode: TableMode = "row_or_column") -> MaskMod:
    """Table cell masks: a token attends to tokens of the same row / column (``mode``).

    ``"row_column_header"`` also lets every token attend to header cells. Tokens with a
    negative row (special tokens, separators) are global.

    Parameters
    ----------
    row, col : torch.Tensor
        ``(B, L)`` integer row and column of each token's cell (``tok_row``/``tok_col``).
    header : torch.Tensor, optional
        ``(B, L)`` flags of header-cell tokens; needed by ``"row_column_header"``.
    mode : {"row", "column", "row_or_column", "row_column_header"}
        Which tokens a token may attend to.

    Returns
    -------
    callable
        ``mask_mod(b, h, q_idx, kv_idx)``.

    Raises
    ------
    SpecError
        An unknown ``mode``, or ``"row_column_header"`` without ``header``.
    ShapeError
        ``row``, ``col`` (and ``header``) not integer ``(B, L)`` of one shape.

    Examples
    --------
    >>> m = table_mask_mod(torch.tensor([[0, 0, 1]]), torch.tensor([[0, 1, 1]]), mode="row")
    >>> [bool(m(0, 0, torch.tensor(0), torch.tensor(j))) for j in range(3)]
    [True, True, False]

    A separator token (row ``-1``, global) and a 2 × 2 grid of cells ``(0, 0), (0, 1),
    (1, 0), (1, 1)``: each cell reads the cells of its row and of its column, not the
    diagonal one:

    >>> row, col = torch.tensor([[-1, 0, 0, 1, 1]]), torch.tensor([[-1, 0, 1, 0, 1]])
    >>> m = table_mask_mod(row, col, mode="row_or_column")
    >>> i = torch.arange(5)
    >>> m(0, 0, i[:, None], i[None, :]).int().tolist()
    [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 0, 1], [1, 1, 0, 1, 1], [1, 0, 1, 1, 1]]
    """
    r, c = _tokens(row, "row", 2), _tokens(col, "col", 2)
    if r.shape != c.shape:
        raise ShapeError(f"row and col must both be (B, L); given {tuple(r.shape)} and {tuple(c.shape)}")
    modes = ("row", "column", "row_or_column", "row_column_header")
    if mode not in modes:
        raise SpecError(f"mode must be one of {modes}, got {mode!r}")
    hd = None
    if mode == "row_column_header":
        if header is None:
            raise SpecError("mode='row_column_header' needs header flags (B, L)")
        hd = torch.as_tensor(header).to(torch.bool)
        if hd.shape != r.shape:
            raise ShapeError(f"header must be (B, L) = {tuple(r.shape)}; given {tuple(hd.shape)}")

    def mask_mod(b, h, q_idx, kv_idx):
        rq, rk, cq, ck = r[b, q_idx], r[b, kv_idx], c[b, q_idx], c[b, kv_idx]
        glob = (rq < 0) | (rk < 0)
        if mode == "row":
            ok = rq == rk
        elif mode == "column":
            ok = cq == ck
        else:
            ok = (rq == rk) | (cq == ck)
        if hd is not None:
            ok = ok | hd[b, kv_idx]
        return ok | glob

    return mask_mod


def hierarchy_mask_mod(unit_ids, level: int) -> MaskMod:
    """Attend within the same unit at ``level`` (e.g. 0 = paragraph, 1 = sentence, or section).

    Parameters
    ----------
    unit_ids : torch.Tensor
        ``(B, L, A)`` integer *global* unit ids (``encoders.unit_indices(..., mode="global")`` or
        token coordinates ``paragraph``/``sentence``); negative ids are global tokens.
    level : int
        Which of the ``A`` levels bounds attention.

    Returns
    -------
    callable
        ``mask_mod(b, h, q_idx, kv_idx)``.

    Raises
    ------
    SpecError
        ``level`` outside ``0..A-1``.
    ShapeError
        ``unit_ids`` not an integer ``(B, L, A)`` tensor.

    Examples
    --------
    >>> ids = torch.tensor([[[0, 0], [0, 1], [1, 2]]])
    >>> m = hierarchy_mask_mod(ids, level=0)
    >>> [bool(m(0, 0, torch.tensor(0), torch.tensor(j))) for j in range(3)]
    [True, True, False]
    """
    ids = _tokens(unit_ids, "unit_ids", 3)
    if not 0 <= level < ids.shape[-1]:
        raise SpecError(f"level must be in 0..{ids.shape[-1] - 1}, got {level}")
    lv = ids[..., level].contiguous()

    def mask_mod(b, h, q_idx, kv_idx):
        uq, uk = lv[b, q_idx], lv[b, kv_idx]
        return (uq == uk) | (uq < 0) | (uk < 0)

    return mask_mod


def document_mask_mod(cu_seqlens, total: int | None = None) -> MaskMod:
    """Packed sequences (``B = 1``): attend only within the same document of ``cu_seqlens``.

    Parameters
    ----------
    cu_seqlens : array-like
        ``(D + 1,)`` document boundaries, ``0`` first, non-decreasing (as the collator's
        ``mode="pack"`` gives them).
    total : int, optional
        The packed length (default ``cu_seqlens[-1]``).

    Returns
    -------
    callable
        ``mask_mod(b, h, q_idx, kv_idx)``.

    Raises
    ------
    ShapeError
        Boundaries that do not start at 0, decrease or end past ``total``.

    Examples
    --------
    >>> m = document_mask_mod(torch.tensor([0, 2, 5]))
    >>> [bool(m(0, 0, torch.tensor(1), torch.tensor(j))) for j in range(5)]
    [True, True, False, False, False]
    >>> i = torch.arange(5)
    >>> m(0, 0, i[:, None], i[None, :]).int().tolist()
    [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]]
    """
    from ..encoders.rope import check_cu_seqlens

    cu = torch.as_tensor(cu_seqlens).to(torch.int64)
    total = int(cu[-1]) if total is None else total
    cu = check_cu_seqlens(cu, total)
    doc = torch.searchsorted(cu[1:], torch.arange(total, device=cu.device), right=True)

    def mask_mod(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    return mask_mod


def graph_kv_mask_mod(chunk, adjacency) -> MaskMod:
    """Graph-KV block mask: a token of chunk ``u`` reads chunk ``u`` and every chunk ``v`` with ``adjacency[u, v]``.

    Combine with :func:`causal_mask_mod` for decoding.

    Parameters
    ----------
    chunk : torch.Tensor
        ``(B, L)`` chunk of each token (``-1``: shared tokens such as the question, which read
        and are read by all).
    adjacency : torch.Tensor
        ``(C, C)`` bool (or ``(B, C, C)``): ``adjacency[u, v]`` lets chunk ``u`` read chunk
        ``v``, e.g. the citation edges ``v → u`` of the chunks' graph.

    Returns
    -------
    callable
        ``mask_mod(b, h, q_idx, kv_idx)``.

    Raises
    ------
    ShapeError
        ``chunk`` not integer ``(B, L)``, ``adjacency`` not ``(C, C)`` or ``(B, C, C)``.

    Examples
    --------
    >>> adj = torch.tensor([[False, False], [True, False]])   # chunk 1 reads chunk 0
    >>> m = graph_kv_mask_mod(torch.tensor([[0, 0, 1, 1]]), adj)
    >>> [bool(m(0, 0, torch.tensor(2), torch.tensor(j))) for j in range(4)]
    [True, True, True, True]
    >>> [bool(m(0, 0, torch.tensor(0), torch.tensor(j))) for j in range(4)]
    [True, True, False, False]
    """
    ch = _tokens(chunk, "chunk", 2)
    adj = torch.as_tensor(adjacency).to(torch.bool)
    if adj.dim() == 2:
        adj = adj[None].expand(ch.shape[0], *adj.shape)
    if adj.dim() != 3 or adj.shape[1] != adj.shape[2] or adj.shape[0] != ch.shape[0]:
        raise ShapeError(f"adjacency must be (C, C) or (B, C, C) with B = {ch.shape[0]}; given {tuple(adj.shape)}")
    adj = adj.contiguous()

    def mask_mod(b, h, q_idx, kv_idx):
        cq, ck = ch[b, q_idx], ch[b, kv_idx]
        glob = (cq < 0) | (ck < 0)
        return glob | (cq == ck) | adj[b, cq.clamp(min=0), ck.clamp(min=0)]

    return mask_mod


# ---------------------------------------------------------------------------------- running
def dense_mask(mask_mod: MaskMod, B: int, H: int, Q: int, KV: int, device=None) -> torch.Tensor:
    """The ``(B, H, Q, KV)`` bool mask a ``mask_mod`` describes (for tests and small inputs only).

    Parameters
    ----------
    mask_mod : callable
        ``mask_mod(b, h, q_idx, kv_idx)``.
    B, H, Q, KV : int
        Batch size, heads, query and key lengths.
    device : torch.device or str, optional
        Default ``"cpu"``.

    Returns
    -------
    torch.Tensor
        ``(B, H, Q, KV)`` bool.

    Examples
    --------
    >>> dense_mask(causal_mask_mod(), 1, 1, 2, 2)[0, 0].tolist()
    [[True, False], [True, True]]
    """
    from torch.nn.attention.flex_attention import create_mask

    return create_mask(mask_mod, B, H, Q, KV, device=device or "cpu")


def block_mask(mask_mod: MaskMod, B: int | None, H: int | None, Q: int, KV: int, device=None, *, block: int = 128):
    """A ``BlockMask`` for ``mask_mod``, evaluated one row of ``block`` queries at a time.

    Equals ``create_block_mask(mask_mod, B, H, Q, KV)``, but never holds more than
    ``B·H·block·KV`` mask values at once (``create_block_mask`` without compiling evaluates the
    whole ``B·H·Q·KV`` mask): O(L) memory for a fixed block size. Tiles that are entirely visible
    are marked *full* (no ``mask_mod`` call inside them); partly visible tiles are *partial*.

    Parameters
    ----------
    mask_mod : callable
        ``mask_mod(b, h, q_idx, kv_idx)``.
    B, H : int or None
        Batch size and heads (``None``: the mask is the same for all, one entry).
    Q, KV : int
        Query and key lengths.
    device : torch.device or str, optional
        Default ``"cpu"``.
    block : int
        Tile size.

    Returns
    -------
    torch.nn.attention.flex_attention.BlockMask
        The block mask, carrying ``mask_mod`` for the partial tiles.

    Examples
    --------
    Causal over two 128-token tiles: the diagonal tiles are partial, the one below full, the
    one above absent:

    >>> bm = block_mask(causal_mask_mod(), 1, 1, 256, 256)
    >>> bm.shape, bm.kv_num_blocks.tolist(), bm.full_kv_num_blocks.tolist()
    ((1, 1, 256, 256), [[[1, 1]]], [[[0, 1]]])
    """
    from torch.nn.attention.flex_attention import BlockMask, create_mask

    Bm, Hm = B or 1, H or 1
    nq, nk = -(-Q // block), -(-KV // block)
    partial = torch.zeros(Bm, Hm, nq, nk, dtype=torch.bool, device=device)
    full = torch.zeros_like(partial)
    for i in range(nq):
        rows = min(block, Q - i * block)
        off = i * block

        def shifted(b, h, q_idx, kv_idx, off=off):
            return mask_mod(b, h, q_idx + off, kv_idx)

        m = create_mask(shifted, Bm, Hm, rows, KV, device=device or "cpu")  # (B, H, rows, KV)
        pad = nk * block - KV
        if pad:
            m = torch.nn.functional.pad(m, (0, pad), value=False)
        tiles = m.unflatten(-1, (nk, block))  # (B, H, rows, nk, block)
        any_ = tiles.any(dim=-1).any(dim=-2)
        valid_cols = torch.arange(nk * block, device=m.device).unflatten(0, (nk, block)) < KV
        all_ = (tiles | ~valid_cols).all(dim=-1).all(dim=-2)
        full[:, :, i] = all_
        partial[:, :, i] = any_ & ~all_
    return BlockMask.from_kv_blocks(
        *_ordered(partial), *_ordered(full), BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(Q, KV)
    )


def _ordered(tiles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(num_blocks, indices)`` of the True tiles of each block row, True ones first."""
    num = tiles.sum(-1).to(torch.int32)
    idx = torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return num, idx


def full_block_mask(q_len: int, kv_len: int, block: int = 128, device=None):
    """A ``BlockMask`` with every ``block × block`` tile fully visible, built without an L×L tensor.

    ``flex_attention(block_mask=None)`` uses one tile of the whole sequence, and the compiled CPU
    kernel then allocates ``threads × L × L`` scratch; tiles of 128 keep it O(L).

    Parameters
    ----------
    q_len, kv_len : int
        Query and key lengths.
    block : int
        Tile size.
    device : torch.device or str, optional
        Where the block tables live.

    Returns
    -------
    torch.nn.attention.flex_attention.BlockMask
        Shape ``(1, 1, q_len, kv_len)``: every tile full, none partial.

    Examples
    --------
    >>> bm = full_block_mask(300, 300)
    >>> bm.shape, bm.full_kv_num_blocks.tolist(), bm.kv_num_blocks.tolist()
    ((1, 1, 300, 300), [[[3, 3, 3]]], [[[0, 0, 0]]])
    """
    from torch.nn.attention.flex_attention import BlockMask, noop_mask

    nq, nk = -(-q_len // block), -(-kv_len // block)
    zeros_num = torch.zeros(1, 1, nq, dtype=torch.int32, device=device)
    zeros_idx = torch.zeros(1, 1, nq, nk, dtype=torch.int32, device=device)
    full_num = torch.full((1, 1, nq), nk, dtype=torch.int32, device=device)
    full_idx = torch.arange(nk, dtype=torch.int32, device=device).expand(1, 1, nq, nk).contiguous()
    return BlockMask.from_kv_blocks(
        zeros_num, zeros_idx, full_num, full_idx, BLOCK_SIZE=block, mask_mod=noop_mask, seq_lengths=(q_len, kv_len)
    )


_COMPILED: dict = {}


def flex(
    q, k, v, score_mod: ScoreMod | None = None, block_mask=None, *, scale=None, enable_gqa=False, compile: bool = False
) -> torch.Tensor:
    """``flex_attention`` on ``(B, H, L, D)`` inputs; ``compile=True`` uses one cached compiled kernel.

    Eager FlexAttention materialises the scores (fine for tests and short sequences); the
    compiled kernel streams 128-wide blocks (:func:`full_block_mask` when no mask is given), so
    its extra memory is O(L).

    Parameters
    ----------
    q, k, v : torch.Tensor
        ``(B, H, L, D)`` queries, keys and values (``(B, H_kv, S, D)`` with ``enable_gqa``).
    score_mod : callable, optional
        ``score_mod(score, b, h, q_idx, kv_idx)`` (e.g. :func:`tree_distance_score_mod`).
    block_mask : BlockMask, optional
        Default :func:`full_block_mask` (no masking, O(L) scratch).
    scale : float, optional
        Default ``1 / sqrt(D)``.
    enable_gqa : bool
        Grouped-query attention (fewer key/value heads).
    compile : bool
        Run the compiled kernel. One ``torch.compile(flex_attention, dynamic=False)`` is cached per
        process; each new score_mod kind, table shape or sequence length compiles its own static
        kernel (a dynamic recompile after switching kinds fails in CPU Inductor), and
        ``torch._dynamo.config.recompile_limit`` bounds how many are kept.

    Returns
    -------
    torch.Tensor
        ``(B, H, L, D)`` attention output.

    Examples
    --------
    Without a score_mod or mask it is plain softmax attention (the first call in a process
    imports FlexAttention's machinery, about a second):

    >>> q, k, v = torch.randn(3, 1, 2, 5, 8, generator=torch.Generator().manual_seed(0)).unbind(0)
    >>> out = flex(q, k, v)
    >>> out.shape, torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5)
    (torch.Size([1, 2, 5, 8]), True)
    """
    fn = _flex_attention()
    if block_mask is None:
        block_mask = full_block_mask(q.shape[-2], k.shape[-2], device=q.device)
    if compile:
        fn = _COMPILED.get("fn") or _COMPILED.setdefault("fn", torch.compile(fn, fullgraph=True, dynamic=False))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention.*")
        return fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa)


# ----------------------------------------------------------------------------- HF attention
def hf_flex_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
    """HF attention function (``(B, H, L, D)`` in, ``(B, L, H, D)`` out) running FlexAttention with structure.

    Registered as ``"structpos_flex"`` by
    :func:`structpos.integrations.transformers.register_structural_attention`. The structural
    inputs come from ``StructuralPatch.set_bias(score_mod=..., mask_mod=...)``: functions of
    *absolute* token indices over the whole sequence (cache included). Causal order, the 2-D
    padding mask and, for a packed batch called with ``cu_seqlens``, a document mask
    (:func:`document_mask_mod`) are added here; HF's dense mask is not built.

    Parameters
    ----------
    module : torch.nn.Module
        The attention layer (its ``is_causal``, and the structural state a
        ``StructuralPatch`` attached).
    query, key, value : torch.Tensor
        ``(B, H, L, D)`` and ``(B, H_kv, S, D)`` (``S − L`` cached keys precede the queries).
    attention_mask : torch.Tensor, optional
        Ignored: padding comes from the patch's state.
    scaling : float, optional
        Softmax scale (default ``1 / sqrt(D)``).
    dropout : float
        Ignored (FlexAttention has no dropout).
    **kwargs
        Further HF arguments, ignored.

    Returns
    -------
    tuple
        ``(output (B, L, H, D), None)``: no attention weights.

    Examples
    --------
    On a layer without structural state it is causal attention:

    >>> q, k, v = torch.randn(3, 1, 2, 5, 8, generator=torch.Generator().manual_seed(0)).unbind(0)
    >>> out, weights = hf_flex_attention(torch.nn.Module(), q, k, v)
    >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
    >>> out.shape, weights, torch.allclose(out, ref, atol=1e-5)
    (torch.Size([1, 5, 2, 8]), None, True)
    """
    from torch.nn.attention.flex_attention import and_masks

    state = module._structpos[1] if getattr(module, "_structpos", None) is not None else None
    extras = state.extras if state is not None else {}
    L, S = query.shape[-2], key.shape[-2]
    off = S - L
    user_score, user_mask = extras.get("score_mod"), extras.get("mask_mod")
    score_mod = None
    if user_score is not None:

        def score_mod(score, b, h, q_idx, kv_idx):
            return user_score(score, b, h, q_idx + off, kv_idx)

    masks = [causal_mask_mod(off)] if getattr(module, "is_causal", True) else []
    if user_mask is not None:
        masks.append(lambda b, h, q_idx, kv_idx: user_mask(b, h, q_idx + off, kv_idx))
    cu = getattr(state, "cu_seqlens", None)
    if cu is not None and cu[-1] == S:  # a packed batch: attention stays inside each document
        doc = document_mask_mod(cu.to(query.device), S)
        masks.append(lambda b, h, q_idx, kv_idx: doc(b, h, q_idx + off, kv_idx))
    pad = state.padding if state is not None else None
    if pad is not None and pad.shape[-1] == S:
        pad = pad.to(query.device)
        masks.append(lambda b, h, q_idx, kv_idx: pad[b, kv_idx])
    bm = block_mask(and_masks(*masks), query.shape[0], None, L, S, device=query.device) if masks else None
    out = flex(query, key, value, score_mod, bm, scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def graph_kv_block_mask(segment, edge_index, num_segments: int | None = None, *, causal: bool = True, block: int = 128):
    """The FlexAttention ``BlockMask`` of a Graph-KV layout: segments read themselves and their sources.

    :func:`graph_kv_mask_mod` on :func:`structpos.coords.graph_kv.graph_kv_reads` of the
    ``source → target`` segment graph (and with ``causal``, :func:`causal_mask_mod`), tiled by
    :func:`block_mask`. Shared tokens (segment ``-1``) read and are read by every token; with
    ``causal`` a question placed after the segments is read by no segment. Positions:
    :func:`structpos.coords.graph_kv.graph_kv_layout`.

    Parameters
    ----------
    segment : array_like of int
        ``(L,)`` or ``(B, L)`` segment of each token (``-1``: shared).
    edge_index : array_like
        ``(2, E)`` ``source → target`` edges between segments (the same for every row of a batch).
    num_segments : int, optional
        ``C`` (default: one more than the largest id).
    causal : bool
        Also mask future tokens (by sequence index).
    block : int
        Tile size.

    Returns
    -------
    torch.nn.attention.flex_attention.BlockMask
        Shape ``(B, 1, L, L)``.

    Examples
    --------
    Two sources (0, 1) cited by target 2; the target's tokens read all three segments, a source
    only itself:

    >>> seg = torch.tensor([0, 0, 1, 2, 2])
    >>> bm = graph_kv_block_mask(seg, [[0, 1], [2, 2]], causal=False, block=8)
    >>> dense = dense_mask(bm.mask_mod, 1, 1, 5, 5)[0, 0].int()
    >>> dense[0].tolist(), dense[3].tolist()
    ([1, 1, 0, 0, 0], [1, 1, 1, 1, 1])
    """
    from torch.nn.attention.flex_attention import and_masks

    from ..coords.graph_kv import graph_kv_reads

    seg = torch.as_tensor(segment)
    if seg.dim() == 1:
        seg = seg[None]
    seg = _tokens(seg, "segment", 2)
    ei = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    if num_segments is None:
        num_segments = int(max(int(seg.max()) if seg.numel() else -1, ei.max(initial=-1))) + 1
    reads = torch.from_numpy(graph_kv_reads(ei, num_segments))
    mm = graph_kv_mask_mod(seg, reads)
    if causal:
        mm = and_masks(mm, causal_mask_mod())
    B, L = seg.shape
    return block_mask(mm, B, None, L, L, block=block)
