r"""Magnetic Laplacian eigenvectors for directed graphs (Geisler et al., *Transformers Meet
Directed Graphs*; MagNet).

With ``A`` the directed weighted adjacency (self-loops ignored, duplicates summed),
``A_s = max(A, Aᵀ)`` its symmetrisation with degrees ``d_s``, and ``B = [A > 0]`` the edge
indicator, the potential ``q`` defines

.. math::
    \Theta^{(q)} = 2\pi q\,(B - B^\top),\qquad
    L^{(q)} = I - \big(D_s^{-1/2} A_s D_s^{-1/2}\big) \odot \exp(i\,\Theta^{(q)}),

a Hermitian positive semi-definite matrix with spectrum in ``[0, 2]``. A one-way edge
``u → v`` carries phase ``e^{2πiq}`` (``e^{-2πiq}`` back), a two-way edge none, so ``q = 0``
gives the ordinary normalised Laplacian. The PE is the ``k`` eigenvectors of the smallest
eigenvalues (**none is dropped**: for ``q > 0`` there is in general no trivial mode), complex
``(N, k)``, and their eigenvalues.

Conventions
-----------
* ``q`` is absolute (default 0.25, the largest useful value); ``q_relative=True`` uses
  ``q / max(1, m₁)`` with ``m₁`` the number of node pairs joined in one direction only.
* Direction comes only from which edges exist; weights enter through ``A_s``.
* **Canonical phase**: each eigenvector is multiplied by a unit complex number so that its
  largest-modulus entry is real positive (ties within a relative 1e-6: lowest node index).
* Isolated nodes are left out of the decomposition: their PE rows are zero and they take no
  mode. Fewer than ``k`` modes → zero columns, eigenvalue 0, ``mask`` False.
* ``ambiguous`` flags kept modes whose eigenvalue equals the first one not kept (the cut at
  ``k`` splits a degenerate eigenspace), as for :mod:`.laplacian`.

Solvers: as :mod:`.laplacian` — many small graphs by one stacked complex ``eigh`` per size
group (sentinel-padded, groups on a thread pool); a large graph per connected component, small
components densely and large ones through the checked sparse layer
(:func:`._sparse_eigen.smallest_eigenpairs`, complex Hermitian, no null space: shift-invert uses
``L − σI`` with ``σ`` just below 0).
"""

from __future__ import annotations

import math
import numbers
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from ..exceptions import SpecError
from ..structure import Structure
from ._args import check_int
from ._eigen import batched_eigh
from ._graph_utils import (
    SENTINEL,
    Graph,
    GraphBatch,
    adjacency,
    as_graph,
    as_graphs,
    canonical_phase,
    check_float_dtype,
    packed_edges,
    scale_free_weights,
)
from ._schedule import run_dense_groups
from ._sparse_eigen import smallest_eigenpairs
from ._spectrum import (
    ComponentModes,
    ModeTable,
    ambiguous_modes,
    check_k,
    components,
    solve_batch,
    solve_graph,
)
from .laplacian import LapBatch, SpectralPE
from .solver import SolverMethod, SolverOptions, solver_options

__all__ = ["magnetic_laplacian_pe", "magnetic_laplacian_pe_batch", "maglap_coords", "DENSE_MAX"]

DENSE_MAX = SolverOptions().dense_max


def magnetic_laplacian_pe(
    edge_index: Any,
    num_nodes: int | None = None,
    k: int = 8,
    q: float = 0.25,
    edge_weight: Any = None,
    *,
    q_relative: bool = False,
    method: SolverMethod | None = None,
    dense_max: int | None = None,
    tol: float | None = None,
    maxiter: int | None = None,
    progress: Callable[[str], None] | None = None,
    options: SolverOptions | None = None,
) -> SpectralPE:
    """Magnetic LapPE of one directed graph: the ``k`` lowest eigenpairs of ``L^(q)``.

    Parameters
    ----------
    edge_index, num_nodes, edge_weight
        The directed graph (as :func:`.laplacian.laplacian_pe`).
    k : int
        Modes per node.
    q : float
        Potential (absolute; ``q_relative=True`` divides it by the number of one-way pairs).
    method : {"auto", "dense", "shift-invert", "lanczos", "amg", "lobpcg"}, optional
        As :func:`.laplacian.laplacian_pe` (sparse methods never densify).
    dense_max, tol, maxiter, progress, options : optional
        As :func:`.laplacian.laplacian_pe` (:class:`.solver.SolverOptions`).

    Returns
    -------
    SpectralPE
        ``pe (N, k)`` complex, ``eigvals (k,)``, ``mask (k,)``; ``.ambiguous``, ``.report``.

    Raises
    ------
    EigenConvergenceError
        A large component's eigenpairs did not converge.

    Examples
    --------
    A directed 4-cycle with ``q = 1/8``: eigenvalues ``1 − cos(2π(j/4 + q))``, a degenerate
    pair at the bottom (``j = 0, −1``).

    >>> import numpy as np
    >>> ei = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    >>> pe, ev, mask = magnetic_laplacian_pe(ei, 4, k=2, q=0.125)
    >>> bool(np.allclose(ev, 1 - np.cos(2 * np.pi * (np.array([0, -1]) / 4 + 0.125))))
    True
    """
    opts = solver_options(options, method=method, dense_max=dense_max, tol=tol, maxiter=maxiter, progress=progress)
    g = scale_free_weights(as_graph(edge_index, num_nodes, edge_weight))
    k = check_k(k)
    _check_q(q)
    dense = partial(_dense_batch, k=k, q=q, q_relative=q_relative)
    sparse = partial(_sparse_graph, k=k, q=q, q_relative=q_relative, options=opts)
    return solve_graph(edge_index, g, opts, dense, sparse)


def magnetic_laplacian_pe_batch(
    graphs: Sequence[Any],
    k: int = 8,
    q: float = 0.25,
    *,
    q_relative: bool = False,
    dtype=np.float64,
    bucket: int = 1,
    dense_max: int | None = None,
    as_torch: bool | None = None,
    workers: int | None = None,
    options: SolverOptions | None = None,
) -> LapBatch:
    """Magnetic LapPE of many directed graphs (one stacked complex ``eigh`` per size group,
    sentinel-padded, groups on a thread pool); graphs over ``dense_max`` nodes use the sparse path.

    Parameters are those of :func:`.laplacian.laplacian_pe_batch` (without ``device``) plus ``q``
    and ``q_relative``.

    Returns
    -------
    LapBatch
        ``pe`` complex ``(ΣN, k)``, ``eigvals``, ``mask``, ``ptr``, ``ambiguous``.

    Examples
    --------
    >>> import numpy as np
    >>> out = magnetic_laplacian_pe_batch([(np.array([[0, 1], [1, 2]]), 3)], k=2)
    >>> out.pe.dtype, out.mask.tolist()
    (dtype('complex128'), [[True, True]])
    """
    opts = solver_options(options, dense_max=dense_max)
    k = check_k(k)
    _check_q(q)
    dtype = check_float_dtype(dtype)
    bucket = check_int(bucket, "bucket", 1)
    if workers is not None:
        check_int(workers, "workers", 1)
    dense = partial(_dense_batch, k=k, q=q, q_relative=q_relative, dtype=dtype, bucket=bucket, workers=workers)
    sparse = partial(_sparse_graph, k=k, q=q, q_relative=q_relative, options=opts)
    return solve_batch(as_graphs(graphs, directed=True, scale_free=True), opts.dense_max, as_torch, dense, sparse)


def maglap_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``maglap[:k[:q]]`` (defaults 8, 0.25).

    Returns ``maglap_re``, ``maglap_im`` ``(N, k)``, ``maglap_eigvals``, ``maglap_mask`` and
    ``maglap_ambiguous`` (repeated per node). Edge directions are used for directed graphs and
    trees (parent → child); other graphs are symmetrised first.

    Examples
    --------
    >>> from structpos import Structure
    >>> s = Structure(kind="tree", labels=list("abc"), parent=np.array([-1, 0, 1]))
    >>> maglap_coords(s, "2")["maglap_re"].shape
    (3, 2)
    """
    parts = (arg or "").split(":")
    k = int(parts[0]) if parts[0] else 8
    q = float(parts[1]) if len(parts) > 1 and parts[1] else 0.25
    g = as_graph(structure)
    if not (structure.directed or structure.is_tree):
        A = adjacency(g).tocoo()
        g = Graph(np.stack([A.row, A.col]).astype(np.int64), g.num_nodes, A.data, False, g.name)
    r = magnetic_laplacian_pe(g, k=k, q=q)
    n = structure.num_nodes
    return {
        "maglap_re": r.pe.real.copy(),
        "maglap_im": r.pe.imag.copy(),
        "maglap_eigvals": np.tile(r.eigvals, (n, 1)),
        "maglap_mask": np.tile(r.mask, (n, 1)),
        "maglap_ambiguous": np.tile(r.ambiguous, (n, 1)),
    }


# ---------------------------------------------------------------- kernels
def _check_q(q) -> None:
    ok = isinstance(q, numbers.Real) and not isinstance(q, bool) and math.isfinite(q) and float(q) >= 0
    if not ok:
        raise SpecError(f"potential q must be a finite number >= 0, got {q!r}")


def _one_way_pairs(Bind: np.ndarray) -> np.ndarray:
    """Number of node pairs joined in exactly one direction, per matrix of a ``(..., S, S)`` stack."""
    return (Bind & ~np.swapaxes(Bind, -1, -2)).sum(axis=(-1, -2))


def _magnetic_stack(A: np.ndarray, q: float, q_relative: bool):
    """Dense ``L^(q)`` ``(G, S, S)`` of directed adjacencies ``A`` (padding and isolated nodes get
    the sentinel diagonal) and the isolated-or-padding mask ``(G, S)``."""
    S = A.shape[1]
    Bind = A > 0
    As = np.maximum(A, A.transpose(0, 2, 1))
    deg = As.sum(-1)
    iso = deg <= 0
    qq = np.full(len(A), float(q))
    if q_relative:
        qq = qq / np.maximum(1, _one_way_pairs(Bind))
    theta = (2 * np.pi * qq)[:, None, None] * (Bind.astype(np.float64) - Bind.transpose(0, 2, 1))
    dinv = np.where(iso, 0.0, 1.0 / np.sqrt(np.where(iso, 1.0, deg)))
    L = -(dinv[:, :, None] * As * dinv[:, None, :]) * np.exp(1j * theta)
    L[:, np.arange(S), np.arange(S)] = np.where(iso, SENTINEL, 1.0)
    return L, iso


def _group_pe(A: np.ndarray, n: np.ndarray, k: int, q: float, q_relative: bool, dtype):
    """PE ``(G, S, k)`` complex, eigenvalues ``(G, k)``, mask, ambiguity flags and the largest
    residual of one size group of ``G`` directed graphs (``n`` nodes each) padded to ``S`` nodes."""
    G, S = len(n), A.shape[1]
    L, iso = _magnetic_stack(A, q, q_relative)
    real_modes = n - (iso & (np.arange(S) < n[:, None])).sum(-1)
    w, U = batched_eigh(L, dtype)
    kk = min(k, S)
    valid = np.zeros((G, k), dtype=bool)
    valid[:, :kk] = np.arange(kk) < real_modes[:, None]
    ev = np.zeros((G, k), dtype=w.dtype)
    ev[:, :kk] = np.where(valid[:, :kk], np.maximum(w[:, :kk], 0.0), 0.0)  # PSD: clip -1e-16
    V = canonical_phase(U[:, :, :kk]) * valid[:, None, :kk]
    R = L @ V - V * ev[:, None, :kk]
    res = float(np.sqrt(np.max((np.abs(R) ** 2).sum(axis=1)))) if R.size else 0.0
    ambiguous = ambiguous_modes(ev, valid, w[:, min(k, S - 1)], (k < real_modes) & (k < S))
    full = np.zeros((G, S, k), dtype=V.dtype)
    full[:, :, :kk] = V
    return full, ev, valid, ambiguous, res


def _dense_batch(
    gs: GraphBatch,
    k: int,
    q: float,
    q_relative: bool,
    *,
    dtype=np.float64,
    bucket: int = 1,
    only=None,
    workers: int | None = 1,
) -> tuple[LapBatch, float]:
    """Dense magnetic PE of the graphs ``only`` (default all) and the largest residual."""
    sizes = gs.sizes
    table = ModeTable(sizes, k, np.complex64 if np.dtype(dtype) == np.float32 else np.complex128, np.float64)
    idx_all = np.arange(len(gs)) if only is None else np.asarray(only, dtype=np.int64)
    sub_sizes = sizes[idx_all]

    def run(local, A):
        table.put(idx_all[local], *_group_pe(A, sub_sizes[local], k, q, q_relative, dtype))

    run_dense_groups(sub_sizes, packed_edges(gs.take(idx_all)), run, bucket=bucket, workers=workers)
    return table.result(dtype)


def _magnetic_matrix(g: Graph, q: float, q_relative: bool):
    """Sparse ``L^(q)`` (complex) of the whole graph, the symmetrised adjacency and the absolute q."""
    n = g.num_nodes
    A = adjacency(g, symmetrize=False)
    Bind = (A > 0).astype(np.float64).tocsr()
    As = A.maximum(A.T).tocsr()
    if q_relative:
        q = q / max(1, int((Bind - Bind.multiply(Bind.T)).sum()))
    deg = np.asarray(As.sum(axis=1)).ravel()
    C = As.tocoo()
    # (an edgeless graph: indexing with empty arrays would give a sparse matrix, not values)
    theta = np.asarray((Bind - Bind.T).tocsr()[C.row, C.col]).ravel() if C.nnz else np.zeros(0)
    scale = C.data / np.sqrt(deg[C.row] * deg[C.col])  # one rounding per entry (see laplacian)
    H = sp.csr_matrix((scale * np.exp(2j * np.pi * q * theta), (C.row, C.col)), shape=(n, n))
    L = (sp.diags((deg > 0).astype(np.complex128)) - H).tocsr()
    return L, As, q


def _sparse_graph(g: Graph, k: int, q: float, q_relative: bool, *, options: SolverOptions):
    """Per-component decomposition of a large directed graph; the k lowest modes overall."""
    dense_max = options.dense_max
    L, As, q_abs = _magnetic_matrix(g, q, q_relative)
    comps = [nodes for nodes in components(As) if len(nodes) >= 2]
    small = [nodes for nodes in comps if len(nodes) <= dense_max]
    modes = ComponentModes()
    if small:
        A = adjacency(g, symmetrize=False)
        sub = GraphBatch.of([_directed_subgraph(A, nodes, g.name) for nodes in small])
        modes.add_dense(small, *_dense_batch(sub, min(k + 1, max(len(nodes) for nodes in small)), q_abs, False))
    for nodes in (nodes for nodes in comps if len(nodes) > dense_max):
        Lc = L if len(nodes) == g.num_nodes else L[nodes][:, nodes].tocsr()
        r = smallest_eigenpairs(Lc, min(k + 1, len(nodes)), name=g.name, options=options)
        modes.add_sparse(nodes, np.maximum(r.eigvals, 0.0), canonical_phase(r.vectors), r)
    return modes.merge(g.num_nodes, k, dtype=np.complex128)


def _directed_subgraph(A, nodes: np.ndarray, name: str) -> Graph:
    """The directed edges of adjacency ``A`` inside ``nodes`` (renumbered)."""
    sub = A[nodes][:, nodes].tocoo()
    return Graph(np.stack([sub.row, sub.col]).astype(np.int64), len(nodes), sub.data, True, name)
