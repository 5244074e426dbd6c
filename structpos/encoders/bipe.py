r"""BiPE: absolute encoding of the position inside a segment + RoPE on the segment index.

Bilevel positional encoding (He et al. 2024) gives token ``n`` two coordinates
(:mod:`structpos.coords.bilevel`): its segment ``s(n)`` and its offset ``o(n)`` inside the
segment. The offset is encoded absolutely, once, on the input embeddings; the segment index
relatively, in every attention layer:

.. math::

    h_n = x_n + P[o(n)], \qquad
    \mathrm{logit}_{mn} = \big\langle R(\omega\, s(m))\, W_q h_m,\ R(\omega\, s(n))\, W_k h_n \big\rangle
    = \big\langle R(\omega\,(s(m) - s(n)))\, W_q h_m,\ W_k h_n \big\rangle

with ``P`` a learned table (offsets ``≥ max_offset`` share its last row) or the sinusoidal table
``P[o]_{2i} = \sin(o / 10000^{2i/d})``, ``P[o]_{2i+1} = \cos(o / 10000^{2i/d})``, and ``R`` the
RoPE rotation of :class:`~structpos.encoders.rope.StructuralRoPE` (one axis). Unaligned tokens
(offset ``-1``) get ``P = 0``.

**Singleton segments.** When every token is its own segment, ``s(n) = n`` and ``o(n) = 0``:
the rotary part is exactly 1-D RoPE on the token index, and the absolute part adds the same
vector ``P[0]`` to every token. A BiPE model then computes exactly what a RoPE model computes
on the embeddings ``x_n + P[0]`` — a RoPE model whose embedding table is shifted by the
constant ``P[0]`` (for a learned ``P`` this is a reparametrisation of the embedding table).
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import nn

from ..exceptions import ShapeError, SpecError
from ._checks import QKLayout, check_choice, check_count, check_table_size
from .rope import PairLayout, StructuralRoPE

__all__ = ["BiPE", "sinusoidal_table"]

Absolute = Literal["learned", "sinusoidal"]
ABSOLUTE_CODES: tuple[str, ...] = get_args(Absolute)


def sinusoidal_table(offsets: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Sinusoidal absolute encoding ``(…, dim)`` of integer offsets (Vaswani et al. 2017).

    ``P[o]_{2i} = sin(o · base^{-2i/dim})``, ``P[o]_{2i+1} = cos(o · base^{-2i/dim})``.

    Parameters
    ----------
    offsets : torch.Tensor
        Integer or real offsets.
    dim : int
        Even width.
    base : float
        Frequency base.

    Returns
    -------
    torch.Tensor
        ``offsets.shape + (dim,)`` float32.

    Raises
    ------
    SpecError
        ``dim`` not positive and even.

    Examples
    --------
    >>> sinusoidal_table(torch.tensor([0]), 4).tolist()
    [[0.0, 1.0, 0.0, 1.0]]
    """
    if dim < 2 or dim % 2:
        raise SpecError(f"sinusoidal_table: dim must be a positive even integer, got {dim}")
    inv = torch.exp(-math.log(base) * torch.arange(0, dim, 2, dtype=torch.float32, device=offsets.device) / dim)
    ang = offsets.to(torch.float32)[..., None] * inv
    return torch.stack([torch.sin(ang), torch.cos(ang)], dim=-1).flatten(-2)


class BiPE(StructuralRoPE):
    """Bilevel positional encoding: :meth:`embed` adds ``P[offset]``, ``forward`` rotates by segment.

    A one-axis :class:`~structpos.encoders.rope.StructuralRoPE` whose coordinate is the segment
    index, plus the absolute table of the intra-segment offset (see the module docstring).

    Parameters
    ----------
    head_dim : int
        Rotated width (even).
    dim : int
        Width of the token embeddings :meth:`embed` adds to.
    max_offset : int
        Learned table: offsets ``0..max_offset`` get rows, larger ones share row ``max_offset``.
    absolute : {"learned", "sinusoidal"}
        The absolute encoding of the offset.
    base, layout, learnable, inv_freq, qk_layout
        As :class:`~structpos.encoders.rope.StructuralRoPE` (``inv_freq``: a model's own frequencies).

    Raises
    ------
    SpecError
        Unknown ``absolute``, ``dim < 1``, ``max_offset < 0``, an odd ``dim`` with sinusoidal;
        otherwise as :class:`~structpos.encoders.rope.StructuralRoPE`.

    Notes
    -----
    ``forward(q, k, segment, ...)``: ``segment`` ``(B, L)`` (or ``(B, L, 1)``; ``(T,)`` packed) segment
    indices; everything else as :meth:`StructuralRoPE.forward`. ``embed(x, offset)``: ``x``
    ``(..., L, dim)``, ``offset`` ``(..., L)``.

    Examples
    --------
    Two sentences of 3 and 2 tokens: segments ``0 0 0 1 1``, offsets ``0 1 2 0 1``.

    >>> _ = torch.manual_seed(0)
    >>> bipe = BiPE(head_dim=8, dim=16, absolute="sinusoidal")
    >>> segment, offset = torch.tensor([[0, 0, 0, 1, 1]]), torch.tensor([[0, 1, 2, 0, 1]])
    >>> h = bipe.embed(torch.zeros(1, 5, 16), offset)
    >>> torch.equal(h[0, 0], h[0, 3])  # same offset, same absolute code
    True
    >>> q, k = torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8)
    >>> q_rot, k_rot = bipe(q, k, segment)
    >>> torch.equal(q_rot[0, :3], bipe(q, k, torch.zeros(1, 5, dtype=torch.int64))[0][0, :3])
    True

    Every token its own segment: exactly 1-D RoPE on the token index.

    >>> pos = torch.arange(5)[None]
    >>> torch.equal(bipe(q, k, pos)[0], StructuralRoPE(8, 1)(q, k, pos[..., None])[0])
    True
    """

    def __init__(
        self,
        head_dim: int,
        dim: int,
        max_offset: int = 512,
        absolute: Absolute = "learned",
        base: float = 10000.0,
        layout: PairLayout = "half",
        learnable: bool = False,
        *,
        inv_freq: torch.Tensor | None = None,
        qk_layout: QKLayout = "blhd",
    ):
        check_choice(absolute, "BiPE: absolute", ABSOLUTE_CODES)
        dim, max_offset = check_count(dim, "BiPE: dim"), check_count(max_offset, "BiPE: max_offset", minimum=0)
        check_table_size("BiPE offset table (max_offset + 2) × dim", max_offset + 2, dim)
        if absolute == "sinusoidal" and dim % 2:
            raise SpecError(f"BiPE: sinusoidal offsets need an even dim, got {dim}")
        super().__init__(
            head_dim, 1, base=base, layout=layout, learnable=learnable, inv_freq=inv_freq, qk_layout=qk_layout
        )
        self.dim, self.max_offset, self.absolute = int(dim), int(max_offset), absolute
        self.offset_table: nn.Embedding | None = None
        if absolute == "learned":
            self.offset_table = nn.Embedding(self.max_offset + 2, self.dim, padding_idx=self.max_offset + 1)
            with torch.no_grad():
                self.offset_table.weight.normal_(0.0, 0.02)
                self.offset_table.weight[self.max_offset + 1].zero_()

    def extra_repr(self) -> str:
        return f"dim={self.dim}, absolute={self.absolute!r}, max_offset={self.max_offset}, " + super().extra_repr()

    def absolute_encoding(self, offset: torch.Tensor) -> torch.Tensor:
        """``P[offset]``: ``(..., L, dim)``, zero where ``offset == -1``.

        Parameters
        ----------
        offset : torch.Tensor
            ``(..., L)`` integer offsets inside the segments, ``-1`` for unaligned tokens.

        Returns
        -------
        torch.Tensor
            ``(..., L, dim)``.

        Raises
        ------
        ShapeError
            Float offsets or an offset below ``-1``.

        Examples
        --------
        >>> bipe = BiPE(head_dim=4, dim=4, absolute="sinusoidal")
        >>> bipe.absolute_encoding(torch.tensor([-1, 0])).tolist()
        [[0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0]]
        """
        offset = torch.as_tensor(offset, device=self.inv_freq.device)
        if offset.is_floating_point() or offset.is_complex():
            raise ShapeError(f"BiPE offsets must be integers, given {offset.dtype}")
        offset = offset.to(torch.int64)
        bad = torch.nonzero(offset < -1)
        if bad.numel():
            raise ShapeError(f"BiPE offset {int(offset[tuple(bad[0])])} at {tuple(bad[0].tolist())} is below -1")
        if self.offset_table is not None:
            rows = torch.where(offset < 0, self.max_offset + 1, offset.clamp(max=self.max_offset))
            return self.offset_table(rows)
        table = sinusoidal_table(offset.clamp(min=0), self.dim)
        return torch.where((offset < 0)[..., None], torch.zeros_like(table), table)

    def embed(self, x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        """``x + P[offset]`` (the absolute half of BiPE, once on the input embeddings).

        Parameters
        ----------
        x : torch.Tensor
            ``(..., L, dim)`` token embeddings.
        offset : torch.Tensor
            ``(..., L)`` offsets.

        Returns
        -------
        torch.Tensor
            ``(..., L, dim)``.

        Raises
        ------
        ShapeError
            ``x`` does not have the offsets' shape plus ``dim``; as :meth:`absolute_encoding`.

        Examples
        --------
        >>> bipe = BiPE(head_dim=4, dim=2, absolute="sinusoidal")
        >>> bipe.embed(torch.ones(1, 2), torch.tensor([0])).tolist()
        [[1.0, 2.0]]
        """
        enc = self.absolute_encoding(offset)
        if x.shape != enc.shape:
            raise ShapeError(f"x must have shape {tuple(enc.shape)} (offsets + dim), given {tuple(x.shape)}")
        return x + enc.to(x.dtype)

    def _segment_coords(self, q: torch.Tensor, segment):
        if segment is None:
            return None
        segment = torch.as_tensor(segment, device=q.device)
        return segment[..., None] if segment.dim() == q.dim() - 2 else segment

    def forward(self, q, k, coords=None, cu_seqlens=None, *, mask=None, k_coords=None):
        """RoPE of ``q``, ``k`` on the segment index ``coords`` (``(B, L)``, ``(B, L, 1)`` or ``(T,)``).

        Raises
        ------
        ShapeError
            As :meth:`StructuralRoPE.forward`.
        """
        return super().forward(
            q,
            k,
            self._segment_coords(q, coords),
            cu_seqlens,
            mask=mask,
            k_coords=self._segment_coords(k, k_coords),
        )
