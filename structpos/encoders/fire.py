"""FIRE-style functional relative bias over any structural distance.

FIRE (functional interpolation for relative positions) makes the attention bias a learned
function of a *progressively normalised* distance. For a distance ``d_ij ≥ 0`` between query ``i``
and key ``j`` and a per-query scale ``L_i`` (the query position for token distances)::

    ψ(x) = log(c·x + 1)
    b_h(i, j) = f_θ( ψ(d_ij) / ψ(max(L_i, L_thr)) )_h

with ``f_θ: ℝ → ℝ^H`` a small MLP (``1 → hidden → H``, ReLU), ``c > 0`` and the threshold
``L_thr`` learned. Dividing by ``ψ(L_i)`` maps every query's distances into ``[0, 1]`` whatever
the sequence length (the "progressive interpolation" that helps length generalisation); the
threshold keeps short prefixes from being stretched to the whole range.

Here ``d`` can be any structural distance (``FIRE`` only sees numbers): token distance
``i − j``, tree distance (:func:`~structpos.encoders.tree_distance`), graph shortest-path distance
(:func:`~structpos.encoders.shortest_path_distance`), or any other non-negative metric.
Negative entries mean *unreachable* (another tree / component, or a future token): they get the
constant bias ``unreachable`` (0: no preference; mask them separately if needed). When ``L_i`` is
not given it is the largest reachable distance in query ``i``'s row, which for causal token
distances is ``i``.

The same bias runs inside FlexAttention without an ``L × L`` tensor via
:func:`structpos.integrations.flex.fire_score_mod`.

Examples
--------
>>> import torch
>>> _ = torch.manual_seed(0)
>>> fire = FIRE(num_heads=2)
>>> i = torch.arange(5)
>>> d = (i[:, None] - i[None, :])                  # causal token distance; j > i is negative
>>> fire(d).shape                                   # (H, L, L)
torch.Size([2, 5, 5])
>>> [round(v, 4) for v in fire.normalized(d, i.float())[4, :3].tolist()]  # ψ(4 − j)/ψ(max(4, 512))
[0.2579, 0.2222, 0.1761]
"""

from __future__ import annotations

import torch
from torch import nn

from ..exceptions import ShapeError, SpecError
from ._checks import check_count, check_real, check_table_size

__all__ = ["FIRE", "row_max_distance"]


def row_max_distance(dist: torch.Tensor) -> torch.Tensor:
    """``L_i = max_j d_ij`` over reachable pairs (``d ≥ 0``; 0 for a row with none).

    Parameters
    ----------
    dist : torch.Tensor
        ``(..., Lq, Lk)`` distances, negative = unreachable.

    Returns
    -------
    torch.Tensor
        ``(..., Lq)`` in ``dist``'s floating dtype (float32 for integer distances).

    Examples
    --------
    >>> row_max_distance(torch.tensor([[0, -1, 3], [-1, -1, -1]])).tolist()
    [3.0, 0.0]
    """
    d = dist if dist.is_floating_point() else dist.to(torch.float32)
    return d.clamp(min=0).amax(dim=-1)


class FIRE(nn.Module):
    """Learned bias ``f_θ(ψ(d)/ψ(max(L_i, L_thr)))`` per head (see the module docstring).

    Parameters
    ----------
    num_heads : int
        ``H``: outputs of ``f_θ``.
    hidden : int
        Width of the MLP's hidden layer.
    c : float
        Initial ``c`` of ``ψ(x) = log(c·x + 1)`` (learned; must stay positive).
    threshold : float
        Initial ``L_thr`` (learned).
    unreachable : float
        Bias of pairs with a negative distance.

    Notes
    -----
    ``forward(dist, query_scale=None)`` maps ``(..., Lq, Lk)`` distances to a ``(..., H, Lq, Lk)``
    bias in ``dist``'s dtype (float32 for integers). ``query_scale`` is ``L_i`` (``(..., Lq)``),
    default :func:`row_max_distance`. Parameters: ``mlp`` (``θ``), ``c`` and ``threshold`` (shape ``(1,)``).

    Raises
    ------
    SpecError
        ``num_heads`` or ``hidden`` < 1, or ``c``/``threshold`` not positive.
    ShapeError
        ``query_scale`` not of shape ``dist.shape[:-1]``.

    Examples
    --------
    The bias is the MLP applied to the normalised distance:

    >>> _ = torch.manual_seed(0)
    >>> fire = FIRE(num_heads=3, hidden=4, threshold=2.0)
    >>> d = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    >>> x = torch.log(d + 1) / torch.log(torch.tensor(2.0) + 1)   # c = 1, L_i = 1 < L_thr = 2
    >>> torch.allclose(fire(d), fire.mlp(x[..., None]).movedim(-1, 0))
    True
    """

    def __init__(
        self, num_heads: int, hidden: int = 32, c: float = 1.0, threshold: float = 512.0, unreachable: float = 0.0
    ):
        super().__init__()
        self.num_heads, self.hidden = check_count(num_heads, "FIRE: num_heads"), check_count(hidden, "FIRE: hidden")
        check_table_size("FIRE output layer hidden × num_heads", self.hidden, self.num_heads)
        c = check_real(c, "FIRE: c", low=0.0, low_open=True)
        threshold = check_real(threshold, "FIRE: threshold", low=0.0, low_open=True)
        self.unreachable = check_real(unreachable, "FIRE: unreachable", low=-1e30, high=1e30)  # finite in fp32
        self.mlp = nn.Sequential(nn.Linear(1, self.hidden), nn.ReLU(), nn.Linear(self.hidden, self.num_heads))
        # shape (1,), read as [0]: FlexAttention's backward cannot send gradients to 0-d captured tensors
        self.c = nn.Parameter(torch.tensor([float(c)]))
        self.threshold = nn.Parameter(torch.tensor([float(threshold)]))
        self._check_float32(c, threshold)

    def _check_float32(self, c: float, threshold: float) -> None:
        """``c`` finite and ``ψ(L_thr)`` finite and > 0 in float32: every ratio ``ψ(d)/ψ(max(L, L_thr))``
        is then in ``[0, 1]`` (``c = 1e308`` is inf in float32; ``L_thr = 1e-300`` is 0, a division by 0)."""
        with torch.no_grad():
            den = self.psi(self.threshold.detach())[0]
            if not (torch.isfinite(self.c).all() and torch.isfinite(den) and den > 0):
                raise SpecError(
                    f"FIRE: c={c!r} and threshold={threshold!r} give ψ(threshold) = log(1 + c·threshold) = "
                    f"{float(den):g} in float32; it must be finite and > 0 (it divides every ψ(d))"
                )

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, hidden={self.hidden}, unreachable={self.unreachable}"

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        """``ψ(x) = log(c·x + 1)``.

        Examples
        --------
        >>> FIRE(1).psi(torch.tensor([0.0, 1.0])).tolist()
        [0.0, 0.6931471824645996]
        """
        return torch.log1p(self.c[0].to(x.dtype) * x)

    def normalized(self, dist: torch.Tensor, query_scale: torch.Tensor) -> torch.Tensor:
        """``ψ(d)/ψ(max(L_i, L_thr))`` (unreachable entries read as ``d = 0``), ``dist``'s shape.

        Parameters
        ----------
        dist : torch.Tensor
            Distances; the last axis is the key axis.
        query_scale : torch.Tensor
            ``L_i``, broadcastable to ``dist.shape[:-1]``.

        Returns
        -------
        torch.Tensor

        Examples
        --------
        >>> fire = FIRE(1, threshold=1.0)
        >>> fire.normalized(torch.tensor([[3.0, 1.0]]), torch.tensor([3.0])).tolist()
        [[1.0, 0.5]]
        """
        scale = torch.as_tensor(query_scale, device=dist.device)
        return self.normalize(dist, scale[..., None])

    def normalize(self, d: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Elementwise ``ψ(max(d, 0))/ψ(max(L, L_thr))`` for broadcastable ``d`` and ``L``.

        Parameters
        ----------
        d : torch.Tensor
            Distances (negative: unreachable, read as 0).
        scale : torch.Tensor
            Per-query scales ``L``.

        Returns
        -------
        torch.Tensor
            In ``d``'s floating dtype (float32 for integer ``d``), or the parameters' for a
            float64 module.

        Examples
        --------
        >>> FIRE(1, threshold=1.0).normalize(torch.tensor(1.0), torch.tensor(3.0)).item()
        0.5
        """
        dtype = torch.float64 if torch.float64 in (d.dtype, self.c.dtype) else torch.float32
        d = d.to(dtype).clamp(min=0)
        scale = torch.as_tensor(scale, device=d.device).to(dtype)
        return self.psi(d) / self.psi(torch.maximum(scale, self.threshold[0].to(dtype)))

    def _check_scale(self, dist: torch.Tensor, query_scale) -> torch.Tensor:
        if query_scale is None:
            return row_max_distance(dist)
        scale = torch.as_tensor(query_scale, device=dist.device)
        if scale.shape != dist.shape[:-1]:
            raise ShapeError(
                f"query_scale must have the query shape {tuple(dist.shape[:-1])}; given {tuple(scale.shape)}"
            )
        return scale

    def forward(self, dist: torch.Tensor, query_scale: torch.Tensor | None = None) -> torch.Tensor:
        """Bias ``(..., H, Lq, Lk)`` of distances ``(..., Lq, Lk)`` (class Notes)."""
        dist = torch.as_tensor(dist, device=self.c.device)
        if dist.dim() < 2:
            raise ShapeError(f"dist must be (..., Lq, Lk); given {tuple(dist.shape)}")
        x = self.normalized(dist, self._check_scale(dist, query_scale))
        out = self.mlp(x[..., None].to(self.c.dtype)).to(x.dtype)  # (..., Lq, Lk, H)
        out = torch.where((dist < 0)[..., None], torch.full_like(out, self.unreachable), out)
        return out.movedim(-1, -3)

    def head_bias(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``f_θ(x)_h`` elementwise (the score_mod form: no ``H`` or hidden axis is materialised).

        Parameters
        ----------
        x : torch.Tensor
            Normalised distances.
        h : torch.Tensor
            Head index, broadcast with ``x``.

        Returns
        -------
        torch.Tensor
            ``x``'s shape.

        Examples
        --------
        >>> fire = FIRE(2, hidden=3)
        >>> x = torch.tensor([0.1, 0.7])
        >>> torch.allclose(fire.head_bias(x, torch.tensor(1)), fire.mlp(x[:, None])[:, 1])
        True
        """
        first, last = self.mlp[0], self.mlp[2]
        assert isinstance(first, nn.Linear) and isinstance(last, nn.Linear)
        w1, b1 = first.weight[:, 0].to(x.dtype), first.bias.to(x.dtype)
        w2, b2 = last.weight.to(x.dtype), last.bias.to(x.dtype)
        # one hidden unit at a time: every intermediate stays score-shaped (FlexAttention's
        # backward does not take score_mods with an extra trailing axis)
        out = b2[h]
        for u in range(self.hidden):
            out = out + w2[h, u] * torch.relu(x * w1[u] + b1[u])
        return out
