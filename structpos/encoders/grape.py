"""GRAPE: positions acting through group elements — rotations (multiplicative) and unipotent lifts (additive).

**Multiplicative GRAPE** (:class:`GRAPE`). A position acts by ``G(c) = exp(L(c))``, ``L(c)`` a
sum of rank-2 skew generators ``L_i = b_i a_iᵀ − a_i b_iᵀ`` (``L_i`` turns ``a_i`` towards
``b_i``). One rank-2 generator has the closed-form (Rodrigues-type) exponential

    exp(θ L) = I + (sin sθ / s) L + ((1 − cos sθ) / s²) L²,        s² = |a|²|b|² − (a·b)²

(:func:`rodrigues_exp`; ``L³ = −s² L``). Two families:

* ``mode="commuting"``: ``D/2`` mutually orthogonal planes ``(a_j, b_j) = (P e_{x_j}, P e_{y_j})``
  of a learned orthogonal ``P`` (Cayley map, ``P = I`` at init) with learned frequencies
  ``ω_j`` (log-uniform RoPE spectrum at init), plane ``j`` driven by axis ``axis(j)``:
  ``L(c) = Σ_j ω_j c_{axis(j)} L_j``. The planes commute, so ``G(c)`` is the product of ``D/2``
  plane rotations, ``G(c) = P · RoPE(c) · Pᵀ``, and scores depend on ``c_n − c_m`` only, in any
  number of axes. At init it is exactly N-axis RoPE.
* ``mode="mixture"``: ``r`` rank-2 generators with free vectors ``a_i, b_i ∈ ℝ^D`` and per-axis
  rates ``ω_{a,i}``: ``L(c) = Σ_i t_i(c) L_i``, ``t_i(c) = Σ_a ω_{a,i} c_a``. The ``L_i`` need not
  commute (cross-plane coupling). With ``W = [a_1…a_r, b_1…b_r]`` and
  ``K(c) = [[0, −T], [T, 0]]``, ``T = diag(t)``, ``L(c) = W K Wᵀ`` and

      exp(L) = I + W φ(K G) K Wᵀ,        G = WᵀW,   φ(Z) = Σ_k Z^k / (k + 1)!

  (``φ(KG) K`` is the top-right block of ``exp([[KG, K], [0, 0]])``, a ``4r × 4r`` exponential):
  ``O(r D)`` per token after an ``O(r³)`` exponential; ``r = 1`` uses Rodrigues directly. With one
  axis ``G(n) = exp(n L₁)`` is a one-parameter group: exactly relative whatever the ``a, b``. With
  several axes the ``L(c)`` for different ``c`` need not commute and relativity is approximate.
  ``init="rope"`` (``r = D/2``, canonical pairs, RoPE rates) is exactly RoPE.

Precision: the angles ``ω c`` and ``s θ``, and the ``4r × 4r`` exponential, are float64 whatever the
input dtype (coordinates arrive in float64, int64 exact up to 2⁵³); only cos/sin, the Rodrigues
coefficients and ``φ(KG)K`` are cast. In float32 the angles at ``|c| ≈ 10⁷`` are off by ~1 rad, so
``G(x)ᵀG(y) = G(y − x)`` was lost, and the float32 ``4r × 4r`` exponential was no rotation (norms
off by 60% at 10⁷, by 10⁸ at 10⁸). The float64 exponential costs ~1.5× the float32 one on a CPU
(``r = 4``); ``forward(q, k)`` takes one for both ``q`` and ``k``.

**Additive GRAPE** (:class:`GRAPEAdditive`). A unipotent action on a lifted space adds a
relative bias to the logits: with ``q̃ = [q; 0; ω_h]``, ``k̃ = [k; 1; 0]`` in ``ℝ^{D+1+A}`` and
``G(c) = I + Σ_a c_a N_a``, ``N_a = e_{D+1+a} e_{D}ᵀ`` (``N_a N_b = 0``: ``G(c) = exp(Σ_a c_a N_a)``),

    q̂_i = G(c_i)^{-T} q̃ = [q_i; −⟨ω_h, c_i⟩; ω_h],   k̂_j = G(c_j) k̃ = [k_j; 1; c_j],
    q̂_iᵀ k̂_j = q̃ᵀ G(c_j − c_i) k̃ = q_iᵀ k_j + ⟨ω_h, c_j − c_i⟩.

With ``c`` the token index and ``ω_h`` the ALiBi slopes this is ALiBi's causal bias
``−m_h (i − j)``; with ``c_i = −Σ_{l ≤ i} log σ(f_l)`` (:func:`forget_gate_coords`) and ``ω = 1`` it is
the Forgetting Transformer's ``Σ_{l=j+1}^{i} log σ(f_l)``. ``k̂`` does not depend on the head
(grouped-query attention works), and keys can be cached lifted (streaming).

Reference: Zhang et al., "Group Representational Position Encoding" (GRAPE, ICLR 2026).
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..exceptions import ShapeError, SpecError
from ._checks import QKLayout, check_choice, check_count, check_flag, check_table_size, from_blhd
from ._learned import LearnedRotary, cayley, float64_cos_sin, rope_generator, skew
from ._rotary import apply_rotary, check_layout, rope_inv_freq
from .attention_bias import alibi_slopes
from .rope_allocation import pair_axes
from .rope_inputs import check_same_tokens

__all__ = ["GRAPE", "GRAPEAdditive", "forget_gate_coords", "rodrigues_exp"]


def _rank2_coefficients(a: torch.Tensor, b: torch.Tensor, theta: torch.Tensor):
    """``(sin sθ / s, (1 − cos sθ) / s²)`` with their limits ``(θ, θ²/2)`` at ``s → 0``."""
    s2 = (a * a).sum(-1) * (b * b).sum(-1) - (a * b).sum(-1) ** 2
    small = s2 < 1e-12
    s = torch.where(small, torch.ones_like(s2), s2.clamp_min(1e-12)).sqrt()
    st = s * theta
    c1 = torch.where(small, theta, torch.sin(st) / s)
    c2 = torch.where(small, theta * theta / 2, (1 - torch.cos(st)) / (s * s))
    return c1, c2


def rodrigues_exp(a: torch.Tensor, b: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Closed-form ``exp(θ L)`` of the rank-2 skew generator ``L = b aᵀ − a bᵀ``.

    ``exp(θL) = I + (sin sθ / s) L + ((1 − cos sθ) / s²) L²`` with ``s² = |a|²|b|² − (a·b)²``
    (``L³ = −s² L``). For orthonormal ``a, b`` it turns ``a`` towards ``b`` by ``θ``.

    Parameters
    ----------
    a, b : torch.Tensor
        ``(…, D)`` vectors spanning the plane (any length, not parallel for a rotation).
    theta : torch.Tensor
        ``(…)`` angles (broadcast against ``a``'s batch shape).

    Returns
    -------
    torch.Tensor
        ``(…, D, D)`` rotation matrices.

    Examples
    --------
    >>> a, b = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    >>> gen = torch.outer(b, a) - torch.outer(a, b)
    >>> theta = torch.tensor(0.8, dtype=torch.float64)
    >>> torch.allclose(rodrigues_exp(a, b, theta), torch.linalg.matrix_exp(theta * gen))
    True
    >>> e0, e1 = torch.eye(2)
    >>> quarter = rodrigues_exp(e0, e1, torch.tensor(math.pi / 2))
    >>> torch.allclose(quarter @ e0, e1, atol=1e-6)  # a quarter turn of e0 towards e1
    True
    """
    gen = b[..., :, None] * a[..., None, :] - a[..., :, None] * b[..., None, :]
    c1, c2 = _rank2_coefficients(a, b, theta)
    eye = torch.eye(a.shape[-1], dtype=gen.dtype, device=gen.device)
    return eye + c1[..., None, None] * gen + c2[..., None, None] * (gen @ gen)


def _rodrigues_apply(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """``exp(θ L) x`` in ``O(D)``: ``Lx = b (a·x) − a (b·x)``; ``x`` ``(…, L, H, D)``, ``theta`` ``(…, L)``.

    The coefficients are taken in float64 (``sθ`` is an angle), then cast to ``x``'s dtype."""
    c1, c2 = _rank2_coefficients(a.to(torch.float64), b.to(torch.float64), theta.to(torch.float64))
    c1, c2 = c1[..., None, None].to(x.dtype), c2[..., None, None].to(x.dtype)
    a, b = a.to(x.dtype), b.to(x.dtype)

    def gen(v):
        return b * (v @ a)[..., None] - a * (v @ b)[..., None]

    lx = gen(x)
    return x + c1 * lx + c2 * gen(lx)


class GRAPE(LearnedRotary):
    """Multiplicative GRAPE: ``G(c) = exp(Σ_i t_i(c) L_i)`` with rank-2 skew generators (see the module docstring).

    Parameters
    ----------
    head_dim : int
        ``D`` (even).
    num_axes : int
        Coordinate axes ``A``.
    mode : {"commuting", "mixture"}
        Learned orthogonal planes (exactly relative in any number of axes) or ``rank`` free
        rank-2 generators (exactly relative along one axis).
    rank : int, optional
        ``r`` generators of ``"mixture"``; default ``D/2`` (required by ``init="rope"``).
    init : {"rope", "random"}
        ``"mixture"`` only: canonical RoPE planes and rates, or ``a, b ~ N(0, 1/D)`` with
        generator ``i`` on one axis (``allocation`` over the ``r`` generators) at the rate
        ``base^{−2i/(2r)}``.
    allocation : {"sectioned", "interleaved"}
        Which axis drives each plane (as :func:`~structpos.encoders.rope.pair_axes`).
    sections : sequence of int, optional
        Planes per axis.
    base : float
        Initial spectrum ``ω_j = base^{−2j/D}``.
    layout : {"half", "interleaved"}
        Channels of the canonical planes.
    learn_basis : bool
        ``"commuting"``: learn the orthogonal basis ``P`` (else planes stay canonical).
    qk_layout : {"blhd", "bhld"}
        Where the head axis of ``q``/``k`` is.

    Attributes
    ----------
    freqs : torch.nn.Parameter
        ``"commuting"``: ``(D/2,)`` plane frequencies ``ω_j``.
    basis_param : torch.nn.Parameter or None
        ``"commuting"``: ``(D, D)``, ``P = cayley(W − Wᵀ)``.
    planes_a, planes_b : torch.nn.Parameter
        ``"mixture"``: ``(r, D)`` the ``a_i``, ``b_i``.
    rates : torch.nn.Parameter
        ``"mixture"``: ``(A, r)`` the ``ω_{a,i}``.
    exact_coords : bool
        True: coordinates reach the angles and exponents in float64.

    Raises
    ------
    SpecError
        Unknown ``mode``/``init``, ``rank < 1``, ``init="rope"`` with ``rank ≠ D/2``.

    Examples
    --------
    >>> import torch
    >>> from structpos.encoders import StructuralRoPE
    >>> _ = torch.manual_seed(0)
    >>> q, k = torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8)
    >>> coords = torch.randint(0, 9, (1, 5, 2))
    >>> ref = StructuralRoPE(8, 2)(q, k, coords)[0]

    Both modes start at RoPE:

    >>> torch.allclose(GRAPE(8, 2)(q, k, coords)[0], ref, atol=1e-6)
    True
    >>> torch.allclose(GRAPE(8, 2, "mixture")(q, k, coords)[0], ref, atol=1e-5)
    True

    A non-commuting mixture of two rank-2 generators along one axis is still exactly relative:

    >>> mix = GRAPE(8, 1, "mixture", rank=2, init="random")
    >>> pos = torch.arange(5)[None, :, None]
    >>> def scores(c):
    ...     qr, kr = mix(q, k, c)
    ...     return torch.einsum("blhd,bmhd->bhlm", qr, kr)
    >>> torch.allclose(scores(pos), scores(pos + 11), atol=1e-4)
    True
    """

    plane_axis: torch.Tensor
    exact_coords = True

    def __init__(
        self,
        head_dim: int,
        num_axes: int,
        mode: Literal["commuting", "mixture"] = "commuting",
        rank: int | None = None,
        init: Literal["rope", "random"] = "rope",
        allocation: Literal["sectioned", "interleaved"] = "sectioned",
        sections: Sequence[int] | None = None,
        base: float = 10000.0,
        layout: Literal["half", "interleaved"] = "half",
        learn_basis: bool = True,
        qk_layout: QKLayout = "blhd",
    ):
        super().__init__(head_dim, num_axes, qk_layout)
        check_choice(mode, "mode", ("commuting", "mixture"))
        check_choice(init, "init", ("rope", "random"))
        learn_basis = check_flag(learn_basis, "learn_basis")
        if rank is not None:
            check_count(rank, "rank")
        self.mode, self.layout = mode, check_layout(layout)
        pairs = head_dim // 2
        omega = rope_inv_freq(head_dim, base)
        axes = pair_axes(pairs, num_axes, allocation, sections)
        self.register_buffer("plane_axis", axes, persistent=False)
        self.basis_param: nn.Parameter | None = None
        if mode == "commuting":
            self.freqs = nn.Parameter(omega)
            if learn_basis:
                check_table_size("GRAPE basis head_dim × head_dim", head_dim, head_dim)
                self.basis_param = nn.Parameter(torch.zeros(head_dim, head_dim))
            self.rank = pairs
            return
        self.rank = pairs if rank is None else int(rank)
        check_table_size("GRAPE planes rank × head_dim", self.rank, head_dim)
        if init == "rope":
            if self.rank != pairs:
                raise SpecError(f"init='rope' needs rank = head_dim/2 = {pairs}, got {self.rank}")
            eye = torch.eye(head_dim)
            j = torch.arange(pairs)
            xi, yi = (j, j + pairs) if layout == "half" else (2 * j, 2 * j + 1)
            a, b = eye[xi], eye[yi]
            rates = F.one_hot(axes, num_axes).T.float() * omega
        else:
            a, b = (
                torch.randn(self.rank, head_dim) / math.sqrt(head_dim),
                torch.randn(self.rank, head_dim) / math.sqrt(head_dim),
            )
            # generator i follows one axis (allocated like RoPE's pairs) at a log-uniform rate
            gen_axes = pair_axes(self.rank, num_axes, allocation)
            rates = F.one_hot(gen_axes, num_axes).T.float() * rope_inv_freq(2 * self.rank, base)
        self.planes_a, self.planes_b, self.rates = nn.Parameter(a), nn.Parameter(b), nn.Parameter(rates)

    # ------------------------------------------------------------------ commuting
    def basis(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``"commuting"``: the orthogonal ``P`` (identity without a learned basis), ``(D, D)``.

        Examples
        --------
        >>> torch.equal(GRAPE(4, 1).basis(), torch.eye(4))
        True
        """
        if self.basis_param is None:
            return torch.eye(self.head_dim, dtype=dtype, device=self.freqs.device)
        return cayley(skew(self.basis_param.to(dtype)))

    def _angle_rates(self, dtype: torch.dtype) -> torch.Tensor:
        """``"commuting"``: ``(A, D/2)`` angle per unit coordinate of every axis and plane."""
        onehot = F.one_hot(self.plane_axis, self.num_axes).T.to(dtype)
        return onehot * self.freqs.to(dtype)

    def generators(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The per-axis generators ``∂L(c)/∂c_a``, ``(A, D, D)`` skew-symmetric (so ``G(c) = exp(Σ_a c_a ·)``).

        Examples
        --------
        >>> g = GRAPE(8, 2, "mixture", rank=3, init="random").generators()
        >>> g.shape, torch.allclose(g, -g.transpose(-1, -2))
        (torch.Size([2, 8, 8]), True)
        """
        if self.mode == "commuting":
            p = self.basis(dtype)
            return p @ rope_generator(self._angle_rates(dtype), self.layout) @ p.T
        a, b = self.planes_a.to(dtype), self.planes_b.to(dtype)
        planes = b[:, :, None] * a[:, None, :] - a[:, :, None] * b[:, None, :]  # (r, D, D)
        return torch.einsum("ar,rij->aij", self.rates.to(dtype), planes)

    def _maps(self, coords: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """What ``G(c)`` is applied from: ``(P, cos, sin)`` (commuting), ``(a, b, θ)`` (rank 1) or
        ``(W, φ(KG)K)``; angles and exponentials in float64 (see the module docstring)."""
        c64 = coords.to(torch.float64)
        with torch.autocast(device_type=coords.device.type, enabled=False):
            if self.mode == "commuting":
                phi = (c64 @ self._angle_rates(torch.float64)).unsqueeze(-2)  # (…, L, 1, D/2)
                return (self.basis(dtype), *float64_cos_sin(phi, dtype))
            t = c64 @ self.rates.to(torch.float64)  # (…, L, r)
            a, b = self.planes_a.to(dtype), self.planes_b.to(dtype)
            if self.rank == 1:
                return a[0], b[0], t[..., 0]
            return torch.cat([a, b]), self._mixture_core(t, a.to(torch.float64), b.to(torch.float64))

    def _apply_maps(self, maps: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            if self.mode == "commuting":
                p = maps[0].to(x.dtype)
                return apply_rotary(x @ p, maps[1], maps[2], self.layout) @ p.T
            if self.rank == 1:
                return _rodrigues_apply(x, *maps)
        w, f = maps[0].to(x.dtype), maps[1].to(x.dtype)  # (2r, D): rows are the columns of W
        y = torch.einsum("...ij,...hj->...hi", f, x @ w.T)
        return x + y @ w

    def _transform(self, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        return self._apply_maps(self._maps(coords, self.compute_dtype(x)), x)

    def _transform_pair(self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor):
        maps = self._maps(coords, self.compute_dtype(q, k))  # one set of exponentials for q and k
        return self._apply_maps(maps, q), self._apply_maps(maps, k)

    def _mixture_core(self, t: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``φ(K G) K`` per token, from the ``4r × 4r`` exponential of ``[[K G, K], [0, 0]]``."""
        r = self.rank
        w = torch.cat([a, b])  # (2r, D)
        gram = w @ w.T  # (2r, 2r)
        tt = torch.diag_embed(t)  # (…, r, r)
        zero = torch.zeros_like(tt)
        k = torch.cat([torch.cat([zero, -tt], -1), torch.cat([tt, zero], -1)], -2)  # (…, 2r, 2r)
        top = torch.cat([k @ gram, k], -1)  # (…, 2r, 4r)
        z = torch.cat([top, torch.zeros_like(top)], -2)  # (…, 4r, 4r)
        return torch.linalg.matrix_exp(z)[..., : 2 * r, 2 * r :]


def forget_gate_coords(gate_logits: torch.Tensor) -> torch.Tensor:
    """Forgetting-Transformer "time" ``c_i = −Σ_{l ≤ i} log σ(f_l)`` (non-decreasing) from forget-gate logits.

    With :class:`GRAPEAdditive` (``ω = 1``) the bias ``c_j − c_i = Σ_{l=j+1}^{i} log σ(f_l)`` for
    ``j ≤ i`` is FoX's decay. Per-head gates ``(B, L, H)`` give ``H`` axes: use
    ``slopes=torch.eye(H)``.

    Parameters
    ----------
    gate_logits : torch.Tensor
        ``(B, L)`` or ``(B, L, H)`` forget-gate pre-activations ``f``.

    Returns
    -------
    torch.Tensor
        ``(B, L, 1)`` or ``(B, L, H)`` fp32 (fp64 for fp64 input) coordinates.

    Examples
    --------
    >>> forget_gate_coords(torch.zeros(1, 3))[0, :, 0]  # σ(0) = 1/2 each step
    tensor([0.6931, 1.3863, 2.0794])
    """
    f = gate_logits.to(torch.float64 if gate_logits.dtype == torch.float64 else torch.float32)
    c = torch.cumsum(-F.logsigmoid(f), dim=1)
    return c[..., None] if c.dim() == 2 else c


class GRAPEAdditive(LearnedRotary):
    """Additive GRAPE: lifted ``(q̂, k̂)`` with ``q̂_iᵀ k̂_j = q_iᵀ k_j + ⟨ω_h, c_j − c_i⟩`` (see the module docstring).

    Not a rotation: ``forward`` returns vectors of width ``D + 1 + A``, and :meth:`bias` the
    ``(B, H, L_q, L_k)`` bias itself. Attention that scales logits by ``1/√d`` scales the bias too
    (pass ``slopes`` multiplied by ``√d`` to keep it unscaled).

    Parameters
    ----------
    head_dim : int
        ``D``.
    num_axes : int
        Coordinate axes ``A``.
    num_heads : int
        Query heads ``H``.
    slopes : torch.Tensor, optional
        ``(H,)`` (the same on every axis) or ``(H, A)`` ``ω``; default: ALiBi's slopes
        (:func:`~structpos.encoders.alibi_slopes`) on every axis.
    learnable : bool
        ``ω`` is a parameter.
    qk_layout : {"blhd", "bhld"}
        Where the head axis of ``q``/``k`` is.

    Raises
    ------
    ShapeError
        ``slopes`` of the wrong shape, or ``q`` without ``num_heads`` heads.

    Examples
    --------
    ALiBi: with token-index coordinates and ALiBi slopes, the bias is ``−m_h (i − j)`` (``j ≤ i``).

    >>> import torch
    >>> grape = GRAPEAdditive(head_dim=4, num_axes=1, num_heads=2)
    >>> grape.bias(torch.arange(3)[None, :, None])[0, 1]  # head 1: m = 2^{-8}
    tensor([[ 0.0000,  0.0039,  0.0078],
            [-0.0039,  0.0000,  0.0039],
            [-0.0078, -0.0039,  0.0000]], grad_fn=<SelectBackward0>)
    >>> q, k = torch.randn(1, 3, 2, 4), torch.randn(1, 3, 2, 4)
    >>> qh, kh = grape(q, k)
    >>> qh.shape
    torch.Size([1, 3, 2, 6])
    >>> logits = torch.einsum("blhd,bmhd->bhlm", qh, kh)
    >>> ref = torch.einsum("blhd,bmhd->bhlm", q, k) + grape.bias(torch.arange(3)[None, :, None])
    >>> torch.allclose(logits, ref, atol=1e-6)
    True
    """

    def __init__(
        self,
        head_dim: int,
        num_axes: int,
        num_heads: int,
        slopes: torch.Tensor | None = None,
        learnable: bool = True,
        qk_layout: QKLayout = "blhd",
    ):
        super().__init__(head_dim, num_axes, qk_layout)
        num_heads, learnable = check_count(num_heads, "num_heads"), check_flag(learnable, "learnable")
        check_table_size("GRAPEAdditive slopes num_heads × num_axes", num_heads, num_axes)
        if slopes is None:
            w = alibi_slopes(num_heads)[:, None].expand(num_heads, num_axes).clone()
        else:
            w = torch.as_tensor(slopes, dtype=torch.float32).clone()
            if w.dim() == 1:
                w = w[:, None].expand(-1, num_axes).clone()
            if w.shape != (num_heads, num_axes):
                raise ShapeError(
                    f"slopes must have shape (H,) or (H, A) = ({num_heads}, {num_axes}), given {tuple(w.shape)}"
                )
        self.num_heads = int(num_heads)
        if learnable:
            self.slopes = nn.Parameter(w)
        else:
            self.register_buffer("slopes", w)

    def _per_head(self) -> bool:  # not a rotation: not for install_structural_rope
        return False

    def bias(self, coords: torch.Tensor, k_coords: torch.Tensor | None = None) -> torch.Tensor:
        """``b_{h,i,j} = ⟨ω_h, c_j − c_i⟩``, ``(B, H, L_q, L_k)`` (fp32, fp64 for fp64 inputs).

        Parameters
        ----------
        coords : torch.Tensor
            ``(B, L, A)`` coordinates of the queries.
        k_coords : torch.Tensor, optional
            ``(B, S, A)`` of the keys; default ``coords``.

        Returns
        -------
        torch.Tensor
            The additive logit bias.

        Examples
        --------
        >>> g = GRAPEAdditive(4, 2, 1, slopes=torch.tensor([[1.0, 10.0]]))
        >>> g.bias(torch.tensor([[[0, 0], [1, 2]]]))[0, 0].tolist()
        [[0.0, 21.0], [-21.0, 0.0]]
        """
        coords = torch.as_tensor(coords)
        kc = coords if k_coords is None else torch.as_tensor(k_coords)
        dtype = self.compute_dtype(coords, kc)
        with torch.autocast(device_type=coords.device.type, enabled=False):
            w = self.slopes.to(dtype)
            tq = torch.einsum("bla,ha->bhl", coords.to(dtype), w)
            tk = torch.einsum("bla,ha->bhl", kc.to(dtype), w)
            return tk[:, :, None, :] - tq[:, :, :, None]

    def rotate(self, x, coords=None, cu_seqlens=None, *, mask=None):
        """Not available: additive GRAPE lifts ``q`` and ``k`` differently; use ``forward`` or :meth:`bias`.

        Raises
        ------
        SpecError
            Always.

        Examples
        --------
        >>> GRAPEAdditive(4, 1, 1).rotate(torch.zeros(1, 2, 1, 4))
        Traceback (most recent call last):
        ...
        structpos.exceptions.SpecError: additive GRAPE is not a rotation: use forward(q, k, coords) or bias(coords)
        """
        raise SpecError("additive GRAPE is not a rotation: use forward(q, k, coords) or bias(coords)")

    def _lift_q(self, q: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        if q.shape[-2] != self.num_heads:
            raise ShapeError(f"q has {q.shape[-2]} heads; the encoder was built for num_heads = {self.num_heads}")
        dtype = self.compute_dtype(q, coords)
        with torch.autocast(device_type=q.device.type, enabled=False):
            w = self.slopes.to(dtype)
            tau = torch.einsum("...a,ha->...h", coords.to(dtype), w)  # (…, L, H)
            extra = torch.cat([-tau[..., None], w.expand(*tau.shape, self.num_axes)], -1)
        return torch.cat([q, extra.to(q.dtype)], -1)

    def _lift_k(self, k: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        extra = torch.cat([torch.ones_like(coords[..., :1]), coords], -1)  # (…, L, 1 + A)
        return torch.cat([k, extra[..., None, :].expand(*k.shape[:-1], -1).to(k.dtype)], -1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, coords=None, cu_seqlens=None, *, mask=None, k_coords=None):
        """Return the lifted ``(q̂, k̂)``, width ``D + 1 + A``, in the layout given.

        Parameters
        ----------
        q, k : torch.Tensor
            Queries (``num_heads`` heads) and keys (any number of heads).
        coords, cu_seqlens, mask, k_coords
            As :meth:`LearnedRotary.forward <structpos.encoders._learned.LearnedRotary.forward>`.

        Returns
        -------
        tuple of torch.Tensor
            ``(q̂, k̂)``.

        Raises
        ------
        ShapeError
            Bad shapes, or ``q`` and ``k`` with different tokens without ``k_coords``.

        Examples
        --------
        >>> g = GRAPEAdditive(4, 1, 2)
        >>> qh, kh = g(torch.randn(1, 3, 2, 4), torch.randn(1, 3, 1, 4))  # one key head (GQA)
        >>> kh.shape
        torch.Size([1, 3, 1, 6])
        """
        q, k = self._check_x(q, "q"), self._check_x(k, "k")
        qc = self._masked(self._resolve_coords(q, coords, cu_seqlens), mask)
        if k_coords is None:
            check_same_tokens(q, k)
            kc = qc
        else:
            kc = self._masked(self._resolve_coords(k, k_coords, cu_seqlens), mask)
        return from_blhd(self._lift_q(q, qc), self.qk_layout), from_blhd(self._lift_k(k, kc), self.qk_layout)
