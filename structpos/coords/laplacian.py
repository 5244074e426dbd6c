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
  groups are independent, so a thread pool decomposes them concurrently (``workers``).
* Large graphs: split into connected components; small components go through the dense
  batch, each large one through sparse shift-invert ``eigsh`` (fixed start vector) with a LOBPCG
  fallback (:func:`._eigen.smallest_eigenpairs`); the ``k`` smallest non-trivial eigenpairs
  over all components are kept. Nothing is densified.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..structure import Structure
from ._eigen import SMALL, batched_eigh, choose_method, single_blas_thread, smallest_eigenpairs
from ._graph_utils import (
    SENTINEL,
    EigenConvergenceError,
    Graph,
    adjacency,
    as_graph,
    as_graphs,
    auto_workers,
    batch_output,
    bucket_edges,
    canonical_phase,
    group_by_size,
    output_like,
    packed_edges,
    scatter_rows,
    to_output,
)

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

    def graph(self, g: int):
        """``(pe, eigvals, mask)`` of graph ``g``."""
        return self.pe[self.ptr[g]: self.ptr[g + 1]], self.eigvals[g], self.mask[g]


# ---------------------------------------------------------------- public API
def laplacian_pe(
    edge_index: Any,
    num_nodes: int | None = None,
    k: int = 8,
    edge_weight: Any = None,
    *,
    method: str = "auto",
    dense_max: int = DENSE_MAX,
    tol: float = 1e-8,
    maxiter: int | None = None,
):
    """LapPE of one graph: ``(pe (N, k), eigvals (k,), mask (k,))`` (see the module docstring).

    ``edge_index`` may also be a Structure / PyG Data / ``(edge_index, num_nodes)`` tuple.
    ``method``: ``"auto"`` (dense when ``N <= dense_max``), ``"dense"``, ``"shift-invert"``
    (sparse eigsh + LOBPCG fallback) or ``"lobpcg"``. Torch input gives torch output.
    """
    g = as_graph(edge_index, num_nodes, edge_weight)
    k = _check_k(k)
    method = choose_method(method, g.num_nodes, dense_max)
    if method == "dense":
        out = _dense_batch([g], k)
        pe, ev, mask = out.pe, out.eigvals[0], out.mask[0]
    else:
        pe, ev, mask = _sparse_graph(g, k, method=method, dense_max=dense_max, tol=tol, maxiter=maxiter)
    like = output_like(edge_index)
    return to_output(pe, like), to_output(ev, like), to_output(mask, like)


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

    Graphs with ``N <= dense_max`` are grouped by size (rounded up to a multiple of ``bucket``,
    padding with a sentinel diagonal) and decomposed by one stacked ``eigh`` per group;
    ``dtype=np.float32`` is faster and less accurate. Larger graphs use the sparse path.
    ``as_torch=None`` returns torch tensors when the first graph's ``edge_index`` is one.
    ``workers``: threads decomposing size groups concurrently (LAPACK releases the GIL);
    ``None`` uses one per available core (at most 4) for batches of >= 256 graphs. The result
    does not depend on it.
    """
    k = _check_k(k)
    gs = as_graphs(graphs)
    sizes = np.fromiter((g.num_nodes for g in gs), dtype=np.int64, count=len(gs))
    small = np.flatnonzero(sizes <= dense_max)
    out = _dense_batch(gs, k, dtype=dtype, bucket=bucket, only=small, workers=workers)
    for i in np.flatnonzero(sizes > dense_max):
        pe, ev, mask = _sparse_graph(gs[i], k, dense_max=dense_max)
        out.pe[out.ptr[i]: out.ptr[i + 1]] = pe
        out.eigvals[i], out.mask[i] = ev, mask
    return LapBatch(*batch_output(out, graphs, as_torch))


def lap_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``lap[:k]`` (default k=8): ``lap (N,k)``, ``lap_eigvals (N,k)``
    (the graph's eigenvalues repeated per node), ``lap_mask (N,k)``; edges are undirected."""
    k = int(arg) if arg else 8
    pe, ev, mask = laplacian_pe(as_graph(structure), k=k)
    n = structure.num_nodes
    return {"lap": pe, "lap_eigvals": np.tile(ev, (n, 1)), "lap_mask": np.tile(mask, (n, 1))}


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


def _dense_batch(gs: Sequence[Graph], k: int, *, dtype=np.float64, bucket: int = 1, only=None,
                 workers: int | None = 1) -> LapBatch:
    B = len(gs)
    sizes = np.fromiter((g.num_nodes for g in gs), dtype=np.int64, count=B)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    pe = np.zeros((int(ptr[-1]), k), dtype=dtype)
    eigvals = np.zeros((B, k), dtype=dtype)
    mask = np.zeros((B, k), dtype=bool)
    idx_all = np.arange(B) if only is None else np.asarray(only, dtype=np.int64)
    if idx_all.size == 0:
        return LapBatch(pe, eigvals, mask, ptr)
    sub = gs if idx_all.size == B else [gs[i] for i in idx_all]
    sub_sizes = sizes[idx_all]
    row, col, w, gid = packed_edges(sub)
    ncomp = _component_counts(row, col, gid, sub_sizes)
    groups = {S: local for S, local in group_by_size(sub_sizes, bucket).items() if S > 0}
    edges = bucket_edges(groups, len(sub), row, col, gid)

    def run(task):
        (S, local), (sel, flat) = task
        V, ev, valid = _group_pe(S, flat, w[sel], sub_sizes[local], ncomp[local], k, dtype)
        idx = idx_all[local]
        eigvals[idx], mask[idx] = ev, valid
        scatter_rows(pe, ptr, idx, sub_sizes[local], V)  # disjoint rows: safe from threads

    tasks = sorted(zip(groups.items(), edges), key=lambda t: -len(t[0][1]) * t[0][0] ** 3)
    light = [t for t in tasks if t[0][0] <= SMALL]  # one BLAS thread each; the rest multi-threaded
    nw = min(auto_workers(workers, len(sub), len(light)), max(len(light), 1))
    if nw > 1:  # LAPACK releases the GIL; OpenBLAS's thread limit is process-wide: set it around the pool
        with single_blas_thread(), ThreadPoolExecutor(nw) as ex:
            for _ in ex.map(run, light):
                pass
    for t in tasks if nw <= 1 else [t for t in tasks if t[0][0] > SMALL]:
        run(t)
    return LapBatch(pe, eigvals, mask, ptr)


def _group_pe(S: int, flat: np.ndarray, weight: np.ndarray, n: np.ndarray, c: np.ndarray, k: int, dtype):
    """PE ``(G, S, k)``, eigenvalues ``(G, k)`` and mask of one size group of ``G`` graphs padded
    to ``S`` nodes, from its packed edges (``flat`` positions in the ``(G, S, S)`` adjacency)."""
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
    n_iso = iso.sum(-1) - (S - n)
    # measured on stacks of N = 10..40: OpenBLAS's dsyevd is as fast as MKL's in float64 (faster
    # next to torch's busy OpenMP threads), MKL's ssyevd ~20% faster in float32
    w, U = batched_eigh(L, dtype, backend="torch" if np.dtype(dtype) == np.float32 else "numpy")
    cols = c[:, None] + np.arange(k)
    valid = cols < (n - n_iso)[:, None]
    c0 = int(c[0])
    if c0 + k <= S and (c == c0).all():  # the usual case: one column range for the whole group
        ev = np.where(valid, w[:, c0: c0 + k], 0.0)
        V = U[:, :, c0: c0 + k]
    else:
        cols = np.minimum(cols, S - 1)
        ev = np.where(valid, np.take_along_axis(w, cols, axis=1), 0.0)
        V = np.take_along_axis(U, np.broadcast_to(cols[:, None, :], (G, S, k)), axis=2)
    V = canonical_phase(V) * valid[:, None, :] + 0.0  # (+0.0 turns -0.0 into 0.0)
    return V, ev, valid


# ---------------------------------------------------------------- large sparse graphs
def _sparse_graph(g: Graph, k: int, *, method: str = "shift-invert", dense_max: int = DENSE_MAX,
                  tol: float = 1e-8, maxiter: int | None = None):
    """Per-component decomposition of a large graph; the k smallest non-trivial modes overall."""
    n = g.num_nodes
    A = adjacency(g)
    deg = np.asarray(A.sum(axis=1)).ravel()
    ncomp, labels = connected_components(A, directed=False)
    comp_size = np.bincount(labels, minlength=ncomp)
    order = np.argsort(labels, kind="stable")
    members = np.split(order, np.cumsum(comp_size)[:-1])
    cand_val, cand_comp, cand_vec = [], [], []

    small = [c for c in range(ncomp) if 2 <= comp_size[c] <= dense_max]
    if small:
        Acoo = A.tocoo()
        sub = []
        local = np.empty(n, dtype=np.int64)
        for c in small:
            local[members[c]] = np.arange(comp_size[c])
        e_comp = labels[Acoo.row]
        e_order = np.argsort(e_comp, kind="stable")
        e_split = np.split(e_order, np.cumsum(np.bincount(e_comp, minlength=ncomp))[:-1])
        for c in small:
            e = e_split[c]
            sub.append(Graph(np.stack([local[Acoo.row[e]], local[Acoo.col[e]]]), int(comp_size[c]),
                             Acoo.data[e], False, g.name))
        kk = min(k, int(comp_size[small].max()) - 1)
        res = _dense_batch(sub, kk)
        for j, c in enumerate(small):
            m = res.mask[j]
            cand_val.append(res.eigvals[j][m])
            cand_comp.append(np.full(int(m.sum()), c))
            cand_vec.extend(res.pe[res.ptr[j]: res.ptr[j + 1]][:, m].T)

    for c in (c for c in range(ncomp) if comp_size[c] > dense_max):
        nodes = members[c]
        Ac = A if len(nodes) == n else A[nodes][:, nodes]
        dc = deg[nodes]
        dinv = sp.diags(1.0 / np.sqrt(dc))
        Lc = (sp.identity(len(nodes), format="csr") - dinv @ Ac @ dinv).tocsr()
        null = np.sqrt(dc / dc.sum())[:, None]
        m = min(k, len(nodes) - 1)
        w, U = smallest_eigenpairs(Lc, m, constraints=null, drop=1, tol=tol, maxiter=maxiter,
                                   method=method, name=g.name)
        U = canonical_phase(U)
        cand_val.append(w)
        cand_comp.append(np.full(len(w), c))
        cand_vec.extend(U.T)

    pe = np.zeros((n, k))
    ev = np.zeros(k)
    mask = np.zeros(k, dtype=bool)
    if cand_val:
        vals = np.concatenate(cand_val)
        comps = np.concatenate(cand_comp)
        pick = np.lexsort((comps, vals))[:k]
        for j, p in enumerate(pick):
            pe[members[comps[p]], j] = cand_vec[p]
        ev[: len(pick)] = vals[pick]
        mask[: len(pick)] = True
    return pe, ev, mask
