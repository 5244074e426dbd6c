"""Running FlexAttention: :func:`flex` (one cached compiled kernel) and the HF attention function ``structpos_flex``.

Examples
--------
>>> q, k, v = torch.randn(3, 1, 2, 5, 8, generator=torch.Generator().manual_seed(0)).unbind(0)
>>> out = flex(q, k, v, block_mask=block_mask(causal_mask_mod(), 1, 1, 5, 5))
>>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
>>> torch.allclose(out, ref, atol=1e-5)
True
"""

from __future__ import annotations

import warnings

import torch

from ...exceptions import InputError, ShapeError
from ._common import ScoreMod, _check_sizes, _flex_attention
from .blocks import block_mask, full_block_mask
from .masks import causal_mask_mod, document_mask_mod

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

    Raises
    ------
    ShapeError
        ``q``/``k``/``v`` not floating 4-D tensors of matching batch, heads (``H`` a multiple of
        ``H_kv`` with ``enable_gqa``, else equal), key length and ``D``; a ``block_mask`` built
        for other lengths, batch or heads; or a ``score_mod`` / the ``block_mask``'s
        ``mask_mod`` built for fewer batch rows, heads or positions than the inputs have (a
        structpos mod records them, e.g. :func:`tree_distance_score_mod` the ``(B, L)`` of
        ``node`` and the ``H`` of ``slopes``).
    InputError
        Inputs that are not tensors or on different devices, a ``score_mod`` that is not
        callable, a ``block_mask`` that is not a ``BlockMask``.

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
    _check_flex_inputs(q, k, v, score_mod, block_mask, enable_gqa)
    if block_mask is None:
        block_mask = full_block_mask(q.shape[-2], k.shape[-2], device=q.device)
    if compile:
        fn = _COMPILED.get("fn") or _COMPILED.setdefault("fn", torch.compile(fn, fullgraph=True, dynamic=False))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention.*")
        return fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa)


def _check_flex_inputs(q, k, v, score_mod, block_mask, enable_gqa: bool) -> None:
    """Everything :func:`flex` can check before FlexAttention runs (see its Raises)."""
    from torch.nn.attention.flex_attention import BlockMask

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not torch.is_tensor(t):
            raise InputError(f"flex: {name} must be a torch.Tensor; given {type(t).__name__}")
        if t.dim() != 4 or not t.is_floating_point():
            raise ShapeError(f"flex: {name} must be a floating (B, H, L, D) tensor; given {t.dtype} {tuple(t.shape)}")
    if not (q.device == k.device == v.device):
        raise InputError(f"flex: q, k and v must be on one device; given {q.device}, {k.device}, {v.device}")
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    (B, H, L, D), (Bk, Hk, S, Dk) = q.shape, k.shape
    if v.shape[:3] != k.shape[:3] or Bk != B or Dk != D:
        raise ShapeError(f"flex: q (B, H, L, D), k (B, H_kv, S, D) and v (B, H_kv, S, D_v) do not fit: {shapes}")
    if enable_gqa and H % Hk:
        raise ShapeError(f"flex: with enable_gqa the query heads must be a multiple of the key/value heads: {shapes}")
    if not enable_gqa and Hk != H:
        raise ShapeError(
            f"flex: q and k/v must have the same heads (enable_gqa=True for fewer key/value heads): {shapes}"
        )
    if L < 1 or S < 1:
        raise ShapeError(f"flex: q and k need at least one position each: {shapes}")
    _check_sizes(score_mod, "score_mod", "flex", shapes, batch=B, heads=H, q=L, kv=S)
    if block_mask is None:
        return
    if not isinstance(block_mask, BlockMask):
        raise InputError(f"flex: block_mask must be a BlockMask (see block_mask()); given {type(block_mask).__name__}")
    bm_b, bm_h = block_mask.kv_num_blocks.shape[:2]
    lengths = tuple(block_mask.seq_lengths)
    no_op = min(block_mask.BLOCK_SIZE) >= 2**30  # torch's "no mask" sentinel fits every length
    if (lengths != (L, S) and not no_op) or bm_b not in (1, B) or bm_h not in (1, H):
        raise ShapeError(
            f"flex: block_mask was built for (B, H, Q, KV) = {(bm_b, bm_h, *lengths)}, "
            f"which does not fit {shapes} (B and H may be 1 to broadcast)"
        )
    if block_mask.kv_num_blocks.device != q.device:
        raise InputError(f"flex: block_mask is on {block_mask.kv_num_blocks.device}, q/k/v on {q.device}")
    _check_sizes(block_mask.mask_mod, "block_mask's mask_mod", "flex", shapes, batch=B, heads=H, q=L, kv=S)


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

    Raises
    ------
    ShapeError
        The patch's ``score_mod`` / ``mask_mod`` was built for fewer batch rows, heads or
        positions than this call reads (they are called with absolute positions ``0..S-1``), or
        the inputs do not fit (see :func:`flex`).

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
    # both are called with absolute indices up to S over the whole batch and all query heads
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}: absolute positions up to {S}"
    for role, mod in (("score_mod", user_score), ("mask_mod", user_mask)):
        given = {"batch": query.shape[0], "heads": query.shape[1], "q": S, "kv": S}
        _check_sizes(mod, f"set_bias({role}=...)", "the structpos_flex attention", shapes, **given)
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
