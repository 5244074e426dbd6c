"""ComRoPE: rotary encoding by trainable commuting angle matrices.

Token ``n`` with coordinates ``c_n ∈ ℝ^A`` is mapped by ``R(c) = exp(Σ_a c_a A_a)`` where the
angle matrices ``A_a`` are skew-symmetric, block-diagonal with ``m = D/b`` blocks of size ``b``
(block ``k``: ``B_{a,k}``), and pairwise commuting — which makes ``R(x)ᵀ R(y) = R(y − x)``
(the "RoPE equation"; the paper proves commutativity is necessary and sufficient). Two
constructions keep them commuting:

* ``"ap"`` (axis-partitioned, ComRoPE-AP): block ``k`` belongs to axis ``k mod A`` only,
  ``B_{a,k} = P_k − P_kᵀ`` if ``a = k mod A``, else ``0``;
* ``"ld"`` (linearly dependent, ComRoPE-LD): every axis scales one shared matrix,
  ``B_{a,k} = θ_a (P_k − P_kᵀ)``.

``P_k`` (``b × b``) and ``θ_a`` are learned. The exponential is block-wise: ``m`` matrix
exponentials of ``b × b`` matrices per token (``torch.linalg.matrix_exp`` and a Newton–Schulz step,
:func:`~structpos.encoders._learned.rotation_exp`; closed-form cos/sin when ``b = 2``). The exponents
``Σ_a c_a B_{a,k}`` (the angles when ``b = 2``) and the exponentials or cos/sin are float64 whatever
the input dtype, only the finished blocks are cast: in float32 the angles at ``|c| ≈ 10⁷`` are off
by ~1 rad (``R(x)ᵀR(y) = R(y − x)`` lost) and the ``b × b`` exponentials are no rotations (norms grew
by 10⁵ and more, then inf/nan). The float64 exponentials cost ~1.15× the float32 ones on a CPU
(``b = 4``); ``forward(q, k)`` takes one set for both ``q`` and ``k``. Channel blocks: block ``k``
holds RoPE pairs ``kb/2 … (k+1)b/2 − 1`` in the pair layout of :mod:`.._rotary` (``"half"``: pair
``j`` is channels ``(j, j + D/2)``).

``init="rope"`` sets ``P_k`` so that every ``2 × 2`` diagonal sub-block of ``P_k − P_kᵀ`` turns
its pair at the RoPE frequency ``ω_j = base^{−2j/D}`` (``θ = 1``): exactly RoPE — for ``"ap"``
with pair ``j`` on axis ``⌊2j/b⌋ mod A`` (with ``b = 2`` the ``"interleaved"`` allocation of
:class:`~structpos.encoders.StructuralRoPE`), for ``"ld"`` with every pair on ``Σ_a c_a``.

Reference: Yu et al., "ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized by
Trainable Commuting Angle Matrices" (CVPR 2025).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from ..exceptions import SpecError
from ._checks import (
    MAX_INIT_STD,
    QKLayout,
    check_choice,
    check_count,
    check_every_axis_used,
    check_real,
    split_counts,
)
from ._learned import LearnedRotary, float64_cos_sin, rotation_exp, skew
from ._rotary import apply_rotary, check_layout, layout_permutation, rope_inv_freq

__all__ = ["ComRoPE"]


class ComRoPE(LearnedRotary):
    """``R(c) = exp(Σ_a c_a A_a)`` with trainable commuting block-diagonal angle matrices (see the module docstring).

    Parameters
    ----------
    head_dim : int
        ``D``; a multiple of ``block_size``.
    num_axes : int
        Coordinate axes ``A``.
    variant : {"ap", "ld"}
        Axis-partitioned or linearly dependent angle matrices.
    block_size : int
        ``b`` (even, ≥ 2).
    init : {"rope", "random"}
        RoPE frequencies on the ``2 × 2`` diagonal sub-blocks, or ``P_k ~ N(0, init_std²)``.
    init_std : float
        Standard deviation of the random initialisation, in ``[0, MAX_INIT_STD]`` (1e30: the float32
        parameters stay finite).
    base : float
        RoPE base of ``init="rope"``.
    layout : {"half", "interleaved"}
        Pair layout of the channels.
    qk_layout : {"blhd", "bhld"}
        Where the head axis of ``q``/``k`` is.

    Attributes
    ----------
    blocks : torch.nn.Parameter
        ``(m, b, b)`` the ``P_k``.
    scales : torch.nn.Parameter or None
        ``(A,)`` the ``θ_a`` of ``"ld"``.
    exact_coords : bool
        True: coordinates reach the exponents in float64.

    Raises
    ------
    SpecError
        Unknown ``variant``/``init``, odd ``block_size`` or one that does not divide ``D``, or
        (``"ap"``) fewer blocks ``D / b`` than axes: an axis without a block would be ignored.

    Examples
    --------
    >>> import torch
    >>> from structpos.encoders import StructuralRoPE
    >>> _ = torch.manual_seed(0)
    >>> q, k = torch.randn(1, 6, 2, 8), torch.randn(1, 6, 2, 8)
    >>> coords = torch.randint(0, 9, (1, 6, 2))

    With ``b = 2`` and the RoPE initialisation, ComRoPE-AP is RoPE with interleaved axes:

    >>> com = ComRoPE(8, 2, "ap", block_size=2)
    >>> ref = StructuralRoPE(8, 2, "interleaved")(q, k, coords)[0]
    >>> torch.allclose(com(q, k, coords)[0], ref, atol=1e-6)
    True

    Learned ``4 × 4`` blocks couple pairs, and scores still depend only on coordinate differences:

    >>> com = ComRoPE(8, 2, "ld", block_size=4, init="random", init_std=0.1)
    >>> def scores(c):
    ...     qr, kr = com(q, k, c)
    ...     return torch.einsum("blhd,bmhd->bhlm", qr, kr)
    >>> torch.allclose(scores(coords), scores(coords + torch.tensor([5, -2])), atol=1e-4)
    True
    >>> c = torch.tensor([1.0, 2.0])
    >>> r = torch.linalg.matrix_exp(torch.einsum("a,aij->ij", c, com.generators()))
    >>> torch.allclose(com.rotation(c), r, atol=1e-5)
    True
    """

    block_axis: torch.Tensor
    perm: torch.Tensor
    inv_perm: torch.Tensor
    exact_coords = True

    def __init__(
        self,
        head_dim: int,
        num_axes: int,
        variant: Literal["ap", "ld"] = "ap",
        block_size: int = 2,
        init: Literal["rope", "random"] = "rope",
        init_std: float = 0.02,
        base: float = 10000.0,
        layout: Literal["half", "interleaved"] = "half",
        qk_layout: QKLayout = "blhd",
    ):
        super().__init__(head_dim, num_axes, qk_layout)
        check_choice(variant, "variant", ("ap", "ld"))
        check_choice(init, "init", ("rope", "random"))
        init_std = check_real(init_std, "init_std", low=0.0, high=MAX_INIT_STD)
        base = check_real(base, "base", low=1.0, low_open=True)  # checked also with init="random"
        block_size = check_count(block_size, "block_size", minimum=2)
        if block_size % 2 or head_dim % block_size:
            raise SpecError(f"block_size must be even, ≥ 2 and divide head_dim = {head_dim}, got {block_size}")
        self.variant, self.block_size, self.layout = variant, int(block_size), check_layout(layout)
        num_blocks = head_dim // block_size
        if variant == "ap":  # block k is axis (k mod A)'s: an axis past the last block would be ignored
            check_every_axis_used(
                split_counts(num_blocks, num_axes),
                num_axes,
                f"variant 'ap' gives each axis whole blocks; head_dim={head_dim} has {num_blocks} "
                f"blocks of block_size={block_size}",
                "use a larger head_dim, a smaller block_size, fewer axes or variant='ld'",
            )
        self.blocks = nn.Parameter(self._initial_blocks(num_blocks, init, init_std, base))
        self.scales = nn.Parameter(torch.ones(num_axes)) if variant == "ld" else None
        self.register_buffer("block_axis", torch.arange(num_blocks) % num_axes, persistent=False)
        perm = layout_permutation(head_dim) if layout == "half" else torch.arange(head_dim)
        self.register_buffer("perm", perm, persistent=False)  # channels of block order
        self.register_buffer("inv_perm", perm.argsort(), persistent=False)

    def _initial_blocks(self, num_blocks: int, init: str, init_std: float, base: float) -> torch.Tensor:
        b = self.block_size
        if init == "random":
            return torch.randn(num_blocks, b, b) * init_std
        omega = rope_inv_freq(self.head_dim, base).view(num_blocks, b // 2)
        p = torch.zeros(num_blocks, b, b)
        i = torch.arange(b // 2)
        p[:, 2 * i + 1, 2 * i] = omega / 2  # P − Pᵀ has +ω below, −ω above the diagonal
        p[:, 2 * i, 2 * i + 1] = -omega / 2
        return p

    def block_generators(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The blocks ``B_{a,k}`` of the angle matrices, ``(A, m, b, b)``.

        Examples
        --------
        >>> ComRoPE(8, 2, "ap", block_size=4).block_generators()[1, 0].abs().sum().item()  # block 0 is axis 0's
        0.0
        """
        s = skew(self.blocks.to(dtype))
        if self.scales is not None:
            return self.scales.to(dtype)[:, None, None, None] * s
        onehot = torch.nn.functional.one_hot(self.block_axis, self.num_axes).to(dtype)  # (m, A)
        return onehot.T[:, :, None, None] * s

    def generators(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The angle matrices ``A_a`` as dense ``(A, D, D)`` skew matrices in the channel basis.

        Examples
        --------
        >>> g = ComRoPE(8, 2, "ap", block_size=4, init="random").generators()
        >>> torch.allclose(g[0] @ g[1], g[1] @ g[0]), torch.equal(g, -g.transpose(-1, -2))
        (True, True)
        """
        blocks = self.block_generators(dtype)
        dense = torch.stack([torch.block_diag(*blocks[a]) for a in range(self.num_axes)])
        inv = self.inv_perm.to(dense.device)
        return dense[:, inv][:, :, inv]

    def _maps(self, coords: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """``(cos, sin)`` in ``dtype`` (``b = 2``) or the float64 block exponentials ``(e,)``, ``(…, L, m, b, b)``.

        The exponents and angles are float64 (see the module docstring)."""
        with torch.autocast(device_type=coords.device.type, enabled=False):
            gen = self.block_generators(torch.float64)  # (A, m, b, b)
            m = torch.einsum("...a,akij->...kij", coords.to(torch.float64), gen)  # (…, L, m, b, b)
            if self.block_size == 2:  # closed form: [[0, −φ], [φ, 0]] ↦ rotation by φ
                return float64_cos_sin(m[..., 1, 0].unsqueeze(-2), dtype)  # (…, L, 1, m)
            return (rotation_exp(m),)

    def _apply_maps(self, maps: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
        if self.block_size == 2:
            with torch.autocast(device_type=x.device.type, enabled=False):
                return apply_rotary(x, maps[0], maps[1], self.layout)
        xb = x[..., self.perm].unflatten(-1, (-1, self.block_size))  # (…, L, H, m, b)
        out = torch.einsum("...kij,...hkj->...hki", maps[0].to(x.dtype), xb).flatten(-2)
        return out[..., self.inv_perm]

    def _transform(self, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        return self._apply_maps(self._maps(coords, self.compute_dtype(x)), x)

    def _transform_pair(self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor):
        maps = self._maps(coords, self.compute_dtype(q, k))  # one set of exponentials for q and k
        return self._apply_maps(maps, q), self._apply_maps(maps, k)
