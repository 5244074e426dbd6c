r"""Spectral PEs (LapPE, magnetic LapPE): result types, the solve skeleton, merging, degeneracy.

:func:`solve_graph` and :func:`solve_batch` are the one driver both spectral families use: a
family supplies a dense batched kernel (``(G, S, S)`` adjacencies of one size group → modes,
collected in a :class:`ModeTable`) and a sparse per-component path (collected in a
:class:`ComponentModes`); the drivers pick the path per graph and shape the output.

A (magnetic) Laplacian is block diagonal over connected components, so its eigenpairs are
those of the components. Each component contributes its ``k + 1`` smallest candidate modes
(after dropping its trivial ones); the ``k`` smallest over all components are kept (ties: lower
component first) and the ``(k+1)``-th tells whether the cut at ``k`` splits a degenerate
eigenspace.

**Ambiguous modes.** Kept mode ``j`` is *ambiguous* when its eigenvalue coincides with the first
eigenvalue *not* kept, ``|λ_j − λ_{k+1}| <= DEGENERACY_ATOL + DEGENERACY_RTOL·|λ_{k+1}|``: the
kept columns of that eigenspace are then an arbitrary part of it (e.g. ``k = 1`` on a cycle, or
one of two identical components), so a basis-invariant encoding should not rely on them.
Degenerate eigenspaces wholly inside the ``k`` kept modes are not ambiguous as a subspace (their
basis still is; compare projectors).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..exceptions import EigenConvergenceError
from ._args import MAX_K, check_int
from ._graph_utils import Graph, GraphBatch, batch_output, output_like, scatter_rows, to_output
from ._sparse_eigen import RESIDUAL_MAX, EigenResult
from .solver import SolverOptions

__all__ = [
    "DEGENERACY_ATOL",
    "DEGENERACY_RTOL",
    "ComponentModes",
    "LapBatch",
    "ModeTable",
    "SolveReport",
    "SpectralPE",
    "check_k",
    "components",
    "solve_batch",
    "solve_graph",
    "ambiguous_modes",
    "edge_rayleigh_quotients",
    "merge_modes",
]

DEGENERACY_ATOL = 1e-12
DEGENERACY_RTOL = 1e-6


@dataclass(frozen=True)
class SolveReport:
    """How the eigenpairs of one graph were obtained and checked.

    Attributes
    ----------
    methods : tuple of str
        Method per large component (``"dense"`` for the batched dense path).
    max_residual : float
        ``max ‖Lu − λu‖`` over the returned modes.
    orthogonality : float
        ``max |UᴴU − I|`` over each solved block.
    notes : tuple of str
        Fallbacks and completeness-check findings (empty when nothing happened).
    memory_estimate : int
        Largest memory estimate (bytes) made before a sparse solve; 0 if none.

    Examples
    --------
    >>> SolveReport(("dense",), 1e-15, 1e-15).notes
    ()
    """

    methods: tuple[str, ...] = ()
    max_residual: float = 0.0
    orthogonality: float = 0.0
    notes: tuple[str, ...] = ()
    memory_estimate: int = 0


class _PE(NamedTuple):
    pe: Any
    eigvals: Any
    mask: Any


class SpectralPE(_PE):
    """``(pe, eigvals, mask)`` of one graph — unpacks as that 3-tuple — plus ``ambiguous``
    (``(k,)`` bool, see the module docstring) and ``report`` (:class:`SolveReport`).

    Examples
    --------
    >>> r = SpectralPE(np.zeros((3, 1)), np.ones(1), np.ones(1, bool), np.zeros(1, bool), SolveReport())
    >>> pe, ev, mask = r
    >>> r.ambiguous.tolist(), r.report.methods
    ([False], ())
    """

    ambiguous: Any
    report: SolveReport

    def __new__(cls, pe, eigvals, mask, ambiguous, report: SolveReport):
        self = super().__new__(cls, pe, eigvals, mask)
        self.ambiguous = ambiguous
        self.report = report
        return self


class LapBatch(NamedTuple):
    """Batched PE: rows of all graphs concatenated (PyG ``Batch`` layout).

    Examples
    --------
    A triangle and an edge, ``k = 2``: the normalised Laplacian of a triangle has ``3/2``
    twice, an edge has ``2`` once, so the edge's second mode is masked out.

    >>> import numpy as np
    >>> from structpos.coords.laplacian import laplacian_pe_batch
    >>> tri = (np.array([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]), 3)
    >>> edge = (np.array([[0, 1], [1, 0]]), 2)
    >>> b = laplacian_pe_batch([tri, edge], 2)
    >>> b.ptr.tolist(), b.eigvals.round(6).tolist(), b.mask.tolist()
    ([0, 3, 5], [[1.5, 1.5], [2.0, 0.0]], [[True, True], [True, False]])
    >>> b.graph(1)[0].shape
    (2, 2)
    """

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


def check_k(k) -> int:
    """``k`` as an int, or :class:`~structpos.exceptions.SpecError` unless it is an integer in
    ``[1, MAX_K]`` (the cap of ``lap:k``; ``k`` sizes the ``(N, k)`` output).

    Examples
    --------
    >>> check_k(3)
    3
    >>> check_k(10**9)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: k must be an integer in [1, 4096], got 1000000000
    """
    return check_int(k, "k", 1, MAX_K)


def components(A) -> list[np.ndarray]:
    """Node indices of every connected component of the sparse adjacency ``A``, largest first."""
    ncomp, labels = connected_components(A, directed=False)
    sizes = np.bincount(labels, minlength=ncomp)
    order = np.argsort(labels, kind="stable")
    members = np.split(order, np.cumsum(sizes)[:-1])
    return [members[c] for c in np.argsort(-sizes, kind="stable")]


class ModeTable:
    """The output arrays of a dense batch, filled one size group at a time (from threads).

    ``put`` writes the modes of a group's graphs (disjoint rows per graph, so concurrent groups
    do not race); ``result`` checks the largest eigenpair residual and returns the
    :class:`LapBatch` with that residual.
    """

    def __init__(self, sizes: np.ndarray, k: int, pe_dtype, eig_dtype) -> None:
        B = len(sizes)
        self.sizes = sizes
        self.ptr = np.concatenate([[0], np.cumsum(sizes)])
        self.pe = np.zeros((int(self.ptr[-1]), k), dtype=pe_dtype)
        self.eigvals = np.zeros((B, k), dtype=eig_dtype)
        self.mask = np.zeros((B, k), dtype=bool)
        self.ambiguous = np.zeros((B, k), dtype=bool)
        self.residual = [0.0]

    def put(self, idx: np.ndarray, V: np.ndarray | None, ev: np.ndarray, valid, ambiguous, residual: float) -> None:
        """Modes of graphs ``idx``: ``V (G, S, k)`` padded (``None``: already written into ``pe``),
        ``ev``/``valid``/``ambiguous`` ``(G, k)``."""
        self.eigvals[idx], self.mask[idx], self.ambiguous[idx] = ev, valid, ambiguous
        self.residual.append(residual)
        if V is not None:
            scatter_rows(self.pe, self.ptr, idx, self.sizes[idx], V)

    def result(self, dtype) -> tuple[LapBatch, float]:
        """The batch and its largest residual; :class:`EigenConvergenceError` when ``eigh`` was inaccurate."""
        res = max(self.residual)
        if res > RESIDUAL_MAX * (1e3 if np.dtype(dtype) == np.float32 else 1):
            raise EigenConvergenceError(f"dense eigh returned a residual of {res:.2e}", residuals=[res])
        return LapBatch(self.pe, self.eigvals, self.mask, self.ptr, self.ambiguous), res


@dataclass
class ComponentModes:
    """Candidate modes of one graph's connected components and how they were solved.

    Components are added in order (dense ones first, as one batch); :meth:`merge` keeps the
    ``k`` smallest modes over all of them (:func:`merge_modes`) and writes the
    :class:`SolveReport`.
    """

    cands: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    residual: float = 0.0
    orthogonality: float = 0.0
    memory: int = 0

    def add_dense(self, comps: Sequence[np.ndarray], batch: LapBatch, residual: float) -> None:
        """The modes of components ``comps`` solved as one dense batch (graph ``j`` = ``comps[j]``)."""
        for j, nodes in enumerate(comps):
            m = batch.mask[j]
            self.cands.append((nodes, batch.eigvals[j][m], batch.pe[batch.ptr[j] : batch.ptr[j + 1]][:, m]))
        self.methods.append("dense")
        self.residual = max(self.residual, residual)

    def add_sparse(self, nodes: np.ndarray, eigvals: np.ndarray, vectors: np.ndarray, r: EigenResult) -> None:
        """One component's modes from the sparse layer (``r`` is its result, for the report)."""
        self.cands.append((nodes, eigvals, vectors))
        self.methods.append(r.method)
        self.notes.extend(r.notes)
        self.residual = max(self.residual, r.max_residual)
        self.orthogonality = max(self.orthogonality, r.orthogonality)
        self.memory = max(self.memory, r.memory_estimate)

    def merge(self, n: int, k: int, dtype=np.float64):
        """``(pe, eigvals, mask, ambiguous, report)`` of the ``k`` smallest modes overall."""
        pe, ev, mask, amb = merge_modes(n, k, self.cands, dtype=dtype)
        report = SolveReport(tuple(self.methods), self.residual, self.orthogonality, tuple(self.notes), self.memory)
        return pe, ev, mask, amb, report


DenseSolver = Callable[..., tuple[LapBatch, float]]
SparseSolver = Callable[..., tuple[Any, Any, Any, Any, SolveReport]]


def solve_graph(
    edge_index: Any, g: Graph, options: SolverOptions, dense: DenseSolver, sparse: SparseSolver
) -> SpectralPE:
    """One graph's PE: ``dense(GraphBatch.of([g]))`` for ``method="dense"``, or ``"auto"`` and at most
    ``dense_max`` nodes; else ``sparse(g)`` (which reads the method from the same options).

    The result follows ``edge_index``'s type (torch in, torch out).
    """
    if options.method == "dense" or (options.method == "auto" and g.num_nodes <= options.dense_max):
        out, res = dense(GraphBatch.of([g]))
        pe, ev, mask, amb = out.pe, out.eigvals[0], out.mask[0], out.ambiguous[0]
        report = SolveReport(("dense",), res, 0.0)
    else:
        pe, ev, mask, amb, report = sparse(g)
    like = output_like(edge_index)
    return SpectralPE(to_output(pe, like), to_output(ev, like), to_output(mask, like), to_output(amb, like), report)


def solve_batch(gs: GraphBatch, dense_max: int, as_torch: bool | None, dense: DenseSolver, sparse) -> LapBatch:
    """Many graphs' PEs: those up to ``dense_max`` nodes by ``dense(gs, only=...)``, larger ones by
    ``sparse(g)`` one at a time; torch output as :func:`._graph_utils.batch_output` decides."""
    sizes = gs.sizes
    out, _ = dense(gs, only=np.flatnonzero(sizes <= dense_max))
    for i in np.flatnonzero(sizes > dense_max):
        pe, ev, mask, amb, _ = sparse(gs[int(i)])
        out.pe[out.ptr[i] : out.ptr[i + 1]] = pe
        out.eigvals[i], out.mask[i], out.ambiguous[i] = ev, mask, amb
    return LapBatch(*batch_output(out, gs, as_torch))


def ambiguous_modes(kept: np.ndarray, valid: np.ndarray, nxt: np.ndarray, has_next: np.ndarray) -> np.ndarray:
    """Per-mode ambiguity flags ``(..., k)`` from the kept eigenvalues and the first one not kept.

    Examples
    --------
    >>> ambiguous_modes(np.array([0.5, 1.0]), np.array([True, True]), np.array(1.0), np.array(True)).tolist()
    [False, True]
    """
    nxt = np.asarray(nxt)[..., None]
    tol = DEGENERACY_ATOL + DEGENERACY_RTOL * np.abs(nxt)
    return valid & np.asarray(has_next)[..., None] & (np.abs(kept - nxt) <= tol)


def merge_modes(n: int, k: int, comps: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], dtype=np.float64):
    """The ``k`` smallest modes over components: ``(pe (n, k), eigvals (k,), mask (k,), ambiguous (k,))``.

    ``comps`` holds ``(nodes, w, V)`` per component: its node indices, ascending candidate
    eigenvalues ``w`` and eigenvectors ``V (len(nodes), len(w))``; each component must give
    ``min(k + 1, available)`` candidates so that the first mode not kept is known.

    Examples
    --------
    Two identical components, one mode each, ``k = 1``: the kept mode is ambiguous.

    >>> c = (np.array([0, 1]), np.array([2.0]), np.array([[0.6], [0.8]]))
    >>> d = (np.array([2, 3]), np.array([2.0]), np.array([[0.6], [0.8]]))
    >>> pe, ev, mask, amb = merge_modes(4, 1, [c, d])
    >>> pe[:, 0].tolist(), amb.tolist()
    ([0.6, 0.8, 0.0, 0.0], [True])
    """
    pe = np.zeros((n, k), dtype=dtype)
    ev = np.zeros(k)
    mask = np.zeros(k, dtype=bool)
    amb = np.zeros(k, dtype=bool)
    if not comps:
        return pe, ev, mask, amb
    vals = np.concatenate([w for _, w, _ in comps])
    comp = np.repeat(np.arange(len(comps)), [len(w) for _, w, _ in comps])
    col = np.concatenate([np.arange(len(w)) for _, w, _ in comps])
    order = np.lexsort((col, comp, vals))
    pick = order[:k]
    for j, p in enumerate(pick):
        nodes, _, V = comps[comp[p]]
        pe[nodes, j] = V[:, col[p]]
    t = len(pick)
    ev[:t] = vals[pick]
    mask[:t] = True
    if len(order) > k:
        amb = ambiguous_modes(ev, mask, vals[order[k]], np.array(True))
    return pe, ev, mask, amb


def edge_rayleigh_quotients(U: np.ndarray, A, deg: np.ndarray, w: np.ndarray, phase=None) -> np.ndarray:
    """Eigenvalues of a normalised (magnetic) Laplacian recomputed as edge sums, where accurate.

    ``uᴴLu = Σ_{i<j} A_ij |y_i − e^{iθ_ij} y_j|²`` with ``y = D^{-1/2} u`` is a sum of
    non-negative terms, each a difference computed to its own relative precision, so tiny
    eigenvalues (``~1/N²`` on paths and grids) keep ~1e-12 relative accuracy, where ``uᴴ(Lu)``
    loses ~ε absolute (1e-5 relative at ``λ = 5e-12``). ``phase`` (optional, same pattern as
    ``A``) holds ``e^{iθ_ij}``. Kept where it agrees with ``w`` to 1e-6 relative (else ``w``).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> u = np.array([[1.0], [-1.0]]) / np.sqrt(2)
    >>> np.round(edge_rayleigh_quotients(u, A, np.ones(2), np.array([2.0])), 12).tolist()
    [2.0]
    """
    C = sp.triu(A, k=1).tocoo()
    ph = None if phase is None else _entries(phase, C.row, C.col)
    Y = np.asfortranarray(U / np.sqrt(deg)[:, None])
    lam = np.empty(Y.shape[1])
    for j in range(Y.shape[1]):  # one column at a time: (E,) temporaries, not (E, k)
        y = Y[:, j]
        diff = y[C.row] - (y[C.col] if ph is None else y[C.col] * ph)
        lam[j] = C.data @ (diff.real**2 + diff.imag**2 if np.iscomplexobj(diff) else diff * diff)
    ok = np.abs(lam - w) <= 1e-6 * np.maximum(np.abs(w), 1e-300) + 1e-15
    return np.where(ok, lam, w)


def _entries(M, rows, cols) -> np.ndarray:
    return np.asarray(M[rows, cols]).ravel()
