r"""Random-walk structural encoding (RWSE).

With ``A`` the weighted adjacency **including self-loops** (as PyG) and ``P = D^{-1} A`` the
random-walk transition matrix (a row of a node without out-edges is zero),

.. math::  \mathrm{RWSE}(i) = \big([P]_{ii}, [P^2]_{ii}, \dots, [P^K]_{ii}\big),

the probability of being back at ``i`` after ``k`` steps. This equals PyG's ``AddRandomWalkPE(K)``
on unweighted simple graphs. Differences, by design: duplicate edges are summed (PyG sums
them into the degree but keeps only one in ``A``), and on weighted graphs ``P_ij = w_ij / d_i``
(PyG puts ``1 / max(d_i, 1)`` on every edge, ignoring the edge's own weight, so its rows do
not sum to 1).

``symmetrize=True`` (default; also what a non-directed :class:`Structure` gets) uses
``A_s = max(A, Aᵀ)``, which leaves a graph stored with both edge directions unchanged;
``symmetrize=False`` walks the edges as given (``P = D_out^{-1} A``).

Computation: only ``O(√K)`` matrix products (baby-step/giant-step), since
``[P^{a+b}]_{ii} = Σ_m [P^a]_{im} [P^b]_{mi}`` is an elementwise product (see ``_dense_rwse``;
the sparse path forms the rows of ``P, …, P^{⌈K/2⌉}`` one block of nodes at a time).
Many small graphs: dense batched products per size group; large graphs (``N > dense_max``):
sparse products, never densified.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from ..exceptions import LimitError
from ..native import native_module
from ..structure import Structure
from ._args import MAX_K, check_int
from ._graph_utils import (
    Graph,
    adjacency,
    as_graph,
    as_graphs,
    auto_workers,
    batch_output,
    check_float_dtype,
    edge_ptr,
    output_like,
    packed_edges,
    scale_free_weights,
    scatter_rows,
    to_output,
)
from ._schedule import run_dense_groups
from ._torch_dense import resolve_device, rwse_group_torch

__all__ = ["random_walk_pe", "random_walk_pe_batch", "rw_coords", "DENSE_MAX"]

DENSE_MAX = 2000
RW_MAX_WORK = 2**31
"""Default cap on the sparse multiply-adds of one large graph's RWSE (~2.1e9, well under a minute of
scipy products; a 1M-node grid with ``K = 16`` needs ~8e8); past it
:class:`~structpos.exceptions.LimitError` (``max_work``)."""
RW_BLOCK_ENTRIES = 2**26
"""Nonzeros one block of walk rows may hold (~0.8 GB); a larger block is split."""
SPARSE_FIRST = 256
"""Graphs of ``SPARSE_FIRST < N <= dense_max`` nodes try the sparse products first, under a work
budget worth :data:`SPARSE_SHARE` of one dense run (:func:`_sparse_if_cheaper`): sparse wins by the
size of the walks' neighbourhoods, not by ``N``. Measured on one thread (``K = 16``): 12 Python
syntax trees of 1,045–1,986 nodes 2.87 s dense against 0.21 s sparse (13.5×); grids of
400–1,444 nodes 1.5–21× faster sparse; random graphs of mean degree 4 and 400–1,500 nodes 2–7×
*slower* sparse, which the budget turns back to dense."""
SPARSE_SHARE = 0.25
"""The sparse try may spend this share of a dense run's estimated time: it is kept only where it is
about 4× faster (the estimates below vary ±40 % between graphs), and a graph that goes back to
dense pays at most ~25 % more."""
SPARSE_NS_PER_WORK = 17
"""Seconds (in ns) of one sparse multiply-add of :func:`_sparse_rwse` (measured 9–22 ns)."""
DENSE_PS_PER_CUBE = 14
"""Seconds (in ps) of one ``N × N`` matmul of :func:`_dense_rwse` per ``N³`` (its float32 default; a
whole ``K = 16`` run, five matmuls, measured 62–87 ps per ``N³``)."""
NATIVE_MAX = 256
NATIVE_MIN_GRAPHS = 32
"""Batches of at least ``NATIVE_MIN_GRAPHS`` graphs take the compiled kernel (``native/rwse.c``,
when built) for their graphs of up to ``NATIVE_MAX`` nodes. It sums in another order than BLAS
and works in float64 before rounding to ``dtype``, so its values agree with the BLAS path to a
few units in the last place, not bit for bit; single graphs and small batches (what
``structpos encode`` computes record by record) keep the BLAS path and its exact bytes."""


def random_walk_pe(
    edge_index: Any,
    num_nodes: int | None = None,
    walk_length: int = 16,
    edge_weight: Any = None,
    *,
    symmetrize: bool = True,
    dtype=np.float32,
    dense_max: int = DENSE_MAX,
    max_work: int | None = RW_MAX_WORK,
):
    """RWSE of one graph: ``(N, walk_length)`` return probabilities (see the module docstring).

    Parameters
    ----------
    edge_index : array or tensor, shape (2, E)
        The edges; may also be a Structure, a PyG ``Data`` or an ``(edge_index, num_nodes)`` tuple.
    num_nodes : int, optional
        Node count; required with a bare ``edge_index`` (else StructureError), taken from the
        graph for the other inputs.
    walk_length : int
        ``K``, the number of steps (columns), ``1 <= K <= MAX_K`` (4096).
    edge_weight : array or tensor, shape (E,), optional
        Edge weights (``P_ij = w_ij / d_i``); default 1. Multiplying every weight by one
        constant does not change ``P``; extreme scales are rescaled first
        (:func:`._graph_utils.scale_free_weights`).
    symmetrize : bool
        Walk ``max(A, Aᵀ)`` (default) or the edges as given.
    dtype : numpy dtype
        Computed and returned in this precision: ``np.float32`` (as PyG) or ``np.float64``.
    dense_max : int
        Graphs above this many nodes use sparse products; graphs of ``SPARSE_FIRST`` (256) to
        ``dense_max`` nodes use them too when they cost less than dense matrix powers (trees, meshes:
        :data:`SPARSE_FIRST`), computed in float64 then rounded to ``dtype``.
    max_work : int or None
        Cap on those sparse products' multiply-adds (default ``RW_MAX_WORK`` = 2**31, well under a
        minute; ``None``: no cap). Walks that reach huge neighbourhoods (a hub with 100k leaves and
        ``K = 8`` needs ~3e10) raise LimitError instead of running for hours, before any product
        when the first step alone is over the cap (as for that hub).

    Returns
    -------
    ndarray or torch.Tensor, shape (N, walk_length)
        ``[P^k]_ii`` for ``k = 1..K``; torch input gives torch output.

    Raises
    ------
    SpecError
        ``walk_length`` not an integer in ``[1, MAX_K]``, ``dtype`` not float32/float64,
        ``dense_max`` not an integer ``>= 0``.
    StructureError
        Invalid edges or weights, or ``num_nodes`` missing or not an integer.
    LimitError
        The sparse path would exceed ``max_work`` (``limit="max_work"``).

    Examples
    --------
    On a triangle the return probability after ``k`` steps is ``(1 + 2 (-1/2)^k) / 3``:

    >>> import numpy as np
    >>> ei = np.array([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]])
    >>> pe = random_walk_pe(ei, 3, walk_length=4, dtype=np.float64)
    >>> np.allclose(pe, [(1 + 2 * (-0.5) ** k) / 3 for k in range(1, 5)])
    True
    """
    g = scale_free_weights(as_graph(edge_index, num_nodes, edge_weight))
    K = _check_len(walk_length)
    dtype = check_float_dtype(dtype)
    dense_max = check_int(dense_max, "dense_max", 0)
    if max_work is not None:
        max_work = check_int(max_work, "max_work", 0)
    if g.num_nodes <= dense_max:
        pe, _ = random_walk_pe_batch([g], K, symmetrize=symmetrize, dtype=dtype, as_torch=False)
    else:
        pe = _sparse_rwse(g, K, symmetrize, max_work=max_work).astype(dtype, copy=False)
    like = output_like(edge_index)
    return to_output(pe, like)


def random_walk_pe_batch(
    graphs: Sequence[Any],
    walk_length: int = 16,
    *,
    symmetrize: bool = True,
    dtype=np.float32,
    bucket: int = 1,
    dense_max: int = DENSE_MAX,
    as_torch: bool | None = None,
    workers: int | None = None,
    device: Any = None,
    max_work: int | None = RW_MAX_WORK,
):
    """RWSE of many graphs: ``(pe (ΣN, K), ptr (B+1,))``, graph ``g`` in rows ``ptr[g]:ptr[g+1]``.

    Graphs are grouped by size (rounded up to ``bucket``; zero padding does not change the
    walk) and multiplied as dense batches in ``dtype``; larger graphs use sparse products, and so
    do graphs above ``SPARSE_FIRST`` nodes whose walks stay local (:data:`SPARSE_FIRST`).
    ``workers``: threads multiplying size groups concurrently (BLAS releases the GIL); ``None``
    uses one per available core (at most 4) for batches of >= 256 graphs. The result does not
    depend on it.

    Parameters
    ----------
    graphs : sequence
        Graphs in any form :func:`random_walk_pe` accepts.
    walk_length, symmetrize, dtype, dense_max
        As in :func:`random_walk_pe`.
    bucket : int
        Size rounding of the dense groups (an integer ``>= 1``).
    as_torch : bool, optional
        Torch output (default: when the input is torch).
    workers : int, optional
        Threads for the size groups.
    device : str or torch.device, optional
        ``None`` (default): numpy. A torch device (``"cuda"``, ``"cpu"``, …): each size group's
        matrix powers are formed there (:mod:`._torch_dense`), one group at a time on CUDA; the
        output is the same (equal up to rounding). Graphs above ``dense_max`` still use the CPU
        sparse path.
    max_work : int or None
        As in :func:`random_walk_pe`, per graph above ``dense_max``.

    Returns
    -------
    (pe, ptr)
        ``pe (ΣN, K)`` and the row offsets ``ptr (B+1,)``.

    Examples
    --------
    Equal to :func:`random_walk_pe` graph by graph; one edge returns with probability 1 after
    every even number of steps:

    >>> import numpy as np
    >>> tri = (np.array([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]), 3)
    >>> edge = (np.array([[0, 1], [1, 0]]), 2)
    >>> pe, ptr = random_walk_pe_batch([tri, edge], 4, dtype=np.float64)
    >>> ptr.tolist(), pe[3].tolist()
    ([0, 3, 5], [0.0, 1.0, 0.0, 1.0])
    >>> np.array_equal(pe[:3], random_walk_pe(*tri, walk_length=4, dtype=np.float64))
    True
    """
    K = _check_len(walk_length)
    dtype = check_float_dtype(dtype)
    bucket = check_int(bucket, "bucket", 1)
    dense_max = check_int(dense_max, "dense_max", 0)
    if max_work is not None:
        max_work = check_int(max_work, "max_work", 0)
    auto_workers(workers, 0, 1)  # checks ``workers`` whichever path runs
    dev = resolve_device(device)
    if dev is not None and dev.type != "cpu":
        workers = 1  # one device queue: no gain from threads
    gs = as_graphs(graphs, scale_free=True)
    sizes = gs.sizes
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    nat = native_module("rwse") if dev is None and len(gs) >= NATIVE_MIN_GRAPHS else None
    if nat is not None:  # graphs up to `cap` nodes in one compiled pass (same values up to rounding)
        cap = _native_cap(K, symmetrize, dense_max)
        pe64 = np.zeros((int(ptr[-1]), K))
        row, col, weight, gid = packed_edges(gs, self_loops=True)
        c = np.ascontiguousarray
        nat.rwse(c(row), c(col), c(weight), edge_ptr(gid, len(gs)), ptr, pe64, K, symmetrize, cap)
        pe = pe64.astype(dtype, copy=False)
        small = np.flatnonzero((sizes <= dense_max) & (sizes > cap))
    else:
        pe = np.zeros((int(ptr[-1]), K), dtype=dtype)
        small = np.flatnonzero(sizes <= dense_max)
    if dev is None and small.size:  # medium graphs: the sparse products when they cost less
        medium = small[sizes[small] > SPARSE_FIRST]
        done = [i for i in medium if _sparse_if_cheaper(gs[int(i)], K, symmetrize, max_work, pe[ptr[i] : ptr[i + 1]])]
        small = np.setdiff1d(small, np.asarray(done, dtype=np.int64), assume_unique=True)
    sub = gs.take(small)

    def run(local, A):
        idx = small[local]
        A = A.astype(dtype, copy=False)  # first: rounding is monotone, so max(A, Aᵀ) is the same
        if symmetrize:
            A = np.maximum(A, A.transpose(0, 2, 1))
        if dev is None:
            diag = _dense_rwse(A, K, symmetrize)
        else:
            diag = rwse_group_torch(A, K, symmetrize, dtype, dev)
        scatter_rows(pe, ptr, idx, sizes[idx], diag)  # disjoint rows: safe from threads

    if small.size:
        run_dense_groups(sizes[small], packed_edges(sub, self_loops=True), run, bucket=bucket, workers=workers)
    for i in np.flatnonzero(sizes > dense_max):
        pe[ptr[i] : ptr[i + 1]] = _sparse_rwse(gs[i], K, symmetrize, max_work=max_work)
    return batch_output((pe, ptr), gs, as_torch)


def rw_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``rw[:K]`` (default 16): ``rw (N, K)``; undirected unless ``directed``.

    Parameters
    ----------
    structure : Structure
        Any structure; its edges (tree edges for trees) are walked.
    arg : str, optional
        ``K`` as text.

    Returns
    -------
    dict
        ``{"rw": (N, K) float32}``.

    Examples
    --------
    A JSON array of two numbers is a star around the array node: after two steps the centre
    is back with probability 1, a leaf with probability 1/2 (the centre picks one of two).

    >>> import structpos
    >>> s = structpos.parse("[1, 2]", kind="json")
    >>> rw_coords(s, "2")["rw"].round(6).tolist()
    [[0.0, 1.0], [0.0, 0.5], [0.0, 0.5]]
    """
    K = int(arg) if arg else 16
    pe = random_walk_pe(as_graph(structure), walk_length=K, symmetrize=not structure.directed)
    return {"rw": pe}


# ---------------------------------------------------------------- kernels
def _native_cap(K: int, symmetrize: bool, dense_max: int) -> int:
    """Largest graph the native kernel takes: ``NATIVE_MAX``, ``dense_max``, and its workspace of
    ``⌈K/2⌉`` (symmetric) or ``K`` (directed) ``N × N`` float64 matrices within 2**24 doubles."""
    mats = (K + 1) // 2 if symmetrize else K
    return min(NATIVE_MAX, dense_max, math.isqrt((1 << 24) // mats))


def _check_len(K) -> int:
    """``walk_length`` checked to be an integer in ``[1, MAX_K]`` (it sizes the ``(N, K)`` output)."""
    return check_int(K, "walk_length", 1, MAX_K)


def _dense_matmuls(K: int) -> int:
    """The ``N × N`` matmuls :func:`_dense_rwse` takes for ``K`` steps: ``s - 1`` baby steps and one
    per giant step after the first (``s = ⌈√K⌉``).

    Examples
    --------
    >>> [_dense_matmuls(K) for K in (1, 4, 16, 64)]
    [0, 1, 5, 13]
    """
    s = max(1, int(np.ceil(np.sqrt(K))))  # as in _dense_rwse
    return (s - 1) + max(0, len(range(s, K, s)) - 1)


def _dense_rwse(A: np.ndarray, K: int, symmetric: bool) -> np.ndarray:
    """``(B, S, K)`` diagonals of ``P^k`` for a batch of dense adjacencies ``(B, S, S)``.

    Baby-step/giant-step: with ``s = ⌈√K⌉`` only ``M, M², …, M^s`` and ``M^{2s}, M^{3s}, …``
    are formed (about ``2√K`` matmuls), and ``[M^{a+b}]_ii = Σ_m [M^a]_im [M^b]_mi``. For
    symmetric ``A`` the walk uses the symmetric ``M = D^{-1/2} A D^{-1/2}`` (same diagonal
    powers as ``P``), so ``[M^b]_mi = [M^b]_im`` is read row-wise without a transpose."""
    deg = A.sum(-1)
    if symmetric:
        dinv = np.where(deg > 0, 1 / np.sqrt(np.where(deg > 0, deg, 1)), 0)
        M = dinv[:, :, None] * A * dinv[:, None, :]
    else:
        M = A / np.where(deg > 0, deg, 1)[:, :, None]
    s = max(1, int(np.ceil(np.sqrt(K))))
    B, S, _ = M.shape
    babies = np.empty((B, s, S, S), dtype=M.dtype)  # M, M², …, M^s
    babies[:, 0] = M
    for j in range(1, s):
        np.matmul(babies[:, j - 1], M, out=babies[:, j])
    out = np.empty((B, S, K), dtype=M.dtype)  # s <= K
    out[:, :, :s] = babies.diagonal(axis1=-2, axis2=-1).transpose(0, 2, 1)  # k = 1..s
    # second factor [M^{r+1}]_{mi} with m contiguous: for symmetric M the rows of the powers
    # themselves ([M^r]_mi = [M^r]_im, no copy), else the transposed powers laid out once
    rows = babies if symmetric else np.ascontiguousarray(babies.transpose(0, 1, 3, 2))
    giant = babies[:, s - 1]
    for g in range(s, K, s):  # k = g+1 .. g+s from the giant step M^g, g = s, 2s, ...
        if g > s:
            giant = giant @ babies[:, s - 1]
        r = min(s, K - g)
        out[:, :, g : g + r] = np.einsum("bim,brim->bir", giant, rows[:, :r])
    return out


def _sparse_rwse(
    g: Graph,
    K: int,
    symmetrize: bool,
    *,
    block_rows: int = 2048,
    max_work: int | None = RW_MAX_WORK,
    block_entries: int = RW_BLOCK_ENTRIES,
) -> np.ndarray:
    """RWSE of a large graph by sparse products, ``block_rows`` nodes at a time.

    For a block ``R`` of nodes, the rows ``X_j = E_R M^j`` (``j = 1..h``, ``h = ⌈K/2⌉``) are
    formed by sparse products; ``[M^j]_ii`` are their diagonal entries and
    ``[M^{h+j}]_ii = Σ_m [M^h]_im [M^j]_mi`` a row-wise dot product with the rows of ``(Mᵀ)^j``
    (for the symmetric ``M = D^{-1/2} A D^{-1/2}`` of an undirected walk these are the rows of
    ``M^j`` themselves, and its diagonal powers equal those of ``P``). Memory is bounded by one
    block's rows of ``M^h``, not the whole power; time grows with the size of ``h``-hop
    neighbourhoods (small on meshes, road and code graphs; large on expanders and around hubs).

    **Work bound.** The multiply-adds of every product (``Σ`` over the nonzeros ``(r, m)`` of
    ``X_j`` of the row length of ``M``'s row ``m``: exact, counted before the product) add up
    to the work; past ``max_work`` a :class:`~structpos.exceptions.LimitError` is raised
    before the next product instead of running for hours (a star with 100k leaves needs
    ``~3·10^10`` for ``K = 8``). The work of the first product over all nodes,
    ``Σ_m len(row m)²``, is a lower bound of the whole, checked before anything runs. A block
    whose rows would hold more than ``block_entries`` nonzeros is split in two (memory).
    """
    A = adjacency(g, symmetrize=symmetrize, self_loops=True)
    deg = np.asarray(A.sum(axis=1)).ravel()
    if symmetrize:
        dinv = np.divide(1.0, np.sqrt(deg), out=np.zeros_like(deg), where=deg > 0)
        M = (sp.diags(dinv) @ A @ sp.diags(dinv)).tocsr()
        Mt = M
    else:
        inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
        M = (sp.diags(inv) @ A).tocsr()
        Mt = M.T.tocsr()
    n = g.num_nodes
    h = (K + 1) // 2
    out = np.zeros((n, K))
    budget = _WorkBudget(max_work, g.name, K)
    lengths = np.diff(M.indptr)
    lengths_t = lengths if symmetrize else np.diff(Mt.indptr)
    if h >= 2:  # the first product over all nodes: a lower bound of the total
        budget.check(int(lengths[M.indices].sum(dtype=np.int64)), spend=False)
    pending = [(start, min(n, start + block_rows)) for start in range(0, n, block_rows)][::-1]
    while pending:
        start, stop = pending.pop()
        rows = np.arange(start, stop)
        powers = _block_powers(M, Mt, rows, h, K - h - 1, lengths, lengths_t, budget, block_entries, symmetrize)
        if powers is None:  # too many nonzeros for one block: its halves, in order
            mid = (start + stop) // 2
            pending += [(mid, stop), (start, mid)]
            continue
        X, Y = powers
        local = np.arange(len(rows))
        for j in range(h):
            out[rows, j] = np.asarray(X[j][local, rows]).ravel()
        for j in range(1, K - h + 1):  # k = h + j
            out[rows, h + j - 1] = np.asarray(X[h - 1].multiply(Y[j - 1]).sum(axis=1)).ravel()
    return out


def _sparse_if_cheaper(g: Graph, K: int, symmetrize: bool, max_work: int | None, out: np.ndarray) -> bool:
    """Write ``g``'s sparse RWSE into ``out`` and return True when its work stays under what a
    share of a dense run is estimated to cost (:data:`SPARSE_SHARE`, :data:`DENSE_PS_PER_CUBE`,
    :data:`SPARSE_NS_PER_WORK`) and
    under ``max_work``; else False, with ``out`` untouched (the dense path then runs; the sparse
    layer checks each product's work before it, so at most that budget is spent)."""
    dense_ps = g.num_nodes**3 * DENSE_PS_PER_CUBE * _dense_matmuls(K)
    budget = int(dense_ps * SPARSE_SHARE / (1000 * SPARSE_NS_PER_WORK))
    try:
        pe = _sparse_rwse(g, K, symmetrize, max_work=budget if max_work is None else min(budget, max_work))
    except LimitError:
        return False
    out[:] = pe
    return True


class _WorkBudget:
    """The multiply-adds spent by :func:`_sparse_rwse`, against ``max_work`` (``None``: no cap)."""

    def __init__(self, max_work: int | None, name: str, K: int) -> None:
        self.max_work, self.name, self.K, self.spent = max_work, name, K, 0

    def check(self, work: int, spend: bool = True) -> None:
        total = self.spent + work
        if self.max_work is not None and total > self.max_work:
            raise LimitError(
                f"random-walk encoding with walk_length={self.K} needs more than {total:,} sparse "
                "multiply-adds (the walks' neighbourhoods are too large, e.g. around a high-degree hub); "
                "use a smaller walk_length",
                limit="max_work",
                value=total,
                maximum=self.max_work,
                name=self.name,
            )
        if spend:
            self.spent = total


def _block_powers(M, Mt, rows, h, extra, lengths, lengths_t, budget, block_entries, symmetrize):
    """``(X, Y)``: rows ``rows`` of ``M^1..M^h`` and of ``(Mᵀ)^1..(Mᵀ)^(extra+1)`` (``Y = X`` when
    symmetric), each product checked against ``budget`` first; ``None`` when the block would hold
    more than ``block_entries`` nonzeros (the caller splits it; one row raises instead)."""
    X = [M[rows]]
    held = X[0].nnz
    todo = [(X, M, lengths, h - 1)] if symmetrize else [(X, M, lengths, h - 1), ([Mt[rows]], Mt, lengths_t, extra)]
    for mats, op, lens, count in todo:
        if mats is not X:
            held += mats[0].nnz
        for _ in range(count):
            work = int(lens[mats[-1].indices].sum(dtype=np.int64))  # multiply-adds = bound on the new nonzeros
            if held + work > block_entries:
                if len(rows) > 1:
                    return None
                raise LimitError(
                    f"one node's {len(mats)}-step walk rows hold more than {block_entries:,} nonzeros",
                    limit="block_entries",
                    value=held + work,
                    maximum=block_entries,
                    name=budget.name,
                )
            budget.check(work)
            mats.append((mats[-1] @ op).tocsr())
            held += mats[-1].nnz
    return X, (X if symmetrize else todo[1][0])
