"""Dense eigensolvers for stacks of small (magnetic) Laplacians, and BLAS/OpenMP thread limits.

* :func:`batched_eigh` — all eigenpairs of a stack ``(B, N, N)`` of Hermitian matrices in one
  LAPACK-backed call (numpy's stacked ``eigh``). Callers group graphs by size and pad with a
  sentinel diagonal (see :data:`._graph_utils.SENTINEL`), never a block-diagonal union.
* Large sparse matrices: :mod:`._sparse_eigen` (the checked large-graph solver layer).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numpy as np

SMALL = 128
"""Matrices up to this size are decomposed/multiplied with a single BLAS thread."""

_controller: Any = None  # a threadpoolctl.ThreadpoolController once made
_no_controller = False  # threadpoolctl is missing: BLAS keeps its own threading


def _limit_one(user_api: str) -> contextlib.AbstractContextManager[Any]:
    global _controller, _no_controller
    if _controller is None and not _no_controller:
        try:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        except ImportError:
            _no_controller = True
    if _controller is None:
        return contextlib.nullcontext()
    return _controller.limit(limits=1, user_api=user_api)


_blas_depth = 0  # single_blas_thread contexts now open (the OpenBLAS limit is process-wide)
_blas_lock = threading.Lock()


@contextlib.contextmanager
def _counted_blas_limit():
    global _blas_depth
    with _blas_lock:
        _blas_depth += 1
    try:
        with _limit_one("blas"):
            yield
    finally:
        with _blas_lock:
            _blas_depth -= 1


def single_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """Context limiting BLAS to one thread (via ``threadpoolctl`` when installed).

    Stacks of small matrices gain nothing from BLAS threads, and on a busy machine
    OpenBLAS's threads make a stacked ``eigh`` 5–30x slower (measured). Inside another such
    context (any thread: the limit is process-wide) it does nothing, which saves threadpoolctl's
    ~8 µs per size group of a batch."""
    if _blas_depth > 0:
        return contextlib.nullcontext()
    return _counted_blas_limit()


def single_openmp_thread() -> contextlib.AbstractContextManager[Any]:
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
