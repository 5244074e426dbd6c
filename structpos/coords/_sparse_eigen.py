r"""The large-graph eigensolver layer: the smallest eigenpairs of a sparse Hermitian PSD matrix,
checked, with a method picked per matrix.

:func:`smallest_eigenpairs` returns the ``m`` smallest eigenpairs of ``L`` on the orthogonal
complement of a known null space ``Z`` (the trivial modes of a Laplacian component), as an
:class:`EigenResult` that carries the residuals, the orthonormality error, the method that
produced the answer and any fallback taken. Methods:

``dense``
    LAPACK ``eigh`` of the densified matrix (``Z`` shifted to the top of the spectrum).
``shift-invert``
    Krylov (ARPACK) on the inverse: a sparse LU (SuperLU, minimum-degree ordering of
    ``L + Lᵀ``, symmetric mode) of ``L`` *grounded* at one node when ``Z`` is one vector ``z``
    — delete row and column ``r = argmax |z|``; the reduced matrix is nonsingular and
    ``L⁺b`` on ``z^⊥`` is its solve, padded with ``x_r = 0`` and projected — so no shift is
    needed and eigenvalues as small as ``1/N²`` (paths, grids) stay well separated
    (``θ = 1/λ``). Without a null space, ``L − σI`` with ``σ = SHIFT`` (slightly below 0).
``lanczos``
    Implicitly restarted Lanczos (ARPACK ``'SA'``) on ``L + s ZZᴴ`` (``s`` above the spectrum),
    with a wide Krylov basis: the method for well-conditioned graphs (expanders, random and
    scale-free graphs), whose factorisations fill in but whose smallest eigenvalues are far
    from 0.
``amg``
    LOBPCG preconditioned by a pyamg smoothed-aggregation V-cycle (near-null space ``Z``),
    constraints ``Z``: for graphs whose factorisation fill-in explodes (3-D meshes) but which are
    badly conditioned.
``lobpcg``
    Plain LOBPCG (no preconditioner), kept for comparison.

``auto`` picks: ``dense`` up to ``dense_max`` rows; else a 20-step Lanczos estimate of the
smallest eigenvalue on ``Z^⊥``: ``>= WELL_CONDITIONED`` → ``lanczos``; else ``shift-invert``
when the envelope of the reverse-Cuthill–McKee ordering (an upper bound on a band
factorisation's fill, about ten times the minimum-degree fill on 2-D grids) is below
``FACTOR_ENVELOPE_MAX``, else ``amg``.

Every answer is checked:

1. a final Rayleigh–Ritz on the found subspace (orthonormal, projected off ``Z``);
2. residuals ``‖Lu − λu‖ <= RESIDUAL_MAX`` and orthonormality ``‖UᴴU − I‖_max <= ORTHO_MAX``;
3. **completeness**: on ``(Z ∪ U)^⊥`` there must be no eigenvalue below the ``m``-th one
   found — single-vector Krylov methods can miss copies of a degenerate eigenvalue (torus
   grids, hypercubes, identical components), and the block size ``m + extra`` alone does not
   prove otherwise. For the Krylov methods the certificate is one *unrestarted* three-term
   Lanczos run on the deflated operator from a fresh random start (see
   :func:`_lanczos_certificate`: ``O(n)`` memory, a handful of vector operations per step,
   no restarts, so about five times cheaper than a second ARPACK run); when it raises an alarm
   — a Ritz value below ``λ_m`` — a deflated run of the method itself recovers the missed
   pair, and the certificate is repeated. LOBPCG-based methods use that deflated run directly.

With ``method="auto"`` a method that fails (no convergence, a factorisation out of memory,
a failed check) falls back to the next (``shift-invert → amg → dense``, ``lanczos → amg →
dense``, ``amg → lanczos → dense``; dense only up to ``DENSE_FALLBACK_MAX`` rows) and
``EigenResult.notes`` says so; an explicitly chosen method does not fall back. When nothing
converges, :class:`~structpos.exceptions.EigenConvergenceError` carries the residuals.

Length: this module is over 600 lines on purpose. It is one concept, the certified sparse eigensolver
layer: the method choice, the solvers (dense, shift-invert, Lanczos, AMG, LOBPCG) and the one
certificate they all return share private deflation and residual helpers; split, each solver module
would import the others' privates.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh_tridiagonal
from scipy.sparse.csgraph import reverse_cuthill_mckee
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh, lobpcg, splu

from ..exceptions import EigenConvergenceError
from .solver import SOLVER_METHODS, SolverMethod, SolverOptions, solver_options

__all__ = [
    "RESIDUAL_MAX",
    "SHIFT",
    "SPARSE_METHODS",
    "EigenResult",
    "SparseMethod",
    "smallest_eigenpairs",
]

SparseMethod = SolverMethod
SPARSE_METHODS = SOLVER_METHODS

SHIFT = -1e-10
"""Shift ``σ`` of ``L − σI`` when no null space is known (magnetic Laplacian): just below the
smallest possible eigenvalue 0, far below the smallest eigenvalues of large paths (~1e-11·…)."""
RESIDUAL_MAX = 1e-6
"""Largest accepted ``‖Lu − λu‖`` of a returned unit eigenvector."""
ORTHO_MAX = 1e-8
"""Largest accepted ``|UᴴU − I|`` entry (and ``|ZᴴU|`` entry)."""
WELL_CONDITIONED = 0.02
"""``auto`` uses Lanczos when the smallest eigenvalue on ``Z^⊥`` is estimated above this."""
FACTOR_ENVELOPE_MAX = 2e9
"""``auto`` factorises when the RCM envelope (entries) is below this (≈ 2e8 fill entries)."""
CERTIFY_TOL = 1e-6
"""Relative residual to which the completeness certificate converges its extreme Ritz value
(the tolerance the deflated ARPACK round used before it)."""
CERTIFY_MAXSTEPS = 3000
"""Lanczos steps after which an unconverged certificate gives way to the deflated round."""
DENSE_FALLBACK_MAX = 8000
"""Largest matrix the ``auto`` chain densifies as a last resort."""
SEED = 0

logger = logging.getLogger("structpos.spectra")


@dataclass(frozen=True)
class EigenResult:
    """Checked eigenpairs of one matrix.

    Attributes
    ----------
    eigvals : ndarray, shape (m,)
        Ascending eigenvalues (Rayleigh quotients of ``vectors``).
    vectors : ndarray, shape (n, m)
        Orthonormal eigenvectors, orthogonal to the null space that was excluded.
    residuals : ndarray, shape (m,)
        ``‖L u_j − λ_j u_j‖₂`` per mode.
    orthogonality : float
        ``max |UᴴU − I|`` (and ``|ZᴴU|``).
    method : str
        The method whose answer this is.
    notes : tuple of str
        Fallbacks taken and why, completeness rounds that found missed modes.
    memory_estimate : int
        Bytes estimated before the solve (0 for dense).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> r = smallest_eigenpairs(sp.diags([3.0, 1.0, 2.0]), 2)
    >>> r.eigvals.tolist(), r.method
    ([1.0, 2.0], 'dense')
    """

    eigvals: np.ndarray
    vectors: np.ndarray
    residuals: np.ndarray
    orthogonality: float
    method: str
    notes: tuple[str, ...] = ()
    memory_estimate: int = 0
    seconds: float = field(default=0.0, compare=False)

    @property
    def max_residual(self) -> float:
        """``max_j ‖L u_j − λ_j u_j‖`` (0 when empty)."""
        return float(self.residuals.max()) if self.residuals.size else 0.0


class _Failed(Exception):
    """A method did not produce an acceptable answer (message says why; residuals if any)."""

    def __init__(self, message: str, residuals=None):
        super().__init__(message)
        self.residuals = residuals


# ---------------------------------------------------------------- public entry point
def smallest_eigenpairs(
    L,
    m: int,
    *,
    null: np.ndarray | None = None,
    method: SparseMethod | None = None,
    tol: float | None = None,
    maxiter: int | None = None,
    dense_max: int | None = None,
    name: str = "<graph>",
    progress: Callable[[str], None] | None = None,
    options: SolverOptions | None = None,
) -> EigenResult:
    """The ``m`` smallest eigenpairs of Hermitian PSD ``L`` on the complement of ``null``.

    Parameters
    ----------
    L : sparse matrix or ndarray, shape (n, n)
        Hermitian positive semi-definite (real or complex).
    m : int
        Eigenpairs wanted (``<= n - null.shape[1]``).
    null : ndarray, shape (n, c), optional
        Orthonormal basis of known eigenvectors of eigenvalue 0, excluded from the answer.
    method : {"auto", "dense", "shift-invert", "lanczos", "amg", "lobpcg"}, optional
        See the module docstring. Only ``"auto"`` falls back to another method.
    tol : float, optional
        Relative convergence tolerance of the iterative methods.
    maxiter : int, optional
        Iteration cap of the iterative methods (default: the method's own).
    dense_max : int, optional
        ``auto`` decomposes matrices up to this size densely.
    name : str
        Named in progress messages and errors.
    progress : callable, optional
        Called with a line of text at each stage of a sparse solve (method chosen and why,
        memory estimate, time taken). Messages also go to the ``structpos.spectra`` logger.
    options : SolverOptions, optional
        The five settings above in one value (:class:`.solver.SolverOptions`; defaults
        ``"auto"``, ``tol=1e-10``, ``maxiter=None``, ``dense_max=256``, no progress); a keyword
        that is given replaces its field.

    Returns
    -------
    EigenResult

    Raises
    ------
    EigenConvergenceError
        No method gave an answer that passed the checks (``residuals`` of the last attempt).
    SpecError
        Unknown ``method`` or another setting out of range (:class:`.solver.SolverOptions`).
    ValueError
        ``m`` out of range.

    Examples
    --------
    The path on 4 nodes: combinatorial Laplacian eigenvalues ``2 - 2 cos(πj/4)``.

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.diags([np.ones(3), np.ones(3)], [-1, 1])
    >>> L = sp.diags(np.asarray(A.sum(1)).ravel()) - A
    >>> r = smallest_eigenpairs(L, 2, null=np.full((4, 1), 0.5))
    >>> np.allclose(r.eigvals, 2 - 2 * np.cos(np.pi * np.array([1, 2]) / 4)), r.max_residual < 1e-12
    (True, True)
    """
    opts = solver_options(options, method=method, tol=tol, maxiter=maxiter, dense_max=dense_max, progress=progress)
    method, tol, maxiter, dense_max = opts.method, opts.tol, opts.maxiter, opts.dense_max
    n = L.shape[0]
    Z = np.zeros((n, 0)) if null is None else np.asarray(null)
    if not 0 <= m <= n - Z.shape[1]:
        raise ValueError(f"m={m} eigenpairs asked of a {n}x{n} matrix with a {Z.shape[1]}-dim null space")
    L = sp.csr_matrix(L) if not sp.issparse(L) else L.tocsr()
    say = _reporter(opts.progress, name)
    t0 = time.perf_counter()
    if m == 0:
        return EigenResult(np.zeros(0), np.zeros((n, 0), dtype=L.dtype), np.zeros(0), 0.0, "none")
    envelope = None
    if method == "auto":
        chain, why, envelope = _auto_chain(L, Z, dense_max)
        say(f"{n:,} rows, {L.nnz:,} nonzeros: {why}")
    else:
        chain = [method]
    notes: list[str] = []
    last = None
    for i, meth in enumerate(chain):
        if meth == "dense" and i > 0 and n > DENSE_FALLBACK_MAX:
            continue
        est = _memory_estimate(L, m, meth, envelope)
        if meth != "dense":
            say(f"{meth}: {m} eigenpairs, memory estimate {_fmt_bytes(est)}")
        try:
            w, U, extra_notes, res, ortho = _solve_checked(L, Z, m, meth, tol, maxiter, say)
        except (
            _Failed,
            MemoryError,
            ArpackError,
            ArpackNoConvergence,
            np.linalg.LinAlgError,
            RuntimeError,
            ValueError,  # ARPACK refuses k close to n ("ncv must be k+1<ncv<=n", "k >= N - 1")
            TypeError,
        ) as e:
            last = e
            notes.append(f"{meth} failed ({_short(e)})")
            say(notes[-1] + (f"; falling back to {chain[i + 1]}" if i + 1 < len(chain) else ""))
            continue
        secs = time.perf_counter() - t0
        if meth != "dense" or i > 0:
            say(f"{meth}: done in {secs:.2f} s, max residual {res.max():.1e}, orthogonality {ortho:.1e}")
        if i > 0:
            notes.append(f"answer from the fallback method {meth}")
        return EigenResult(w, U, res, ortho, meth, tuple(notes + extra_notes), est, secs)
    residuals = getattr(last, "residuals", None)
    raise EigenConvergenceError(
        f"the {m} smallest eigenpairs of the {n}-row matrix did not converge ({'; '.join(notes)}). "
        "Try a larger maxiter, method='auto', or method='dense' if the graph fits in memory.",
        residuals=residuals,
        name=name,
    )


def _reporter(progress, name):
    def say(msg: str) -> None:
        logger.info("%s: %s", name, msg)
        if progress is not None:
            progress(f"{name}: {msg}")

    return say


def _short(e: Exception) -> str:
    s = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return s[:200]


def _fmt_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{int(b)} B"
        b /= 1024
    return f"{b:.1f} TiB"


# ---------------------------------------------------------------- method choice
def _auto_chain(L, Z, dense_max: int) -> tuple[list[str], str, float | None]:
    n = L.shape[0]
    if n <= dense_max:
        return ["dense"], "dense eigh", None
    low = _lowest_ritz(L, Z)
    if low >= WELL_CONDITIONED:
        return ["lanczos", "amg", "dense"], f"smallest eigenvalue ≈ {low:.3g} (well conditioned): Lanczos", None
    env = _rcm_envelope(L)
    if env <= FACTOR_ENVELOPE_MAX:
        return (
            ["shift-invert", "amg", "dense"],
            f"smallest eigenvalue ≲ {low:.2g}, RCM envelope {env:.2g} entries: shift-invert with a sparse LU",
            env,
        )
    return (
        ["amg", "lanczos", "dense"],
        f"smallest eigenvalue ≲ {low:.2g}, RCM envelope {env:.2g} entries (fill-in too large): AMG-LOBPCG",
        env,
    )


def _lowest_ritz(L, Z, steps: int = 20) -> float:
    """Smallest Ritz value of ``steps`` Lanczos steps on ``Z^⊥`` (an upper bound of λ_min there)."""
    start = _start(L.shape[0], 1, L.dtype, Z)[:, 0]
    alpha, beta = [], []
    for a, b in _lanczos_steps(lambda x: L @ x, start, Z):
        alpha.append(a)
        beta.append(b)
        if len(alpha) >= min(steps, L.shape[0] - Z.shape[1]):
            break
    return _smallest_ritz(alpha, beta)[0]


def _rcm_envelope(L) -> float:
    """Entries of the lower envelope of ``L`` in reverse Cuthill–McKee order."""
    pattern = sp.csr_matrix((np.ones(L.nnz, dtype=np.int8), L.indices, L.indptr), shape=L.shape)
    perm = reverse_cuthill_mckee(pattern, symmetric_mode=True)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm))
    C = pattern.tocoo()
    r, c = inv[C.row], inv[C.col]
    first = np.full(L.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(first, r, c)
    rows = np.arange(L.shape[0])
    first = np.minimum(first, rows)
    return float(np.sum(rows - first))


def _memory_estimate(L, m: int, method: str, envelope: float | None = None) -> int:
    """Bytes a solve is expected to hold at its peak (vectors, matrix, factor or hierarchy).

    The LU fill is estimated as ``max(envelope / 8, 2 nnz(L))`` entries (measured: SuperLU's
    minimum-degree fill is 1/8-1/12 of the RCM envelope on 2-D grids, ``2 nnz`` on paths), or
    ``12 nnz(L)`` without an envelope; each fill entry costs a value and an index, twice (SuperLU
    keeps a working copy while it factorises)."""
    n, item = L.shape[0], np.dtype(L.dtype).itemsize
    matrix = L.nnz * (item + 4) + (n + 1) * 4
    if method == "dense":
        return 3 * n * n * item
    if method == "shift-invert":
        basis = n * max(2 * m + 1, 20) * item
        fill = max(envelope / 8, 2 * L.nnz) if envelope is not None else 12 * L.nnz
        return int(3 * matrix + 2 * fill * (item + 4) + basis)
    if method == "lanczos":
        return matrix + n * _lanczos_ncv(m, n) * item * 2
    return matrix * 4 + n * 3 * (m + _extra(m)) * item * 4  # amg / lobpcg: hierarchy + LOBPCG blocks


# ---------------------------------------------------------------- one method, checked
def _solve_checked(L, Z, m, method, tol, maxiter, say):
    """Run ``method``, Rayleigh–Ritz, check; then the deflated completeness rounds."""
    notes: list[str] = []
    if method == "dense":
        w, U = _dense(L, Z, m)
        return w, U, notes, *_check(L, Z, w, U)
    ctx = _Context(L, Z, tol, maxiter)
    want = min(m + _extra(m, method), L.shape[0] - Z.shape[1])
    w, U = ctx.run(method, want, np.zeros((L.shape[0], 0), dtype=L.dtype))
    w, U = _rayleigh_ritz(L, Z, U)
    checked = _accept(L, Z, w[:m], U[:, :m], method)
    # completeness: nothing left below λ_m in the complement of what was found
    for _ in range(8):
        free = L.shape[0] - Z.shape[1] - U.shape[1]
        if free <= 0:
            break
        below = w[m - 1] - _tie_tol(w[m - 1])
        if ctx.certify(method, U, below):  # cheap: one unrestarted Lanczos run, O(n) memory
            break
        # alarm (or no certificate for this method): a deflated run of the method itself finds the
        # missed pair (a missed copy shows as θ > 1/λ_m under shift-invert, θ < λ_m otherwise)
        w2, U2 = ctx.run(method, 1, U, tol=max(ctx.tol, CERTIFY_TOL))
        w2, U2 = _rayleigh_ritz(L, np.hstack([Z, U]), U2)
        found = w2 < below
        if not found.any():
            break
        notes.append(
            f"{method}: completeness check found {int(found.sum())} missed eigenpair(s) below λ_{m} = {w[m - 1]:.6g}"
        )
        say(notes[-1])
        w, U = _rayleigh_ritz(L, Z, np.hstack([U, U2[:, found]]))
    else:
        raise _Failed("completeness rounds did not settle")
    w, U = w[:m], U[:, :m]
    if notes:  # pairs were added: check the new answer
        checked = _accept(L, Z, w, U, method)
    return w, U, notes, *checked


def _tie_tol(lam: float) -> float:
    return 1e-13 + 1e-8 * abs(lam)


def _extra(m: int, method: str = "lobpcg") -> int:
    """Extra vectors beyond the ``m`` wanted: a LOBPCG block needs room for a degenerate cluster
    cut at ``m`` (``m // 2``, at least 4). The Krylov methods are not block methods — ARPACK
    finds copies of a degenerate eigenvalue only through rounding, whatever the count asked —
    and rely on the completeness certificate: they take none (measured with the Lanczos
    certificate, k = 8 on 100k-node random 4-regular and Barabási–Albert graphs: 2 extra Ritz
    pairs cost 1–11 % more CPU time; shift-invert's inverted spectrum is well separated)."""
    return 0 if method in ("shift-invert", "lanczos") else max(4, m // 2)


def _accept(L, Z, w, U, method) -> tuple[np.ndarray, float]:
    """``_check``'s residuals and orthogonality error, or :class:`_Failed` beyond the limits."""
    res, ortho = _check(L, Z, w, U)
    if res.size and (not np.all(np.isfinite(res)) or res.max() > RESIDUAL_MAX):
        raise _Failed(f"{method}: max residual {np.nanmax(res):.2e} > {RESIDUAL_MAX:g}", residuals=res)
    if ortho > ORTHO_MAX:
        raise _Failed(f"{method}: orthogonality error {ortho:.2e} > {ORTHO_MAX:g}", residuals=res)
    return res, ortho


def _check(L, Z, w, U) -> tuple[np.ndarray, float]:
    """Residual norms ``‖Lu − λu‖`` and ``max(|UᴴU − I|, |ZᴴU|)``."""
    if U.shape[1] == 0:
        return np.zeros(0), 0.0
    res = np.linalg.norm(L @ U - U * w, axis=0)
    G = U.conj().T @ U
    ortho = float(np.abs(G - np.eye(U.shape[1])).max())
    if Z.shape[1]:
        ortho = max(ortho, float(np.abs(Z.conj().T @ U).max()))
    return res, ortho


def _project(X, Z):
    """``X`` with its components along the orthonormal columns of ``Z`` removed."""
    if Z.shape[1] == 0:
        return X
    if Z.shape[1] == 1 and X.ndim == 1:  # the hot path of every solve: one null vector
        z = Z[:, 0]
        return X - z * np.vdot(z, X)
    Zh = Z.T.conj() if np.iscomplexobj(Z) else Z.T
    return X - Z @ (Zh @ X)


def _rayleigh_ritz(L, Z, U):
    """Orthonormalise ``U`` off ``Z`` (twice, for stability) and rotate it to Ritz vectors of ``L``."""
    Q = _orthonormal(_project(U, Z))
    Q = _orthonormal(_project(Q, Z))
    H = Q.conj().T @ (L @ Q)
    theta, V = np.linalg.eigh((H + H.conj().T) / 2)
    return theta, Q @ V


def _orthonormal(X):
    """An orthonormal basis of the columns of tall ``X`` by Cholesky QR: ``X R⁻¹`` with
    ``XᴴX = RᴴR`` — one Gram product and a small triangular inverse, ~10x faster than
    Householder QR on a million rows. Its orthogonality error grows like ``ε κ(X)²``, so it is
    used only when ``κ(X) <= 1e4`` (from the eigenvalues of the small Gram matrix; the
    eigensolvers' vectors are nearly orthonormal already), and the caller applies it twice
    (CholeskyQR2: error ``O(ε)``); otherwise Householder QR.

    Examples
    --------
    >>> X = np.array([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    >>> Q = _orthonormal(X)
    >>> bool(np.allclose(Q.T @ Q, np.eye(2))), bool(np.allclose(Q @ (Q.T @ X), X))
    (True, True)
    """
    if X.shape[1] == 0:
        return X
    G = X.conj().T @ X
    G = (G + G.conj().T) / 2
    g = np.linalg.eigvalsh(G)
    if not g[0] > 1e-8 * g[-1]:
        return np.linalg.qr(X)[0]
    C = np.linalg.cholesky(G)  # G = C Cᴴ: R = Cᴴ
    return X @ np.linalg.inv(C).conj().T


def _start(n: int, p: int, dtype, Z) -> np.ndarray:
    """A seeded random block off ``Z``; the seed depends on ``Z``'s width so that a completeness
    round does not restart from the main run's vector (whose Krylov space saw only one direction
    of each degenerate eigenspace in exact arithmetic)."""
    rng = np.random.default_rng([SEED, p, Z.shape[1]])
    X = rng.standard_normal((n, p))
    if np.issubdtype(dtype, np.complexfloating):
        X = X + 1j * rng.standard_normal((n, p))
    return _project(X, Z)


def _dense(L, Z, p):
    H = L.toarray()
    if Z.shape[1]:
        H += (_spectral_bound(L) + 1.0) * (Z @ Z.conj().T)
    w, U = np.linalg.eigh(H)
    return w[:p], U[:, :p]


def _spectral_bound(L) -> float:
    """Gershgorin bound on the largest eigenvalue: ``max_i Σ_j |L_ij|``."""
    return float(np.abs(L).sum(axis=1).max()) if L.nnz else 0.0


def _lanczos_ncv(p: int, n: int) -> int:
    return min(n - 1, max(3 * p, 32))


# ---------------------------------------------------------------- methods
class _Context:
    """One matrix, its null space ``Z`` and what the methods build once (a factorisation, an AMG
    hierarchy), reused by the completeness rounds, which deflate found vectors ``D`` as well."""

    def __init__(self, L, Z, tol, maxiter):
        self.L, self.Z, self.tol, self.maxiter = L, Z, tol, maxiter
        self.n = L.shape[0]
        self._lu = None
        self._amg = None

    def certify(self, method: str, D, below: float) -> bool:
        """True when a Lanczos certificate shows no eigenvalue below ``below`` on ``(Z ∪ D)^⊥``;
        False on an alarm, without convergence, or for the LOBPCG methods (no certificate: the
        caller runs the deflated round instead)."""
        ZD = np.hstack([self.Z, D]) if D.shape[1] else self.Z
        start = _start(self.n, 1, self.L.dtype, ZD)[:, 0]
        if method == "lanczos":
            theta, converged = _lanczos_certificate(lambda x: self.L @ x, start, ZD, below, every=4)
            return converged and theta >= below
        if method == "shift-invert":
            F = self._factor()
            gap = below - F.sigma  # λ < below  ⇔  −1/(λ − σ) < −1/gap (λ > σ on the complement)
            if gap <= 0:
                return False
            theta, converged = _lanczos_certificate(lambda x: -F.solve(x), start, ZD, -1.0 / gap, every=1)
            return converged and theta >= -1.0 / gap
        return False

    def run(self, method: str, p: int, D, tol: float | None = None):
        """``p`` approximate smallest eigenpairs on ``(Z ∪ D)^⊥`` (unchecked)."""
        ZD = np.hstack([self.Z, D]) if D.shape[1] else self.Z
        tol = self.tol if tol is None else tol
        if method == "shift-invert":
            return self._shift_invert(p, ZD, tol)
        if method == "lanczos":
            return self._lanczos(p, ZD, tol)
        if method in ("amg", "lobpcg"):
            return self._lobpcg(p, ZD, amg=method == "amg")
        raise ValueError(f"unknown eigensolver method {method!r}")

    # -- Lanczos on L + s·ZZᴴ
    def _lanczos(self, p, ZD, tol):
        L, n = self.L, self.n
        s = _spectral_bound(L) + 1.0

        def mv(x):
            return L @ x + s * (ZD @ (ZD.conj().T @ x))

        op = LinearOperator(L.shape, matvec=mv, matmat=mv, dtype=L.dtype)
        v0 = _start(n, 1, L.dtype, ZD)[:, 0]
        return eigsh(op, k=p, which="SA", v0=v0, tol=tol, ncv=_lanczos_ncv(p, n), maxiter=self.maxiter or 50 * n)

    # -- Krylov on the inverse
    def _factor(self):
        if self._lu is None:
            self._lu = _Inverse(self.L, self.Z)
        return self._lu

    def _shift_invert(self, p, ZD, tol):
        F, n = self._factor(), self.n
        extra = ZD[:, self.Z.shape[1] :]  # found vectors deflated by a completeness round

        def mv(x):  # F.solve projects off Z itself
            if extra.shape[1] == 0:
                return F.solve(x)
            return _project(F.solve(_project(x, extra)), extra)

        op = LinearOperator((n, n), matvec=mv, matmat=mv, dtype=self.L.dtype)
        v0 = _start(n, 1, self.L.dtype, ZD)[:, 0]
        ncv = max(2 * p + 1, 20) if extra.shape[1] == 0 else max(2 * p + 1, 8)  # a round wants one pair
        theta, U = eigsh(op, k=p, which="LM", v0=v0, tol=tol, ncv=min(n - 1, ncv), maxiter=self.maxiter or 10 * n)
        return 1.0 / np.real(theta) + F.sigma, U

    # -- LOBPCG, optionally AMG-preconditioned
    def _lobpcg(self, p, ZD, *, amg: bool):
        L, n = self.L, self.n
        q = min(max(p, 5), n - ZD.shape[1])  # p already holds the extra block vectors (main run)
        if n < max(100, 5 * (q + ZD.shape[1])):  # LOBPCG is unreliable on tiny problems (scipy goes dense too)
            return _dense(L, ZD, p)
        X = _start(n, q, L.dtype, ZD)
        if amg and self._amg is None:
            self._amg = _amg_preconditioner(L, self.Z)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # judged by the residual check instead
            try:
                w, U = lobpcg(
                    L,
                    X,
                    M=self._amg if amg else None,
                    Y=ZD if ZD.shape[1] else None,
                    tol=max(self.tol, 1e-13),
                    maxiter=self.maxiter or (300 if amg else 1000),
                    largest=False,
                )
            except (ValueError, np.linalg.LinAlgError) as e:  # e.g. a Gram matrix not positive definite
                raise _Failed(f"LOBPCG broke down: {e}") from e
        order = np.argsort(w)[:p]
        return np.real(w[order]), U[:, order]


def _lanczos_certificate(op, start, ZD, below: float, *, every: int) -> tuple[float, bool]:
    r"""Smallest Ritz value of the Hermitian ``op`` on ``ZD^⊥`` by unrestarted Lanczos.

    Three-term recurrence ``β_{j} q_{j+1} = P(op q_j − α_j q_j − β_{j−1} q_{j−1})`` with ``P``
    the projector off the orthonormal columns of ``ZD`` (applied *after* the subtraction: the
    directions of ``ZD`` are eigenvectors of ``P·op`` with eigenvalue 0, and rounding errors
    along them would otherwise grow through the recurrence as fast as any extreme eigenvector).
    No reorthogonalisation and no restart: three vectors of memory. Every ``every`` steps the
    smallest eigenvalue ``θ`` of the tridiagonal ``T_j`` and its residual estimate
    ``β_j |y_j|`` (last component of its eigenvector) are computed. The run stops

    * with an **alarm** as soon as ``θ < below``: a Ritz value is an upper bound of the smallest
      eigenvalue of ``P·op·P`` (Cauchy interlacing; in floating point up to ``O(ε‖op‖)``
      (Paige), far below the tolerances used here), so an eigenvalue below ``below`` exists;
    * **converged** when ``β_j |y_j| <= CERTIFY_TOL·|θ|``: ``θ`` is then within that residual of
      an eigenvalue (Paige: in finite precision too), and with a random start it is the
      smallest one: a smaller eigenvalue ``μ`` has a non-zero component in the start vector
      almost surely, and Lanczos resolves the extreme end of the spectrum first, so ``θ``
      converges to ``μ`` before it can settle above it (Kuczyński–Woźniakowski: after ``s``
      steps ``P(θ − μ > ε (λ_max − μ)) <= 1.648 √n e^{−√ε (2s − 1)}`` whatever the gaps).
      Converging ``θ`` to ``CERTIFY_TOL`` takes about as many steps as separating it from its
      neighbours, so a missed copy of any eigenvalue at a comparable distance below is found
      on the way — the same certificate as a second ARPACK run to that tolerance, with none of
      ARPACK's reorthogonalisation against ``ncv`` vectors or its restarts;
    * at the breakdown ``β_j ≈ 0`` (an invariant Krylov space: ``θ`` exact) or after
      ``CERTIFY_MAXSTEPS`` steps (not converged).

    Parameters
    ----------
    op : callable
        ``x ↦ op(x)`` for one vector (Hermitian; it may leave components along ``ZD``).
    start : ndarray, shape (n,)
        Random start vector, orthogonal to ``ZD``.
    ZD : ndarray, shape (n, c)
        Orthonormal columns deflated.
    below : float
        Threshold of the alarm.
    every : int
        Steps between Ritz-value checks (1 when a step is expensive, e.g. a triangular solve).

    Returns
    -------
    theta : float
        The last smallest Ritz value computed.
    settled : bool
        True after an alarm, convergence or breakdown; False when the step cap was reached.

    Examples
    --------
    ``diag(0, 1, 2, …)`` with ``e_0`` deflated: the smallest eigenvalue left is 1.

    >>> d = np.arange(50.0)
    >>> Z = np.eye(50)[:, :1]
    >>> q = np.ones(50) - Z[:, 0]
    >>> theta, ok = _lanczos_certificate(lambda x: d * x, q / np.linalg.norm(q), Z, 0.5, every=1)
    >>> round(theta, 8), ok
    (1.0, True)
    """
    n_free = start.shape[0] - ZD.shape[1]
    cap = min(n_free, CERTIFY_MAXSTEPS)
    alpha: list[float] = []
    beta: list[float] = []
    theta = np.inf
    for a, b in _lanczos_steps(op, start, ZD):
        alpha.append(a)
        beta.append(b)
        j = len(alpha)
        breakdown = b <= 1e-12 * max(abs(a), 1.0)
        if breakdown or j == cap or j % every == 0:
            theta, resid = _smallest_ritz(alpha, beta)
            exhausted = j == n_free  # the Krylov space is the whole complement: θ is exact
            if theta < below or breakdown or exhausted or resid <= CERTIFY_TOL * abs(theta):
                return theta, True
        if breakdown or j == cap:
            break
    return theta, False


def _lanczos_steps(op, start, ZD):
    """The coefficients ``(α_j, β_j)`` of the three-term Lanczos recurrence for ``op`` on
    ``ZD^⊥`` from ``start``, one pair per step (no reorthogonalisation; three vectors held).

    ``β_j q_{j+1} = P(op q_j − α_j q_j − β_{j−1} q_{j−1})``, ``P`` the projector off ``ZD``,
    applied after the subtraction (see :func:`_lanczos_certificate`). Stops after ``β_j = 0``.

    Examples
    --------
    ``diag(0, 1, 2, 3)`` from the all-ones vector: ``α_1`` is the mean ``1.5`` and ``β_1`` the
    standard deviation ``√1.25`` of the diagonal.

    >>> d = np.arange(4.0)
    >>> a, b = next(_lanczos_steps(lambda x: d * x, np.ones(4), np.zeros((4, 0))))
    >>> round(a, 12), round(b**2, 12)
    (1.5, 1.25)
    """
    ZDh = ZD.conj().T.copy() if np.iscomplexobj(ZD) else ZD.T
    q = start / np.linalg.norm(start)
    q_prev = np.zeros_like(q)
    b = 0.0
    while True:
        v = op(q)
        a = float(np.real(np.vdot(q, v)))
        v = v - a * q - b * q_prev
        if ZD.shape[1]:
            v -= ZD @ (ZDh @ v)
        b = float(np.linalg.norm(v))
        yield a, b
        if b == 0.0:
            return
        q_prev, q = q, v / b


def _smallest_ritz(alpha: list[float], beta: list[float]) -> tuple[float, float]:
    """Smallest eigenvalue ``θ`` of the Lanczos tridiagonal ``T_j`` (diagonal ``alpha``,
    off-diagonal ``beta[:-1]``) and its residual estimate ``β_j |y_j|``.

    Examples
    --------
    >>> theta, resid = _smallest_ritz([2.0, 2.0], [1.0, 0.5])
    >>> round(theta, 12), round(resid, 12)
    (1.0, 0.353553390593)
    """
    if len(alpha) == 1:
        return alpha[0], beta[0]
    ev, Y = eigh_tridiagonal(np.array(alpha), np.array(beta[:-1]), select="i", select_range=(0, 0))
    return float(ev[0]), beta[-1] * abs(float(Y[-1, 0]))


class _Inverse:
    """Solves with ``L`` on ``z^⊥`` (``Z`` = one null vector ``z``: ``L`` grounded at
    ``r = argmax |z|``), else with ``L − σI``, ``σ = SHIFT`` (null vectors projected out)."""

    def __init__(self, L, Z):
        n = L.shape[0]
        self.dtype, self.Z = L.dtype, Z
        if Z.shape[1] == 1:
            r = int(np.argmax(np.abs(Z[:, 0])))
            self.keep = np.r_[0:r, r + 1 : n]
            M = L[self.keep][:, self.keep]
            self.sigma = 0.0
        else:
            self.keep, self.sigma = None, SHIFT
            M = L - SHIFT * sp.identity(n, dtype=L.dtype, format="csr")
        self.lu = splu(M.tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})

    @property
    def fill(self) -> int:
        return int(self.lu.L.nnz + self.lu.U.nnz)

    def solve(self, B):
        B = _project(B, self.Z)
        if self.keep is None:
            return _project(self.lu.solve(np.asarray(B, dtype=self.dtype)), self.Z)
        X = np.zeros(B.shape, dtype=np.result_type(B, self.dtype))
        X[self.keep] = self.lu.solve(np.ascontiguousarray(B[self.keep], dtype=self.dtype))
        return _project(X, self.Z)


def _amg_preconditioner(L, Z):
    try:
        import pyamg
    except ImportError as e:  # pragma: no cover - pyamg is in the graph extra
        raise _Failed("method 'amg' needs pyamg (pip install 'structpos[graph]')") from e
    B = Z[:, :1] if Z.shape[1] else np.ones((L.shape[0], 1), dtype=L.dtype)
    cplx = np.issubdtype(L.dtype, np.complexfloating)
    ml = pyamg.smoothed_aggregation_solver(
        L.tocsr(), B=B, symmetry="hermitian" if cplx else "symmetric", max_coarse=500
    )
    return ml.aspreconditioner(cycle="V")
