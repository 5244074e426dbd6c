"""RoPEConfig: the settings of a rotary encoder in one frozen, validated value.

:class:`~structpos.encoders.StructuralRoPE` rotates pair ``j`` of every head vector by
``φ_{n,j} = ω_j · ⟨W_j, c_n⟩`` with ``ω_j = base^{−2j/D}``. Everything that fixes ``ω`` and ``W``
short of learned or given tensors is a setting: the width ``D``, the axes ``A``, ``base``, the
allocation of pairs to axes and its ``sections``, the pair and q/k layouts, the per-axis
length-extrapolation ``scaling``. A :class:`RoPEConfig` holds them, checks them once, when it is
made (:meth:`RoPEConfig.__post_init__`, the one validator of these settings), and can be stored,
compared, changed with :meth:`RoPEConfig.replace` and handed to any encoder that shares them:
``StructuralRoPE.from_config(cfg)`` and ``AWRoPE.from_config(cfg, ...)``. Tensors (``mixing``,
``inv_freq``, ``axis_inv_freq``) are state, not settings: they stay arguments of the encoder.

Examples
--------
>>> cfg = RoPEConfig(head_dim=16, num_axes=3, sections=(4, 2, 2))
>>> cfg.sections, cfg.allocation
((4, 2, 2), 'sectioned')
>>> cfg.replace(sections=(4, 4, 4))
Traceback (most recent call last):
...
structpos.exceptions.SpecError: sections [4, 4, 4] must have 3 non-negative integer entries summing to head_dim/2 = 8
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Sequence

from ..exceptions import SpecError
from ._checks import axis_counts, check_choice, check_count, check_flag, check_head_dim, check_real
from ._options import ALLOCATIONS, LAYOUTS, QK_LAYOUTS, Allocation, PairLayout, QKLayout
from .rope_scaling import axis_inv_freq

__all__ = ["RoPEConfig", "MAX_TABLE_EXTENT"]

MAX_TABLE_EXTENT = 2**31 - 1
"""Largest ``max_table_extent`` (the cached cos/sin tables are indexed by int32-safe rows)."""


@dataclass(frozen=True)
class RoPEConfig:
    """Settings of a rotary encoder, validated when made (see the module docstring).

    Parameters
    ----------
    head_dim : int
        Rotated width ``D`` (positive, even); ``P = D/2`` pairs.
    num_axes : int
        Coordinate axes ``A`` (≥ 1).
    allocation : {"sectioned", "interleaved", "per_head", "mixed"}
        How pairs (or heads) are given to axes (:mod:`.rope_allocation`).
    sections : sequence of int, optional
        Pairs per axis (``sectioned``/``interleaved``, summing to ``P``) or heads per axis
        (``per_head``, summing to ``num_heads``); stored as a tuple. Default: near-equal, which
        must give every axis at least one pair (or head).
    base : float
        ``ω_j = base^{−2j/D}`` (``> 1``; also called θ).
    layout : {"half", "interleaved"}
        Pair layout inside a head vector.
    num_heads : int, optional
        Heads ``H``; needed by ``per_head``.
    learnable : bool
        Frequencies (or the mixing matrix) become parameters.
    max_table_extent : int
        Largest integer coordinate served from the cached cos/sin tables (a memory cap).
    qk_layout : {"blhd", "bhld"}
        ``q``/``k`` as ``(B, L, H, D)`` or ``(B, H, L, D)``.
    scaling : mapping of int to mapping, optional
        Per-axis length extrapolation ``{axis: spec}`` (:mod:`.rope_scaling`); not with
        ``learnable``. Stored as a new ``{int: dict}``.

    Raises
    ------
    SpecError
        Any setting out of its range or choices; ``sections`` of the wrong length, sign or sum;
        a default split leaving an axis without pairs (or heads); ``per_head`` without
        ``num_heads``; a bad ``scaling`` spec or one combined with ``learnable``.

    Examples
    --------
    >>> RoPEConfig(head_dim=8, num_axes=5)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: head_dim=8 has 4 rotary pairs, too few for num_axes=5: axis 4 would get none and be ignored; use a larger head_dim or fewer axes, or give explicit sections
    >>> RoPEConfig(64, 2, "per_head", num_heads=8).as_kwargs()["num_heads"]
    8
    """

    head_dim: int
    num_axes: int = 1
    allocation: Allocation = "sectioned"
    sections: Sequence[int] | None = None
    base: float = 10000.0
    layout: PairLayout = "half"
    num_heads: int | None = None
    learnable: bool = False
    max_table_extent: int = 1 << 18
    qk_layout: QKLayout = "blhd"
    scaling: Mapping[int, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        """Check every setting and store it normalised (ints, a float ``base``, tuple ``sections``)."""
        check_choice(self.allocation, "allocation", ALLOCATIONS)
        head_dim = check_head_dim(self.head_dim)
        num_axes = check_count(self.num_axes, "num_axes")
        check_choice(self.qk_layout, "qk_layout", QK_LAYOUTS)
        check_choice(self.layout, "layout", LAYOUTS)
        base = check_real(self.base, "base", low=1.0, low_open=True)
        num_heads = None if self.num_heads is None else check_count(self.num_heads, "num_heads")
        check_flag(self.learnable, "learnable")
        # a memory cap, not a size: tables grow to the extent coordinates need (long contexts may raise it past 2²⁰)
        extent = check_count(self.max_table_extent, "max_table_extent", maximum=MAX_TABLE_EXTENT)
        sections = self._checked_sections(head_dim // 2, num_axes, num_heads)
        scaling = self._checked_scaling(head_dim, num_axes, base)
        for name, value in [
            ("head_dim", head_dim),
            ("num_axes", num_axes),
            ("base", base),
            ("num_heads", num_heads),
            ("max_table_extent", extent),
            ("sections", sections),
            ("scaling", scaling),
        ]:
            object.__setattr__(self, name, value)

    def _checked_sections(self, num_pairs: int, num_axes: int, num_heads: int | None) -> tuple[int, ...] | None:
        """``sections`` as a tuple, checked against what the allocation shares out (pairs or heads)."""
        if self.allocation == "per_head":
            if num_heads is None:
                raise SpecError("allocation='per_head' needs num_heads")
            what = f"num_heads = {num_heads} (per-head sections)"
            available = f"allocation='per_head' with num_heads={num_heads} has {num_heads} heads"
            counts = axis_counts(self.sections, num_axes, num_heads, what, available)
        elif self.allocation == "mixed":  # W is a matrix; sections do not apply
            return None if self.sections is None else tuple(self.sections)
        else:
            what, available = f"head_dim/2 = {num_pairs}", f"head_dim={2 * num_pairs} has {num_pairs} rotary pairs"
            counts = axis_counts(self.sections, num_axes, num_pairs, what, available)
        return None if self.sections is None else tuple(counts)

    def _checked_scaling(self, head_dim: int, num_axes: int, base: float) -> dict[int, dict[str, Any]] | None:
        """``scaling`` as a new ``{axis: spec}`` after computing its tables once (which checks every spec)."""
        if self.scaling is None:
            return None
        if not isinstance(self.scaling, Mapping):
            raise SpecError(f"scaling must be a mapping {{axis: spec}}, got {type(self.scaling).__name__}")
        if self.scaling and self.learnable:
            raise SpecError("per-axis scaling is computed from base; it cannot be combined with inv_freq or learnable")
        axis_inv_freq(self.scaling, num_axes, head_dim, base)
        return {int(a): dict(spec) for a, spec in self.scaling.items()}

    def as_kwargs(self) -> dict[str, Any]:
        """The settings as keyword arguments of :class:`~structpos.encoders.StructuralRoPE`.

        Returns
        -------
        dict
            Field name → value.

        Examples
        --------
        >>> sorted(RoPEConfig(8).as_kwargs())[:3]
        ['allocation', 'base', 'head_dim']
        """
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> RoPEConfig:
        """A new config with ``changes`` applied (and validated again).

        Parameters
        ----------
        **changes
            Field name → new value.

        Returns
        -------
        RoPEConfig

        Examples
        --------
        >>> RoPEConfig(8, 2).replace(allocation="interleaved").allocation
        'interleaved'
        """
        return dataclasses.replace(self, **changes)

    def refuse_unused(self, encoder: str, used: Sequence[str]) -> None:
        """Refuse settings an encoder cannot honour: every field outside ``used`` must keep its default.

        Parameters
        ----------
        encoder : str
            The encoder's name, for the message.
        used : sequence of str
            Fields the encoder reads.

        Raises
        ------
        SpecError
            A field outside ``used`` set to something other than its default (names the field).

        Examples
        --------
        >>> RoPEConfig(8, 2, "interleaved").refuse_unused("AWRoPE", ["head_dim", "num_axes"])
        Traceback (most recent call last):
        ...
        structpos.exceptions.SpecError: AWRoPE does not use RoPEConfig.allocation; leave it at its default 'sectioned', given 'interleaved'
        """
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name not in used and value != f.default:
                raise SpecError(
                    f"{encoder} does not use RoPEConfig.{f.name}; leave it at its default {f.default!r}, given {value!r}"
                )
