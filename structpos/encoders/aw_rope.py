"""AW-RoPE: rotary phases transported along graph edges.

Each head vector is read as ``C = D/2`` complex channels (pair ``c`` of the layout is
``Re + i·Im``), channel ``c`` with frequency ``ω_c = base^{−2c/D}``. Every directed edge
``u → v`` carries an antisymmetric phase ``a_uv = −a_vu``, from coordinates
(``a_uv = wᵀ(pos_v − pos_u)``) or learned (``π·tanh(ψ(h_u, h_v) − ψ(h_v, h_u))``). The transport
operator of channel ``c`` is

    T_c[u, v] = P_uv · e^{i ω_c a_uv},        P = D^{-1} A  (row-stochastic)

and the encoded features are the discounted sum of transported neighbourhoods, ``z ∈ [0, 1)``:

    exact:  Y = (I − z T)^{-1} X          (dense complex solve per channel, differentiable)
    sparse: Y = Σ_{k=0}^{K} z^k T^k X     (K edge passes, O(K·E·D))

``‖zT‖_∞ ≤ z < 1``, so the sparse sum converges to the exact one with error
``≤ z^{K+1}/(1−z)·‖X‖_∞``. If ``a`` is a gradient field, ``a_uv = g(v) − g(u)``, then
``T = Λ^{-1} P Λ`` with ``Λ = diag(e^{iωg})``: AW-RoPE is node-wise RoPE by ``g``, plain
propagation, and the inverse rotation — the gauge equivalence the tests check. Applied to
projected ``q`` and ``k`` (node axis first: ``(N, …, D)``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..exceptions import ShapeError
from ._rotary import check_layout, rope_inv_freq

__all__ = [
    "AWRoPE",
    "LearnedEdgePhase",
    "edge_phases_from_coords",
    "check_antisymmetric",
    "aw_propagate_sparse",
    "aw_propagate_exact",
]


def _check_edges(edge_index, num_nodes: int) -> torch.Tensor:
    ei = torch.as_tensor(edge_index)
    if ei.dim() != 2 or ei.shape[0] != 2 or ei.is_floating_point():
        raise ValueError(f"edge_index must be an integer (2, E) tensor, got {tuple(ei.shape)} {ei.dtype}")
    ei = ei.to(torch.int64)
    if ei.numel():
        bad = (ei < 0) | (ei >= num_nodes)
        if bad.any():
            pos = torch.nonzero(bad)[0].tolist()
            raise ValueError(
                f"edge_index[{pos[0]}, {pos[1]}] = {int(ei[pos[0], pos[1]])} is outside 0..{num_nodes - 1}"
            )
    return ei


def edge_phases_from_coords(pos: torch.Tensor, edge_index: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """``a_uv = wᵀ(pos_v − pos_u)`` for every edge ``u → v`` (``pos`` ``(N, A)`` or ``(N,)``; ``w`` defaults to ones)."""
    pos = torch.as_tensor(pos)
    if pos.dim() == 1:
        pos = pos[:, None]
    pos = pos.to(torch.float64 if pos.dtype == torch.float64 else torch.float32)
    ei = _check_edges(edge_index, pos.shape[0]).to(pos.device)
    diff = pos[ei[1]] - pos[ei[0]]
    if w is None:
        return diff.sum(-1)
    return diff @ w.to(diff.dtype)


def check_antisymmetric(edge_index: torch.Tensor, a: torch.Tensor, num_nodes: int, atol: float = 1e-5) -> None:
    """Raise when an edge appears twice or when ``a_vu ≠ −a_uv`` for an edge present both ways."""
    ei = _check_edges(edge_index, num_nodes)
    if a.shape != (ei.shape[1],):
        raise ValueError(f"edge phases must have shape (E,) = ({ei.shape[1]},), got {tuple(a.shape)}")
    if not torch.isfinite(a).all():
        raise ValueError(f"edge phase of edge {int(torch.nonzero(~torch.isfinite(a))[0])} is not finite")
    key = ei[0] * num_nodes + ei[1]
    order = key.argsort()
    sk = key[order]
    dup = torch.nonzero(sk[1:] == sk[:-1])
    if dup.numel():
        e = int(order[int(dup[0])])
        raise ValueError(f"edge {int(ei[0, e])}->{int(ei[1, e])} appears more than once in edge_index")
    rkey = ei[1] * num_nodes + ei[0]
    at = torch.searchsorted(sk, rkey).clamp_max(max(len(sk) - 1, 0))
    has_rev = sk[at] == rkey if len(sk) else torch.zeros(0, dtype=torch.bool)
    rev_a = a[order[at]]
    bad = has_rev & ((a + rev_a).abs() > atol)
    if bad.any():
        e = int(torch.nonzero(bad)[0])
        raise ValueError(
            f"edge phases must be antisymmetric: a[{int(ei[0, e])}->{int(ei[1, e])}] = {float(a[e]):.6g} "
            f"but the reverse edge has {float(rev_a[e]):.6g}"
        )


class LearnedEdgePhase(nn.Module):
    """``a_uv = π·tanh(ψ(h_u, h_v) − ψ(h_v, h_u))`` with a small MLP ``ψ``: antisymmetric in ``[−π, π]``."""

    def __init__(self, feature_dim: int, hidden: int = 32):
        super().__init__()
        self.psi = nn.Sequential(nn.Linear(2 * feature_dim, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        ei = _check_edges(edge_index, h.shape[0]).to(h.device)
        hu, hv = h[ei[0]], h[ei[1]]
        diff = self.psi(torch.cat([hu, hv], -1)) - self.psi(torch.cat([hv, hu], -1))
        return math.pi * torch.tanh(diff.squeeze(-1))


def _transport(edge_index, a, omega, num_nodes, edge_weight, dtype):
    """Row-normalised weights ``P_uv`` (E,) and phases ``cos, sin(ω_c a_uv)`` (E, C)."""
    w = torch.ones(edge_index.shape[1], dtype=dtype, device=a.device) if edge_weight is None else edge_weight.to(dtype)
    if edge_weight is not None and (edge_weight.shape != (edge_index.shape[1],) or bool((edge_weight < 0).any())):
        raise ValueError("edge_weight must be a non-negative (E,) tensor")
    deg = torch.zeros(num_nodes, dtype=dtype, device=a.device).index_add(0, edge_index[0], w)
    p = w / deg.clamp_min(torch.finfo(dtype).tiny)[edge_index[0]]
    phase = a.to(dtype)[:, None] * omega.to(dtype)[None, :]
    return p, phase.cos(), phase.sin()


def _to_complex_parts(x, layout):
    half = x.shape[-1] // 2
    if layout == "half":
        return x[..., :half], x[..., half:]
    pairs = x.unflatten(-1, (half, 2))
    return pairs[..., 0], pairs[..., 1]


def _from_complex_parts(re, im, layout):
    if layout == "half":
        return torch.cat([re, im], dim=-1)
    return torch.stack([re, im], dim=-1).flatten(-2)


def aw_propagate_sparse(x, edge_index, a, omega, z: float = 0.8, K: int = 8, edge_weight=None, layout="half"):
    """``Y = Σ_{k≤K} z^k T^k X`` by ``K`` edge passes; ``x`` is ``(N, …, D)``, ``a`` is ``(E,)``."""
    ei = _check_edges(edge_index, x.shape[0]).to(x.device)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    p, c, s = _transport(ei, a, omega, x.shape[0], edge_weight, dtype)
    extra = (1,) * (x.dim() - 2)
    cr = (p[:, None] * c).view(-1, *extra, c.shape[-1])
    ci = (p[:, None] * s).view(-1, *extra, s.shape[-1])
    re, im = (t.to(dtype) for t in _to_complex_parts(x, layout))
    acc_r, acc_i = re, im
    u, v = ei[0], ei[1]
    for step in range(1, K + 1):
        yr, yi = re[v], im[v]
        mr = cr * yr - ci * yi
        mi = cr * yi + ci * yr
        re = torch.zeros_like(acc_r).index_add(0, u, mr)
        im = torch.zeros_like(acc_i).index_add(0, u, mi)
        acc_r = acc_r + (z**step) * re
        acc_i = acc_i + (z**step) * im
    return _from_complex_parts(acc_r, acc_i, layout).to(x.dtype)


def aw_propagate_exact(x, edge_index, a, omega, z: float = 0.8, edge_weight=None, layout="half"):
    """``Y = (I − zT)^{-1} X`` by a dense complex solve per channel (``O(C·N³)``; small graphs)."""
    N = x.shape[0]
    ei = _check_edges(edge_index, N).to(x.device)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    cdtype = torch.complex128 if dtype == torch.float64 else torch.complex64
    p, c, s = _transport(ei, a, omega, N, edge_weight, dtype)
    C = c.shape[-1]
    coef = torch.complex(p[:, None] * c, p[:, None] * s).T  # (C, E)
    ch = torch.arange(C, device=x.device)[:, None].expand(C, ei.shape[1])
    T = torch.zeros(C, N, N, dtype=cdtype, device=x.device).index_put(
        (ch, ei[0].expand(C, -1), ei[1].expand(C, -1)), coef, accumulate=True
    )
    M = torch.eye(N, dtype=cdtype, device=x.device) - z * T
    re, im = _to_complex_parts(x.to(dtype), layout)
    rest = re.shape[1:-1]
    X = torch.complex(re, im).reshape(N, -1, C).permute(2, 0, 1)  # (C, N, F)
    Y = torch.linalg.solve(M, X).permute(1, 2, 0).reshape(N, *rest, C)
    return _from_complex_parts(Y.real, Y.imag, layout).to(x.dtype)


class AWRoPE(nn.Module):
    """AW-RoPE on projected ``q``/``k`` (see the module docstring).

    ``phase`` chooses where ``a`` comes from: ``"given"`` (pass ``a`` to forward), ``"coords"``
    (``a_uv = wᵀ(pos_v − pos_u)``, ``w`` of length ``num_axes``, learnable when ``learnable``) or
    ``"learned"`` (:class:`LearnedEdgePhase` on node features ``h`` of size ``feature_dim``).
    ``mode`` is ``"sparse"`` (``K`` terms) or ``"exact"`` (dense solve).
    """

    def __init__(
        self,
        head_dim: int,
        z: float = 0.8,
        K: int = 8,
        mode: str = "sparse",
        base: float = 10000.0,
        phase: str = "given",
        num_axes: int = 1,
        feature_dim: int | None = None,
        hidden: int = 32,
        learnable: bool = False,
        layout: str = "half",
        check: bool = True,
    ):
        super().__init__()
        if not 0.0 <= z < 1.0:
            raise ValueError(f"z must be in [0, 1), got {z}")
        if mode not in ("sparse", "exact"):
            raise ValueError(f"mode must be 'sparse' or 'exact', got {mode!r}")
        if phase not in ("given", "coords", "learned"):
            raise ValueError(f"phase must be 'given', 'coords' or 'learned', got {phase!r}")
        if K < 0:
            raise ValueError(f"K must be ≥ 0, got {K}")
        self.head_dim, self.z, self.K, self.mode, self.phase = int(head_dim), float(z), int(K), mode, phase
        self.layout, self.check = check_layout(layout), check
        self.register_buffer("omega", rope_inv_freq(self.head_dim, base), persistent=False)
        if phase == "coords":
            w = torch.ones(num_axes)
            if learnable:
                self.w = nn.Parameter(w)
            else:
                self.register_buffer("w", w)
        elif phase == "learned":
            if feature_dim is None:
                raise ValueError("phase='learned' needs feature_dim")
            self.edge_phase = LearnedEdgePhase(feature_dim, hidden)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, z={self.z}, K={self.K}, mode={self.mode!r}, phase={self.phase!r}"

    def edge_phases(self, edge_index, num_nodes: int, a=None, pos=None, h=None) -> torch.Tensor:
        if self.phase == "given":
            if a is None:
                raise ValueError("AWRoPE(phase='given') needs the edge phases a")
            a = torch.as_tensor(a)
            if self.check:
                check_antisymmetric(edge_index, a, num_nodes)
            return a
        if self.phase == "coords":
            if pos is None:
                raise ValueError("AWRoPE(phase='coords') needs node coordinates pos")
            pos = torch.as_tensor(pos)
            if (pos.shape[-1] if pos.dim() > 1 else 1) != self.w.numel() or pos.shape[0] != num_nodes:
                raise ValueError(f"pos must have shape ({num_nodes}, {self.w.numel()}), got {tuple(pos.shape)}")
            return edge_phases_from_coords(pos, edge_index, self.w)
        if h is None:
            raise ValueError("AWRoPE(phase='learned') needs node features h")
        return self.edge_phase(h, edge_index)

    def propagate(self, x, edge_index, a, edge_weight=None):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 or x.shape[-1] != self.head_dim:
            given = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ShapeError(f"q/k must be a floating tensor (N, …, {self.head_dim}); given {given}")
        omega = self.omega.to(x.device)
        if self.mode == "exact":
            return aw_propagate_exact(x, edge_index, a, omega, self.z, edge_weight, self.layout)
        return aw_propagate_sparse(x, edge_index, a, omega, self.z, self.K, edge_weight, self.layout)

    def forward(self, q, k, edge_index, a=None, pos=None, h=None, edge_weight=None):
        """Return ``(Y_q, Y_k)``: ``q``, ``k`` of shape ``(N, …, D)`` transported over the graph."""
        if q.shape[0] != k.shape[0]:
            raise ValueError(f"q and k must share the node axis: {tuple(q.shape)} vs {tuple(k.shape)}")
        a = self.edge_phases(edge_index, q.shape[0], a, pos, h).to(q.device)
        ei = torch.as_tensor(edge_index).to(q.device)
        return self.propagate(q, ei, a, edge_weight), self.propagate(k, ei, a, edge_weight)
