r"""The dense size-group kernels of the batched graph PEs in torch, on any torch device (CUDA included).

:func:`laplacian_pe_batch <structpos.coords.laplacian.laplacian_pe_batch>` and
:func:`random_walk_pe_batch <structpos.coords.random_walk.random_walk_pe_batch>` decompose or
multiply one zero-padded ``(G, S, S)`` adjacency stack per size group. With ``device=`` they run
that work here instead of numpy: the stack is moved to the device once, every step of the numpy
kernel is done there in torch, and only the kept results come back (``(G, k, S)`` eigenvector
rows, ``(G, S, K)`` walk diagonals). The formulas and conventions are those of the numpy kernels:

* **LapPE** — ``L = I − D^{-1/2} max(A, Aᵀ) D^{-1/2}`` with the sentinel diagonal on isolated
  and padded nodes, ``torch.linalg.eigh`` of the stack (cuSOLVER's batched solvers on CUDA; the
  batched Jacobi one only takes ``S <= 32``), the ``k`` columns after the ``c`` trivial modes of
  each graph, the largest-magnitude sign rule (first index within a relative ``1e-6`` of the
  largest entry), zeroed invalid columns, and the largest residual ``max_i ‖L v_i − λ_i v_i‖``. Ambiguity flags are computed by the
  numpy path's own :func:`._spectrum.ambiguous_modes` from the returned eigenvalues.
* **RWSE** — baby-step/giant-step diagonals of ``M^k`` with ``M = D^{-1/2} A D^{-1/2}``
  (symmetric) or ``D^{-1} A`` (directed), ``k = 1..K``, as ``_dense_rwse``.

Eigenvectors are equal to the numpy path's up to rounding outside degenerate eigenspaces, and
span the same spaces inside them (the basis of a degenerate space is the solver's choice on
every device). TF32 matmuls, when enabled globally in torch, lower float32 accuracy on CUDA.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..exceptions import SpecError
from ._eigen import SMALL, single_openmp_thread
from ._graph_utils import SENTINEL, TIE_RTOL

__all__ = ["resolve_device", "lap_group_torch", "rwse_group_torch"]


def resolve_device(device: Any):
    """``device`` as a ``torch.device`` that exists here, or ``None`` for the numpy kernels.

    Parameters
    ----------
    device : None, str or torch.device
        ``None`` (numpy), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, … .

    Returns
    -------
    torch.device or None

    Raises
    ------
    SpecError
        An unknown device string, or a CUDA device that this machine does not have.

    Examples
    --------
    >>> resolve_device(None) is None, resolve_device("cpu")
    (True, device(type='cpu'))
    >>> resolve_device("gpu0")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: device: 'gpu0' is not a torch device ...
    """
    if device is None:
        return None
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise SpecError(f"{device!r} is not a torch device ({e})", name="device") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise SpecError(f"{device!r} requested but CUDA is not available here", name="device")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise SpecError(f"{device!r}: only {torch.cuda.device_count()} CUDA device(s) here", name="device")
    return dev


def _torch_dtype(dtype):
    import torch

    return torch.float32 if np.dtype(dtype) == np.float32 else torch.float64


def _limit_threads(dev, S: int):
    """One OpenMP thread for torch's CPU LAPACK on small stacks (as :func:`._eigen.batched_eigh`)."""
    import contextlib

    return single_openmp_thread() if dev.type == "cpu" and S <= SMALL else contextlib.nullcontext()


def sign_rows_torch(Vt):
    """:func:`._graph_utils.canonical_sign_rows` in torch: each row ``(..., k, S)`` flipped so that
    its first entry within ``TIE_RTOL`` of the largest magnitude is positive (zero rows unchanged).

    Examples
    --------
    >>> import torch
    >>> sign_rows_torch(torch.tensor([[0.6, -0.8], [-0.6, 0.6], [0.0, 0.0]])).tolist()
    [[-0.6000000238418579, 0.800000011920929], [0.6000000238418579, -0.6000000238418579], [0.0, 0.0]]
    """
    import torch

    if Vt.shape[-1] == 0:
        return Vt
    mag = Vt.abs()
    top = mag.amax(dim=-1, keepdim=True)
    tied = (mag >= top * (1 - TIE_RTOL)).to(torch.uint8)
    j = tied.argmax(dim=-1, keepdim=True)  # the first maximal index (documented for argmax)
    pivot = Vt.gather(-1, j)
    return Vt * torch.where(pivot < 0, -1.0, 1.0).to(Vt.dtype)


def lap_group_torch(A: np.ndarray, n: np.ndarray, c: np.ndarray, k: int, dtype, dev):
    """LapPE of one size group on ``dev``: as ``laplacian._group_pe`` (same arguments and returns).

    Parameters
    ----------
    A : numpy.ndarray
        ``(G, S, S)`` float64 zero-padded adjacencies (not symmetrised).
    n, c : numpy.ndarray
        ``(G,)`` node counts and non-trivial component counts.
    k : int
        Modes kept per graph.
    dtype : numpy dtype
        Precision of the eigendecomposition (float32 or float64).
    dev : torch.device
        Where to compute.

    Returns
    -------
    tuple
        ``V (G, S, k)``, ``eigvals (G, k)``, ``valid (G, k)``, ``ambiguous (G, k)`` (numpy) and
        the largest eigenpair residual (float).

    Examples
    --------
    A path of 3 nodes: eigenvalues 1 and 2 after the trivial one.

    >>> import torch
    >>> A = np.zeros((1, 3, 3)); A[0, [0, 1], [1, 2]] = 1
    >>> V, ev, valid, amb, res = lap_group_torch(A, np.array([3]), np.array([1]), 2, np.float64, torch.device("cpu"))
    >>> np.round(ev, 12).tolist(), valid.tolist(), res < 1e-12
    ([[1.0, 2.0]], [[True, True]], True)
    """
    import torch

    from ._spectrum import ambiguous_modes

    G, S = len(n), A.shape[1]
    At = torch.from_numpy(A).to(dev, non_blocking=True)
    At = torch.maximum(At, At.transpose(1, 2))
    deg = At.sum(-1)
    iso = deg <= 0  # isolated nodes and padding
    dinv = torch.where(iso, 0.0, 1.0 / torch.sqrt(torch.where(iso, 1.0, deg)))
    L = At.mul_(-dinv[:, :, None]).mul_(dinv[:, None, :])
    L.diagonal(dim1=1, dim2=2).copy_(torch.where(iso, SENTINEL, 1.0))
    nt = torch.from_numpy(np.asarray(n, dtype=np.int64)).to(dev)
    ct = torch.from_numpy(np.asarray(c, dtype=np.int64)).to(dev)
    real_modes = nt - (iso.sum(-1) - (S - nt))
    with _limit_threads(dev, S):
        w, U = torch.linalg.eigh(L.to(_torch_dtype(dtype)))
    cols = ct[:, None] + torch.arange(k, device=dev)
    valid = cols < real_modes[:, None]
    cols = cols.clamp(max=S - 1)
    ev = torch.where(valid, w.gather(1, cols), 0.0)
    Vt = U.transpose(1, 2).gather(1, cols[:, :, None].expand(G, k, S))  # kept eigenvectors as rows
    nxt_col = ct + k
    has_next = nxt_col < real_modes
    nxt = w.gather(1, nxt_col.clamp(max=S - 1)[:, None])[:, 0]
    Vt = sign_rows_torch(Vt) * valid[:, :, None] + 0.0  # (+0.0 turns -0.0 into 0.0)
    R = Vt.to(L.dtype) @ L - Vt * ev[:, :, None]  # L is symmetric: the rows of (L V − V Λ)ᵀ
    res = float(torch.sqrt((R * R).sum(dim=2).amax())) if R.numel() else 0.0
    ev_np, valid_np = ev.cpu().numpy(), valid.cpu().numpy()
    amb = ambiguous_modes(ev_np, valid_np, nxt.cpu().numpy(), has_next.cpu().numpy())
    return Vt.transpose(1, 2).cpu().numpy(), ev_np, valid_np, amb, res


def rwse_group_torch(A: np.ndarray, K: int, symmetric: bool, dtype, dev) -> np.ndarray:
    """``(G, S, K)`` diagonals of ``M^k`` (``k = 1..K``) of one size group on ``dev``, as ``_dense_rwse``.

    Parameters
    ----------
    A : numpy.ndarray
        ``(G, S, S)`` adjacencies (already symmetrised when ``symmetric``).
    K : int
        Walk length.
    symmetric : bool
        ``M = D^{-1/2} A D^{-1/2}`` (same diagonal powers as ``P = D^{-1} A``) or ``P`` itself.
    dtype : numpy dtype
        Computation precision.
    dev : torch.device
        Where to compute.

    Returns
    -------
    numpy.ndarray
        ``(G, S, K)`` in ``dtype``.

    Examples
    --------
    One edge returns with probability 1 after every even number of steps:

    >>> import torch
    >>> A = np.array([[[0.0, 1.0], [1.0, 0.0]]])
    >>> rwse_group_torch(A, 4, True, np.float64, torch.device("cpu"))[0, 0].tolist()
    [0.0, 1.0, 0.0, 1.0]
    """
    import torch

    At = torch.from_numpy(A).to(dev, non_blocking=True).to(_torch_dtype(dtype))
    deg = At.sum(-1)
    pos = deg > 0
    if symmetric:
        dinv = torch.where(pos, 1 / torch.sqrt(torch.where(pos, deg, 1.0)), 0.0)
        M = dinv[:, :, None] * At * dinv[:, None, :]
    else:
        M = At / torch.where(pos, deg, 1.0)[:, :, None]
    s = max(1, int(np.ceil(np.sqrt(K))))
    G, S, _ = M.shape
    with _limit_threads(dev, S):
        babies = [M]  # M, M², …, M^s
        for _ in range(1, s):
            babies.append(babies[-1] @ M)
        out = torch.empty((G, S, K), dtype=M.dtype, device=dev)
        out[:, :, :s] = torch.stack([b.diagonal(dim1=1, dim2=2) for b in babies], dim=2)
        rows = babies if symmetric else [b.transpose(1, 2) for b in babies]  # [M^r]_mi read along m
        giant = babies[s - 1]
        for g in range(s, K, s):  # k = g+1 .. g+s from the giant step M^g
            if g > s:
                giant = giant @ babies[s - 1]
            for r in range(min(s, K - g)):
                out[:, :, g + r] = (giant * rows[r]).sum(-1)
    return out.cpu().numpy()
