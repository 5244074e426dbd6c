"""``AddRandomWalkPE``: drop-in for PyG's ``AddRandomWalkPE`` (see
:mod:`structpos.coords.random_walk`)."""

from __future__ import annotations

from typing import Any

import torch

from ..coords.random_walk import random_walk_pe
from ._base import BaseTransform, add_node_attr, edge_weight_of


class AddRandomWalkPE(BaseTransform):
    """Add ``[P^k]_ii`` for ``k = 1..walk_length`` as ``data[attr_name]`` ``(N, walk_length)``.

    Same values as PyG's ``AddRandomWalkPE`` on simple graphs (stored with both directions);
    ``symmetrize=False`` walks a directed graph's edges as given, like PyG does.
    """

    def __init__(
        self,
        walk_length: int,
        attr_name: str | None = "random_walk_pe",
        *,
        symmetrize: bool = True,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.walk_length = walk_length
        self.attr_name = attr_name
        self.symmetrize = symmetrize
        self.dtype = dtype

    def forward(self, data: Any) -> Any:
        pe = random_walk_pe(
            data.edge_index, data.num_nodes, self.walk_length, edge_weight_of(data), symmetrize=self.symmetrize
        )
        return add_node_attr(data, pe.to(data.edge_index.device, self.dtype), self.attr_name)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(walk_length={self.walk_length})"
