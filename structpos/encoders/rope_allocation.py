"""Frequency allocation of :class:`~structpos.encoders.StructuralRoPE`: the axis each pair or head follows.

Pair ``j`` of a head vector rotates by ``φ_{n,j} = ω_j · c_{n, axis(j)}`` under a one-hot
allocation. ``axis`` is chosen by

* ``"sectioned"`` — consecutive chunks: axis ``a`` takes pairs ``S_a ≤ j < S_a + s_a``
  (``S_a = s_0 + … + s_{a−1}``), so the highest frequencies (low ``j``) go to axis 0
  (Qwen2-VL M-RoPE, ``sections=[16, 24, 24]``);
* ``"interleaved"`` — ``axis(j) = j mod A`` (Qwen3-VL); with ``sections`` axis ``a ≥ 1`` keeps
  its pairs only while ``j < A·s_a``, the rest go to axis 0;
* ``"per_head"`` — every pair of head ``h`` follows one axis, ``s_a`` consecutive heads per axis.

The counts ``s`` are checked by one validator (:func:`~structpos.encoders._checks.axis_counts`):
explicit ``sections`` are ``A`` non-negative integers summing to ``D/2`` (or ``H``), and the
default near-equal split must give every axis at least one pair (or head) — an axis with none
would be read and silently ignored. The default interleaved split counts ``j mod A`` over
``j < D/2``, which is the same near-equal split, so both one-hot allocations read one rule.

Examples
--------
>>> pair_axes(6, 2, "sectioned").tolist(), pair_axes(6, 2, "interleaved").tolist()
([0, 0, 0, 1, 1, 1], [0, 1, 0, 1, 0, 1])
>>> head_axes(4, 2).tolist()
[0, 0, 1, 1]
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..exceptions import ShapeError, SpecError
from ._checks import as_real_tensor, axis_counts, check_choice, check_count
from ._options import ONE_HOT_ALLOCATIONS

__all__ = ["pair_axes", "head_axes", "mixing_matrix"]


def pair_axes(num_pairs: int, num_axes: int, allocation: str, sections: Sequence[int] | None = None) -> torch.Tensor:
    """Axis of every rotary pair under a one-hot allocation (see the module docstring).

    Parameters
    ----------
    num_pairs : int
        Pairs per head vector, ``P = D/2``.
    num_axes : int
        Coordinate axes ``A``.
    allocation : {"sectioned", "interleaved"}
        ``"sectioned"``: consecutive chunks of ``sections`` pairs per axis (default near-equal,
        the first axes take the remainder); ``"interleaved"``: pair ``j`` takes axis ``j mod A``,
        and with ``sections`` axis ``a ≥ 1`` keeps its pairs only while ``j < A·sections[a]``.
    sections : sequence of int, optional
        Pairs per axis; ``A`` non-negative entries summing to ``P`` (an explicit 0 leaves that
        axis unused on purpose).

    Returns
    -------
    torch.Tensor
        ``(P,)`` int64 axis indices; the highest frequencies (low ``j``) come first.

    Raises
    ------
    SpecError
        ``sections`` of the wrong length, sum or sign; another allocation; or, without
        ``sections``, fewer pairs than axes (some axis would get no pair and be ignored).

    Examples
    --------
    >>> pair_axes(8, 3, "sectioned").tolist()
    [0, 0, 0, 1, 1, 1, 2, 2]
    >>> pair_axes(8, 2, "interleaved", sections=[6, 2]).tolist()  # axis 1 keeps 2 pairs
    [0, 1, 0, 1, 0, 0, 0, 0]
    >>> pair_axes(4, 5, "sectioned")  # head_dim = 8 cannot serve 5 axes
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: head_dim=8 has 4 rotary pairs, too few for num_axes=5: axis 4 would get none and be ignored; use a larger head_dim or fewer axes, or give explicit sections
    """
    check_choice(allocation, "pair_axes allocation (one-hot per pair)", ONE_HOT_ALLOCATIONS)
    num_pairs, num_axes = check_count(num_pairs, "num_pairs"), check_count(num_axes, "num_axes")
    counts = axis_counts(
        sections,
        num_axes,
        num_pairs,
        f"head_dim/2 = {num_pairs}",
        f"head_dim={2 * num_pairs} has {num_pairs} rotary pairs",
    )
    if allocation == "sectioned":
        return torch.repeat_interleave(torch.arange(num_axes), torch.tensor(counts, dtype=torch.int64))
    j = torch.arange(num_pairs)
    axes = j % num_axes
    limit = torch.tensor([num_pairs] + [num_axes * c for c in counts[1:]])
    return torch.where(j < limit[axes], axes, torch.zeros_like(axes))


def head_axes(num_heads: int | None, num_axes: int, sections: Sequence[int] | None = None) -> torch.Tensor:
    """Axis of every head under ``allocation="per_head"``: ``sections[a]`` consecutive heads per axis.

    Parameters
    ----------
    num_heads : int
        Heads ``H`` (None is refused: ``per_head`` needs them).
    num_axes : int
        Coordinate axes ``A``.
    sections : sequence of int, optional
        Heads per axis; ``A`` non-negative entries summing to ``H`` (default near-equal, the
        first axes take the remainder).

    Returns
    -------
    torch.Tensor
        ``(H,)`` int64 axis indices.

    Raises
    ------
    SpecError
        ``sections`` of the wrong length, sum or sign; or, without ``sections``, fewer heads
        than axes.

    Examples
    --------
    >>> head_axes(5, 2, sections=[1, 4]).tolist()
    [0, 1, 1, 1, 1]
    >>> head_axes(2, 3)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: allocation='per_head' with num_heads=2 has 2 heads, too few for num_axes=3: axis 2 would get none and be ignored; use a larger head_dim or fewer axes, or give explicit sections
    """
    if num_heads is None:
        raise SpecError("allocation='per_head' needs num_heads")
    counts = axis_counts(
        sections,
        num_axes,
        num_heads,
        f"num_heads = {num_heads} (per-head sections)",
        f"allocation='per_head' with num_heads={num_heads} has {num_heads} heads",
    )
    return torch.repeat_interleave(torch.arange(num_axes), torch.tensor(counts, dtype=torch.int64))


def mixing_matrix(mixing, num_pairs: int, num_axes: int, num_heads: int | None = None) -> torch.Tensor:
    """The dense ``W`` of ``allocation="mixed"``: ``φ_{n,j} = ω_j · ⟨W_j, c_n⟩``.

    Parameters
    ----------
    mixing : array_like or None
        ``(P, A)`` or per head ``(H, P, A)``; None gives the interleaved one-hot matrix
        (``W[j, j mod A] = 1``, which needs ``P ≥ A``).
    num_pairs, num_axes : int
        ``P`` and ``A``.
    num_heads : int, optional
        ``H``, which a per-head matrix must match when given.

    Returns
    -------
    torch.Tensor
        A float32 copy of ``W``.

    Raises
    ------
    ShapeError
        Not a real tensor, or another shape.
    SpecError
        A non-finite entry; ``P < A`` without ``mixing``.

    Examples
    --------
    >>> mixing_matrix(None, 3, 2).tolist()
    [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    >>> mixing_matrix(torch.ones(2, 3, 2), 3, 2, num_heads=4)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: per-head mixing must have 4 heads, given 2
    """
    P, A = num_pairs, num_axes
    if mixing is None:  # the interleaved one-hot matrix (refuses P < A)
        w = torch.zeros(P, A)
        w[torch.arange(P), pair_axes(P, A, "interleaved")] = 1.0
        return w
    w = as_real_tensor(mixing, "mixing")
    if w.shape[-2:] != (P, A) or w.dim() not in (2, 3):
        raise ShapeError(f"mixing must have shape (P, A) = ({P}, {A}) or (H, P, A), given {tuple(w.shape)}")
    if not torch.isfinite(w).all():
        raise SpecError("mixing contains non-finite values")
    if w.dim() == 3 and num_heads is not None and w.shape[0] != num_heads:
        raise ShapeError(f"per-head mixing must have {num_heads} heads, given {w.shape[0]}")
    return w
