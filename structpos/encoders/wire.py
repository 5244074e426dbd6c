"""WIRE: rotary encoding of graph nodes by their Laplacian spectral coordinates.

Node ``i`` has spectral coordinates ``t_i ∈ ℝ^k`` (Laplacian eigenvectors, from
``structpos.coords`` or any tensor the caller has). Pair ``j`` of its query/key vectors is
rotated by

    φ_{i,j} = (Ω t_i)_j,        Ω ∈ ℝ^{(D/2) × k}  (fixed or learnable)

so ``q_iᵀ k_j`` after rotation depends on ``Ω (t_i − t_j)``: a relative encoding in spectral
space that acts token by token (it works with linear attention too). The default fixed ``Ω``
is RoPE-like: pair ``j`` reads spectral coordinate ``j mod k`` with frequency
``scale · base^{−2j/D}``. On a path graph the Fiedler vector ``cos(π(i+½)/n)`` is monotone,
so WIRE with ``k = 1`` orders nodes as 1-D RoPE does.

:func:`spectral_coords` gives ``t``: with ``normalized=True`` it is
:func:`structpos.coords.laplacian.laplacian_pe` (dense or sparse solver); the default
combinatorial Laplacian ``D − A`` (whose path-graph Fiedler vector is the cosine above) is
computed here, densely, with the same graph and sign conventions.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse.csgraph import connected_components
from torch import nn

from ..coords._graph_utils import Graph, adjacency, as_graph, canonical_phase
from ..coords.laplacian import laplacian_pe
from ..exceptions import ShapeError, SpecError
from ._checks import (
    QK_LAYOUTS,
    QKLayout,
    as_real_tensor,
    check_choice,
    check_count,
    check_every_axis_used,
    check_finite_values,
    check_flag,
    check_head_dim,
    check_real,
    from_blhd,
    to_blhd,
)
from ._rotary import apply_rotary, check_layout, rope_inv_freq

__all__ = ["WIRE", "spectral_coords"]


def spectral_coords(edge_index, num_nodes: int, k: int, normalized: bool = False, eigval_scale: bool = False):
    """Eigenvectors of the ``k`` smallest non-trivial eigenvalues of an undirected graph's Laplacian.

    * ``normalized=True``: ``L = I − D^{-1/2} A D^{-1/2}``, i.e. exactly the ``pe`` of
      :func:`structpos.coords.laplacian.laplacian_pe`.
    * ``normalized=False`` (default): the combinatorial ``L = D − A`` (dense ``eigh``,
      ``O(N³)``: small graphs), which ``structpos.coords`` does not provide.

    Both follow the conventions of :mod:`structpos.coords.laplacian`: ``A`` is symmetrised
    (``max(A, Aᵀ)``, self-loops dropped); the zero modes, one per connected component
    (isolated nodes included), are dropped; missing modes are zero columns; each column's
    largest-magnitude entry is positive (ties within 1e-6: lowest node). ``eigval_scale``
    divides column ``c`` by ``sqrt(λ_c)`` (WIRE's option).

    Parameters
    ----------
    edge_index : array_like or torch.Tensor
        ``(2, E)`` edges (read as undirected), or any graph :func:`structpos.coords.laplacian_pe`
        accepts.
    num_nodes : int
        Node count ``N``.
    k : int
        Modes kept, ``1 ≤ k ≤ N − 1``.
    normalized : bool
        Symmetric normalised Laplacian instead of ``D − A``.
    eigval_scale : bool
        Divide each mode by the square root of its eigenvalue.

    Returns
    -------
    torch.Tensor
        ``(N, k)`` float64 spectral coordinates.

    Raises
    ------
    SpecError
        ``k`` not an integer in ``1..N−1``.
    StructureError
        An edge names a node outside ``0..N−1``.

    Examples
    --------
    On the path ``0–1–2–3`` the Fiedler vector of ``D − A`` is ``√(2/n)·cos(π(i + ½)/n)``,
    with eigenvalue ``2 − 2cos(π/n)``:

    >>> import math
    >>> path = torch.tensor([[0, 1, 2], [1, 2, 3]])
    >>> t = spectral_coords(path, 4, k=1)
    >>> i = torch.arange(4, dtype=torch.float64)
    >>> torch.allclose(t[:, 0], math.sqrt(2 / 4) * torch.cos(math.pi * (i + 0.5) / 4))
    True
    >>> scaled = spectral_coords(path, 4, k=1, eigval_scale=True)
    >>> torch.allclose(scaled, t / math.sqrt(2 - 2 * math.cos(math.pi / 4)))
    True
    """
    if check_count(k, "k") > num_nodes - 1:
        raise SpecError(f"k must be an integer in 1..num_nodes-1 = {num_nodes - 1}, got {k!r}")
    g = as_graph(edge_index, num_nodes)
    if normalized:
        vecs, evals, _ = laplacian_pe(g, k=k)
    else:
        vecs, evals = _combinatorial_modes(g, k)
    if eigval_scale:
        vecs = vecs / np.sqrt(np.maximum(evals, 1e-12))
    return torch.from_numpy(np.ascontiguousarray(vecs, dtype=np.float64))


def _combinatorial_modes(g: Graph, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(vecs (N, k), eigvals (k,))`` of ``D − A`` above its zero modes (one per component)."""
    adj = adjacency(g)
    num_zero, _ = connected_components(adj, directed=False)
    adj = adj.toarray()
    evals, evecs = np.linalg.eigh(np.diag(adj.sum(1)) - adj)
    m = min(k, g.num_nodes - num_zero)
    vecs, vals = np.zeros((g.num_nodes, k)), np.zeros(k)
    vecs[:, :m] = canonical_phase(evecs[:, num_zero : num_zero + m])
    vals[:m] = evals[num_zero : num_zero + m]
    return vecs, vals


class WIRE(nn.Module):
    """Rotary encoding from spectral coordinates: ``φ_i = Ω t_i`` (see the module docstring).

    ``omega`` overrides the initial ``(D/2, k)`` matrix; ``scale`` multiplies the default
    RoPE-like one (spectral coordinates are ``O(1/√N)``: a scale near ``N`` gives angle steps
    comparable to token positions). ``forward(q, k, t)`` takes ``q, k`` of shape
    ``(..., N, H, D)`` and ``t`` of shape ``(..., N, k)``; ``mask`` (``(..., N)``, True = real
    node) makes padded nodes an identity rotation. ``qk_layout="bhld"`` takes ``(..., H, N, D)``
    instead (SDPA / FlexAttention layout). Shapes and dtypes are checked before any compute
    (:class:`~structpos.exceptions.ShapeError`); value checks are skipped under ``torch.compile``.

    Parameters
    ----------
    head_dim : int
        Rotated width ``D`` (even).
    k : int
        Spectral coordinates per node.
    base : float
        Frequency base of the default ``Ω``.
    scale : float
        Multiplies the default ``Ω``.
    learnable : bool
        ``Ω`` becomes a parameter.
    layout : {"half", "interleaved"}
        Pair layout inside a head vector.
    omega : torch.Tensor, optional
        Initial ``(D/2, k)`` matrix instead of the default.
    qk_layout : {"blhd", "bhld"}
        Node axis before (``blhd``) or after (``bhld``) the head axis.

    Raises
    ------
    SpecError
        ``k`` not an integer ``≥ 1``; ``head_dim`` odd or not positive; ``base ≤ 1``; ``scale``
        not a finite number > 0, or one that overflows or underflows ``Ω`` in float32; unknown ``layout`` or ``qk_layout``; non-finite ``omega``; or, with
        the default ``Ω``, ``k > D/2`` (spectral coordinates ``D/2 … k−1`` would be read by no
        pair and ignored).
    ShapeError
        ``omega`` of the wrong shape.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> wire = WIRE(head_dim=8, k=2, scale=4.0)
    >>> q, k = torch.randn(5, 2, 8), torch.randn(5, 2, 8)
    >>> t = torch.randn(5, 2)
    >>> q_rot, k_rot = wire(q, k, t)
    >>> torch.allclose(q_rot.norm(dim=-1), q.norm(dim=-1))
    True

    Scores depend on ``t_i − t_j`` only: translating every node's spectral coordinates by
    one vector leaves them unchanged.

    >>> def scores(t):
    ...     qr, kr = wire(q, k, t)
    ...     return torch.einsum("nhd,mhd->hnm", qr, kr)
    >>> torch.allclose(scores(t), scores(t + torch.tensor([0.3, -1.2])), atol=1e-5)
    True
    """

    def __init__(
        self,
        head_dim: int,
        k: int,
        base: float = 10000.0,
        scale: float = 1.0,
        learnable: bool = False,
        layout: str = "half",
        omega: torch.Tensor | None = None,
        *,
        qk_layout: QKLayout = "blhd",
    ):
        super().__init__()
        self.head_dim, self.k = check_head_dim(head_dim), check_count(k, "k")
        learnable = check_flag(learnable, "learnable")
        self.layout, self.qk_layout = check_layout(layout), check_choice(qk_layout, "qk_layout", QK_LAYOUTS)
        P = self.head_dim // 2
        if omega is None:
            inv = rope_inv_freq(self.head_dim, base)
            scale = check_real(scale, "scale", low=0.0, low_open=True)
            pairs_per_coord = [int(c < P) for c in range(self.k)]  # pair j reads coordinate j mod k
            check_every_axis_used(pairs_per_coord, self.k, f"head_dim={self.head_dim} has {P} rotary pairs")
            omega = torch.zeros(P, k)
            omega[torch.arange(P), torch.arange(P) % k] = inv * scale
            if not torch.isfinite(omega).all():
                raise SpecError(f"scale={scale} overflows the frequencies of Ω to inf in float32")
            if not bool((omega != 0).any(dim=1).all()):  # a pair that never rotates
                raise SpecError(f"scale={scale} underflows frequencies of Ω to 0 in float32")
        else:
            omega = as_real_tensor(omega, "omega")
            if omega.shape != (P, k):
                raise ShapeError(f"omega must have shape (D/2, k) = ({P}, {k}), got {tuple(omega.shape)}")
            if not torch.isfinite(omega).all():
                raise SpecError("omega contains non-finite values")
        if learnable:
            self.omega = nn.Parameter(omega)
        else:
            self.register_buffer("omega", omega)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, k={self.k}, layout={self.layout!r}"

    def angles(self, t: torch.Tensor) -> torch.Tensor:
        """``φ = t Ωᵀ`` of shape ``(..., N, D/2)``, in fp32 (fp64 for fp64 ``t``).

        Parameters
        ----------
        t : torch.Tensor
            ``(..., N, k)`` spectral coordinates.

        Returns
        -------
        torch.Tensor
            ``(..., N, D/2)`` angles.

        Raises
        ------
        ShapeError
            ``t`` does not end in ``k``, or holds a non-finite value (e.g. NaN-padded LapPE).

        Examples
        --------
        The default ``Ω``: pair ``j`` reads coordinate ``j mod k`` at frequency ``scale·ω_j``.

        >>> wire = WIRE(head_dim=8, k=2, scale=4.0)
        >>> torch.allclose(wire.angles(torch.tensor([[1.0, 2.0]])), torch.tensor([[4.0, 0.8, 0.04, 0.008]]))
        True
        """
        t = torch.as_tensor(t)
        if t.shape[-1:] != (self.k,):
            raise ShapeError(f"spectral coordinates must have shape (..., N, {self.k}), given {tuple(t.shape)}")
        if not t.is_floating_point() or t.dtype in (torch.float16, torch.bfloat16):
            t = t.to(torch.float32)
        check_finite_values(t, "spectral coordinates", " (NaN-padded LapPE?)")
        with torch.autocast(device_type=t.device.type, enabled=False):
            return t @ self.omega.to(device=t.device, dtype=t.dtype).T

    def rotate(self, x: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Rotate ``x`` (``(..., N, H, D)``, or ``(..., H, N, D)`` with ``qk_layout="bhld"``) by ``Ω t``.

        Parameters
        ----------
        x : torch.Tensor
            Queries or keys.
        t : torch.Tensor
            ``(..., N, k)`` spectral coordinates.
        mask : torch.Tensor, optional
            ``(..., N)``, True on real nodes; the others are not rotated.

        Returns
        -------
        torch.Tensor
            The rotated ``x``.

        Raises
        ------
        ShapeError
            ``x`` not a floating tensor of the layout, or ``t`` not matching its nodes.

        Examples
        --------
        >>> import torch
        >>> x = torch.randn(3, 1, 4)
        >>> torch.equal(WIRE(4, 1).rotate(x, torch.zeros(3, 1)), x)
        True
        """
        exp = f"(..., N, H, {self.head_dim})" if self.qk_layout == "blhd" else f"(..., H, N, {self.head_dim})"
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 3 or x.shape[-1] != self.head_dim:
            given = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ShapeError(f"q/k must be a floating tensor {exp}; given {given}")
        x = to_blhd(x, self.qk_layout)
        t = torch.as_tensor(t, device=x.device)
        if x.shape[:-2] != t.shape[:-1]:
            raise ShapeError(
                f"spectral coordinates must have shape {(*tuple(x.shape[:-2]), self.k)} (the node shape of q/k, "
                f"then k = {self.k}), given {tuple(t.shape)}"
            )
        ang = self.angles(t)
        if mask is not None:
            ang = ang * torch.as_tensor(mask, device=ang.device).to(ang.dtype)[..., None]
        ang = ang.unsqueeze(-2)
        return from_blhd(apply_rotary(x, ang.cos(), ang.sin(), self.layout), self.qk_layout)

    def forward(self, q: torch.Tensor, k: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None):
        """Return ``(q_rot, k_rot)``, both rotated by ``Ω t`` (:meth:`rotate`).

        Examples
        --------
        >>> q_rot, k_rot = WIRE(4, 1)(torch.ones(3, 1, 4), torch.ones(3, 1, 4), torch.zeros(3, 1))
        >>> torch.equal(q_rot, torch.ones(3, 1, 4))
        True
        """
        return self.rotate(q, t, mask), self.rotate(k, t, mask)
