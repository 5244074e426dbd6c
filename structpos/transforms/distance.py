"""Pairwise-distance transforms for attention biases (see :mod:`structpos.coords.distance`).

A pairwise ``(N, N)`` matrix does not batch in PyG, so both transforms store every ordered
pair: ``data[f"{attr_name}_index"]`` ``(2, N²)`` (row-major; PyG offsets ``*_index``
attributes when batching) and ``data[attr_name]`` ``(N²,)``. ``to_dense_adj(index, batch, value)``
rebuilds the padded ``(B, N_max, N_max)`` bias.
"""

from __future__ import annotations

from typing import Any

import torch

from ..coords.distance import hop_distances, resistance_distance
from ..encoders._checks import check_count, check_flag
from ._base import GraphTransform, all_pairs, check_attr, check_dtype, edge_weight_of


class AddShortestPathDistance(GraphTransform):
    """Hop distances capped at ``max_dist`` (``-1`` beyond it or unreachable), int64.

    Parameters
    ----------
    max_dist : int, optional
        Distances above this become ``-1``.
    attr_name : str
        ``data[attr_name]`` gets the ``N²`` distances, ``data[attr_name + "_index"]`` the pairs.
    directed : bool
        Follow edges only in their stored direction.

    Raises
    ------
    SpecError
        (at construction) ``max_dist`` not ``None`` or an integer ≥ 0, an ``attr_name`` that is
        not a string.
    InputError
        (when called) Anything but a homogeneous PyG ``Data`` (a ``HeteroData``).

    Examples
    --------
    On a path ``0 - 1 - 2`` the distance is ``|i - j|``:

    >>> import torch
    >>> from torch_geometric.data import Data
    >>> d = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> d = AddShortestPathDistance()(d)
    >>> d.spd.view(3, 3).tolist(), d.spd_index.shape
    ([[0, 1, 2], [1, 0, 1], [2, 1, 0]], torch.Size([2, 9]))
    >>> AddShortestPathDistance(max_dist=1)(d).spd.view(3, 3)[0].tolist()
    [0, 1, -1]
    """

    def __init__(self, max_dist: int | None = None, attr_name: str = "spd", *, directed: bool = False) -> None:
        self.max_dist = None if max_dist is None else check_count(max_dist, "max_dist", minimum=0, maximum=None)
        self.attr_name = check_attr(attr_name, "attr_name", optional=False)
        self.directed = check_flag(directed, "directed")

    def forward(self, data: Any) -> Any:
        D = hop_distances(data.edge_index, data.num_nodes, self.max_dist, directed=self.directed)
        device = data.edge_index.device
        data[f"{self.attr_name}_index"] = all_pairs(data.num_nodes, device)
        data[self.attr_name] = D.reshape(-1).to(device)
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(max_dist={self.max_dist})"


class AddResistanceDistance(GraphTransform):
    """Effective resistances (``inf`` across components), float32 by default.

    Parameters
    ----------
    attr_name : str
        ``data[attr_name]`` gets the ``N²`` resistances, ``data[attr_name + "_index"]`` the pairs.
    dtype : torch.dtype
        The stored precision.

    Raises
    ------
    SpecError
        (at construction) An ``attr_name`` that is not a string, a ``dtype`` that is not floating.
    InputError
        (when called) Anything but a homogeneous PyG ``Data`` (a ``HeteroData``).

    Examples
    --------
    On a triangle of unit resistors, one edge in parallel with a path of two: ``1·2/(1+2)``.

    >>> import torch
    >>> from torch_geometric.data import Data
    >>> d = Data(edge_index=torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]), num_nodes=3)
    >>> r = AddResistanceDistance(dtype=torch.float64)(d).resistance.view(3, 3)
    >>> torch.allclose(r, (1 - torch.eye(3, dtype=torch.float64)) * 2 / 3)
    True
    """

    def __init__(self, attr_name: str = "resistance", *, dtype: torch.dtype = torch.float32) -> None:
        self.attr_name = check_attr(attr_name, "attr_name", optional=False)
        self.dtype = check_dtype(dtype)

    def forward(self, data: Any) -> Any:
        R = resistance_distance(data.edge_index, data.num_nodes, edge_weight_of(data))
        device = data.edge_index.device
        data[f"{self.attr_name}_index"] = all_pairs(data.num_nodes, device)
        data[self.attr_name] = R.reshape(-1).to(device, self.dtype)
        return data
