"""JSON → the preorder tree of :mod:`structpos.parsers.json_tree`, from numpy passes over the characters.

The fast path of :func:`~structpos.parsers.json_tree.parse_json` for texts of at least
:data:`FAST_MIN_CHARS` characters that ``json.loads`` accepts: :func:`scan_arrays` builds the
Structure the iterative scanner builds (2–3× faster on large files); on every other input it
returns ``None`` and the scanner runs (and raises its error).

Examples
--------
>>> s = scan_arrays('{"a": [1, true]}'.ljust(FAST_MIN_CHARS), "t", 100, "json")
>>> list(s.labels), s.parent.tolist()
(['object', 'member:a', 'array', 'number', 'boolean'], [-1, 0, 1, 2, 2])
"""

from __future__ import annotations

import gc
import json
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, not in typeshed

import numpy as np

from ..node_attrs import INDEX, KEY
from ..structure import Structure
from ._input import clean_label
from ._substrings import span_mask, split_spans

__all__ = ["FAST_MIN_CHARS", "scan_arrays", "member_label", "label_keys"]

FAST_MIN_CHARS = 512
"""Texts at least this long go through :func:`_scan_arrays` first (below it numpy's fixed costs
outweigh the per-node Python work of :class:`~structpos.parsers.json_tree._Scanner`)."""

# character classes of the array scanner: whitespace, the six structural characters, '"', the rest
_WS_C, _OBJ_C, _OBJ_END_C, _ARR_C, _ARR_END_C, _COLON_C, _COMMA_C, _QUOTE_C, _OTHER_C = range(9)
_CLASS = np.full(128, _OTHER_C, dtype=np.int8)
for _ch, _cl in zip(' \t\n\r{}[]:,"', [_WS_C] * 4 + list(range(_OBJ_C, _OTHER_C))):
    _CLASS[ord(_ch)] = _cl


def member_label(key: str) -> str:
    """The label of the member node with the decoded key ``key``: ``member:<key>``, lone surrogates as U+FFFD.

    Examples
    --------
    >>> member_label("a"), member_label("k\\ud800")
    ('member:a', 'member:k\\ufffd')
    """
    return "member:" + (key if key.isascii() else clean_label(key))


def label_keys(keys: list[str]) -> np.ndarray:
    """The ``member:<key>`` labels of ``keys`` (:func:`member_label` of each), as an object array.

    Examples
    --------
    >>> label_keys(["a", "b"]).tolist()
    ['member:a', 'member:b']
    """
    labels = np.empty(len(keys), dtype=object)
    labels[:] = [member_label(k) for k in keys]
    return labels


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


def scan_arrays(text: str, name: str, max_nodes: int, fmt: str) -> Structure | None:
    """The Structure :class:`~structpos.parsers.json_tree._Scanner` builds, from numpy passes over the characters.

    Only for text that ``json.loads`` accepts (checked first; it accepts exactly what the
    scanner accepts except deeply nested text, which it refuses by recursion, and non-ASCII
    digits, which ``NUMBER_RE`` matches): every other input, and a tree over ``max_nodes``,
    returns ``None`` for :class:`~structpos.parsers.json_tree._Scanner`, which raises the error or handles the nesting.
    In valid JSON, strings are the spans between consecutive unescaped quotes; outside them
    the structural characters and scalar runs (numbers, literals) are the tokens; node ``i``
    in preorder is the ``i``-th token that starts a value or a member (its key), in text order;
    brackets match level by level; a value's parent is its member (the node before it) inside
    objects, its innermost open bracket otherwise.

    Examples
    --------
    >>> from structpos.parsers.json_tree import _Scanner
    >>> text = '{"a": [1, "x", {"b": null}], "c": true}' + " " * FAST_MIN_CHARS
    >>> fast, slow = scan_arrays(text, "t", 100, "json"), _Scanner(text, "t", 100).scan("json")
    >>> list(fast.labels) == list(slow.labels), fast.parent.tolist() == slow.parent.tolist()
    (True, True)
    >>> scan_arrays("[1, 2", "t", 100, "json") is None  # bad JSON: left to the scanner's error
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
    outside = ~span_mask(n, s_open, s_close + 1)[:n]  # not inside a string (quotes included)
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
        keys, member_labels = _member_keys(text, c, start[members], end_of_key=s_close[is_key] + 1)
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


def _member_keys(
    text: str, c: np.ndarray, key_start: np.ndarray, end_of_key: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Decoded keys and ``member:<key>`` labels of the keys at ``[key_start, end_of_key)`` (quotes
    included); each distinct key is decoded once (as :class:`~structpos.parsers.json_tree._Scanner`
    does: ``scanstring``). The raw keys come from one split (:mod:`~structpos.parsers._substrings`;
    valid JSON holds no NUL character)."""
    inner_start, inner_end = key_start + 1, end_of_key - 1
    raws = split_spans(c, span_mask(c.size, inner_start, inner_end), inner_end)
    distinct = list(set(raws))
    distinct_keys = [scanstring(raw + '"', 0, True)[0] if "\\" in raw else raw for raw in distinct]
    decoded = dict(zip(distinct, distinct_keys))
    labelled = dict(zip(distinct, label_keys(distinct_keys).tolist()))
    keys = np.empty(len(raws), dtype=object)
    labels = np.empty(len(raws), dtype=object)
    keys[:] = list(map(decoded.__getitem__, raws))
    labels[:] = list(map(labelled.__getitem__, raws))
    return keys, labels
