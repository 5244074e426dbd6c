"""The one intermediate representation every parser produces: :class:`Structure`.

A structure is a set of ``N`` nodes stored column-wise in numpy arrays, so it pickles
cheaply and every coordinate computation can be vectorized:

* ``start[i], end[i]`` — the half-open character span ``source[start[i]:end[i]]`` of node
  ``i`` (``-1, -1`` when the node has no text, e.g. a graph node without source).
  Spans are **characters**, never bytes: parsers that see bytes (tree-sitter) convert.
* ``parent[i]`` — the parent of node ``i`` (``-1`` for a root) for trees. Trees are stored
  in **preorder**: ``parent[i] < i`` and the children of a node appear in sibling order,
  so depth, sibling index and subtree size are one vectorized pass each.
* ``edge_index`` (``2 × E``) and ``edge_weight`` (``E``) for graphs; ``directed`` says how to
  read them. A tree also exposes its parent→child edges through :meth:`edges`.
* ``labels[i]`` — the node kind/label as a string (AST type, JSON key, dependency relation,
  table cell role, ...); ``attrs`` — extra per-node arrays of length ``N`` (table ``row``,
  ``col``, ``rowspan``, ``colspan``, ``header``; document ``paragraph``, ``sentence``,
  ``token``; ``is_error`` for code with syntax errors, ...).
* ``source`` — the text the spans index into; ``name`` — where it came from (a file path,
  a record id), used in every error message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .exceptions import StructureError

__all__ = ["Structure", "StructureError"]


def _as_int_array(x, n: int, fill: int) -> np.ndarray:
    if x is None:
        return np.full(n, fill, dtype=np.int64)
    return np.ascontiguousarray(np.asarray(x, dtype=np.int64))


@dataclass(eq=False)
class Structure:
    """Array-based IR of a tree, table, document or graph (see the module docstring)."""

    kind: str
    """``"tree"``, ``"table"``, ``"document"`` or ``"graph"`` (what the node set *is*)."""
    labels: np.ndarray
    """``(N,)`` object array of node labels/kinds (strings)."""
    start: np.ndarray | None = None
    end: np.ndarray | None = None
    parent: np.ndarray | None = None
    edge_index: np.ndarray | None = None
    edge_weight: np.ndarray | None = None
    directed: bool = False
    source: str | None = None
    name: str = "<input>"
    attrs: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        labels = self.labels
        if not isinstance(labels, np.ndarray) or labels.dtype != object:
            arr = np.empty(len(labels), dtype=object)
            arr[:] = list(labels)
            labels = arr
        self.labels = labels
        n = len(labels)
        self.start = _as_int_array(self.start, n, -1)
        self.end = _as_int_array(self.end, n, -1)
        if self.parent is not None:
            self.parent = _as_int_array(self.parent, n, -1)
        if self.edge_index is not None:
            ei = np.asarray(self.edge_index, dtype=np.int64).reshape(2, -1)
            self.edge_index = np.ascontiguousarray(ei)
        if self.edge_weight is not None:
            self.edge_weight = np.ascontiguousarray(np.asarray(self.edge_weight, dtype=np.float64))
        for k, v in list(self.attrs.items()):
            v = np.asarray(v)
            if v.shape[:1] != (n,):
                raise ValueError(f"attribute {k!r} has shape {v.shape}, expected leading dimension {n}")
            self.attrs[k] = v
        if self.start.shape != (n,) or self.end.shape != (n,):
            raise ValueError("start/end must have one entry per node")
        if self.parent is not None and self.parent.shape != (n,):
            raise ValueError("parent must have one entry per node")

    # ------------------------------------------------------------------ basics
    @property
    def num_nodes(self) -> int:
        return len(self.labels)

    def __len__(self) -> int:
        return self.num_nodes

    @property
    def is_tree(self) -> bool:
        return self.parent is not None

    def node_text(self, i: int) -> str | None:
        """The source text of node ``i`` (``None`` when it has no span or no source)."""
        s, e = int(self.start[i]), int(self.end[i])
        if self.source is None or s < 0:
            return None
        return self.source[s:e]

    def edges(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(edge_index, edge_weight)``: the graph edges, or parent→child edges of a tree."""
        if self.edge_index is not None:
            return self.edge_index, self.edge_weight
        if self.parent is not None:
            child = np.flatnonzero(self.parent >= 0)
            return np.stack([self.parent[child], child]), None
        return np.zeros((2, 0), dtype=np.int64), None

    def children(self, i: int) -> np.ndarray:
        """Children of node ``i`` in sibling order (trees only)."""
        if self.parent is None:
            raise ValueError(f"{self.name}: not a tree")
        return np.flatnonzero(self.parent == i)

    def validate(self) -> "Structure":
        """Check the invariants (preorder parents, nested spans, edge bounds); return self."""
        n = self.num_nodes
        if self.parent is not None and n:
            idx = np.arange(n)
            bad = np.flatnonzero((self.parent >= idx) | (self.parent < -1))
            if bad.size:
                i = int(bad[0])
                raise StructureError(f"parent[{i}]={self.parent[i]} breaks preorder (parent < child)", name=self.name, position=f"node {i}")
            # dependency trees (CoNLL-U, spaCy) span words, not subtrees: no nesting to check
            has = (self.parent >= 0) & (self.start >= 0) & bool(self.meta.get("nested_spans", True))
            p = self.parent[has]
            has_p = self.start[p] >= 0
            c = np.flatnonzero(has)[has_p]
            p = p[has_p]
            bad = np.flatnonzero((self.start[c] < self.start[p]) | (self.end[c] > self.end[p]))
            if bad.size:
                i = int(c[bad[0]])
                raise StructureError(f"span of node {i} is not inside its parent's span", name=self.name, position=f"node {i}")
        bad = np.flatnonzero((self.start >= 0) & (self.end < self.start))
        if bad.size:
            raise StructureError("span ends before it starts", name=self.name, position=f"node {int(bad[0])}")
        if self.source is not None:
            bad = np.flatnonzero(self.end > len(self.source))
            if bad.size:
                raise StructureError("span ends past the source", name=self.name, position=f"node {int(bad[0])}")
        if self.edge_index is not None and self.edge_index.size:
            if self.edge_index.min() < 0 or self.edge_index.max() >= n:
                raise StructureError("edge_index refers to a node that does not exist", name=self.name)
        return self

    def __repr__(self) -> str:
        extra = []
        if self.parent is not None:
            extra.append("tree")
        if self.edge_index is not None:
            extra.append(f"edges={self.edge_index.shape[1]}{' directed' if self.directed else ''}")
        if self.attrs:
            extra.append("attrs=" + ",".join(self.attrs))
        return f"Structure(kind={self.kind!r}, name={self.name!r}, nodes={self.num_nodes}, {' '.join(extra)})"
