"""Resource limits with safe defaults, each named in the :class:`~structpos.exceptions.LimitError` it raises.

One :class:`Limits` object travels from the CLI / pipeline into every parser, so that no single
input can grow without bound: a tiny edge list naming node 10,000,000, an HTML table whose
spans expand to billions of cells, a record of gigabytes. Every field can be overridden
(``Limits(max_nodes=10**8)``; ``structpos encode --limit max_nodes=100000000``); ``None`` turns a
limit off.

Examples
--------
>>> from structpos.limits import Limits
>>> Limits().max_colspan
1000
>>> Limits(max_nodes=10).max_nodes
10
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, fields, replace
from typing import Any

from .exceptions import LimitError, SpecError

__all__ = ["Limits", "DEFAULT_LIMITS", "Deadline", "check_limit", "resolve_limits", "node_budget"]


#: Largest ``record_timeout`` (10⁶ s, 11.6 days); ``None`` turns the timeout off.
MAX_RECORD_TIMEOUT = 1e6


@dataclass(frozen=True)
class Limits:
    """Per-record limits (``None`` = unlimited).

    Attributes
    ----------
    max_input_bytes : int or None
        Size of one record's raw input (a file, a JSONL line).
    max_nodes : int or None
        Nodes in one :class:`~structpos.Structure`.
    max_table_cells : int or None
        Cells of a table after rowspan/colspan expansion.
    max_colspan, max_rowspan : int
        HTML's own caps (the HTML standard clamps colspan to 1000 and rowspan to 65534).
    max_graph_nodes_per_edge : int or None
        A graph whose node count comes from its largest node id may have at most
        ``max(1024, max_graph_nodes_per_edge * (edges + 1))`` nodes; pass ``num_nodes``
        explicitly for sparser graphs.
    record_timeout : float or None
        Seconds one record may take in ``encode`` before it goes to the errors file; at most
        :data:`MAX_RECORD_TIMEOUT` (a timer beyond that overflows the platform's clock: use
        ``None`` for no timeout).
    max_memory_bytes : int or None
        Address-space limit of an ``encode`` worker process (under Ray: the address space a
        task may add to what its worker already maps). Wherever records are encoded (workers,
        ``--workers 0``, ``EncodeBatch``), a record whose coordinate arrays alone would exceed
        it (:func:`~structpos.coords.estimated_bytes`) fails before they are computed.

    Examples
    --------
    >>> from structpos import parse
    >>> parse("[1, [2, 3]]", "json", limits=Limits(max_nodes=3))
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: ...max_nodes: ... > 3; raise the limit to allow it)
    >>> parse("[1, [2, 3]]", "json", limits=Limits(max_nodes=None)).num_nodes
    5
    >>> Limits(record_timeout=float("nan"))
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: limit record_timeout: must be a finite number > 0 (None turns it off), got nan
    """

    max_input_bytes: int | None = 64 * 2**20
    max_nodes: int | None = 5_000_000
    max_table_cells: int | None = 1_000_000
    max_colspan: int = 1000
    max_rowspan: int = 65534
    max_graph_nodes_per_edge: int | None = 64
    record_timeout: float | None = 120.0
    max_memory_bytes: int | None = 4 * 2**30

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_value(f.name, getattr(self, f.name))

    def with_overrides(self, items: dict[str, str | int | float | None]) -> "Limits":
        """A copy with some fields replaced (values may be strings, as from the CLI).

        Parameters
        ----------
        items : dict
            ``{field name: value}``; a value is a number, a numeric string, or ``None`` /
            ``"none"`` / ``"off"`` / ``""`` to turn the limit off.

        Returns
        -------
        Limits
            A new object; ``self`` is unchanged.

        Raises
        ------
        SpecError
            An unknown field name, a value that is not a number, or one that is not positive
            and finite (``nan``, ``inf``, ``0`` and negative values are refused; ``none`` turns a
            limit off).

        Examples
        --------
        >>> Limits().with_overrides({"max_nodes": "100", "record_timeout": "none"}).max_nodes
        100
        >>> Limits().with_overrides({"max_nodes": "-1"})
        Traceback (most recent call last):
        ...
        structpos.exceptions.SpecError: limit max_nodes: must be positive, got '-1'
        >>> Limits().with_overrides({"record_timeout": "inf"})
        Traceback (most recent call last):
        ...
        structpos.exceptions.SpecError: limit record_timeout: must be a finite number > 0 ('none' turns it off), got 'inf'
        """
        known = {f.name: f for f in fields(self)}
        parsed: dict[str, Any] = {}  # each value parsed for its own field (int, or float for record_timeout)
        for key, value in items.items():
            if key not in known:
                raise SpecError(f"limit {key!r}: unknown; known: {', '.join(known)}")
            parsed[key] = _parse_value(key, value)
        return replace(self, **parsed)


def _parse_value(key: str, value: str | int | float | None) -> int | float | None:
    if value is None or (isinstance(value, str) and value.lower() in ("none", "off", "")):
        return None
    try:
        number = float(value) if key == "record_timeout" else int(value)
    except (TypeError, ValueError, OverflowError):
        raise SpecError(
            f"limit {key}: {value!r} is not {'a number' if key == 'record_timeout' else 'an integer'}"
        ) from None
    if not math.isfinite(number):
        raise SpecError(f"limit {key}: must be a finite number > 0 ('none' turns it off), got {value!r}")
    if number <= 0:
        raise SpecError(f"limit {key}: must be positive, got {value!r}")
    _check_timeout_bound(key, number, value, "'none'")
    return number


def _check_timeout_bound(key: str, number: float, given: Any, off: str) -> None:
    if key == "record_timeout" and number > MAX_RECORD_TIMEOUT:
        raise SpecError(
            f"limit {key}: must be at most {MAX_RECORD_TIMEOUT:g} seconds ({off} turns it off), got {given!r}"
        )


def _check_value(key: str, value: Any) -> None:
    """A field of :class:`Limits` is ``None``, or a positive finite number (an integer except ``record_timeout``)."""
    if value is None:
        return
    kind = numbers.Real if key == "record_timeout" else numbers.Integral
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "a number" if key == "record_timeout" else "an integer"
        raise SpecError(f"limit {key}: must be {what} or None, got {value!r}")
    if not math.isfinite(value):
        raise SpecError(f"limit {key}: must be a finite number > 0 (None turns it off), got {value!r}")
    if value <= 0:
        raise SpecError(f"limit {key}: must be positive, got {value!r}")
    _check_timeout_bound(key, float(value), value, "None")


DEFAULT_LIMITS = Limits()


def check_limit(
    value: int | float, maximum: int | float | None, limit: str, what: str, *, name: str | None = None, position=None
) -> None:
    """Raise :class:`LimitError` when ``value > maximum`` (no-op when ``maximum`` is None).

    Parameters
    ----------
    value : int or float
        The measured amount.
    maximum : int, float or None
        The limit; ``None`` means unlimited.
    limit : str
        The limit's field name (named in the message, so the user knows what to raise).
    what : str
        What was measured (``"nodes"``, ``"bytes of input"``).
    name : str, optional
        The input (path, record id) named in the message.
    position : optional
        Where in the input (line:col, offset, node).

    Raises
    ------
    LimitError
        ``value > maximum``.

    Examples
    --------
    >>> check_limit(3, 5, "max_nodes", "nodes")
    >>> check_limit(9, 5, "max_nodes", "nodes", name="g.json")
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: g.json: 9 nodes (max_nodes: 9 > 5; raise the limit to allow it)
    """
    if maximum is not None and value > maximum:
        raise LimitError(f"{value} {what}", limit=limit, value=value, maximum=maximum, name=name, position=position)


def resolve_limits(limits: "Limits | None") -> "Limits":
    """``limits``, or :data:`DEFAULT_LIMITS` when it is ``None``.

    Parameters
    ----------
    limits : Limits or None

    Returns
    -------
    Limits
        ``limits`` itself, or the defaults.

    Raises
    ------
    SpecError
        ``limits`` is neither ``None`` nor a :class:`Limits`.

    Examples
    --------
    >>> resolve_limits(None) is DEFAULT_LIMITS
    True
    >>> resolve_limits(Limits(max_nodes=3)).max_nodes
    3
    """
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, Limits):
        raise SpecError(f"limits must be a structpos.limits.Limits, not {type(limits).__name__}")
    return limits


def node_budget(limits: "Limits | None") -> int:
    """The largest node count a parser may build (``sys.maxsize`` when ``max_nodes`` is off).

    Parameters
    ----------
    limits : Limits or None
        ``None`` means :data:`DEFAULT_LIMITS`.

    Returns
    -------
    int

    Examples
    --------
    >>> node_budget(Limits(max_nodes=10))
    10
    >>> node_budget(Limits(max_nodes=None)) > 10**18
    True
    """
    import sys

    m = resolve_limits(limits).max_nodes
    return sys.maxsize if m is None else int(m)


class Deadline:
    """The ``record_timeout`` of a parse that checks the clock itself (a parser's progress hook).

    Parameters
    ----------
    timeout : float or None
        Seconds from now; ``None``: no deadline.
    doing : str
        What runs, for the message (``"PyYAML still scanning"``).
    name : str
        The input named in the message.

    Examples
    --------
    >>> Deadline(None, "parsing", "a.yaml").passed()
    False
    >>> Deadline(0.0, "PyYAML still scanning", "a.yaml").check(position="line:col 1:5")
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: a.yaml at line:col 1:5: PyYAML still scanning after 0.0 s (record_timeout: 0.0 > 0.0; raise the limit to allow it)
    """

    def __init__(self, timeout: float | None, doing: str, name: str) -> None:
        self.timeout, self.doing, self.name = timeout, doing, name
        self.at = float("inf") if timeout is None else time.monotonic() + timeout

    def passed(self) -> bool:
        """Whether the deadline has passed.

        Returns
        -------
        bool
            True once ``timeout`` seconds have gone by; never without a timeout.

        Examples
        --------
        >>> Deadline(60, "parsing", "a.py").passed()
        False
        """
        return time.monotonic() > self.at

    def check(self, position: Any = None) -> None:
        """Raise :meth:`error` (with ``position``) if the deadline has passed.

        Examples
        --------
        >>> Deadline(60, "parsing", "a.py").check()
        """
        if self.passed():
            raise self.error(position)

    def error(self, position: Any = None) -> LimitError:
        """The :class:`LimitError` ``record_timeout`` of a parse stopped at its deadline.

        Parameters
        ----------
        position : optional
            Where in the input the parse had got to.

        Returns
        -------
        LimitError

        Examples
        --------
        >>> Deadline(1.5, "parsing", "a.py").error().limit
        'record_timeout'
        """
        timeout = float("inf") if self.timeout is None else self.timeout
        return LimitError(
            f"{self.doing} after {self.timeout} s",
            limit="record_timeout",
            value=round(time.monotonic() - self.at + timeout, 1),
            maximum=self.timeout,
            name=self.name,
            position=position,
        )
