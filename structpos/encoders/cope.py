"""CoPE: contextual position encoding — positions that count what the gates select.

Contextual position encoding (Golovneva et al. 2024) measures the position of key ``j`` seen from
query ``i`` as the number of *selected* tokens between them rather than the number of tokens.
Each (query, key) pair gets a gate, and the position is a sum of gates (causal attention)::

    g_ij = σ(s · q_i·k_j)                      (learned gates, s = 1/√D by default)
    p_ij = Σ_{t=j..i} g_it                      (j ≤ i)

``p_ij`` is fractional, so the learned position embeddings ``e[0..P−1]`` (``P = max_positions``)
are interpolated linearly between the two nearest integers and enter the logits through the
query::

    p ← min(p, P − 1)                           (positions are clipped at the last embedding)
    e(p) = (1 − w)·e[⌊p⌋] + w·e[⌈p⌉],  w = p − ⌊p⌋
    bias_ij = q_i · e(p_ij)                     (added to the attention logit of (i, j))

computed as in the reference code: ``z_i = q_i E^T`` (one ``(P,)`` row per query) is gathered at
``⌊p⌋`` and ``⌈p⌉`` and interpolated, which equals ``q_i · e(p)`` because the map is linear.
With every gate 1, ``p_ij = i − j + 1``: token-based relative positions, offset by one because
the sum includes both ends. Keys after the query (``j > i``) get ``p = 0`` and bias 0; mask
them as usual.

**Counting structural units.** Instead of learned gates, the gate can be *given*: 1 on the last
token of every structural unit (a sentence, a table cell, a tree node, from our coordinates), 0
elsewhere (:func:`unit_boundaries`). Then ``p_ij = #{unit ends t with j ≤ t ≤ i}``: "how many
sentences / cells / nodes back" the key is (the same for every token of a unit), a position that
ignores how many tokens each unit spans.

Examples
--------
>>> import torch
>>> _ = torch.manual_seed(0)
>>> cope = CoPE(head_dim=8, max_positions=16)
>>> q, k = torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8)        # (B, L, H, D)
>>> cope(q, k).shape                                              # (B, H, L, L) bias
torch.Size([1, 2, 5, 5])

Given gates: sentence index per token, sentences end at tokens 1, 2 and 4. Seen from token 3
(in the last sentence), the keys are 0, 1 and 2 sentences back:

>>> ends = unit_boundaries(torch.tensor([[0, 0, 1, 2, 2]]))
>>> ends.tolist()
[[0.0, 1.0, 1.0, 0.0, 1.0]]
>>> cope.positions(q, k, gates=ends)[0, 0, 3].tolist()
[2.0, 2.0, 1.0, 0.0, 0.0]
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import nn

from ..exceptions import ShapeError, SpecError
from ._checks import (
    MAX_HEAD_DIM,
    QK_LAYOUTS,
    QKLayout,
    check_choice,
    check_count,
    check_qk,
    check_real,
    check_table_size,
    to_blhd,
)

_F32 = torch.finfo(torch.float32)

__all__ = ["CoPE", "cope_positions", "interpolate_position_logits", "unit_boundaries"]

Boundary = Literal["end", "start"]
BOUNDARIES: tuple[str, ...] = get_args(Boundary)


def unit_boundaries(*unit_ids: torch.Tensor, at: Boundary = "end") -> torch.Tensor:
    """Given gates for structural counting: 1 on the last (or first) token of every unit, else 0.

    With ``at="end"``: ``u_t = 1`` when ``t = L − 1`` or any of the unit coordinates changes between
    tokens ``t`` and ``t + 1``; with ``at="start"``: when ``t = 0`` or one changes between ``t − 1``
    and ``t``. Any per-token unit coordinate marks the units: the sentence index of ``hier`` (with
    the paragraph index too, as sentences restart per paragraph), a table's cell or row index, a
    tree node id.

    Ends give clean "units back" positions: ``p_ij = #{unit ends in [j, i]}`` is the same for every
    key of one unit — 0 in the query's own unit (1 once the query is its unit's last token), 1 in the
    unit before, and so on. With starts, the first token of the query's own unit counts 1 and the
    rest of that unit 0.

    Parameters
    ----------
    *unit_ids : torch.Tensor
        One or more ``(..., L)`` integer unit coordinates of every token (same shape), e.g.
        ``paragraph, sentence``.
    at : {"end", "start"}
        Which token of a unit carries the gate.

    Returns
    -------
    torch.Tensor
        ``(..., L)`` float32 gates in ``{0, 1}``.

    Raises
    ------
    ShapeError
        No coordinates, a floating, complex or 0-D one, or shapes that differ.
    SpecError
        ``at`` not ``"end"`` or ``"start"``.

    Examples
    --------
    >>> unit_boundaries(torch.tensor([4, 4, 7, 7, 7, 4])).tolist()
    [0.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    >>> unit_boundaries(torch.tensor([4, 4, 7, 7, 7, 4]), at="start").tolist()
    [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]

    Sentence 0 of paragraph 1 follows sentence 0 of paragraph 0: only both levels see the boundary.

    >>> paragraph, sentence = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 0, 0])
    >>> unit_boundaries(sentence).tolist(), unit_boundaries(paragraph, sentence).tolist()
    ([0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0])
    """
    if at not in BOUNDARIES:
        raise SpecError(f"at must be {' or '.join(map(repr, BOUNDARIES))}, got {at!r}")
    if not unit_ids:
        raise ShapeError("unit_boundaries needs at least one unit coordinate (..., L)")
    ids = [torch.as_tensor(u) for u in unit_ids]
    for u in ids:
        if u.dim() < 1 or u.is_floating_point() or u.is_complex() or u.shape != ids[0].shape:
            raise ShapeError(
                f"unit_ids must be integer tensors (..., L) of one shape; given {u.dtype} {tuple(u.shape)} "
                f"(first: {tuple(ids[0].shape)})"
            )
    change = torch.zeros_like(ids[0][..., 1:], dtype=torch.bool)
    for u in ids:
        change = change | (u[..., 1:] != u[..., :-1])
    edge = torch.ones_like(ids[0][..., :1], dtype=torch.bool)
    parts = [change, edge] if at == "end" else [edge, change]
    return torch.cat(parts, dim=-1).to(torch.float32)


def cope_positions(gates: torch.Tensor) -> torch.Tensor:
    """Contextual positions ``p_ij = Σ_{t=j..i} g_it`` (``0`` for ``j > i``).

    Computed as a reversed cumulative sum over the key axis of the causally masked gates.

    Parameters
    ----------
    gates : torch.Tensor
        ``(..., L, S)`` gates ``g_it`` of query ``i`` and key ``t`` (any real values). Queries are
        the last ``L`` of the ``S`` keys (a KV cache puts ``S − L`` keys before them).

    Returns
    -------
    torch.Tensor
        ``(..., L, S)`` positions.

    Examples
    --------
    >>> cope_positions(torch.ones(3, 3)).tolist()        # all gates 1: i − j + 1
    [[1.0, 0.0, 0.0], [2.0, 1.0, 0.0], [3.0, 2.0, 1.0]]
    """
    L, S = gates.shape[-2], gates.shape[-1]
    i = torch.arange(S - L, S, device=gates.device)[:, None]
    visible = torch.arange(S, device=gates.device)[None, :] <= i
    g = torch.where(visible, gates, torch.zeros((), dtype=gates.dtype, device=gates.device))
    return g.flip(-1).cumsum(-1).flip(-1)


def interpolate_position_logits(z: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """``(1 − w)·z[⌊p⌋] + w·z[⌈p⌉]`` with ``w = p − ⌊p⌋``, gathered along the last axis of ``z``.

    Parameters
    ----------
    z : torch.Tensor
        ``(..., L, P)`` per-query logits of the integer positions, ``z_i[n] = q_i·e[n]``.
    pos : torch.Tensor
        ``(..., L, S)`` positions in ``[0, P − 1]``.

    Returns
    -------
    torch.Tensor
        ``(..., L, S)`` interpolated logits.

    Examples
    --------
    >>> z = torch.tensor([[0.0, 10.0, 20.0]])
    >>> interpolate_position_logits(z, torch.tensor([[0.25, 1.5, 2.0]])).tolist()
    [[2.5, 15.0, 20.0]]
    """
    lo = pos.floor()
    w = pos - lo
    idx = lo.to(torch.int64)
    # ⌈p⌉ = ⌊p⌋ + 1 wherever w > 0; where w = 0 the upper term has weight 0 (clamped to stay in range)
    z_lo = torch.gather(z, -1, idx)
    z_hi = torch.gather(z, -1, (idx + 1).clamp_(max=z.shape[-1] - 1))
    return z_lo + w * (z_hi - z_lo)


class CoPE(nn.Module):
    """Contextual position encoding: a ``(B, H, L, S)`` logit bias ``q_i·e(p_ij)`` (module docstring).

    Parameters
    ----------
    head_dim : int
        ``D``, the width of ``q``, ``k`` and of each position embedding.
    max_positions : int
        ``P``: embeddings ``e[0..P−1]``; positions are clipped to ``P − 1``.
    scale : float, optional
        Gate logits are ``scale · q_i·k_j`` (default ``1/√D``, the attention scale: the reference
        code gates on the attention logits).
    qk_layout : {"blhd", "bhld"}
        ``q``/``k`` as ``(B, L, H, D)`` or ``(B, H, L, D)``.

    Notes
    -----
    ``forward(q, k, gates=None)`` returns the bias. ``gates`` replaces the learned gates: ``(B, S)``
    per-key gates (e.g. :func:`unit_boundaries`, shared by every query and head) or a full
    ``(B, H, L, S)`` tensor. ``q`` may have ``L ≤ S`` queries: the last ``L`` keys' positions.
    Heads share the embeddings (as in the paper). Cost: ``O(B·H·L·S)`` for the gates and
    ``O(B·H·L·P·D)`` for ``q E^T``.

    Raises
    ------
    SpecError
        ``head_dim`` or ``max_positions`` < 1, unknown ``qk_layout``.
    ShapeError
        ``q``/``k`` not floating ``(B, L, H, D)`` of one batch and head count, bad ``gates``.

    Examples
    --------
    The bias equals ``q_i · e(p_ij)`` interpolated by hand:

    >>> _ = torch.manual_seed(0)
    >>> cope = CoPE(head_dim=4, max_positions=8)
    >>> q, k = torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4)
    >>> p = cope.positions(q, k)[0, 0]
    >>> lo, w = p[2, 0].floor().long(), p[2, 0] - p[2, 0].floor()
    >>> e = (1 - w) * cope.embedding[lo] + w * cope.embedding[lo + 1]
    >>> torch.allclose(cope(q, k)[0, 0, 2, 0], q[0, 2, 0] @ e)
    True
    """

    def __init__(self, head_dim: int, max_positions: int, scale: float | None = None, qk_layout: QKLayout = "blhd"):
        super().__init__()
        self.head_dim = check_count(head_dim, "CoPE: head_dim", maximum=MAX_HEAD_DIM)
        self.max_positions = check_count(max_positions, "CoPE: max_positions")
        check_table_size("CoPE embedding max_positions × head_dim", self.max_positions, self.head_dim)
        self.qk_layout = check_choice(qk_layout, "qk_layout", QK_LAYOUTS)
        if scale is None:
            self.scale = 1.0 / math.sqrt(self.head_dim)
        else:  # in (tiny, max) of float32: 1e-300 would round to 0 and silently switch the term off
            self.scale = check_real(scale, "scale", low=_F32.tiny, high=_F32.max)
        self.embedding = nn.Parameter(torch.randn(self.max_positions, self.head_dim) / math.sqrt(self.head_dim))

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_positions={self.max_positions}, scale={self.scale:.4g}"

    def _qk(self, q, k) -> tuple[torch.Tensor, torch.Tensor]:
        """``q``, ``k`` as ``(B, H, L, D)`` after checks."""
        q = check_qk(q, "q", self.head_dim, self.qk_layout)
        k = check_qk(k, "k", self.head_dim, self.qk_layout)
        if q.dim() != 4 or k.dim() != 4:
            raise ShapeError(f"CoPE takes padded 4-D q and k; given {tuple(q.shape)} and {tuple(k.shape)}")
        q, k = to_blhd(q, self.qk_layout).transpose(1, 2), to_blhd(k, self.qk_layout).transpose(1, 2)
        if q.shape[:2] != k.shape[:2] or q.shape[2] > k.shape[2]:
            raise ShapeError(
                f"q and k must share batch and heads, with no more queries than keys; given (B, H, L, D) "
                f"{tuple(q.shape)} and {tuple(k.shape)}"
            )
        return q, k

    def _gates(self, q: torch.Tensor, k: torch.Tensor, gates) -> torch.Tensor:
        B, H, L, S = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        if gates is None:
            return torch.sigmoid(self.scale * (q @ k.transpose(-1, -2)))
        g = torch.as_tensor(gates, device=q.device).to(q.dtype)
        if g.shape == (B, S):
            return g[:, None, None, :].expand(B, H, L, S)
        if g.shape == (B, H, L, S):
            return g
        raise ShapeError(
            f"gates must have shape (B, S) = {(B, S)} or (B, H, L, S) = {(B, H, L, S)}; given {tuple(g.shape)}"
        )

    def positions(self, q: torch.Tensor, k: torch.Tensor, gates: torch.Tensor | None = None) -> torch.Tensor:
        """Contextual positions ``p_ij`` (unclipped), ``(B, H, L, S)``.

        Parameters
        ----------
        q, k : torch.Tensor
            Queries and keys (``qk_layout``).
        gates : torch.Tensor, optional
            Given gates (class Notes); default the learned ``σ(s·q·k)``.

        Returns
        -------
        torch.Tensor

        Examples
        --------
        >>> cope = CoPE(head_dim=2, max_positions=4)
        >>> q = k = torch.zeros(1, 3, 1, 2)             # q·k = 0: every gate is σ(0) = 1/2
        >>> cope.positions(q, k)[0, 0].tolist()
        [[0.5, 0.0, 0.0], [1.0, 0.5, 0.0], [1.5, 1.0, 0.5]]
        """
        q, k = self._qk(q, k)
        return cope_positions(self._gates(q, k, gates))

    def forward(self, q: torch.Tensor, k: torch.Tensor, gates: torch.Tensor | None = None) -> torch.Tensor:
        """The logit bias ``q_i · e(min(p_ij, P − 1))``, ``(B, H, L, S)``, in ``q``'s dtype."""
        q, k = self._qk(q, k)
        pos = cope_positions(self._gates(q, k, gates)).clamp(max=self.max_positions - 1)
        z = q @ self.embedding.to(q.dtype).T  # (B, H, L, P)
        return interpolate_position_logits(z, pos)
