"""StructuralRoPE: rotary position encoding driven by per-token coordinates of any number of axes.

Token ``n`` carries coordinates ``c_n ∈ ℝ^A`` (integer or real). Pair ``j`` of every head
vector is rotated by

    φ_{n,j} = ω_j · ⟨W_j, c_n⟩,        ω_j = base^{−2j/D}

so ``⟨R(φ_m) q, R(φ_n) k⟩`` depends on ``c_m − c_n`` only (all rotations act on disjoint 2-D
planes and commute). The frequency *allocation* chooses ``W``:

* ``"sectioned"`` — one-hot ``W_j``: consecutive chunks of pairs per axis (``sections``
  pairs each, highest frequencies to axis 0), as Qwen2-VL M-RoPE (``sections=[16, 24, 24]``);
* ``"interleaved"`` — pair ``j`` takes axis ``j mod A`` (Qwen3-VL); with ``sections`` axis
  ``a ≥ 1`` keeps its pairs only while ``j < A·sections[a]``, the rest go to axis 0;
* ``"per_head"`` — every pair of head ``h`` follows one axis; heads are split into groups of
  ``sections`` heads (default: near-equal);
* ``"mixed"`` — dense ``W`` (``(P, A)`` or per head ``(H, P, A)``), fixed or learnable.

Every axis uses the same ``ω`` table (as in M-RoPE), so equal coordinates on all axes give
exactly 1-D RoPE for the one-hot allocations — unless ``scaling`` gives an axis its own
length-extrapolation scheme (PI, NTK-aware, YaRN, Llama 3, low-frequency clipping:
:mod:`.rope_scaling`), which rescales that axis's frequencies ``ω^{(a)}`` only. Angles are computed in fp32 (fp64 for fp64
inputs) whatever the activation dtype; for non-negative integer coordinates cos/sin come
from tables cached per ``(extent, device, dtype)`` (:mod:`.rope_tables`).

Re-exported here from their own modules: the settings (:class:`RoPEConfig`, :mod:`.rope_config`),
pairs and heads to axes (:mod:`.rope_allocation`), token inputs and ``cu_seqlens`` (:mod:`.rope_inputs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Sequence, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..exceptions import ShapeError, SpecError
from ._checks import check_frequencies, check_qk, from_blhd, is_compiling, to_blhd
from ._options import ALLOCATIONS, Allocation, PairLayout, QKLayout
from ._rotary import apply_rotary, head_group_slice, rope_inv_freq
from .rope_allocation import head_axes, mixing_matrix, pair_axes
from .rope_config import RoPEConfig
from .rope_inputs import check_coords, check_cu_seqlens, check_same_tokens, positions_from_cu_seqlens, resolve_coords
from .rope_scaling import axis_inv_freq as axis_inv_freq_from_specs
from .rope_tables import CosSinCache

__all__ = [
    "StructuralRoPE",
    "RoPEConfig",
    "ALLOCATIONS",
    "Allocation",
    "PairLayout",
    "pair_axes",
    "head_axes",
    "mixing_matrix",
    "check_coords",
    "positions_from_cu_seqlens",
    "resolve_coords",
    "check_same_tokens",
    "check_cu_seqlens",
    "rope_inv_freq",
]


class StructuralRoPE(nn.Module):
    """Rotary encoding of per-token structural coordinates (see the module docstring).

    Parameters
    ----------
    head_dim : int
        Rotated width ``D`` (even).
    num_axes : int
        Coordinate axes ``A``.
    allocation : {"sectioned", "interleaved", "per_head", "mixed"}
        How pairs (or heads) are given to axes.
    sections : sequence of int, optional
        Pairs per axis (``sectioned``/``interleaved``) or heads per axis (``per_head``).
    base : float
        ``ω_j = base^{−2j/D}`` (ignored when ``inv_freq`` is given).
    layout : {"half", "interleaved"}
        Pair layout inside a head vector.
    num_heads : int, optional
        Needed by ``per_head``.
    mixing : torch.Tensor, optional
        ``(P, A)`` or ``(H, P, A)`` matrix ``W`` for ``mixed``.
    learnable : bool
        Frequencies (or the mixing matrix) become parameters.
    max_table_extent : int
        Largest integer coordinate served from the cached cos/sin tables.
    inv_freq : torch.Tensor, optional
        Use these ``P`` frequencies instead of ``base`` (e.g. a HF model's scaled ``inv_freq``).
    qk_layout : {"blhd", "bhld"}
        ``q``/``k`` as ``(B, L, H, D)`` (``(T, H, D)`` packed) or ``(B, H, L, D)`` (``(H, T, D)``),
        the layout of SDPA, FlexAttention and HF attention. ``coords`` are ``(B, L, A)`` either way.
    scaling : mapping of int to mapping, optional
        Length extrapolation per axis: ``{axis: spec}`` with a spec of :mod:`.rope_scaling`
        (``"linear"`` / ``"ntk"`` / ``"dynamic"`` / ``"yarn"`` / ``"llama3"`` / ``"clip"``, HF's
        keys). Axis ``a``'s pairs use the scaled table ``ω^{(a)}`` (and YaRN's attention factor
        multiplies their cos/sin); the other axes keep ``ω``. Needs ``base`` (not ``inv_freq``)
        and a fixed table (not ``learnable``).
    axis_inv_freq : torch.Tensor, optional
        ``(A, P)`` frequencies per axis, given directly (e.g. a HF model's scaled ``inv_freq`` on
        the token axis, the unscaled table on the structural axes).

    Notes
    -----
    ``forward(q, k, coords, cu_seqlens=None)`` takes padded ``q, k`` with ``coords`` ``(B, L, A)``,
    or packed ``(T, H, D)`` with ``coords`` ``(T, A)``. ``coords`` may be ``None``: the token index
    (within its sequence, via ``cu_seqlens`` when packed) is then used on every axis. Keyword
    ``mask`` (``(B, L)`` / ``(T,)``, True = real token) makes padding an identity rotation;
    ``k_coords`` gives keys their own coordinates (KV caches, cross-attention). ``k`` may have
    fewer heads than ``q`` (grouped-query attention). Shapes and dtypes are checked before any
    compute (:class:`~structpos.exceptions.ShapeError`). Under ``torch.compile(fullgraph=True)``
    the angles are computed directly (no table lookup, no value checks), so there is no graph break.

    Raises
    ------
    SpecError
        Unknown ``allocation``, ``layout`` or ``qk_layout``; ``head_dim`` odd or not positive;
        ``num_axes < 1``; ``base ≤ 1`` or not finite; ``per_head`` without ``num_heads``;
        ``sections`` of the wrong length, sign or sum (``D/2`` pairs, or ``num_heads`` heads
        for ``per_head``); non-finite ``mixing``; or a default allocation that would leave an
        axis without any pair (``head_dim=8``, ``num_axes=5``: 4 pairs for 5 axes) or, for
        ``per_head``, without any head. An explicit 0 in ``sections`` is allowed and leaves
        that axis unused on purpose; a bad ``scaling`` spec or one combined with ``inv_freq`` / ``learnable``.
    ShapeError
        ``inv_freq`` or ``mixing`` of the wrong shape.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> rope = StructuralRoPE(head_dim=8, num_axes=2, allocation="sectioned")
    >>> q, k = torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8)
    >>> coords = torch.tensor([[[0, 0], [1, 0], [1, 1], [2, 0], [2, 1]]])
    >>> q_rot, k_rot = rope(q, k, coords)
    >>> q_rot.shape
    torch.Size([1, 5, 2, 8])

    Rotations preserve norms, and scores depend only on coordinate differences: shifting
    every token by the same offset on each axis leaves them unchanged.

    >>> torch.allclose(q_rot.norm(dim=-1), q.norm(dim=-1))
    True
    >>> def scores(c):
    ...     qr, kr = rope(q, k, c)
    ...     return torch.einsum("blhd,bmhd->bhlm", qr, kr)
    >>> torch.allclose(scores(coords), scores(coords + torch.tensor([3, 7])), atol=1e-5)
    True

    Equal coordinates on every axis give exactly 1-D RoPE; without coordinates the token
    index is used on every axis. ``qk_layout="bhld"`` takes heads before tokens:

    >>> pos = torch.arange(5)[None, :, None]
    >>> rope_1d = StructuralRoPE(head_dim=8, num_axes=1)
    >>> torch.equal(rope(q, k, pos.expand(1, 5, 2))[0], rope_1d(q, k, pos)[0])
    True
    >>> torch.equal(rope(q, k)[0], rope_1d(q, k, pos)[0])
    True
    >>> qh, kh = StructuralRoPE(8, 2, qk_layout="bhld")(q.transpose(1, 2), k.transpose(1, 2), coords)
    >>> torch.allclose(qh.transpose(1, 2), q_rot)
    True

    Per-axis extrapolation: position interpolation ×4 on axis 1 only (a table's row axis trained
    on 32 rows, used on 128), the token axis 0 unchanged:

    >>> pi = StructuralRoPE(8, 2, scaling={1: {"rope_type": "linear", "factor": 4.0}})
    >>> torch.allclose(pi.angles(torch.tensor([5, 8])), rope.angles(torch.tensor([5, 2])))
    True
    """

    inv_freq: torch.Tensor
    mixing: torch.Tensor | None
    axis_map: torch.Tensor | None
    axis_inv_freq: torch.Tensor | None
    pair_scale: torch.Tensor | None

    def __init__(
        self,
        head_dim: int,
        num_axes: int,
        allocation: Allocation = "sectioned",
        sections: Sequence[int] | None = None,
        base: float = 10000.0,
        layout: PairLayout = "half",
        num_heads: int | None = None,
        mixing: torch.Tensor | None = None,
        learnable: bool = False,
        max_table_extent: int = 1 << 18,
        *,
        inv_freq: torch.Tensor | None = None,
        qk_layout: QKLayout = "blhd",
        scaling: Mapping[int, Mapping[str, Any]] | None = None,
        axis_inv_freq: torch.Tensor | None = None,
    ):
        super().__init__()
        config = RoPEConfig(
            head_dim,
            num_axes,
            allocation,
            sections,
            base,
            layout,
            num_heads,
            learnable,
            max_table_extent,
            qk_layout,
            scaling,
        )
        self.config = config  # the validated settings; StructuralRoPE.from_config(self.config) rebuilds them
        self.head_dim, self.num_axes, self.num_pairs = config.head_dim, config.num_axes, config.head_dim // 2
        self.allocation, self.layout, self.qk_layout = config.allocation, config.layout, config.qk_layout
        self.base, self.num_heads, self.learnable = config.base, config.num_heads, config.learnable
        self.sections = None if config.sections is None else list(config.sections)
        self._init_inv_freq(inv_freq)
        axis_map = self._init_allocation(mixing)
        self._init_axis_freq(axis_inv_freq, inv_freq is not None, axis_map)
        self._init_tables(axis_map, config.max_table_extent)

    @classmethod
    def from_config(
        cls,
        config: RoPEConfig,
        *,
        mixing: torch.Tensor | None = None,
        inv_freq: torch.Tensor | None = None,
        axis_inv_freq: torch.Tensor | None = None,
    ) -> StructuralRoPE:
        """A :class:`StructuralRoPE` with the settings of ``config`` (and the given tensors).

        Parameters
        ----------
        config : RoPEConfig
            The validated settings.
        mixing, inv_freq, axis_inv_freq : torch.Tensor, optional
            As in the constructor.

        Returns
        -------
        StructuralRoPE

        Raises
        ------
        SpecError
            ``config`` not a :class:`RoPEConfig`, or called on a subclass with constructor
            arguments of its own.
        ShapeError
            As the constructor, for the tensors.

        Examples
        --------
        >>> cfg = RoPEConfig(head_dim=8, num_axes=2, allocation="interleaved")
        >>> rope = StructuralRoPE.from_config(cfg)
        >>> rope.config == cfg, rope.axis_map.tolist()
        (True, [[0, 1, 0, 1]])
        >>> torch.equal(rope.inv_freq, StructuralRoPE(8, 2, "interleaved").inv_freq)
        True
        """
        if not isinstance(config, RoPEConfig):
            raise SpecError(f"config must be a RoPEConfig, got {type(config).__name__}")
        if cls.__init__ is not StructuralRoPE.__init__:
            raise SpecError(f"{cls.__name__} has constructor arguments of its own; build it with them")
        return cls(**config.as_kwargs(), mixing=mixing, inv_freq=inv_freq, axis_inv_freq=axis_inv_freq)

    def _init_inv_freq(self, inv_freq: torch.Tensor | None) -> None:
        if inv_freq is None:
            inv_freq = rope_inv_freq(self.head_dim, self.base)
        else:
            inv_freq = check_frequencies(inv_freq, (self.num_pairs,), "inv_freq")
        if self.learnable and self.allocation != "mixed":
            self.inv_freq = nn.Parameter(inv_freq)
        else:
            self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _init_axis_freq(self, axis_inv_freq, given_inv_freq: bool, axis_map) -> None:
        """Per-axis frequencies ``(A, P)`` and per-pair attention factors ``(H', P)`` (or None: shared ``ω``)."""
        scaling = self.config.scaling
        self.scaling = scaling or None
        freqs = factors = None
        if scaling is not None and axis_inv_freq is not None:
            raise SpecError("give scaling or axis_inv_freq, not both")
        if scaling:
            if given_inv_freq:
                raise SpecError(
                    "per-axis scaling is computed from base; it cannot be combined with inv_freq or learnable"
                )
            freqs, factors = axis_inv_freq_from_specs(scaling, self.num_axes, self.head_dim, self.base)
        elif axis_inv_freq is not None:
            if self.learnable:
                raise SpecError("axis_inv_freq cannot be combined with learnable")
            freqs = check_frequencies(axis_inv_freq, (self.num_axes, self.num_pairs), "axis_inv_freq", "(A, P)")
        self.register_buffer("axis_inv_freq", freqs, persistent=False)
        pair_scale = None
        if factors is not None and not bool((factors == 1).all()):
            if axis_map is None:
                raise SpecError("scaling with an attention factor (yarn) needs a one-hot allocation, not 'mixed'")
            pair_scale = factors[axis_map]  # (H', P): the factor of every pair's axis
        self.register_buffer("pair_scale", pair_scale, persistent=False)

    def _init_allocation(self, mixing) -> torch.Tensor | None:
        """Set ``axis_map`` (``(H', P)`` axis per pair) or ``mixing``; return the axis map."""
        if self.allocation == "mixed":
            w = mixing_matrix(mixing, self.num_pairs, self.num_axes, self.num_heads)
            if self.learnable:
                self.mixing = nn.Parameter(w)
            else:
                self.register_buffer("mixing", w)
            self.axis_map = None
            return None
        self.mixing = None
        if self.allocation == "per_head":
            axes = head_axes(self.num_heads, self.num_axes, self.sections)  # (H,): all pairs of a head
            axis_map = axes[:, None].expand(len(axes), self.num_pairs).contiguous()
        else:
            axis_map = pair_axes(self.num_pairs, self.num_axes, self.allocation, self.sections)[None, :]
        self.register_buffer("axis_map", axis_map, persistent=False)
        return axis_map

    def _init_tables(self, axis_map: torch.Tensor | None, max_table_extent: int) -> None:
        """Table layout: per-head or one axis → one table; several axes → a stacked per-axis table."""
        self._head_axes: list[int] | None = None
        self._single_axis: int | None = None
        pair_axis = None
        if self.allocation == "per_head" and axis_map is not None:
            self._head_axes = axis_map[:, 0].tolist()
        elif axis_map is not None:
            used = axis_map[0].unique()
            if used.numel() == 1:
                self._single_axis = int(used)
            else:
                pair_axis = axis_map[0]
        self.cache = CosSinCache(max_table_extent, pair_axis, self.num_axes)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, num_axes={self.num_axes}, allocation={self.allocation!r}, "
            f"layout={self.layout!r}, base={self.base}, learnable={self.learnable}"
            + (f", scaling={self.scaling}" if self.scaling else "")
        )

    # ------------------------------------------------------------------ angles
    def _per_head(self) -> bool:
        return self.allocation == "per_head" or (self.mixing is not None and self.mixing.dim() == 3)

    def _angle_matrix(self, dtype: torch.dtype) -> torch.Tensor:
        """``M`` of shape ``(H', A, P)`` with ``φ = c @ M``: ``M[h, a, j] = ω_j W[h, j, a]``."""
        if self.axis_inv_freq is not None:  # per-axis tables: ω_{a, j}
            w_freq = self.axis_inv_freq.to(dtype).T[None]  # (1, P, A)
        else:
            w_freq = self.inv_freq.to(dtype)[None, :, None]
        if self.mixing is not None:
            w = self.mixing.to(dtype)
            if w.dim() == 2:
                w = w[None]
            return (w * w_freq).transpose(-1, -2)
        # without mixing every allocation sets axis_map
        onehot = F.one_hot(cast(torch.Tensor, self.axis_map), self.num_axes).to(dtype)  # (H', P, A)
        return (onehot * w_freq).transpose(-1, -2)

    def angles(self, coords: torch.Tensor) -> torch.Tensor:
        """Angles ``φ`` of shape ``(..., D/2)`` (``(..., H, D/2)`` for per-head allocations).

        Computed in fp32 (fp64 when ``coords`` are fp64), with autocast off.

        Parameters
        ----------
        coords : torch.Tensor
            ``(..., A)`` coordinates.

        Returns
        -------
        torch.Tensor
            ``φ_{n,j} = ω_j · c_{n, axis(j)}`` for one-hot allocations.

        Raises
        ------
        ShapeError
            ``coords`` not ending in ``A``, half-precision, complex or non-finite.

        Examples
        --------
        Sectioned over 2 axes with ``D = 8``: pairs 0–1 follow axis 0, pairs 2–3 axis 1.

        >>> rope = StructuralRoPE(head_dim=8, num_axes=2)
        >>> rope.inv_freq.tolist()
        [1.0, 0.10000000149011612, 0.009999999776482582, 0.0010000000474974513]
        >>> torch.allclose(rope.angles(torch.tensor([1, 2])), rope.inv_freq * torch.tensor([1, 1, 2, 2]))
        True
        """
        coords = self._check_coords(coords, None)
        dtype = torch.float64 if coords.dtype == torch.float64 else torch.float32
        with torch.autocast(device_type=coords.device.type, enabled=False):
            m = self._angle_matrix(dtype).to(coords.device)
            c = coords.to(dtype)
            if self._per_head():
                return torch.einsum("...a,hap->...hp", c, m)
            return c @ m[0]

    def cos_sin(
        self, coords: torch.Tensor, dtype: torch.dtype = torch.float32, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``cos φ``, ``sin φ`` in ``dtype`` with a head axis: ``(..., H', D/2)``, ``H' ∈ {1, H}``.

        Non-negative integer coordinates read the cached tables (:mod:`.rope_tables`); others
        compute the angles. ``mask`` (the token shape, True = real) makes masked tokens the
        identity rotation (``cos = 1``, ``sin = 0``).

        Parameters
        ----------
        coords : torch.Tensor
            ``(..., A)`` coordinates.
        dtype : torch.dtype
            Output dtype (angles are computed in fp32 or fp64 first).
        mask : torch.Tensor, optional
            Bool ``coords.shape[:-1]``.

        Returns
        -------
        tuple of torch.Tensor
            ``(cos, sin)``.

        Raises
        ------
        ShapeError
            Bad ``coords``, or ``mask`` not of the token shape.

        Examples
        --------
        >>> rope = StructuralRoPE(head_dim=8, num_axes=2)
        >>> coords = torch.tensor([[3, 1], [2, 5]])
        >>> cos, sin = rope.cos_sin(coords, mask=torch.tensor([True, False]))
        >>> cos.shape
        torch.Size([2, 1, 4])
        >>> torch.allclose(cos[0, 0], rope.angles(coords[0]).cos()), cos[1].tolist(), sin[1].tolist()
        (True, [[1.0, 1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0, 0.0]])
        """
        coords = self._check_coords(coords, None)
        cos_sin, huge = self._table_cos_sin(coords, dtype)
        if cos_sin is None:
            # fp32 holds integers exactly only up to 2^24: larger coordinates get fp64 angles
            ang_dtype = torch.float64 if huge or torch.float64 in (dtype, coords.dtype) else torch.float32
            ang = self.angles(coords.to(ang_dtype))
            if not self._per_head():
                ang = ang.unsqueeze(-2)
            cos_sin = ang.cos().to(dtype), ang.sin().to(dtype)
        cos, sin = cos_sin
        if self.pair_scale is not None:  # YaRN-style attention factors of the scaled axes
            scale = self.pair_scale.to(device=cos.device, dtype=cos.dtype)
            cos, sin = cos * scale, sin * scale
        if mask is not None:
            mask = torch.as_tensor(mask, device=cos.device).to(torch.bool)
            if mask.shape != coords.shape[:-1]:
                raise ShapeError(
                    f"mask must have the token shape {tuple(coords.shape[:-1])}, given {tuple(mask.shape)}"
                )
            keep = mask[..., None, None]
            cos = torch.where(keep, cos, torch.ones((), dtype=cos.dtype, device=cos.device))
            sin = torch.where(keep, sin, torch.zeros((), dtype=sin.dtype, device=sin.device))
        return cos, sin

    def _table_cos_sin(self, coords: torch.Tensor, dtype: torch.dtype):
        """``((cos, sin) or None, huge)``: gathered from the cached integer table when it applies;
        ``huge`` says integer coordinates reach 2^24 (beyond fp32's exact integers).

        Under ``torch.compile`` the table is skipped (its extent is a data-dependent int)."""
        if coords.is_floating_point() or coords.numel() == 0 or is_compiling():
            return None, False
        lo_t, hi_t = torch.aminmax(coords)
        lo, hi = int(lo_t), int(hi_t)
        huge = max(hi, -lo) >= 1 << 24
        if (
            self.axis_map is None
            or dtype == torch.float64
            or isinstance(self.inv_freq, nn.Parameter)  # learnable: tables would go stale
            or lo < 0
            or hi >= self.cache.max_extent
        ):
            return None, huge
        table_freq = self.inv_freq if self.axis_inv_freq is None else self.axis_inv_freq
        if self.axis_inv_freq is not None:
            if self.allocation == "per_head":  # one table per axis would be needed: compute instead
                return None, huge
            if self._single_axis is not None:
                table_freq = self.axis_inv_freq[self._single_axis]
        cos_sin = self.cache.lookup(table_freq, coords, dtype, head_axes=self._head_axes, single_axis=self._single_axis)
        return cos_sin, False

    # ----------------------------------------------------------------- forward
    def _check_coords(self, coords, like: torch.Tensor | None) -> torch.Tensor:
        """:func:`check_coords` on ``like``'s device (default: a tensor stays, other input goes to ``inv_freq``'s)."""
        if like is not None:
            return check_coords(coords, self.num_axes, like.device)
        device = None if isinstance(coords, torch.Tensor) else self.inv_freq.device
        return check_coords(coords, self.num_axes, device)

    def _resolve_coords(self, x: torch.Tensor, coords, cu_seqlens) -> torch.Tensor:
        """Coordinates ``(*tokens, A)`` for ``x`` already in ``(…, L, H, D)`` order (:func:`resolve_coords`)."""
        return resolve_coords(x, coords, cu_seqlens, self.num_axes, self._check_coords)

    def _check_x(self, x, name: str) -> torch.Tensor:
        """Check ``x`` and return it in ``(…, L, H, D)`` order."""
        x = to_blhd(check_qk(x, name, self.head_dim, self.qk_layout), self.qk_layout)
        if self._per_head():
            # per-head: num_heads (allocation="per_head") or an (H, P, A) mixing matrix
            heads = self.num_heads if self.num_heads is not None else cast(torch.Tensor, self.mixing).shape[0]
            if heads % x.shape[-2]:
                raise ShapeError(f"{name} has {x.shape[-2]} heads; the per-head encoding was built for {heads}")
        return x

    def _rotate_with(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x.shape[-2]
        return from_blhd(
            apply_rotary(x, head_group_slice(cos, h), head_group_slice(sin, h), self.layout), self.qk_layout
        )

    def rotate(self, x: torch.Tensor, coords=None, cu_seqlens=None, *, mask=None) -> torch.Tensor:
        """Rotate one tensor (``q`` or ``k``) by its coordinates.

        Parameters
        ----------
        x : torch.Tensor
            ``(B, L, H, D)`` or packed ``(T, H, D)`` (heads first with ``qk_layout="bhld"``).
        coords : torch.Tensor, optional
            ``(B, L, A)`` / ``(T, A)``; default: the token index on every axis.
        cu_seqlens : torch.Tensor, optional
            Sequence offsets of packed input (positions restart per sequence).
        mask : torch.Tensor, optional
            Bool token mask; masked tokens are not rotated.

        Returns
        -------
        torch.Tensor
            The rotated ``x``, same shape and layout.

        Raises
        ------
        ShapeError
            Shapes or dtypes that do not match (message: expected vs given).

        Examples
        --------
        >>> import torch
        >>> rope = StructuralRoPE(8, 1)
        >>> x = torch.randn(1, 3, 2, 8)
        >>> torch.equal(rope.rotate(x, torch.zeros(1, 3, 1, dtype=torch.int64)), x)
        True
        """
        x = self._check_x(x, "x")
        coords = self._resolve_coords(x, coords, cu_seqlens)
        cos, sin = self.cos_sin(coords, x.dtype, mask)
        return self._rotate_with(x, cos, sin)

    def forward(self, q: torch.Tensor, k: torch.Tensor, coords=None, cu_seqlens=None, *, mask=None, k_coords=None):
        """Return ``(q_rot, k_rot)`` in the layout given; see the class docstring for shapes.

        Parameters
        ----------
        q, k : torch.Tensor
            Queries and keys (``k`` may have fewer heads: grouped-query attention).
        coords, cu_seqlens, mask
            As :meth:`rotate`.
        k_coords : torch.Tensor, optional
            Coordinates of the keys when they differ from the queries' tokens.

        Returns
        -------
        tuple of torch.Tensor
            ``(q_rot, k_rot)``.

        Raises
        ------
        ShapeError
            ``q`` and ``k`` with different tokens (without ``k_coords``), or bad shapes.
        SpecError
            A per-head encoding that differs inside a group of query heads sharing a key head.

        Examples
        --------
        Packed sequences: with ``cu_seqlens`` positions restart per sequence, so the second
        sequence is rotated as if it stood alone.

        >>> rope = StructuralRoPE(head_dim=8, num_axes=1)
        >>> q = k = torch.ones(5, 1, 8)
        >>> q_rot, _ = rope(q, k, cu_seqlens=torch.tensor([0, 3, 5]))
        >>> torch.equal(q_rot[3:], rope(q[:2], k[:2])[0])
        True
        """
        if k_coords is not None:
            return self.rotate(q, coords, cu_seqlens, mask=mask), self.rotate(k, k_coords, cu_seqlens, mask=mask)
        q, k = self._check_x(q, "q"), self._check_x(k, "k")
        check_same_tokens(q, k)
        coords = self._resolve_coords(q, coords, cu_seqlens)
        cos, sin = self.cos_sin(coords, q.dtype, mask)
        q_rot = self._rotate_with(q, cos, sin)
        if k.dtype != q.dtype:
            cos, sin = self.cos_sin(coords, k.dtype, mask)
        return q_rot, self._rotate_with(k, cos, sin)
