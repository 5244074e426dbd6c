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

:func:`spectral_coords` is a small dense helper (``torch.linalg.eigh``) for tests and small
graphs; use ``structpos.coords`` for large ones.
"""

from __future__ import annotations

import torch
from torch import nn

from ._rotary import apply_rotary, check_layout, rope_inv_freq

__all__ = ["WIRE", "spectral_coords", "dense_laplacian"]


def dense_laplacian(edge_index, num_nodes: int, edge_weight=None, normalized: bool = False, dtype=torch.float64):
    """Dense symmetric Laplacian ``L = D − A`` (or ``I − D^{-1/2} A D^{-1/2}``) of an undirected graph."""
    ei = torch.as_tensor(edge_index, dtype=torch.int64)
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(ei.shape)}")
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= num_nodes):
        bad = torch.nonzero((ei < 0) | (ei >= num_nodes))[0].tolist()
        raise ValueError(f"edge_index entry at {bad} is outside 0..{num_nodes - 1}")
    w = torch.ones(ei.shape[1], dtype=dtype) if edge_weight is None else torch.as_tensor(edge_weight, dtype=dtype)
    adj = torch.zeros(num_nodes, num_nodes, dtype=dtype)
    adj.index_put_((ei[0], ei[1]), w, accumulate=True)
    adj = torch.maximum(adj, adj.T)  # undirected view
    adj.fill_diagonal_(0)
    deg = adj.sum(1)
    if not normalized:
        return torch.diag(deg) - adj
    inv_sqrt = torch.where(deg > 0, deg.clamp_min(1e-300).rsqrt(), torch.zeros_like(deg))
    lap = -inv_sqrt[:, None] * adj * inv_sqrt[None, :]
    lap.diagonal().add_((deg > 0).to(dtype))
    return lap


def spectral_coords(edge_index, num_nodes: int, k: int, normalized: bool = False, eigval_scale: bool = False):
    """The ``k`` eigenvectors after the first (smallest eigenvalue) of the graph Laplacian.

    Signs are made deterministic: each column's entry of largest magnitude (first on ties)
    is positive. ``eigval_scale`` divides column ``c`` by ``sqrt(λ_c)`` (WIRE's option).
    Returns ``(num_nodes, k)`` float64. Dense ``O(N³)``: for small graphs.
    """
    if not 1 <= k <= num_nodes - 1:
        raise ValueError(f"k must be in 1..num_nodes-1 = {num_nodes - 1}, got {k}")
    lap = dense_laplacian(edge_index, num_nodes, normalized=normalized)
    evals, evecs = torch.linalg.eigh(lap)
    vecs = evecs[:, 1 : k + 1]
    idx = vecs.abs().argmax(dim=0)
    signs = torch.sign(vecs[idx, torch.arange(k)])
    vecs = vecs * torch.where(signs == 0, torch.ones_like(signs), signs)
    if eigval_scale:
        vecs = vecs / evals[1 : k + 1].clamp_min(1e-12).sqrt()
    return vecs


class WIRE(nn.Module):
    """Rotary encoding from spectral coordinates: ``φ_i = Ω t_i`` (see the module docstring).

    ``omega`` overrides the initial ``(D/2, k)`` matrix; ``scale`` multiplies the default
    RoPE-like one (spectral coordinates are ``O(1/√N)``: a scale near ``N`` gives angle steps
    comparable to token positions). ``forward(q, k, t)`` takes ``q, k`` of shape
    ``(..., N, H, D)`` and ``t`` of shape ``(..., N, k)``; ``mask`` (``(..., N)``, True = real
    node) makes padded nodes an identity rotation.
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
    ):
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be ≥ 1, got {k}")
        self.head_dim, self.k, self.layout = int(head_dim), int(k), check_layout(layout)
        P = self.head_dim // 2
        if omega is None:
            inv = rope_inv_freq(self.head_dim, base)
            omega = torch.zeros(P, k)
            omega[torch.arange(P), torch.arange(P) % k] = inv * scale
        else:
            omega = torch.as_tensor(omega, dtype=torch.float32).clone()
            if omega.shape != (P, k):
                raise ValueError(f"omega must have shape (D/2, k) = ({P}, {k}), got {tuple(omega.shape)}")
        if learnable:
            self.omega = nn.Parameter(omega)
        else:
            self.register_buffer("omega", omega)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, k={self.k}, layout={self.layout!r}"

    def angles(self, t: torch.Tensor) -> torch.Tensor:
        """``φ = t Ωᵀ`` of shape ``(..., N, D/2)``, in fp32 (fp64 for fp64 ``t``)."""
        t = torch.as_tensor(t)
        if t.shape[-1:] != (self.k,):
            raise ValueError(f"spectral coordinates must end in k = {self.k}, got shape {tuple(t.shape)}")
        if not t.is_floating_point() or t.dtype in (torch.float16, torch.bfloat16):
            t = t.to(torch.float32)
        if not torch.isfinite(t).all():
            bad = torch.nonzero(~torch.isfinite(t))[0].tolist()
            raise ValueError(f"spectral coordinates contain a non-finite value at {bad} (NaN-padded LapPE?)")
        with torch.autocast(device_type=t.device.type, enabled=False):
            return t @ self.omega.to(device=t.device, dtype=t.dtype).T

    def rotate(self, x: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if x.shape[-1] != self.head_dim or x.shape[:-2] != t.shape[:-1]:
            raise ValueError(f"x {tuple(x.shape)} must be (..., N, H, {self.head_dim}) with t (..., N, {self.k}) = {tuple(t.shape)}")
        ang = self.angles(t)
        if mask is not None:
            ang = ang * torch.as_tensor(mask, device=ang.device).to(ang.dtype)[..., None]
        ang = ang.unsqueeze(-2)
        return apply_rotary(x, ang.cos(), ang.sin(), self.layout)

    def forward(self, q: torch.Tensor, k: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None):
        t = torch.as_tensor(t, device=q.device)
        return self.rotate(q, t, mask), self.rotate(k, t, mask)
