"""STRING: separable translationally invariant rotary encoding with a learned orthogonal basis.

Token ``n`` with coordinates ``c_n ∈ ℝ^A`` is mapped by

    R(c) = exp(Σ_a c_a L_a),        L_a = P G_a Pᵀ,        so  R(c) = P · RoPE(c) · Pᵀ

where ``G_a`` are the block-diagonal skew generators of N-axis RoPE (pair ``j`` turns at rate
``ω_j W[j, a]``, the allocations of :class:`~structpos.encoders.StructuralRoPE`) and ``P`` is a
learned orthogonal matrix, parametrised by the Cayley map of a learned skew matrix ``S``:
``P = (I − S)⁻¹ (I + S)``. The ``L_a`` are skew-symmetric and commute (they are simultaneously
block-diagonalised by ``P``), so ``R(c_m)ᵀ R(c_n) = R(c_n − c_m)``: scores depend on coordinate
differences only, exactly, for any ``P``. ``S = 0`` (the initial value) gives ``P = I``: exactly
:class:`~structpos.encoders.StructuralRoPE`. Cost: two ``D × D`` products per token on top of
RoPE, plus one ``D × D`` solve per call.

Reference: Schenck et al., "Learning the RoPEs: Better 2D and 3D Position Encodings with
STRING" (2025), Cayley-STRING.
"""

from __future__ import annotations

from typing import Literal, Sequence

import torch
from torch import nn

from ..exceptions import SpecError
from ._checks import QKLayout, check_flag, check_table_size
from ._learned import LearnedRotary, cayley, rope_generator, skew
from ._rotary import apply_rotary
from .rope import StructuralRoPE

__all__ = ["STRING"]


class STRING(LearnedRotary):
    """Cayley-STRING: ``R(c) = P · RoPE(c) · Pᵀ`` with a learned orthogonal ``P`` (see the module docstring).

    Parameters
    ----------
    head_dim : int
        ``D`` (even).
    num_axes : int
        Coordinate axes ``A``.
    allocation : {"sectioned", "interleaved", "mixed"}
        Frequency allocation of the inner RoPE (as :class:`~structpos.encoders.StructuralRoPE`).
    sections : sequence of int, optional
        Pairs per axis.
    base : float
        ``ω_j = base^{−2j/D}``.
    layout : {"half", "interleaved"}
        Pair layout of the inner RoPE (the channels ``P = I`` leaves in place).
    mixing : torch.Tensor, optional
        ``(P, A)`` mixing matrix for ``"mixed"``.
    learnable_freqs : bool
        The inner RoPE's frequencies (or mixing matrix) are parameters too.
    qk_layout : {"blhd", "bhld"}
        Where the head axis of ``q``/``k`` is.

    Attributes
    ----------
    basis_param : torch.nn.Parameter
        ``(D, D)`` unconstrained; ``S = W − Wᵀ``; zeros at construction.
    rope : StructuralRoPE
        The inner RoPE.

    Raises
    ------
    SpecError
        ``allocation="per_head"`` (the basis is shared by the heads), or as ``StructuralRoPE``.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> string = STRING(head_dim=8, num_axes=2)
    >>> q, k = torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8)
    >>> coords = torch.tensor([[[0, 0], [1, 0], [1, 1], [2, 0], [2, 1]]])

    At initialisation ``P = I``: exactly N-axis RoPE.

    >>> torch.allclose(string(q, k, coords)[0], StructuralRoPE(8, 2)(q, k, coords)[0], atol=1e-6)
    True

    With any learned basis the scores still depend only on coordinate differences:

    >>> with torch.no_grad():
    ...     _ = string.basis_param.normal_()
    >>> def scores(c):
    ...     qr, kr = string(q, k, c)
    ...     return torch.einsum("blhd,bmhd->bhlm", qr, kr)
    >>> torch.allclose(scores(coords), scores(coords + torch.tensor([3, -7])), atol=1e-5)
    True

    The map is the matrix exponential of the commuting generators ``L_a``:

    >>> c = torch.tensor([0.5, -1.5])
    >>> r = torch.linalg.matrix_exp(torch.einsum("a,aij->ij", c, string.generators()))
    >>> torch.allclose(string.rotation(c), r, atol=1e-5)
    True
    """

    def __init__(
        self,
        head_dim: int,
        num_axes: int,
        allocation: Literal["sectioned", "interleaved", "mixed"] = "sectioned",
        sections: Sequence[int] | None = None,
        base: float = 10000.0,
        layout: Literal["half", "interleaved"] = "half",
        mixing: torch.Tensor | None = None,
        learnable_freqs: bool = False,
        qk_layout: QKLayout = "blhd",
    ):
        super().__init__(head_dim, num_axes, qk_layout)
        learnable_freqs = check_flag(learnable_freqs, "learnable_freqs")
        check_table_size("STRING basis head_dim × head_dim", head_dim, head_dim)
        if allocation == "per_head":
            raise SpecError("STRING shares one basis across heads: allocation='per_head' is not supported")
        self.rope = StructuralRoPE(
            head_dim, num_axes, allocation, sections, base, layout, mixing=mixing, learnable=learnable_freqs
        )
        self.layout = layout
        self.basis_param = nn.Parameter(torch.zeros(head_dim, head_dim))

    def basis(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The orthogonal ``P = cayley(W − Wᵀ)`` in ``dtype``, ``(D, D)``.

        Examples
        --------
        >>> torch.equal(STRING(4, 1).basis(), torch.eye(4))
        True
        """
        with torch.autocast(device_type=self.basis_param.device.type, enabled=False):
            return cayley(skew(self.basis_param.to(dtype)))

    def generators(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The commuting skew generators ``L_a = P G_a Pᵀ``, ``(A, D, D)``.

        Examples
        --------
        >>> g = STRING(4, 2).generators()
        >>> g.shape, torch.allclose(g[0] @ g[1], g[1] @ g[0])
        (torch.Size([2, 4, 4]), True)
        """
        p = self.basis(dtype)
        g = rope_generator(self.rope._angle_matrix(dtype)[0].to(p.device), self.layout)
        return p @ g @ p.T

    def _transform(self, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        p = self.basis(self.compute_dtype(x, coords)).to(device=x.device, dtype=x.dtype)
        cos, sin = self.rope.cos_sin(coords, x.dtype)
        return apply_rotary(x @ p, cos, sin, self.layout) @ p.T
