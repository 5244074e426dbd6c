"""Shared rotation math: pair layouts, the rotation itself, and input checks.

A rotary encoding splits a head vector ``x ∈ ℝ^D`` into ``P = D/2`` pairs and rotates pair
``j`` by an angle ``φ_j``::

    (a, b) ↦ (a·cos φ_j − b·sin φ_j,  b·cos φ_j + a·sin φ_j)        # i.e. (a + ib)·e^{iφ_j}

Two pair layouts are in use and are channel permutations of each other:

* ``"half"`` (NeoX / HF ``rotate_half``): pair ``j`` is ``(x_j, x_{j+P})``;
* ``"interleaved"`` (GPT-J / lucidrains): pair ``j`` is ``(x_{2j}, x_{2j+1})``.

:func:`layout_permutation` gives the index map between them. Because the rotation of pair
``j`` by ``φ`` and of the same pair by ``ψ`` compose to ``φ + ψ``, ``⟨R(φ_m)q, R(φ_n)k⟩`` only
depends on ``φ_m − φ_n`` — the relative property every encoder in this package relies on.
"""

from __future__ import annotations

import torch

from ..exceptions import ShapeError, SpecError
from ._checks import check_choice, check_head_dim, check_real, is_compiling
from ._options import LAYOUTS

__all__ = ["apply_rotary", "layout_permutation", "check_layout", "head_group_slice", "rope_inv_freq", "LAYOUTS"]


def check_layout(layout: str) -> str:
    """``layout`` itself after checking it is ``"half"`` or ``"interleaved"`` (else SpecError).

    Examples
    --------
    >>> check_layout("half")
    'half'
    """
    return check_choice(layout, "layout", LAYOUTS)


def rope_inv_freq(head_dim: int, base: float = 10000.0, device=None) -> torch.Tensor:
    """``ω_j = base^{−2j/D}``, ``j = 0..D/2−1``, in fp32, computed exactly as HF Llama does.

    Parameters
    ----------
    head_dim : int
        Rotated width ``D`` (positive, even).
    base : float
        Frequency base (``> 1``).
    device : torch.device, optional
        Where the tensor goes.

    Returns
    -------
    torch.Tensor
        ``(D/2,)`` float32 frequencies, decreasing from 1.

    Raises
    ------
    SpecError
        ``head_dim`` not a positive even integer, ``base`` not a finite number ``> 1``, or a
        ``base`` so large that a frequency underflows to 0 in float32 (that pair would not rotate).

    Examples
    --------
    >>> rope_inv_freq(8, base=16.0).tolist()
    [1.0, 0.5, 0.25, 0.125]
    """
    head_dim = check_head_dim(head_dim)
    base = check_real(base, "base", low=1.0, low_open=True)
    exps = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim
    inv = 1.0 / (base**exps)
    dead = torch.nonzero(~(inv > 0))
    if dead.numel():
        raise SpecError(
            f"base={base} is too large for head_dim={head_dim}: frequency {int(dead[0])} underflows to 0 in float32, "
            "so pairs from there on would not rotate"
        )
    return inv


def layout_permutation(head_dim: int) -> torch.Tensor:
    """Index ``perm`` with ``x_interleaved = x_half[..., perm]``.

    ``perm[2j] = j`` and ``perm[2j+1] = j + D/2``; its inverse is ``perm.argsort()``.

    Parameters
    ----------
    head_dim : int
        ``D`` (even).

    Returns
    -------
    torch.Tensor
        ``(D,)`` int64 index.

    Examples
    --------
    >>> perm = layout_permutation(4)
    >>> perm.tolist()
    [0, 2, 1, 3]

    Rotating in the ``"half"`` layout, then permuting, is rotating the permuted vector in the
    ``"interleaved"`` layout:

    >>> x, angle = torch.arange(4.0), torch.tensor([0.3, 1.1])
    >>> half = apply_rotary(x, angle.cos(), angle.sin(), "half")
    >>> torch.allclose(half[perm], apply_rotary(x[perm], angle.cos(), angle.sin(), "interleaved"))
    True
    """
    half = head_dim // 2
    return torch.stack([torch.arange(half), torch.arange(half, head_dim)], dim=-1).reshape(-1)


def _split(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    half = x.shape[-1] // 2
    if layout == "half":
        return x[..., :half], x[..., half:]
    pairs = x.unflatten(-1, (half, 2))
    return pairs[..., 0], pairs[..., 1]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half") -> torch.Tensor:
    """Rotate every pair of ``x`` (``(..., D)``) by the angle whose ``cos``/``sin`` are given.

    ``cos`` and ``sin`` have ``D/2`` entries in the last dimension (one per pair, *not* the
    ``cat(f, f)`` duplication HF uses) and broadcast against ``x[..., :D/2]``. They are cast to
    ``x.dtype`` (as HF does); compute them in fp32 beforehand. Returns a new tensor.

    Without autograd the result is written into one preallocated buffer (4 fused passes, no
    ``rotate_half`` concatenation); with autograd, or under ``torch.compile`` (which fuses it
    anyway), the same formula is built from functional ops.

    Parameters
    ----------
    x : torch.Tensor
        ``(..., D)`` floating tensor, ``D`` even.
    cos, sin : torch.Tensor
        ``(..., D/2)`` cosines and sines of the angles, broadcasting against ``x``'s pairs.
    layout : {"half", "interleaved"}
        How pairs sit in ``x``.

    Returns
    -------
    torch.Tensor
        The rotated ``x`` (same shape and dtype).

    Raises
    ------
    ShapeError
        ``x`` not floating or of odd width, or ``cos``/``sin`` without ``D/2`` entries.
    SpecError
        Unknown ``layout``.

    Examples
    --------
    >>> x = torch.tensor([[1.0, 0.0]])
    >>> apply_rotary(x, torch.tensor([[0.0]]), torch.tensor([[1.0]]))  # a quarter turn
    tensor([[0., 1.]])
    """
    check_layout(layout)
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        given = f"{x.dtype} with shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ShapeError(f"apply_rotary: x must be a floating tensor (..., D); given {given}")
    if x.shape[-1] % 2:
        raise ShapeError(f"apply_rotary: last dimension of x must be even, given shape {tuple(x.shape)}")
    half = x.shape[-1] // 2
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise ShapeError(
            f"apply_rotary: cos/sin need {half} entries (one per pair) in the last dimension, "
            f"got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    x1, x2 = _split(x, layout)
    if is_compiling() or (torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)):
        r1 = x1 * cos - x2 * sin
        r2 = x2 * cos + x1 * sin
        if layout == "half":
            return torch.cat([r1, r2], dim=-1)
        return torch.stack([r1, r2], dim=-1).flatten(-2)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    o1, o2 = _split(out, layout)
    torch.mul(x1, cos, out=o1)
    o1.addcmul_(x2, sin, value=-1)
    torch.mul(x2, cos, out=o2)
    o2.addcmul_(x1, sin)
    return out


def head_group_slice(table: torch.Tensor, heads: int) -> torch.Tensor:
    """A per-head cos/sin ``table`` ``(..., H', P)`` cut down to a tensor with ``heads`` heads.

    ``H' ∈ {1, heads}`` passes through. Otherwise (grouped-query attention: ``H'`` query heads,
    ``heads`` key heads, groups of ``g = H'/heads`` consecutive query heads share a key head)
    every group must carry one rotation, which the key head then takes.

    Parameters
    ----------
    table : torch.Tensor
        ``(..., H', P)`` cos or sin.
    heads : int
        Heads of the tensor to rotate.

    Returns
    -------
    torch.Tensor
        ``(..., heads, P)`` (or the table itself).

    Raises
    ------
    ShapeError
        ``heads`` does not divide ``H'``.
    SpecError
        The rotation differs inside a group (checked outside ``torch.compile``).

    Examples
    --------
    >>> head_group_slice(torch.tensor([[1.0], [1.0], [2.0], [2.0]]), 2).tolist()
    [[1.0], [2.0]]
    >>> head_group_slice(torch.ones(5, 1, 4), 8).shape  # one rotation for every head
    torch.Size([5, 1, 4])
    """
    total = table.shape[-2]
    if total in (1, heads):
        return table
    if total % heads:
        raise ShapeError(f"k has {heads} heads, which does not divide the {total} heads of the encoding")
    group = total // heads
    grouped = table.unflatten(-2, (heads, group))
    if not is_compiling() and not torch.equal(grouped, grouped[..., :1, :].expand_as(grouped)):
        raise SpecError(
            f"per-head encoding differs within a group of {group} query heads sharing one key head; "
            "choose sections that are multiples of the group size"
        )
    return grouped[..., 0, :]
