"""LieRE: rotations from learned dense skew-symmetric generators through the matrix exponential.

Token ``n`` with coordinates ``c_n ∈ ℝ^A`` is mapped by

    R(c) = exp(Σ_a c_a S_a),        S_a = W_a − W_aᵀ  (dense, learned, D × D)

a rotation (``R(c) ∈ SO(D)``, norms are kept). Scores ``qᵀ R(c_m)ᵀ R(c_n) k`` depend on
``c_n − c_m`` only when the ``S_a`` commute (ComRoPE's theorem); LieRE does not constrain them,
so with two or more axes and non-commuting generators the encoding is **not** exactly relative —
shifting every coordinate changes the scores. With one axis it is always relative
(``exp(xS)ᵀ exp(yS) = exp((y − x)S)``). Block-diagonal generators with ``2 × 2`` blocks are
N-axis RoPE; ``init="rope"`` starts there (and so starts relative), ``init="random"`` draws
``W_a ~ N(0, init_std²)``.

Cost: one ``D × D`` matrix exponential per token, then a ``D × D`` product per head — the most
expensive of the rotary encoders. The exponent ``Σ_a c_a S_a`` and its exponential are float64
whatever the input dtype (``torch.linalg.matrix_exp`` and one Newton–Schulz step,
:func:`~structpos.encoders._learned.rotation_exp`); only ``R(c)`` is cast, for the product. A float32
exponent at ``|c| ≈ 10⁷`` is off by up to ~1 rad and its float32 exponential is no rotation (norms grew
by 10¹⁰, then inf/nan); in float64 ``R(c)`` stays orthogonal to float32 rounding and relative
(one axis) to ~1e-7 up to ``|c| ≈ 10⁸``. The float64 exponential costs ~2× the float32 one on a CPU
(``D = 32``); ``forward(q, k)`` takes one for both ``q`` and ``k``, so it costs what it did (a lone
``rotate`` costs ~2×). See
:class:`~structpos.encoders.ComRoPE` (``b × b`` blocks) and :class:`~structpos.encoders.STRING`
for commuting, cheaper alternatives.

Reference: Ostmeier et al., "LieRE: Generalizing Rotary Position Encodings" (2024).
"""

from __future__ import annotations

from typing import Literal, Sequence

import torch
from torch import nn

from ..exceptions import SpecError
from ._checks import MAX_INIT_STD, QKLayout, check_choice, check_real, check_table_size
from ._learned import LearnedRotary, apply_matrices, rope_generator, rotation_exp, skew
from ._rotary import check_layout
from .rope import StructuralRoPE

__all__ = ["LieRE"]


class LieRE(LearnedRotary):
    """``R(c) = exp(Σ_a c_a S_a)`` with learned dense skew-symmetric ``S_a`` (see the module docstring).

    Parameters
    ----------
    head_dim : int
        ``D`` (even).
    num_axes : int
        Coordinate axes ``A``.
    init : {"rope", "random"}
        Start at N-axis RoPE (block-diagonal generators of ``allocation``) or at random
        ``W_a ~ N(0, init_std²)``.
    init_std : float
        Standard deviation of the random initialisation, in ``[0, MAX_INIT_STD]`` (1e30: the float32
        parameters stay finite).
    allocation : {"sectioned", "interleaved"}
        RoPE allocation of ``init="rope"``.
    sections : sequence of int, optional
        Pairs per axis of ``init="rope"``.
    base : float
        RoPE base of ``init="rope"``.
    layout : {"half", "interleaved"}
        Pair layout of ``init="rope"``.
    qk_layout : {"blhd", "bhld"}
        Where the head axis of ``q``/``k`` is.

    Attributes
    ----------
    generator_params : torch.nn.Parameter
        ``(A, D, D)`` the ``W_a``.
    exact_coords : bool
        True: coordinates reach the exponent in float64.

    Raises
    ------
    SpecError
        Unknown ``init``.

    Examples
    --------
    >>> import torch
    >>> from structpos.encoders import StructuralRoPE
    >>> _ = torch.manual_seed(0)
    >>> q, k = torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8)
    >>> coords = torch.randint(0, 6, (1, 5, 2))

    The RoPE initialisation is N-axis RoPE:

    >>> liere = LieRE(8, 2)
    >>> torch.allclose(liere(q, k, coords)[0], StructuralRoPE(8, 2)(q, k, coords)[0], atol=1e-5)
    True

    Random dense generators do not commute: a common shift of the coordinates changes the scores.

    >>> liere = LieRE(8, 2, init="random", init_std=0.3)
    >>> def scores(c):
    ...     qr, kr = liere(q, k, c)
    ...     return torch.einsum("blhd,bmhd->bhlm", qr, kr)
    >>> (scores(coords) - scores(coords + torch.tensor([2, 3]))).abs().max() > 0.1
    tensor(True)
    """

    exact_coords = True

    def __init__(
        self,
        head_dim: int,
        num_axes: int,
        init: Literal["rope", "random"] = "rope",
        init_std: float = 0.02,
        allocation: Literal["sectioned", "interleaved"] = "sectioned",
        sections: Sequence[int] | None = None,
        base: float = 10000.0,
        layout: Literal["half", "interleaved"] = "half",
        qk_layout: QKLayout = "blhd",
    ):
        super().__init__(head_dim, num_axes, qk_layout)
        check_choice(init, "init", ("rope", "random"))
        init_std = check_real(init_std, "init_std", low=0.0, high=MAX_INIT_STD)
        check_real(base, "base", low=1.0, low_open=True)  # checked also with init="random"
        check_table_size("LieRE generators num_axes × head_dim × head_dim", num_axes, head_dim, head_dim)
        if init == "rope":
            check_layout(layout)
            rope = StructuralRoPE(head_dim, num_axes, allocation, sections, base, layout)
            w = rope_generator(rope._angle_matrix(torch.float32)[0], layout) / 2  # W − Wᵀ = G
        elif init == "random":
            w = torch.randn(num_axes, head_dim, head_dim) * init_std
        else:
            raise SpecError(f"init must be 'rope' or 'random', got {init!r}")
        self.generator_params = nn.Parameter(w)

    def generators(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The skew-symmetric ``S_a = W_a − W_aᵀ``, ``(A, D, D)``.

        Examples
        --------
        >>> g = LieRE(4, 2, init="random").generators()
        >>> torch.equal(g, -g.transpose(-1, -2))
        True
        """
        return skew(self.generator_params.to(dtype))

    def rotation(self, coords: torch.Tensor) -> torch.Tensor:
        """The matrices ``R(c) = exp(Σ_a c_a S_a)``, ``(…, D, D)``, for coordinates ``(…, A)``.

        Computed in float64, returned in fp32 (fp64 for fp64 coordinates or parameters).

        Examples
        --------
        >>> r = LieRE(4, 2, init="random").rotation(torch.tensor([1.0, -2.0]))
        >>> torch.allclose(r @ r.T, torch.eye(4), atol=1e-6)
        True
        """
        coords = torch.as_tensor(coords)
        return self._rotation64(coords).to(self.compute_dtype(coords))

    def _rotation64(self, coords: torch.Tensor) -> torch.Tensor:
        """``R(c)`` in float64, ``(…, D, D)``: exponent and exponential in float64 (see the module docstring)."""
        with torch.autocast(device_type=coords.device.type, enabled=False):
            gen = self.generators(torch.float64).to(coords.device)
            return rotation_exp(torch.einsum("...a,aij->...ij", coords.to(torch.float64), gen))

    def _transform(self, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        return apply_matrices(self._rotation64(coords), x)

    def _transform_pair(self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor):
        r = self._rotation64(coords)  # one exponential per token for q and k
        return apply_matrices(r, q), apply_matrices(r, k)
