"""SolverOptions: one validated value for the five spectral-solver settings, accepted by every
solver function beside the same keywords (a given keyword replaces its field)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from structpos.coords import SolverOptions
from structpos.coords._sparse_eigen import smallest_eigenpairs
from structpos.coords.laplacian import laplacian_pe, laplacian_pe_batch
from structpos.coords.magnetic import magnetic_laplacian_pe, magnetic_laplacian_pe_batch
from structpos.coords.solver import solver_options
from structpos.exceptions import SpecError


def grid(side: int) -> tuple[np.ndarray, int]:
    idx = np.arange(side * side).reshape(side, side)
    e = np.concatenate(
        [np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]), np.stack([idx[:-1].ravel(), idx[1:].ravel()])], 1
    )
    return np.concatenate([e, e[::-1]], 1), side * side


def test_keywords_and_options_give_the_same_solve():
    """The same settings as keywords or as one value: the same method chain and the same answer;
    and the grid's eigenvalues are those of a dense eigvalsh (an independent reference)."""
    ei, n = grid(8)
    a = laplacian_pe(ei, n, 4, method="lanczos", dense_max=30, tol=1e-9)
    b = laplacian_pe(ei, n, 4, options=SolverOptions(method="lanczos", dense_max=30, tol=1e-9))
    assert a.report.methods == b.report.methods == ("lanczos",)
    np.testing.assert_array_equal(a.eigvals, b.eigvals)
    A = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n)).toarray()
    d = A.sum(1)
    L = np.eye(n) - A / np.sqrt(np.outer(d, d))
    np.testing.assert_allclose(a.eigvals, np.linalg.eigvalsh(L)[1:5], atol=1e-8)


def test_a_given_keyword_replaces_its_field_only():
    ei, n = grid(8)
    lines: list[str] = []
    base = SolverOptions(method="dense", dense_max=30, progress=lines.append)
    assert laplacian_pe(ei, n, 4, options=base).report.methods == ("dense",) and not lines
    r = laplacian_pe(ei, n, 4, method="shift-invert", options=base)  # dense_max and progress kept
    assert r.report.methods == ("shift-invert",) and any("shift-invert" in line for line in lines)
    assert solver_options(base, tol=1e-6) == dataclasses.replace(base, tol=1e-6)
    assert solver_options(base) is base and solver_options() == SolverOptions()


def test_batch_functions_pass_the_options_to_graphs_above_dense_max():
    """Before, the batch functions solved large graphs with default settings only; now the
    options (method, progress, ...) reach them, and small graphs stay on the dense path."""
    ei, n = grid(7)
    small = (np.array([[0, 1], [1, 0]]), 2)
    for batch in (laplacian_pe_batch, magnetic_laplacian_pe_batch):
        lines: list[str] = []
        opts = SolverOptions(method="lanczos", dense_max=20, progress=lines.append)
        out = batch([small, (ei, n)], 3, options=opts)
        assert any("lanczos" in line for line in lines)
        ref = batch([small, (ei, n)], 3, dense_max=100)  # both dense
        np.testing.assert_array_equal(out.mask, ref.mask)
        np.testing.assert_allclose(out.eigvals, ref.eigvals, atol=1e-8)


BAD = [
    ({"method": "arnoldi"}, "method: unknown method 'arnoldi'"),
    ({"dense_max": -1}, "dense_max: must be an integer >= 0"),
    ({"dense_max": 2.5}, "dense_max: must be an integer"),
    ({"dense_max": True}, "dense_max: must be an integer"),
    ({"tol": 0.0}, "tol: must be a finite number > 0"),
    ({"tol": float("nan")}, "tol: must be a finite number > 0"),
    ({"tol": "1e-8"}, "tol: must be a finite number > 0"),
    ({"maxiter": 0}, "maxiter: must be an integer >= 1"),
    ({"progress": 5}, "progress: must be callable"),
]


@pytest.mark.parametrize("bad, message", BAD)
def test_one_validator_for_every_solver_function(bad, message):
    ei, n = grid(3)
    L = sp.identity(4, format="csr")
    calls = [
        lambda kw: SolverOptions(**kw),
        lambda kw: laplacian_pe(ei, n, 2, **kw),
        lambda kw: magnetic_laplacian_pe(ei, n, 2, **kw),
        lambda kw: smallest_eigenpairs(L, 2, **kw),
    ]
    if set(bad) == {"dense_max"}:
        calls += [
            lambda kw: laplacian_pe_batch([(ei, n)], 2, **kw),
            lambda kw: magnetic_laplacian_pe_batch([(ei, n)], 2, **kw),
        ]
    for call in calls:
        with pytest.raises(SpecError, match=message):
            call(bad)
    assert issubclass(SpecError, ValueError)  # callers catching ValueError keep working


def test_options_are_frozen_typed_and_accept_numpy_integers():
    opts = SolverOptions(dense_max=np.int64(30), maxiter=np.int32(5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tol = 1.0  # type: ignore[misc]
    with pytest.raises(SpecError, match="options: must be a SolverOptions"):
        laplacian_pe(*grid(3), 2, options={"method": "dense"})
