"""Parsers of the text after ``name:`` in a coordinate spec (``"lap:8"``, ``"tree:32x64"``, ``"bipe:line"``).

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

from collections.abc import Callable
from typing import Any

from ..exceptions import SpecError

__all__ = ["int_arg", "one_int_arg", "choice_arg"]


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
