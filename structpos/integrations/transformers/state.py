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
from typing import Any

import torch

from ...exceptions import InputError, ShapeError, SpecError

ContinueRule = Callable[[torch.Tensor, int], torch.Tensor]

_NOT_COORDINATES = (torch.float16, torch.bfloat16, torch.bool)
"""dtypes refused for coordinates: half precision cannot hold larger integers exactly; bool is no coordinate."""


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


def as_tensor(value: Any, what: str, device: torch.device | None = None) -> torch.Tensor:
    """``value`` as a tensor: a tensor stays as it is, an array-like (NumPy array, nested list) is converted.

    Parameters
    ----------
    value : array_like
        A tensor, NumPy array or nested list of numbers.
    what : str
        Its name in the error message.
    device : torch.device, optional
        Where a converted array-like goes (a tensor keeps its device).

    Returns
    -------
    torch.Tensor

    Raises
    ------
    InputError
        ``value`` is not an array of numbers.

    Examples
    --------
    >>> as_tensor([[0, 1], [1, 2]], "position_ids").shape
    torch.Size([2, 2])
    >>> as_tensor("abc", "position_ids")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: position_ids must be a tensor or an array of numbers; given str
    """
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value, device=device)
    except (TypeError, ValueError, RuntimeError):
        raise InputError(f"{what} must be a tensor or an array of numbers; given {type(value).__name__}") from None


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
        ``(D + 1,)`` document offsets of a packed row (``B = 1``) over the whole KV cache: the
        cached tokens and those of the running forward pass (``cu_seqlens[-1] = S``).

    Raises
    ------
    SpecError
        ``rule`` is not callable.

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

    def __post_init__(self) -> None:
        if not callable(self.rule):
            raise SpecError(
                f"rule must be callable as rule(last (B, A), n) -> (B, n, A) (e.g. continue_axis0); "
                f"given {type(self.rule).__name__}"
            )

    def coordinates(
        self, value: Any, what: str, batch: int | None = None, length: int | None = None, device=None
    ) -> torch.Tensor:
        """``value`` checked as coordinates: ``(B, L, A)``, or ``(L, A)`` broadcast over the batch.

        The one check of every coordinate tensor (3-D ``position_ids``, :meth:`StructuralPatch.set_coordinates`,
        a continuation rule's output). Array-likes are converted (:func:`as_tensor`); without
        ``batch``/``length`` only the dtype, the rank and ``A`` are checked.

        Raises
        ------
        InputError
            Not an array of numbers.
        ShapeError
            Half precision, bool or complex; another shape (message: expected vs given).

        Examples
        --------
        >>> st = CoordinateState(num_axes=2)
        >>> st.coordinates([[0, 0], [1, 3]], "set_coordinates()", batch=2, length=2).shape
        torch.Size([2, 2, 2])
        >>> st.coordinates(torch.zeros(2, 2, dtype=torch.bool), "position_ids")
        Traceback (most recent call last):
        ...
        structpos.exceptions.ShapeError: position_ids must be integer or fp32/fp64 coordinates of shape (B, L, 2); given torch.bool (2, 2)
        """
        coords = as_tensor(value, what, device)
        expected = ("B", "L", self.num_axes) if batch is None or length is None else (batch, length, self.num_axes)
        shown = f"({expected[0]}, {expected[1]}, {expected[2]})"
        if coords.dtype in _NOT_COORDINATES or coords.is_complex():
            raise ShapeError(
                f"{what} must be integer or fp32/fp64 coordinates of shape {shown}; given {coords.dtype} {tuple(coords.shape)}"
            )
        if batch is None or length is None:
            if coords.dim() not in (2, 3) or coords.shape[-1] != self.num_axes:
                raise ShapeError(
                    f"{what} must have shape (B, L, A) or (L, A) with A = {self.num_axes}; given {tuple(coords.shape)}"
                )
            return coords
        if coords.dim() == 2 and coords.shape == (length, self.num_axes):
            coords = coords.expand(*expected)
        if tuple(coords.shape) != expected:
            raise ShapeError(f"{what} must have shape (B, L, A) = {shown}; given {tuple(coords.shape)}")
        return coords

    def positions(
        self, position_ids: torch.Tensor | None, batch: int, length: int, past: int, device=None
    ) -> torch.Tensor:
        """HF's 1-D positions ``(B, L)``: 2-D ``position_ids`` ``(B, L)`` / ``(1, L)`` (or ``(L,)``), else the token index.

        Raises
        ------
        ShapeError
            ``position_ids`` of another shape.

        Examples
        --------
        >>> st = CoordinateState(num_axes=3)
        >>> st.positions(None, batch=2, length=3, past=4).tolist()
        [[4, 5, 6], [4, 5, 6]]
        >>> st.positions(torch.zeros(5, 3), batch=2, length=5, past=0)
        Traceback (most recent call last):
        ...
        structpos.exceptions.ShapeError: position_ids must be structural coordinates (B, L, A) = (2, 5, 3) or 1-D positions (B, L) = (2, 5); given (5, 3)
        """
        if position_ids is None:
            return torch.arange(past, past + length, device=device)[None].expand(batch, length)
        shape = tuple(position_ids.shape)
        if shape not in ((length,), (1, length), (batch, length)):
            raise ShapeError(
                f"position_ids must be structural coordinates (B, L, A) = {(batch, length, self.num_axes)} "
                f"or 1-D positions (B, L) = {(batch, length)}; given {shape}"
            )
        return position_ids.expand(batch, length)

    def set_pending(self, coords: Any) -> None:
        """Keep ``coords`` (checked, ``None`` to clear) for the next prefill."""
        self.pending = None if coords is None else self.coordinates(coords, "set_coordinates()")

    def resolve(self, position_ids, batch: int, length: int, past: int, device=None) -> torch.Tensor:
        """Coordinates ``(B, L, A)`` of the incoming tokens; updates ``current``, ``keys``.

        Order: 3-D ``position_ids``; the pending coordinates at a prefill; the continuation
        rule after a prefill that had structural coordinates; 2-D ``position_ids`` (or the
        token index) on every axis — so a sequence given no structure runs as the stock model.

        Raises
        ------
        SpecError
            3-D ``position_ids`` at a prefill while coordinates from :meth:`StructuralPatch.set_coordinates`
            are pending (they are dropped).
        ShapeError
            Coordinates or a continuation rule's output of the wrong shape or dtype.
        """
        if past == 0:
            self.structural = False
        pos = None if position_ids is None else as_tensor(position_ids, "position_ids", device)
        if pos is not None and pos.dim() == 3:
            coords = self._given(pos, batch, length, past)
        elif past == 0 and self.pending is not None:
            pending, self.pending = self.pending, None
            coords, self.structural = self.coordinates(pending.to(device), "set_coordinates()", batch, length), True
        elif past > 0 and self.structural and self.keys is not None and self.keys.shape[0] == batch:
            coords = self._continued(self.keys, length)
        else:  # no structure given for this sequence: 1-D positions on every axis (the stock model)
            coords = self.positions(pos, batch, length, past, device)[..., None].expand(batch, length, self.num_axes)
        prev = self.keys if past > 0 and self.keys is not None else None
        if prev is not None:
            dtype = torch.promote_types(prev.dtype, coords.dtype)  # never truncate fractional coordinates
            coords, prev = coords.to(dtype), prev.to(dtype)
        self.keys = coords if prev is None else torch.cat([prev, coords], dim=1)
        self.current = coords
        return coords

    def _given(self, position_ids: torch.Tensor, batch: int, length: int, past: int) -> torch.Tensor:
        """Explicit 3-D ``position_ids``, checked; refused at a prefill while set_coordinates() ones are pending."""
        if past == 0 and self.pending is not None:
            self.pending = None
            raise SpecError(
                "coordinates from set_coordinates() are pending and 3-D position_ids were given for the same "
                "prompt; pass one of them (the pending coordinates were dropped)"
            )
        self.structural = True
        return self.coordinates(position_ids, "position_ids", batch, length)

    def _continued(self, keys: torch.Tensor, length: int) -> torch.Tensor:
        """``rule(last, length)`` for ``length`` tokens after the cached ``keys``, checked."""
        name = getattr(self.rule, "__name__", type(self.rule).__name__)
        new = self.rule(keys[:, -1], length)
        what = f"the output of the continuation rule {name}(last, {length})"
        return self.coordinates(new, what, keys.shape[0], length, keys.device)
