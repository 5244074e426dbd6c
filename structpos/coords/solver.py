"""Settings of the spectral eigensolvers, in one validated value: :class:`SolverOptions`.

:func:`~structpos.coords.laplacian.laplacian_pe`, :func:`~structpos.coords.magnetic.magnetic_laplacian_pe`,
their batch forms and the checked sparse layer
(:func:`structpos.coords._sparse_eigen.smallest_eigenpairs`) take the same five settings. Each
accepts ``options=SolverOptions(...)`` and, for convenience, the same five names as keywords; a
keyword that is given (not ``None``) replaces that field of ``options``
(:func:`solver_options`). Every value is checked once, here, when the options are made.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..exceptions import SpecError

__all__ = ["DENSE_MAX", "SolverMethod", "SOLVER_METHODS", "SolverOptions", "solver_options"]

SolverMethod = Literal["auto", "dense", "shift-invert", "lanczos", "amg", "lobpcg"]
"""``"auto"``: dense up to ``dense_max`` nodes, else the sparse layer picks per component and falls
back when a method fails; ``"dense"``: always a dense ``eigh``; the others: that sparse method for
every large component, without fallback (see :mod:`._sparse_eigen`)."""

SOLVER_METHODS: tuple[str, ...] = get_args(SolverMethod)

DENSE_MAX = 256
"""Default :attr:`SolverOptions.dense_max`: where one dense ``eigh`` stops beating the checked
sparse solvers for ``k = 8`` (measured on one thread, one graph, end to end):

* LapPE: a random tree or a grid breaks even near 250 nodes; random graphs of mean degree 4–64
  near 350 (the sparse path 1.5× slower at 300). At 1,000 nodes dense costs 16–24× the sparse
  path on trees and grids, 2× on random graphs.
* Magnetic LapPE (complex ``eigh``): trees break even near 150 nodes, random graphs near 250;
  at 1,000 nodes dense costs 116× on a tree.
* Denser graphs favour dense: a complete graph of 300 nodes takes 1.8× (LapPE) and 1.1× (magnetic)
  longer on the sparse path.

The eigenvalues agree to 1e-14 either way (stars, complete bipartite graphs, paths, equal
components and half-isolated graphs of 500 nodes included), as do the masks and ambiguity flags.
On 18 Python syntax trees of 304–983 nodes (LapPE 9× and magnetic LapPE 52× faster than with the
old default of 1,000) the eigenvalues agreed to 5e-13 and the PE columns of simple eigenvalues to
2e-11; inside a degenerate eigenspace the basis is arbitrary on either path.
"""


@dataclass(frozen=True)
class SolverOptions:
    """How the spectral PEs solve for eigenpairs.

    Parameters
    ----------
    method : {"auto", "dense", "shift-invert", "lanczos", "amg", "lobpcg"}
        The eigensolver (see :data:`SolverMethod`).
    dense_max : int
        Graphs and connected components with at most this many nodes are decomposed densely
        (default :data:`DENSE_MAX`, where a dense ``eigh`` stops beating the sparse solvers).
    tol : float
        Relative convergence tolerance of the iterative methods (finite, > 0).
    maxiter : int, optional
        Iteration cap of the iterative methods (``None``: each method's own).
    progress : callable, optional
        Receives a line of text per stage of each large solve (method, memory estimate, time).

    Raises
    ------
    SpecError
        A value out of range, naming the field.

    Examples
    --------
    >>> SolverOptions()
    SolverOptions(method='auto', dense_max=256, tol=1e-10, maxiter=None, progress=None)
    >>> SolverOptions(method="lanczos", tol=1e-8).tol
    1e-08
    >>> SolverOptions(tol=0)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: tol: must be a finite number > 0, got 0
    """

    method: SolverMethod = "auto"
    dense_max: int = DENSE_MAX
    tol: float = 1e-10
    maxiter: int | None = None
    progress: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        if self.method not in SOLVER_METHODS:
            raise SpecError(f"unknown method {self.method!r} (use one of {', '.join(SOLVER_METHODS)})", name="method")
        _check_int(self.dense_max, "dense_max", 0)
        tol_ok = isinstance(self.tol, (int, float)) and not isinstance(self.tol, bool) and math.isfinite(self.tol)
        if not tol_ok or self.tol <= 0:
            raise SpecError(f"must be a finite number > 0, got {self.tol!r}", name="tol")
        if self.maxiter is not None:
            _check_int(self.maxiter, "maxiter", 1)
        if self.progress is not None and not callable(self.progress):
            raise SpecError(f"must be callable or None, got {type(self.progress).__name__}", name="progress")


def _check_int(value: Any, name: str, low: int) -> None:
    """``value`` is an integer (Python or numpy, not bool) ``>= low``, else :class:`SpecError`."""
    try:
        ok = not isinstance(value, bool) and operator.index(value) >= low
    except TypeError:
        ok = False
    if not ok:
        raise SpecError(f"must be an integer >= {low}, got {value!r}", name=name)


def solver_options(
    options: SolverOptions | None = None,
    *,
    method: str | None = None,
    dense_max: int | None = None,
    tol: float | None = None,
    maxiter: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> SolverOptions:
    """``options`` (default :class:`SolverOptions()`) with every keyword that is not ``None`` in
    place of its field: the keyword convenience of the solver functions, validated once.

    Parameters
    ----------
    options : SolverOptions, optional
        The base settings.
    method, dense_max, tol, maxiter, progress
        Replacements for the fields of the same names; ``None`` keeps the field.

    Returns
    -------
    SolverOptions

    Raises
    ------
    SpecError
        ``options`` is not a :class:`SolverOptions`, or a value is out of range.

    Examples
    --------
    >>> base = SolverOptions(method="lanczos", tol=1e-8)
    >>> solver_options(base, tol=1e-6)
    SolverOptions(method='lanczos', dense_max=256, tol=1e-06, maxiter=None, progress=None)
    >>> solver_options(dense_max=50) == SolverOptions(dense_max=50)
    True
    """
    if options is None:
        options = SolverOptions()
    elif not isinstance(options, SolverOptions):
        raise SpecError(f"must be a SolverOptions, got {type(options).__name__}", name="options")
    given = {"method": method, "dense_max": dense_max, "tol": tol, "maxiter": maxiter, "progress": progress}
    changes: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    return dataclasses.replace(options, **changes) if changes else options
