"""Structural attention biases and masks for FlexAttention, computed on the fly from per-token inputs.

FlexAttention (``torch.nn.attention.flex_attention``) calls ``score_mod(score, b, h, q_idx,
kv_idx)`` for every score and keeps only blocks allowed by a ``BlockMask`` built from
``mask_mod(b, h, q_idx, kv_idx)``. The functions here close over per-token tensors of size
O(L) (or a small per-graph table) and never materialise an L×L tensor:

* :func:`tree_distance_score_mod` — tree distance ``d(m, n) = δ_m + δ_n − 2·δ(lca)``; the LCA
  depth is the length of the longest common prefix of the two root paths minus one, read from
  the ancestor table ``anc[n, t]`` (the ancestor of ``n`` at depth ``t``: two prefixes are
  equal iff their last ancestors are the same node, so agreement is monotone in ``t``) in two
  levels of ``⌈√K⌉`` independent lookups (a binary search would chain ``log₂ K`` dependent
  lookups, which the compiler inlines into an exponentially large kernel);
* :func:`spd_score_mod` — graph shortest-path distance from a per-graph ``(G, N, N)`` table
  indexed by (graph id, node id): O(N²) per graph, not O(L²);
* a distance ``d`` becomes a bias as in :mod:`structpos.encoders.attention_bias`: ALiBi-style
  ``−slope_h·d`` or a learned ``table[bucket(d), h]`` (:class:`~structpos.encoders.SPDBias`);
* masks: :func:`table_mask_mod` (same row / column / header), :func:`hierarchy_mask_mod`
  (same paragraph / sentence / section), :func:`document_mask_mod` (packed sequences from
  ``cu_seqlens``), :func:`graph_kv_mask_mod` (Graph-KV: a chunk reads itself and its source
  chunks), :func:`causal_mask_mod`; combine with ``and_masks`` / ``or_masks``.

Tokens with no node (special tokens: node ``-1`` / depth ``-1``) are *unreachable* in the
distance biases and *global* (attend and are attended) in the masks. Tree distances are exact
when every depth is below the ancestor table's width ``K``.

Examples
--------
>>> import torch
>>> from torch.nn.attention.flex_attention import flex_attention
>>> parent = [-1, 0, 0, 1]                       # a 4-node tree
>>> anc, depth = ancestor_table(parent, max_depth=4)
>>> mod = tree_distance_score_mod(anc[None], depth[None], slopes=torch.ones(2))
>>> q = k = v = torch.randn(1, 2, 4, 8)
>>> out = flex_attention(q, k, v, score_mod=mod)
>>> out.shape
torch.Size([1, 2, 4, 8])
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Literal

import numpy as np
import torch

from ..coords.tree import check_parent
from ..coords.tree import depth as tree_depth
from ..exceptions import ShapeError, SpecError

__all__ = [
    "ancestor_table",
    "block_mask",
    "causal_mask_mod",
    "dense_mask",
    "distance_to_bias",
    "document_mask_mod",
    "flex",
    "graph_kv_mask_mod",
    "hf_flex_attention",
    "hierarchy_mask_mod",
    "spd_score_mod",
    "spd_tables",
    "table_mask_mod",
    "tree_distance_score_mod",
]

ScoreMod = Callable[..., torch.Tensor]
MaskMod = Callable[..., torch.Tensor]
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

    Examples
    --------
    >>> distance_to_bias(torch.tensor([0, 2, -1]), torch.tensor(0), slopes=torch.tensor([0.5]))
    tensor([-0., -1., -inf])
    """
    if (slopes is None) == (table is None):
        raise SpecError("give exactly one of slopes (ALiBi-style) or table (learned, SPDBias-style)")
    if slopes is not None:
        bias = -slopes[h] * d.to(slopes.dtype)
        return torch.where(d < 0, torch.full_like(bias, unreachable), bias)
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
def ancestor_table(parent, max_depth: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """``(anc, depth)``: ``anc[n, t]`` is the ancestor of node ``n`` at depth ``t`` (``-1`` past its depth).

    Parameters
    ----------
    parent : array-like
        Preorder parent array (``-1`` for roots; several roots make a forest).
    max_depth : int
        Width ``K`` of the table: depths ``≥ K`` keep their top ``K`` ancestors, and tree
        distances involving them are then lower bounds.

    Returns
    -------
    anc : torch.Tensor
        int64 ``(N, K)``.
    depth : torch.Tensor
        int64 ``(N,)``.

    Examples
    --------
    >>> anc, d = ancestor_table([-1, 0, 1, 0], max_depth=3)
    >>> anc.tolist(), d.tolist()
    ([[0, -1, -1], [0, 1, -1], [0, 1, 2], [0, 3, -1]], [0, 1, 2, 1])
    """
    p = check_parent(parent)
    dep = tree_depth(p)
    n = p.size
    anc = np.full((n, max_depth), -1, dtype=np.int64)
    for i in range(n):  # preorder: the parent's row is complete before the child's
        if p[i] >= 0:
            anc[i] = anc[p[i]]
        if dep[i] < max_depth:
            anc[i, dep[i]] = i
    return torch.from_numpy(anc), torch.from_numpy(dep.astype(np.int64))


def tree_distance_score_mod(
    ancestors: torch.Tensor,
    depth: torch.Tensor,
    *,
    slopes: torch.Tensor | None = None,
    table: torch.Tensor | None = None,
    unreachable: float = float("-inf"),
) -> ScoreMod:
    """``score + bias(d_tree(q, kv), h)`` from per-token ancestor rows.

    Parameters
    ----------
    ancestors : torch.Tensor
        ``(B, L, K)`` ancestor node ids by depth (:func:`ancestor_table` gathered at each token's
        node; rows of ``-1`` for tokens without a node).
    depth : torch.Tensor
        ``(B, L)`` depth of each token's node (``-1``: no node → unreachable).
    slopes, table, unreachable
        See :func:`distance_to_bias`.

    Returns
    -------
    callable
        ``score_mod(score, b, h, q_idx, kv_idx)``.

    Examples
    --------
    >>> anc, d = ancestor_table([-1, 0, 0])
    >>> mod = tree_distance_score_mod(anc[None], d[None], slopes=torch.ones(1))
    >>> float(mod(torch.tensor(0.0), torch.tensor(0), torch.tensor(0), torch.tensor(1), torch.tensor(2)))
    -2.0
    """
    anc = _tokens(ancestors, "ancestors", 3)
    dep = _tokens(depth, "depth", 2)
    if anc.shape[:2] != dep.shape:
        raise ShapeError(f"ancestors (B, L, K) and depth (B, L) disagree: given {tuple(anc.shape)} and {tuple(dep.shape)}")
    slopes, table = _check_bias_params(slopes, table)
    _, L, K = anc.shape
    flat = anc.reshape(-1).contiguous()
    width = max(1, math.isqrt(K - 1) + 1) if K > 1 else 1  # ⌈√K⌉ depths per block
    checkpoints = [min((c + 1) * width - 1, K - 1) for c in range(-(-K // width))]

    def same_at(base_q, base_k, t):
        a = flat[base_q + t]
        return ((a == flat[base_k + t]) & (a >= 0)).to(torch.int64)

    def lca_depth(b, q, kv):
        # ancestors agree exactly on depths 0..depth(lca): count the agreeing depths in two levels
        # (block checkpoints, then inside one block) — √K independent lookups per level, no long chain
        base_q, base_k = (b * L + q) * K, (b * L + kv) * K
        blocks = sum(same_at(base_q, base_k, t) for t in checkpoints)
        inner = sum(same_at(base_q, base_k, (blocks * width + j).clamp(max=K - 1)) for j in range(width))
        return torch.minimum(blocks * width + inner, torch.full_like(blocks, K)) - 1

    def score_mod(score, b, h, q_idx, kv_idx):
        dq, dk = dep[b, q_idx], dep[b, kv_idx]
        lca = lca_depth(b, q_idx, kv_idx)
        ok = (lca >= 0) & (dq >= 0) & (dk >= 0)
        d = torch.where(ok, dq + dk - 2 * lca, torch.full_like(dq, -1))
        return score + distance_to_bias(d, h, slopes, table, unreachable).to(score.dtype)

    return score_mod


# -------------------------------------------------------------------------------- graph SPD
def spd_tables(distances: list) -> torch.Tensor:
    """Stack per-graph ``(N_g, N_g)`` distance matrices into one ``(G, N, N)`` int64 table padded with ``-1``.

    Examples
    --------
    >>> spd_tables([np.array([[0, 1], [1, 0]]), np.zeros((1, 1), dtype=int)]).shape
    torch.Size([2, 2, 2])
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

    Examples
    --------
    >>> spd = spd_tables([np.array([[0, 1], [1, 0]])])
    >>> mod = spd_score_mod(torch.zeros(1, 2), torch.tensor([[0, 1]]), spd, slopes=torch.ones(1))
    >>> float(mod(torch.tensor(0.0), torch.tensor(0), torch.tensor(0), torch.tensor(0), torch.tensor(1)))
    -1.0
    """
    gid = _tokens(graph_id if not torch.is_tensor(graph_id) or not graph_id.is_floating_point()
                  else graph_id.to(torch.int64), "graph_id", 2)
    nid = _tokens(node, "node", 2)
    if gid.shape != nid.shape:
        raise ShapeError(f"graph_id and node must both be (B, L); given {tuple(gid.shape)} and {tuple(nid.shape)}")
    spd = torch.as_tensor(spd)
    if spd.dim() != 3 or spd.shape[1] != spd.shape[2] or spd.is_floating_point():
        raise ShapeError(f"spd must be an integer (G, N, N) table; given {spd.dtype} {tuple(spd.shape)}")
    spd = spd.to(torch.int64).contiguous()
    slopes, table = _check_bias_params(slopes, table)

    def score_mod(score, b, h, q_idx, kv_idx):
        gq, gk, nq, nk = gid[b, q_idx], gid[b, kv_idx], nid[b, q_idx], nid[b, kv_idx]
        ok = (gq == gk) & (gq >= 0) & (nq >= 0) & (nk >= 0)
        d = spd[gq.clamp(min=0), nq.clamp(min=0), nk.clamp(min=0)]
        d = torch.where(ok, d, torch.full_like(d, -1))
        return score + distance_to_bias(d, h, slopes, table, unreachable).to(score.dtype)

    return score_mod


# ------------------------------------------------------------------------------------ masks
def causal_mask_mod(offset: int = 0) -> MaskMod:
    """``kv_idx ≤ q_idx + offset`` (``offset`` = cached tokens before the queries).

    Examples
    --------
    >>> m = causal_mask_mod()
    >>> bool(m(0, 0, torch.tensor(1), torch.tensor(2)))
    False
    """

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    return mask_mod


def table_mask_mod(row, col, header=None, mode: TableMode = "row_or_column") -> MaskMod:
    """Table cell masks: a token attends to tokens of the same row / column (``mode``).

    ``"row_column_header"`` also lets every token attend to header cells. Tokens with a
    negative row (special tokens, separators) are global.

    Examples
    --------
    >>> m = table_mask_mod(torch.tensor([[0, 0, 1]]), torch.tensor([[0, 1, 1]]), mode="row")
    >>> [bool(m(0, 0, torch.tensor(0), torch.tensor(j))) for j in range(3)]
    [True, True, False]
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

    ``unit_ids`` is ``(B, L, A)`` with *global* unit ids (``hierarchy_coords(..., mode="global")``
    or token coordinates ``paragraph``/``sentence``); negative ids are global tokens.

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

    Examples
    --------
    >>> m = document_mask_mod(torch.tensor([0, 2, 5]))
    >>> [bool(m(0, 0, torch.tensor(1), torch.tensor(j))) for j in range(5)]
    [True, True, False, False, False]
    """
    from ..encoders.rope import check_cu_seqlens

    cu = torch.as_tensor(cu_seqlens).to(torch.int64)
    total = int(cu[-1]) if total is None else total
    cu = check_cu_seqlens(cu, total)
    doc = torch.searchsorted(cu[1:], torch.arange(total), right=True)

    def mask_mod(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    return mask_mod


def graph_kv_mask_mod(chunk, adjacency) -> MaskMod:
    """Graph-KV block mask: a token of chunk ``u`` reads chunk ``u`` and every chunk ``v`` with ``adjacency[u, v]``.

    ``chunk`` is ``(B, L)`` (``-1``: shared tokens such as the question, which read and are read
    by all); ``adjacency`` is ``(C, C)`` bool (or ``(B, C, C)``), e.g. the citation edges
    ``v → u`` of the chunks' graph. Combine with :func:`causal_mask_mod` for decoding.

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

    Examples
    --------
    >>> dense_mask(causal_mask_mod(), 1, 1, 2, 2)[0, 0].tolist()
    [[True, False], [True, True]]
    """
    from torch.nn.attention.flex_attention import create_mask

    return create_mask(mask_mod, B, H, Q, KV, device=device or "cpu")


def block_mask(mask_mod: MaskMod, B: int | None, H: int | None, Q: int, KV: int, device=None, compile: bool = False):
    """``create_block_mask`` (``compile=True`` evaluates the mask in blocks without an L×L tensor).

    Examples
    --------
    >>> bm = block_mask(causal_mask_mod(), 1, 1, 256, 256)
    >>> bm.shape
    (1, 1, 256, 256)
    """
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(mask_mod, B, H, Q, KV, device=device or "cpu", _compile=compile)


_COMPILED: dict = {}


def flex(q, k, v, score_mod: ScoreMod | None = None, block_mask=None, *, scale=None, enable_gqa=False,
         compile: bool = False) -> torch.Tensor:
    """``flex_attention`` on ``(B, H, L, D)`` inputs; ``compile=True`` uses one cached compiled kernel.

    Eager FlexAttention materialises the scores (fine for tests and short sequences); the
    compiled kernel streams blocks, so its extra memory is O(L).

    Examples
    --------
    >>> q = k = v = torch.randn(1, 1, 4, 8)
    >>> flex(q, k, v).shape
    torch.Size([1, 1, 4, 8])
    """
    fn = _flex_attention()
    if compile:
        fn = _COMPILED.get("fn") or _COMPILED.setdefault("fn", torch.compile(fn, fullgraph=True))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention.*")
        return fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa)


# ----------------------------------------------------------------------------- HF attention
def hf_flex_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
    """HF attention function (``(B, H, L, D)`` in, ``(B, L, H, D)`` out) running FlexAttention with structure.

    Registered as ``"structpos_flex"`` by
    :func:`structpos.integrations.transformers.register_structural_attention`. The structural
    inputs come from ``StructuralPatch.set_bias(score_mod=..., mask_mod=...)``: functions of
    *absolute* token indices over the whole sequence (cache included). Causal order and the
    2-D padding mask are added here; HF's dense mask is not built.

    Examples
    --------
    >>> hf_flex_attention.__name__
    'hf_flex_attention'
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
    pad = state.padding if state is not None else None
    if pad is not None and pad.shape[-1] == S:
        pad = pad.to(query.device)
        masks.append(lambda b, h, q_idx, kv_idx: pad[b, kv_idx])
    bm = block_mask(and_masks(*masks), query.shape[0], None, L, S, device=query.device) if masks else None
    out = flex(query, key, value, score_mod, bm, scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None
