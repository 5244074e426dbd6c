"""``json.dumps`` without recursion: the text :func:`~structpos.parsers.json_tree.parse_json` parses for a Python value.

Examples
--------
>>> dumps_iterative({"a": (1, None)})
'{"a": [1, null]}'
"""

from __future__ import annotations

import json
from typing import Any

from ..structure import StructureError

__all__ = ["dumps_iterative"]


def _key_text(k: Any, name: str) -> str:
    if isinstance(k, str):
        return json.dumps(k)
    if k is None or isinstance(k, (bool, int, float)):  # json.dumps coerces these keys
        return json.dumps(json.dumps(k))
    raise StructureError(f"object keys must be str, int, float, bool or None, not {type(k).__name__}", name=name)


def dumps_iterative(obj: Any, name: str = "<json object>") -> str:
    """``json.dumps(obj)`` (default options) without recursion, for arbitrarily deep values.

    Parameters
    ----------
    obj : JSON-serializable value
        Dicts (keys ``str``, ``int``, ``float``, ``bool`` or ``None``, coerced as ``json.dumps``
        does), lists, tuples and scalars.
    name : str
        The value's name in error messages.

    Returns
    -------
    str
        The same text as ``json.dumps(obj)``.

    Raises
    ------
    ParseError
        A circular reference, a key or value ``json.dumps`` cannot serialize.

    Examples
    --------
    >>> dumps_iterative({1: [True, None, 1.5], "k": ()})
    '{"1": [true, null, 1.5], "k": []}'
    >>> deep = []
    >>> for _ in range(5000):
    ...     deep = [deep]
    >>> dumps_iterative(deep) == "[" * 5001 + "]" * 5001  # json.dumps raises RecursionError here
    True
    >>> loop = []
    >>> loop.append(loop)
    >>> dumps_iterative(loop, name="loop")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: loop: circular reference
    """
    out: list[str] = []
    # stack of (iterator over items, is_dict, container id)
    stack: list[tuple[Any, bool, int]] = []
    active: set[int] = set()
    first = True
    value = obj
    while True:
        # emit `value`
        if isinstance(value, dict) or isinstance(value, (list, tuple)):
            if id(value) in active:
                raise StructureError("circular reference", name=name)
            is_dict = isinstance(value, dict)
            if not value:
                out.append("{}" if is_dict else "[]")
            else:
                out.append("{" if is_dict else "[")
                active.add(id(value))
                stack.append((iter(value.items()) if isinstance(value, dict) else iter(value), is_dict, id(value)))
                first = True
        else:
            try:
                out.append(json.dumps(value))
            except TypeError as e:
                raise StructureError(str(e), name=name) from None
        # find the next value to emit
        while stack:
            it, is_dict, cid = stack[-1]
            try:
                item = next(it)
            except StopIteration:
                out.append("}" if is_dict else "]")
                active.discard(cid)
                stack.pop()
                first = False
                continue
            if not first:
                out.append(", ")
            first = False
            if is_dict:
                out.append(_key_text(item[0], name))
                out.append(": ")
                value = item[1]
            else:
                value = item
            break
        else:
            return "".join(out)
