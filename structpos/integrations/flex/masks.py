"""FlexAttention ``mask_mod``s from per-token structure: causal, table cells, hierarchy units, documents, Graph-KV.

Tokens with a negative id (special tokens, separators: no node, row or unit) are *global*: they
attend and are attended. Combine masks with ``and_masks`` / ``or_masks``.

Examples
--------
>>> i = torch.arange(4)
>>> same_doc = document_mask_mod(torch.tensor([0, 2, 4]))(0, 0, i[:, None], i[None, :])
>>> causal = causal_mask_mod()(0, 0, i[:, None], i[None, :])
>>> (same_doc & causal).int().tolist()
[[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]
"""

from __future__ import annotations

from typing import Literal

import torch

from ...exceptions import ShapeError, SpecError
from ._common import MaskMod, _built_for, _flags, _id_bound, _int_arg, _token_sizes, _tokens

TableMode = Literal["row", "column", "row_or_column", "row_column_header"]


def causal_mask_mod(offset: int = 0) -> MaskMod:
    """``kv_idx ≤ q_idx + offset`` (``offset`` = cached tokens before the queries).

    Parameters
    ----------
    offset : int
        How many keys (a KV cache) precede the first query (``≥ 0``).

    Returns
    -------
    callable
        ``mask_mod(b, h, q_idx, kv_idx)``.

    Raises
    ------
    SpecError
        ``offset`` not an integer ``≥ 0``.

    Examples
    --------
    >>> m = causal_mask_mod()
    >>> bool(m(0, 0, torch.tensor(1), torch.tensor(2)))
    False
    >>> q_idx, kv_idx = torch.arange(2)[:, None], torch.arange(3)[None, :]
    >>> causal_mask_mod(offset=1)(0, 0, q_idx, kv_idx).int().tolist()  # one cached key
    [[1, 1, 0], [1, 1, 1]]
    """
    offset = _int_arg(offset, "offset", 0)

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
        hd = _flags(header, "header", "(B, L)")
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

    return _built_for(mask_mod, **_token_sizes(r, "row", "table_mask_mod"))


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
        ``level`` not an integer in ``0..A-1``.
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
    if not ids.shape[-1]:
        raise ShapeError(f"unit_ids must have at least one level (B, L, A ≥ 1); given {tuple(ids.shape)}")
    level = _int_arg(level, "level", 0, ids.shape[-1] - 1)
    lv = ids[..., level].contiguous()

    def mask_mod(b, h, q_idx, kv_idx):
        uq, uk = lv[b, q_idx], lv[b, kv_idx]
        return (uq == uk) | (uq < 0) | (uk < 0)

    return _built_for(mask_mod, **_token_sizes(ids, "unit_ids", "hierarchy_mask_mod"))


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
        ``cu_seqlens`` not a 1-D integer tensor of at least 2 entries (floats are refused, not
        truncated), boundaries that do not start at 0, decrease or do not end at ``total``;
        ``total`` not an integer.

    Notes
    -----
    The mask reads positions ``0..total-1``: :func:`~structpos.integrations.flex.block_mask` and
    :func:`~structpos.integrations.flex.flex` refuse longer queries or keys with a
    :class:`~structpos.exceptions.ShapeError` (calling the mask by hand past ``total`` is an
    ``IndexError`` from the lookup).

    Examples
    --------
    >>> m = document_mask_mod(torch.tensor([0, 2, 5]))
    >>> [bool(m(0, 0, torch.tensor(1), torch.tensor(j))) for j in range(5)]
    [True, True, False, False, False]
    >>> i = torch.arange(5)
    >>> m(0, 0, i[:, None], i[None, :]).int().tolist()
    [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]]
    """
    from ...encoders.rope import check_cu_seqlens

    cu = torch.as_tensor(cu_seqlens)
    if total is None:  # the last boundary; an ill-formed cu_seqlens is named by check_cu_seqlens below
        well_formed = cu.dim() == 1 and cu.numel() >= 2 and not (cu.is_floating_point() or cu.is_complex())
        total = int(cu[-1]) if well_formed else 0
    total = _int_arg(total, "total", 0, error=ShapeError)
    cu = check_cu_seqlens(cu, total)
    doc = torch.searchsorted(cu[1:], torch.arange(total, device=cu.device), right=True)

    def mask_mod(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    why = f"cu_seqlens given to document_mask_mod ends at total = {total}"
    return _built_for(mask_mod, q=(total, why), kv=(total, why))


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
        ``chunk`` not integer ``(B, L)``, ``adjacency`` not a bool (or 0/1) ``(C, C)`` or
        ``(B, C, C)`` tensor, or a chunk id ``>= C``.

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
    adj = _flags(adjacency, "adjacency", "(C, C) or (B, C, C)")
    if adj.dim() == 2:
        adj = adj[None].expand(ch.shape[0], *adj.shape)
    if adj.dim() != 3 or adj.shape[1] != adj.shape[2] or adj.shape[0] != ch.shape[0]:
        raise ShapeError(f"adjacency must be (C, C) or (B, C, C) with B = {ch.shape[0]}; given {tuple(adj.shape)}")
    _id_bound(ch, adj.shape[1], "chunk", f"C = {adj.shape[1]} (adjacency is {tuple(adj.shape)})")
    adj = adj.contiguous()

    def mask_mod(b, h, q_idx, kv_idx):
        cq, ck = ch[b, q_idx], ch[b, kv_idx]
        glob = (cq < 0) | (ck < 0)
        return glob | (cq == ck) | adj[b, cq.clamp(min=0), ck.clamp(min=0)]

    return _built_for(mask_mod, **_token_sizes(ch, "chunk", "graph_kv_mask_mod"))
