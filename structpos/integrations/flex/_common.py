"""Shared pieces of the FlexAttention integration: the callable types and the per-token input check.

Examples
--------
>>> _tokens([[0, 1, -1]], "node", 2)
tensor([[ 0,  1, -1]])
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...exceptions import ShapeError

ScoreMod = Callable[..., torch.Tensor]
MaskMod = Callable[..., torch.Tensor]
DistanceFn = Callable[..., torch.Tensor]


def _flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention


def _tokens(x, name: str, dims: int, dtype=torch.int64) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.dim() != dims or t.is_floating_point() or t.is_complex():
        want = {1: "(L,)", 2: "(B, L)", 3: "(B, L, K)"}[dims]
        raise ShapeError(f"{name} must be an integer tensor of shape {want}; given {t.dtype} {tuple(t.shape)}")
    return t.to(dtype)
