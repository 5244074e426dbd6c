"""What a record's payload and id may be: one rule for ``structpos encode``'s readers and :class:`EncodeBatch`.

:mod:`.records` (JSONL lines, Parquet rows) and :mod:`.adapters` (HF / Ray batches) both ask
:func:`payload_problem` and :func:`id_problem`, so a value fails the same way, with the same
words, whichever way it comes in; only the record's place before the message differs
(``in.jsonl line 3: ...``, ``in.parquet row 2: ...``, ``record 7: ...``).
"""

from __future__ import annotations

import datetime
import math
import numbers
from typing import Any

__all__ = ["payload_problem", "id_problem"]


_SCALARS = (numbers.Number, datetime.date, datetime.time, datetime.timedelta)
"""Values no input kind takes as a document: numbers (booleans among them), dates, times and durations."""


def payload_problem(payload: Any, field: str) -> str | None:
    """Why ``payload`` (the ``field`` of a record) cannot be parsed whatever its kind, else ``None``.

    A payload is text or bytes, or an object the kind's parser takes (a JSON object or array for
    ``json``, a graph object or ``edge_index`` for ``graph``, a list of rows for ``table``); a
    null, a number, a boolean or a date is none of these (``json`` would otherwise read the
    integer ``1`` as the JSON document ``1``). Such a record is an ``InputError``.

    Parameters
    ----------
    payload : object
        The payload (a numpy scalar already made a Python one).
    field : str
        The payload's field or column, for the message.

    Returns
    -------
    str or None
        The message, without the record's place.

    Examples
    --------
    >>> payload_problem(3, "text"), payload_problem(None, "body")
    ("payload 'text' is of type int (3), not text or bytes", "payload 'body' is null")
    >>> payload_problem(True, "text")
    "payload 'text' is of type bool (True), not text or bytes"
    >>> payload_problem(b"[1]", "text") is None and payload_problem({"a": 1}, "text") is None
    True
    """
    if payload is None:
        return f"payload {field!r} is null"
    if isinstance(payload, _SCALARS):
        shown = repr(payload)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return f"payload {field!r} is of type {type(payload).__name__} ({shown}), not text or bytes"
    return None


def id_problem(value: Any, id_field: str) -> tuple[str, str] | None:
    """``(error type, message)`` when ``value`` (the ``id_field`` of a record) cannot be its id, else ``None``.

    A null would become the id ``"None"`` (shared by every null and by a real ``"None"``), a NaN
    ``"nan"`` (shared by every gap of a float column) and a boolean, object or list Python's text
    of it (``"True"``); such a record is an error record whose id is its position instead (the
    line number, the row number, the batch index).

    Parameters
    ----------
    value : object
        The id value (a numpy scalar already made a Python one).
    id_field : str
        The id's field or column, for the message.

    Returns
    -------
    tuple of (str, str), or None
        The error type and the message, without the record's place.

    Examples
    --------
    >>> id_problem(None, "name")
    ('ParseError', "id 'name' is null")
    >>> id_problem(True, "name")
    ('InputError', "id 'name' must be a string or a number, not True")
    >>> id_problem(float("nan"), "name")
    ('InputError', "id 'name' must be a finite number, not nan")
    >>> id_problem("None", "name") is None and id_problem(7, "name") is None
    True
    """
    if value is None:
        return "ParseError", f"id {id_field!r} is null"
    if isinstance(value, float) and not math.isfinite(value):
        return "InputError", f"id {id_field!r} must be a finite number, not {value!r}"
    if isinstance(value, (bool, dict, list)):
        return "InputError", f"id {id_field!r} must be a string or a number, not {value!r}"
    return None
