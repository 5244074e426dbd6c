r"""PEG-style positional distances: ``‖z_u − z_v‖`` between spectral coordinates.

PEG (Wang et al. 2022) keeps positional features in their own channel and uses them only through
the distances ``‖z_u − z_v‖`` — invariant to permutations of the nodes and to any orthogonal
transform of the coordinates, hence to the sign and basis ambiguity of eigenvectors. Here
``z_v`` is the node's row of the Laplacian eigenvectors of :mod:`.laplacian`
(``L = I − D^{-1/2} A D^{-1/2}``, the ``k`` smallest non-trivial modes), optionally scaled per
mode:

.. math::

    z_v = \big(f(\lambda_1) U_{v,1}, \dots, f(\lambda_k) U_{v,k}\big),\qquad
    \mathrm{PEG}_{uv} = \lVert z_u - z_v \rVert_2,

with ``f = 1`` (``scale="none"``) or ``f(λ) = λ^{-1/2}`` (``scale="inv_sqrt"``: then
``PEG_{uv}^2 = Σ_j (U_{uj} − U_{vj})² / λ_j``, the first ``k`` terms of the normalised
Laplacian's resistance-type distance).

Invariance needs whole eigenspaces: rotating a basis inside an eigenspace leaves
``Σ_{j ∈ space} (U_{uj} − U_{vj})²`` unchanged only if every vector of the space is kept. Modes
that the ``k``-th cut splits (the solver's ``ambiguous`` flags) are therefore **dropped** by
default (``ambiguous="drop"``; ``"keep"`` uses them anyway); missing modes (``mask`` False) are
zero and add nothing.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np

from ..exceptions import ShapeError, SpecError
from ..structure import Structure
from ._args import PAIRWISE_MAX_BYTES, check_pairwise_size, int_arg
from ._graph_utils import as_graph
from ._registry import MAX_K
from .laplacian import laplacian_pe

__all__ = ["positional_distances", "peg_distances", "peg_coords"]

Scale = Literal["none", "inv_sqrt"]
SCALES: tuple[str, ...] = get_args(Scale)
Ambiguous = Literal["drop", "keep"]
AMBIGUOUS: tuple[str, ...] = get_args(Ambiguous)


def positional_distances(
    pe: Any,
    eigvals: Any = None,
    keep: Any = None,
    *,
    scale: Scale = "none",
) -> np.ndarray:
    """``‖z_u − z_v‖`` for all node pairs from eigenvectors ``pe (N, k)`` (see the module docstring).

    Parameters
    ----------
    pe : array_like, shape (N, k)
        Eigenvector entries per node.
    eigvals : array_like, shape (k,), optional
        The eigenvalues (required for ``scale="inv_sqrt"``).
    keep : array_like of bool, shape (k,), optional
        Modes to use (default all), e.g. ``mask & ~ambiguous``.
    scale : {"none", "inv_sqrt"}
        Per-mode factor ``1`` or ``λ^{-1/2}`` (modes with ``λ <= 0`` get 0).

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` float64, symmetric, zero diagonal.

    Raises
    ------
    ShapeError
        ``pe`` not 2-D, or ``eigvals`` / ``keep`` not ``(k,)``.
    SpecError
        Unknown ``scale``, or ``"inv_sqrt"`` without ``eigvals``.

    Examples
    --------
    >>> z = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    >>> positional_distances(z).round(6).tolist()
    [[0.0, 5.0, 1.0], [5.0, 0.0, 4.242641], [1.0, 4.242641, 0.0]]
    >>> positional_distances(z, [4.0, 1.0], scale="inv_sqrt")[0, 1]
    np.float64(4.272001872658765)
    """
    U = np.asarray(pe, dtype=np.float64)
    if U.ndim != 2:
        raise ShapeError(f"pe must be (N, k); given {U.shape}")
    k = U.shape[1]
    cols = np.ones(k, dtype=bool) if keep is None else np.asarray(keep, dtype=bool).reshape(-1)
    if cols.shape != (k,):
        raise ShapeError(f"keep must be ({k},) for pe of shape {U.shape}; given {cols.shape}")
    factor = np.ones(k)
    if scale == "inv_sqrt":
        if eigvals is None:
            raise SpecError("scale='inv_sqrt' needs the eigenvalues")
        lam = np.asarray(eigvals, dtype=np.float64).reshape(-1)
        if lam.shape != (k,):
            raise ShapeError(f"eigvals must be ({k},) for pe of shape {U.shape}; given {lam.shape}")
        factor = np.where(lam > 0, 1.0 / np.sqrt(np.where(lam > 0, lam, 1.0)), 0.0)
    elif scale != "none":
        raise SpecError(f"scale must be 'none' or 'inv_sqrt', got {scale!r}")
    Z = U[:, cols] * factor[cols]
    sq = (Z * Z).sum(axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (Z @ Z.T)
    D = np.sqrt(np.maximum(d2, 0.0))
    np.fill_diagonal(D, 0.0)
    return D


def peg_distances(
    edge_index: Any,
    num_nodes: int | None = None,
    k: int = 8,
    *,
    scale: Scale = "none",
    ambiguous: Ambiguous = "drop",
    max_bytes: int | None = PAIRWISE_MAX_BYTES,
) -> np.ndarray:
    """PEG distances of a graph from its Laplacian eigenvectors (:func:`.laplacian.laplacian_pe`).

    Parameters
    ----------
    edge_index, num_nodes
        The graph (symmetrised, as :func:`.laplacian.laplacian_pe`).
    k : int
        Modes computed (before dropping split eigenspaces).
    scale : {"none", "inv_sqrt"}
        Per-mode factor (see :func:`positional_distances`).
    ambiguous : {"drop", "keep"}
        Drop the modes of an eigenspace split by the ``k``-th cut (default; keeps the
        distances basis-invariant) or keep them.
    max_bytes : int or None
        Cap on the memory of the dense ``(N, N)`` computation (three float64 matrices: 24
        bytes a pair); default 4 GiB, ``None``: no cap.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` float64.

    Raises
    ------
    LimitError
        ``N·N·24`` bytes above ``max_bytes`` (``max_memory_bytes``), checked before solving.

    Examples
    --------
    A 6-cycle: eigenvalues 1/2, 1/2, 3/2, 3/2, 2. With ``k = 3`` the second pair is split and
    dropped, so only the first pair counts; opposite nodes are farthest apart:

    >>> i = np.arange(6)
    >>> ei = np.stack([i, (i + 1) % 6])
    >>> D = peg_distances(ei, 6, k=3)
    >>> D[0].round(6).tolist()
    [0.0, 0.57735, 1.0, 1.154701, 1.0, 0.57735]
    """
    if ambiguous not in AMBIGUOUS:
        raise SpecError(f"ambiguous must be {' or '.join(map(repr, AMBIGUOUS))}, got {ambiguous!r}")
    g = as_graph(edge_index, num_nodes)
    check_pairwise_size(g.num_nodes, g.num_nodes, 24, "PEG distances", g.name, max_bytes)
    r = laplacian_pe(g, k=k)
    keep = np.asarray(r.mask) & (~np.asarray(r.ambiguous) if ambiguous == "drop" else True)
    return positional_distances(r.pe, r.eigvals, keep, scale=scale)


def peg_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``peg[:k[:scale]]`` (default ``8:none``): ``peg (N, N)`` spectral distances.

    Parameters
    ----------
    structure : Structure
        A graph or tree (undirected).
    arg : str, optional
        ``k`` and optionally ``none`` / ``inv_sqrt``, e.g. ``"16:inv_sqrt"``.

    Returns
    -------
    dict
        ``{"peg": (N, N) float64}``: row ``u`` holds ``‖z_u − z_v‖`` for every ``v``.

    Examples
    --------
    ``[1, 2]`` is the path ``1 − 0 − 2`` (modes ``λ = 1``: ``(0, 1, −1)/√2`` and ``λ = 2``:
    ``(√2, −1, −1)/2``); the two leaves are ``√2`` apart:

    >>> import structpos
    >>> c = peg_coords(structpos.parse("[1, 2]", kind="json"), "2")
    >>> c["peg"].round(6).tolist()
    [[0.0, 1.398966, 1.398966], [1.398966, 0.0, 1.414214], [1.398966, 1.414214, 0.0]]
    """
    params = peg_arg(arg)
    return {"peg": peg_distances(as_graph(structure), k=params["k"], scale=params["scale"])}


def peg_arg(arg: str | None) -> dict[str, Any]:
    """Validate ``peg[:k[:scale]]``: ``{"k": int, "scale": str}``.

    Parameters
    ----------
    arg : str or None
        The text after ``peg:``.

    Returns
    -------
    dict

    Raises
    ------
    SpecError
        ``k`` not an integer in ``[1, MAX_K]``, an unknown scale or too many parts.

    Examples
    --------
    >>> peg_arg("4:inv_sqrt"), peg_arg(None)
    ({'k': 4, 'scale': 'inv_sqrt'}, {'k': 8, 'scale': 'none'})
    """
    parts = (arg or "").split(":")
    if len(parts) > 2:
        raise SpecError(f"peg:{arg}: expected peg[:k[:scale]]")
    k = int_arg(f"peg:{arg}", parts[0], "k", 1, maximum=MAX_K) if parts[0] else 8
    scale = parts[1] if len(parts) > 1 and parts[1] else "none"
    if scale not in SCALES:
        raise SpecError(f"peg:{arg}: scale must be {' or '.join(map(repr, SCALES))} (got {scale!r})")
    return {"k": k, "scale": scale}
