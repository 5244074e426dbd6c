"""Graphs (kind ``"graph"``) from networkx, a ``2 × E`` ``edge_index`` or a PyG ``Data``.

Edge convention — edges are stored **exactly as given**, in input order, never symmetrized
or deduplicated; ``directed`` says how to read them:

* ``directed=True``: stored edge ``(u, v)`` is the arc ``u → v``;
* ``directed=False``: stored edge ``(u, v)`` stands for the unordered pair ``{u, v}``. Input
  may list a pair once (networkx style) or in both directions (PyG style); consumers build the
  symmetric adjacency by *assigning* ``A[u, v] = A[v, u] = w`` (not by summing), so both styles
  give the same matrix. :func:`adjacency` does exactly that.

``Structure.edges()`` returns ``(edge_index, edge_weight)`` as stored (``edge_weight`` is
``None`` when the input has no weights). When ``directed`` is not given: networkx input uses
``G.is_directed()``; ``edge_index``/PyG input is read as undirected when every edge's reverse
is present too (PyG's ``is_undirected`` test, weights included), else as directed.

Node order: ``list(G.nodes)`` for networkx (original node keys in ``structure.node_ids``),
``0 .. num_nodes-1`` otherwise. Labels: the node attribute named by ``label`` when present,
else ``str(node)``. Spans are ``-1`` unless ``node_text`` is given (a sequence of strings, or
for networkx the name of a node attribute): then ``source`` is the texts joined by newlines and
node ``i`` spans its text. Multi-dimensional PyG ``edge_attr`` is kept in ``structure.edge_attr``.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ..exceptions import LimitError, ParseError
from ..limits import Limits, check_limit, resolve_limits
from ..structure import Structure, StructureError, raise_at_first

__all__ = ["parse_graph", "adjacency"]


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _check_node_count(num_nodes: int, explicit: bool, n_edges: int, limits: Limits | None, name: str) -> None:
    """``max_nodes`` always; ``max_graph_nodes_per_edge`` when the count comes from the largest node id."""
    lim = resolve_limits(limits)
    if not explicit and lim.max_graph_nodes_per_edge is not None:
        allowed = max(1024, lim.max_graph_nodes_per_edge * (n_edges + 1))
        if num_nodes > allowed:
            raise LimitError(
                f"{n_edges} edges name node {num_nodes - 1}: {num_nodes} nodes inferred from the largest node id "
                f"(pass num_nodes= explicitly for a graph this sparse)",
                limit="max_graph_nodes_per_edge",
                value=num_nodes,
                maximum=allowed,
                name=name,
            )
    check_limit(num_nodes, lim.max_nodes, "max_nodes", "nodes", name=name)


def _check_edge_index(
    ei: Any, num_nodes: int | None, name: str, limits: Limits | None = None
) -> tuple[np.ndarray, int]:
    try:
        a = _to_numpy(ei)
    except (TypeError, ValueError) as e:  # ragged lists, objects numpy cannot read
        raise ParseError(f"edge_index is not a (2, E) array: {e}", name=name) from None
    if a.ndim != 2 or a.shape[0] != 2:
        raise StructureError(f"edge_index must have shape (2, E), got {a.shape}", name=name)
    if a.size and a.dtype.kind == "f":
        raise_at_first(
            ~np.isfinite(a).all(0) | (a != np.round(a)).any(0),
            lambda k: f"edge_index entries must be integers, got {a[:, k].tolist()}",
            name=name,
            where="edge",
        )
    elif a.size and a.dtype.kind not in "iub":
        raise StructureError(f"edge_index must be an integer array, got dtype {a.dtype}", name=name)
    if a.size and (a.min() < np.iinfo(np.int64).min or a.max() > np.iinfo(np.int64).max):
        raise ParseError("edge_index entries do not fit in 64-bit integers", name=name)
    a = a.astype(np.int64)
    explicit = num_nodes is not None
    if num_nodes is None:
        num_nodes = int(a.max()) + 1 if a.size else 0
    try:
        num_nodes = operator.index(num_nodes)
    except TypeError:
        raise ParseError(f"num_nodes must be an integer, got {num_nodes!r}", name=name) from None
    if num_nodes < 0:
        raise StructureError(f"num_nodes must be ≥ 0, got {num_nodes}", name=name)
    _check_node_count(num_nodes, explicit, a.shape[1], limits, name)
    raise_at_first(
        ((a < 0) | (a >= num_nodes)).any(0),
        lambda k: f"edge ({a[0, k]}, {a[1, k]}) refers to a node outside 0..{num_nodes - 1}",
        name=name,
        where="edge",
    )
    return a, num_nodes


def _check_weights(w: Any, n_edges: int, name: str) -> np.ndarray | None:
    if w is None:
        return None
    a = _to_numpy(w)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.shape != (n_edges,):
        raise StructureError(f"edge weights must have shape ({n_edges},), got {a.shape}", name=name)
    try:
        a = a.astype(np.float64)
    except (TypeError, ValueError):
        raise StructureError(f"edge weights must be numbers, got dtype {a.dtype}", name=name) from None
    raise_at_first(
        ~np.isfinite(a) | (a < 0),
        lambda k: f"edge weight {a[k]} is not a finite non-negative number",
        name=name,
        where="edge",
    )
    return a


def _is_symmetric(ei: np.ndarray, w: np.ndarray | None, n: int) -> bool:
    """Every edge (u, v) has its reverse (v, u) with the same weight (PyG ``is_undirected``)."""
    if ei.shape[1] == 0:
        return True
    key = ei[0] * max(n, 1) + ei[1]
    rkey = ei[1] * max(n, 1) + ei[0]
    if w is None:
        return bool(np.isin(rkey, key).all())
    order = np.lexsort((w, key))
    rorder = np.lexsort((w, rkey))
    return bool(np.array_equal(key[order], rkey[rorder]) and np.array_equal(w[order], w[rorder]))


def _attach_text(texts: Sequence[str] | None, n: int, name: str):
    if texts is None:
        return None, None, None
    texts = [str(t) for t in texts]
    if len(texts) != n:
        raise StructureError(f"node_text has {len(texts)} entries for {n} nodes", name=name)
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
    return "\n".join(texts), start, start + lengths


def _from_networkx(G, label, weight, node_text, name):
    nodes = list(G.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    data = G.nodes
    labels = [str(data[v][label]) if label is not None and label in data[v] else str(v) for v in nodes]
    edges = list(G.edges(data=True))
    ei = np.array([[index[u] for u, _, _ in edges], [index[v] for _, v, _ in edges]], dtype=np.int64).reshape(2, -1)
    has_w = weight is not None and any(weight in d for _, _, d in edges)
    w = None
    if has_w:
        w = []
        for k, (_, _, d) in enumerate(edges):
            try:
                w.append(float(d.get(weight, 1.0)))
            except (TypeError, ValueError):
                raise StructureError(
                    f"edge weight {d.get(weight)!r} is not a number", name=name, position=f"edge {k}"
                ) from None
    if isinstance(node_text, str):
        node_text = [data[v].get(node_text, "") for v in nodes]
    return nodes, labels, ei, w, node_text, bool(G.is_directed())


def _check_directed(directed: Any, name: str) -> bool | None:
    """``directed`` as a bool (``None`` kept): a string or a number is a ParseError, not truthiness.

    ``"directed": "false"`` in graph JSON is a non-empty string, so ``bool()`` would read it
    as directed: only ``True``/``False`` (NumPy's too) are accepted.
    """
    if directed is None or isinstance(directed, (bool, np.bool_)):
        return None if directed is None else bool(directed)
    raise ParseError(f"directed must be true, false or absent, not {directed!r}", name=name)


def parse_graph(
    obj: Any,
    num_nodes: int | None = None,
    directed: bool | None = None,
    name: str | None = None,
    weight: str | None = "weight",
    *,
    label: str | None = "label",
    node_text: Sequence[str] | str | None = None,
    edge_weight: Any = None,
    limits: Limits | None = None,
) -> Structure:
    """A graph Structure from networkx, an ``edge_index`` or PyG ``Data`` (edge convention: module docstring).

    Weights are a default that changes results, so note it: networkx input uses the edge
    attribute ``weight="weight"`` when any edge has it (missing on an edge → 1.0); pass
    ``weight=None`` to ignore it. PyG's transforms (``AddLaplacianEigenvectorPE``,
    ``AddRandomWalkPE``) read no such attribute (only ``edge_weight``, and LapPE not even that),
    so a weighted networkx graph gives other coordinates than PyG run on
    ``from_networkx(G)`` unless ``weight=None``.

    Parameters
    ----------
    obj : networkx graph, array-like of shape (2, E), or PyG ``Data``
        A networkx graph, a ``2 × E`` integer array/tensor/list, or an object with
        ``edge_index`` (PyG ``Data``: ``num_nodes``, ``edge_weight`` or 1-d ``edge_attr``).
    num_nodes : int, optional
        The node count (default: the networkx node count, ``Data.num_nodes``, else the
        largest node id + 1).
    directed : bool, optional
        How to read the edges; default: ``G.is_directed()`` for networkx, else undirected
        exactly when every edge's reverse is present with the same weight.
    name : str, optional
        The graph's name in error messages (default: ``G.name``, ``"<pyg>"``, ``"<edge_index>"``).
    weight : str or None
        The networkx edge attribute holding weights (missing on an edge → 1.0); for PyG input
        the weights are ``edge_weight``, else the attribute named ``weight`` (what
        ``torch_geometric.utils.from_networkx`` creates), else a 1-d ``edge_attr``.
        ``None``: unweighted.
    label : str or None
        The networkx node attribute used as label when present (else ``str(node)``).
    node_text : sequence of str, or str, optional
        A text per node (networkx: or the name of a node attribute); the texts joined by
        newlines become ``source`` and each node spans its text.
    edge_weight : array-like of shape (E,), optional
        Weights for a bare ``edge_index`` (or overriding PyG's).
    limits : Limits, optional
        ``max_nodes`` always; when ``num_nodes`` is not given and comes from the largest node
        id, at most ``max(1024, max_graph_nodes_per_edge * (E + 1))`` nodes — a 30-byte edge
        list naming node 10,000,000 is refused unless ``num_nodes`` says so.

    Returns
    -------
    Structure
        ``kind="graph"`` with ``edge_index``/``edge_weight`` as given (``Structure.edges()``),
        ``directed``, ``node_ids`` (networkx node keys) and labels.

    Raises
    ------
    ParseError
        An ``edge_index`` not of shape ``(2, E)`` or not integral, an edge naming a node out
        of range, a negative, NaN or infinite weight (naming the edge position), a
        ``num_nodes`` that disagrees with the graph, a ``directed`` that is not a bool
        (``"maybe"``, ``"false"``, ``1``).
    LimitError
        ``max_nodes`` or ``max_graph_nodes_per_edge`` exceeded.

    Examples
    --------
    >>> s = parse_graph([[0, 1], [1, 2]])
    >>> s.num_nodes, s.directed
    (3, True)
    >>> parse_graph([[0, 1], [1, 0]]).directed  # every edge has its reverse
    False
    >>> import networkx as nx
    >>> G = nx.Graph([("a", "b", {"weight": 2.0}), ("b", "c", {})])
    >>> s = parse_graph(G)
    >>> s.node_ids, s.edges()[0].tolist(), s.edges()[1].tolist()
    (['a', 'b', 'c'], [[0, 1], [1, 2]], [2.0, 1.0])
    >>> parse_graph(G, weight=None).edges()[1] is None
    True
    >>> parse_graph([[0, 1], [1, 2]], num_nodes=2)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <edge_index> at edge 1: edge (1, 2) refers to a node outside 0..1
    >>> parse_graph([[0], [10_000_000]], name="tiny")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: tiny: 1 edges name node 10000000: ...(max_graph_nodes_per_edge: 10000001 > 1024...
    """
    node_ids = None
    inferred_directed = None
    extra: dict[str, Any] = {}
    if hasattr(obj, "is_directed") and hasattr(obj, "nodes") and hasattr(obj, "edges"):
        name = name or str(getattr(obj, "name", "") or "<networkx>")
        check_limit(obj.number_of_nodes(), resolve_limits(limits).max_nodes, "max_nodes", "nodes", name=name)
        node_ids, labels, ei, w, node_text, inferred_directed = _from_networkx(obj, label, weight, node_text, name)
        if num_nodes is not None and num_nodes != len(node_ids):
            raise StructureError(f"num_nodes={num_nodes} but the graph has {len(node_ids)} nodes", name=name)
        num_nodes = len(node_ids)
        ei, num_nodes = _check_edge_index(ei, num_nodes, name, limits)
        w = _check_weights(w, ei.shape[1], name)
    else:
        if hasattr(obj, "edge_index"):  # PyG Data
            name = name or "<pyg>"
            if num_nodes is None:
                num_nodes = getattr(obj, "num_nodes", None)
            raw_w = getattr(obj, "edge_weight", None)
            if raw_w is None and weight and weight != "edge_weight":
                raw_w = getattr(obj, weight, None)  # e.g. from torch_geometric.utils.from_networkx
            edge_attr = getattr(obj, "edge_attr", None)
            if raw_w is None and edge_attr is not None:
                ea = _to_numpy(edge_attr)
                if ea.ndim == 1 or (ea.ndim == 2 and ea.shape[1] == 1):
                    raw_w = ea
                else:
                    extra["edge_attr"] = ea
            ei, num_nodes = _check_edge_index(obj.edge_index, num_nodes, name, limits)
        else:
            name = name or "<edge_index>"
            raw_w = edge_weight
            ei, num_nodes = _check_edge_index(obj, num_nodes, name, limits)
        if edge_weight is not None and raw_w is not edge_weight:
            raw_w = edge_weight
        w = _check_weights(raw_w, ei.shape[1], name)
        labels = [str(i) for i in range(num_nodes)]
        inferred_directed = not _is_symmetric(ei, w, num_nodes)
    directed = _check_directed(directed, name)
    source, start, end = _attach_text(node_text, num_nodes, name)
    return Structure(
        kind="graph",
        labels=labels,
        start=start,
        end=end,
        edge_index=ei,
        edge_weight=w,
        directed=inferred_directed if directed is None else directed,
        source=source,
        name=name,
        node_ids=node_ids,
        edge_attr=extra.get("edge_attr"),
    )


def adjacency(s: Structure) -> np.ndarray:
    """Dense ``(N, N)`` weighted adjacency by the edge convention of the module (assignment, not sums).

    Directed: ``A[u, v] = w``. Undirected: ``A[u, v] = A[v, u] = w``. Parallel edges: the
    last one listed wins. Meant for tests and small graphs.

    Parameters
    ----------
    s : Structure
        A graph Structure (:func:`parse_graph`).

    Returns
    -------
    numpy.ndarray
        ``float64`` of shape ``(N, N)``; unweighted edges weigh 1.

    Examples
    --------
    >>> adjacency(parse_graph([[0, 1], [1, 2]], edge_weight=[2.0, 3.0], directed=True))
    array([[0., 2., 0.],
           [0., 0., 3.],
           [0., 0., 0.]])

    Undirected, an edge listed once (networkx style) or in both directions (PyG style)
    gives the same symmetric matrix:

    >>> once = adjacency(parse_graph([[0, 1], [1, 2]], edge_weight=[2.0, 3.0], directed=False))
    >>> both = adjacency(parse_graph([[0, 1, 1, 2], [1, 0, 2, 1]], edge_weight=[2.0, 2.0, 3.0, 3.0]))
    >>> bool((once == both).all()), once[2].tolist()
    (True, [0.0, 3.0, 0.0])
    """
    n = s.num_nodes
    ei, w = s.edges()
    w = np.ones(ei.shape[1]) if w is None else w
    A = np.zeros((n, n), dtype=np.float64)
    A[ei[0], ei[1]] = w
    if not s.directed:
        A[ei[1], ei[0]] = w
    return A
