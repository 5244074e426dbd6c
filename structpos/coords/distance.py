r"""Pairwise graph distances for attention biases: hop (shortest-path) distance and
resistance distance.

* **Hop distance** (:func:`hop_distances`; SPD in Graphormer): ``SPD[i, j]`` = the number of edges on a
  shortest path ``i → j`` (edge weights ignored), found by breadth-first search from every
  node (scipy's C implementation, ``O(N·(N + E))``), stopped at ``max_dist`` hops. Pairs further
  apart than ``max_dist``, or unreachable, get ``unreachable`` (default ``-1``).
  ``directed=False`` (default) follows edges both ways.
* **Resistance distance** (effective resistance with edge weights as conductances): with the
  combinatorial Laplacian ``L = D − A_s`` of the symmetrised graph and ``L⁺`` its pseudo-inverse,
  ``R_ij = L⁺_ii + L⁺_jj − 2 L⁺_ij = Σ_{λ_k > 0} (u_k(i) − u_k(j))² / λ_k``.
  Computed per connected component as ``L⁺ = (L_C + J/n)^{-1} − J/n``; pairs in different
  components get ``inf``. Dense ``O(n³)`` per component: graphs over ``max_nodes`` nodes raise.
* **Resistance between requested pairs** (:func:`resistance_distance_pairs`), for large graphs:
  ``R_ij = (e_i − e_j)ᵀ L⁺ (e_i − e_j) = x_i − x_j`` with ``L x = e_i − e_j`` solved on the
  component grounded at one node (``x_r = 0``; the reduced matrix is SPD) — a sparse LU when
  its fill-in is small (the envelope test of :mod:`._sparse_eigen`), else conjugate gradients
  preconditioned by the same pyamg smoothed-aggregation hierarchy as the AMG eigensolver. No
  pseudo-inverse is formed.

The encoders' :func:`structpos.encoders.shortest_path_distance` wraps :func:`hop_distances`
(numpy output, a Structure's own direction).

Both return dense ``(N, N)`` matrices; the ``*_batch`` functions return a list, and
:func:`pad_pairwise` stacks a list into ``(B, N_max, N_max)`` with a validity mask.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence, get_args

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra
from scipy.sparse.linalg import splu

from ..exceptions import EigenConvergenceError, ShapeError, SolverError, SpecError
from ..structure import Structure, StructureError, as_int_array, raise_at_first
from ._args import PAIRWISE_MAX_BYTES, check_int, check_pairwise_size
from ._graph_utils import edge_weights, adjacency, as_graph, output_like, to_output

__all__ = [
    "hop_distances",
    "hop_distances_batch",
    "resistance_distance",
    "resistance_distance_pairs",
    "resistance_distance_batch",
    "pad_pairwise",
    "spd_coords",
    "resistance_coords",
]

ResistanceMethod = Literal["auto", "factor", "amg-cg"]
"""How :func:`resistance_distance_pairs` solves: chosen by the graph, a sparse LU, or AMG-preconditioned CG."""
RESISTANCE_METHODS: tuple[str, ...] = get_args(ResistanceMethod)

RESISTANCE_MAX_NODES = 20000


def hop_distances(
    edge_index: Any,
    num_nodes: int | None = None,
    max_dist: int | None = None,
    *,
    directed: bool = False,
    unreachable: int = -1,
    sources: Any = None,
    max_bytes: int | None = PAIRWISE_MAX_BYTES,
):
    """All-pairs hop distances ``(N, N)`` int64, capped at ``max_dist``.

    Parameters
    ----------
    edge_index, num_nodes
        The graph (any input of :func:`._graph_utils.as_graph`).
    max_dist : int, optional
        Pairs farther apart (and unreachable pairs) get ``unreachable``.
    directed : bool
        Follow edges only in their direction.
    unreachable : int
        Value of pairs beyond ``max_dist`` or unreachable.
    sources : array_like of int, optional
        Search only from these nodes: the result is then ``(len(sources), N)``, row ``r`` the
        distances from ``sources[r]``.
    max_bytes : int or None
        Cap on the memory of the dense result (float64 distances, then int64: 16 bytes a
        pair); default 4 GiB, ``None``: no cap.

    Returns
    -------
    ndarray or tensor (N, N)
        Zero-weight edges are absent; other weights are ignored. Torch in, torch out.

    Raises
    ------
    SpecError
        ``max_dist`` is negative or not an integer.
    StructureError
        An edge names a node outside ``0..N-1``, or a source is not an integer node.
    LimitError
        The ``(len(sources), N)`` result would exceed ``max_bytes`` (``max_memory_bytes``).

    Examples
    --------
    On a path the hop distance is ``|i − j|``; ``max_dist`` and ``directed`` cut pairs off:

    >>> path = np.array([[0, 1, 2], [1, 2, 3]])
    >>> i = np.arange(4)
    >>> bool((hop_distances(path, 4) == abs(i[:, None] - i[None, :])).all())
    True
    >>> hop_distances(path, 4, max_dist=2)[0].tolist(), hop_distances(path, 4, directed=True)[3].tolist()
    ([0, 1, 2, -1], [-1, -1, -1, 0])
    """
    g = as_graph(edge_index, num_nodes)
    if max_dist is not None:
        max_dist = check_int(max_dist, "max_dist", 0)
    n = g.num_nodes
    idx = None if sources is None else as_int_array(sources, "sources", name=g.name).reshape(-1)
    if idx is not None and idx.size and (idx.min() < 0 or idx.max() >= n):
        raise StructureError(f"sources must be nodes in 0..{n - 1}, got {idx.tolist()}", name=g.name)
    check_pairwise_size(n if idx is None else idx.size, n, 16, "hop distances", g.name, max_bytes)
    present = edge_weights(g) > 0
    row, col = g.edge_index[:, present]
    A = sp.csr_matrix((np.ones(row.shape[0]), (row, col)), shape=(n, n))
    if n == 0 or (idx is not None and idx.size == 0):
        return to_output(np.zeros((0 if idx is None else idx.size, n), dtype=np.int64), output_like(edge_index))
    limit = np.inf if max_dist is None else float(max_dist)
    D = dijkstra(A, directed=directed, unweighted=True, limit=limit, indices=idx)
    out = np.where(np.isfinite(D), D, unreachable).astype(np.int64)
    return to_output(out, output_like(edge_index))


def resistance_distance(
    edge_index: Any,
    num_nodes: int | None = None,
    edge_weight: Any = None,
    *,
    max_nodes: int = RESISTANCE_MAX_NODES,
):
    """All-pairs effective resistances ``R_ij = L⁺_ii + L⁺_jj − 2 L⁺_ij`` (see the module docstring).

    Parameters
    ----------
    edge_index, num_nodes
        The graph (any input of :func:`._graph_utils.as_graph`), symmetrised.
    edge_weight : array_like, optional
        ``(E,)`` conductances (default 1).
    max_nodes : int
        Largest graph accepted (the computation is dense, ``O(n³)`` per component).

    Returns
    -------
    ndarray or tensor (N, N)
        float64; ``inf`` across components, 0 on the diagonal. Torch in, torch out.

    Raises
    ------
    StructureError
        More than ``max_nodes`` nodes, or an edge naming a node outside ``0..N-1``.

    Examples
    --------
    On a tree resistance is the hop distance; conductances ``1, 2, 4`` in series add up to
    ``1 + 1/2 + 1/4``; a triangle's edge is 1 in parallel with 2; node 4 is isolated:

    >>> path = np.array([[0, 1, 2], [1, 2, 3]])
    >>> np.allclose(resistance_distance(path, 4), hop_distances(path, 4))
    True
    >>> resistance_distance(path, 4, edge_weight=[1.0, 2.0, 4.0])[0].round(9).tolist()
    [0.0, 1.0, 1.5, 1.75]
    >>> R = resistance_distance(np.array([[0, 1, 2], [1, 2, 0]]), 5)
    >>> bool(np.isclose(R[0, 1], 2 / 3)), float(R[0, 4])
    (True, inf)
    """
    g = as_graph(edge_index, num_nodes, edge_weight)
    n = g.num_nodes
    if n > max_nodes:
        raise StructureError(
            f"resistance distance is a dense N×N computation; {n} nodes exceeds max_nodes={max_nodes}",
            name=g.name,
        )
    A = adjacency(g)
    R = np.full((n, n), np.inf)
    np.fill_diagonal(R, 0.0)
    if n == 0:
        return to_output(R, output_like(edge_index))
    ncomp, labels = connected_components(A, directed=False)
    order = np.argsort(labels, kind="stable")
    for nodes in np.split(order, np.cumsum(np.bincount(labels, minlength=ncomp))[:-1]):
        s = len(nodes)
        if s < 2:
            continue
        Ac = A[nodes][:, nodes].toarray()
        shift = _conductance_exponent(Ac.max())
        if shift:  # R(w · 2**-shift) = 2**shift · R(w): solve where J is well scaled (see _conductance_exponent)
            Ac = np.ldexp(Ac, -shift)
        Lc = np.diag(Ac.sum(1)) - Ac
        J = np.full((s, s), 1.0 / s)
        try:
            Lp = np.linalg.inv(Lc + J) - J
        except np.linalg.LinAlgError as e:
            raise SolverError(
                f"the Laplacian of a {s}-node component is numerically singular ({e}); "
                "its conductances span too many orders of magnitude",
                name=g.name,
            ) from None
        d = np.diag(Lp)
        Rc = _scaled_back(np.maximum(d[:, None] + d[None, :] - 2 * Lp, 0.0), shift, g.name)
        R[np.ix_(nodes, nodes)] = Rc
        R[nodes, nodes] = 0.0
    return to_output(R, output_like(edge_index))


CONDUCTANCE_SCALE_EXPONENT = 10
"""Components whose largest conductance is outside ``[2**-10, 2**10]`` are solved rescaled
(:func:`_conductance_exponent`); inside it (unweighted graphs, multigraphs, ordinary weights) the
solve is unchanged, at most ~3 digits from the best conditioning."""


def _conductance_exponent(top: float) -> int:
    """``0`` when ``top`` (the largest conductance of a component) is within
    ``2**±CONDUCTANCE_SCALE_EXPONENT``, else ``e`` with ``2**e`` the power of two nearest to it.

    Resistance scales as ``1 / w``: the solve runs on ``w · 2**-e`` (exact) and the result is
    multiplied by ``2**-e``. The all-ones projector ``J`` added to make ``L + J``
    invertible has eigenvalue 1, so ``L`` must be of order 1 too, else ``L + J`` is as
    ill-conditioned as the scale is far from 1 (``1e-10`` conductances lost 7 digits,
    ``1e-300`` made it singular, ``1e308`` overflowed the degrees).

    Examples
    --------
    >>> _conductance_exponent(1.0), _conductance_exponent(3.0), _conductance_exponent(1e-10)
    (0, 0, -33)
    """
    top = float(top)
    if not top > 0 or 2.0**-CONDUCTANCE_SCALE_EXPONENT <= top <= 2.0**CONDUCTANCE_SCALE_EXPONENT:
        return 0
    return int(round(np.log2(top)))


def _scaled_back(r: np.ndarray, shift: int, name: str) -> np.ndarray:
    """Resistances solved on conductances ``w · 2**-shift`` back on ``w`` (``r · 2**-shift``: resistance
    scales as ``1/w``); StructureError when they leave the float64 range."""
    if shift:
        with np.errstate(over="ignore"):  # checked just below
            r = np.ldexp(r, -shift)
    if not np.isfinite(r).all():
        raise StructureError(
            "effective resistances exceed the float64 range (conductances too small, or "
            "spanning too many orders of magnitude)",
            name=name,
        )
    return r


def hop_distances_batch(
    graphs: Sequence[Any], max_dist: int | None = None, *, directed: bool = False, unreachable: int = -1
) -> list:
    """:func:`hop_distances` of every graph (a list of ``(N_g, N_g)`` matrices).

    Parameters
    ----------
    graphs : sequence
        Graphs as :func:`hop_distances` takes them (``(edge_index, num_nodes)`` tuples,
        :class:`~structpos.Structure`, PyG ``Data``).
    max_dist, directed, unreachable
        As :func:`hop_distances`.

    Returns
    -------
    list
        One ``(N_g, N_g)`` matrix per graph.

    Raises
    ------
    SpecError, StructureError
        As :func:`hop_distances`.

    Examples
    --------
    >>> [d.shape for d in hop_distances_batch([(np.array([[0], [1]]), 2), (np.zeros((2, 0), int), 1)])]
    [(2, 2), (1, 1)]
    """
    return [hop_distances(g, max_dist=max_dist, directed=directed, unreachable=unreachable) for g in graphs]


def resistance_distance_pairs(
    edge_index: Any,
    pairs: Any,
    num_nodes: int | None = None,
    edge_weight: Any = None,
    *,
    method: ResistanceMethod = "auto",
    tol: float = 1e-10,
):
    """Effective resistances ``R_ij`` of the requested node pairs, without the ``N × N`` matrix.

    Parameters
    ----------
    edge_index, num_nodes, edge_weight
        The graph (symmetrised; weights are conductances).
    pairs : array (P, 2) of node indices
        The pairs ``(i, j)`` wanted.
    method : {"auto", "factor", "amg-cg"}
        ``"factor"``: sparse LU of the grounded Laplacian of each component; ``"amg-cg"``:
        conjugate gradients preconditioned by pyamg smoothed aggregation (relative residual
        ``tol``); ``"auto"``: factor when the reverse-Cuthill–McKee envelope is small (paths,
        grids, planar graphs), else AMG-CG.
    tol : float
        Relative residual of the CG solves.

    Returns
    -------
    ndarray (P,)
        ``inf`` for pairs in different components, 0 for ``i == j``.

    Raises
    ------
    StructureError
        A pair names a node outside ``0..N-1``.
    EigenConvergenceError
        CG did not reach ``tol`` (carries the residuals).

    Examples
    --------
    A 4-cycle: adjacent nodes ``3/4``, opposite nodes ``1``; another component: ``inf``.

    >>> ei = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    >>> resistance_distance_pairs(ei, [[0, 1], [0, 2], [1, 1], [0, 4]], num_nodes=5).tolist()
    [0.75, 1.0, 0.0, inf]
    """
    g = as_graph(edge_index, num_nodes, edge_weight)
    P = as_int_array(pairs, "pairs", name=g.name)
    if P.size % 2:
        raise ShapeError(f"pairs must be (P, 2) node indices, got shape {P.shape}", name=g.name)
    P = P.reshape(-1, 2)
    n = g.num_nodes
    raise_at_first(
        (P < 0).any(1) | (P >= n).any(1),
        lambda i: f"pair {tuple(P[i].tolist())} names a node outside 0..{n - 1}",
        name=g.name,
        where="pair",
    )
    if method not in RESISTANCE_METHODS:
        *first, last = map(repr, RESISTANCE_METHODS)
        raise SpecError(f"unknown method {method!r} (use {', '.join(first)} or {last})")
    out = np.full(len(P), np.inf)
    out[P[:, 0] == P[:, 1]] = 0.0
    A = adjacency(g)
    ncomp, labels = connected_components(A, directed=False)
    todo = np.flatnonzero((P[:, 0] != P[:, 1]) & (labels[P[:, 0]] == labels[P[:, 1]]))
    if todo.size == 0:
        return out
    order = np.argsort(labels, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(labels, minlength=ncomp))[:-1])
    pos = np.empty(n, dtype=np.int64)
    for c in np.unique(labels[P[todo, 0]]):
        nodes = members[c]
        pos[nodes] = np.arange(len(nodes))
        sel = todo[labels[P[todo, 0]] == c]
        Ac = A[nodes][:, nodes]
        shift = _conductance_exponent(Ac.max())
        if shift:  # as resistance_distance: solve on w · 2**-shift, scale the result back
            Ac = Ac.tocsr(copy=True)
            Ac.data = np.ldexp(Ac.data, -shift)
        Lc = (sp.diags(np.asarray(Ac.sum(axis=1)).ravel()) - Ac).tocsr()
        out[sel] = _scaled_back(_grounded_solve(Lc, pos[P[sel, 0]], pos[P[sel, 1]], method, tol, g.name), shift, g.name)
    return out


def _grounded_solve(Lc, i: np.ndarray, j: np.ndarray, method: str, tol: float, name: str) -> np.ndarray:
    """``x_i − x_j`` for ``Lc x = e_i − e_j`` (per pair), ``Lc`` grounded at its max-degree node."""
    from ._sparse_eigen import FACTOR_ENVELOPE_MAX, _amg_preconditioner, _rcm_envelope

    m = Lc.shape[0]
    r = int(np.argmax(Lc.diagonal()))
    keep = np.r_[0:r, r + 1 : m]
    M = Lc[keep][:, keep].tocsc()
    idx = np.full(m, -1)
    idx[keep] = np.arange(m - 1)
    if method == "auto":
        method = "factor" if _rcm_envelope(Lc) <= FACTOR_ENVELOPE_MAX else "amg-cg"
    vals = np.empty(len(i))
    chunk = 256
    if method == "factor":
        lu = splu(M, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    else:
        from scipy.sparse.linalg import cg

        pre = _amg_preconditioner(Lc, np.zeros((m, 0)))
        pre = _grounded_preconditioner(pre, keep, r, m)
    for s in range(0, len(i), chunk):
        ii, jj = i[s : s + chunk], j[s : s + chunk]
        B = np.zeros((m - 1, len(ii)))
        cols = np.arange(len(ii))
        B[idx[ii[idx[ii] >= 0]], cols[idx[ii] >= 0]] += 1.0
        B[idx[jj[idx[jj] >= 0]], cols[idx[jj] >= 0]] -= 1.0
        if method == "factor":
            X = lu.solve(B)
        else:
            X = np.empty_like(B)
            for c in range(B.shape[1]):
                X[:, c], info = cg(M, B[:, c], rtol=tol, maxiter=2000, M=pre)
                if info != 0:
                    res = float(np.linalg.norm(M @ X[:, c] - B[:, c]))
                    raise EigenConvergenceError(
                        f"CG for resistance did not converge (residual {res:.2e})", residuals=[res], name=name
                    )
        full = np.zeros((m, X.shape[1]))
        full[keep] = X
        vals[s : s + chunk] = full[ii, cols] - full[jj, cols]
    return vals


def _grounded_preconditioner(pre, keep: np.ndarray, r: int, m: int):
    """The AMG V-cycle ``V ≈ L⁺`` of the whole component as a preconditioner of the grounded
    system: ``b ↦ Sᵀ V S b`` with ``S b`` = ``b`` padded by ``b_r = −Σb`` (a consistent
    right-hand side) and ``Sᵀ y = y[keep] − y_r`` (the solution with ``x_r = 0``); symmetric."""
    from scipy.sparse.linalg import LinearOperator

    def mv(b):
        full = np.zeros(m)
        full[keep] = b
        full[r] = -b.sum()
        y = pre @ full
        return y[keep] - y[r]

    return LinearOperator((m - 1, m - 1), matvec=mv, dtype=np.float64)


def resistance_distance_batch(graphs: Sequence[Any], *, max_nodes: int = RESISTANCE_MAX_NODES) -> list:
    """:func:`resistance_distance` of every graph (a list of ``(N_g, N_g)`` matrices).

    Parameters
    ----------
    graphs : sequence
        Graphs as :func:`resistance_distance` takes them (edge weights come with the graph).
    max_nodes : int
        As :func:`resistance_distance`.

    Returns
    -------
    list

    Raises
    ------
    StructureError
        As :func:`resistance_distance`.

    Examples
    --------
    A path of 3 nodes and a triangle: ends of the path are 2 apart, triangle nodes ``2/3``.

    >>> path, triangle = (np.array([[0, 1], [1, 2]]), 3), (np.array([[0, 1, 2], [1, 2, 0]]), 3)
    >>> [round(float(R[0, 2]), 6) for R in resistance_distance_batch([path, triangle])]
    [2.0, 0.666667]
    """
    return [resistance_distance(g, max_nodes=max_nodes) for g in graphs]


def pad_pairwise(mats: Sequence[Any], pad_value: float = 0.0):
    """Stack ``(N_g, N_g)`` matrices into ``(B, N_max, N_max)`` plus a bool mask of real pairs.

    Parameters
    ----------
    mats : sequence of array_like or torch.Tensor
        Square pairwise matrices (e.g. from :func:`hop_distances_batch`).
    pad_value : float
        Value of padded pairs.

    Returns
    -------
    padded : ndarray or tensor (B, N_max, N_max)
        In the inputs' common dtype (torch when the inputs are torch).
    mask : ndarray or tensor (B, N_max, N_max)
        True on pairs of real nodes.

    Examples
    --------
    >>> padded, mask = pad_pairwise([np.ones((2, 2)), np.ones((1, 1))], pad_value=-1)
    >>> padded[1].tolist(), mask.sum(axis=(1, 2)).tolist()
    ([[1.0, -1.0], [-1.0, -1.0]], [4, 1])
    """
    torch_in = bool(mats) and type(mats[0]).__module__.startswith("torch")
    arrs = [m.numpy() if torch_in else np.asarray(m) for m in mats]
    nmax = max((a.shape[0] for a in arrs), default=0)
    dtype = np.result_type(*arrs) if arrs else np.float64
    out = np.full((len(arrs), nmax, nmax), pad_value, dtype=dtype)
    mask = np.zeros((len(arrs), nmax, nmax), dtype=bool)
    for b, a in enumerate(arrs):
        n = a.shape[0]
        out[b, :n, :n] = a
        mask[b, :n, :n] = True
    if torch_in:
        import torch

        return torch.from_numpy(out), torch.from_numpy(mask)
    return out, mask


def spd_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``spd[:max_dist]``: ``spd (N, N)`` hop distances (-1 beyond/unreachable).

    Undirected unless the structure is ``directed``; a tree gives its parent–child edges.

    Parameters
    ----------
    structure : Structure
        A graph or tree.
    arg : str, optional
        ``max_dist`` as text (the part after ``spd:`` in a spec).

    Returns
    -------
    dict
        ``{"spd": (N, N) int64}``.

    Raises
    ------
    SpecError
        ``arg`` not a non-negative integer.

    Examples
    --------
    A star with centre 0: leaves are 2 apart, beyond ``spd:1``.

    >>> from structpos import Structure
    >>> star = Structure("graph", ["c", "a", "b", "d"], edge_index=[[0, 0, 0], [1, 2, 3]])
    >>> spd_coords(star)["spd"][1].tolist(), spd_coords(star, "1")["spd"][1].tolist()
    ([1, 0, 2, 2], [1, 0, -1, -1])
    """
    max_dist = int(arg) if arg else None
    return {"spd": hop_distances(as_graph(structure), max_dist=max_dist, directed=structure.directed)}


def resistance_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``resistance``: ``resistance (N, N)`` effective resistances.

    Parameters
    ----------
    structure : Structure
        A graph or tree (edge weights are conductances).
    arg : str, optional
        Unused (the family takes no argument).

    Returns
    -------
    dict
        ``{"resistance": (N, N) float64}``.

    Raises
    ------
    StructureError
        As :func:`resistance_distance`.

    Examples
    --------
    On a tree the resistance equals the hop distance:

    >>> from structpos import Structure
    >>> tree = Structure("tree", ["r", "a", "b"], parent=[-1, 0, 0])
    >>> resistance_coords(tree)["resistance"].round(9).tolist()
    [[0.0, 1.0, 1.0], [1.0, 0.0, 2.0], [1.0, 2.0, 0.0]]
    """
    return {"resistance": resistance_distance(as_graph(structure))}
