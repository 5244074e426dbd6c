"""Append-only builder for preorder trees, shared by the tree-shaped parsers.

Parsers walk their input depth-first and call :meth:`TreeBuilder.add` in preorder, so
``parent[i] < i`` holds by construction. Spans can be closed later with :meth:`close`
(an object's end is only known after its last child). Per-node attributes are collected
in columns with a default for nodes that do not set them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..limits import check_limit
from ..structure import Structure, StructureKind


class TreeBuilder:
    """Collect nodes in preorder; :meth:`build` turns them into a :class:`Structure`.

    ``columns``: ``{attr name: (default value, numpy dtype)}``. ``max_nodes``: adding node
    number ``max_nodes + 1`` raises :class:`~structpos.exceptions.LimitError` (``max_nodes``)
    naming ``name``, so no input grows a tree past the limit.

    Examples
    --------
    >>> b = TreeBuilder(max_nodes=2, name="t")
    >>> b.add("root", -1, 0, 3), b.add("leaf", 0, 1, 2)
    (0, 1)
    >>> b.build("tree", "abc", "t").num_nodes
    2
    >>> b.add("one too many", 0)
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: t: 3 nodes (max_nodes: 3 > 2; raise the limit to allow it)
    """

    def __init__(
        self, columns: dict[str, tuple[Any, Any]] | None = None, *, max_nodes: int | None = None, name: str = "<input>"
    ):
        self.max_nodes = max_nodes
        self.name = name
        self._room = float("inf") if max_nodes is None else max_nodes
        self.labels: list[str] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.parent: list[int] = []
        self._defaults = {k: d for k, (d, _) in (columns or {}).items()}
        self._dtypes = {k: t for k, (_, t) in (columns or {}).items()}
        self._set: dict[str, dict[int, Any]] = {k: {} for k in self._defaults}  # sparse: node -> value

    def __len__(self) -> int:
        return len(self.labels)

    def add(self, label: str, parent: int, start: int = -1, end: int = -1, **attrs: Any) -> int:
        """Append a node (its parent must already exist); return its index."""
        i = len(self.labels)
        if i >= self._room:
            check_limit(i + 1, self.max_nodes, "max_nodes", "nodes", name=self.name)
        self.labels.append(label)
        self.parent.append(parent)
        self.start.append(start)
        self.end.append(end)
        for k, v in attrs.items():
            self._set[k][i] = v  # KeyError names an undeclared attribute
        return i

    def close(self, i: int, end: int) -> None:
        """Set the end of node ``i``'s span."""
        self.end[i] = end

    def build(self, kind: StructureKind, source: str | None, name: str, **fields: Any) -> Structure:
        """The Structure; ``fields`` are its typed fields (``format=``, ``nested_spans=``, ...)."""
        attrs = {}
        n = len(self.labels)
        for k, values in self._set.items():
            dtype = self._dtypes[k]
            arr = np.empty(n, dtype=object) if dtype is object else np.empty(n, dtype=dtype)
            arr[:] = self._defaults[k]
            if values:
                idx = np.fromiter(values.keys(), dtype=np.int64, count=len(values))
                if dtype is object:
                    vals = np.empty(len(values), dtype=object)
                    vals[:] = list(values.values())
                else:
                    vals = np.fromiter(values.values(), dtype=dtype, count=len(values))
                arr[idx] = vals
            attrs[k] = arr
        return Structure(
            kind=kind,
            labels=self.labels,
            start=self.start,
            end=self.end,
            parent=self.parent,
            source=source,
            name=name,
            attrs=attrs,
            **fields,
        )


def line_col(text: str, pos: int) -> str:
    """``"line:col"`` (both 1-based, columns in characters) of character offset ``pos``."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"{line}:{col}"
