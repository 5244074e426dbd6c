"""The token side of the rotary encoders: positions of packed sequences and per-token coordinates.

A rotary encoder with the :class:`~structpos.encoders.StructuralRoPE` call shape takes ``q``/``k``
as ``(B, L, H, D)`` or packed ``(T, H, D)`` with flash-attn style ``cu_seqlens`` (sequence ``b``
holds tokens ``cu_seqlens[b] ≤ t < cu_seqlens[b+1]``) and coordinates ``(B, L, A)`` / ``(T, A)``.
Without coordinates token ``t`` of a packed batch stands at ``t − cu_seqlens[seq(t)]`` on every
axis, so each packed sequence is encoded as if it stood alone. These helpers check those inputs
(:class:`~structpos.exceptions.ShapeError`, naming what was expected and what was given) and
resolve the coordinates; :mod:`.rope`, :mod:`.grape` and the learned rotations share them.

Examples
--------
>>> import torch
>>> positions_from_cu_seqlens(torch.tensor([0, 2, 5]), 5).tolist()
[0, 1, 0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..exceptions import ShapeError
from ._checks import check_finite_values, is_compiling

__all__ = ["positions_from_cu_seqlens", "resolve_coords", "check_coords", "check_same_tokens", "check_cu_seqlens"]


def positions_from_cu_seqlens(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """Position of every packed token within its own sequence: ``t − cu_seqlens[seq(t)]``.

    Parameters
    ----------
    cu_seqlens : torch.Tensor
        ``(B + 1,)`` sequence offsets into the packed tokens (flash-attn convention).
    total : int
        Packed length ``T`` (``cu_seqlens[-1]``).

    Returns
    -------
    torch.Tensor
        ``(T,)`` int64 positions, restarting at 0 with every sequence.

    Raises
    ------
    ShapeError
        As :func:`check_cu_seqlens`.

    Examples
    --------
    >>> positions_from_cu_seqlens(torch.tensor([0, 3, 5]), 5).tolist()
    [0, 1, 2, 0, 1]
    """
    cu = check_cu_seqlens(cu_seqlens, total)
    t = torch.arange(total, device=cu.device)
    seq = torch.searchsorted(cu[1:], t, right=True)
    return t - cu[seq]


def resolve_coords(
    x: torch.Tensor,
    coords,
    cu_seqlens,
    num_axes: int,
    check: Callable[[Any, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Per-token coordinates ``(*tokens, A)`` for ``x`` in ``(…, L, H, D)`` order.

    Given ``coords`` are passed through ``check(coords, x)`` and must have ``x``'s token shape;
    without them the token index (restarting per packed sequence with ``cu_seqlens``) stands on
    every axis. The one front end of every rotary encoder with the ``StructuralRoPE`` call shape.

    Parameters
    ----------
    x : torch.Tensor
        ``(B, L, H, D)`` or packed ``(T, H, D)``.
    coords : array-like or None
        ``(B, L, A)`` / ``(T, A)``.
    cu_seqlens : torch.Tensor or None
        Sequence offsets of packed input.
    num_axes : int
        ``A``.
    check : callable
        The encoder's own dtype / axis / finiteness check of given coordinates.

    Returns
    -------
    torch.Tensor
        ``(*tokens, A)`` coordinates.

    Raises
    ------
    ShapeError
        ``cu_seqlens`` with padded input, coordinates of another token shape, bad ``cu_seqlens``.

    Examples
    --------
    >>> resolve_coords(torch.zeros(5, 1, 2), None, torch.tensor([0, 3, 5]), 2, None)[:, 0].tolist()
    [0, 1, 2, 0, 1]
    """
    tokens = x.shape[:-2]
    if cu_seqlens is not None:
        if x.dim() != 3:
            raise ShapeError(f"cu_seqlens needs packed (T, H, D) inputs, given {tuple(x.shape)}")
        cu_seqlens = torch.as_tensor(cu_seqlens, device=x.device)
    if coords is None:
        if x.dim() == 3:
            pos = (
                positions_from_cu_seqlens(cu_seqlens, tokens[0])
                if cu_seqlens is not None
                else torch.arange(tokens[0], device=x.device)
            )
        else:
            pos = torch.arange(tokens[1], device=x.device).expand(tokens)
        return pos[..., None].expand(*tokens, num_axes)
    coords = check(coords, x)
    if coords.shape[:-1] != tokens:
        raise ShapeError(
            f"coords must have shape {(*tuple(tokens), num_axes)} (the token shape of q/k, "
            f"then {num_axes} axes), given {tuple(coords.shape)}"
        )
    if cu_seqlens is not None and not is_compiling():
        check_cu_seqlens(cu_seqlens, tokens[0])
    return coords


def check_same_tokens(q: torch.Tensor, k: torch.Tensor) -> None:
    """Raise :class:`~structpos.exceptions.ShapeError` unless ``q`` and ``k`` (``(…, L, H, D)``) share tokens.

    Examples
    --------
    >>> check_same_tokens(torch.zeros(1, 3, 2, 4), torch.zeros(1, 3, 1, 4))  # fewer key heads: fine
    >>> check_same_tokens(torch.zeros(1, 3, 2, 4), torch.zeros(1, 4, 2, 4))
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: q and k must have the same tokens (pass k_coords otherwise): q (1, 3, 2, 4), k (1, 4, 2, 4) in (…, L, H, D) order
    """
    if q.shape[:-2] != k.shape[:-2]:
        raise ShapeError(
            f"q and k must have the same tokens (pass k_coords otherwise): q {tuple(q.shape)}, k {tuple(k.shape)} "
            "in (…, L, H, D) order"
        )


def check_cu_seqlens(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """``cu_seqlens`` as int64 after checking it rises from 0 to ``total``.

    Parameters
    ----------
    cu_seqlens : torch.Tensor
        ``(B + 1,)`` sequence offsets.
    total : int
        Packed length it must end at.

    Returns
    -------
    torch.Tensor
        ``(B + 1,)`` int64 offsets.

    Raises
    ------
    ShapeError
        Not an integer tensor, not 1-D with at least 2 entries, wrong first or last entry, or
        decreasing (names where).

    Examples
    --------
    >>> check_cu_seqlens(torch.tensor([0, 3, 2, 5]), 5)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: cu_seqlens must be non-decreasing; it decreases at index 2
    """
    cu = torch.as_tensor(cu_seqlens)
    if cu.is_floating_point() or cu.is_complex():
        raise ShapeError(f"cu_seqlens must be an integer tensor, got {cu.dtype}")
    cu = cu.to(torch.int64)
    if cu.dim() != 1 or cu.numel() < 2:
        raise ShapeError(f"cu_seqlens must be 1-D with ≥ 2 entries, got shape {tuple(cu.shape)}")
    if int(cu[0]) != 0 or int(cu[-1]) != total:
        raise ShapeError(
            f"cu_seqlens must start at 0 and end at the packed length {total}, got {cu.tolist()[:3]}…{int(cu[-1])}"
        )
    bad = torch.nonzero(cu[1:] < cu[:-1])
    if bad.numel():
        raise ShapeError(f"cu_seqlens must be non-decreasing; it decreases at index {int(bad[0]) + 1}")
    return cu


def check_coords(coords: Any, num_axes: int, device: torch.device | None = None) -> torch.Tensor:
    """Coordinates ``(..., A)`` as int64 (integers, bools) or their own floating dtype, after checking them.

    Parameters
    ----------
    coords : array_like
        ``(..., A)`` integer or fp32/fp64 coordinates.
    num_axes : int
        ``A``.
    device : torch.device, optional
        Where to put them (default: a tensor stays where it is, other input goes to the CPU).

    Returns
    -------
    torch.Tensor
        The checked coordinates.

    Raises
    ------
    ShapeError
        Half precision (cannot hold larger integers exactly), complex, not ending in ``A``,
        or a non-finite entry (names its index).

    Examples
    --------
    >>> check_coords([[1, 2]], 2).dtype
    torch.int64
    >>> check_coords(torch.zeros(3, 2), 3)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: coords must end in num_axes = 3: expected (..., 3), given (3, 2)
    """
    coords = torch.as_tensor(coords, device=device)
    if coords.dtype in (torch.float16, torch.bfloat16):
        raise ShapeError(
            f"coords in {coords.dtype} cannot hold integers above 256/2048 exactly; "
            f"expected int64 or fp32 coords of shape (..., {num_axes}), given {tuple(coords.shape)}"
        )
    if coords.dtype == torch.bool:
        coords = coords.to(torch.int64)
    if coords.is_complex():
        raise ShapeError(f"coords must be real; given {coords.dtype} with shape {tuple(coords.shape)}")
    if coords.dim() < 1 or coords.shape[-1] != num_axes:
        raise ShapeError(
            f"coords must end in num_axes = {num_axes}: expected (..., {num_axes}), given {tuple(coords.shape)}"
        )
    check_finite_values(coords, "coords")
    if not coords.is_floating_point() and coords.dtype != torch.int64:
        coords = coords.to(torch.int64)
    return coords
