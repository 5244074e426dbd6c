"""JSON → preorder tree with character spans, built by an iterative scanner.

Node kinds (labels): ``object``, ``array``, ``member:<key>`` (one per object member; its
span runs from the key's opening quote to the end of the value, its one child is the
value), ``string``, ``number``, ``boolean``, ``null``. Array elements are the values
themselves. Attributes:

* ``key`` (object array) — the member key on ``member:`` nodes, ``None`` elsewhere;
* ``index`` (int) — the element index on direct children of an array, ``-1`` elsewhere.

So the JSON path of node ``i`` is the sequence of ``key``/``index`` entries on the path
root → ``i`` (:func:`json_path`). Spans of value nodes slice to valid JSON that decodes to
the value. The scanner keeps an explicit stack (no recursion), so nesting depth is only
limited by memory; strings are decoded with :func:`json.decoder.scanstring` and numbers
matched with :data:`json.scanner.NUMBER_RE`, exactly as :func:`json.loads` does (including
its ``NaN``/``Infinity`` extension).
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from json.scanner import NUMBER_RE
from typing import Any

import numpy as np

from ..structure import Structure, StructureError
from ._tree_builder import line_col

__all__ = ["parse_json", "json_path", "dumps_iterative"]

_WS = re.compile(r"[ \t\n\r]*")
_WS_CHARS = " \t\n\r"
_LITERALS = (("true", "boolean"), ("false", "boolean"), ("null", "null"),
             ("NaN", "number"), ("Infinity", "number"), ("-Infinity", "number"))


def parse_json(text_or_obj: Any, name: str | None = None) -> Structure:
    """Parse JSON text (``str``/``bytes``) or a Python value into a ``kind="tree"`` Structure.

    A Python value (anything that is not ``str``/``bytes``) is serialized first, exactly as
    ``json.dumps(obj)`` with default options would (but without recursion), and the spans
    index into that text (``structure.source``). Bad JSON raises :class:`StructureError`
    naming the input and the ``line:col`` of the problem.
    """
    if isinstance(text_or_obj, (bytes, bytearray)):
        text_or_obj = bytes(text_or_obj).decode("utf-8")
    if isinstance(text_or_obj, str):
        text = text_or_obj
        name = name or "<json>"
        fmt = "json"
    else:
        name = name or "<json object>"
        text = dumps_iterative(text_or_obj, name=name)
        fmt = "json-object"
    return _scan(text, name, fmt)


def _fail(text: str, name: str, pos: int, msg: str):
    raise StructureError(msg, name=name, position=f"line:col {line_col(text, pos)}")


def _scan(text: str, name: str, fmt: str) -> Structure:
    """One left-to-right pass with an explicit container stack (hot loop: plain lists, inlined)."""
    labels: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    parents: list[int] = []
    keys: dict[int, str] = {}
    indices: dict[int, int] = {}
    n = len(text)
    ws, number = _WS.match, NUMBER_RE.match
    # Each stack frame is [node, is_object, element count, open member node or -1].
    stack: list[list] = []
    pos = ws(text, 0).end()
    parent, index = -1, -1  # where the next value goes
    while True:
        # ---- one value at pos: a scalar, or open a container ----
        if pos >= n:
            _fail(text, name, pos, "expected a JSON value, found end of input")
        c = text[pos]
        node = len(labels)
        if index >= 0:
            indices[node] = index
        if c == "{" or c == "[":
            is_obj = c == "{"
            labels.append("object" if is_obj else "array")
            parents.append(parent)
            starts.append(pos)
            ends.append(-1)
            pos += 1
            if pos < n and text[pos] in _WS_CHARS:
                pos = ws(text, pos).end()
            if pos < n and text[pos] == ("}" if is_obj else "]"):
                pos += 1
                ends[node] = pos
            else:
                frame = [node, is_obj, 1, -1]
                stack.append(frame)
                if is_obj:
                    parent, pos = _member(text, name, pos, frame, labels, starts, ends, parents, keys)
                    index = -1
                else:
                    parent, index = node, 0
                continue
        else:
            if c == '"':
                try:
                    end = scanstring(text, pos + 1, True)[1]
                except json.JSONDecodeError as e:
                    _fail(text, name, e.pos, e.msg)
                label = "string"
            else:
                m = number(text, pos)
                if m is not None:
                    end, label = m.end(), "number"
                else:
                    for lit, label in _LITERALS:
                        if text.startswith(lit, pos):
                            end = pos + len(lit)
                            break
                    else:
                        _fail(text, name, pos, f"expected a JSON value, found {text[pos:pos + 10]!r}")
            labels.append(label)
            parents.append(parent)
            starts.append(pos)
            ends.append(end)
            pos = end
        # ---- a value just ended at pos: close finished containers, find the next slot ----
        while True:
            if pos < n and text[pos] in _WS_CHARS:
                pos = ws(text, pos).end()
            if not stack:
                if pos != n:
                    _fail(text, name, pos, "extra data after the JSON value")
                return _build(text, name, fmt, labels, starts, ends, parents, keys, indices)
            frame = stack[-1]
            c = text[pos] if pos < n else ""
            if frame[1]:  # the open member ends where its value (the next node) ends
                ends[frame[3]] = ends[frame[3] + 1]
            if c == ",":
                pos += 1
                if pos < n and text[pos] in _WS_CHARS:
                    pos = ws(text, pos).end()
                if frame[1]:
                    parent, pos = _member(text, name, pos, frame, labels, starts, ends, parents, keys)
                    index = -1
                else:
                    parent, index = frame[0], frame[2]
                    frame[2] += 1
                break
            if c == ("}" if frame[1] else "]"):
                pos += 1
                ends[frame[0]] = pos
                stack.pop()
                continue
            what = "',' or '}' after an object member" if frame[1] else "',' or ']' after an array element"
            _fail(text, name, pos, f"expected {what}, found {c!r}" if c else f"expected {what}, found end of input")


def _member(text, name, pos, frame, labels, starts, ends, parents, keys) -> tuple[int, int]:
    """Scan ``"key" :`` at ``pos``, add the member node; return (member node, value position)."""
    if pos >= len(text) or text[pos] != '"':
        _fail(text, name, pos, "expected a double-quoted property name")
    try:
        key, end = scanstring(text, pos + 1, True)
    except json.JSONDecodeError as e:
        _fail(text, name, e.pos, e.msg)
    colon = _WS.match(text, end).end()
    if colon >= len(text) or text[colon] != ":":
        _fail(text, name, colon, "expected ':' after a property name")
    member = len(labels)
    labels.append(f"member:{key}")
    parents.append(frame[0])
    starts.append(pos)
    ends.append(-1)
    keys[member] = key
    frame[3] = member
    return member, _WS.match(text, colon + 1).end()


def _build(text, name, fmt, labels, starts, ends, parents, keys, indices) -> Structure:
    n = len(labels)
    key_arr = np.empty(n, dtype=object)
    index_arr = np.full(n, -1, dtype=np.int64)
    if keys:
        vals = np.empty(len(keys), dtype=object)
        vals[:] = list(keys.values())
        key_arr[np.fromiter(keys.keys(), dtype=np.int64, count=len(keys))] = vals
    if indices:
        index_arr[np.fromiter(indices.keys(), dtype=np.int64, count=len(indices))] = np.fromiter(
            indices.values(), dtype=np.int64, count=len(indices))
    return Structure(kind="tree", labels=labels, start=starts, end=ends, parent=parents, source=text, name=name,
                     attrs={"key": key_arr, "index": index_arr}, format=fmt)


def json_path(structure: Structure, i: int) -> list[str | int]:
    """The keys/indices leading from the root to node ``i`` (``obj[p0][p1]...`` is node ``i``)."""
    keys, idx, parent = structure.attrs["key"], structure.attrs["index"], structure.parent
    path: list[str | int] = []
    i = int(i)
    while i >= 0:
        if keys[i] is not None:
            path.append(keys[i])
        elif idx[i] >= 0:
            path.append(int(idx[i]))
        i = int(parent[i])
    return path[::-1]


def _key_text(k: Any, name: str) -> str:
    if isinstance(k, str):
        return json.dumps(k)
    if k is None or isinstance(k, (bool, int, float)):  # json.dumps coerces these keys
        return json.dumps(json.dumps(k))
    raise StructureError(f"object keys must be str, int, float, bool or None, not {type(k).__name__}", name=name)


def dumps_iterative(obj: Any, name: str = "<json object>") -> str:
    """``json.dumps(obj)`` (default options) without recursion, for arbitrarily deep values."""
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
                stack.append((iter(value.items() if is_dict else value), is_dict, id(value)))
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
