"""Shared pieces of the PyG transforms: the optional import and attribute writing."""

from __future__ import annotations

from typing import Any

import torch

from ..parsers import require

pyg_transforms = require("torch_geometric.transforms", "graph", "structpos.transforms")
BaseTransform = pyg_transforms.BaseTransform


def add_node_attr(data: Any, value: torch.Tensor, attr_name: str | None) -> Any:
    """``data[attr_name] = value``, or append to ``data.x`` when ``attr_name`` is None (as PyG)."""
    if attr_name is None:
        x = getattr(data, "x", None)
        if x is not None:
            x = x.view(-1, 1) if x.dim() == 1 else x
            data.x = torch.cat([x, value.to(x.device, x.dtype)], dim=-1)
        else:
            data.x = value
    else:
        data[attr_name] = value
    return data


def edge_weight_of(data: Any):
    return getattr(data, "edge_weight", None)


def all_pairs(n: int, device=None) -> torch.Tensor:
    """``(2, n²)`` row-major index of every ordered node pair."""
    r = torch.arange(n, device=device)
    return torch.stack([r.repeat_interleave(n), r.repeat(n)])
