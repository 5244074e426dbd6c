r"""Spectral PEs of one graph from its connected components: result type, merging, degeneracy.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

__all__ = [
    "DEGENERACY_ATOL",
    "DEGENERACY_RTOL",
    "SolveReport",
    "SpectralPE",
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
