"""Shared machinery of the learned and generalised rotary encoders (STRING, ComRoPE, LieRE, GRAPE).

Each of them maps per-token coordinates ``c_n ∈ ℝ^A`` to a linear map ``R(c_n)`` of the head
vector and returns ``(R(c_q) q, R(c_k) k)`` with the call shape of
:class:`~structpos.encoders.StructuralRoPE`: ``q``/``k`` ``(B, L, H, D)`` (or ``(B, H, L, D)`` with
``qk_layout="bhld"``, or packed ``(T, H, D)``), coordinates ``(B, L, A)`` (``(T, A)``). The
maps are computed with autocast off, in fp32 (fp64 when the inputs or parameters are fp64), then
cast to ``q``'s dtype for the product; the maps are shared by all heads, so keys with fewer heads
(grouped-query attention) need nothing special.

Encoders with :attr:`LearnedRotary.exact_coords` (LieRE, ComRoPE, GRAPE) build the exponent
``Σ_a c_a G_a`` — or the angles of a closed form — in float64 from float64 coordinates (int64
coordinates are exact up to 2⁵³) and take the exponential (:func:`rotation_exp`) or the cos/sin
(:func:`float64_cos_sin`) there, casting only the finished map: in float32 an angle ``c · ω`` near
10⁸ carries several radians of rounding, and the float32 exponential of such an exponent is no
rotation at all (norms grew by 10¹⁰, or became inf/nan, at 10⁷–10⁸).

:class:`LearnedRotary` does the input handling (shape checks before any compute, the token
index as default coordinates, ``cu_seqlens``, ``mask``, ``k_coords``); a subclass implements
``_transform(x, coords)`` on ``x`` in ``(…, L, H, D)`` order. :func:`cayley` and
:func:`rope_generator` are the two building blocks the encoders share.
"""

from __future__ import annotations

import torch
from torch import nn

from ..exceptions import ShapeError
from ._checks import (
    QK_LAYOUTS,
    QKLayout,
    check_choice,
    check_count,
    check_head_dim,
    check_qk,
    from_blhd,
    is_compiling,
    to_blhd,
)
from .rope_inputs import check_same_tokens, resolve_coords

__all__ = ["LearnedRotary", "apply_matrices", "cayley", "float64_cos_sin", "rope_generator", "rotation_exp", "skew"]


def skew(w: torch.Tensor) -> torch.Tensor:
    """The skew-symmetric part ``W − Wᵀ`` of the last two dimensions of ``w``.

    Examples
    --------
    >>> s = skew(torch.randn(3, 3))
    >>> torch.equal(s, -s.T)
    True
    """
    return w - w.transpose(-1, -2)


def cayley(s: torch.Tensor) -> torch.Tensor:
    """Cayley map ``P = (I − S)⁻¹ (I + S)`` of a skew-symmetric ``S``: an orthogonal matrix, ``P = I`` at ``S = 0``.

    ``I − S`` is always invertible for skew ``S`` (its eigenvalues are ``1 − iλ``). The image is
    every rotation without eigenvalue ``−1``.

    Parameters
    ----------
    s : torch.Tensor
        ``(…, n, n)`` skew-symmetric.

    Returns
    -------
    torch.Tensor
        ``(…, n, n)`` orthogonal, ``det = +1``.

    Examples
    --------
    >>> p = cayley(skew(torch.randn(4, 4, dtype=torch.float64)))
    >>> torch.allclose(p @ p.T, torch.eye(4, dtype=torch.float64))
    True
    >>> torch.equal(cayley(torch.zeros(3, 3)), torch.eye(3))
    True
    """
    eye = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
    return torch.linalg.solve(eye - s, eye + s)


POLAR_STEPS = 2
"""Newton–Schulz steps :func:`rotation_exp` takes below float64."""

POLAR_STEPS_FLOAT64 = 1
"""Newton–Schulz steps :func:`rotation_exp` takes in float64."""


def rotation_exp(m: torch.Tensor) -> torch.Tensor:
    """``exp(M)`` of skew-symmetric ``M`` (a rotation), kept on the rotation group.

    ``torch.linalg.matrix_exp`` scales ``M`` down, takes a Padé approximant and squares it back,
    so its rounding grows with ``‖M‖`` and the result drifts off the rotation group:
    ``RᵀR − I`` reached 2e-3 at ``‖M‖ ≈ 10⁴`` and 3e-2 at 10⁵ in float32 (LieRE's RoPE start,
    ``D = 8``), which scales the vectors it should only rotate; float64 drifts the same way from a
    lower start (7e-8, 8e-7, 9e-6 at ``‖M‖ ≈ 5·10⁷, 5·10⁸, 5·10⁹``, ``D = 8``). The result takes
    Newton–Schulz steps toward the nearest orthogonal matrix, :data:`POLAR_STEPS` below float64 and
    :data:`POLAR_STEPS_FLOAT64` in float64,

        R ← R (3I − RᵀR) / 2,

    which square the error each time (float32: 1e-7 at both norms above, 20–30× closer to the
    float64 exponential; float64: ~1e-12 at ``‖M‖ ≈ 10⁹``). On an exact rotation a step is the
    identity, and so is its derivative along the group (``dR = R dS`` with ``dS`` skew maps to
    itself), so gradients are unchanged. What a step cannot fix is the angle itself, nor a
    float32 start that is no rotation at all (``‖M‖ ≳ 10⁶``: ``c · ω`` carries ~0.06 rad of rounding
    there, and the error is past the step's reach): the encoders pass float64 exponents here and
    cast the result.

    Parameters
    ----------
    m : torch.Tensor
        ``(…, n, n)`` skew-symmetric.

    Returns
    -------
    torch.Tensor
        ``(…, n, n)``: ``exp(M)``, orthogonal to the dtype's precision.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> m = skew(torch.randn(6, 6)) * 3e3
    >>> r = rotation_exp(m)
    >>> bool((r.T @ r - torch.eye(6)).abs().max() < 1e-5)
    True
    >>> torch.allclose(rotation_exp(m.double()), torch.linalg.matrix_exp(m.double()))
    True
    >>> r = rotation_exp(m.double() * 1e5)  # ‖M‖ ~ 10⁹
    >>> bool((r.T @ r - torch.eye(6, dtype=torch.float64)).abs().max() < 1e-10)
    True
    """
    r = torch.linalg.matrix_exp(m)
    eye = torch.eye(r.shape[-1], dtype=r.dtype, device=r.device)
    for _ in range(POLAR_STEPS_FLOAT64 if r.dtype == torch.float64 else POLAR_STEPS):
        r = r @ (1.5 * eye - 0.5 * (r.transpose(-1, -2) @ r))
    return r


def float64_cos_sin(angles: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos φ, sin φ)`` of ``angles`` taken in float64, then cast to ``dtype``.

    A float32 angle ``c · ω`` at ``c ≈ 10⁸`` is off by up to 4 rad (its spacing there is 8), so the
    closed-form rotations compute their angles in float64 and round only cos and sin.

    Parameters
    ----------
    angles : torch.Tensor
        Angles in any floating dtype (promoted to float64).
    dtype : torch.dtype
        Output dtype.

    Returns
    -------
    tuple of torch.Tensor
        ``(cos, sin)`` in ``dtype``.

    Examples
    --------
    >>> import math
    >>> phi = torch.tensor([1e8], dtype=torch.float64) * 0.1
    >>> cos, sin = float64_cos_sin(phi, torch.float32)
    >>> cos.dtype, bool((cos - math.cos(1e7)).abs() < 1e-6)
    (torch.float32, True)
    """
    angles = angles.to(torch.float64)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rope_generator(angle_rates: torch.Tensor, layout: str = "half") -> torch.Tensor:
    """Block-diagonal skew generators of RoPE: ``exp(Σ_a c_a G_a)`` rotates pair ``j`` by ``Σ_a c_a M[a, j]``.

    ``G_a`` has ``−M[a, j]`` at ``(x_j, y_j)`` and ``+M[a, j]`` at ``(y_j, x_j)``, where
    ``(x_j, y_j)`` are pair ``j``'s channels: ``(j, j + D/2)`` (``"half"``) or ``(2j, 2j + 1)``
    (``"interleaved"``) — the sign convention of :func:`~structpos.encoders.apply_rotary`.

    Parameters
    ----------
    angle_rates : torch.Tensor
        ``(A, P)`` angle per unit coordinate of every axis and pair (``ω_j W[j, a]``).
    layout : {"half", "interleaved"}
        Pair layout.

    Returns
    -------
    torch.Tensor
        ``(A, 2P, 2P)`` skew-symmetric, pairwise commuting.

    Examples
    --------
    >>> from structpos.encoders import apply_rotary
    >>> rates = torch.tensor([[1.0, 0.5]])
    >>> g = rope_generator(rates)
    >>> x, c = torch.randn(4), 0.7
    >>> ref = apply_rotary(x, (c * rates[0]).cos(), (c * rates[0]).sin())
    >>> torch.allclose(torch.linalg.matrix_exp(c * g[0]) @ x, ref, atol=1e-6)
    True
    """
    num_axes, pairs = angle_rates.shape
    j = torch.arange(pairs, device=angle_rates.device)
    xi, yi = (j, j + pairs) if layout == "half" else (2 * j, 2 * j + 1)
    g = angle_rates.new_zeros(num_axes, 2 * pairs, 2 * pairs)
    g[:, yi, xi] = angle_rates
    g[:, xi, yi] = -angle_rates
    return g


class LearnedRotary(nn.Module):
    """Base of the coordinate-driven linear maps of ``q``/``k`` (see the module docstring).

    Parameters
    ----------
    head_dim : int
        ``D`` (positive, even).
    num_axes : int
        Coordinate axes ``A`` (≥ 1).
    qk_layout : {"blhd", "bhld"}
        ``q``/``k`` as ``(B, L, H, D)`` or ``(B, H, L, D)``; ``coords`` are ``(B, L, A)`` either way.

    Notes
    -----
    ``forward(q, k, coords=None, cu_seqlens=None, *, mask=None, k_coords=None)`` as
    :meth:`StructuralRoPE.forward <structpos.encoders.StructuralRoPE.forward>`. ``coords=None``
    uses the token index (within its sequence when packed) on every axis; ``mask`` (token shape,
    True = real) gives masked tokens coordinate 0, i.e. the identity map. The encoders are
    installable into HF decoders with ``install_structural_rope(model, A, rope=encoder)``
    (built with ``qk_layout="bhld"``): like per-head RoPE they are applied inside the attention
    function, to the queries and to the cached keys.

    Raises
    ------
    SpecError
        ``head_dim`` not positive and even, ``num_axes < 1`` or an unknown ``qk_layout``.

    Examples
    --------
    The identity map as the smallest subclass:

    >>> class Identity(LearnedRotary):
    ...     def _transform(self, x, coords):
    ...         return x
    >>> q = torch.randn(1, 3, 2, 4)
    >>> torch.equal(Identity(4, 1)(q, q)[0], q)
    True
    """

    exact_coords: bool = False
    """Subclasses that build their exponent or angles in float64 set this: they are given float64
    coordinates (exact for int64 up to 2⁵³) instead of coordinates in :meth:`compute_dtype`."""

    def __init__(self, head_dim: int, num_axes: int, qk_layout: QKLayout = "blhd"):
        super().__init__()
        self.head_dim, self.num_axes = check_head_dim(head_dim), check_count(num_axes, "num_axes")
        self.qk_layout = check_choice(qk_layout, "qk_layout", QK_LAYOUTS)

    def _per_head(self) -> bool:
        """Not expressible as one cos/sin table: HF integration applies it in the attention function."""
        return True

    def compute_dtype(self, *tensors: torch.Tensor) -> torch.dtype:
        """fp64 when a parameter or one of ``tensors`` is fp64, else fp32 (the dtype of every exponential).

        Examples
        --------
        >>> LearnedRotary(4, 1).compute_dtype(torch.zeros(2, dtype=torch.float16))
        torch.float32
        """
        found = [t.dtype for t in tensors] + [p.dtype for p in self.parameters()]
        return torch.float64 if torch.float64 in found else torch.float32

    def coords_dtype(self, *tensors: torch.Tensor) -> torch.dtype:
        """Dtype the coordinates reach ``_transform`` in: fp64 with :attr:`exact_coords`, else :meth:`compute_dtype`.

        Examples
        --------
        >>> from structpos.encoders import LieRE, STRING
        >>> LieRE(4, 1).coords_dtype(torch.zeros(2)), STRING(4, 1).coords_dtype(torch.zeros(2))
        (torch.float64, torch.float32)
        """
        return torch.float64 if self.exact_coords else self.compute_dtype(*tensors)

    def _transform(self, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        """``R(c) x`` for ``x`` ``(…, L, H, D)`` and float ``coords`` ``(…, L, A)``."""
        raise NotImplementedError

    def _transform_pair(self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor):
        """``(R(c) q, R(c) k)``: subclasses whose maps cost more than applying them build them once."""
        return self._transform(q, coords), self._transform(k, coords.to(self.coords_dtype(k, coords)))

    def rotation(self, coords: torch.Tensor) -> torch.Tensor:
        """The matrices ``R(c)``, ``(…, D, D)``, for coordinates ``(…, A)``: ``R(c)`` applied to the unit vectors.

        Examples
        --------
        >>> from structpos.encoders import GRAPE, STRING, ComRoPE
        >>> for enc in (STRING(4, 1), ComRoPE(4, 1, block_size=4, init="random"), GRAPE(4, 1, "mixture", rank=1, init="random")):
        ...     r = enc.rotation(torch.tensor([[2.0]]))
        ...     print(tuple(r.shape), torch.allclose(r[0] @ r[0].T, torch.eye(4), atol=1e-6))
        (1, 4, 4) True
        (1, 4, 4) True
        (1, 4, 4) True
        """
        coords = torch.as_tensor(coords)
        dtype = self.compute_dtype(coords)
        eye = torch.eye(self.head_dim, dtype=dtype, device=coords.device)
        batch = coords.shape[:-1]
        rows = self._transform(eye.expand(*batch, self.head_dim, self.head_dim), coords.to(self.coords_dtype(coords)))
        return rows.transpose(-1, -2)  # row i is R e_i

    # ------------------------------------------------------------------ inputs
    def _check_coords(self, coords, x: torch.Tensor) -> torch.Tensor:
        coords = torch.as_tensor(coords, device=x.device)
        if coords.dtype in (torch.float16, torch.bfloat16) or coords.is_complex():
            raise ShapeError(
                f"coords must be int64, fp32 or fp64 of shape (…, {self.num_axes}); "
                f"given {coords.dtype} with shape {tuple(coords.shape)}"
            )
        if coords.dim() < 1 or coords.shape[-1] != self.num_axes:
            raise ShapeError(
                f"coords must end in num_axes = {self.num_axes}: expected (…, {self.num_axes}), "
                f"given {tuple(coords.shape)}"
            )
        if coords.is_floating_point() and not is_compiling() and not torch.isfinite(coords).all():
            bad = torch.nonzero(~torch.isfinite(coords))[0].tolist()
            raise ShapeError(f"coords contain a non-finite value at index {bad}")
        return coords

    def _resolve_coords(self, x: torch.Tensor, coords, cu_seqlens) -> torch.Tensor:
        """Float coordinates ``(*tokens, A)`` (:meth:`coords_dtype`) for ``x`` in ``(…, L, H, D)`` order."""
        coords = resolve_coords(x, coords, cu_seqlens, self.num_axes, self._check_coords)
        return coords.to(self.coords_dtype(x, coords))

    @staticmethod
    def _masked(coords: torch.Tensor, mask) -> torch.Tensor:
        if mask is None:
            return coords
        mask = torch.as_tensor(mask, device=coords.device).to(torch.bool)
        if mask.shape != coords.shape[:-1]:
            raise ShapeError(f"mask must have the token shape {tuple(coords.shape[:-1])}, given {tuple(mask.shape)}")
        return torch.where(mask[..., None], coords, torch.zeros((), dtype=coords.dtype, device=coords.device))

    def _check_x(self, x, name: str) -> torch.Tensor:
        return to_blhd(check_qk(x, name, self.head_dim, self.qk_layout), self.qk_layout)

    # ----------------------------------------------------------------- forward
    def rotate(self, x: torch.Tensor, coords=None, cu_seqlens=None, *, mask=None) -> torch.Tensor:
        """Map one tensor (``q`` or ``k``) by its coordinates: ``R(c_n) x_n``.

        Parameters
        ----------
        x : torch.Tensor
            ``(B, L, H, D)`` or packed ``(T, H, D)`` (heads first with ``qk_layout="bhld"``).
        coords : torch.Tensor, optional
            ``(B, L, A)`` / ``(T, A)``; default: the token index on every axis.
        cu_seqlens : torch.Tensor, optional
            Sequence offsets of packed input (positions restart per sequence).
        mask : torch.Tensor, optional
            Bool token mask; masked tokens get coordinate 0 (the identity).

        Returns
        -------
        torch.Tensor
            Same shape, layout and dtype as ``x``.

        Raises
        ------
        ShapeError
            Shapes or dtypes that do not match (message: expected vs given).

        Examples
        --------
        >>> class Scale(LearnedRotary):
        ...     def _transform(self, x, coords):
        ...         return x * coords[..., None, :1]
        >>> Scale(2, 1).rotate(torch.ones(1, 3, 1, 2))[0, :, 0, 0].tolist()
        [0.0, 1.0, 2.0]
        """
        x = self._check_x(x, "x")
        coords = self._masked(self._resolve_coords(x, coords, cu_seqlens), mask)
        return from_blhd(self._transform(x, coords), self.qk_layout)

    def forward(self, q: torch.Tensor, k: torch.Tensor, coords=None, cu_seqlens=None, *, mask=None, k_coords=None):
        """Return ``(R(c) q, R(c') k)`` in the layout given (``c' = k_coords`` or ``c``).

        Parameters
        ----------
        q, k : torch.Tensor
            Queries and keys (``k`` may have fewer heads).
        coords, cu_seqlens, mask
            As :meth:`rotate`.
        k_coords : torch.Tensor, optional
            Coordinates of the keys when they differ from the queries' tokens.

        Returns
        -------
        tuple of torch.Tensor
            ``(q_out, k_out)``.

        Raises
        ------
        ShapeError
            ``q`` and ``k`` with different tokens (without ``k_coords``), or bad shapes.

        Examples
        --------
        >>> class Identity(LearnedRotary):
        ...     def _transform(self, x, coords):
        ...         return x
        >>> q, k = torch.randn(1, 3, 2, 4), torch.randn(1, 5, 1, 4)
        >>> Identity(4, 1)(q, k, k_coords=torch.zeros(1, 5, 1))[1].shape
        torch.Size([1, 5, 1, 4])
        """
        if k_coords is not None:
            return self.rotate(q, coords, cu_seqlens, mask=mask), self.rotate(k, k_coords, cu_seqlens, mask=mask)
        q, k = self._check_x(q, "q"), self._check_x(k, "k")
        check_same_tokens(q, k)
        coords = self._masked(self._resolve_coords(q, coords, cu_seqlens), mask)
        q_out, k_out = self._transform_pair(q, k, coords)
        return from_blhd(q_out, self.qk_layout), from_blhd(k_out, self.qk_layout)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, num_axes={self.num_axes}, qk_layout={self.qk_layout!r}"


def apply_matrices(r: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``R_n x_{n,h}`` for per-token matrices ``r`` ``(…, L, D, D)`` and ``x`` ``(…, L, H, D)``, in ``x``'s dtype.

    Examples
    --------
    >>> r = torch.eye(2).expand(3, 2, 2)
    >>> x = torch.randn(3, 4, 2)
    >>> torch.equal(apply_matrices(r, x), x)
    True
    """
    return torch.einsum("...ij,...hj->...hi", r.to(x.dtype), x)
