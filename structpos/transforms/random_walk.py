"""``AddRandomWalkPE``: drop-in for PyG's ``AddRandomWalkPE`` (see
:mod:`structpos.coords.random_walk`)."""

from __future__ import annotations

from typing import Any

import torch

from ..coords.random_walk import random_walk_pe
from ..encoders._checks import check_count, check_flag
from ._base import GraphTransform, add_node_attr, check_attr, check_dtype, edge_weight_of


class AddRandomWalkPE(GraphTransform):
    """Add ``[P^k]_ii`` for ``k = 1..walk_length`` as ``data[attr_name]`` ``(N, walk_length)``.

    Same values as PyG's ``AddRandomWalkPE`` on simple graphs (stored with both directions);
    ``symmetrize=False`` walks a directed graph's edges as given, like PyG does.

    Parameters
    ----------
    walk_length : int
        ``K``, the number of steps.
    attr_name : str or None
        The node attribute to set (``None``: concatenated to ``data.x``, as PyG).
    symmetrize : bool
        See :func:`~structpos.coords.random_walk.random_walk_pe`.
    dtype : torch.dtype
        The stored precision.

    Raises
    ------
    SpecError
        (at construction) ``walk_length`` not an integer ≥ 1, an ``attr_name`` that is not a
        string, a ``dtype`` that is not floating.
    InputError
        (when called) Anything but a homogeneous PyG ``Data`` (a ``HeteroData``).
    ShapeError
        (when called) ``attr_name=None`` and a ``data.x`` without one row per node.

    Examples
    --------
    On a triangle the return probability after ``k`` steps is ``(1 + 2 (-1/2)^k) / 3``:

    >>> import torch
    >>> from torch_geometric.data import Data
    >>> d = Data(edge_index=torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]), num_nodes=3)
    >>> pe = AddRandomWalkPE(3)(d).random_walk_pe
    >>> torch.allclose(pe, torch.tensor([[(1 + 2 * (-0.5) ** k) / 3 for k in (1, 2, 3)]] * 3))
    True
    """

    def __init__(
        self,
        walk_length: int,
        attr_name: str | None = "random_walk_pe",
        *,
        symmetrize: bool = True,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.walk_length = check_count(walk_length, "walk_length")
        self.attr_name = check_attr(attr_name, "attr_name")
        self.symmetrize = check_flag(symmetrize, "symmetrize")
        self.dtype = check_dtype(dtype)

    def forward(self, data: Any) -> Any:
        pe = random_walk_pe(
            data.edge_index, data.num_nodes, self.walk_length, edge_weight_of(data), symmetrize=self.symmetrize
        )
        return add_node_attr(data, pe.to(data.edge_index.device, self.dtype), self.attr_name)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(walk_length={self.walk_length})"
