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
exactly 1-D RoPE for the one-hot allocations. Angles are computed in fp32 (fp64 for fp64
inputs) whatever the activation dtype; for non-negative integer coordinates cos/sin come
from tables cached per ``(extent, device, dtype)`` (:mod:`.rope_tables`).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ._rotary import apply_rotary, check_layout, rope_inv_freq
from .rope_tables import CosSinCache

__all__ = ["StructuralRoPE", "ALLOCATIONS", "pair_axes", "split_counts", "positions_from_cu_seqlens"]

ALLOCATIONS = ("sectioned", "interleaved", "per_head", "mixed")


def split_counts(total: int, parts: int) -> list[int]:
    """Near-equal split of ``total`` into ``parts`` counts, remainder to the first parts."""
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


def pair_axes(num_pairs: int, num_axes: int, allocation: str, sections: Sequence[int] | None = None) -> torch.Tensor:
    """Axis index of every pair, shape ``(P,)``, for the one-hot allocations."""
    if allocation == "sectioned":
        counts = list(sections) if sections is not None else split_counts(num_pairs, num_axes)
        if len(counts) != num_axes or sum(counts) != num_pairs or min(counts) < 0:
            raise ValueError(
                f"sections {counts} must have {num_axes} non-negative entries summing to head_dim/2 = {num_pairs}"
            )
        return torch.repeat_interleave(torch.arange(num_axes), torch.tensor(counts, dtype=torch.int64))
    if allocation == "interleaved":
        j = torch.arange(num_pairs)
        axes = j % num_axes
        if sections is not None:
            counts = list(sections)
            if len(counts) != num_axes or sum(counts) != num_pairs or min(counts) < 0:
                raise ValueError(
                    f"sections {counts} must have {num_axes} non-negative entries summing to head_dim/2 = {num_pairs}"
                )
            limit = torch.tensor([num_pairs] + [num_axes * c for c in counts[1:]])
            axes = torch.where(j < limit[axes], axes, torch.zeros_like(axes))
        return axes
    raise ValueError(f"pair_axes: allocation {allocation!r} is not one-hot per pair")


def positions_from_cu_seqlens(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """Row index within its sequence for every packed token: ``t − cu_seqlens[seq(t)]``."""
    cu = check_cu_seqlens(cu_seqlens, total)
    t = torch.arange(total, device=cu.device)
    seq = torch.searchsorted(cu[1:], t, right=True)
    return t - cu[seq]


def check_cu_seqlens(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    cu = torch.as_tensor(cu_seqlens).to(torch.int64)
    if cu.dim() != 1 or cu.numel() < 2:
        raise ValueError(f"cu_seqlens must be 1-D with ≥ 2 entries, got shape {tuple(cu.shape)}")
    if int(cu[0]) != 0 or int(cu[-1]) != total:
        raise ValueError(f"cu_seqlens must start at 0 and end at the packed length {total}, got {cu.tolist()[:3]}…{int(cu[-1])}")
    bad = torch.nonzero(cu[1:] < cu[:-1])
    if bad.numel():
        raise ValueError(f"cu_seqlens must be non-decreasing; it decreases at index {int(bad[0]) + 1}")
    return cu


class StructuralRoPE(nn.Module):
    """Rotary encoding of per-token structural coordinates (see the module docstring).

    ``forward(q, k, coords, cu_seqlens=None)`` takes padded ``q, k`` of shape ``(B, L, H, D)``
    with ``coords`` ``(B, L, A)``, or packed ``(T, H, D)`` with ``coords`` ``(T, A)``. ``coords``
    may be ``None``: the token index (within its sequence, via ``cu_seqlens`` when packed) is
    then used on every axis. Keyword ``mask`` (``(B, L)`` / ``(T,)``, True = real token) makes
    padding an identity rotation; ``k_coords`` gives keys their own coordinates (KV caches,
    cross-attention). ``k`` may have fewer heads than ``q`` (grouped-query attention).
    """

    def __init__(
        self,
        head_dim: int,
        num_axes: int,
        allocation: str = "sectioned",
        sections: Sequence[int] | None = None,
        base: float = 10000.0,
        layout: str = "half",
        num_heads: int | None = None,
        mixing: torch.Tensor | None = None,
        learnable: bool = False,
        max_table_extent: int = 1 << 18,
    ):
        super().__init__()
        if allocation not in ALLOCATIONS:
            raise ValueError(f"allocation must be one of {ALLOCATIONS}, got {allocation!r}")
        if num_axes < 1:
            raise ValueError(f"num_axes must be ≥ 1, got {num_axes}")
        self.head_dim = int(head_dim)
        self.num_axes = int(num_axes)
        self.num_pairs = self.head_dim // 2
        self.allocation = allocation
        self.layout = check_layout(layout)
        self.base = float(base)
        self.num_heads = num_heads
        self.learnable = bool(learnable)
        inv_freq = rope_inv_freq(self.head_dim, base)
        if learnable and allocation != "mixed":
            self.inv_freq = nn.Parameter(inv_freq)
        else:
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        P, A = self.num_pairs, self.num_axes
        if allocation == "per_head":
            if num_heads is None:
                raise ValueError("allocation='per_head' needs num_heads")
            counts = list(sections) if sections is not None else split_counts(num_heads, A)
            if len(counts) != A or sum(counts) != num_heads or min(counts) < 0:
                raise ValueError(f"per-head sections {counts} must have {A} entries summing to num_heads = {num_heads}")
            head_axes = torch.repeat_interleave(torch.arange(A), torch.tensor(counts, dtype=torch.int64))
            axis_map = head_axes[:, None].expand(num_heads, P).contiguous()
        elif allocation == "mixed":
            if mixing is None:
                w = torch.zeros(P, A)
                w[torch.arange(P), pair_axes(P, A, "interleaved")] = 1.0
            else:
                w = torch.as_tensor(mixing, dtype=torch.float32).clone()
            if w.shape[-2:] != (P, A) or w.dim() not in (2, 3):
                raise ValueError(f"mixing must have shape (P, A) = ({P}, {A}) or (H, P, A), got {tuple(w.shape)}")
            if not torch.isfinite(w).all():
                raise ValueError("mixing contains non-finite values")
            if w.dim() == 3 and num_heads is not None and w.shape[0] != num_heads:
                raise ValueError(f"per-head mixing has {w.shape[0]} heads, num_heads = {num_heads}")
            if learnable:
                self.mixing = nn.Parameter(w)
            else:
                self.register_buffer("mixing", w)
            axis_map = None
        else:
            axis_map = pair_axes(P, A, allocation, sections)[None, :]
        if allocation != "mixed":
            self.mixing = None
        if axis_map is not None:
            self.register_buffer("axis_map", axis_map, persistent=False)
        else:
            self.axis_map = None
        self.sections = list(sections) if sections is not None else None
        # table layout: per-head or one axis -> one table; several axes -> stacked per-axis table
        self._head_axes = self._single_axis = None
        pair_axis = None
        if allocation == "per_head":
            self._head_axes = axis_map[:, 0].tolist()
        elif axis_map is not None:
            used = axis_map[0].unique()
            if used.numel() == 1:
                self._single_axis = int(used)
            else:
                pair_axis = axis_map[0]
        self.register_buffer("_axis_offsets", torch.arange(A), persistent=False)
        self.cache = CosSinCache(max_table_extent, pair_axis, A)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, num_axes={self.num_axes}, allocation={self.allocation!r}, "
            f"layout={self.layout!r}, base={self.base}, learnable={self.learnable}"
        )

    # ------------------------------------------------------------------ angles
    def _per_head(self) -> bool:
        return self.allocation == "per_head" or (self.mixing is not None and self.mixing.dim() == 3)

    def _angle_matrix(self, dtype: torch.dtype) -> torch.Tensor:
        """``M`` of shape ``(H', A, P)`` with ``φ = c @ M``: ``M[h, a, j] = ω_j W[h, j, a]``."""
        w_freq = self.inv_freq.to(dtype)
        if self.mixing is not None:
            w = self.mixing.to(dtype)
            if w.dim() == 2:
                w = w[None]
            return (w * w_freq[None, :, None]).transpose(-1, -2)
        onehot = torch.nn.functional.one_hot(self.axis_map, self.num_axes).to(dtype)  # (H', P, A)
        return (onehot * w_freq[None, :, None]).transpose(-1, -2)

    def angles(self, coords: torch.Tensor) -> torch.Tensor:
        """Angles ``φ`` of shape ``(..., D/2)`` (``(..., H, D/2)`` for per-head allocations).

        Computed in fp32 (fp64 when ``coords`` are fp64), with autocast off.
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
        """``cos φ``, ``sin φ`` in ``dtype`` with a head axis: ``(..., H', D/2)``, ``H' ∈ {1, H}``."""
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
        if mask is not None:
            mask = torch.as_tensor(mask, device=cos.device).to(torch.bool)
            if mask.shape != coords.shape[:-1]:
                raise ValueError(f"mask shape {tuple(mask.shape)} must equal the token shape {tuple(coords.shape[:-1])}")
            keep = mask[..., None, None]
            cos = torch.where(keep, cos, torch.ones((), dtype=cos.dtype, device=cos.device))
            sin = torch.where(keep, sin, torch.zeros((), dtype=sin.dtype, device=sin.device))
        return cos, sin

    def _table_cos_sin(self, coords: torch.Tensor, dtype: torch.dtype):
        """``((cos, sin) or None, huge)``: gathered from the cached integer table when it applies;
        ``huge`` says integer coordinates reach 2^24 (beyond fp32's exact integers)."""
        if coords.is_floating_point() or coords.numel() == 0:
            return None, False
        lo, hi = torch.aminmax(coords)
        lo, hi = int(lo), int(hi)
        huge = max(hi, -lo) >= 1 << 24
        if (
            self.axis_map is None
            or dtype == torch.float64
            or isinstance(self.inv_freq, nn.Parameter)  # learnable: tables would go stale
            or lo < 0
            or hi >= self.cache.max_extent
        ):
            return None, huge
        extent, cos_t, sin_t = self.cache.get(self.inv_freq.to(coords.device), hi + 1, dtype)
        if self.allocation == "per_head":
            idx = coords[..., self._head_axes]  # (..., H): every pair of a head follows one axis
            return (F.embedding(idx, cos_t), F.embedding(idx, sin_t)), False
        if self._single_axis is not None:
            idx = coords[..., self._single_axis]
            return (F.embedding(idx, cos_t).unsqueeze(-2), F.embedding(idx, sin_t).unsqueeze(-2)), False
        # stacked per-axis table: row a·extent + c_a holds axis a's columns, zeros elsewhere
        idx = (coords + self._axis_offsets.to(coords.device) * extent).reshape(-1, self.num_axes)
        shape = (*coords.shape[:-1], 1, self.num_pairs)
        cos = F.embedding_bag(idx, cos_t, mode="sum").view(shape)
        sin = F.embedding_bag(idx, sin_t, mode="sum").view(shape)
        return (cos, sin), False

    # ----------------------------------------------------------------- forward
    def _check_coords(self, coords, like: torch.Tensor | None) -> torch.Tensor:
        if like is not None:
            coords = torch.as_tensor(coords, device=like.device)
        elif not isinstance(coords, torch.Tensor):
            coords = torch.as_tensor(coords, device=self.inv_freq.device)
        if coords.dtype in (torch.float16, torch.bfloat16):
            raise ValueError(
                f"coords in {coords.dtype} cannot hold integers above 256/2048 exactly; pass int64 or fp32 coords"
            )
        if coords.dtype == torch.bool:
            coords = coords.to(torch.int64)
        if coords.is_complex():
            raise ValueError("coords must be real")
        if coords.dim() < 1 or coords.shape[-1] != self.num_axes:
            raise ValueError(f"coords must end in num_axes = {self.num_axes}, got shape {tuple(coords.shape)}")
        if coords.is_floating_point() and not torch.isfinite(coords).all():
            bad = torch.nonzero(~torch.isfinite(coords))[0].tolist()
            raise ValueError(f"coords contain a non-finite value at index {bad}")
        if not coords.is_floating_point() and coords.dtype != torch.int64:
            coords = coords.to(torch.int64)
        return coords

    def _resolve_coords(self, x: torch.Tensor, coords, cu_seqlens) -> torch.Tensor:
        if x.dim() not in (3, 4) or x.shape[-1] != self.head_dim:
            raise ValueError(
                f"expected (B, L, H, {self.head_dim}) or packed (T, H, {self.head_dim}) input, got {tuple(x.shape)}"
            )
        tokens = x.shape[:-2]
        if cu_seqlens is not None:
            if x.dim() != 3:
                raise ValueError("cu_seqlens is only valid with packed (T, H, D) inputs")
            cu_seqlens = torch.as_tensor(cu_seqlens, device=x.device)
        if coords is None:
            if x.dim() == 3:
                pos = (
                    positions_from_cu_seqlens(cu_seqlens, tokens[0])
                    if cu_seqlens is not None
                    else torch.arange(tokens[0], device=x.device)
                )
            else:
                pos = torch.arange(tokens[1], device=x.device).expand(tokens)
            return pos[..., None].expand(*tokens, self.num_axes)
        coords = self._check_coords(coords, x)
        if coords.shape[:-1] != tokens:
            raise ValueError(f"coords shape {tuple(coords.shape)} does not match the token shape {tuple(tokens)} of q/k")
        if cu_seqlens is not None:
            check_cu_seqlens(cu_seqlens, tokens[0])
        return coords

    def _head_slice(self, cos: torch.Tensor, heads: int) -> torch.Tensor:
        """cos/sin for a tensor with ``heads`` heads (GQA keys share a q-head group's axis)."""
        if cos.shape[-2] in (1, heads):
            return cos
        total = cos.shape[-2]
        if total % heads:
            raise ValueError(f"k has {heads} heads, which does not divide the {total} heads of the encoding")
        group = total // heads
        grouped = cos.unflatten(-2, (heads, group))
        if not torch.equal(grouped, grouped[..., :1, :].expand_as(grouped)):
            raise ValueError(
                f"per-head encoding differs within a group of {group} query heads sharing one key head; "
                "choose sections that are multiples of the group size"
            )
        return grouped[..., 0, :]

    def rotate(self, x: torch.Tensor, coords=None, cu_seqlens=None, *, mask=None) -> torch.Tensor:
        """Rotate one tensor (``q`` or ``k``) by its coordinates."""
        coords = self._resolve_coords(x, coords, cu_seqlens)
        cos, sin = self.cos_sin(coords, x.dtype, mask)
        self._check_heads(x)
        return apply_rotary(x, self._head_slice(cos, x.shape[-2]), self._head_slice(sin, x.shape[-2]), self.layout)

    def _check_heads(self, x: torch.Tensor) -> None:
        if self._per_head():
            heads = self.num_heads if self.num_heads is not None else self.mixing.shape[0]
            if heads % x.shape[-2]:
                raise ValueError(f"input has {x.shape[-2]} heads; the per-head encoding was built for {heads}")

    def forward(self, q: torch.Tensor, k: torch.Tensor, coords=None, cu_seqlens=None, *, mask=None, k_coords=None):
        """Return ``(q_rot, k_rot)``; see the class docstring for shapes."""
        if k_coords is not None:
            return self.rotate(q, coords, cu_seqlens, mask=mask), self.rotate(k, k_coords, cu_seqlens, mask=mask)
        if q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
            raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in tokens or head_dim (pass k_coords)")
        coords = self._resolve_coords(q, coords, cu_seqlens)
        cos, sin = self.cos_sin(coords, q.dtype, mask)
        self._check_heads(q)
        self._check_heads(k)
        q_rot = apply_rotary(q, self._head_slice(cos, q.shape[-2]), self._head_slice(sin, q.shape[-2]), self.layout)
        if k.dtype != q.dtype:
            cos, sin = self.cos_sin(coords, k.dtype, mask)
        k_rot = apply_rotary(k, self._head_slice(cos, k.shape[-2]), self._head_slice(sin, k.shape[-2]), self.layout)
        return q_rot, k_rot
