"""Batching per-token coordinates: padded ``(B, L, ·)`` with a mask, or packed ``(T, ·)`` with ``cu_seqlens``.

Both forms describe the same tokens: example ``b`` occupies rows ``cu_seqlens[b]:cu_seqlens[b+1]``
of the packed form and ``[b, :lengths[b]]`` of the padded form (``mask`` True there). Rotary
encodings act token by token, so rotating either form gives the same values on real tokens;
:func:`collate` builds both from a list of per-example coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ..exceptions import ShapeError
from ._checks import is_compiling

__all__ = ["CoordBatch", "collate", "pack_padded", "unpack_packed", "cu_seqlens_from_lengths"]


def cu_seqlens_from_lengths(lengths: torch.Tensor) -> torch.Tensor:
    """Sequence offsets ``[0, l_0, l_0 + l_1, …]`` as int32 (the flash-attn convention).

    Parameters
    ----------
    lengths : torch.Tensor
        ``(B,)`` sequence lengths.

    Returns
    -------
    torch.Tensor
        ``(B + 1,)`` int32 offsets; sequence ``b`` is packed rows ``cu[b]:cu[b+1]``.

    Raises
    ------
    ShapeError
        ``lengths`` not 1-D, not integers (integral floats are accepted), negative, or summing
        past the int32 range of the offsets.

    Examples
    --------
    >>> cu_seqlens_from_lengths(torch.tensor([3, 0, 2])).tolist()
    [0, 3, 3, 5]
    >>> cu_seqlens_from_lengths(torch.tensor([3, -1]))
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: lengths must be non-negative; lengths[1] = -1
    """
    try:
        lengths = torch.as_tensor(lengths)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ShapeError(f"lengths must be a 1-D tensor of sequence lengths ({e})") from None
    if lengths.ndim > 1 or lengths.is_complex() or lengths.dtype == torch.bool:
        raise ShapeError(f"lengths must be a 1-D integer tensor, given {lengths.dtype} {tuple(lengths.shape)}")
    lengths = lengths.reshape(-1)
    if lengths.is_floating_point():
        if not torch.equal(lengths, lengths.floor()):  # NaN, ±inf and fractions
            raise ShapeError(f"lengths must be integers, given {lengths.tolist()}")
        lengths = lengths.to(torch.int64)
    if lengths.numel() and not is_compiling():
        neg = torch.nonzero(lengths < 0)
        if neg.numel():
            i = int(neg[0, 0])
            raise ShapeError(f"lengths must be non-negative; lengths[{i}] = {int(lengths[i])}")
        total = int(lengths.to(torch.int64).sum())
        if total > torch.iinfo(torch.int32).max:
            raise ShapeError(f"lengths sum to {total} tokens, past the int32 range of cu_seqlens")
    out = torch.zeros(lengths.numel() + 1, dtype=torch.int32, device=lengths.device)
    out[1:] = torch.cumsum(lengths, 0)
    return out


def pack_padded(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, L, …)`` + mask ``(B, L)`` → ``(T, …)``: the real tokens in batch-major order.

    Parameters
    ----------
    x : torch.Tensor
        ``(B, L, …)`` padded values.
    mask : torch.Tensor
        ``(B, L)``, True on real tokens.

    Returns
    -------
    torch.Tensor
        ``(T, …)`` with ``T = mask.sum()``.

    Raises
    ------
    ShapeError
        ``mask`` does not match ``x``'s first two dimensions.

    Examples
    --------
    >>> x = torch.tensor([[1, 2, 0], [3, 0, 0]])
    >>> pack_padded(x, torch.tensor([[True, True, False], [True, False, False]])).tolist()
    [1, 2, 3]
    """
    mask = torch.as_tensor(mask, device=x.device).to(torch.bool)
    if x.shape[:2] != mask.shape:
        raise ShapeError(f"pack_padded: mask {tuple(mask.shape)} does not match x {tuple(x.shape)}")
    return x[mask]


def unpack_packed(x: torch.Tensor, cu_seqlens: torch.Tensor, max_len: int | None = None, fill=0) -> torch.Tensor:
    """``(T, …)`` + ``cu_seqlens`` → ``(B, L, …)`` padded with ``fill`` (inverse of :func:`pack_padded`).

    Parameters
    ----------
    x : torch.Tensor
        ``(T, …)`` packed values.
    cu_seqlens : torch.Tensor
        ``(B + 1,)`` offsets rising from 0 to ``T``.
    max_len : int, optional
        Padded length ``L`` (default: the longest sequence).
    fill : scalar
        Value on padding.

    Returns
    -------
    torch.Tensor
        ``(B, L, …)``.

    Raises
    ------
    ShapeError
        ``cu_seqlens`` not rising from 0 to ``T``, or ``max_len`` shorter than a sequence.

    Examples
    --------
    >>> unpack_packed(torch.tensor([1, 2, 3]), torch.tensor([0, 2, 3]), fill=-1).tolist()
    [[1, 2], [3, -1]]
    """
    cu = torch.as_tensor(cu_seqlens, device=x.device).to(torch.int64)
    if cu.dim() != 1 or int(cu[0]) != 0 or int(cu[-1]) != x.shape[0] or bool((cu[1:] < cu[:-1]).any()):
        raise ShapeError(f"unpack_packed: cu_seqlens must rise from 0 to {x.shape[0]}, got {cu.tolist()}")
    lengths = cu[1:] - cu[:-1]
    L = int(lengths.max()) if lengths.numel() else 0
    if max_len is not None:
        if max_len < L:
            raise ShapeError(f"unpack_packed: max_len {max_len} is shorter than the longest sequence {L}")
        L = max_len
    out = x.new_full((lengths.numel(), L, *x.shape[1:]), fill)
    mask = torch.arange(L, device=x.device)[None, :] < lengths[:, None]
    out[mask] = x
    return out


@dataclass
class CoordBatch:
    """Both batch forms of a list of coordinate arrays (see the module docstring); made by :func:`collate`.

    Examples
    --------
    >>> batch = collate([[[0, 0], [1, 0], [1, 1]], [[5, 2], [6, 2]]])
    >>> batch.mask.tolist(), batch.cu_seqlens.tolist(), batch.max_seqlen
    ([[True, True, True], [True, True, False]], [0, 3, 5], 3)
    >>> torch.equal(batch.pack(batch.coords), batch.packed), torch.equal(batch.unpack(batch.packed), batch.coords)
    (True, True)
    """

    coords: torch.Tensor
    """``(B, L, A)`` padded coordinates (``pad_value`` on padding)."""
    mask: torch.Tensor
    """``(B, L)`` bool, True on real tokens."""
    lengths: torch.Tensor
    """``(B,)`` int64 sequence lengths."""
    packed: torch.Tensor
    """``(T, A)`` packed coordinates."""
    cu_seqlens: torch.Tensor
    """``(B + 1,)`` int32 offsets into the packed form."""
    max_seqlen: int
    """Length of the longest example (flash-attn's ``max_seqlen``)."""

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """Padded ``(B, L, …)`` → packed ``(T, …)`` (:func:`pack_padded` with this batch's mask)."""
        return pack_padded(x, self.mask)

    def unpack(self, x: torch.Tensor, fill=0) -> torch.Tensor:
        """Packed ``(T, …)`` → padded ``(B, L, …)`` (:func:`unpack_packed` to this batch's ``L``)."""
        return unpack_packed(x, self.cu_seqlens, self.coords.shape[1], fill)


def collate(
    coords: Sequence, pad_value=0, device=None, dtype: torch.dtype | None = None, pad_to_multiple: int = 1
) -> CoordBatch:
    """Build a :class:`CoordBatch` from per-example coordinates of shape ``(L_i, A)`` (or ``(L_i,)``).

    Integer inputs stay int64, real ones float32 unless ``dtype`` says otherwise. Every
    example must have the same number of axes ``A``; empty examples are allowed.

    Parameters
    ----------
    coords : sequence of array_like or torch.Tensor
        One ``(L_i, A)`` or ``(L_i,)`` array per example.
    pad_value : scalar
        Coordinate on padding.
    device : torch.device, optional
        Where the tensors go.
    dtype : torch.dtype, optional
        Coordinate dtype (default: int64, or float32 when any input is real).
    pad_to_multiple : int
        Round the padded length up to a multiple of this.

    Returns
    -------
    CoordBatch

    Raises
    ------
    ShapeError
        An empty list, an example of rank above 2, non-finite coordinates, or examples with
        different numbers of axes.

    Examples
    --------
    A rotary encoding gives the same values on real tokens whether it rotates the padded or
    the packed form:

    >>> from structpos.encoders import StructuralRoPE
    >>> batch = collate([[[0, 0], [1, 0], [1, 1]], [[5, 2], [6, 2]]], pad_to_multiple=4)
    >>> batch.coords.shape, batch.packed.shape
    (torch.Size([2, 4, 2]), torch.Size([5, 2]))
    >>> rope = StructuralRoPE(head_dim=8, num_axes=2)
    >>> x = torch.ones(2, 4, 1, 8)
    >>> padded = rope.rotate(x, batch.coords)
    >>> packed = rope.rotate(batch.pack(x), batch.packed, batch.cu_seqlens)
    >>> torch.equal(batch.pack(padded), packed)
    True
    >>> collate([[[0, 0]], [[1]]])
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: collate: examples disagree on the number of axes: [(1, 2), (1, 1)]
    """
    if len(coords) == 0:
        raise ShapeError("collate: empty list of examples")
    items = []
    for i, c in enumerate(coords):
        t = torch.as_tensor(np.asarray(c) if not isinstance(c, torch.Tensor) else c)
        if t.dim() == 1:
            t = t[:, None]
        if t.dim() != 2:
            raise ShapeError(f"collate: example {i} has shape {tuple(t.shape)}, expected (L, A) or (L,)")
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise ShapeError(f"collate: example {i} has non-finite coordinates")
        items.append(t)
    axes = {t.shape[1] for t in items if t.shape[0]} or {items[0].shape[1]}
    if len(axes) != 1:
        shapes = [tuple(t.shape) for t in items]
        raise ShapeError(f"collate: examples disagree on the number of axes: {shapes}")
    A = axes.pop()
    if dtype is None:
        dtype = torch.float32 if any(t.is_floating_point() for t in items) else torch.int64
    items = [t.reshape(t.shape[0], A).to(device=device, dtype=dtype) for t in items]
    lengths = torch.tensor([t.shape[0] for t in items], dtype=torch.int64, device=device)
    L = int(lengths.max())
    if pad_to_multiple > 1:
        L = -(-L // pad_to_multiple) * pad_to_multiple
    packed = torch.cat(items, dim=0)
    padded = torch.full((len(items), L, A), pad_value, dtype=dtype, device=device)
    mask = torch.arange(L, device=device)[None, :] < lengths[:, None]
    padded[mask] = packed
    return CoordBatch(padded, mask, lengths, packed, cu_seqlens_from_lengths(lengths), int(lengths.max()))
