"""Graph input normalisation shared by the graph coordinate families.

Every graph family accepts the same inputs — a :class:`~structpos.Structure`, a PyG ``Data``
object (anything with ``edge_index`` and ``num_nodes``), a tuple ``(edge_index, num_nodes[,
edge_weight])``, or the explicit arrays — and turns them into a validated :class:`Graph`.

Conventions (documented once, used by every family):

* ``A[u, v]`` is the total weight of the edges ``u → v`` (duplicate edges are **summed**, as
  scipy/PyG's Laplacian do); edge weights default to 1.
* Weights must be finite and ``>= 0``; NaN, ±inf or negative weights raise
  :class:`~structpos.StructureError` naming the input and the edge position. A zero-weight
  edge is an absent edge.
* **Symmetrisation** ``A_s = max(A, Aᵀ)`` (elementwise): a graph already stored with both
  directions (the PyG convention) is unchanged, and a tree's parent→child edges become
  undirected edges of the same weight. For unweighted graphs this is ``A ∨ Aᵀ``.
* A node is **isolated** when it has no edge of positive weight to another node (self-loops
  do not count).
* A graph given as a bare ``edge_index`` needs ``num_nodes`` (nothing is inferred from the
  largest index: trailing isolated nodes would be lost); without it
  :class:`~structpos.StructureError` is raised.
* Families invariant to a global scaling of the weights (RWSE, the normalised and magnetic
  Laplacian PEs) compute on rescaled weights when the largest one is outside
  ``[2**-SCALE_EXPONENT, 2**SCALE_EXPONENT]`` (:func:`scale_free_weights`), so ``1e300`` or
  ``1e-320`` weights give the same answer as weights near 1 instead of overflowing.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from ..exceptions import EigenConvergenceError, InputError, SpecError
from ..structure import Structure, StructureError, raise_at_first
from ._args import check_int, check_pairwise_size

__all__ = [
    "Graph",
    "GraphBatch",
    "EigenConvergenceError",
    "as_graph",
    "as_graphs",
    "graph_sequence",
    "adjacency",
    "edge_weights",
    "packed_edges",
    "bucket_edges",
    "group_by_size",
    "auto_workers",
    "check_float_dtype",
    "check_pairwise_size",
    "scale_free_weights",
    "canonical_phase",
    "canonical_sign_rows",
    "scatter_rows",
    "is_torch",
    "to_output",
    "output_like",
    "batch_output",
]

SENTINEL = 3.0
"""Diagonal value given to padded rows/columns and isolated nodes in batched dense Laplacians.

Every eigenvalue of a normalised (magnetic) Laplacian lies in ``[0, 2]``, so modes living on
sentinel rows have eigenvalue exactly 3 and sort after every real mode; the blocks are
decoupled, so the real modes are those of the unpadded graph."""


@dataclass(frozen=True)
class Graph:
    """A validated graph: ``edge_index`` ``(2, E)`` int64, ``edge_weight`` ``(E,)`` float64 or None."""

    edge_index: np.ndarray
    num_nodes: int
    edge_weight: np.ndarray | None = None
    directed: bool = False
    name: str = "<graph>"


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x):
        try:
            return x.numpy()  # CPU tensor without grad: zero-copy
        except (RuntimeError, TypeError):
            return x.detach().cpu().numpy()
    return np.asarray(x)


def output_like(obj: Any) -> Any:
    """The array whose type (torch or numpy) a function's output should follow."""
    if isinstance(obj, tuple) and obj:
        return obj[0]
    return getattr(obj, "edge_index", obj)


def to_output(arr: np.ndarray, like: Any, dtype=None):
    """``arr`` as a torch tensor when ``like`` is one (CPU, ``dtype`` if given), else numpy."""
    if like is not None and is_torch(like):
        import torch

        t = torch.from_numpy(np.ascontiguousarray(arr))
        return t.to(dtype) if dtype is not None else t
    return arr


def batch_output(arrays: Sequence[np.ndarray], batch: GraphBatch, as_torch: bool | None) -> tuple:
    """``arrays`` as CPU torch tensors when ``as_torch`` (``None``: when the first graph's
    ``edge_index`` was a tensor, :attr:`GraphBatch.torch_input`), else unchanged: the output rule
    of every ``*_batch`` function."""
    if as_torch is None:
        as_torch = batch.torch_input
    if not as_torch:
        return tuple(arrays)
    import torch

    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)


def as_graph(
    obj: Any,
    num_nodes: int | None = None,
    edge_weight: Any = None,
    *,
    directed: bool | None = None,
    name: str | None = None,
) -> Graph:
    """Normalise a graph-like input into a validated :class:`Graph`.

    ``obj`` is a :class:`Structure` (its :meth:`~Structure.edges`; trees give parent→child
    edges), a PyG ``Data``-like object, a ``(edge_index, num_nodes[, edge_weight])`` tuple, or
    an ``edge_index`` array/tensor (then ``num_nodes`` is required).
    """
    g = _unchecked(obj, num_nodes, edge_weight, directed, name)
    _check_values(GraphBatch.of([g]))
    return g


def as_graphs(graphs: Iterable[Any], *, directed: bool | None = None, scale_free: bool = False) -> GraphBatch:
    """:func:`as_graph` over a sequence, validated in one vectorised pass; graph ``i`` is named
    ``graph[i]`` unless it has a name. ``scale_free``: weighted graphs whose largest weight is out
    of range come back rescaled (:func:`scale_free_weights`; found in the same pass).

    A batch of plain PyG ``Data`` (:func:`_plain_edges`) is read column-wise: its edges are
    concatenated once and no :class:`Graph` is made unless one is asked for."""
    graphs = graph_sequence(graphs)
    batch = _plain_batch(graphs, bool(directed))
    if batch is None:
        out = []
        for i, g in enumerate(graphs):
            nm = g.name if isinstance(g, (Structure, Graph)) else f"graph[{i}]"
            out.append(_unchecked(g, None, None, directed, nm))
        batch = GraphBatch.of(out)
    _check_values(batch, scale_free=scale_free)
    batch.torch_input = bool(graphs) and is_torch(output_like(graphs[0]))
    return batch


def graph_sequence(graphs: Any) -> Sequence[Any]:
    """``graphs`` as a sequence (an iterator is read once into a list); :class:`InputError` for one
    graph or anything that is not a collection of graphs.

    Examples
    --------
    >>> path = (np.array([[0, 1], [1, 0]]), 2)
    >>> len(graph_sequence(g for g in [path, path]))
    2
    >>> graph_sequence(np.array([[0, 1], [1, 0]]))
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: a batch takes a sequence of graphs, got one ndarray: pass [graph]
    """
    if isinstance(graphs, (Structure, Graph, np.ndarray)) or is_torch(graphs) or hasattr(graphs, "edge_index"):
        raise InputError(f"a batch takes a sequence of graphs, got one {type(graphs).__name__}: pass [graph]")
    if isinstance(graphs, (str, bytes, dict)):
        raise InputError(f"a batch takes a sequence of graphs, got {type(graphs).__name__}")
    if isinstance(graphs, Sequence):
        return graphs
    try:
        return list(graphs)
    except TypeError:
        raise InputError(f"a batch takes a sequence of graphs, got {type(graphs).__name__}") from None


class GraphBatch(Sequence[Graph]):
    """The validated graphs of a batch (:func:`as_graphs`) and the columns the ``*_batch`` functions read.

    Attributes
    ----------
    sizes : numpy.ndarray
        ``(B,)`` int64 node counts.
    counts : numpy.ndarray
        ``(B,)`` int64 edge counts.
    edge_index : numpy.ndarray
        ``(2, E)`` int64, every graph's edges back to back (graph ``i``'s from ``edge_ptr[i]``).
    weighted : bool
        Whether some graph has edge weights (then ``batch[i].edge_weight`` holds them).
    torch_input : bool
        Whether the first input graph's ``edge_index`` was a tensor (set by :func:`as_graphs`;
        the ``*_batch`` functions then answer in torch, :func:`batch_output`).

    ``batch[i]`` is graph ``i`` as a :class:`Graph`; a batch read column-wise from PyG ``Data``
    makes it on demand (named ``graph[i]``, its edges copied out of ``edge_index``).

    Examples
    --------
    >>> b = GraphBatch.of([Graph(np.array([[0], [1]]), 2), Graph(np.zeros((2, 0), np.int64), 3)])
    >>> b.sizes.tolist(), b.edge_ptr.tolist(), len(b), b[1].num_nodes
    ([2, 3], [0, 1, 1], 2, 3)
    >>> b.take(np.array([1])).sizes.tolist()
    [3]
    """

    def __init__(
        self,
        sizes: np.ndarray,
        counts: np.ndarray,
        edge_index: np.ndarray,
        graphs: list[Graph] | None,
        directed: bool = False,
    ) -> None:
        self.sizes, self.counts, self.edge_index = sizes, counts, edge_index
        self.graphs, self.directed = graphs, directed
        self.weighted = graphs is not None and any(g.edge_weight is not None for g in graphs)
        self.torch_input = False

    @classmethod
    def of(cls, graphs: list[Graph]) -> GraphBatch:
        """The batch of these graphs (kept as given; their edges concatenated once)."""
        B = len(graphs)
        counts = np.fromiter((g.edge_index.shape[1] for g in graphs), dtype=np.int64, count=B)
        sizes = np.fromiter((g.num_nodes for g in graphs), dtype=np.int64, count=B)
        return cls(sizes, counts, _concat_edges([g.edge_index for g in graphs]), graphs)

    @property
    def edge_ptr(self) -> np.ndarray:
        """``(B + 1,)`` int64 offsets of each graph's edges in :attr:`edge_index`."""
        ptr = np.zeros(len(self.sizes) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=ptr[1:])
        return ptr

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        i = range(len(self))[operator.index(i)]  # negative indices; IndexError past the end
        if self.graphs is not None:
            return self.graphs[i]
        start = int(self.counts[:i].sum())
        ei = np.ascontiguousarray(self.edge_index[:, start : start + int(self.counts[i])])
        return Graph(ei, int(self.sizes[i]), None, self.directed, f"graph[{i}]")

    def take(self, idx: np.ndarray) -> GraphBatch:
        """The graphs ``idx`` (int indices, in that order) as a batch."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == len(self) and (idx == np.arange(len(self))).all():
            return self
        counts = self.counts[idx]
        starts = self.edge_ptr[idx]
        pos = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        graphs = None if self.graphs is None else [self.graphs[i] for i in idx]
        sub = GraphBatch(self.sizes[idx], counts, self.edge_index[:, pos], graphs, self.directed)
        sub.torch_input = self.torch_input
        return sub


def _concat_edges(arrays: list[np.ndarray]) -> np.ndarray:
    """``(2, E)`` edges back to back (the one array itself when there is one)."""
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays, axis=1) if arrays else np.zeros((2, 0), np.int64)


_INT64 = np.dtype(np.int64)


def _plain_batch(graphs: Sequence[Any], directed: bool) -> GraphBatch | None:
    """The batch of ``graphs`` read column-wise when every one is a plain PyG ``Data``
    (:func:`_plain_edges`), else ``None`` (then each goes through :func:`_unchecked`)."""
    arrays, sizes = [], []
    for g in graphs:
        got = _plain_edges(g)
        if got is None:
            return None
        arrays.append(got[0])
        sizes.append(got[1])
    counts = np.fromiter((a.shape[1] for a in arrays), dtype=np.int64, count=len(arrays))
    return GraphBatch(np.array(sizes, dtype=np.int64), counts, _concat_edges(arrays), None, directed)


def _plain_edges(obj: Any) -> tuple[np.ndarray, int] | None:
    """``(edge_index, num_nodes)`` of a PyG ``Data`` whose storage holds a CPU int64 ``(2, E)``
    ``edge_index`` tensor (no grad), an int ``num_nodes`` and no ``edge_weight``, in a few
    attribute reads; ``None`` for anything else (then :func:`_unchecked` decides, with the same
    result on these inputs)."""
    mapping = getattr(getattr(obj, "_store", None), "_mapping", None)
    if type(mapping) is not dict or "edge_weight" in mapping:
        return None
    ei, n = mapping.get("edge_index"), mapping.get("num_nodes")
    if type(n) is not int or n < 0 or ei is None or not is_torch(ei):
        return None
    try:
        arr = ei.numpy()  # raises for CUDA tensors and tensors that require grad
    except (RuntimeError, TypeError, AttributeError):
        return None
    if arr.dtype != _INT64 or arr.ndim != 2 or arr.shape[0] != 2:
        return None
    return arr, n


def _unchecked(obj, num_nodes, edge_weight, directed, name) -> Graph:
    """Shape/type checks only; :func:`_check_values` checks indices and weights."""
    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, Structure):
        ei, ew = obj.edges()
        return _shaped(
            ei,
            obj.num_nodes,
            ew if edge_weight is None else edge_weight,
            obj.directed if directed is None else directed,
            name or obj.name,
        )
    store = getattr(obj, "_store", None)  # PyG Data: read its storage directly (much faster)
    mapping = getattr(store, "_mapping", None)  # ... and the storage's plain dict, faster still
    if type(mapping) is dict and "edge_index" in mapping:
        ew = edge_weight if edge_weight is not None else mapping.get("edge_weight")
        n = num_nodes if num_nodes is not None else mapping.get("num_nodes")
        n = obj.num_nodes if n is None else n
        return _shaped(mapping["edge_index"], n, ew, bool(directed), name or "<data>")
    if store is not None and hasattr(store, "get") and "edge_index" in store:
        ew = edge_weight if edge_weight is not None else store.get("edge_weight")
        n = num_nodes if num_nodes is not None else store.get("num_nodes")
        n = obj.num_nodes if n is None else n
        return _shaped(store["edge_index"], n, ew, bool(directed), name or "<data>")
    if hasattr(obj, "edge_index") and hasattr(obj, "num_nodes"):  # other Data-like objects
        ew = edge_weight if edge_weight is not None else getattr(obj, "edge_weight", None)
        n = obj.num_nodes if num_nodes is None else num_nodes
        return _shaped(obj.edge_index, n, ew, bool(directed), name or "<data>")
    if isinstance(obj, tuple) and 2 <= len(obj) <= 3 and num_nodes is None:
        ew = obj[2] if len(obj) == 3 else edge_weight
        return _shaped(obj[0], obj[1], ew, bool(directed), name or "<graph>")
    if num_nodes is None:
        raise StructureError(
            "num_nodes is required when the graph is given as a bare edge_index "
            "(pass num_nodes, or a (edge_index, num_nodes) tuple)",
            name=name or "<graph>",
        )
    return _shaped(obj, num_nodes, edge_weight, bool(directed), name or "<graph>")


def _array(x: Any, what: str, name: str) -> np.ndarray:
    """``x`` as a numpy array, or :class:`StructureError` (ragged nested lists, odd objects)."""
    try:
        return _to_numpy(x)
    except (TypeError, ValueError) as e:
        raise StructureError(f"{what} is not a rectangular numeric array ({e})", name=name) from None


def _shaped(edge_index, num_nodes, edge_weight, directed: bool, name: str) -> Graph:
    if num_nodes is None:
        raise StructureError("num_nodes is missing", name=name)
    n = check_int(num_nodes, "num_nodes", 0, error=StructureError, input_name=name)
    ei = _array(edge_index, "edge_index", name)
    if ei.size == 0:
        ei = np.zeros((2, 0), dtype=np.int64)
    elif ei.ndim != 2 or ei.shape[0] != 2:
        raise StructureError(f"edge_index must have shape (2, E), got {ei.shape}", name=name)
    if ei.dtype != np.int64:
        if not np.issubdtype(ei.dtype, np.integer):
            raise StructureError(f"edge_index must hold integers, got dtype {ei.dtype}", name=name)
        ei = ei.astype(np.int64)
    ew = None
    if edge_weight is not None:
        ew = _array(edge_weight, "edge_weight", name)
        if ew.dtype.kind not in "biuf":  # complex, strings, objects: no silent cast to float
            raise StructureError(f"edge_weight must hold real numbers, got dtype {ew.dtype}", name=name)
        ew = np.asarray(ew, dtype=np.float64).reshape(-1)
        if ew.shape[0] != ei.shape[1]:
            raise StructureError(f"edge_weight has {ew.shape[0]} entries for {ei.shape[1]} edges", name=name)
    return Graph(ei, n, ew, directed, name)


def _check_values(batch: GraphBatch, scale_free: bool = False) -> None:
    """Every edge endpoint in ``0..N-1`` and every weight finite and ``>= 0`` (all graphs at once);
    with ``scale_free``, graphs of the batch whose largest weight is out of range are replaced by
    their :func:`scale_free_weights` (the same edges: its columns still hold)."""
    counts, ei, nodes = batch.counts, batch.edge_index, batch.sizes
    if ei.shape[1]:
        src, dst = ei  # contiguous rows: elementwise passes, the per-edge position only on failure
        top = np.maximum(src, dst)
        has = counts > 0  # the largest endpoint of each graph with edges against its node count
        starts = (np.cumsum(counts) - counts)[has]
        if ei.min() < 0 or (np.maximum.reduceat(top, starts) >= nodes[has]).any():
            nn = np.repeat(nodes, counts)
            bad = np.flatnonzero((np.minimum(src, dst) < 0) | (np.maximum(src, dst) >= nn))
            gi, e = _locate(counts, int(bad[0]))
            g = batch[gi]
            raise StructureError(
                f"edge ({g.edge_index[0, e]}, {g.edge_index[1, e]}) refers to a node outside 0..{g.num_nodes - 1}",
                name=g.name,
                position=f"edge {e}",
            )
    gs = batch.graphs
    if gs is None or not batch.weighted:
        return
    weighted = [i for i, g in enumerate(gs) if g.edge_weight is not None and g.edge_weight.size]
    if not weighted:
        return
    ws = [edge_weights(gs[i]) for i in weighted]
    w = np.concatenate(ws) if len(ws) > 1 else ws[0]
    if not (np.isfinite(w).all() and w.min() >= 0):  # then name the first bad edge of the first bad graph
        for i, wi in zip(weighted, ws):
            raise_at_first(
                ~np.isfinite(wi) | (wi < 0),
                partial(_bad_weight_message, wi),
                name=gs[i].name,
                where="edge",
            )
    if scale_free:
        sizes = np.fromiter((x.size for x in ws), dtype=np.int64, count=len(ws))
        tops = np.maximum.reduceat(w, np.cumsum(sizes) - sizes)
        lo, hi = 2.0**-SCALE_EXPONENT, 2.0**SCALE_EXPONENT
        for j in np.flatnonzero((tops > hi) | ((tops < lo) & (tops > 0))):
            gs[weighted[j]] = scale_free_weights(gs[weighted[j]])


def _bad_weight_message(weights: np.ndarray, e: int) -> str:
    return f"edge weight {weights[e]} is not a finite non-negative number"


SCALE_EXPONENT = 60
"""Weights are rescaled (:func:`scale_free_weights`) when the largest is above ``2**60`` (~1.2e18)
or below ``2**-60``: far inside float32's range, so that degree sums of float32 RWSE neither
overflow nor lose tiny weights, and no ordinary input is affected."""


def scale_free_weights(g: Graph) -> Graph:
    """``g`` with its weights divided by a power of 4 close to the largest weight, when that one
    is outside ``[2**-SCALE_EXPONENT, 2**SCALE_EXPONENT]``; else ``g`` itself.

    For the families whose output does not change when every weight is multiplied by one
    constant (RWSE, the normalised and magnetic Laplacian PEs): extreme weights (``1e300``,
    ``1e-320``, ``1e39`` in float32) would otherwise overflow or underflow in the degree sums.
    The divisor is an even power of two, so the rescaled computation rounds exactly as the
    unscaled one wherever that one stays in range (scaling by ``4**e`` is exact, and so is
    ``sqrt`` of it); a positive weight never becomes 0 (at worst the smallest normal float64).

    Examples
    --------
    >>> g = Graph(np.array([[0, 1], [1, 0]]), 2, np.array([2.0**1000, 3 * 2.0**1000]))
    >>> scale_free_weights(g).edge_weight.tolist()  # divided by 4**501, exactly
    [0.25, 0.75]
    >>> g2 = Graph(np.array([[0], [1]]), 2, np.array([2.5]))
    >>> scale_free_weights(g2) is g2
    True
    """
    w = g.edge_weight
    if w is None or w.size == 0:
        return g
    top = float(w.max())
    if top <= 0 or 2.0**-SCALE_EXPONENT <= top <= 2.0**SCALE_EXPONENT:
        return g
    e = int(np.frexp(top)[1]) // 2  # top = m * 2**(2e + r), r in {0, 1}, 0.5 <= m < 1
    scaled = np.ldexp(w, -2 * e)  # exact: a power-of-two scale (up to underflow of tiny weights)
    lost = (scaled == 0) & (w > 0)
    if lost.any():
        scaled[lost] = np.finfo(np.float64).tiny
    return Graph(g.edge_index, g.num_nodes, scaled, g.directed, g.name)


def check_float_dtype(dtype: Any, name: str = "dtype") -> np.dtype:
    """``dtype`` as a numpy dtype after checking it is float32 or float64, else :class:`SpecError`.

    The graph PEs compute in that precision (LAPACK, BLAS): an integer dtype would truncate every
    probability and eigenvector entry to 0, float16 has no LAPACK.

    Examples
    --------
    >>> check_float_dtype(np.float32)
    dtype('float32')
    >>> check_float_dtype(np.int64)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: dtype must be numpy float32 or float64, got <class 'numpy.int64'>
    """
    try:
        dt = None if dtype is None else np.dtype(dtype)  # (np.dtype(None) would be float64)
    except TypeError:
        dt = None
    if dt is None or dt.type not in (np.float32, np.float64):
        raise SpecError(f"{name} must be numpy float32 or float64, got {dtype!r}")
    return dt


def _locate(counts: np.ndarray, flat: int) -> tuple[int, int]:
    ends = np.cumsum(counts)
    gi = int(np.searchsorted(ends, flat, side="right"))
    return gi, flat - int(ends[gi] - counts[gi])


# ---------------------------------------------------------------- adjacency
def edge_weights(g: Graph) -> np.ndarray:
    return np.ones(g.edge_index.shape[1]) if g.edge_weight is None else g.edge_weight


def adjacency(g: Graph, *, symmetrize: bool = True, self_loops: bool = False) -> sp.csr_matrix:
    """Sparse ``A`` (duplicates summed, zero weights dropped), symmetrised by ``max(A, Aᵀ)``."""
    n = g.num_nodes
    row, col = g.edge_index
    w = edge_weights(g)
    keep = w > 0
    if not self_loops:
        keep &= row != col
    A = sp.csr_matrix((w[keep], (row[keep], col[keep])), shape=(n, n))
    A.sum_duplicates()
    if symmetrize:
        A = A.maximum(A.T).tocsr()
    return A


def packed_edges(graphs: GraphBatch | Sequence[Graph], *, self_loops: bool = False):
    """The edges of all graphs concatenated, in one pass: ``(row, col, weight, gid)``.

    Zero-weight edges (and self-loops unless ``self_loops``) are dropped; ``gid`` is each
    edge's graph index; ``weight`` is float64 (ones for unweighted graphs). A :class:`GraphBatch`
    gives its columns; other sequences are concatenated here."""
    batch = graphs if isinstance(graphs, GraphBatch) else GraphBatch.of(list(graphs))
    ei = batch.edge_index
    if ei.shape[1] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), empty
    gid = np.repeat(np.arange(len(batch)), batch.counts)
    if not batch.weighted:
        keep = None if self_loops else ei[0] != ei[1]
        if keep is not None and keep.all():  # no self-loop to drop (the usual case): no gathers
            keep = None
        w = np.ones(ei.shape[1] if keep is None else int(keep.sum()))
    else:
        w = np.concatenate([edge_weights(g) for g in batch])
        keep = w > 0
        if not self_loops:
            keep &= ei[0] != ei[1]
        w = w[keep]
    if keep is None:
        return ei[0], ei[1], w, gid
    return ei[0, keep], ei[1, keep], w, gid[keep]


def edge_ptr(gid: np.ndarray, B: int) -> np.ndarray:
    """``(B + 1,)`` int64 offsets of each graph's edges in :func:`packed_edges`' arrays (``gid`` ascending).

    Examples
    --------
    >>> edge_ptr(np.array([0, 0, 2]), 3).tolist()
    [0, 2, 2, 3]
    """
    eptr = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(np.bincount(gid, minlength=B), out=eptr[1:])
    return eptr


def bucket_edges(
    groups: dict[int, np.ndarray], num_graphs: int, row: np.ndarray, col: np.ndarray, gid: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each size group ``S → idx`` (see :func:`group_by_size`), the edges of its graphs as
    indices into the packed edge arrays and their flat positions in the group's zero-padded
    ``(len(idx), S, S)`` adjacency: ``[(edge_sel, flat), ...]`` in ``groups`` order (one sort
    for all groups; ``np.bincount(flat, w[edge_sel])`` is then the dense adjacency)."""
    key = np.full(num_graphs, -1, dtype=np.int64)
    pos = np.zeros(num_graphs, dtype=np.int64)
    size = np.zeros(num_graphs, dtype=np.int64)
    for b, (S, idx) in enumerate(groups.items()):
        key[idx], pos[idx], size[idx] = b, np.arange(len(idx)), S
    eb = key[gid]
    Se = size[gid]
    flat = (pos[gid] * Se + row) * Se + col
    # the same stable order; on 16-bit keys numpy's stable sort is a radix sort (~3x faster)
    order = np.argsort(eb.astype(np.int16) if len(groups) < 2**15 else eb, kind="stable")
    bounds = np.searchsorted(eb[order], np.arange(len(groups) + 1))
    out = []
    for b in range(len(groups)):
        sel = order[bounds[b] : bounds[b + 1]]
        out.append((sel, flat[sel]))
    return out


def auto_workers(workers: int | None, num_graphs: int, num_groups: int) -> int:
    """``workers`` if given, else one per available core (at most 4) for batches big enough to
    gain from it (>= 256 graphs in >= 2 size groups), else 1."""
    if workers is not None:
        return check_int(workers, "workers", 1)
    if num_graphs < 256 or num_groups < 2:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def group_by_size(sizes: np.ndarray, bucket: int = 1) -> dict[int, np.ndarray]:
    """Graph indices grouped by ``num_nodes`` rounded up to a multiple of ``bucket``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    padded = -(-sizes // bucket) * bucket
    order = np.argsort(padded, kind="stable")
    keys, starts = np.unique(padded[order], return_index=True)
    groups = np.split(order, starts[1:])
    return {int(k): idx for k, idx in zip(keys, groups)}


def scatter_rows(out: np.ndarray, ptr: np.ndarray, idx: np.ndarray, n: np.ndarray, V: np.ndarray) -> None:
    """``out[ptr[g] : ptr[g] + n_b] = V[b, :n_b]`` for every graph ``g = idx[b]``: the real rows
    of a size-``S`` padded batch ``V`` ``(B, S, …)`` into the concatenated (PyG ``Batch``) layout."""
    S = V.shape[1]
    if n.size and n.min() == S:  # no padding (every group when bucket=1): one block of S rows per graph
        out[(ptr[idx][:, None] + np.arange(S)).ravel()] = V.reshape(len(idx) * S, *V.shape[2:])
        return
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    src = np.repeat(np.arange(len(idx)) * S, n) + within
    dst = np.repeat(ptr[idx], n) + within
    out[dst] = V.reshape(len(idx) * S, *V.shape[2:])[src]


# ---------------------------------------------------------------- sign / phase
TIE_RTOL = 1e-6


def canonical_phase(U: np.ndarray) -> np.ndarray:
    """Fix the sign (real) or phase (complex) of every eigenvector column of ``U`` (``(..., N, k)``).

    Convention: the **largest-magnitude entry** of each eigenvector is made real and positive;
    entries within a relative ``1e-6`` of the maximum count as tied and the lowest node index
    wins. For real vectors this is a sign flip, for complex vectors a global phase
    ``u ← u · conj(u_j)/|u_j|``. All-zero columns are left unchanged.
    """
    if U.shape[-2] == 0:
        return U
    if not np.iscomplexobj(U):
        return U * _pivot_signs(np.abs(U), U, axis=-2)
    mag = np.abs(U)
    top = mag.max(axis=-2, keepdims=True)
    tied = mag >= top * (1 - TIE_RTOL)
    j = np.argmax(tied, axis=-2)[..., None, :]  # first tied index
    pivot = np.take_along_axis(U, j, axis=-2)
    pmag = np.abs(pivot)
    factor = np.where(pmag > 0, np.conj(pivot) / np.where(pmag > 0, pmag, 1), 1)
    return U * factor


def canonical_sign_rows(Vt: np.ndarray) -> np.ndarray:
    """:func:`canonical_phase` of real eigenvectors stored as **rows**: ``Vt`` ``(..., k, N)``.

    The same convention and the same values as ``canonical_phase(Vt.swapaxes(-1, -2))``
    (transposed back); on C-contiguous rows the reductions run along the last axis, which is
    what makes it the fast path of the batched LapPE.

    Examples
    --------
    >>> Vt = np.array([[0.6, -0.8], [-0.6, 0.6], [0.0, 0.0]])
    >>> canonical_sign_rows(Vt).tolist()  # largest entry positive; a tie goes to the first index
    [[-0.6, 0.8], [0.6, -0.6], [0.0, 0.0]]
    >>> np.array_equal(canonical_sign_rows(Vt), canonical_phase(Vt.T).T)
    True
    """
    if Vt.shape[-1] == 0:
        return Vt
    return Vt * _pivot_signs(np.abs(Vt), Vt, axis=-1)


def _pivot_signs(mag: np.ndarray, U: np.ndarray, axis: int) -> np.ndarray:
    """``±1`` (``U``'s dtype) per vector along ``axis``: the sign of its first entry within ``TIE_RTOL``
    of the largest magnitude (``+1`` for a zero or NaN pivot), i.e. ``conj(p)/|p|`` of real ``p``."""
    top = mag.max(axis=axis, keepdims=True)
    j = np.expand_dims(np.argmax(mag >= top * (1 - TIE_RTOL), axis=axis), axis)
    pivot = np.take_along_axis(U, j, axis=axis)
    one = U.dtype.type(1)
    return np.where(pivot < 0, -one, one)
