"""Eigensolvers for normalised (magnetic) Laplacians: batched dense and large sparse.

* :func:`batched_eigh` — all eigenpairs of a stack ``(B, N, N)`` of Hermitian matrices in one
  LAPACK-backed call (numpy's stacked ``eigh``). Callers group graphs by size and pad with a
  sentinel diagonal (see :data:`._graph_utils.SENTINEL`), never a block-diagonal union.
* :func:`smallest_eigenpairs` — the ``m`` smallest eigenpairs of a sparse Hermitian positive
  semi-definite matrix whose spectrum lies in ``[0, 2]``, without densifying it:
  ARPACK shift-invert Lanczos (``eigsh(sigma=SHIFT, which='LM')``: the smallest eigenvalues of
  ``L`` are the largest of ``(L − σI)⁻¹``) with a fixed start vector, then LOBPCG (fixed start
  block, optional orthogonality constraints) as a fallback. If neither converges,
  :class:`EigenConvergenceError` says so with the residual reached.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh, lobpcg

from ._graph_utils import EigenConvergenceError

SHIFT = -1e-6
"""Shift-invert target ``σ``: slightly below the smallest possible eigenvalue 0, so ``L − σI``
is positive definite (factorisable) while the smallest eigenvalues stay well separated."""

SEED = 0
SMALL = 128
"""Matrices up to this size are decomposed/multiplied with a single BLAS thread."""

_controller = None


def _limit_one(user_api: str):
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        except ImportError:  # optional: without it, BLAS keeps its own threading
            _controller = False
    if not _controller:
        return contextlib.nullcontext()
    return _controller.limit(limits=1, user_api=user_api)


def single_blas_thread():
    """Context limiting BLAS to one thread (via ``threadpoolctl`` when installed).

    Stacks of small matrices gain nothing from BLAS threads, and on a busy machine
    OpenBLAS's threads make a stacked ``eigh`` 5–30x slower (measured)."""
    return _limit_one("blas")


def single_openmp_thread():
    """Context limiting OpenMP (torch's MKL LAPACK) to one thread in the calling thread only
    (``omp_set_num_threads`` is per thread, so workers of a pool may each enter it).

    Torch's default two OpenMP threads make its stacked ``eigh`` of small matrices ~3x
    slower (measured)."""
    return _limit_one("openmp")


def batched_eigh(M: np.ndarray, dtype=np.float64, *, backend: str = "numpy") -> tuple[np.ndarray, np.ndarray]:
    """Ascending eigenvalues ``(B, N)`` and eigenvectors ``(B, N, N)`` of a Hermitian stack.

    ``backend="numpy"`` (OpenBLAS LAPACK) or ``"torch"`` (torch's MKL LAPACK, one OpenMP
    thread for ``N <= SMALL``; measured on stacks with N = 10..40: ~20% faster in float32, no
    faster in float64). Both release the GIL, so stacks may be decomposed concurrently from a
    thread pool (for the numpy backend, hold :func:`single_blas_thread` around the pool: the
    OpenBLAS limit is process-wide)."""
    if M.shape[-1] == 0:
        return np.zeros(M.shape[:-1]), np.zeros(M.shape, dtype=M.dtype)
    if np.iscomplexobj(M):
        dtype = np.complex64 if np.dtype(dtype) == np.float32 else np.complex128
    M = M.astype(dtype, copy=False)
    if backend == "torch":
        import torch

        with single_openmp_thread() if M.shape[-1] <= SMALL else contextlib.nullcontext():
            w, U = torch.linalg.eigh(torch.from_numpy(np.ascontiguousarray(M)))
        return w.numpy(), U.numpy()
    if backend != "numpy":
        raise ValueError(f"unknown eigh backend {backend!r} (use 'numpy' or 'torch')")
    if M.shape[-1] <= SMALL:
        with single_blas_thread():
            return np.linalg.eigh(M)
    return np.linalg.eigh(M)


def choose_method(method: str, num_nodes: int, dense_max: int) -> str:
    """Resolve a ``method`` argument: ``"auto"`` is ``"dense"`` up to ``dense_max`` nodes, else
    ``"shift-invert"``; ``"dense"``, ``"shift-invert"`` and ``"lobpcg"`` pass; others raise."""
    if method == "auto":
        return "dense" if num_nodes <= dense_max else "shift-invert"
    if method not in ("dense", "shift-invert", "lobpcg"):
        raise ValueError(f"unknown method {method!r} (use 'auto', 'dense', 'shift-invert' or 'lobpcg')")
    return method


def _start_block(n: int, m: int, complex_: bool) -> np.ndarray:
    rng = np.random.default_rng(SEED)
    X = rng.standard_normal((n, m))
    if complex_:
        X = X + 1j * rng.standard_normal((n, m))
    return X


def _residual(L, w, U) -> float:
    if U.shape[1] == 0:
        return 0.0
    R = L @ U - U * w
    return float(np.max(np.linalg.norm(R, axis=0)))


def smallest_eigenpairs(
    L: sp.spmatrix,
    m: int,
    *,
    constraints: np.ndarray | None = None,
    drop: int = 0,
    tol: float = 1e-8,
    maxiter: int | None = None,
    method: str = "shift-invert",
    name: str = "<graph>",
) -> tuple[np.ndarray, np.ndarray]:
    """The ``m`` smallest eigenpairs of sparse Hermitian PSD ``L`` above its ``drop`` known
    smallest ones (``constraints``: an orthonormal basis ``(n, drop)`` of those, used by LOBPCG;
    shift-invert computes ``m + drop`` pairs and drops the ``drop`` smallest).

    ``method`` is ``"shift-invert"`` (with LOBPCG fallback) or ``"lobpcg"`` (alone).
    Returns ascending ``w (m,)`` and ``U (n, m)``; raises :class:`EigenConvergenceError`.
    """
    n = L.shape[0]
    complex_ = np.iscomplexobj(L.data) if sp.issparse(L) else np.iscomplexobj(L)
    errors = []
    if method == "shift-invert":
        try:
            v0 = _start_block(n, 1, complex_)[:, 0]
            w, U = eigsh(L.tocsc(), k=m + drop, sigma=SHIFT, which="LM", v0=v0, tol=tol, maxiter=maxiter)
            order = np.argsort(w)
            return w[order][drop:], U[:, order][:, drop:]
        except (ArpackNoConvergence, ArpackError, RuntimeError, MemoryError) as e:
            errors.append(f"shift-invert eigsh: {e}")
    elif method != "lobpcg":
        raise ValueError(f"unknown sparse eigensolver {method!r} (use 'shift-invert' or 'lobpcg')")
    # LOBPCG: fixed start block, a few extra vectors for faster convergence of the wanted ones
    extra = min(max(2, m // 2), n - m - drop) if n - m - drop > 0 else 0
    if n < 5 * (m + extra + drop):  # LOBPCG itself goes dense (without constraints) there
        w, U = np.linalg.eigh(L.toarray() if sp.issparse(L) else L)
        return w[drop: drop + m], U[:, drop: drop + m]
    X = _start_block(n, m + extra, complex_)
    Y = constraints if constraints is not None and constraints.shape[1] else None
    lob_tol = max(tol, 1e-10) * 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # non-convergence is judged by the residual below
        w, U = lobpcg(L, X, Y=Y, tol=lob_tol, maxiter=maxiter or 1000, largest=False)
    order = np.argsort(w)[:m]
    w, U = np.real(w[order]), U[:, order]
    if Y is None and drop:
        raise ValueError("LOBPCG needs the trivial eigenvectors as constraints to drop them")
    res = _residual(L, w, U)
    if res <= 1e3 * lob_tol:
        return w, U
    errors.append(f"LOBPCG: max residual ‖Lu − λu‖ = {res:.3g} after {maxiter or 1000} iterations")
    raise EigenConvergenceError(
        f"{name}: the {m} smallest eigenpairs of the {n}-node Laplacian did not converge ("
        + "; ".join(errors)
        + "). Try a larger maxiter/tol, or method='dense' if the graph fits in memory."
    )
