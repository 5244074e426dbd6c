"""JSON → the preorder tree of :mod:`structpos.parsers.json_tree`, from the compiled scanner.

The first path of :func:`~structpos.parsers.json_tree.parse_json` when ``structpos._native_json``
is built (``native/json.c``; :func:`structpos.native.native_module`): one pass in C over the
string's code points returns the node columns, and :func:`scan_native` turns them into the
Structure the pure-Python scanner builds (same labels, parents, spans, ``key`` and ``index``
attributes). On input ``json.loads`` refuses, and on a tree over ``max_nodes``, it returns
``None`` and the pure-Python scanner runs and raises its own error.

Examples
--------
>>> s = scan_native('{"a": [1, true]}', "t", 100, "json")
>>> s is None or (list(s.labels), s.parent.tolist()) == (
...     ['object', 'member:a', 'array', 'number', 'boolean'], [-1, 0, 1, 2, 2])
True
"""

from __future__ import annotations

import numpy as np

from ..native import native_module
from ..node_attrs import INDEX, KEY
from ..structure import Structure
from ._json_arrays import label_keys

__all__ = ["scan_native"]

# the C scanner's node kind codes, in order
_KIND_LABELS = np.array(["object", "array", "", "string", "boolean", "null", "number"], dtype=object)


def scan_native(text: str, name: str, max_nodes: int, fmt: str) -> Structure | None:
    """The Structure :class:`~structpos.parsers.json_tree._Scanner` builds, from the compiled scanner.

    Parameters
    ----------
    text : str
        JSON text.
    name : str
        The input's name (kept on the Structure).
    max_nodes : int
        The node budget: a larger tree returns ``None``.
    fmt : str
        The Structure's ``format`` (``"json"`` or ``"json-object"``).

    Returns
    -------
    Structure or None
        ``None`` when the native module is not built (or switched off), the text is not JSON
        that ``json.loads`` accepts, or the tree has more than ``max_nodes`` nodes.

    Examples
    --------
    >>> from structpos.parsers.json_tree import _Scanner
    >>> text = '{"a": [1, "x", {"b\\\\u00e9": null}], "c": true}'
    >>> fast, slow = scan_native(text, "t", 100, "json"), _Scanner(text, "t", 100).scan("json")
    >>> fast is None or (list(fast.labels), fast.end.tolist()) == (list(slow.labels), slow.end.tolist())
    True
    >>> scan_native("[1, 2", "t", 100, "json") is None  # bad JSON: left to the scanner's error
    True
    """
    mod = native_module("json")
    if mod is None:
        return None
    out = mod.scan(text, max_nodes)
    if out is None:
        return None
    kind_b, parent_b, start_b, end_b, index_b, members_b, member_key_b, keys = out
    kind = np.frombuffer(kind_b, dtype=np.uint8)
    labels = _KIND_LABELS[kind]
    key_arr = np.empty(kind.size, dtype=object)
    if keys:
        members = np.frombuffer(members_b, dtype=np.int64)
        ids = np.frombuffer(member_key_b, dtype=np.int64)
        distinct = np.empty(len(keys), dtype=object)
        distinct[:] = keys
        key_arr[members] = distinct[ids]
        labels[members] = label_keys(keys)[ids]
    return Structure(
        kind="tree",
        labels=labels,
        start=np.frombuffer(start_b, dtype=np.int64),
        end=np.frombuffer(end_b, dtype=np.int64),
        parent=np.frombuffer(parent_b, dtype=np.int64),
        source=text,
        name=name,
        attrs={KEY: key_arr, INDEX: np.frombuffer(index_b, dtype=np.int64)},
        format=fmt,
    )
