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
its ``NaN``/``Infinity`` extension). Texts of at least :data:`FAST_MIN_CHARS` characters that
``json.loads`` accepts take an array scanner instead (:func:`_scan_arrays`: numpy passes over the
characters, 2–3× faster on large files), which builds the same Structure.
"""

from __future__ import annotations

import gc
import json
import re
from json.decoder import scanstring
from json.scanner import NUMBER_RE
from typing import Any

import numpy as np

from ..exceptions import InputError, ParseError
from ..limits import Limits, check_limit, node_budget
from ..node_attrs import INDEX, KEY
from ..structure import Structure, StructureError
from ._input import clean_label, is_pathlike, read_text
from ._tree_builder import line_col

__all__ = ["parse_json", "json_path", "dumps_iterative"]

_WS = re.compile(r"[ \t\n\r]*")
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
    text_or_obj: Any, name: str | None = None, *, limits: Limits | None = None, from_object: bool | None = None
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
        text, name = read_text(text_or_obj, name=name, default="<json>", limits=limits)
        fmt = "json"
    budget = node_budget(limits)
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


# ------------------------------------------------------------------ array scanner
FAST_MIN_CHARS = 512
"""Texts at least this long go through :func:`_scan_arrays` first (below it numpy's fixed costs
outweigh the per-node Python work of :class:`_Scanner`)."""

# character classes of the array scanner: whitespace, the six structural characters, '"', the rest
_WS_C, _OBJ_C, _OBJ_END_C, _ARR_C, _ARR_END_C, _COLON_C, _COMMA_C, _QUOTE_C, _OTHER_C = range(9)
_CLASS = np.full(128, _OTHER_C, dtype=np.int8)
for _ch, _cl in zip(' \t\n\r{}[]:,"', [_WS_C] * 4 + list(range(_OBJ_C, _OTHER_C))):
    _CLASS[ord(_ch)] = _cl


def _codes(text: str) -> np.ndarray | None:
    """The text as one integer per character (character offsets = array indices)."""
    try:
        if text.isascii():
            return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    except UnicodeEncodeError:  # a lone surrogate character: the scanner reports it
        return None


def _real_quotes(c: np.ndarray) -> np.ndarray:
    """Positions of the ``"`` that open or close strings (not preceded by an odd run of backslashes)."""
    q = np.flatnonzero(c == 34)
    cand = q[(q > 0) & (c[np.maximum(q - 1, 0)] == 92)]
    if cand.size == 0:
        return q
    run = np.zeros(cand.size, dtype=np.int64)  # backslashes right before each candidate
    active = np.ones(cand.size, dtype=bool)
    while active.any():
        at = cand - run - 1
        active &= (at >= 0) & (c[np.maximum(at, 0)] == 92)
        run += active
    escaped = cand[run % 2 == 1]
    return q[~np.isin(q, escaped)]


def _scan_arrays(text: str, name: str, max_nodes: int, fmt: str) -> Structure | None:
    """The Structure :class:`_Scanner` builds, from numpy passes over the characters.

    Only for text that ``json.loads`` accepts (checked first; it accepts exactly what the
    scanner accepts except deeply nested text, which it refuses by recursion, and non-ASCII
    digits, which ``NUMBER_RE`` matches): every other input, and a tree over ``max_nodes``,
    returns ``None`` for :class:`_Scanner`, which raises the error or handles the nesting.
    In valid JSON, strings are the spans between consecutive unescaped quotes; outside them
    the structural characters and scalar runs (numbers, literals) are the tokens; node ``i``
    in preorder is the ``i``-th token that starts a value or a member (its key), in text order;
    brackets match level by level; a value's parent is its member (the node before it) inside
    objects, its innermost open bracket otherwise.

    Examples
    --------
    >>> text = '{"a": [1, "x", {"b": null}], "c": true}' + " " * FAST_MIN_CHARS
    >>> fast, slow = _scan_arrays(text, "t", 100, "json"), _Scanner(text, "t", 100).scan("json")
    >>> list(fast.labels) == list(slow.labels), fast.parent.tolist() == slow.parent.tolist()
    (True, True)
    >>> _scan_arrays("[1, 2", "t", 100, "json") is None  # bad JSON: left to the scanner's error
    True
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the throwaway value of the check: ~1 object per node, no cycles to find
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return None
    finally:
        if gc_was_enabled:
            gc.enable()
    c = _codes(text)
    if c is None:
        return None
    n = len(c)
    rq = _real_quotes(c)
    s_open, s_close = rq[0::2], rq[1::2]  # string spans [s_open, s_close]
    depth = np.zeros(n + 1, dtype=np.int8)  # +1 inside a string (quotes included), parity kept
    depth[s_open] = 1
    depth[s_close + 1] -= 1
    outside = np.cumsum(depth[:n], dtype=np.int8) == 0
    # outside strings, valid JSON has ASCII only and no control characters but whitespace (all <= 32)
    tok = np.flatnonzero(outside & (c > 32))  # structural characters and scalar characters
    tcl = _CLASS[np.minimum(c[tok], 127)]
    # scalars: maximal runs of "other" characters outside strings
    sc = tok[tcl == _OTHER_C]
    brk = np.flatnonzero(np.diff(sc) != 1)
    sc_start = sc[np.concatenate([[0], brk + 1])] if sc.size else sc
    sc_end = sc[np.concatenate([brk, [sc.size - 1]])] + 1 if sc.size else sc
    # strings: a key when the next token after it is ':'
    struct = tok[tcl != _OTHER_C]
    scl = tcl[tcl != _OTHER_C]
    after = np.searchsorted(struct, s_close, side="right")
    is_key = np.append(scl, _WS_C)[after] == _COLON_C  # (past the last token: not a key)
    # brackets: levels and matching
    bmask = (scl == _OBJ_C) | (scl == _ARR_C) | (scl == _OBJ_END_C) | (scl == _ARR_END_C)
    bpos, bcl = struct[bmask], scl[bmask]
    opening = (bcl == _OBJ_C) | (bcl == _ARR_C)
    level = np.cumsum(np.where(opening, 1, -1)) + ~opening  # an opener's level = a closer's level
    order = np.lexsort((bpos, level))  # per level: open, close, open, close, ...
    o_pos, c_pos = bpos[order[0::2]], bpos[order[1::2]]
    o_lvl = level[order[0::2]]
    # the nodes, in preorder (= text order of their starts)
    kind = np.concatenate(
        [
            np.where(c[o_pos] == ord("{"), 0, 1),  # 0 object, 1 array
            np.where(is_key, 2, 3),  # 2 member, 3 string
            np.where(
                c[sc_start] == ord("t"),
                4,
                np.where(c[sc_start] == ord("f"), 4, np.where(c[sc_start] == ord("n"), 5, 6)),
            ),
        ]
    )  # 4 boolean, 5 null, 6 number
    starts = np.concatenate([o_pos, s_open, sc_start])
    ends_all = np.concatenate([c_pos + 1, s_close + 1, sc_end])
    node_order = np.argsort(starts, kind="stable")
    N = node_order.size
    if N > max_nodes:
        return None
    start = starts[node_order]
    end = ends_all[node_order]
    kind = kind[node_order]
    node_of_open = np.empty(N, dtype=np.int64)
    node_of_open[node_order] = np.arange(N, dtype=np.int64)  # the opens come first in node_order's input
    parent, in_obj = _parents(start, kind, c, bpos, opening, o_pos, o_lvl, node_of_open[: o_pos.size], n)
    is_member = kind == 2
    end[is_member] = end[np.flatnonzero(is_member) + 1]
    # attributes: element indices of array children, keys of members
    index = np.full(N, -1, dtype=np.int64)
    in_arr = np.flatnonzero((parent >= 0) & ~is_member & ~in_obj)
    if in_arr.size:
        pa = parent[in_arr]
        by_parent = np.argsort(pa, kind="stable")
        pa_sorted = pa[by_parent]
        first = np.searchsorted(pa_sorted, pa_sorted, side="left")
        index[in_arr[by_parent]] = np.arange(in_arr.size) - first
    labels = np.array(["object", "array", "", "string", "boolean", "null", "number"], dtype=object)[kind]
    key_arr = np.empty(N, dtype=object)
    members = np.flatnonzero(is_member)
    if members.size:
        keys, member_labels = _member_keys(text, start[members], end_of_key=s_close[is_key] + 1)
        key_arr[members] = keys
        labels[members] = member_labels
    return Structure(
        kind="tree",
        labels=labels,
        start=start,
        end=end,
        parent=parent,
        source=text,
        name=name,
        attrs={KEY: key_arr, INDEX: index},
        format=fmt,
    )


def _parents(start, kind, c, bpos, opening, o_pos, o_lvl, o_node, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parent of each node and whether it is a value inside an object (its member is its parent).

    The innermost container open at a node's start is the last opener before it at the level
    that counts the containers open there; inside an object, a value hangs from its member, the
    node just before it in preorder."""
    N = start.size
    if o_pos.size == 0:  # a lone scalar
        return np.full(N, -1, dtype=np.int64), np.zeros(N, dtype=bool)
    lvl_key = o_lvl.astype(np.int64) * (n + 1) + o_pos
    lorder = np.argsort(lvl_key, kind="stable")
    d = np.concatenate([[0], np.cumsum(np.where(opening, 1, -1))])
    enclosing = d[np.searchsorted(bpos, start, side="left")]  # containers open at each start
    slot = np.searchsorted(lvl_key[lorder], enclosing.astype(np.int64) * (n + 1) + start, side="left") - 1
    cont = lorder[np.maximum(slot, 0)]  # the enclosing container, as an index into the opens
    cont_pos = o_pos[cont]
    inside = enclosing > 0
    parent = np.where(inside, o_node[cont], -1)
    in_obj = inside & (c[cont_pos] == ord("{")) & (kind != 2)
    return np.where(in_obj, np.arange(N, dtype=np.int64) - 1, parent), in_obj


def _member_keys(text: str, key_start: np.ndarray, end_of_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decoded keys and ``member:<key>`` labels of the keys at ``[key_start, end_of_key)`` (quotes
    included); each distinct key is decoded once (as :class:`_Scanner` does: ``scanstring``)."""
    raws = list(map(text.__getitem__, map(slice, key_start.tolist(), end_of_key.tolist())))
    decoded: dict[str, str] = {}
    labelled: dict[str, str] = {}
    for raw in set(raws):
        key = scanstring(raw, 1, True)[0] if "\\" in raw else raw[1:-1]
        decoded[raw] = key
        labelled[raw] = "member:" + (key if key.isascii() else clean_label(key))
    keys = np.empty(len(raws), dtype=object)
    labels = np.empty(len(raws), dtype=object)
    keys[:] = list(map(decoded.__getitem__, raws))
    labels[:] = list(map(labelled.__getitem__, raws))
    return keys, labels


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

    def fail(self, pos: int, msg: str):
        raise ParseError(msg, name=self.name, position=f"line:col {line_col(self.text, pos)}")

    def skip_ws(self, pos: int) -> int:
        if pos < self.n and self.text[pos] in _WS_CHARS:
            return _WS.match(self.text, pos).end()
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
            pos = _WS.match(text, pos).end()
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
        colon = _WS.match(text, end).end()
        if colon >= self.n or text[colon] != ":":
            self.fail(colon, "expected ':' after a property name")
        self.parent = frame[0]
        member = self.add("member:" + (key if key.isascii() else clean_label(key)), pos, -1)
        self.keys[member] = key
        frame[3] = member
        self.parent, self.index = member, -1
        return -_WS.match(text, colon + 1).end() - 1

    def next_slot(self, pos: int) -> int:
        """After a value: close finished containers; return where the next value starts, -1 at the end."""
        stack, text, n, ends = self.stack, self.text, self.n, self.ends
        while True:
            if pos < n and text[pos] in _WS_CHARS:
                pos = _WS.match(text, pos).end()
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
                    pos = _WS.match(text, pos).end()
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

    def expected_separator(self, pos: int, is_obj: bool, c: str):
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
