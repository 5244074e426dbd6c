"""Block masks without an L×L tensor: ``mask_mod`` evaluated one row of tiles at a time, all-visible tiles, Graph-KV.

Examples
--------
>>> bm = block_mask(causal_mask_mod(), 1, 1, 300, 300)
>>> bm.kv_num_blocks.tolist(), bm.full_kv_num_blocks.tolist()   # diagonal tiles partial, the rest full
([[[1, 1, 1]]], [[[0, 1, 2]]])
"""

from __future__ import annotations

import torch

from ...exceptions import ShapeError
from ._common import MaskMod, _check_sizes, _id_bound, _int_arg, _tokens
from .masks import causal_mask_mod, graph_kv_mask_mod


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

    Raises
    ------
    ShapeError
        A size that is not a positive integer, or larger than ``mask_mod`` was built for.

    Examples
    --------
    >>> dense_mask(causal_mask_mod(), 1, 1, 2, 2)[0, 0].tolist()
    [[True, False], [True, True]]
    """
    from torch.nn.attention.flex_attention import create_mask

    B, H, Q, KV = _grid(mask_mod, "dense_mask", B, H, Q, KV)
    return create_mask(mask_mod, B, H, Q, KV, device=device or "cpu")


def _grid(mask_mod, caller: str, B, H, Q, KV) -> tuple:
    """``(B, H, Q, KV)`` after checking each is a positive integer (``B``/``H`` may be ``None``) and
    that ``mask_mod`` was built for them."""
    B = None if B is None else _int_arg(B, "B", error=ShapeError)
    H = None if H is None else _int_arg(H, "H", error=ShapeError)
    Q, KV = _int_arg(Q, "Q", error=ShapeError), _int_arg(KV, "KV", error=ShapeError)
    _check_sizes(mask_mod, "mask_mod", caller, f"B={B}, H={H}, Q={Q}, KV={KV}", batch=B, heads=H, q=Q, kv=KV)
    return B, H, Q, KV


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

    Raises
    ------
    ShapeError
        ``B``, ``H`` (when given), ``Q`` or ``KV`` not a positive integer, or larger than
        ``mask_mod`` was built for (the per-token inputs of a structpos mask_mod, also inside
        ``and_masks`` / ``or_masks``).
    SpecError
        ``block`` not a positive integer.

    Examples
    --------
    Causal over two 128-token tiles: the diagonal tiles are partial, the one below full, the
    one above absent:

    >>> bm = block_mask(causal_mask_mod(), 1, 1, 256, 256)
    >>> bm.shape, bm.kv_num_blocks.tolist(), bm.full_kv_num_blocks.tolist()
    ((1, 1, 256, 256), [[[1, 1]]], [[[0, 1]]])
    """
    from torch.nn.attention.flex_attention import BlockMask, create_mask

    B, H, Q, KV = _grid(mask_mod, "block_mask", B, H, Q, KV)
    block = _int_arg(block, "block")
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

    Raises
    ------
    ShapeError
        ``q_len`` or ``kv_len`` not a positive integer.
    SpecError
        ``block`` not a positive integer.

    Examples
    --------
    >>> bm = full_block_mask(300, 300)
    >>> bm.shape, bm.full_kv_num_blocks.tolist(), bm.kv_num_blocks.tolist()
    ((1, 1, 300, 300), [[[3, 3, 3]]], [[[0, 0, 0]]])
    """
    from torch.nn.attention.flex_attention import BlockMask, noop_mask

    q_len, kv_len = _int_arg(q_len, "q_len", error=ShapeError), _int_arg(kv_len, "kv_len", error=ShapeError)
    block = _int_arg(block, "block")
    nq, nk = -(-q_len // block), -(-kv_len // block)
    zeros_num = torch.zeros(1, 1, nq, dtype=torch.int32, device=device)
    zeros_idx = torch.zeros(1, 1, nq, nk, dtype=torch.int32, device=device)
    full_num = torch.full((1, 1, nq), nk, dtype=torch.int32, device=device)
    full_idx = torch.arange(nk, dtype=torch.int32, device=device).expand(1, 1, nq, nk).contiguous()
    return BlockMask.from_kv_blocks(
        zeros_num, zeros_idx, full_num, full_idx, BLOCK_SIZE=block, mask_mod=noop_mask, seq_lengths=(q_len, kv_len)
    )


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
        ``(2, E)`` integer ``source → target`` edges between segments ``0..C-1`` (the same for
        every row of a batch).
    num_segments : int, optional
        ``C`` (default: one more than the largest segment id of ``segment``, so that an edge to a
        segment no token belongs to is an error; give ``C`` to allow one).
    causal : bool
        Also mask future tokens (by sequence index).
    block : int
        Tile size.

    Returns
    -------
    torch.nn.attention.flex_attention.BlockMask
        Shape ``(B, 1, L, L)``.

    Raises
    ------
    ShapeError
        ``segment`` not an integer ``(L,)`` / ``(B, L)`` tensor, or a segment id ``>= num_segments``.
    ParseError
        ``edge_index`` not an integer ``(2, E)`` array, or an edge to a segment outside ``0..C-1``.
    SpecError
        ``num_segments`` or ``block`` not a positive integer.

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

    from ...coords.graph_kv import graph_kv_reads

    seg = torch.as_tensor(segment)
    if seg.dim() == 1:
        seg = seg[None]
    seg = _tokens(seg, "segment", 2)
    if num_segments is None:
        num_segments = max(int(seg.max()) if seg.numel() else -1, 0) + 1
    num_segments = _int_arg(num_segments, "num_segments")
    _id_bound(seg, num_segments, "segment", f"num_segments = {num_segments}")
    reads = torch.from_numpy(graph_kv_reads(edge_index, num_segments))
    mm = graph_kv_mask_mod(seg, reads)
    if causal:
        mm = and_masks(mm, causal_mask_mod())
    B, L = seg.shape
    return block_mask(mm, B, None, L, L, block=block)
