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
its ``NaN``/``Infinity`` extension). When the compiled scanner ``structpos._native_json`` is
built (``native/json.c``), every text goes through it first
(:func:`~structpos.parsers._json_native.scan_native`: one C pass over the code points, faster than
``json.loads`` on large files); it builds the same Structure and leaves every input it refuses to
the scanner, which raises the error. Without it, texts of at least
:data:`~structpos.parsers._json_arrays.FAST_MIN_CHARS` characters that ``json.loads`` accepts take an
array scanner instead (:func:`~structpos.parsers._json_arrays.scan_arrays`: numpy passes over the
characters, 2–3× faster on large files), which builds the same Structure. A Python value is first
written as text by :func:`~structpos.parsers._json_dumps.dumps_iterative`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, not in typeshed
from json.scanner import NUMBER_RE
from typing import Any, NoReturn

import numpy as np

from ..exceptions import InputError, ParseError
from ..limits import Limits, check_limit, node_budget
from ..native import native_module
from ..node_attrs import INDEX, KEY
from ..structure import Structure
from ._input import is_pathlike, read_text
from ._json_arrays import FAST_MIN_CHARS, member_label
from ._json_arrays import scan_arrays as _scan_arrays
from ._json_dumps import dumps_iterative
from ._json_native import scan_native
from ._tree_builder import line_col

__all__ = ["parse_json", "json_path", "dumps_iterative"]

_WS = re.compile(r"[ \t\n\r]*")
# the pattern matches the empty string, so its match never returns None
_ws_match: Callable[[str, int], re.Match[str]] = _WS.match  # type: ignore[assignment]
_WS_CHARS = " \t\n\r"
_LITERALS = (
    ("true", "boolean"),
    ("false", "boolean"),
    ("null", "null"),
    ("NaN", "number"),
    ("Infinity", "number"),
    ("-Infinity", "number"),
)


def parse_json(
    text_or_obj: Any,
    name: str | None = None,
    *,
    limits: Limits | None = None,
    from_object: bool | None = None,
    default_encoding: str | None = None,
) -> Structure:
    """Parse JSON into a ``kind="tree"`` Structure (node layout in the module docstring).

    Parameters
    ----------
    text_or_obj : str, bytes, os.PathLike or any JSON-serializable value
        JSON text, UTF-8 bytes (a BOM selects UTF-16/32), a path to a JSON file, or a Python
        value. A Python value is serialized first, exactly as ``json.dumps(obj)`` with
        default options would (but without recursion), and the spans index that text.
    name : str, optional
        The input's name in error messages (default: the path, ``"<json>"`` or
        ``"<json object>"``).
    limits : Limits, optional
        ``max_input_bytes`` and ``max_nodes`` apply (default :data:`~structpos.limits.DEFAULT_LIMITS`).
    from_object : bool, optional
        Force reading ``text_or_obj`` as a Python value (``True``) or as text (``False``);
        by default ``str``/``bytes``/paths are text and everything else is a value, except
        ``None``, which is refused (an InputError) unless ``from_object=True``: a missing input
        is a likelier cause than the JSON value ``null``.
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    Structure
        ``kind="tree"``, spans in characters of ``source``.

    Raises
    ------
    ParseError
        Bad JSON (naming the input and ``line:col``), bytes that are not valid text (naming
        the byte offset), a lone surrogate *character* in ``str`` input.
    LimitError
        The input or the tree exceeds ``max_input_bytes`` / ``max_nodes``.
    InputError
        ``text_or_obj`` is ``None`` and ``from_object`` is not ``True``.

    Notes
    -----
    Lone-surrogate *escapes* (``"\\ud800"``) are valid JSON (``json.loads`` accepts them)
    and parse: the ``key`` attribute keeps the decoded key exactly as ``json.loads`` returns it,
    while the ``member:<key>`` label has each lone surrogate replaced by U+FFFD, so labels
    always encode as UTF-8 (Arrow, tokenizers). The source text itself is ASCII there.

    Examples
    --------
    >>> s = parse_json('{"a": [1, true]}')
    >>> list(s.labels)
    ['object', 'member:a', 'array', 'number', 'boolean']
    >>> s.node_text(2)
    '[1, true]'
    >>> parse_json('{"a": }', name="r.json")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: r.json at line:col 1:7: expected a JSON value, found '}'
    """
    is_text = isinstance(text_or_obj, (str, bytes, bytearray, memoryview)) or is_pathlike(text_or_obj)
    if from_object is None:
        if text_or_obj is None:  # a missing input far more often than the JSON value null
            raise InputError(
                "the input is None; pass JSON text, bytes, a path or a value (from_object=True parses None as null)",
                name=name or "<json>",
            )
        from_object = not is_text
    if from_object:
        name = name or "<json object>"
        text = dumps_iterative(text_or_obj, name=name)
        fmt = "json-object"
    else:
        text, name = read_text(
            text_or_obj, name=name, default="<json>", limits=limits, default_encoding=default_encoding
        )
        fmt = "json"
    budget = node_budget(limits)
    if native_module("json") is not None:  # the compiled scanner: every length; None on bad input
        fast = scan_native(text, name, budget, fmt)
    else:
        fast = _scan_arrays(text, name, budget, fmt) if len(text) >= FAST_MIN_CHARS else None
    return fast if fast is not None else _Scanner(text, name, budget).scan(fmt)


def _string_error(text: str, e: json.JSONDecodeError) -> str:
    """The message of a string :func:`~json.decoder.scanstring` rejected, without its dangling ``" at"``.

    ``json`` words its messages to be followed by a position (``"Invalid control character
    at"``); the position goes in front here, so the message says what is at it instead.

    Examples
    --------
    >>> try:
    ...     scanstring('a\\x01b"', 0, True)
    ... except json.JSONDecodeError as e:
    ...     print(_string_error('a\\x01b"', e))
    invalid control character '\\x01' in a string (write it as the escape \\u0001)
    """
    msg = e.msg.strip()
    if msg.startswith("Invalid control character") and e.pos < len(text):
        ch = text[e.pos]
        return f"invalid control character {ch!r} in a string (write it as the escape \\u{ord(ch):04x})"
    return msg.removesuffix(" at").rstrip()


class _Scanner:
    """One left-to-right pass over JSON text with an explicit container stack (no recursion).

    The node columns are plain lists; ``stack`` holds one frame per open container,
    ``[node, is_object, element count, open member node or -1]``. :meth:`scan` alternates
    :meth:`value` (one value at ``pos``) and :meth:`next_slot` (close finished containers,
    find where the next value goes).
    """

    def __init__(self, text: str, name: str, max_nodes: int):
        self.text, self.name, self.n, self.max_nodes = text, name, len(text), max_nodes
        self.labels: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.parents: list[int] = []
        self.keys: dict[int, str] = {}
        self.indices: dict[int, int] = {}
        self.stack: list[list] = []
        self.parent, self.index = -1, -1  # where the next value goes

    def fail(self, pos: int, msg: str) -> NoReturn:
        raise ParseError(msg, name=self.name, position=f"line:col {line_col(self.text, pos)}")

    def skip_ws(self, pos: int) -> int:
        if pos < self.n and self.text[pos] in _WS_CHARS:
            return _ws_match(self.text, pos).end()
        return pos

    def scan(self, fmt: str) -> Structure:
        value, next_slot = self.value, self.next_slot
        pos = self.skip_ws(0)
        while True:
            pos = value(pos)
            if pos < 0:  # a container was opened: its first value starts at -pos - 1
                pos = -pos - 1
                continue
            pos = next_slot(pos)
            if pos < 0:
                return self.build(fmt)

    def add(self, label: str, pos: int, end: int) -> int:
        node = len(self.labels)
        if node >= self.max_nodes:
            check_limit(node + 1, self.max_nodes, "max_nodes", "nodes", name=self.name, position=f"char {pos}")
        self.labels.append(label)
        self.parents.append(self.parent)
        self.starts.append(pos)
        self.ends.append(end)
        return node

    def value(self, pos: int) -> int:
        """Add the value at ``pos`` (a scalar, or open a container); return the position after it."""
        if pos >= self.n:
            self.fail(pos, "expected a JSON value, found end of input")
        labels = self.labels
        node = len(labels)
        if self.index >= 0:
            self.indices[node] = self.index
        c = self.text[pos]
        if c == "{" or c == "[":
            return self.open(pos, c == "{")
        if c == '"':
            try:
                end, label = scanstring(self.text, pos + 1, True)[1], "string"
            except json.JSONDecodeError as e:
                self.fail(e.pos, _string_error(self.text, e))
        else:
            m = NUMBER_RE.match(self.text, pos)
            end, label = (m.end(), "number") if m is not None else self.literal(pos)
        if node >= self.max_nodes:
            check_limit(node + 1, self.max_nodes, "max_nodes", "nodes", name=self.name, position=f"char {pos}")
        labels.append(label)
        self.parents.append(self.parent)
        self.starts.append(pos)
        self.ends.append(end)
        return end

    def literal(self, pos: int) -> tuple[int, str]:
        for lit, label in _LITERALS:
            if self.text.startswith(lit, pos):
                return pos + len(lit), label
        self.fail(pos, f"expected a JSON value, found {self.text[pos : pos + 10]!r}")

    def open(self, pos: int, is_obj: bool) -> int:
        """Add a container node at ``pos``; an empty one is closed at once."""
        labels = self.labels
        node = len(labels)
        if node >= self.max_nodes:
            self.add("", pos, -1)  # raises LimitError
        labels.append("object" if is_obj else "array")
        self.parents.append(self.parent)
        self.starts.append(pos)
        self.ends.append(-1)
        text, n = self.text, self.n
        pos += 1
        if pos < n and text[pos] in _WS_CHARS:
            pos = _ws_match(text, pos).end()
        if pos < n and text[pos] == ("}" if is_obj else "]"):
            self.ends[node] = pos + 1
            return pos + 1
        frame = [node, is_obj, 1, -1]
        self.stack.append(frame)
        if is_obj:
            return self.member(pos, frame)
        self.parent, self.index = node, 0
        return -pos - 1  # a container was opened: its first value starts at once

    def member(self, pos: int, frame: list) -> int:
        """Scan ``"key" :`` at ``pos`` and add the member node; return ``-(value position) - 1``."""
        text = self.text
        if pos >= self.n or text[pos] != '"':
            self.fail(pos, "expected a double-quoted property name")
        try:
            key, end = scanstring(text, pos + 1, True)
        except json.JSONDecodeError as e:
            self.fail(e.pos, _string_error(self.text, e))
        colon = _ws_match(text, end).end()
        if colon >= self.n or text[colon] != ":":
            self.fail(colon, "expected ':' after a property name")
        self.parent = frame[0]
        member = self.add(member_label(key), pos, -1)
        self.keys[member] = key
        frame[3] = member
        self.parent, self.index = member, -1
        return -_ws_match(text, colon + 1).end() - 1

    def next_slot(self, pos: int) -> int:
        """After a value: close finished containers; return where the next value starts, -1 at the end."""
        stack, text, n, ends = self.stack, self.text, self.n, self.ends
        while True:
            if pos < n and text[pos] in _WS_CHARS:
                pos = _ws_match(text, pos).end()
            if not stack:
                if pos != n:
                    self.fail(pos, "extra data after the JSON value")
                return -1
            frame = stack[-1]
            c = text[pos] if pos < n else ""
            if frame[1]:  # the open member ends where its value (the next node) ends
                ends[frame[3]] = ends[frame[3] + 1]
            if c == ",":
                pos += 1
                if pos < n and text[pos] in _WS_CHARS:
                    pos = _ws_match(text, pos).end()
                if frame[1]:
                    return -self.member(pos, frame) - 1
                self.parent, self.index = frame[0], frame[2]
                frame[2] += 1
                return pos
            if c != ("}" if frame[1] else "]"):
                self.expected_separator(pos, frame[1], c)
            ends[frame[0]] = pos + 1
            stack.pop()
            pos += 1

    def expected_separator(self, pos: int, is_obj: bool, c: str) -> NoReturn:
        what = "',' or '}' after an object member" if is_obj else "',' or ']' after an array element"
        self.fail(pos, f"expected {what}, found {c!r}" if c else f"expected {what}, found end of input")

    def build(self, fmt: str) -> Structure:
        n = len(self.labels)
        key_arr = np.empty(n, dtype=object)
        index_arr = np.full(n, -1, dtype=np.int64)
        keys, indices = self.keys, self.indices
        if keys:
            vals = np.empty(len(keys), dtype=object)
            vals[:] = list(keys.values())
            key_arr[np.fromiter(keys.keys(), dtype=np.int64, count=len(keys))] = vals
        if indices:
            index_arr[np.fromiter(indices.keys(), dtype=np.int64, count=len(indices))] = np.fromiter(
                indices.values(), dtype=np.int64, count=len(indices)
            )
        return Structure(
            kind="tree",
            labels=self.labels,
            start=self.starts,
            end=self.ends,
            parent=self.parents,
            source=self.text,
            name=self.name,
            attrs={KEY: key_arr, INDEX: index_arr},
            format=fmt,
        )


def json_path(structure: Structure, i: int) -> list[str | int]:
    """The keys/indices leading from the root to node ``i`` (``obj[p0][p1]...`` is node ``i``).

    Parameters
    ----------
    structure : Structure
        A Structure from :func:`parse_json` (or :func:`~structpos.parsers.yaml_tree.parse_yaml`),
        with the ``key`` and ``index`` attributes.
    i : int
        A node index.

    Returns
    -------
    list of str or int
        Object keys and array indices from the root down; a ``member:`` node and its value
        share a path.

    Examples
    --------
    >>> s = parse_json('{"a": [1, {"b": null}]}')
    >>> [(str(s.labels[i]), json_path(s, i)) for i in (0, 3, 6)]
    [('object', []), ('number', ['a', 0]), ('null', ['a', 1, 'b'])]
    >>> value = {"a": [1, {"b": None}]}
    >>> for key in json_path(s, 4):
    ...     value = value[key]
    >>> value, s.node_text(4)
    ({'b': None}, '{"b": null}')
    """
    keys, idx, parent = structure.attrs[KEY], structure.attrs[INDEX], structure.parent
    if parent is None:
        raise InputError(f"json_path needs a tree Structure, not kind={structure.kind!r}", name=structure.name)
    path: list[str | int] = []
    i = int(i)
    while i >= 0:
        if keys[i] is not None:
            path.append(keys[i])
        elif idx[i] >= 0:
            path.append(int(idx[i]))
        i = int(parent[i])
    return path[::-1]
