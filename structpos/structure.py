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
* typed, documented facts about the input instead of a free dict: ``nested_spans`` (False for
  dependency trees, whose word spans do not nest), ``format``, ``node_texts`` (decoded text per
  node when it differs from the source slice: table cells), ``node_ids`` and ``edge_attr``
  (graphs), and one record per kind: :class:`TableInfo` (``table``), :class:`CodeInfo`
  (``code``), :class:`SentenceInfo` (``sentence``).

Examples
--------
>>> import numpy as np
>>> s = Structure("tree", ["root", "a", "b"], start=[0, 0, 2], end=[3, 1, 3], parent=[-1, 0, 0], source="a+b")
>>> s.num_nodes, [s.node_text(i) for i in range(3)]
(3, ['a+b', 'a', 'b'])
>>> s.children(0).tolist()
[1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from .exceptions import ShapeError, SpecError, StructureError

__all__ = [
    "STRUCTURE_KINDS",
    "Structure",
    "StructureError",
    "StructureKind",
    "TableInfo",
    "CodeInfo",
    "SentenceInfo",
    "as_int_array",
    "raise_at_first",
]

StructureKind = Literal["tree", "table", "document", "graph"]
"""What a node set *is*: ``Structure.kind``. A closed set: a kind registered from outside (an
input kind, a :data:`~structpos.parsers.kinds.PARSERS` name, a plain ``str``) still produces one
of these four (a parser of a new format builds a tree, a table, a document or a graph)."""

STRUCTURE_KINDS: tuple[str, ...] = get_args(StructureKind)
"""The values of :data:`StructureKind`, in order."""


def raise_at_first(
    bad: npt.ArrayLike,
    message: str | Callable[[int], str],
    *,
    name: str | None,
    where: str | Callable[[int], str] = "node",
) -> None:
    """Raise :class:`~structpos.exceptions.ParseError` naming the first index where ``bad`` holds.

    How the validators report a broken per-element check: the error names the input and the
    first offending element (``node 3``, ``token 0``, ``edge 7``); nothing happens when no
    element fails.

    Parameters
    ----------
    bad : array_like of bool
        One entry per element, set where the check fails.
    message : str or callable
        The message, or ``message(i) -> str`` built from the first offending index ``i``.
    name : str or None
        The input's name.
    where : str or callable, optional
        The position is ``f"{where} {i}"`` (default ``"node"``), or ``where(i)`` for a callable.

    Raises
    ------
    ParseError
        When ``bad`` is set anywhere.

    Examples
    --------
    >>> import numpy as np
    >>> lengths = np.array([3, 0, 9, 12])
    >>> raise_at_first(lengths > 20, "too long", name="v.json")  # nothing fails: no error
    >>> raise_at_first(lengths > 5, lambda i: f"length {lengths[i]} over 5", name="v.json", where="item")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: v.json at item 2: length 9 over 5
    """
    hits = np.flatnonzero(bad)
    if hits.size:
        i = int(hits[0])
        raise StructureError(
            message(i) if callable(message) else message,
            name=name,
            position=where(i) if callable(where) else f"{where} {i}",
        )


@dataclass
class TableInfo:
    """What a table parser knows about the whole table (``Structure.table``).

    Parameters
    ----------
    grid : list of list
        The expanded ``n_rows × n_cols`` grid of cell texts; a merged cell's text repeats over
        every slot it covers; ``None`` in the holes of ragged rows.
    header_rows : int or None
        Number of leading header rows (``None``: unknown, inferred from the ``header`` flags).
    n_rows, n_cols : int
        Grid size.
    table_index : int or None
        Which table of a multi-table HTML page (0-based).

    Examples
    --------
    >>> TableInfo(grid=[["a", "b"]], header_rows=1, n_rows=1, n_cols=2).n_cols
    2
    """

    grid: list[list[str | None]] = field(default_factory=list)
    header_rows: int | None = None
    n_rows: int = 0
    n_cols: int = 0
    table_index: int | None = None


@dataclass
class CodeInfo:
    """What the code parser reports (``Structure.code``).

    Parameters
    ----------
    language : str
        Grammar name (``"python"``, ``"rust"``, ...).
    has_error : bool
        Whether the parse contains ERROR or MISSING nodes (see the ``is_error`` attribute).
    named_only : bool
        Whether anonymous nodes were dropped.
    parser : str
        The parser used.

    Examples
    --------
    >>> CodeInfo("python", has_error=False).parser
    'tree-sitter'
    """

    language: str = ""
    has_error: bool = False
    named_only: bool = False
    parser: str = "tree-sitter"


@dataclass
class SentenceInfo:
    """A dependency-tree sentence's identity (``Structure.sentence``).

    Parameters
    ----------
    sent_id : str or None
        The CoNLL-U ``# sent_id`` (``None`` when absent).
    index : int
        0-based position of the sentence in its file or document.
    text_synthesized : bool
        True when there was no ``# text`` line and the source was rebuilt from the word forms.
    comments : dict of str to str
        Every CoNLL-U comment (``# key = value``) of the sentence.

    Examples
    --------
    >>> SentenceInfo("s-1", 0).text_synthesized
    False
    """

    sent_id: str | None = None
    index: int = 0
    text_synthesized: bool = False
    comments: dict[str, Any] = field(default_factory=dict)


ArrayLike = Any
"""Anything :func:`numpy.asarray` takes; every array field is a numpy array after ``__post_init__``."""


_INT64_MAX = float(np.iinfo(np.int64).max)


def as_int_array(x: Any, what: str, *, name: str | None = None, error: type[Exception] = StructureError) -> np.ndarray:
    """``x`` as a contiguous int64 array, refusing anything that is not integer-valued.

    The one conversion of index arrays (``parent``, spans, node ids): integer arrays and lists
    pass; floats pass only when every value is integral and finite (``[-1.0, 0.0]``, as before
    this check; ``0.5`` or NaN would otherwise be truncated silently); booleans, strings,
    complex numbers, ragged lists and unsigned values beyond int64 raise ``error``.

    Parameters
    ----------
    x : array_like
        The values.
    what : str
        Their name, for the message.
    name : str, optional
        The input's name.
    error : exception class
        Raised on a bad value (default :class:`~structpos.exceptions.StructureError`).

    Returns
    -------
    numpy.ndarray
        int64, same shape.

    Examples
    --------
    >>> as_int_array([-1, 0.0, 1], "parent").tolist()
    [-1, 0, 1]
    >>> as_int_array([-1, 0, 0.5], "parent")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: parent[2] = 0.5 is not an integer
    """
    if isinstance(x, np.ndarray) and x.dtype == np.int64:
        return np.ascontiguousarray(x)
    kw: dict[str, Any] = {} if name is None else {"name": name}
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise error(f"{what} must be an array of integers ({e})", **kw) from None
    kind = a.dtype.kind
    if a.size == 0 and kind in "biufcOUS":
        return np.zeros(a.shape, dtype=np.int64)
    if kind == "u" and int(a.max()) > np.iinfo(np.int64).max:
        raise error(f"{what} holds {a.max()}, beyond the int64 range", **kw)
    if kind == "f":
        bad = ~np.isfinite(a) | (np.floor(a) != a) | (np.abs(a) >= _INT64_MAX)
        if bad.any():
            j = int(np.flatnonzero(bad.ravel())[0])
            raise error(f"{what}[{j}] = {a.ravel()[j].item()!r} is not an integer", **kw)
    elif kind not in "iu":
        raise error(f"{what} must hold integers, got dtype {a.dtype}", **kw)
    return np.ascontiguousarray(a, dtype=np.int64)


def _as_int_array(x, n: int, fill: int, what: str, name: str) -> np.ndarray:
    if x is None:
        return np.full(n, fill, dtype=np.int64)
    return as_int_array(x, what, name=name)


@dataclass(eq=False)
class Structure:
    """Array-based IR of a tree, table, document or graph (see the module docstring).

    Parameters
    ----------
    kind : {"tree", "table", "document", "graph"}
        What the node set is (:data:`StructureKind`); not the input kind (``"json"``, ``"code"``, ...).
    labels : sequence of str
        One label per node (its length is the node count ``N``).
    start, end : array_like of int, optional
        Half-open character spans into ``source``; ``-1`` for nodes without text.
    parent : array_like of int, optional
        Parent of each node (``-1`` for roots), in preorder (``parent[i] < i``); trees only.
    edge_index : array_like, optional
        ``(2, E)`` graph edges; ``edge_weight`` ``(E,)`` their weights; ``directed`` how to read them.
    source : str, optional
        The text the spans index into.
    name : str
        Where the input came from (file path, record id), used in error messages.
    attrs : dict of str to array
        Extra per-node arrays with leading dimension ``N``.
    nested_spans : bool
        Whether each node's span lies inside its parent's (False for dependency trees).
    format : str
        Input format (``"json"``, ``"csv"``, ``"conllu"``, ...); empty when not recorded.
    node_texts : list, optional
        Per-node decoded text where it differs from the source slice (table cells), else ``None``.
    node_ids : list, optional
        Original node keys of a networkx graph (node ``i`` is ``node_ids[i]``).
    edge_attr : numpy.ndarray, optional
        ``(E, F)`` multi-dimensional edge features of a PyG graph.
    table, code, sentence : TableInfo, CodeInfo, SentenceInfo, optional
        Per-kind facts recorded by the table, code and CoNLL-U / spaCy parsers.
    truncated_from : int, optional
        Node count before :func:`structpos.viz.truncate` cut the structure.

    Raises
    ------
    SpecError
        ``kind`` is not one of :data:`STRUCTURE_KINDS`.
    ShapeError
        An array's length differs from the node count.

    Examples
    --------
    >>> g = Structure("graph", ["a", "b"], edge_index=[[0, 1], [1, 0]])
    >>> g.is_tree, g.edges()[0].tolist()
    (False, [[0, 1], [1, 0]])
    >>> t = Structure("table", ["table"], table=TableInfo(header_rows=1))
    >>> t.table.header_rows
    1
    """

    kind: StructureKind
    """``"tree"``, ``"table"``, ``"document"`` or ``"graph"`` (what the node set *is*)."""
    labels: ArrayLike
    """``(N,)`` object array of node labels/kinds (strings)."""
    start: ArrayLike = None
    end: ArrayLike = None
    parent: ArrayLike | None = None
    edge_index: ArrayLike | None = None
    edge_weight: ArrayLike | None = None
    directed: bool = False
    source: str | None = None
    name: str = "<input>"
    attrs: dict[str, np.ndarray] = field(default_factory=dict)
    nested_spans: bool = True
    format: str = ""
    node_texts: list[Any] | None = None
    node_ids: list[Any] | None = None
    edge_attr: np.ndarray | None = None
    table: TableInfo | None = None
    code: CodeInfo | None = None
    sentence: SentenceInfo | None = None
    truncated_from: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in STRUCTURE_KINDS:
            raise SpecError(f"Structure kind {self.kind!r} is not one of {', '.join(STRUCTURE_KINDS)}", name=self.name)
        labels = self.labels
        if not isinstance(labels, np.ndarray) or labels.dtype != object:
            arr = np.empty(len(labels), dtype=object)
            arr[:] = list(labels)
            labels = arr
        self.labels = labels
        n = len(labels)
        self.start = _as_int_array(self.start, n, -1, "start", self.name)
        self.end = _as_int_array(self.end, n, -1, "end", self.name)
        if self.parent is not None:
            self.parent = _as_int_array(self.parent, n, -1, "parent", self.name)
        if self.edge_index is not None:
            ei = as_int_array(self.edge_index, "edge_index", name=self.name)
            if ei.size == 0:
                ei = ei.reshape(2, 0)
            elif ei.ndim != 2 or ei.shape[0] != 2:
                raise ShapeError(f"edge_index must have shape (2, E), got {ei.shape}", name=self.name)
            self.edge_index = ei
        if self.edge_weight is not None:
            ew = np.asarray(self.edge_weight)
            if ew.dtype.kind not in "biuf":
                raise ShapeError(f"edge_weight must hold real numbers, got dtype {ew.dtype}", name=self.name)
            self.edge_weight = np.ascontiguousarray(ew, dtype=np.float64)
        for k in self.attrs:  # values replaced in place: the keys do not change
            v = np.asarray(self.attrs[k])
            if v.shape[:1] != (n,):
                raise ShapeError(f"attribute {k!r} has shape {v.shape}, expected leading dimension {n}", name=self.name)
            self.attrs[k] = v
        if self.start.shape != (n,) or self.end.shape != (n,):
            raise ShapeError(f"start/end must have one entry per node ({n})", name=self.name)
        if self.parent is not None and self.parent.shape != (n,):
            raise ShapeError(f"parent must have one entry per node ({n})", name=self.name)

    # ------------------------------------------------------------------ basics
    @property
    def num_nodes(self) -> int:
        """Number of nodes ``N``."""
        return len(self.labels)

    def __len__(self) -> int:
        return self.num_nodes

    @property
    def is_tree(self) -> bool:
        """Whether the structure has a parent array."""
        return self.parent is not None

    def node_text(self, i: int) -> str | None:
        """The source text of node ``i`` (``None`` when it has no span or no source).

        Parameters
        ----------
        i : int
            Node index.

        Returns
        -------
        str or None
            ``source[start[i]:end[i]]``.

        Examples
        --------
        >>> Structure("tree", ["a", "b"], start=[0, 1], end=[2, 2], parent=[-1, 0], source="xy").node_text(1)
        'y'
        """
        s, e = int(self.start[i]), int(self.end[i])
        if self.source is None or s < 0:
            return None
        return self.source[s:e]

    def edges(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(edge_index, edge_weight)``: the graph edges, or parent→child edges of a tree.

        Returns
        -------
        edge_index : numpy.ndarray
            ``(2, E)`` int64.
        edge_weight : numpy.ndarray or None
            ``(E,)`` float64, ``None`` when unweighted.

        Examples
        --------
        >>> Structure("tree", ["a", "b", "c"], parent=[-1, 0, 0]).edges()[0].tolist()
        [[0, 0], [1, 2]]
        """
        if self.edge_index is not None:
            return self.edge_index, self.edge_weight
        if self.parent is not None:
            child = np.flatnonzero(self.parent >= 0)
            return np.stack([self.parent[child], child]), None
        return np.zeros((2, 0), dtype=np.int64), None

    def children(self, i: int) -> np.ndarray:
        """Children of node ``i`` in sibling order (trees only).

        Parameters
        ----------
        i : int
            Node index.

        Returns
        -------
        numpy.ndarray
            The children's int64 node indices (empty for a leaf).

        Raises
        ------
        ValueError
            If the structure is not a tree.

        Examples
        --------
        >>> Structure("tree", ["a", "b", "c"], parent=[-1, 0, 1]).children(0).tolist()
        [1]
        """
        if self.parent is None:
            raise ValueError(f"{self.name}: not a tree")
        return np.flatnonzero(self.parent == i)

    def validate(self) -> "Structure":
        """Check the invariants (preorder parents, nested spans, edge bounds); return self.

        Returns
        -------
        Structure
            ``self``.

        Raises
        ------
        StructureError
            On a broken invariant, naming the node.

        Examples
        --------
        >>> Structure("tree", ["a", "b"], start=[0, 0], end=[1, 2], parent=[-1, 0], source="xy").validate()
        Traceback (most recent call last):
        ...
        structpos.exceptions.ParseError: <input> at node 1: span of node 1 is not inside its parent's span
        """
        n, parent = self.num_nodes, self.parent
        if parent is not None and n:
            raise_at_first(
                (parent >= np.arange(n)) | (parent < -1),
                lambda i: f"parent[{i}]={parent[i]} breaks preorder (parent < child)",
                name=self.name,
            )
            # dependency trees (CoNLL-U, spaCy) span words, not subtrees: no nesting to check
            p = np.maximum(parent, 0)
            checked = (parent >= 0) & (self.start >= 0) & (self.start[p] >= 0) & self.nested_spans
            raise_at_first(
                checked & ((self.start < self.start[p]) | (self.end > self.end[p])),
                lambda i: f"span of node {i} is not inside its parent's span",
                name=self.name,
            )
        raise_at_first((self.start >= 0) & (self.end < self.start), "span ends before it starts", name=self.name)
        if self.source is not None:
            raise_at_first(self.end > len(self.source), "span ends past the source", name=self.name)
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
