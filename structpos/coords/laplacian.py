r"""Laplacian eigenvector positional encoding (LapPE).

For an undirected graph with symmetrised weighted adjacency ``A`` (see :mod:`._graph_utils`;
self-loops are ignored, as in PyG) and degrees ``d_i = Σ_j A_ij``, the symmetric normalised
Laplacian is

.. math::  L = I - D^{-1/2} A D^{-1/2},\qquad L = U \Lambda U^\top,\ 0 = \lambda_1 \le \dots \le 2.

The PE of node ``i`` is ``(U_{i,c+1}, …, U_{i,c+k})``: the eigenvectors of the ``k`` smallest
**non-trivial** eigenvalues, together with those eigenvalues.

Conventions
-----------
* **Trivial modes.** Eigenvalue 0 has multiplicity ``c`` = number of connected components; all
  ``c`` zero modes (``D^{1/2} 1`` on each component) are dropped, not just one as PyG does.
  For a connected graph the result equals PyG's ``AddLaplacianEigenvectorPE`` (up to sign).
* **Isolated nodes** (no edge to another node) are components whose Laplacian row is zero
  (``L_ii = 0``, not PyG's ``1``): each contributes one trivial mode ``e_i``, which is dropped,
  so an isolated node's PE row is all zeros and it adds no spurious eigenvalue-1 mode.
* **Sign.** Each eigenvector is flipped so that its largest-magnitude entry is positive (ties
  within a relative 1e-6: lowest node index) — deterministic, unlike PyG's random flips.
  Inside a degenerate eigenspace the basis itself is arbitrary; compare subspaces (projectors).
* **Padding.** When fewer than ``k`` non-trivial modes exist (``N - c < k``; PyG raises when
  ``N <= k``), the missing columns are zero, their eigenvalues 0, and ``mask`` is False.

Solvers
-------
* Small graphs (``N <= dense_max``) and lists of graphs: dense ``eigh``, graphs grouped by size
  (rounded up to ``bucket``) and padded with a sentinel diagonal so padded modes sort last —
  never a block-diagonal union, which would mix graphs inside degenerate eigenspaces. Size
  groups are independent, so a thread pool decomposes them concurrently (``workers``;
  :func:`._schedule.run_dense_groups`).
* Large graphs: split into connected components; small components go through the dense
  batch, each large one through the checked sparse eigensolver layer
  (:func:`._sparse_eigen.smallest_eigenpairs`: grounded shift-invert, Lanczos or AMG-LOBPCG,
  picked per component, with residual, orthogonality and completeness checks and fallbacks);
  every component gives its ``k + 1`` smallest non-trivial modes and the ``k`` smallest over
  all components are kept. Nothing is densified.

Degeneracy
----------
``ambiguous`` (per mode, beside ``mask``) is True for kept modes whose eigenvalue equals the
first eigenvalue not kept (within ``1e-12 + 1e-6·λ``): the cut at ``k`` splits that eigenspace,
so those columns are an arbitrary part of it (see :mod:`._spectrum`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..exceptions import EigenConvergenceError
from ..native import native_module
from ..structure import Structure
from ._args import check_int
from ._eigen import batched_eigh
from ._graph_utils import (
    SENTINEL,
    TIE_RTOL,
    Graph,
    GraphBatch,
    adjacency,
    as_graph,
    as_graphs,
    canonical_phase,
    canonical_sign_rows,
    check_float_dtype,
    edge_ptr,
    packed_edges,
    scale_free_weights,
)
from ._schedule import run_dense_groups
from ._sparse_eigen import smallest_eigenpairs
from ._spectrum import (
    ComponentModes,
    LapBatch,
    ModeTable,
    SpectralPE,
    ambiguous_modes,
    check_k,
    components,
    edge_rayleigh_quotients,
    solve_batch,
    solve_graph,
)
from ._torch_dense import lap_group_torch, resolve_device
from .solver import SolverMethod, SolverOptions, solver_options

__all__ = ["laplacian_pe", "laplacian_pe_batch", "LapBatch", "lap_coords", "DENSE_MAX", "EigenConvergenceError"]

DENSE_MAX = SolverOptions().dense_max
"""Graphs (or components) with at most this many nodes use dense ``eigh``."""


# ---------------------------------------------------------------- public API
def laplacian_pe(
    edge_index: Any,
    num_nodes: int | None = None,
    k: int = 8,
    edge_weight: Any = None,
    *,
    method: SolverMethod | None = None,
    dense_max: int | None = None,
    tol: float | None = None,
    maxiter: int | None = None,
    progress: Callable[[str], None] | None = None,
    options: SolverOptions | None = None,
) -> SpectralPE:
    """LapPE of one graph: the ``k`` smallest non-trivial normalised-Laplacian eigenpairs.

    Parameters
    ----------
    edge_index : array or tensor (2, E), or a Structure / PyG Data / ``(edge_index, num_nodes)``
        The graph (symmetrised; see the module docstring).
    num_nodes : int, optional
        Required with a bare ``edge_index`` (else StructureError).
    k : int
        Modes per node, ``1 <= k <= MAX_K`` (4096).
    edge_weight : array (E,), optional
        Non-negative finite real weights (default 1). The PE does not change when every weight
        is multiplied by one constant, and extreme scales (``1e300``, ``1e-320``) are rescaled
        first (:func:`._graph_utils.scale_free_weights`).
    method : {"auto", "dense", "shift-invert", "lanczos", "amg", "lobpcg"}, optional
        ``"auto"`` (default): dense when ``N <= dense_max``, else per component the checked sparse
        layer picks (:mod:`._sparse_eigen`) and falls back when a method fails. A named sparse
        method is used for every large component, without fallback.
    dense_max : int, optional
        Graphs and components up to this size (default :data:`~.solver.DENSE_MAX` = 256) are
        decomposed densely.
    tol, maxiter : optional
        Convergence tolerance (default ``1e-10``) and iteration cap of the iterative methods.
    progress : callable, optional
        Receives a line of text per stage of each large solve (method, memory estimate, time).
    options : SolverOptions, optional
        These five settings in one value (:class:`.solver.SolverOptions`); a keyword that is
        given replaces its field.

    Returns
    -------
    SpectralPE
        Unpacks as ``pe (N, k), eigvals (k,), mask (k,)``; also ``.ambiguous (k,)`` and
        ``.report`` (:class:`._spectrum.SolveReport`). Torch input gives torch arrays.

    Raises
    ------
    StructureError
        Invalid edges or weights (names the edge), or ``num_nodes`` missing or not an integer.
    SpecError
        ``k`` or a solver setting out of range (names it).
    EigenConvergenceError
        A large component's eigenpairs did not converge (carries the residuals).

    Examples
    --------
    A 6-cycle: eigenvalues ``1 − cos(2πj/6)``, each doubly degenerate; ``k = 3`` cuts the
    second pair, so mode 3 is flagged ambiguous.

    >>> import numpy as np
    >>> i = np.arange(6)
    >>> ei = np.stack([np.r_[i, (i + 1) % 6], np.r_[(i + 1) % 6, i]])
    >>> pe, ev, mask = r = laplacian_pe(ei, 6, k=3)
    >>> np.round(ev, 6).tolist(), r.ambiguous.tolist()
    ([0.5, 0.5, 1.5], [False, False, True])
    """
    opts = solver_options(options, method=method, dense_max=dense_max, tol=tol, maxiter=maxiter, progress=progress)
    g = scale_free_weights(as_graph(edge_index, num_nodes, edge_weight))
    k = check_k(k)
    return solve_graph(edge_index, g, opts, partial(_dense_batch, k=k), partial(_sparse_graph, k=k, options=opts))


def laplacian_pe_batch(
    graphs: Sequence[Any],
    k: int = 8,
    *,
    dtype=np.float64,
    bucket: int = 1,
    dense_max: int | None = None,
    as_torch: bool | None = None,
    workers: int | None = None,
    device: Any = None,
    options: SolverOptions | None = None,
) -> LapBatch:
    """LapPE of many graphs at once (each graph independently; see the module docstring).

    Parameters
    ----------
    graphs : sequence
        Graph-like inputs (see :func:`laplacian_pe`).
    k : int
        Modes per node (at most ``MAX_K`` = 4096).
    dtype : numpy dtype
        ``np.float64`` or ``np.float32`` (faster, less accurate); anything else is a SpecError.
    bucket : int
        An integer ``>= 1``. Graphs with ``N <= dense_max`` are grouped by size rounded up to a multiple of
        ``bucket`` (padding with a sentinel diagonal), one stacked ``eigh`` per group.
    dense_max : int, optional
        Larger graphs (default: above :data:`~.solver.DENSE_MAX` = 256 nodes) use the sparse path of
        :func:`laplacian_pe`.
    as_torch : bool, optional
        ``None``: torch tensors when the first graph's ``edge_index`` is one.
    workers : int, optional
        Threads decomposing size groups concurrently (LAPACK releases the GIL); ``None`` uses
        one per available core (at most 4) for batches of >= 256 graphs. The result does not
        depend on it.
    device : str or torch.device, optional
        ``None`` (default): numpy/LAPACK. A torch device (``"cuda"``, ``"cpu"``, …): each size
        group's Laplacian stack is built, decomposed (``torch.linalg.eigh``), sign-fixed and
        checked there (:mod:`._torch_dense`), one group at a time on CUDA; the output is the
        same (numpy or CPU tensors, equal up to rounding and the basis of degenerate spaces).
        Graphs above ``dense_max`` still use the CPU sparse path.
    options : SolverOptions, optional
        The solver settings of the graphs above ``dense_max`` (:class:`.solver.SolverOptions`;
        a given ``dense_max`` replaces its field).

    Returns
    -------
    LapBatch
        ``pe (ΣN, k)``, ``eigvals (B, k)``, ``mask (B, k)``, ``ptr (B+1,)``, ``ambiguous (B, k)``.

    Examples
    --------
    >>> import numpy as np
    >>> path = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])
    >>> out = laplacian_pe_batch([(path, 3), (path, 4)], k=2)
    >>> out.pe.shape, out.mask.tolist()
    ((7, 2), [[True, True], [True, True]])
    """
    opts = solver_options(options, dense_max=dense_max)
    k = check_k(k)
    dtype = check_float_dtype(dtype)
    bucket = check_int(bucket, "bucket", 1)
    if workers is not None:
        check_int(workers, "workers", 1)
    dev = resolve_device(device)
    dense = partial(_dense_batch, k=k, dtype=dtype, bucket=bucket, workers=workers, device=dev)
    sparse = partial(_sparse_graph, k=k, options=opts)
    return solve_batch(as_graphs(graphs, scale_free=True), opts.dense_max, as_torch, dense, sparse)


def lap_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``lap[:k]`` (default k=8) on the undirected structure.

    Returns ``lap (N, k)``, ``lap_eigvals (N, k)`` (the graph's eigenvalues repeated per node),
    ``lap_mask (N, k)`` and ``lap_ambiguous (N, k)``.

    Examples
    --------
    >>> from structpos import Structure
    >>> s = Structure(kind="tree", labels=list("abc"), parent=np.array([-1, 0, 0]))
    >>> sorted(lap_coords(s, "2"))
    ['lap', 'lap_ambiguous', 'lap_eigvals', 'lap_mask']
    """
    k = int(arg) if arg else 8
    r = laplacian_pe(as_graph(structure), k=k)
    n = structure.num_nodes
    return {
        "lap": r.pe,
        "lap_eigvals": np.tile(r.eigvals, (n, 1)),
        "lap_mask": np.tile(r.mask, (n, 1)),
        "lap_ambiguous": np.tile(r.ambiguous, (n, 1)),
    }


# ---------------------------------------------------------------- dense batch
def _component_counts(
    row: np.ndarray, col: np.ndarray, gid: np.ndarray, sizes: np.ndarray, eptr: np.ndarray | None = None
) -> np.ndarray:
    """Connected components with >= 2 nodes, per graph (one csgraph call on all graphs).

    ``row, col, gid`` are the packed edges (:func:`._graph_utils.packed_edges`: zero weights
    and self-loops already dropped, so they do not connect); a node without other edges is a
    singleton component and is not counted; ``eptr``: :func:`._graph_utils.edge_ptr` when already at hand."""
    B = len(sizes)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    total = int(ptr[-1])
    if total == 0 or row.size == 0:
        return np.zeros(B, dtype=np.int64)
    nat = native_module("components")
    if nat is not None:  # union-find over the packed edges (gid ascending): the same counts
        eptr = edge_ptr(gid, B) if eptr is None else eptr
        counts = np.zeros(B, dtype=np.int64)
        c = np.ascontiguousarray
        nat.nontrivial(c(row, dtype=np.int64), c(col, dtype=np.int64), eptr, ptr.astype(np.int64), counts)
        return counts
    off = ptr[gid]
    G = sp.csr_matrix((np.ones(row.size), (off + row, off + col)), shape=(total, total))
    ncomp, labels = connected_components(G, directed=True, connection="weak")
    comp_size = np.bincount(labels, minlength=ncomp)
    owner = np.empty(ncomp, dtype=np.int64)
    owner[labels] = np.repeat(np.arange(B), sizes)  # every node of a component is in one graph
    return np.bincount(owner[comp_size >= 2], minlength=B)


def _dense_batch(
    gs: GraphBatch,
    k: int,
    *,
    dtype=np.float64,
    bucket: int = 1,
    only=None,
    workers: int | None = 1,
    device=None,
) -> tuple[LapBatch, float]:
    """Dense LapPE of the graphs ``only`` (default all) and the largest eigenpair residual;
    ``device`` (a ``torch.device``) runs the group kernel in torch there."""
    sizes = gs.sizes
    table = ModeTable(sizes, k, dtype, dtype)
    idx_all = np.arange(len(gs)) if only is None else np.asarray(only, dtype=np.int64)
    if idx_all.size == 0:
        return table.result(dtype)
    sub = gs.take(idx_all)
    sub_sizes = sub.sizes
    packed = packed_edges(sub)
    eptr = edge_ptr(packed[3], len(sub))
    ncomp = _component_counts(packed[0], packed[1], packed[3], sub_sizes, eptr)

    build = None
    nat = native_module("laplacian") if device is None else None
    if nat is not None and not sub.weighted:  # integer degrees: exact in any order
        c = np.ascontiguousarray
        row, col = c(packed[0], dtype=np.int64), c(packed[1], dtype=np.int64)

        def build(members, S):  # straight from the packed edges: no per-group edge sort
            G = len(members)
            L, iso = np.empty((G, S, S)), np.empty(G, dtype=np.int64)
            nat.graphs(row, col, eptr, c(members, dtype=np.int64), L, SENTINEL, iso)
            return L, iso

        # A: the group's (Laplacians, isolated counts); the compiled finish writes its rows straight into the table
        def run(local, A):
            idx = idx_all[local]
            table.put(idx, *_group_modes(A, sub_sizes[local], ncomp[local], k, dtype, out=(table.pe, table.ptr[idx])))

    else:
        if device is None:
            kernel: Callable = _group_pe
        else:
            kernel = partial(lap_group_torch, dev=device)
            workers = 1 if device.type != "cpu" else workers  # one device queue: no gain from threads

        def run(local, A):
            table.put(idx_all[local], *kernel(A, sub_sizes[local], ncomp[local], k, dtype))

    run_dense_groups(sub_sizes, packed, run, bucket=bucket, workers=workers, build_members=build)
    return table.result(dtype)


def _group_pe(A: np.ndarray, n: np.ndarray, c: np.ndarray, k: int, dtype):
    """PE ``(G, S, k)``, eigenvalues ``(G, k)``, mask, ambiguity flags and the largest residual
    of one size group of ``G`` graphs padded to ``S`` nodes, from their ``(G, S, S)`` adjacencies
    (``n`` nodes and ``c`` non-trivial components each)."""
    return _group_modes(_laplacian_stack(A), n, c, k, dtype)


def _laplacian_stack(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The padded normalised Laplacians ``(G, S, S)`` of adjacencies ``A`` (overwritten) and each
    graph's count of isolated or padded nodes (``native/laplacian.c`` computes the same)."""
    S = A.shape[1]
    A = np.maximum(A, A.transpose(0, 2, 1))
    deg = A.sum(-1)
    iso = deg <= 0  # isolated nodes and padding
    dinv = np.where(iso, 0.0, 1.0 / np.sqrt(np.where(iso, 1.0, deg)))
    L = A
    L *= -dinv[:, :, None]
    L *= dinv[:, None, :]
    L[:, np.arange(S), np.arange(S)] = np.where(iso, SENTINEL, 1.0)
    return L, iso.sum(-1)


def _group_modes(
    Liso: tuple[np.ndarray, np.ndarray],
    n: np.ndarray,
    c: np.ndarray,
    k: int,
    dtype,
    out: tuple[np.ndarray, np.ndarray] | None = None,
):
    """:func:`_group_pe` from the group's Laplacians and isolated-node counts (:func:`_laplacian_stack`).

    ``out = (pe, rowstart)``: where the compiled ``lapmodes.place`` runs (float64, one column
    range for the group), it also writes the graphs' PE rows into ``pe`` (graph ``g``'s node ``s``
    at row ``rowstart[g] + s``) while gathering them; the PE returned is then ``None`` (already
    placed: the bytes :meth:`._spectrum.ModeTable.put` would write)."""
    L, iso_count = Liso
    G, S = len(n), L.shape[1]
    real_modes = n - (iso_count - (S - n))
    # measured on stacks of N = 10..40: OpenBLAS's dsyevd is as fast as MKL's in float64 (faster
    # next to torch's busy OpenMP threads), MKL's ssyevd ~20% faster in float32
    w, U = batched_eigh(L, dtype, backend="torch" if np.dtype(dtype) == np.float32 else "numpy")
    cols = c[:, None] + np.arange(k)
    valid = cols < real_modes[:, None]
    c0 = int(c[0])
    placed = False
    # the kept eigenvectors as contiguous rows (G, k, S): every later pass reduces along the last axis
    nat = native_module("lapmodes") if U.dtype == np.float64 and k > 0 else None
    if c0 + k <= S and (c == c0).all():  # the usual case: one column range for the whole group
        ev = np.where(valid, w[:, c0 : c0 + k], 0.0)
        if nat is not None:  # gather, sign rule, mask and +0.0 in one pass: the same bytes
            Vt = np.empty((G, k, S))
            fv = valid.astype(np.float64)
            if out is not None:  # ... also written into the batch output (no scatter_rows)
                rowstart = np.ascontiguousarray(out[1], dtype=np.int64)
                n64 = np.ascontiguousarray(n, dtype=np.int64)
                nat.place(np.ascontiguousarray(U), c0, fv, 1 - TIE_RTOL, n64, rowstart, Vt, out[0])
                placed = True
            else:
                nat.rows(np.ascontiguousarray(U), c0, fv, 1 - TIE_RTOL, Vt)
        else:
            Vt = np.ascontiguousarray(U[:, :, c0 : c0 + k].transpose(0, 2, 1))
    else:
        nat = None
        cols = np.minimum(cols, S - 1)
        ev = np.where(valid, np.take_along_axis(w, cols, axis=1), 0.0)
        Vt = np.take_along_axis(U.transpose(0, 2, 1), np.broadcast_to(cols[:, :, None], (G, k, S)), axis=1)
    nxt_col = c + k
    has_next = nxt_col < real_modes
    nxt = w[np.arange(G), np.minimum(nxt_col, S - 1)]
    ambiguous = ambiguous_modes(ev, valid, nxt, has_next)
    if nat is None:
        Vt = canonical_sign_rows(Vt) * valid[:, :, None] + 0.0  # (+0.0 turns -0.0 into 0.0)
    R = np.matmul(Vt, L)  # L is symmetric: the rows of (L V − V Λ)ᵀ (in place: the same values)
    R -= Vt * ev[:, :, None]
    res = float(np.sqrt(np.max(np.multiply(R, R, out=R).sum(axis=2)))) if R.size else 0.0
    return (None if placed else Vt.transpose(0, 2, 1)), ev, valid, ambiguous, res


# ---------------------------------------------------------------- large sparse graphs
def _sparse_graph(g: Graph, k: int, *, options: SolverOptions):
    """Per-component decomposition of a large graph; the k smallest non-trivial modes overall."""
    dense_max = options.dense_max
    A = adjacency(g)
    deg = np.asarray(A.sum(axis=1)).ravel()
    comps = [nodes for nodes in components(A) if len(nodes) >= 2]
    small = [nodes for nodes in comps if len(nodes) <= dense_max]
    modes = ComponentModes()
    if small:
        sub = GraphBatch.of([_subgraph(A, nodes, g.name) for nodes in small])
        modes.add_dense(small, *_dense_batch(sub, min(k + 1, max(len(nodes) for nodes in small) - 1)))
    for nodes in (nodes for nodes in comps if len(nodes) > dense_max):
        Ac = A if len(nodes) == g.num_nodes else A[nodes][:, nodes]
        dc = deg[nodes]
        null = np.sqrt(dc / dc.sum())[:, None]
        r = smallest_eigenpairs(
            _normalized_laplacian(Ac, dc), min(k + 1, len(nodes) - 1), null=null, name=g.name, options=options
        )
        modes.add_sparse(nodes, edge_rayleigh_quotients(r.vectors, Ac, dc, r.eigvals), canonical_phase(r.vectors), r)
    return modes.merge(g.num_nodes, k)


def _normalized_laplacian(A, deg: np.ndarray):
    """``I − D^{-1/2} A D^{-1/2}`` with entries ``A_ij / √(d_i d_j)`` (one rounding: exact on
    regular parts, e.g. ``1/2`` inside a path, so the matrix determines eigenvalues as small as
    ``1/N²`` to ~1e-8 relative; ``d^{-1/2}_i d^{-1/2}_j`` would put an ε-sized perturbation on
    every entry, ~1e-5 relative error for the smallest eigenvalue of a 1M-node path)."""
    A = sp.csr_matrix(A)
    n = A.shape[0]
    rows = np.repeat(np.arange(n), np.diff(A.indptr))
    vals = np.where(rows == A.indices, 0.0, -A.data / np.sqrt(deg[rows] * deg[A.indices]))  # no self-loops
    off = sp.csr_matrix((vals, A.indices, A.indptr), shape=(n, n))  # A's pattern: no COO round trip
    return (off + sp.identity(n, format="csr")).tocsr()


def _subgraph(A, nodes: np.ndarray, name: str) -> Graph:
    sub = A[nodes][:, nodes].tocoo()
    return Graph(np.stack([sub.row, sub.col]).astype(np.int64), len(nodes), sub.data, False, name)
