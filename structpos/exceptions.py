"""Every error structpos raises on purpose, in one place.

A failure a user can cause (bad input, a limit reached, a bad option, a solver that did not
converge, an output directory that cannot be resumed) raises a subclass of
:class:`StructposError`. Its message starts with the input's name (a path or record id) and
the position of the problem (``line:col``, a character offset, a node index) when they are
known, and the two are kept as attributes for programs::

    StructposError
    ├── InputError (also a ValueError)      bad input or option
    │   ├── ParseError                      input that cannot be parsed or forms no valid structure
    │   ├── LimitError                      a size/time/memory limit reached (names the limit)
    │   ├── SpecError                       a bad coordinate spec or encoder option
    │   └── ShapeError                      a tensor of the wrong shape or dtype
    ├── SolverError (also a RuntimeError)   an iterative solver did not converge
    │   └── EigenConvergenceError           ... an eigensolver (carries the residuals)
    └── ResumeError (also a RuntimeError)   an output directory that cannot be resumed

``StructureError`` is the historical name of :class:`ParseError` and stays an alias.

Every class takes the parameters of :class:`StructposError` (``message``, and the keyword-only
``name`` and ``position``); :class:`LimitError` and :class:`EigenConvergenceError` add their own.

Examples
--------
>>> from structpos.exceptions import ParseError, StructposError
>>> err = ParseError("unexpected '}'", name="a.json", position="3:7")
>>> str(err)
"a.json at 3:7: unexpected '}'"
>>> isinstance(err, StructposError) and isinstance(err, ValueError)
True
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "StructposError",
    "InputError",
    "ParseError",
    "StructureError",
    "LimitError",
    "SpecError",
    "ShapeError",
    "SolverError",
    "EigenConvergenceError",
    "ResumeError",
]


class StructposError(Exception):
    """Base of every error structpos raises on purpose.

    Parameters
    ----------
    message : str
        What went wrong.
    name : str, optional
        The input (file path, record id, graph name) the error is about.
    position : object, optional
        Where in the input (``"line:col"``, a character offset, ``"node 12"``).

    Attributes
    ----------
    input_name, position, message
        The parts the message was built from.

    Examples
    --------
    >>> str(StructposError("boom", name="rec-7"))
    'rec-7: boom'
    """

    def __init__(self, message: str, *, name: str | None = None, position: Any = None):
        self.message = message
        self.input_name = name
        self.position = position
        where = "" if name is None else str(name)
        if position is not None:
            where += f" at {position}" if where else f"at {position}"
        super().__init__(f"{where}: {message}" if where else message)

    def __reduce__(self):
        """Pickle by state: the keyword-only arguments cannot be replayed from ``args``.

        Errors then cross process boundaries intact (worker processes, Ray tasks).

        Examples
        --------
        >>> import pickle
        >>> e = pickle.loads(pickle.dumps(LimitError("big", limit="max_nodes", value=9, maximum=5, name="g")))
        >>> str(e), e.limit, e.input_name
        ('g: big (max_nodes: 9 > 5; raise the limit to allow it)', 'max_nodes', 'g')
        """
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: "type[StructposError]", args: tuple, state: dict) -> "StructposError":
    """An error of class ``cls`` with ``args`` and attributes ``state``, without calling ``__init__``."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class InputError(StructposError, ValueError):
    """Bad input or a bad option (also a :class:`ValueError`).

    Examples
    --------
    >>> isinstance(InputError("x"), ValueError)
    True
    """


class ParseError(InputError):
    """Input that cannot be parsed, or that forms no valid :class:`~structpos.Structure`.

    Examples
    --------
    >>> str(ParseError("unterminated string", name="rec.json", position="1:5"))
    'rec.json at 1:5: unterminated string'
    """


StructureError = ParseError
"""Alias of :class:`ParseError` (the name used before the exceptions module existed)."""


class LimitError(InputError):
    """A named limit was reached (input bytes, nodes, table cells, time, memory, ...).

    Parameters
    ----------
    limit : str
        The limit's name as the user sets it (``"max_nodes"``, ``"--record-timeout"``).
    value, maximum : int or float
        What the input needed and what the limit allows.

    Examples
    --------
    >>> e = LimitError("too many nodes", limit="max_nodes", value=10, maximum=5, name="g")
    >>> str(e)
    'g: too many nodes (max_nodes: 10 > 5; raise the limit to allow it)'
    """

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        value: Any = None,
        maximum: Any = None,
        name: str | None = None,
        position: Any = None,
    ):
        self.limit = limit
        self.value = value
        self.maximum = maximum
        detail = limit if value is None else f"{limit}: {value} > {maximum}"
        super().__init__(f"{message} ({detail}; raise the limit to allow it)", name=name, position=position)


class SpecError(InputError):
    """A bad coordinate spec (``"lap:abc"``) or encoder option.

    Examples
    --------
    >>> str(SpecError("'abc' is not an integer", name="lap:abc"))
    "lap:abc: 'abc' is not an integer"
    """


class ShapeError(InputError):
    """A tensor whose shape, dtype or axis count does not fit (message: expected vs given).

    Examples
    --------
    >>> str(ShapeError("coords must be (B, L, 3), got (2, 5, 2)"))
    'coords must be (B, L, 3), got (2, 5, 2)'
    """


class SolverError(StructposError, RuntimeError):
    """An iterative solver did not converge (also a :class:`RuntimeError`).

    Examples
    --------
    >>> e = SolverError("did not converge in 100 iterations", name="g.json")
    >>> str(e), isinstance(e, RuntimeError)
    ('g.json: did not converge in 100 iterations', True)
    """


class EigenConvergenceError(SolverError):
    """An eigensolver did not converge; ``residuals`` holds ‖Lu − λu‖ per returned mode when known.

    Parameters
    ----------
    residuals : array_like, optional
        ‖Lu − λu‖ per returned mode.

    Examples
    --------
    >>> e = EigenConvergenceError("LOBPCG stalled", residuals=[1e-3], name="g")
    >>> e.residuals
    [0.001]
    """

    def __init__(self, message: str, *, residuals: Any = None, name: str | None = None, position: Any = None):
        self.residuals = residuals
        super().__init__(message, name=name, position=position)


class ResumeError(StructposError, RuntimeError):
    """The output directory cannot be resumed (other options, another run holds it, ...).

    Examples
    --------
    >>> e = ResumeError("written with different options", name="enc/")
    >>> str(e), isinstance(e, RuntimeError)
    ('enc/: written with different options', True)
    """
