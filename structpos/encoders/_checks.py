"""Input checks shared by the encoders: q/k tensors, coordinates, and ``torch.compile`` awareness.

Every check here looks only at shapes and dtypes (static under ``torch.compile``), so it runs
before any compute and never breaks a graph. Checks that read tensor *values* (non-finite
coordinates, decreasing ``cu_seqlens``) are skipped while compiling: :func:`is_compiling`.

Examples
--------
>>> import torch
>>> check_qk(torch.zeros(2, 5, 4, 8), "q", head_dim=8).shape
torch.Size([2, 5, 4, 8])
>>> check_qk(torch.zeros(2, 5, 4, 8, dtype=torch.int64), "q", head_dim=8)
Traceback (most recent call last):
...
structpos.exceptions.ShapeError: q must be a floating tensor (B, L, H, 8) or (T, H, 8); given torch.int64 with shape (2, 5, 4, 8)
"""

from __future__ import annotations

from typing import Literal

import torch

from ..exceptions import ShapeError

__all__ = ["QK_LAYOUTS", "QKLayout", "check_qk", "from_blhd", "is_compiling", "to_blhd"]

QKLayout = Literal["blhd", "bhld"]
QK_LAYOUTS: tuple[str, ...] = ("blhd", "bhld")


def is_compiling() -> bool:
    """True while ``torch.compile`` / dynamo traces the caller.

    Examples
    --------
    >>> is_compiling()
    False
    """
    fn = getattr(torch.compiler, "is_compiling", None)
    if fn is None:  # torch < 2.3
        return bool(torch._dynamo.is_compiling())
    return bool(fn())


def _expected(head_dim: int | None, qk_layout: str) -> str:
    d = "D" if head_dim is None else str(head_dim)
    if qk_layout == "bhld":
        return f"(B, H, L, {d}) or (H, T, {d})"
    return f"(B, L, H, {d}) or (T, H, {d})"


def check_qk(x, name: str, head_dim: int | None = None, qk_layout: str = "blhd") -> torch.Tensor:
    """Return ``x`` after checking it is a floating 3-D or 4-D tensor ending in ``head_dim``.

    Parameters
    ----------
    x : torch.Tensor
        Queries or keys, ``(B, L, H, D)`` / packed ``(T, H, D)`` (``qk_layout="blhd"``) or
        ``(B, H, L, D)`` / ``(H, T, D)`` (``"bhld"``).
    name : str
        ``"q"`` or ``"k"``, for the message.
    head_dim : int, optional
        Required last dimension.
    qk_layout : {"blhd", "bhld"}
        Where the head axis is.

    Returns
    -------
    torch.Tensor
        ``x`` itself.

    Raises
    ------
    ShapeError
        Not a tensor, not floating point, wrong rank or last dimension (message: expected vs given).

    Examples
    --------
    >>> check_qk(torch.zeros(3, 2, 8), "k", 8).dim()
    3
    """
    if qk_layout not in QK_LAYOUTS:
        raise ShapeError(f"qk_layout must be one of {QK_LAYOUTS}, got {qk_layout!r}")
    exp = _expected(head_dim, qk_layout)
    if not isinstance(x, torch.Tensor):
        raise ShapeError(f"{name} must be a floating tensor {exp}; given {type(x).__name__}")
    if not x.is_floating_point():
        raise ShapeError(f"{name} must be a floating tensor {exp}; given {x.dtype} with shape {tuple(x.shape)}")
    if x.dim() not in (3, 4) or (head_dim is not None and x.shape[-1] != head_dim):
        raise ShapeError(f"{name} must have shape {exp}; given {tuple(x.shape)}")
    return x


def to_blhd(x: torch.Tensor, qk_layout: str) -> torch.Tensor:
    """View ``x`` with heads second to last (``(B, L, H, D)`` / ``(T, H, D)``).

    Examples
    --------
    >>> to_blhd(torch.zeros(2, 4, 5, 8), "bhld").shape
    torch.Size([2, 5, 4, 8])
    """
    return x.transpose(-3, -2) if qk_layout == "bhld" else x


def from_blhd(x: torch.Tensor, qk_layout: str) -> torch.Tensor:
    """Inverse of :func:`to_blhd`.

    Examples
    --------
    >>> from_blhd(torch.zeros(2, 5, 4, 8), "bhld").shape
    torch.Size([2, 4, 5, 8])
    """
    return x.transpose(-3, -2) if qk_layout == "bhld" else x
