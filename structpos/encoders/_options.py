"""The option strings of the rotary encoders, each a ``Literal`` and the tuple read from it.

Every tuple below is ``typing.get_args`` of its ``Literal``: the type checker and the runtime
check (:func:`~structpos.encoders._checks.check_choice`, the registry's ``choices``) read one
list, so an option added to the ``Literal`` is accepted everywhere at once. The module imports
nothing heavy, so the encoder registry can name the choices without importing torch.

Examples
--------
>>> ALLOCATIONS
('sectioned', 'interleaved', 'per_head', 'mixed')
>>> from typing import get_args
>>> get_args(PairLayout) == LAYOUTS and get_args(QKLayout) == QK_LAYOUTS
True
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "ALLOCATIONS",
    "AW_MODES",
    "Allocation",
    "AWMode",
    "EDGE_PHASE_SOURCES",
    "EdgePhaseSource",
    "LAYOUTS",
    "ONE_HOT_ALLOCATIONS",
    "OneHotAllocation",
    "PairLayout",
    "QK_LAYOUTS",
    "QKLayout",
]

Allocation = Literal["sectioned", "interleaved", "per_head", "mixed"]
"""How :class:`~structpos.encoders.StructuralRoPE` gives rotary pairs (or heads) to axes."""
ALLOCATIONS: tuple[str, ...] = get_args(Allocation)

OneHotAllocation = Literal["sectioned", "interleaved"]
"""The allocations in which every pair follows exactly one axis (:func:`~structpos.encoders.rope.pair_axes`)."""
ONE_HOT_ALLOCATIONS: tuple[str, ...] = get_args(OneHotAllocation)

PairLayout = Literal["half", "interleaved"]
"""Where the two entries of rotary pair ``j`` sit in a head vector: ``(j, j + D/2)`` or ``(2j, 2j + 1)``."""
LAYOUTS: tuple[str, ...] = get_args(PairLayout)

QKLayout = Literal["blhd", "bhld"]
"""``q``/``k`` as ``(B, L, H, D)`` or ``(B, H, L, D)`` (SDPA, FlexAttention and HF attention)."""
QK_LAYOUTS: tuple[str, ...] = get_args(QKLayout)

AWMode = Literal["sparse", "exact"]
"""AW-RoPE's transport: the ``K``-term series or the dense solve."""
AW_MODES: tuple[str, ...] = get_args(AWMode)

EdgePhaseSource = Literal["given", "coords", "learned"]
"""Where AW-RoPE's edge phases come from."""
EDGE_PHASE_SOURCES: tuple[str, ...] = get_args(EdgePhaseSource)
