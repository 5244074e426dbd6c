r"""Learned tree position embeddings for code: depth and sibling-index tables added to token embeddings.

The tree-enhanced code encoders (tree-enhanced CodeBERTa) give every token the AST position of
the node it aligns to, as two learned embeddings added to the token embedding:

.. math::

    h_t = x_t + E_{\mathrm{depth}}\big[\bar d_t\big] + E_{\mathrm{sib}}\big[\bar s_t\big],
    \qquad
    \bar d_t = \begin{cases} \min(d_t,\ D) & d_t \ge 0 \\ D + 1 & d_t = -1 \end{cases},
    \quad
    \bar s_t = \begin{cases} \min(s_t,\ S) & s_t \ge 0 \\ S + 1 & s_t = -1 \end{cases}

with ``D = max_depth`` and ``S = max_sibling``. **Clipping**: every depth ``≥ D`` shares the row
``D`` and every sibling index ``≥ S`` shares the row ``S`` (deep or wide trees are clipped, not
refused). **Unaligned tokens** (special tokens, tokens outside every node: the ``-1`` fill of
:meth:`structpos.align.Alignment.take`) use the dedicated padding row ``D + 1`` / ``S + 1``, which
is zero and receives no gradient (``nn.Embedding(padding_idx=...)``), so such a token keeps its
plain token embedding. Each table therefore has ``max + 2`` rows.

The coordinates are the ``depth`` and ``sibling`` columns of the ``tree`` coordinate family,
gathered per token (:func:`structpos.align.token_coords`).
"""

from __future__ import annotations

import torch
from torch import nn

from ..exceptions import ShapeError
from ._checks import MAX_INIT_STD, check_count, check_real, check_table_size

__all__ = ["TreePositionEmbedding", "clip_tree_index", "MAX_INIT_STD"]


def clip_tree_index(values: torch.Tensor, maximum: int) -> torch.Tensor:
    """Row of an embedding table for tree indices: ``min(v, maximum)``, and ``maximum + 1`` for ``-1``.

    Parameters
    ----------
    values : torch.Tensor
        Integer depths or sibling indices, ``-1`` for unaligned tokens.
    maximum : int
        The largest index with its own row (larger ones share it).

    Returns
    -------
    torch.Tensor
        int64 rows in ``[0, maximum + 1]``.

    Raises
    ------
    ShapeError
        Float values, or a value below ``-1`` (names the first one).

    Examples
    --------
    >>> clip_tree_index(torch.tensor([0, 3, 9, -1]), 4).tolist()
    [0, 3, 4, 5]
    """
    if values.is_floating_point() or values.is_complex():
        raise ShapeError(f"tree indices must be integers, given {values.dtype}")
    values = values.to(torch.int64)
    bad = torch.nonzero(values < -1)
    if bad.numel():
        where = tuple(bad[0].tolist())
        raise ShapeError(f"tree index {int(values[where])} at {where} is below -1 (-1 marks unaligned tokens)")
    return torch.where(values < 0, torch.full_like(values, maximum + 1), values.clamp(max=maximum))


class TreePositionEmbedding(nn.Module):
    """Learned depth + sibling-index embeddings added to token embeddings (see the module docstring).

    Parameters
    ----------
    dim : int
        Embedding width (the model's hidden size).
    max_depth : int
        ``D``: depths ``0..D-1`` get their own rows, every depth ``≥ D`` shares row ``D``.
    max_sibling : int
        ``S``: likewise for the index of a node among its parent's children.
    init_std : float
        Standard deviation of the normal initialisation (the padding rows stay zero).

    Raises
    ------
    SpecError
        ``dim``, ``max_depth`` or ``max_sibling`` below 1, or ``init_std`` outside ``[0, MAX_INIT_STD]``.

    Notes
    -----
    ``forward(x, depth, sibling)``: ``x`` ``(..., L, dim)`` token embeddings, ``depth`` and
    ``sibling`` ``(..., L)`` integer per-token coordinates (``-1`` for unaligned tokens).
    Returns ``(..., L, dim)``.

    Examples
    --------
    Depth 7 is clipped to ``max_depth = 4``; the special token (``-1``) keeps its embedding:

    >>> _ = torch.manual_seed(0)
    >>> emb = TreePositionEmbedding(dim=6, max_depth=4, max_sibling=2)
    >>> x = torch.zeros(1, 3, 6)
    >>> depth, sibling = torch.tensor([[-1, 1, 7]]), torch.tensor([[-1, 0, 5]])
    >>> h = emb(x, depth, sibling)
    >>> h.shape, bool((h[0, 0] == 0).all())
    (torch.Size([1, 3, 6]), True)
    >>> torch.equal(h[0, 2], emb.depth.weight[4] + emb.sibling.weight[2])
    True
    """

    def __init__(self, dim: int, max_depth: int = 32, max_sibling: int = 64, init_std: float = 0.02):
        super().__init__()
        for what, value in (("dim", dim), ("max_depth", max_depth), ("max_sibling", max_sibling)):
            check_count(value, f"TreePositionEmbedding: {what}")
        check_table_size("TreePositionEmbedding depth table (max_depth + 2) × dim", max_depth + 2, dim)
        check_table_size("TreePositionEmbedding sibling table (max_sibling + 2) × dim", max_sibling + 2, dim)
        # the tables are drawn in float32: a std near its range (3.4e38) would fill them with inf
        init_std = check_real(init_std, "TreePositionEmbedding: init_std", low=0.0, high=MAX_INIT_STD)
        self.dim, self.max_depth, self.max_sibling = int(dim), int(max_depth), int(max_sibling)
        self.depth = nn.Embedding(self.max_depth + 2, self.dim, padding_idx=self.max_depth + 1)
        self.sibling = nn.Embedding(self.max_sibling + 2, self.dim, padding_idx=self.max_sibling + 1)
        with torch.no_grad():
            for table in (self.depth, self.sibling):
                table.weight.normal_(0.0, init_std)
                table.weight[table.padding_idx].zero_()

    def extra_repr(self) -> str:
        return f"dim={self.dim}, max_depth={self.max_depth}, max_sibling={self.max_sibling}"

    def position(self, depth: torch.Tensor, sibling: torch.Tensor) -> torch.Tensor:
        """The added vector ``E_depth[d̄] + E_sib[s̄]`` alone, ``(..., L, dim)``.

        Parameters
        ----------
        depth, sibling : torch.Tensor
            ``(..., L)`` integer coordinates, ``-1`` for unaligned tokens.

        Returns
        -------
        torch.Tensor
            ``(..., L, dim)``.

        Raises
        ------
        ShapeError
            ``depth`` and ``sibling`` differ in shape, are not integers, or hold a value below ``-1``.

        Examples
        --------
        >>> emb = TreePositionEmbedding(dim=4, max_depth=2, max_sibling=2)
        >>> emb.position(torch.tensor([-1]), torch.tensor([-1])).tolist()
        [[0.0, 0.0, 0.0, 0.0]]
        """
        depth, sibling = torch.as_tensor(depth), torch.as_tensor(sibling)
        if depth.shape != sibling.shape:
            raise ShapeError(
                f"depth and sibling must have one shape, given {tuple(depth.shape)} and {tuple(sibling.shape)}"
            )
        rows_d = clip_tree_index(depth.to(self.depth.weight.device), self.max_depth)
        rows_s = clip_tree_index(sibling.to(self.sibling.weight.device), self.max_sibling)
        return self.depth(rows_d) + self.sibling(rows_s)

    def forward(self, x: torch.Tensor, depth: torch.Tensor, sibling: torch.Tensor) -> torch.Tensor:
        """``x + E_depth[d̄] + E_sib[s̄]``; see the class docstring.

        Raises
        ------
        ShapeError
            ``x`` is not ``(..., L, dim)`` over the coordinates' ``(..., L)``, or as :meth:`position`.
        """
        pos = self.position(depth, sibling)
        if x.shape != pos.shape:
            raise ShapeError(
                f"x must have shape {tuple(pos.shape)} (coordinates' shape + (dim={self.dim},)), given {tuple(x.shape)}"
            )
        return x + pos.to(x.dtype)
