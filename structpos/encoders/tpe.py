r"""2D-TPE attention: every head mixes attention under several traversal orders of a table.

2D-TPE (Li et al. 2024) keeps a table's 2-D layout by letting each attention head pick a
traversal order (row by row, column by column, ...) and attend under that order's positions.
Token ``t`` has one position ``p_o(t)`` per order ``o`` (:func:`structpos.coords.traversal.traversal_positions`).
Head ``h`` computes one RoPE attention per order and mixes the outputs with per-token weights
from a gate on its query:

.. math::

    A^{(o)}_{h} = \operatorname{softmax}_m\!\Big(\tfrac{1}{\sqrt D}
        \big\langle R(\omega\,p_o(n))\,q_{n,h},\ R(\omega\,p_o(m))\,k_{m,h}\big\rangle + M_{nm}\Big),
    \qquad
    w_{n,h} = \operatorname{softmax}_o\big(G_h^\top q_{n,h} + b_h\big),

.. math::

    y_{n,h} = \sum_o w_{n,h,o} \sum_m A^{(o)}_{h,nm}\, v_{m,h}

with ``R`` 1-D RoPE (:class:`~structpos.encoders.rope.StructuralRoPE`), ``M`` the attention mask
(causal, padding) in the original token order, and ``G_h ∈ ℝ^{D×O}``, ``b_h`` the learned gate
(zero at initialisation: a uniform mixture). One-hot weights select one order per head and
token; the weights can also be given (``order_weights=``). This is a reference implementation:
``O`` dense attentions (``O × L²`` scores), for the small tables and models of experiments.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..exceptions import ShapeError
from ._checks import check_count, check_flag, check_head_dim, check_table_size
from .rope import PairLayout, StructuralRoPE

__all__ = ["TraversalOrderAttention"]


class TraversalOrderAttention(nn.Module):
    """Attention whose heads mix RoPE attentions under several traversal orders (see the module docstring).

    Parameters
    ----------
    head_dim : int
        ``D`` (even).
    num_heads : int
        ``H``.
    num_orders : int
        ``O``: the orders of the ``positions`` given to ``forward`` (4 for :data:`~structpos.coords.traversal.TRAVERSAL_ORDERS`).
    base, layout, inv_freq
        As :class:`~structpos.encoders.rope.StructuralRoPE` (one axis).
    gate : bool
        Learn the per-head gate ``G``, ``b``; ``False``: a fixed uniform mixture unless
        ``order_weights`` is passed.

    Raises
    ------
    SpecError
        ``num_heads`` or ``num_orders`` below 1; otherwise as :class:`~structpos.encoders.rope.StructuralRoPE`.

    Notes
    -----
    ``forward(q, k, v, positions, *, mask=None, is_causal=False, order_weights=None)``: ``q``, ``k``,
    ``v`` ``(B, L, H, D)``; ``positions`` ``(B, L, O)`` integer positions per order; ``mask``
    ``(B, L, L)`` or ``(B, H, L, L)`` bool (True = may attend) or additive float; ``order_weights``
    ``(B, L, H, O)`` overrides the gate. Returns ``(B, L, H, D)``.

    Examples
    --------
    Three tokens read in two orders; weights one-hot on order 1 give the attention under order 1 alone:

    >>> _ = torch.manual_seed(0)
    >>> att = TraversalOrderAttention(head_dim=8, num_heads=2, num_orders=2)
    >>> q, k, v = torch.randn(3, 1, 3, 2, 8).unbind(0)
    >>> pos = torch.tensor([[[0, 0], [1, 2], [2, 1]]])
    >>> y = att(q, k, v, pos)
    >>> y.shape
    torch.Size([1, 3, 2, 8])
    >>> one_hot = torch.tensor([0.0, 1.0]).expand(1, 3, 2, 2)
    >>> single = TraversalOrderAttention(head_dim=8, num_heads=2, num_orders=1)
    >>> torch.allclose(att(q, k, v, pos, order_weights=one_hot), single(q, k, v, pos[..., 1:]), atol=1e-6)
    True
    """

    def __init__(
        self,
        head_dim: int,
        num_heads: int,
        num_orders: int = 4,
        base: float = 10000.0,
        layout: PairLayout = "half",
        gate: bool = True,
        *,
        inv_freq: torch.Tensor | None = None,
    ):
        super().__init__()
        check_head_dim(head_dim)
        check_count(num_heads, "TraversalOrderAttention: num_heads")
        check_count(num_orders, "TraversalOrderAttention: num_orders")
        gate = check_flag(gate, "gate")
        check_table_size(
            "TraversalOrderAttention gate num_heads × head_dim × num_orders", num_heads, head_dim, num_orders
        )
        self.head_dim, self.num_heads, self.num_orders = int(head_dim), int(num_heads), int(num_orders)
        self.rope = StructuralRoPE(head_dim, 1, base=base, layout=layout, inv_freq=inv_freq)
        self.gate_weight: nn.Parameter | None = None
        self.gate_bias: nn.Parameter | None = None
        if gate:
            self.gate_weight = nn.Parameter(torch.zeros(self.num_heads, self.head_dim, self.num_orders))
            self.gate_bias = nn.Parameter(torch.zeros(self.num_heads, self.num_orders))

    def extra_repr(self) -> str:
        gated = self.gate_weight is not None
        return f"head_dim={self.head_dim}, num_heads={self.num_heads}, num_orders={self.num_orders}, gate={gated}"

    def _check(self, q: torch.Tensor, positions) -> torch.Tensor:
        if q.dim() != 4 or q.shape[-2:] != (self.num_heads, self.head_dim):
            raise ShapeError(f"q must be (B, L, {self.num_heads}, {self.head_dim}), given {tuple(q.shape)}")
        pos = torch.as_tensor(positions, device=q.device)
        if pos.shape != (*q.shape[:2], self.num_orders):
            raise ShapeError(
                f"positions must be (B, L, O) = {(*q.shape[:2], self.num_orders)}, given {tuple(pos.shape)}"
            )
        return pos

    def order_weights(self, q: torch.Tensor) -> torch.Tensor:
        """The gate's mixing weights ``w`` ``(B, L, H, O)`` (rows sum to 1).

        Parameters
        ----------
        q : torch.Tensor
            ``(B, L, H, D)`` queries.

        Returns
        -------
        torch.Tensor
            ``(B, L, H, O)``; uniform without a gate.

        Examples
        --------
        >>> att = TraversalOrderAttention(head_dim=4, num_heads=1, num_orders=2)
        >>> att.order_weights(torch.randn(1, 3, 1, 4))[0, :, 0].tolist()  # zero-initialised gate
        [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
        """
        if self.gate_weight is None or self.gate_bias is None:
            return q.new_full((*q.shape[:3], self.num_orders), 1.0 / self.num_orders)
        logits = torch.einsum("blhd,hdo->blho", q, self.gate_weight.to(q.dtype)) + self.gate_bias.to(q.dtype)
        return torch.softmax(logits, dim=-1)

    def order_logits(self, q: torch.Tensor, k: torch.Tensor, positions) -> torch.Tensor:
        """Scaled RoPE scores under every order, ``(B, O, H, L, L)`` (before mask and softmax).

        Parameters
        ----------
        q, k : torch.Tensor
            ``(B, L, H, D)``.
        positions : torch.Tensor
            ``(B, L, O)`` positions per order.

        Returns
        -------
        torch.Tensor
            ``(B, O, H, L, L)``: ``⟨R(p_o(n)) q_n, R(p_o(m)) k_m⟩ / √D``.

        Raises
        ------
        ShapeError
            Shapes that do not match the module.

        Examples
        --------
        >>> att = TraversalOrderAttention(head_dim=4, num_heads=1, num_orders=2)
        >>> q = k = torch.randn(1, 3, 1, 4)
        >>> att.order_logits(q, k, torch.tensor([[[0, 2], [1, 0], [2, 1]]])).shape
        torch.Size([1, 2, 1, 3, 3])
        """
        pos = self._check(q, positions)
        scores = []
        for o in range(self.num_orders):
            qr, kr = self.rope(q, k, pos[..., o : o + 1])
            scores.append(torch.einsum("blhd,bmhd->bhlm", qr, kr))
        return torch.stack(scores, dim=1) / math.sqrt(self.head_dim)

    def forward(self, q, k, v, positions, *, mask=None, is_causal: bool = False, order_weights=None):
        """``y = Σ_o w_o · softmax(scores_o + M) v``; see the class docstring.

        Raises
        ------
        ShapeError
            Shapes that do not match the module, or ``order_weights`` not ``(B, L, H, O)``.
        """
        scores = self.order_logits(q, k, positions)  # (B, O, H, L, L)
        L = q.shape[1]
        if is_causal:
            causal = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
        if mask is not None:
            mask = torch.as_tensor(mask, device=q.device)
            m = mask[:, None, None] if mask.dim() == 3 else mask[:, None]
            scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m.to(scores.dtype)
        attn = torch.softmax(scores, dim=-1)
        per_order = torch.einsum("bohlm,bmhd->bolhd", attn, v)  # (B, O, L, H, D)
        w = self.order_weights(q) if order_weights is None else torch.as_tensor(order_weights, device=q.device)
        if w.shape != (*q.shape[:3], self.num_orders):
            raise ShapeError(
                f"order_weights must be (B, L, H, O) = {(*q.shape[:3], self.num_orders)}, given {tuple(w.shape)}"
            )
        return torch.einsum("blho,bolhd->blhd", w.to(per_order.dtype), per_order)
