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
  :func:`._schedule.run_size_groups`).
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

from typing import Any, Callable, Literal, NamedTuple, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..exceptions import EigenConvergenceError
from ..structure import Structure
from ._eigen import batched_eigh, choose_method
from ._graph_utils import (
    SENTINEL,
    Graph,
    adjacency,
    as_graph,
    as_graphs,
    batch_output,
    bucket_edges,
    canonical_phase,
    group_by_size,
    output_like,
    packed_edges,
    scatter_rows,
    to_output,
)
from ._schedule import run_size_groups
from ._sparse_eigen import RESIDUAL_MAX, SparseMethod, smallest_eigenpairs
from ._spectrum import SolveReport, SpectralPE, ambiguous_modes, edge_rayleigh_quotients, merge_modes

__all__ = ["laplacian_pe", "laplacian_pe_batch", "LapBatch", "lap_coords", "DENSE_MAX", "EigenConvergenceError"]

DENSE_MAX = 1000
"""Graphs (or components) with at most this many nodes use dense ``eigh``."""


class LapBatch(NamedTuple):
    """Batched PE: rows of all graphs concatenated (PyG ``Batch`` layout)."""

    pe: Any
    """``(ΣN, k)`` eigenvector entries, graph ``g`` in rows ``ptr[g]:ptr[g+1]``."""
    eigvals: Any
    """``(B, k)`` eigenvalues of the kept modes (0 where masked)."""
    mask: Any
    """``(B, k)`` bool: mode ``j`` exists for graph ``g``."""
    ptr: Any
    """``(B + 1,)`` row offsets."""
    ambiguous: Any = None
    """``(B, k)`` bool: kept mode ``j`` of graph ``g`` shares its eigenvalue with the first mode
    not kept (the cut at ``k`` splits a degenerate eigenspace; see the module docstring)."""

    def graph(self, g: int):
        """``(pe, eigvals, mask)`` of graph ``g``."""
        return self.pe[self.ptr[g] : self.ptr[g + 1]], self.eigvals[g], self.mask[g]


# ---------------------------------------------------------------- public API
def laplacian_pe(
    edge_index: Any,
    num_nodes: int | None = None,
    k: int = 8,
    edge_weight: Any = None,
    *,
    method: Literal["auto", "dense"] | SparseMethod = "auto",
    dense_max: int = DENSE_MAX,
    tol: float = 1e-10,
    maxiter: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> SpectralPE:
    """LapPE of one graph: the ``k`` smallest non-trivial normalised-Laplacian eigenpairs.

    Parameters
    ----------
    edge_index : array or tensor (2, E), or a Structure / PyG Data / ``(edge_index, num_nodes)``
        The graph (symmetrised; see the module docstring).
    num_nodes : int, optional
        Required with a bare ``edge_index``.
    k : int
        Modes per node.
    edge_weight : array (E,), optional
        Non-negative finite weights (default 1).
    method : {"auto", "dense", "shift-invert", "lanczos", "amg", "lobpcg"}
        ``"auto"``: dense when ``N <= dense_max``, else per component the checked sparse
        layer picks (:mod:`._sparse_eigen`) and falls back when a method fails. A named sparse
        method is used for every large component, without fallback.
    dense_max : int
        Graphs and components up to this size are decomposed densely.
    tol, maxiter
        Convergence tolerance and iteration cap of the iterative methods.
    progress : callable, optional
        Receives a line of text per stage of each large solve (method, memory estimate, time).

    Returns
    -------
    SpectralPE
        Unpacks as ``pe (N, k), eigvals (k,), mask (k,)``; also ``.ambiguous (k,)`` and
        ``.report`` (:class:`._spectrum.SolveReport`). Torch input gives torch arrays.

    Raises
    ------
    StructureError
        Invalid edges or weights (names the edge).
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
    g = as_graph(edge_index, num_nodes, edge_weight)
    k = _check_k(k)
    method = choose_method(method, g.num_nodes, dense_max)
    if method == "dense":
        out, res = _dense_batch([g], k)
        pe, ev, mask, amb = out.pe, out.eigvals[0], out.mask[0], out.ambiguous[0]
        report = SolveReport(("dense",), res, 0.0)
    else:
        pe, ev, mask, amb, report = _sparse_graph(
            g, k, method=method, dense_max=dense_max, tol=tol, maxiter=maxiter, progress=progress
        )
    like = output_like(edge_index)
    return SpectralPE(to_output(pe, like), to_output(ev, like), to_output(mask, like), to_output(amb, like), report)


def laplacian_pe_batch(
    graphs: Sequence[Any],
    k: int = 8,
    *,
    dtype=np.float64,
    bucket: int = 1,
    dense_max: int = DENSE_MAX,
    as_torch: bool | None = None,
    workers: int | None = None,
) -> LapBatch:
    """LapPE of many graphs at once (each graph independently; see the module docstring).

    Parameters
    ----------
    graphs : sequence
        Graph-like inputs (see :func:`laplacian_pe`).
    k : int
        Modes per node.
    dtype : numpy dtype
        ``np.float32`` is faster and less accurate.
    bucket : int
        Graphs with ``N <= dense_max`` are grouped by size rounded up to a multiple of
        ``bucket`` (padding with a sentinel diagonal), one stacked ``eigh`` per group.
    dense_max : int
        Larger graphs use the sparse path of :func:`laplacian_pe`.
    as_torch : bool, optional
        ``None``: torch tensors when the first graph's ``edge_index`` is one.
    workers : int, optional
        Threads decomposing size groups concurrently (LAPACK releases the GIL); ``None`` uses
        one per available core (at most 4) for batches of >= 256 graphs. The result does not
        depend on it.

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
    k = _check_k(k)
    gs = as_graphs(graphs)
    sizes = np.fromiter((g.num_nodes for g in gs), dtype=np.int64, count=len(gs))
    small = np.flatnonzero(sizes <= dense_max)
    out, _ = _dense_batch(gs, k, dtype=dtype, bucket=bucket, only=small, workers=workers)
    for i in np.flatnonzero(sizes > dense_max):
        pe, ev, mask, amb, _ = _sparse_graph(gs[i], k, dense_max=dense_max)
        out.pe[out.ptr[i] : out.ptr[i + 1]] = pe
        out.eigvals[i], out.mask[i], out.ambiguous[i] = ev, mask, amb
    return LapBatch(*batch_output(out, graphs, as_torch))


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
def _check_k(k) -> int:
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _component_counts(row: np.ndarray, col: np.ndarray, gid: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Connected components with >= 2 nodes, per graph (one csgraph call on all graphs).

    ``row, col, gid`` are the packed edges (:func:`._graph_utils.packed_edges`: zero weights
    and self-loops already dropped, so they do not connect); a node without other edges is a
    singleton component and is not counted."""
    B = len(sizes)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    total = int(ptr[-1])
    if total == 0 or row.size == 0:
        return np.zeros(B, dtype=np.int64)
    off = ptr[gid]
    G = sp.csr_matrix((np.ones(row.size), (off + row, off + col)), shape=(total, total))
    ncomp, labels = connected_components(G, directed=True, connection="weak")
    comp_size = np.bincount(labels, minlength=ncomp)
    owner = np.empty(ncomp, dtype=np.int64)
    owner[labels] = np.repeat(np.arange(B), sizes)  # every node of a component is in one graph
    return np.bincount(owner[comp_size >= 2], minlength=B)


def _dense_batch(
    gs: Sequence[Graph], k: int, *, dtype=np.float64, bucket: int = 1, only=None, workers: int | None = 1
) -> tuple[LapBatch, float]:
    """Dense LapPE of the graphs ``only`` (default all) and the largest eigenpair residual."""
    B = len(gs)
    sizes = np.fromiter((g.num_nodes for g in gs), dtype=np.int64, count=B)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    pe = np.zeros((int(ptr[-1]), k), dtype=dtype)
    eigvals = np.zeros((B, k), dtype=dtype)
    mask = np.zeros((B, k), dtype=bool)
    amb = np.zeros((B, k), dtype=bool)
    residual = [0.0]
    idx_all = np.arange(B) if only is None else np.asarray(only, dtype=np.int64)
    if idx_all.size == 0:
        return LapBatch(pe, eigvals, mask, ptr, amb), 0.0
    sub = gs if idx_all.size == B else [gs[i] for i in idx_all]
    sub_sizes = sizes[idx_all]
    row, col, w, gid = packed_edges(sub)
    ncomp = _component_counts(row, col, gid, sub_sizes)
    groups = {S: local for S, local in group_by_size(sub_sizes, bucket).items() if S > 0}
    edges = bucket_edges(groups, len(sub), row, col, gid)

    def run(task):
        (S, local), (sel, flat) = task
        V, ev, valid, ambiguous, res = _group_pe(S, flat, w[sel], sub_sizes[local], ncomp[local], k, dtype)
        idx = idx_all[local]
        eigvals[idx], mask[idx], amb[idx] = ev, valid, ambiguous
        residual.append(res)
        scatter_rows(pe, ptr, idx, sub_sizes[local], V)  # disjoint rows: safe from threads

    run_size_groups(
        list(zip(groups.items(), edges)),
        run,
        size_of=lambda t: t[0][0],
        cost_of=lambda t: len(t[0][1]) * t[0][0] ** 3,
        workers=workers,
        num_graphs=len(sub),
    )
    res = max(residual)
    if res > RESIDUAL_MAX * (1e3 if np.dtype(dtype) == np.float32 else 1):
        raise EigenConvergenceError(f"dense eigh returned a residual of {res:.2e}", residuals=[res])
    return LapBatch(pe, eigvals, mask, ptr, amb), res


def _group_pe(S: int, flat: np.ndarray, weight: np.ndarray, n: np.ndarray, c: np.ndarray, k: int, dtype):
    """PE ``(G, S, k)``, eigenvalues ``(G, k)``, mask, ambiguity flags and the largest residual
    of one size group of ``G`` graphs padded to ``S`` nodes, from its packed edges (``flat``
    positions in the ``(G, S, S)`` adjacency)."""
    G = len(n)
    A = np.bincount(flat, weights=weight, minlength=G * S * S).astype(np.float64, copy=False).reshape(G, S, S)
    A = np.maximum(A, A.transpose(0, 2, 1))
    deg = A.sum(-1)
    iso = deg <= 0  # isolated nodes and padding
    dinv = np.where(iso, 0.0, 1.0 / np.sqrt(np.where(iso, 1.0, deg)))
    L = A
    L *= -dinv[:, :, None]
    L *= dinv[:, None, :]
    L[:, np.arange(S), np.arange(S)] = np.where(iso, SENTINEL, 1.0)
    real_modes = n - (iso.sum(-1) - (S - n))
    # measured on stacks of N = 10..40: OpenBLAS's dsyevd is as fast as MKL's in float64 (faster
    # next to torch's busy OpenMP threads), MKL's ssyevd ~20% faster in float32
    w, U = batched_eigh(L, dtype, backend="torch" if np.dtype(dtype) == np.float32 else "numpy")
    cols = c[:, None] + np.arange(k)
    valid = cols < real_modes[:, None]
    c0 = int(c[0])
    if c0 + k <= S and (c == c0).all():  # the usual case: one column range for the whole group
        ev = np.where(valid, w[:, c0 : c0 + k], 0.0)
        V = U[:, :, c0 : c0 + k]
    else:
        cols = np.minimum(cols, S - 1)
        ev = np.where(valid, np.take_along_axis(w, cols, axis=1), 0.0)
        V = np.take_along_axis(U, np.broadcast_to(cols[:, None, :], (G, S, k)), axis=2)
    nxt_col = c + k
    has_next = nxt_col < real_modes
    nxt = np.take_along_axis(w, np.minimum(nxt_col, S - 1)[:, None], axis=1)[:, 0]
    ambiguous = ambiguous_modes(ev, valid, nxt, has_next)
    V = canonical_phase(V) * valid[:, None, :] + 0.0  # (+0.0 turns -0.0 into 0.0)
    R = L @ V - V * ev[:, None, :]
    res = float(np.sqrt(np.max((R * R).sum(axis=1)))) if R.size else 0.0
    return V, ev, valid, ambiguous, res


# ---------------------------------------------------------------- large sparse graphs
def _components(A) -> list[np.ndarray]:
    """Node indices of every connected component, largest first."""
    ncomp, labels = connected_components(A, directed=False)
    sizes = np.bincount(labels, minlength=ncomp)
    order = np.argsort(labels, kind="stable")
    members = np.split(order, np.cumsum(sizes)[:-1])
    return [members[c] for c in np.argsort(-sizes, kind="stable")]


def _sparse_graph(
    g: Graph,
    k: int,
    *,
    method: SparseMethod = "auto",
    dense_max: int = DENSE_MAX,
    tol: float = 1e-10,
    maxiter: int | None = None,
    progress=None,
):
    """Per-component decomposition of a large graph; the k smallest non-trivial modes overall."""
    n = g.num_nodes
    A = adjacency(g)
    deg = np.asarray(A.sum(axis=1)).ravel()
    comps = [nodes for nodes in _components(A) if len(nodes) >= 2]
    small = [nodes for nodes in comps if len(nodes) <= dense_max]
    cands = []
    if small:
        sub = [_subgraph(A, nodes, g.name) for nodes in small]
        kk = min(k + 1, max(len(nodes) for nodes in small) - 1)
        res, res_max = _dense_batch(sub, kk)
        for j, nodes in enumerate(small):
            m = res.mask[j]
            cands.append((nodes, res.eigvals[j][m], res.pe[res.ptr[j] : res.ptr[j + 1]][:, m]))
    notes: list[str] = []
    methods, resid, ortho, mem = (["dense"] if small else []), (res_max if small else 0.0), 0.0, 0
    for nodes in (nodes for nodes in comps if len(nodes) > dense_max):
        Ac = A if len(nodes) == n else A[nodes][:, nodes]
        dc = deg[nodes]
        Lc = _normalized_laplacian(Ac, dc)
        null = np.sqrt(dc / dc.sum())[:, None]
        r = smallest_eigenpairs(
            Lc,
            min(k + 1, len(nodes) - 1),
            null=null,
            method=method,
            tol=tol,
            maxiter=maxiter,
            dense_max=dense_max,
            name=g.name,
            progress=progress,
        )
        w = edge_rayleigh_quotients(r.vectors, Ac, dc, r.eigvals)
        cands.append((nodes, w, canonical_phase(r.vectors)))
        methods.append(r.method)
        notes.extend(r.notes)
        resid, ortho, mem = max(resid, r.max_residual), max(ortho, r.orthogonality), max(mem, r.memory_estimate)
    pe, ev, mask, amb = merge_modes(n, k, cands)
    return pe, ev, mask, amb, SolveReport(tuple(methods), resid, ortho, tuple(notes), mem)


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
