"""Input checks shared by the encoders: options, q/k tensors, coordinates, and ``torch.compile`` awareness.

Every encoder validates its constructor options here, so one bad option raises the same
:class:`~structpos.exceptions.SpecError` whichever encoder it is given to (``head_dim`` odd or
not positive, a count below its minimum, a non-finite or out-of-range real, an unknown choice,
``sections`` of the wrong length, sum or sign), and an allocation that would leave a coordinate
axis without a single rotary pair is refused (:func:`check_every_axis_used`) instead of
silently ignoring that axis.

The tensor checks look only at shapes and dtypes (static under ``torch.compile``), so they run
before any compute and never break a graph. Checks that read tensor *values* (non-finite
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
>>> check_head_dim(7)
Traceback (most recent call last):
...
structpos.exceptions.SpecError: head_dim must be a positive even integer, got 7

Length: this module is over 600 lines on purpose: it is the one place where every encoder's input
checks live (the project keeps one mechanism for errors); splitting it by check kind would spread the
same messages over several modules again.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import torch

from ..exceptions import ShapeError, SpecError
from ._options import QK_LAYOUTS, QKLayout

__all__ = [
    "MAX_HEAD_DIM",
    "MAX_SIZE",
    "MAX_TABLE_ENTRIES",
    "QK_LAYOUTS",
    "QKLayout",
    "as_real_tensor",
    "axis_counts",
    "check_choice",
    "check_count",
    "check_every_axis_used",
    "check_flag",
    "check_frequencies",
    "check_finite_values",
    "check_head_dim",
    "check_qk",
    "check_real",
    "check_sections",
    "check_table_size",
    "split_counts",
    "from_blhd",
    "is_compiling",
    "to_blhd",
]


#: Largest ``head_dim`` accepted (2¹⁶): wider is a typo, and its tables would not fit in memory.
MAX_HEAD_DIM = 2**16
#: Default upper bound of :func:`check_count` (2²⁰ heads, axes, features, buckets, ...).
MAX_SIZE = 2**20
#: Largest parameter table (or buffer) an option may ask for: 2²⁸ entries, 1 GiB of float32.
MAX_TABLE_ENTRIES = 2**28


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


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_head_dim(head_dim: Any, name: str = "head_dim") -> int:
    """``head_dim`` as an ``int`` after checking it is a positive even integer ≤ :data:`MAX_HEAD_DIM`.

    Parameters
    ----------
    head_dim : int
        The rotated width ``D`` (``D/2`` rotary pairs).
    name : str
        The option's name, for the message.

    Returns
    -------
    int
        ``head_dim``.

    Raises
    ------
    SpecError
        Not an integer, not positive, odd, or above :data:`MAX_HEAD_DIM`.

    Examples
    --------
    >>> check_head_dim(8)
    8
    >>> check_head_dim(-2)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: head_dim must be a positive even integer, got -2
    >>> check_head_dim(2**40)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: head_dim must be a positive even integer ≤ 65536, got 1099511627776
    """
    if not _is_int(head_dim) or head_dim <= 0 or head_dim % 2:
        raise SpecError(f"{name} must be a positive even integer, got {head_dim!r}")
    if head_dim > MAX_HEAD_DIM:
        raise SpecError(f"{name} must be a positive even integer ≤ {MAX_HEAD_DIM}, got {head_dim!r}")
    return int(head_dim)


def check_count(value: Any, name: str, minimum: int = 1, maximum: int | None = MAX_SIZE) -> int:
    """``value`` as an ``int`` after checking it is an integer in ``[minimum, maximum]``.

    Parameters
    ----------
    value : int
        The option's value.
    name : str
        The option's name, for the message.
    minimum : int
        The smallest value allowed.
    maximum : int or None
        The largest value allowed (default :data:`MAX_SIZE`, so that a stray ``2**40`` is a clear
        error rather than a failed allocation); ``None``: unbounded.

    Returns
    -------
    int
        ``value``.

    Raises
    ------
    SpecError
        Not an integer (``bool`` included), below ``minimum`` or above ``maximum``.

    Examples
    --------
    >>> check_count(3, "k")
    3
    >>> check_count(0, "k")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: k must be an integer ≥ 1, got 0
    >>> check_count(2**40, "num_heads")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: num_heads must be an integer in [1, 1048576], got 1099511627776
    """
    if not _is_int(value) or value < minimum:
        raise SpecError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise SpecError(f"{name} must be an integer in [{minimum}, {maximum}], got {value!r}")
    return int(value)


def check_table_size(what: str, *sizes: int) -> None:
    """Refuse options whose product (a parameter table's entries) exceeds :data:`MAX_TABLE_ENTRIES`.

    Each size may be within its own bound while the table they make is not (``num_heads`` ×
    ``max_distance`` buckets): this turns the allocation's failure into a clear error up front.

    Parameters
    ----------
    what : str
        The table and the options that size it, for the message (``"SPDBias table (max_distance + 2) × num_heads"``).
    *sizes : int
        Its dimensions.

    Raises
    ------
    SpecError
        The product of ``sizes`` exceeds :data:`MAX_TABLE_ENTRIES`.

    Examples
    --------
    >>> check_table_size("table", 2**10, 2**10)
    >>> check_table_size("table", 2**20, 2**20)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: table would hold 1048576 × 1048576 = 1099511627776 entries, more than 268435456
    """
    total = math.prod(sizes)
    if total > MAX_TABLE_ENTRIES:
        dims = " × ".join(str(int(n)) for n in sizes)
        raise SpecError(f"{what} would hold {dims} = {total} entries, more than {MAX_TABLE_ENTRIES}")


def check_flag(value: Any, name: str) -> bool:
    """``value`` as a ``bool`` after checking it is one (``True``/``False``, or the integers 0/1).

    A string such as ``"no"`` would be truthy: refused rather than read as ``True``.

    Parameters
    ----------
    value : bool
        The option's value.
    name : str
        The option's name, for the message.

    Returns
    -------
    bool
        ``value``.

    Raises
    ------
    SpecError
        Anything else.

    Examples
    --------
    >>> check_flag(True, "sign_flip")
    True
    >>> check_flag("no", "sign_flip")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: sign_flip must be True or False, got 'no'
    """
    if isinstance(value, bool) or (_is_int(value) and value in (0, 1)):
        return bool(value)
    raise SpecError(f"{name} must be True or False, got {value!r}")


MAX_INIT_STD = 1e30
"""Largest ``init_std`` of a learned table or generator: float32 parameters (largest finite value 3.4e38)
stay finite with room to add."""


def check_real(
    value: Any,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a ``float`` after checking it is a finite real in ``[low, high]`` (ends open on request).

    Parameters
    ----------
    value : float
        The option's value.
    name : str
        The option's name, for the message.
    low, high : float
        The range.
    low_open, high_open : bool
        Exclude ``low`` / ``high`` themselves.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    SpecError
        Not a real number, NaN or infinite, or outside the range (the message names the range).

    Examples
    --------
    >>> check_real(0.5, "z", low=0.0, high=1.0, high_open=True)
    0.5
    >>> check_real(float("nan"), "z", low=0.0, high=1.0, high_open=True)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: z must be a finite number in [0.0, 1.0), got nan
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        if math.isinf(low) and math.isinf(high):
            where = ""
        elif math.isinf(high):
            where = f" {'>' if low_open else '≥'} {low}"
        elif math.isinf(low):
            where = f" {'<' if high_open else '≤'} {high}"
        else:
            where = f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise SpecError(f"{name} must be a finite number{where}, got {value!r}")
    return float(value)


def check_choice(value: Any, name: str, choices: Sequence[Any]) -> Any:
    """``value`` itself after checking it is one of ``choices``.

    Parameters
    ----------
    value : object
        The option's value.
    name : str
        The option's name, for the message.
    choices : sequence
        The values allowed.

    Returns
    -------
    object
        ``value``.

    Raises
    ------
    SpecError
        Another value.

    Examples
    --------
    >>> check_choice("exact", "mode", ("sparse", "exact"))
    'exact'
    >>> check_choice("dense", "mode", ("sparse", "exact"))
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: mode must be one of ('sparse', 'exact'), got 'dense'
    """
    if not isinstance(value, str | int | float | type(None)) or value not in tuple(choices):
        raise SpecError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_sections(sections: Sequence[Any], num_axes: int, total: int, what: str) -> list[int]:
    """``sections`` as a list after checking it has ``num_axes`` non-negative integers summing to ``total``.

    Parameters
    ----------
    sections : sequence of int
        Pairs (or heads) per axis. A ``0`` is allowed: that axis is then deliberately unused.
    num_axes : int
        Entries required.
    total : int
        Required sum.
    what : str
        What the sum is, for the message (``"head_dim/2 = 4"``).

    Returns
    -------
    list of int
        The counts.

    Raises
    ------
    SpecError
        Not a sequence of integers, a negative entry, the wrong length or the wrong sum.

    Examples
    --------
    >>> check_sections([3, 1], 2, 4, "head_dim/2 = 4")
    [3, 1]
    >>> check_sections([5, -1], 2, 4, "head_dim/2 = 4")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: sections [5, -1] must have 2 non-negative integer entries summing to head_dim/2 = 4
    """
    try:
        counts = list(sections)
    except TypeError:
        raise SpecError(f"sections must be a sequence of {num_axes} integers, got {sections!r}") from None
    if len(counts) != num_axes or not all(_is_int(c) and c >= 0 for c in counts) or sum(counts) != total:
        raise SpecError(f"sections {counts} must have {num_axes} non-negative integer entries summing to {what}")
    return [int(c) for c in counts]


def check_every_axis_used(
    counts: Sequence[int],
    num_axes: int,
    available: str,
    hint: str = "use a larger head_dim or fewer axes, or give explicit sections",
) -> None:
    """Refuse a default allocation that leaves some coordinate axis without any rotary pair (or head).

    An axis with no pair would be read and then silently ignored (``head_dim=8`` has 4 pairs:
    a fifth axis could never change a score). Explicit ``sections`` may still set an axis to 0.

    Parameters
    ----------
    counts : sequence of int
        Pairs (or heads) the allocation gives each axis.
    num_axes : int
        ``A``.
    available : str
        What is being shared out, for the message (``"head_dim=8 has 4 rotary pairs"``).
    hint : str
        How to fix it, ending the message.

    Raises
    ------
    SpecError
        Some axis gets nothing (the message names the first one).

    Examples
    --------
    >>> check_every_axis_used([1, 1, 1, 1, 0], 5, "head_dim=8 has 4 rotary pairs")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: head_dim=8 has 4 rotary pairs, too few for num_axes=5: axis 4 would get none and be ignored; use a larger head_dim or fewer axes, or give explicit sections
    """
    empty = [a for a in range(num_axes) if a >= len(counts) or counts[a] <= 0]
    if empty:
        raise SpecError(
            f"{available}, too few for num_axes={num_axes}: axis {empty[0]} would get none and be ignored; {hint}"
        )


def split_counts(total: int, parts: int) -> list[int]:
    """Near-equal split of ``total`` into ``parts`` counts, the remainder to the first parts.

    Examples
    --------
    >>> split_counts(8, 3)
    [3, 3, 2]
    """
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


def axis_counts(sections: Sequence[Any] | None, num_axes: int, total: int, what: str, available: str) -> list[int]:
    """Pairs (or heads) per axis: explicit ``sections`` checked, or the near-equal default checked.

    The one ``sections`` validator of the rotary encoders. Explicit ``sections`` must be
    ``num_axes`` non-negative integers summing to ``total`` (:func:`check_sections`; a 0 leaves
    that axis unused on purpose); without them ``total`` is split near-equally
    (:func:`split_counts`) and every axis must get at least one (:func:`check_every_axis_used`).

    Parameters
    ----------
    sections : sequence of int or None
        Counts per axis, or None for the default split.
    num_axes : int
        ``A``.
    total : int
        What is shared out: ``D/2`` rotary pairs, or ``H`` heads.
    what : str
        ``total`` in words, for the message on bad ``sections`` (``"head_dim/2 = 4"``).
    available : str
        ``total`` in words, for the message on a default split that leaves an axis empty.

    Returns
    -------
    list of int
        ``A`` counts summing to ``total``.

    Raises
    ------
    SpecError
        Bad ``sections``, or a default split leaving some axis with nothing.

    Examples
    --------
    >>> axis_counts(None, 3, 8, "head_dim/2 = 8", "head_dim=16 has 8 rotary pairs")
    [3, 3, 2]
    >>> axis_counts([8, 0, 0], 3, 8, "head_dim/2 = 8", "head_dim=16 has 8 rotary pairs")
    [8, 0, 0]
    >>> axis_counts(None, 3, 2, "head_dim/2 = 2", "head_dim=4 has 2 rotary pairs")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: head_dim=4 has 2 rotary pairs, too few for num_axes=3: axis 2 would get none and be ignored; use a larger head_dim or fewer axes, or give explicit sections
    """
    if sections is not None:
        return check_sections(sections, num_axes, total, what)
    counts = split_counts(total, num_axes)
    check_every_axis_used(counts, num_axes, available)
    return counts


def as_real_tensor(value: Any, name: str) -> torch.Tensor:
    """``value`` as a new float32 tensor (a copy), or :class:`~structpos.exceptions.ShapeError`.

    Parameters
    ----------
    value : array_like
        A tensor, array or nested sequence of real numbers.
    name : str
        The option's name, for the message.

    Returns
    -------
    torch.Tensor
        float32 copy of ``value``.

    Raises
    ------
    ShapeError
        ``value`` is not a real array (a string, a ragged list, complex numbers).

    Examples
    --------
    >>> as_real_tensor([[1, 2]], "mixing")
    tensor([[1., 2.]])
    >>> as_real_tensor("w", "mixing")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: mixing must be a real tensor, got str
    """
    try:
        t = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise ShapeError(f"{name} must be a real tensor, got {type(value).__name__}") from None
    if t.is_complex() or t.dtype == torch.bool:
        raise ShapeError(f"{name} must be a real tensor, got {t.dtype}")
    return t.detach().to(torch.float32).clone()


def check_frequencies(value: Any, shape: tuple[int, ...], name: str, shape_name: str = "") -> torch.Tensor:
    """A given frequency table (``inv_freq``, ``axis_inv_freq``, a mixing matrix) as a new float32 tensor.

    Parameters
    ----------
    value : array_like
        The table.
    shape : tuple of int
        The shape it must have.
    name : str
        Its argument name, for the messages.
    shape_name : str, optional
        The shape in symbols (``"(A, P)"``), written before the numbers in the message.

    Returns
    -------
    torch.Tensor
        A float32 copy.

    Raises
    ------
    ShapeError
        Not a real tensor, or another shape.
    SpecError
        A non-finite entry.

    Examples
    --------
    >>> check_frequencies([1.0, 0.5], (2,), "inv_freq").tolist()
    [1.0, 0.5]
    >>> check_frequencies([[1.0, 0.5]], (2, 2), "axis_inv_freq", "(A, P)")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: axis_inv_freq must have shape (A, P) = (2, 2), given (1, 2)
    """
    t = as_real_tensor(value, name)
    if t.shape != shape:
        expected = f"{shape_name} = {shape}" if shape_name else f"{shape}"
        raise ShapeError(f"{name} must have shape {expected}, given {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise SpecError(f"{name} contains non-finite values")
    return t


def check_finite_values(t: torch.Tensor, name: str, hint: str = "") -> None:
    """Raise :class:`~structpos.exceptions.ShapeError` naming the first non-finite entry of ``t``.

    Skipped under ``torch.compile`` (it reads values). Integer tensors always pass.

    Parameters
    ----------
    t : torch.Tensor
        Coordinates to check.
    name : str
        What ``t`` is, for the message.
    hint : str
        Appended to the message (a likely cause).

    Raises
    ------
    ShapeError
        ``t`` holds NaN or ±inf.

    Examples
    --------
    >>> check_finite_values(torch.tensor([[0.0, float("nan")]]), "t")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: non-finite value in t at index [0, 1]
    """
    if t.is_floating_point() and not is_compiling() and not torch.isfinite(t).all():
        bad = torch.nonzero(~torch.isfinite(t))[0].tolist()
        raise ShapeError(f"non-finite value in {name} at index {bad}{hint}")


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
