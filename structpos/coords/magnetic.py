r"""Magnetic Laplacian eigenvectors for directed graphs (Geisler et al., *Transformers Meet
Directed Graphs*; MagNet).

With ``A`` the directed weighted adjacency (self-loops ignored, duplicates summed),
``A_s = max(A, Aᵀ)`` its symmetrisation with degrees ``d_s``, and ``B = [A > 0]`` the edge
indicator, the potential ``q`` defines

.. math::
    \Theta^{(q)} = 2\pi q\,(B - B^\top),\qquad
    L^{(q)} = I - \big(D_s^{-1/2} A_s D_s^{-1/2}\big) \odot \exp(i\,\Theta^{(q)}),

a Hermitian positive semi-definite matrix with spectrum in ``[0, 2]``. A one-way edge
``u → v`` carries phase ``e^{2πiq}`` (``e^{-2πiq}`` back), a two-way edge none, so ``q = 0``
gives the ordinary normalised Laplacian. The PE is the ``k`` eigenvectors of the smallest
eigenvalues (**none is dropped**: for ``q > 0`` there is in general no trivial mode), complex
``(N, k)``, and their eigenvalues.

Conventions
-----------
* ``q`` is absolute (default 0.25, the largest useful value); ``q_relative=True`` uses
  ``q / max(1, m₁)`` with ``m₁`` the number of node pairs joined in one direction only.
* Direction comes only from which edges exist; weights enter through ``A_s``.
* **Canonical phase**: each eigenvector is multiplied by a unit complex number so that its
  largest-modulus entry is real positive (ties within a relative 1e-6: lowest node index).
* Isolated nodes are left out of the decomposition: their PE rows are zero and they take no
  mode. Fewer than ``k`` modes → zero columns, eigenvalue 0, ``mask`` False.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from ..structure import Structure
from ._eigen import batched_eigh, choose_method, smallest_eigenpairs
from ._graph_utils import (
    SENTINEL,
    Graph,
    adjacency,
    as_graph,
    as_graphs,
    batch_output,
    canonical_phase,
    dense_adjacency_batch,
    group_by_size,
    output_like,
    scatter_rows,
    to_output,
)
from .laplacian import LapBatch, _check_k

__all__ = ["magnetic_laplacian_pe", "magnetic_laplacian_pe_batch", "maglap_coords", "DENSE_MAX"]

DENSE_MAX = 1000


def magnetic_laplacian_pe(
    edge_index: Any,
    num_nodes: int | None = None,
    k: int = 8,
    q: float = 0.25,
    edge_weight: Any = None,
    *,
    q_relative: bool = False,
    method: str = "auto",
    dense_max: int = DENSE_MAX,
    tol: float = 1e-8,
    maxiter: int | None = None,
):
    """Magnetic LapPE of one directed graph: ``(pe (N, k) complex, eigvals (k,), mask (k,))``.

    ``method``: ``"auto"`` (dense when ``N <= dense_max``), ``"dense"``, ``"shift-invert"`` or
    ``"lobpcg"`` (sparse, never densified). Torch input gives torch output.
    """
    g = as_graph(edge_index, num_nodes, edge_weight)
    k = _check_k(k)
    _check_q(q)
    method = choose_method(method, g.num_nodes, dense_max)
    if method == "dense":
        out = magnetic_laplacian_pe_batch([g], k, q, q_relative=q_relative, as_torch=False)
        pe, ev, mask = out.pe, out.eigvals[0], out.mask[0]
    else:
        pe, ev, mask = _sparse_graph(g, k, q, q_relative, method=method, tol=tol, maxiter=maxiter)
    like = output_like(edge_index)
    return to_output(pe, like), to_output(ev, like), to_output(mask, like)


def magnetic_laplacian_pe_batch(
    graphs: Sequence[Any],
    k: int = 8,
    q: float = 0.25,
    *,
    q_relative: bool = False,
    dtype=np.float64,
    bucket: int = 1,
    dense_max: int = DENSE_MAX,
    as_torch: bool | None = None,
) -> LapBatch:
    """Magnetic LapPE of many directed graphs (one stacked complex ``eigh`` per size group,
    sentinel-padded); graphs over ``dense_max`` nodes use the sparse path. ``pe`` is complex."""
    k = _check_k(k)
    _check_q(q)
    gs = as_graphs(graphs, directed=True)
    B = len(gs)
    sizes = np.fromiter((g.num_nodes for g in gs), dtype=np.int64, count=B)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    cdtype = np.complex64 if np.dtype(dtype) == np.float32 else np.complex128
    pe = np.zeros((int(ptr[-1]), k), dtype=cdtype)
    eigvals = np.zeros((B, k))
    mask = np.zeros((B, k), dtype=bool)
    small = np.flatnonzero(sizes <= dense_max)
    for S, local in group_by_size(sizes[small], bucket).items():
        idx = small[local]
        if S == 0:
            continue
        group = [gs[i] for i in idx]
        n = sizes[idx]
        L, iso = _dense_magnetic(group, S, q, q_relative)
        n_iso = (iso & (np.arange(S) < n[:, None])).sum(-1)
        w, U = batched_eigh(L, dtype)
        kk = min(k, S)
        valid = np.arange(kk) < (n - n_iso)[:, None]
        V = canonical_phase(U[:, :, :kk]) * valid[:, None, :]
        full = np.zeros((len(idx), S, k), dtype=cdtype)
        full[:, :, :kk] = V
        eigvals[idx, :kk] = np.where(valid, np.maximum(w[:, :kk], 0.0), 0.0)  # PSD: clip -1e-16
        mask[idx, :kk] = valid
        scatter_rows(pe, ptr, idx, n, full)
    for i in np.flatnonzero(sizes > dense_max):
        p, ev, m = _sparse_graph(gs[i], k, q, q_relative)
        pe[ptr[i]: ptr[i + 1]], eigvals[i], mask[i] = p, ev, m
    return LapBatch(*batch_output((pe, eigvals, mask, ptr), graphs, as_torch))


def maglap_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``maglap[:k[:q]]`` (defaults 8, 0.25): ``maglap_re``, ``maglap_im``
    ``(N, k)``, ``maglap_eigvals`` and ``maglap_mask`` (repeated per node). Edge directions are
    used for directed graphs and trees (parent → child); other graphs are symmetrised first."""
    parts = (arg or "").split(":")
    k = int(parts[0]) if parts[0] else 8
    q = float(parts[1]) if len(parts) > 1 and parts[1] else 0.25
    g = as_graph(structure)
    if not (structure.directed or structure.is_tree):
        A = adjacency(g).tocoo()
        g = Graph(np.stack([A.row, A.col]).astype(np.int64), g.num_nodes, A.data, False, g.name)
    pe, ev, mask = magnetic_laplacian_pe(g, k=k, q=q)
    n = structure.num_nodes
    return {
        "maglap_re": pe.real.copy(),
        "maglap_im": pe.imag.copy(),
        "maglap_eigvals": np.tile(ev, (n, 1)),
        "maglap_mask": np.tile(mask, (n, 1)),
    }


# ---------------------------------------------------------------- kernels
def _check_q(q) -> None:
    if not np.isfinite(q) or q < 0:
        raise ValueError(f"potential q must be a finite number >= 0, got {q!r}")


def _one_way_pairs(Bind: np.ndarray) -> np.ndarray:
    """Number of node pairs joined in exactly one direction, per matrix of a ``(..., S, S)`` stack."""
    return (Bind & ~np.swapaxes(Bind, -1, -2)).sum(axis=(-1, -2))


def _dense_magnetic(group: Sequence[Graph], S: int, q: float, q_relative: bool):
    A = dense_adjacency_batch(group, S, symmetrize=False)
    Bind = A > 0
    As = np.maximum(A, A.transpose(0, 2, 1))
    deg = As.sum(-1)
    iso = deg <= 0
    qq = np.full(len(group), float(q))
    if q_relative:
        qq = qq / np.maximum(1, _one_way_pairs(Bind))
    theta = (2 * np.pi * qq)[:, None, None] * (Bind.astype(np.float64) - Bind.transpose(0, 2, 1))
    dinv = np.where(iso, 0.0, 1.0 / np.sqrt(np.where(iso, 1.0, deg)))
    L = -(dinv[:, :, None] * As * dinv[:, None, :]) * np.exp(1j * theta)
    L[:, np.arange(S), np.arange(S)] = np.where(iso, SENTINEL, 1.0)
    return L, iso


def _sparse_graph(g: Graph, k: int, q: float, q_relative: bool, *, method: str = "shift-invert",
                  tol: float = 1e-8, maxiter: int | None = None):
    n = g.num_nodes
    A = adjacency(g, symmetrize=False)
    Bind = (A > 0).astype(np.float64).tocsr()
    As = A.maximum(A.T).tocsr()
    deg = np.asarray(As.sum(axis=1)).ravel()
    keep = np.flatnonzero(deg > 0)
    if q_relative:
        one_way = int((Bind - Bind.multiply(Bind.T)).sum())
        q = q / max(1, one_way)
    pe = np.zeros((n, k), dtype=np.complex128)
    ev = np.zeros(k)
    mask = np.zeros(k, dtype=bool)
    m = min(k, len(keep))
    if m == 0:
        return pe, ev, mask
    Th = (Bind - Bind.T).tocsr()[keep][:, keep]
    Ak = As[keep][:, keep].tocoo()
    dinv = 1.0 / np.sqrt(deg[keep])
    phase = np.exp(2j * np.pi * q * np.asarray(Th[Ak.row, Ak.col]).ravel())
    H = sp.csr_matrix((dinv[Ak.row] * Ak.data * dinv[Ak.col] * phase, (Ak.row, Ak.col)), shape=(len(keep),) * 2)
    L = (sp.identity(len(keep), dtype=np.complex128, format="csr") - H).tocsr()
    if m >= len(keep) - 1:
        w, U = np.linalg.eigh(L.toarray())
        w, U = w[:m], U[:, :m]
    else:
        w, U = smallest_eigenpairs(L, m, tol=tol, maxiter=maxiter, method=method, name=g.name)
    pe[keep, :m] = canonical_phase(U)
    ev[:m] = np.maximum(w, 0.0)
    mask[:m] = True
    return pe, ev, mask
