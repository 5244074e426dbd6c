"""Parsers of the text after ``name:`` in a coordinate spec (``"lap:8"``, ``"tree:32x64"``, ``"bipe:line"``),
and the checks of the same arguments given to the functions directly (:func:`check_int`,
:func:`check_pairwise_size`).

Every family validates its argument with these, so a bad argument always reads the same way:
the spec, the parameter, what it must be and what was given. They import nothing from the
family modules, so a family module and the registry (:data:`structpos.coords.COORDS`) can both
import them at the top.

Examples
--------
>>> int_arg("lap:0", "0", "k", 1)
Traceback (most recent call last):
...
structpos.exceptions.SpecError: lap:0: k must be an integer >= 1 (got '0')
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

from ..exceptions import LimitError, SpecError

__all__ = [
    "MAX_K",
    "PAIRWISE_MAX_BYTES",
    "check_int",
    "check_pairwise_size",
    "int_arg",
    "one_int_arg",
    "choice_arg",
]

MAX_K = 4096
"""Largest ``k`` of ``lap:k`` and ``maglap:k`` (eigenpairs, an ``(N, k)`` array each) and ``K`` of
``rw:K`` (walk steps, an ``(N, K)`` array); the direct functions (``laplacian_pe(k=...)``,
``random_walk_pe(walk_length=...)``, ...) apply the same cap through :func:`check_int`."""


def check_int(
    value: Any,
    name: str,
    minimum: int = 0,
    maximum: int | None = None,
    *,
    error: type[Exception] = SpecError,
    input_name: str | None = None,
) -> int:
    """``value`` as an ``int`` after checking it is an integer in ``[minimum, maximum]``.

    The one check of the integer arguments of the graph functions (``k``, ``walk_length``,
    ``num_nodes``, ``bucket``, ``workers``, ...). Accepted: Python and numpy integers, 0-d integer
    tensors, and floats with an integral value (``3.0``; accepted before this check existed).
    Refused: ``bool``, strings, ``None``, NaN, ±inf, non-integral floats.

    Parameters
    ----------
    value : int
        The argument.
    name : str
        Its name, for the message.
    minimum : int
        Smallest value allowed.
    maximum : int, optional
        Largest value allowed (the documented maximum, e.g. :data:`MAX_K`).
    error : exception class
        Raised on a bad value (default :class:`~structpos.exceptions.SpecError`; the graph
        readers use :class:`~structpos.exceptions.StructureError` for ``num_nodes``).
    input_name : str, optional
        The input named in the message.

    Returns
    -------
    int

    Examples
    --------
    >>> check_int(3, "k", 1), check_int(4.0, "k", 1)
    (3, 4)
    >>> check_int(float("nan"), "k", 1)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: k must be an integer >= 1, got nan
    >>> check_int(10**9, "k", 1, MAX_K)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: k must be an integer in [1, 4096], got 1000000000
    """
    v: int | None = None
    if not isinstance(value, bool):
        try:
            v = operator.index(value)
        except TypeError:
            if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
                v = int(float(value))
    kw = {} if input_name is None else {"name": input_name}
    if v is None or v < minimum:
        raise error(f"{name} must be an integer >= {minimum}, got {value!r}", **kw)
    if maximum is not None and v > maximum:
        raise error(f"{name} must be an integer in [{minimum}, {maximum}], got {value!r}", **kw)
    return v


PAIRWISE_MAX_BYTES = 4 * 2**30
"""Default memory cap of the dense ``N × N`` outputs (hop distances, PEG distances, Graph-KV
reads), the default ``max_memory_bytes`` of :class:`~structpos.limits.Limits`."""


def check_pairwise_size(
    rows: int, cols: int, bytes_per_pair: int, what: str, name: str, max_bytes: int | None = PAIRWISE_MAX_BYTES
) -> None:
    """:class:`~structpos.exceptions.LimitError` (``max_memory_bytes``) before a dense
    ``rows × cols`` computation whose arrays take ``bytes_per_pair`` bytes per pair would exceed
    ``max_bytes`` (``None``: no cap).

    Examples
    --------
    >>> check_pairwise_size(100, 100, 8, "hop distances", "g")
    >>> check_pairwise_size(10**5, 10**5, 8, "hop distances", "g")
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: g: hop distances are a dense 100000 × 100000 computation (~80.0 GB) (max_memory_bytes: 80000000000 > 4294967296; raise the limit to allow it)
    """
    need = int(rows) * int(cols) * int(bytes_per_pair)
    if max_bytes is not None and need > max_bytes:
        raise LimitError(
            f"{what} are a dense {rows} × {cols} computation (~{need / 1e9:.1f} GB)",
            limit="max_memory_bytes",
            value=need,
            maximum=max_bytes,
            name=name,
        )


def int_arg(spec: str, text: str, what: str, minimum: int, hint: str = "", maximum: int | None = None) -> int:
    """``text`` as an integer in ``[minimum, maximum]``, or :class:`~structpos.exceptions.SpecError`.

    Parameters
    ----------
    spec : str
        The whole spec (``"tree:0x4"``), first in the message.
    text : str
        The part to read.
    what : str
        The parameter's name.
    minimum : int
        Smallest value.
    hint : str, optional
        Appended to the message (``", expected e.g. 'tree:32x64'"``).
    maximum : int, optional
        Largest value (the documented maximum).

    Returns
    -------
    int

    Examples
    --------
    >>> int_arg("rw:16", "16", "K", 1, maximum=4096)
    16
    >>> int_arg("rw:5000", "5000", "K", 1, maximum=4096)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: rw:5000: K must be <= 4096 (got 5000; the documented maximum)
    """
    message = f"{spec}: {what} must be an integer >= {minimum} (got {text!r}){hint}"
    try:
        value = int(text)
    except ValueError:
        raise SpecError(message) from None
    if value < minimum:
        raise SpecError(message)
    if maximum is not None and value > maximum:
        raise SpecError(f"{spec}: {what} must be <= {maximum} (got {value}; the documented maximum){hint}")
    return value


def one_int_arg(
    name: str, param: str, default: int | None, minimum: int, maximum: int | None = None
) -> Callable[[str | None], dict[str, Any]]:
    """The validator of a spec ``name[:param]`` whose argument is one optional integer.

    Parameters
    ----------
    name, param : str
        Family and parameter names.
    default : int or None
        The value of an omitted argument.
    minimum : int
        Smallest value.
    maximum : int, optional
        Largest value.

    Returns
    -------
    callable
        ``validate(arg) -> {param: value}``.

    Examples
    --------
    >>> validate = one_int_arg("lap", "k", 8, 1)
    >>> validate(None), validate("4")
    ({'k': 8}, {'k': 4})
    """

    def validate(arg: str | None) -> dict[str, Any]:
        if not arg:
            return {param: default}
        return {param: int_arg(f"{name}:{arg}", arg, param, minimum, maximum=maximum)}

    return validate


def choice_arg(name: str, param: str, choices: tuple[str, ...]) -> Callable[[str | None], dict[str, Any]]:
    """The validator of a spec ``name[:CHOICE]``; an omitted argument is the first choice.

    Parameters
    ----------
    name, param : str
        Family and parameter names.
    choices : tuple of str
        Allowed arguments, the default first.

    Returns
    -------
    callable
        ``validate(arg) -> {param: choice}``.

    Examples
    --------
    >>> validate = choice_arg("bipe", "unit", ("auto", "line"))
    >>> validate(None), validate("line")
    ({'unit': 'auto'}, {'unit': 'line'})
    >>> validate("word")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: bipe:word: unit must be one of auto, line
    """

    def validate(arg: str | None) -> dict[str, Any]:
        if arg and arg not in choices:
            raise SpecError(f"{name}:{arg}: {param} must be one of {', '.join(choices)}")
        return {param: arg or choices[0]}

    return validate
