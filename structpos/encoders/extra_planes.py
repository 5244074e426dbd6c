"""ExtraPlaneRoPE: full 1-D RoPE on the head, structural axes on extra planes.

Splitting one head's rotary pairs among ``A`` axes (:class:`~.rope.StructuralRoPE`'s
``sectioned`` / ``interleaved`` allocations) leaves the token index only a fraction of the
frequency ladder: with three axes it keeps one pair in three, and a model that loses most of
1-D RoPE's ladder loses most of its 1-D skill. Here the token index keeps **every** pair of
the ``D``-wide head and the structural axes rotate ``E`` *extra* dimensions appended to
``q`` and ``k`` (the attention's q/k projections produce ``D + E`` per head)::

    q = [q_t ; q_s],   k = [k_t ; k_s]
    ⟨q̃_m, k̃_n⟩ = ⟨R_1(m) q_t, R_1(n) k_t⟩ + ⟨R_S(c_m) q_s, R_S(c_n) k_s⟩

``R_1`` is exactly 1-D RoPE (``ω_j = base^{−2j/D}``, ``j < D/2``) on the token axis and
``R_S`` is :class:`~.rope.StructuralRoPE` (``E`` wide, ``interleaved`` by default) on the
other axes. Both terms depend on coordinate differences only. With constant structural
coordinates the second term is a position-free content term, so a *zero-structure* input
gives exactly 1-D RoPE plus ``E`` unrotated dimensions: structure can add to the 1-D
encoding but never takes its ladder away. The value vectors keep width ``D``.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from ..exceptions import ShapeError, SpecError
from ._checks import check_count, check_head_dim
from .rope import StructuralRoPE

__all__ = ["ExtraPlaneRoPE"]


class ExtraPlaneRoPE(nn.Module):
    """1-D RoPE on ``head_dim`` dimensions plus structural RoPE on ``extra_dim`` more.

    Parameters
    ----------
    head_dim : int
        ``D``, the width rotated by the token index (even).
    extra_dim : int
        ``E``, the width of the extra planes rotated by the structural axes (even, ≥ 2).
    num_axes : int
        Coordinate axes ``A ≥ 2``: the token index and ``A − 1`` structural axes.
    token_axis : int
        Which coordinate axis is the token index (default the last, as in ``(depth, sibling, index)``).
    base : float
        Frequency base of the 1-D part.
    extra_base : float, optional
        Frequency base of the structural part (default ``base``).
    allocation : {"interleaved", "sectioned"}
        How the extra planes' pairs are shared among the structural axes.

    Notes
    -----
    ``forward(q, k, coords, mask=None)`` takes ``q, k`` of shape ``(B, L, H, D + E)`` and
    ``coords`` ``(B, L, A)``; it returns both rotated, same shapes.

    Raises
    ------
    SpecError
        ``num_axes < 2``, ``token_axis`` outside ``[−A, A)``, or fewer extra pairs than structural axes.
    ShapeError
        ``q``/``k`` whose last dimension is not ``D + E``, or ``coords`` without ``A`` axes.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> rope = ExtraPlaneRoPE(head_dim=8, extra_dim=4, num_axes=3)
    >>> q, k = torch.randn(1, 5, 2, 12), torch.randn(1, 5, 2, 12)
    >>> depth_sibling = torch.randint(0, 4, (1, 5, 2))
    >>> coords = torch.cat([depth_sibling, torch.arange(5)[None, :, None]], -1)
    >>> q_rot, k_rot = rope(q, k, coords)
    >>> q_rot.shape
    torch.Size([1, 5, 2, 12])

    The first ``D`` dimensions are exactly 1-D RoPE on the token index, whatever the structure:

    >>> rope_1d = StructuralRoPE(head_dim=8, num_axes=1)
    >>> torch.equal(q_rot[..., :8], rope_1d(q[..., :8], k[..., :8], coords[..., 2:])[0])
    True
    """

    _structural_axes: torch.Tensor  # a buffer: the coordinate axes the extra planes read

    def __init__(
        self,
        head_dim: int,
        extra_dim: int,
        num_axes: int,
        token_axis: int = -1,
        base: float = 10000.0,
        extra_base: float | None = None,
        allocation: Literal["interleaved", "sectioned"] = "interleaved",
    ):
        super().__init__()
        check_head_dim(head_dim)
        extra_dim = check_head_dim(extra_dim, "extra_dim")
        if not check_count(num_axes, "num_axes") >= 2:
            raise SpecError(f"ExtraPlaneRoPE needs num_axes ≥ 2 (token index + structure), got {num_axes}")
        if not check_count(token_axis, "token_axis", minimum=-num_axes) < num_axes:
            raise SpecError(f"token_axis {token_axis} is outside the {num_axes} axes")
        if extra_dim < 2 * (num_axes - 1):
            raise SpecError(
                f"extra_dim {extra_dim} gives {extra_dim // 2} pairs for {num_axes - 1} structural axes; "
                "every axis needs at least one pair"
            )
        self.head_dim, self.extra_dim, self.num_axes = int(head_dim), int(extra_dim), int(num_axes)
        self.token_axis = token_axis % num_axes
        self.token_rope = StructuralRoPE(head_dim, 1, base=base)
        self.extra_rope = StructuralRoPE(
            extra_dim, num_axes - 1, allocation=allocation, base=base if extra_base is None else extra_base
        )
        keep = [a for a in range(num_axes) if a != self.token_axis]
        self._structural_axes: torch.Tensor
        self.register_buffer("_structural_axes", torch.tensor(keep, dtype=torch.int64), persistent=False)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, extra_dim={self.extra_dim}, num_axes={self.num_axes}, token_axis={self.token_axis}"

    def _split_coords(self, coords: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if coords.shape[-1] != self.num_axes:
            raise ShapeError(f"coords must have {self.num_axes} axes on the last dimension, got {tuple(coords.shape)}")
        token = coords[..., self.token_axis : self.token_axis + 1]
        return token, coords.index_select(-1, self._structural_axes)

    def forward(self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor, *, mask: torch.Tensor | None = None):
        """Return ``(q_rot, k_rot)``: the first ``D`` dimensions by 1-D RoPE, the last ``E`` by structure.

        Parameters
        ----------
        q, k : torch.Tensor
            ``(B, L, H, D + E)``.
        coords : torch.Tensor
            ``(B, L, A)`` integer or real coordinates.
        mask : torch.Tensor, optional
            ``(B, L)`` bool, True = real token (padding is not rotated).

        Returns
        -------
        tuple of torch.Tensor
            ``(q_rot, k_rot)``, the shapes of ``q`` and ``k``.
        """
        width = self.head_dim + self.extra_dim
        for name, x in (("q", q), ("k", k)):
            if x.shape[-1] != width:
                raise ShapeError(
                    f"{name} must have head_dim + extra_dim = {width} on the last dimension, got {tuple(x.shape)}"
                )
        token, structural = self._split_coords(coords)
        d = self.head_dim
        qt, kt = self.token_rope(q[..., :d], k[..., :d], token, mask=mask)
        qs, ks = self.extra_rope(q[..., d:], k[..., d:], structural, mask=mask)
        return torch.cat([qt, qs], -1), torch.cat([kt, ks], -1)
