"""Coordinate bookkeeping of a patched model: prompt coordinates, the KV cache's keys, continuation after the prompt.

Examples
--------
Two decode steps after a 2-token prompt continue axis 0 and keep the structural axis:

>>> st = CoordinateState(num_axes=2)
>>> _ = st.resolve(torch.tensor([[[0, 0], [1, 4]]]), batch=1, length=2, past=0)
>>> _ = st.resolve(None, batch=1, length=1, past=2)
>>> st.resolve(None, batch=1, length=1, past=3).tolist()
[[[3, 4]]]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ...exceptions import ShapeError

ContinueRule = Callable[[torch.Tensor, int], torch.Tensor]


def continue_axis0(last: torch.Tensor, num_new: int) -> torch.Tensor:
    """Default continuation rule: axis 0 counts on from ``last``, the other axes are copied.

    Parameters
    ----------
    last : torch.Tensor
        ``(B, A)`` coordinates of the last token seen.
    num_new : int
        Number of new tokens.

    Returns
    -------
    torch.Tensor
        ``(B, num_new, A)`` coordinates of the new tokens.

    Examples
    --------
    >>> continue_axis0(torch.tensor([[5, 2, 1]]), 2).tolist()
    [[[6, 2, 1], [7, 2, 1]]]
    """
    steps = torch.arange(1, num_new + 1, device=last.device, dtype=last.dtype)
    new = last[:, None, :].expand(last.shape[0], num_new, last.shape[1]).clone()
    new[..., 0] = new[..., 0] + steps
    return new


@dataclass
class CoordinateState:
    """Per-model coordinate bookkeeping shared by the hook, the rotary module and the attention function.

    Parameters
    ----------
    num_axes : int
        ``A``.
    rule : callable
        ``rule(last (B, A), n) -> (B, n, A)`` for tokens after the prompt (:func:`continue_axis0`).

    Attributes
    ----------
    pending : torch.Tensor or None
        Coordinates set by :meth:`StructuralPatch.set_coordinates` for the next prefill.
    current : torch.Tensor or None
        ``(B, L, A)`` coordinates of the tokens of the running forward pass.
    keys : torch.Tensor or None
        ``(B, S, A)`` coordinates of every token in the KV cache (current ones included).
    padding : torch.Tensor or None
        ``(B, S)`` bool, True on real key tokens (from a 2-D ``attention_mask``).
    extras : dict
        Inputs of structural biases for the ``structpos_flex`` attention (see :mod:`structpos.integrations.flex`).
    cu_seqlens : torch.Tensor or None
        ``(D + 1,)`` document offsets of a packed batch (``B = 1``) in the running forward pass.

    Examples
    --------
    >>> st = CoordinateState(num_axes=2)
    >>> st.resolve(None, batch=1, length=3, past=0).tolist()
    [[[0, 0], [1, 1], [2, 2]]]
    >>> st.resolve(torch.tensor([[[0, 0], [1, 5], [2, 5]]]), batch=1, length=3, past=0).shape
    torch.Size([1, 3, 2])
    >>> st.resolve(None, batch=1, length=1, past=3).tolist()  # continues axis 0, copies axis 1
    [[[3, 5]]]
    >>> st.keys.tolist()  # the whole cache: prompt and decoded token
    [[[0, 0], [1, 5], [2, 5], [3, 5]]]
    >>> st.resolve(torch.zeros(1, 3, 4, dtype=torch.long), batch=1, length=3, past=0)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: position_ids must have shape (B, L, A) = (1, 3, 2); given (1, 3, 4)
    """

    num_axes: int
    rule: ContinueRule = continue_axis0
    pending: torch.Tensor | None = None
    current: torch.Tensor | None = None
    keys: torch.Tensor | None = None
    padding: torch.Tensor | None = None
    extras: dict = field(default_factory=dict)
    structural: bool = False
    cu_seqlens: torch.Tensor | None = None

    def _check(self, coords: torch.Tensor, batch: int, length: int, what: str) -> torch.Tensor:
        expected = (batch, length, self.num_axes)
        if not isinstance(coords, torch.Tensor) or coords.dtype in (torch.float16, torch.bfloat16, torch.bool):
            given = (
                f"{coords.dtype} {tuple(coords.shape)}" if isinstance(coords, torch.Tensor) else type(coords).__name__
            )
            raise ShapeError(f"{what} must be an int64 or fp32 tensor of shape {expected}; given {given}")
        if coords.dim() == 2 and coords.shape == (length, self.num_axes):
            coords = coords.expand(batch, length, self.num_axes)
        if tuple(coords.shape) != expected:
            raise ShapeError(f"{what} must have shape (B, L, A) = {expected}; given {tuple(coords.shape)}")
        return coords

    def resolve(self, position_ids, batch: int, length: int, past: int, device=None) -> torch.Tensor:
        """Coordinates ``(B, L, A)`` of the incoming tokens; updates ``current``, ``keys``.

        Order: 3-D ``position_ids``; the pending coordinates at a prefill; the continuation
        rule after a prefill that had structural coordinates; 2-D ``position_ids`` (or the
        token index) on every axis — so a sequence given no structure runs as the stock model.
        """
        if past == 0:
            self.structural = False
        if position_ids is not None and position_ids.dim() == 3:
            coords, self.structural = self._check(position_ids, batch, length, "position_ids"), True
        elif past == 0 and self.pending is not None:
            coords, self.pending = self._check(self.pending.to(device), batch, length, "set_coordinates()"), None
            self.structural = True
        elif past > 0 and self.structural and self.keys is not None and self.keys.shape[0] == batch:
            coords = self.rule(self.keys[:, -1], length).to(self.keys.dtype)
        else:  # no structure given for this sequence: 1-D positions on every axis (the stock model)
            if position_ids is None:
                position_ids = torch.arange(past, past + length, device=device)[None].expand(batch, length)
            coords = position_ids[..., None].expand(*position_ids.shape, self.num_axes)
            coords = coords.expand(batch, length, self.num_axes)
        prev = self.keys if past > 0 and self.keys is not None else None
        self.keys = coords if prev is None else torch.cat([prev.to(coords.dtype), coords], dim=1)
        self.current = coords
        return coords
