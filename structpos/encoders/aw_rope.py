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
from typing import Any

import torch
from torch import nn

from ..exceptions import ShapeError, SpecError
from ._checks import check_choice, check_count, check_flag, check_head_dim, check_real, check_table_size
from ._options import AW_MODES, EDGE_PHASE_SOURCES, AWMode, EdgePhaseSource, PairLayout
from ._rotary import check_layout, rope_inv_freq
from .rope_config import RoPEConfig

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
        raise ShapeError(f"edge_index must be an integer (2, E) tensor, got {tuple(ei.shape)} {ei.dtype}")
    ei = ei.to(torch.int64)
    if ei.numel():
        bad = (ei < 0) | (ei >= num_nodes)
        if bad.any():
            pos = torch.nonzero(bad)[0].tolist()
            raise ShapeError(
                f"edge_index[{pos[0]}, {pos[1]}] = {int(ei[pos[0], pos[1]])} is outside 0..{num_nodes - 1}"
            )
    return ei


def edge_phases_from_coords(pos: torch.Tensor, edge_index: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """Edge phases of a gradient field: ``a_uv = wᵀ(pos_v − pos_u)`` for every edge ``u → v``.

    Parameters
    ----------
    pos : torch.Tensor
        ``(N, A)`` or ``(N,)`` node coordinates.
    edge_index : torch.Tensor
        ``(2, E)`` integer edges.
    w : torch.Tensor, optional
        ``(A,)`` weights (default: ones).

    Returns
    -------
    torch.Tensor
        ``(E,)`` phases (fp64 for fp64 ``pos``, else fp32); antisymmetric by construction.

    Raises
    ------
    ShapeError
        ``edge_index`` not an integer ``(2, E)`` tensor or naming a node outside ``0..N−1``.

    Examples
    --------
    >>> edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # the path 0–1–2, both ways
    >>> edge_phases_from_coords(torch.tensor([0.0, 1.0, 3.0]), edges).tolist()
    [1.0, -1.0, 2.0, -2.0]
    """
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
    """Raise when an edge appears twice or when ``a_vu ≠ −a_uv`` for an edge present both ways.

    Parameters
    ----------
    edge_index : torch.Tensor
        ``(2, E)`` integer edges.
    a : torch.Tensor
        ``(E,)`` edge phases.
    num_nodes : int
        Node count.
    atol : float
        Tolerance of ``|a_uv + a_vu|``.

    Returns
    -------
    None

    Raises
    ------
    ShapeError
        Bad edges, ``a`` of the wrong shape or non-finite, a repeated edge, or a pair of
        reverse edges whose phases do not cancel (names the edge).

    Examples
    --------
    >>> edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    >>> check_antisymmetric(edges, torch.tensor([1.0, -1.0, 2.0, -2.0]), 3)
    >>> check_antisymmetric(edges, torch.tensor([1.0, 1.0, 2.0, -2.0]), 3)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: edge phases must be antisymmetric: a[0->1] = 1 but the reverse edge has 1
    """
    ei = _check_edges(edge_index, num_nodes)
    if a.shape != (ei.shape[1],):
        raise ShapeError(f"edge phases must have shape (E,) = ({ei.shape[1]},), got {tuple(a.shape)}")
    if not torch.isfinite(a).all():
        raise ShapeError(f"edge phase of edge {int(torch.nonzero(~torch.isfinite(a))[0])} is not finite")
    key = ei[0] * num_nodes + ei[1]
    order = key.argsort()
    sk = key[order]
    dup = torch.nonzero(sk[1:] == sk[:-1])
    if dup.numel():
        e = int(order[int(dup[0])])
        raise ShapeError(f"edge {int(ei[0, e])}->{int(ei[1, e])} appears more than once in edge_index")
    rkey = ei[1] * num_nodes + ei[0]
    at = torch.searchsorted(sk, rkey).clamp_max(max(len(sk) - 1, 0))
    has_rev = sk[at] == rkey if len(sk) else torch.zeros(0, dtype=torch.bool)
    rev_a = a[order[at]]
    bad = has_rev & ((a + rev_a).abs() > atol)
    if bad.any():
        e = int(torch.nonzero(bad)[0])
        raise ShapeError(
            f"edge phases must be antisymmetric: a[{int(ei[0, e])}->{int(ei[1, e])}] = {float(a[e]):.6g} "
            f"but the reverse edge has {float(rev_a[e]):.6g}"
        )


class LearnedEdgePhase(nn.Module):
    """Learned edge phases ``a_uv = π·tanh(ψ(h_u, h_v) − ψ(h_v, h_u))``: antisymmetric, in ``[−π, π]``.

    Parameters
    ----------
    feature_dim : int
        Size of the node features ``h``.
    hidden : int
        Hidden width of the MLP ``ψ``.

    Notes
    -----
    ``forward(h, edge_index)`` maps ``(N, feature_dim)`` features and ``(2, E)`` edges to ``(E,)``
    phases.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> phase = LearnedEdgePhase(feature_dim=4)
    >>> a = phase(torch.randn(3, 4), torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))
    >>> torch.allclose(a[0::2], -a[1::2]), bool(a.abs().max() <= torch.pi)
    (True, True)
    """

    def __init__(self, feature_dim: int, hidden: int = 32):
        super().__init__()
        self.feature_dim, hidden = check_count(feature_dim, "feature_dim"), check_count(hidden, "hidden")
        check_table_size("LearnedEdgePhase weight (2·feature_dim) × hidden", 2 * self.feature_dim, hidden)
        self.psi = nn.Sequential(nn.Linear(2 * self.feature_dim, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """``(E,)`` phases of the edges ``(2, E)`` from node features ``h`` ``(N, feature_dim)``.

        Raises
        ------
        ShapeError
            ``h`` not a floating ``(N, feature_dim)`` tensor; ``edge_index`` not an integer ``(2, E)``
            tensor or naming a node outside ``0..N−1``.
        """
        if (
            not isinstance(h, torch.Tensor)
            or not h.is_floating_point()
            or h.dim() != 2
            or h.shape[1] != self.feature_dim
        ):
            given = f"{h.dtype} {tuple(h.shape)}" if isinstance(h, torch.Tensor) else type(h).__name__
            raise ShapeError(
                f"node features h must be a floating (N, feature_dim = {self.feature_dim}) tensor; given {given}"
            )
        ei = _check_edges(edge_index, h.shape[0]).to(h.device)
        hu, hv = h[ei[0]], h[ei[1]]
        diff = self.psi(torch.cat([hu, hv], -1)) - self.psi(torch.cat([hv, hu], -1))
        return math.pi * torch.tanh(diff.squeeze(-1))


def _transport(edge_index, a, omega, num_nodes, edge_weight, dtype):
    """Row-normalised weights ``P_uv`` (E,) and phases ``cos, sin(ω_c a_uv)`` (E, C)."""
    w = torch.ones(edge_index.shape[1], dtype=dtype, device=a.device) if edge_weight is None else edge_weight.to(dtype)
    if edge_weight is not None and (edge_weight.shape != (edge_index.shape[1],) or bool((edge_weight < 0).any())):
        raise ShapeError("edge_weight must be a non-negative (E,) tensor")
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
    """``Y = Σ_{k≤K} z^k T^k X`` by ``K`` edge passes (see the module docstring).

    Parameters
    ----------
    x : torch.Tensor
        ``(N, …, D)`` node features (node axis first).
    edge_index : torch.Tensor
        ``(2, E)`` integer edges ``u → v``.
    a : torch.Tensor
        ``(E,)`` edge phases.
    omega : torch.Tensor
        ``(D/2,)`` channel frequencies.
    z : float
        Discount in ``[0, 1)``.
    K : int
        Number of terms after the identity.
    edge_weight : torch.Tensor, optional
        ``(E,)`` non-negative weights (rows of ``P`` are normalised).
    layout : {"half", "interleaved"}
        Pair layout of the channels.

    Returns
    -------
    torch.Tensor
        ``Y`` with the shape and dtype of ``x``.

    Raises
    ------
    ShapeError
        Bad edges or edge weights.

    Examples
    --------
    The series stays within ``z^{K+1}/(1−z)·‖X‖_∞`` of the exact solve:

    >>> from structpos.encoders import rope_inv_freq
    >>> _ = torch.manual_seed(0)
    >>> edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    >>> a, omega, x = torch.tensor([1.0, -1.0, 2.0, -2.0]), rope_inv_freq(8), torch.randn(3, 8)
    >>> exact = aw_propagate_exact(x, edges, a, omega, z=0.5)
    >>> series = aw_propagate_sparse(x, edges, a, omega, z=0.5, K=8)
    >>> bool((series - exact).abs().max() <= 0.5**9 / 0.5 * x.abs().max())
    True
    >>> torch.equal(aw_propagate_sparse(x, edges, a, omega, K=0), x)  # no step: the identity
    True
    """
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
    """``Y = (I − zT)^{-1} X`` by a dense complex solve per channel (``O(C·N³)``; small graphs).

    Parameters
    ----------
    x, edge_index, a, omega, z, edge_weight, layout
        As :func:`aw_propagate_sparse`.

    Returns
    -------
    torch.Tensor
        ``Y`` with the shape and dtype of ``x``; differentiable.

    Raises
    ------
    ShapeError
        Bad edges or edge weights.

    Examples
    --------
    Gauge equivalence: phases of a gradient field ``a_uv = g_v − g_u`` equal rotating each node
    by ``g`` (RoPE), propagating without phases, and rotating back.

    >>> from structpos.encoders import apply_rotary, rope_inv_freq
    >>> _ = torch.manual_seed(0)
    >>> edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    >>> g, omega, x = torch.tensor([0.0, 1.0, 3.0]), rope_inv_freq(8), torch.randn(3, 8)
    >>> angle = g[:, None] * omega
    >>> def rotate(x, sign):
    ...     return apply_rotary(x, (sign * angle).cos(), (sign * angle).sin())
    >>> y = aw_propagate_exact(x, edges, edge_phases_from_coords(g, edges), omega, z=0.5)
    >>> plain = aw_propagate_exact(rotate(x, 1), edges, torch.zeros(4), omega, z=0.5)
    >>> torch.allclose(y, rotate(plain, -1), atol=1e-5)
    True
    """
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

    Parameters
    ----------
    head_dim : int
        Width ``D`` of ``q``/``k`` (even).
    z : float
        Discount in ``[0, 1)``.
    K : int
        Terms of the sparse series.
    mode : {"sparse", "exact"}
        Series or dense solve.
    base : float
        Channel frequencies ``ω_c = base^{−2c/D}``.
    phase : {"given", "coords", "learned"}
        Where the edge phases come from.
    num_axes : int
        Coordinate axes of ``pos`` (``phase="coords"``).
    feature_dim : int, optional
        Node feature size (``phase="learned"``).
    hidden : int
        Hidden width of :class:`LearnedEdgePhase`.
    learnable : bool
        ``w`` becomes a parameter (``phase="coords"``).
    layout : {"half", "interleaved"}
        Pair layout of the channels.
    check : bool
        Check given phases with :func:`check_antisymmetric`.

    Raises
    ------
    SpecError
        ``head_dim`` odd or not positive, ``z`` outside ``[0, 1)``, ``K < 0``, ``num_axes < 1``,
        ``base ≤ 1``, unknown ``mode``/``phase``/``layout``, or ``phase="learned"`` without a
        ``feature_dim ≥ 1``.

    Notes
    -----
    ``forward(q, k, edge_index, a=None, pos=None, h=None, edge_weight=None)`` takes ``q``, ``k``
    of shape ``(N, …, D)``; ``a``, ``pos`` or ``h`` as ``phase`` requires.

    Examples
    --------
    Phases from node coordinates: the sparse series (``K = 40``) matches the exact solve, and
    only coordinate differences matter.

    >>> _ = torch.manual_seed(0)
    >>> edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    >>> q, k, pos = torch.randn(3, 2, 8), torch.randn(3, 2, 8), torch.tensor([0.0, 1.0, 3.0])
    >>> series = AWRoPE(head_dim=8, z=0.5, K=40, phase="coords")
    >>> exact = AWRoPE(head_dim=8, z=0.5, mode="exact", phase="coords")
    >>> yq, yk = series(q, k, edges, pos=pos)
    >>> yq.shape, torch.allclose(yq, exact(q, k, edges, pos=pos)[0], atol=1e-5)
    (torch.Size([3, 2, 8]), True)
    >>> torch.allclose(yq, series(q, k, edges, pos=pos + 5.0)[0])
    True
    """

    def __init__(
        self,
        head_dim: int,
        z: float = 0.8,
        K: int = 8,
        mode: AWMode = "sparse",
        base: float = 10000.0,
        phase: EdgePhaseSource = "given",
        num_axes: int = 1,
        feature_dim: int | None = None,
        hidden: int = 32,
        learnable: bool = False,
        layout: PairLayout = "half",
        check: bool = True,
    ):
        super().__init__()
        head_dim = check_head_dim(head_dim)
        z = check_real(z, "z", low=0.0, high=1.0, high_open=True)
        check_choice(mode, "mode", AW_MODES)
        check_choice(phase, "phase", EDGE_PHASE_SOURCES)
        K, num_axes = check_count(K, "K", minimum=0, maximum=2**16), check_count(num_axes, "num_axes")
        # checked even where unused (phase != "learned"): a bad value is refused, never silently kept
        feature_dim = None if feature_dim is None else check_count(feature_dim, "feature_dim")
        hidden = check_count(hidden, "hidden")
        learnable, check = check_flag(learnable, "learnable"), check_flag(check, "check")
        self.head_dim, self.z, self.K, self.mode, self.phase = head_dim, z, K, mode, phase
        self.num_axes, self.feature_dim = num_axes, feature_dim
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
                raise SpecError("phase='learned' needs feature_dim")
            self.edge_phase = LearnedEdgePhase(feature_dim, hidden)

    @classmethod
    def from_config(cls, config: RoPEConfig, **options: Any) -> AWRoPE:
        """An :class:`AWRoPE` with the rotary settings of ``config`` and its own ``options``.

        AW-RoPE reads ``head_dim``, ``num_axes``, ``base``, ``layout`` and ``learnable`` from the
        config; every channel sees the same phase, so allocation, sections, heads, tables,
        ``qk_layout`` and ``scaling`` have no meaning here and must keep their defaults.

        Parameters
        ----------
        config : RoPEConfig
            Shared rotary settings.
        **options
            ``z``, ``K``, ``mode``, ``phase``, ``feature_dim``, ``hidden``, ``check``.

        Returns
        -------
        AWRoPE

        Raises
        ------
        SpecError
            ``config`` not a :class:`RoPEConfig`, a setting AW-RoPE does not use changed from
            its default, an option that the config already sets, or a bad option.

        Examples
        --------
        >>> cfg = RoPEConfig(head_dim=8, num_axes=2, base=100.0)
        >>> aw = AWRoPE.from_config(cfg, phase="coords", z=0.5)
        >>> aw.w.shape, torch.allclose(aw.omega, rope_inv_freq(8, 100.0))
        (torch.Size([2]), True)
        """
        if not isinstance(config, RoPEConfig):
            raise SpecError(f"config must be a RoPEConfig, got {type(config).__name__}")
        used = ("head_dim", "num_axes", "base", "layout", "learnable")
        config.refuse_unused("AWRoPE", used)
        twice = sorted(set(options) & set(used))
        if twice:
            raise SpecError(f"AWRoPE.from_config: {twice} come from the config; change them there")
        return cls(**{name: getattr(config, name) for name in used}, **options)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, z={self.z}, K={self.K}, mode={self.mode!r}, phase={self.phase!r}"

    def edge_phases(self, edge_index, num_nodes: int, a=None, pos=None, h=None) -> torch.Tensor:
        """``(E,)`` edge phases: ``a`` as given (checked), from ``pos``, or learned from ``h``.

        Raises
        ------
        SpecError
            The input that ``phase`` needs is missing.
        ShapeError
            That input has the wrong shape, or given phases are not antisymmetric.

        Examples
        --------
        >>> AWRoPE(8, phase="coords").edge_phases(torch.tensor([[0, 1], [1, 0]]), 2, pos=torch.tensor([0.0, 2.0]))
        tensor([ 2., -2.])
        """
        if self.phase == "given":
            if a is None:
                raise SpecError("AWRoPE(phase='given') needs the edge phases a")
            a = torch.as_tensor(a)
            if self.check:
                check_antisymmetric(edge_index, a, num_nodes)
            return a
        if self.phase == "coords":
            if pos is None:
                raise SpecError("AWRoPE(phase='coords') needs node coordinates pos")
            pos = torch.as_tensor(pos)
            if (pos.shape[-1] if pos.dim() > 1 else 1) != self.w.numel() or pos.shape[0] != num_nodes:
                raise ShapeError(f"pos must have shape ({num_nodes}, {self.w.numel()}), got {tuple(pos.shape)}")
            return edge_phases_from_coords(pos, edge_index, self.w)
        if h is None:
            raise SpecError("AWRoPE(phase='learned') needs node features h")
        return self.edge_phase(h, edge_index)

    def propagate(self, x, edge_index, a, edge_weight=None):
        """Transport ``x`` (``(N, …, D)``) along the edges with phases ``a`` (sparse or exact, per ``mode``).

        Raises
        ------
        ShapeError
            ``x`` not a floating ``(N, …, head_dim)`` tensor.

        Examples
        --------
        >>> x = torch.ones(2, 8)
        >>> torch.equal(AWRoPE(8, z=0.0).propagate(x, torch.tensor([[0, 1], [1, 0]]), torch.zeros(2)), x)
        True
        """
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 or x.shape[-1] != self.head_dim:
            given = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ShapeError(f"q/k must be a floating tensor (N, …, {self.head_dim}); given {given}")
        omega = self.omega.to(x.device)
        if self.mode == "exact":
            return aw_propagate_exact(x, edge_index, a, omega, self.z, edge_weight, self.layout)
        return aw_propagate_sparse(x, edge_index, a, omega, self.z, self.K, edge_weight, self.layout)

    def forward(self, q, k, edge_index, a=None, pos=None, h=None, edge_weight=None):
        """Return ``(Y_q, Y_k)``: ``q``, ``k`` of shape ``(N, …, D)`` transported over the graph.

        Raises
        ------
        ShapeError
            ``q`` and ``k`` with different node counts, or as :meth:`edge_phases`.
        ShapeError
            As :meth:`propagate`.
        """
        if q.shape[0] != k.shape[0]:
            raise ShapeError(f"q and k must share the node axis: {tuple(q.shape)} vs {tuple(k.shape)}")
        a = self.edge_phases(edge_index, q.shape[0], a, pos, h).to(q.device)
        ei = torch.as_tensor(edge_index).to(q.device)
        return self.propagate(q, ei, a, edge_weight), self.propagate(k, ei, a, edge_weight)
