r"""Directional random-walk encodings of directed graphs: forward and backward landing probabilities.

With ``A`` the weighted adjacency of the edges **as given** (``A[u, v]`` = weight of ``u → v``;
duplicates summed, self-loops kept, as in :mod:`.random_walk`), a walk can follow the edges
(**forward**) or go against them (**backward**):

.. math::

    P_{\to} = D_{\mathrm{out}}^{-1} A, \qquad P_{\leftarrow} = D_{\mathrm{in}}^{-1} A^\top,

so a backward walk on ``G`` is exactly a forward walk on the reversed graph ``Gᵀ``. The
encodings after ``k = 1..K`` steps are

* **per node** (diagonal, as RWSE): ``fwd(i) = ([P_→]_ii, …, [P_→^K]_ii)`` and the same for
  ``P_←`` — the probability of being back at ``i``; on a graph stored with both edge directions
  ``P_→ = P_← = D^{-1} A`` and both equal :func:`~structpos.coords.random_walk.random_walk_pe`;
* **per node pair**: ``[P^k]_{uv}``, the probability that a walk from ``u`` lands on ``v``
  after ``k`` steps (``(N, N, K)``; row ``u`` of each step is a distribution over ``v``).

Dangling nodes
--------------
A node without out-edges (for the backward walk: without in-edges) has no transition. With
``dangling="stay"`` (default) it gets a self-loop of weight 1 — the walk waits there — so every
row of ``P`` and of each ``P^k`` sums to exactly 1. ``dangling="vanish"`` keeps the row zero
(RWSE's convention: the walk dies, rows of such nodes and of nodes that can only reach them sum
to less than 1). On a graph without dangling nodes the two agree.

The per-node diagonals reuse the RWSE kernels of :mod:`.random_walk` (dense baby-step/giant-step
products, sparse products for large graphs); the pair matrices are dense ``K`` products and are
capped at ``max_entries`` values (:class:`~structpos.exceptions.LimitError` beyond).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, get_args

import numpy as np

from ..exceptions import LimitError, SpecError
from ..structure import Structure
from ._args import MAX_K, check_int
from ._graph_utils import (
    Graph,
    adjacency,
    as_graph,
    check_float_dtype,
    edge_weights,
    output_like,
    scale_free_weights,
    to_output,
)
from .random_walk import DENSE_MAX, random_walk_pe

__all__ = [
    "DirectedWalkPE",
    "directed_walk_pe",
    "directed_walk_matrices",
    "transition_matrix",
    "rwdir_coords",
    "rwdir_pair_coords",
    "PAIR_MAX_ENTRIES",
]

Dangling = Literal["stay", "vanish"]
DANGLING: tuple[str, ...] = get_args(Dangling)
Direction = Literal["forward", "backward"]
DIRECTIONS: tuple[str, ...] = get_args(Direction)

PAIR_MAX_ENTRIES = 2**27
"""Default cap on ``N·N·K`` values of the dense pair matrices (1 GiB in float64)."""


class DirectedWalkPE(NamedTuple):
    """Forward and backward landing probabilities, each ``(N, K)`` (or ``(N, N, K)`` for pairs).

    Examples
    --------
    >>> r = DirectedWalkPE(np.zeros((2, 3)), np.ones((2, 3)))
    >>> r.backward.shape
    (2, 3)
    """

    forward: Any
    backward: Any


def _check_options(walk_length: Any, dangling: str) -> int:
    walk_length = check_int(walk_length, "walk_length", 1, MAX_K)
    if dangling not in DANGLING:
        raise SpecError(f"dangling must be {' or '.join(map(repr, DANGLING))}, got {dangling!r}")
    return int(walk_length)


def _oriented(g: Graph, direction: Direction, dangling: Dangling) -> Graph:
    """``g`` with edges reversed for the backward walk and a weight-1 self-loop on every node
    without an outgoing positive-weight edge (``dangling="stay"``)."""
    ei = g.edge_index if direction == "forward" else g.edge_index[::-1]
    w = edge_weights(g)
    if dangling == "stay":
        out = np.bincount(ei[0], weights=w, minlength=g.num_nodes) if ei.size else np.zeros(g.num_nodes)
        dead = np.flatnonzero(out <= 0)
        ei = np.concatenate([ei, np.stack([dead, dead])], axis=1)
        w = np.concatenate([w, np.ones(dead.size)])
    return Graph(np.ascontiguousarray(ei), g.num_nodes, w, True, g.name)


def transition_matrix(
    edge_index: Any,
    num_nodes: int | None = None,
    edge_weight: Any = None,
    *,
    direction: Direction = "forward",
    dangling: Dangling = "stay",
) -> np.ndarray:
    """The dense transition matrix ``P_→ = D_out^{-1} A`` or ``P_← = D_in^{-1} Aᵀ`` ``(N, N)`` float64.

    Parameters
    ----------
    edge_index, num_nodes, edge_weight
        The directed graph (any input of :func:`._graph_utils.as_graph`).
    direction : {"forward", "backward"}
        Follow the edges or go against them.
    dangling : {"stay", "vanish"}
        A node without a transition waits in place (rows sum to 1) or keeps a zero row.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` row-(sub)stochastic matrix.

    Examples
    --------
    The path ``0 → 1 → 2``: node 2 has no out-edge and stays; backwards node 0 stays.

    >>> ei = np.array([[0, 1], [1, 2]])
    >>> transition_matrix(ei, 3).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    >>> transition_matrix(ei, 3, direction="backward").tolist()
    [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    if direction not in DIRECTIONS:
        raise SpecError(f"direction must be {' or '.join(map(repr, DIRECTIONS))}, got {direction!r}")
    _check_options(1, dangling)
    g = _oriented(scale_free_weights(as_graph(edge_index, num_nodes, edge_weight, directed=True)), direction, dangling)
    A = adjacency(g, symmetrize=False, self_loops=True).toarray()
    deg = A.sum(axis=1, keepdims=True)
    return A / np.where(deg > 0, deg, 1.0)


def directed_walk_pe(
    edge_index: Any,
    num_nodes: int | None = None,
    walk_length: int = 16,
    edge_weight: Any = None,
    *,
    dangling: Dangling = "stay",
    dtype=np.float32,
    dense_max: int = DENSE_MAX,
) -> DirectedWalkPE:
    """Per-node forward and backward return probabilities ``[P^k]_ii``, ``k = 1..K``.

    .. math::  \\mathrm{fwd}_k(i) = [(D_{\\mathrm{out}}^{-1}A)^k]_{ii},\\quad
               \\mathrm{bwd}_k(i) = [(D_{\\mathrm{in}}^{-1}A^\\top)^k]_{ii}

    Parameters
    ----------
    edge_index, num_nodes, edge_weight
        The directed graph (edges walked as given; a Structure, PyG ``Data`` or tuple too).
    walk_length : int
        ``K``, the number of steps.
    dangling : {"stay", "vanish"}
        See the module docstring.
    dtype : numpy dtype
        Precision (float32 as RWSE; ``np.float64`` for full precision).
    dense_max : int
        Graphs above this many nodes use sparse products.

    Returns
    -------
    DirectedWalkPE
        ``forward (N, K)`` and ``backward (N, K)``; torch input gives torch output.

    Raises
    ------
    SpecError
        ``walk_length`` below 1 or an unknown ``dangling``.

    Examples
    --------
    A directed 3-cycle returns after exactly 3 steps. With ``0 ⇄ 1`` and ``2 → 0``, a forward
    walk from 0 is back after 2 steps; a backward one goes to 2 with probability 1/2 and,
    2 having no in-edge, stays there:

    >>> ei = np.array([[0, 1, 2], [1, 2, 0]])
    >>> directed_walk_pe(ei, 3, walk_length=3, dtype=np.float64).forward[0].tolist()
    [0.0, 0.0, 1.0]
    >>> r = directed_walk_pe(np.array([[0, 1, 2], [1, 0, 0]]), 3, walk_length=2, dtype=np.float64)
    >>> r.forward[0].tolist(), r.backward[0].tolist()
    ([0.0, 1.0], [0.0, 0.5])
    """
    K = _check_options(walk_length, dangling)
    dtype = check_float_dtype(dtype)
    g = scale_free_weights(as_graph(edge_index, num_nodes, edge_weight, directed=True))
    like = output_like(edge_index)
    out = []
    for direction in ("forward", "backward"):
        og = _oriented(g, direction, dangling)  # type: ignore[arg-type]
        pe = random_walk_pe(og, walk_length=K, symmetrize=False, dtype=dtype, dense_max=dense_max)
        out.append(to_output(pe, like))
    return DirectedWalkPE(*out)


def directed_walk_matrices(
    edge_index: Any,
    num_nodes: int | None = None,
    walk_length: int = 16,
    edge_weight: Any = None,
    *,
    dangling: Dangling = "stay",
    dtype=np.float32,
    max_entries: int | None = PAIR_MAX_ENTRIES,
) -> DirectedWalkPE:
    """Per-pair landing probabilities ``[P_→^k]_{uv}`` and ``[P_←^k]_{uv}``, ``(N, N, K)`` each.

    Parameters
    ----------
    edge_index, num_nodes, edge_weight
        The directed graph.
    walk_length : int
        ``K``, the number of steps.
    dangling : {"stay", "vanish"}
        ``"stay"``: every row ``[P^k]_{u,:}`` sums to 1 (see the module docstring).
    dtype : numpy dtype
        Output precision (computed in float64).
    max_entries : int or None
        Cap on ``N·N·K`` (dense output); ``None`` turns it off.

    Returns
    -------
    DirectedWalkPE
        ``forward (N, N, K)`` and ``backward (N, N, K)``: ``[..., k - 1]`` is the ``k``-step
        matrix. Torch input gives torch output.

    Raises
    ------
    LimitError
        ``N·N·K`` above ``max_entries``.

    Examples
    --------
    On ``0 → 1 → 2`` (node 2 dangling, it stays), two forward steps from 0 land on 2; two
    backward steps from 2 land on 0:

    >>> ei = np.array([[0, 1], [1, 2]])
    >>> fwd, bwd = directed_walk_matrices(ei, 3, walk_length=2, dtype=np.float64)
    >>> fwd[0, :, 1].tolist(), bwd[2, :, 1].tolist()
    ([0.0, 0.0, 1.0], [1.0, 0.0, 0.0])
    >>> bool(np.allclose(fwd.sum(axis=1), 1.0))
    True
    """
    K = _check_options(walk_length, dangling)
    dtype = check_float_dtype(dtype)
    g = scale_free_weights(as_graph(edge_index, num_nodes, edge_weight, directed=True))
    n = g.num_nodes
    if max_entries is not None and n * n * K > max_entries:
        raise LimitError(
            f"directed walk pair matrices need N·N·K = {n}·{n}·{K} values",
            limit="max_entries",
            value=n * n * K,
            maximum=max_entries,
            name=g.name,
        )
    like = output_like(edge_index)
    out = []
    for direction in ("forward", "backward"):
        P = transition_matrix(g, direction=direction, dangling=dangling)  # type: ignore[arg-type]
        mats = np.empty((n, n, K), dtype=dtype)
        Pk = P
        for k in range(K):
            if k:
                Pk = Pk @ P
            mats[:, :, k] = Pk
        out.append(to_output(mats, like))
    return DirectedWalkPE(*out)


def rwdir_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``rwdir[:K]`` (default 16): forward and backward return probabilities.

    The structure's edges are walked as given (a tree: parent → child), whether or not it is
    marked ``directed``; dangling nodes stay (see the module docstring).

    Parameters
    ----------
    structure : Structure
        A graph or tree.
    arg : str, optional
        ``K`` as text.

    Returns
    -------
    dict
        ``{"rwdir_fwd": (N, K) float32, "rwdir_bwd": (N, K) float32}``.

    Examples
    --------
    A JSON array of two numbers is a root with two leaves: forward, a leaf is a dead end and
    stays; backward, the root has no parent and stays.

    >>> import structpos
    >>> c = rwdir_coords(structpos.parse("[1, 2]", kind="json"), "2")
    >>> c["rwdir_fwd"].tolist(), c["rwdir_bwd"].tolist()
    ([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    """
    K = int(arg) if arg else 16
    r = directed_walk_pe(as_graph(structure, directed=True), walk_length=K)
    return {"rwdir_fwd": r.forward, "rwdir_bwd": r.backward}


def rwdir_pair_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``rwdir_pair[:K]`` (default 4): ``k``-step landing probabilities to every node.

    Parameters
    ----------
    structure : Structure
        A graph or tree (edges walked as given, dangling nodes stay).
    arg : str, optional
        ``K`` as text.

    Returns
    -------
    dict
        ``{"rwdir_pair_fwd": (N, N, K) float32, "rwdir_pair_bwd": (N, N, K) float32}``; row
        ``u`` holds ``[P^k]_{u,v}`` for every ``v`` and step ``k``.

    Examples
    --------
    >>> import structpos
    >>> c = rwdir_pair_coords(structpos.parse("[1, 2]", kind="json"), "1")
    >>> c["rwdir_pair_fwd"][0, :, 0].tolist(), c["rwdir_pair_bwd"][1, :, 0].tolist()
    ([0.0, 0.5, 0.5], [1.0, 0.0, 0.0])
    """
    K = int(arg) if arg else 4
    r = directed_walk_matrices(as_graph(structure, directed=True), walk_length=K)
    return {"rwdir_pair_fwd": r.forward, "rwdir_pair_bwd": r.backward}
