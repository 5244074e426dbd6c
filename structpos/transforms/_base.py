"""Shared pieces of the PyG transforms: the optional import, attribute writing and the spectral base."""

from __future__ import annotations

from typing import Any

import torch

from .._optional import require

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


class SpectralTransform(BaseTransform):  # type: ignore[valid-type,misc]  # BaseTransform is imported at run time
    """Base of the eigenvector transforms: stores one graph's :class:`~structpos.coords._spectrum.SpectralPE`.

    Subclasses set ``attr_name``, ``eigvals_attr``, ``mask_attr``, ``ambiguous_attr`` (each may be
    None: not written) and ``dtype``, and call :meth:`store` from ``forward``.
    """

    attr_name: str | None
    eigvals_attr: str | None
    mask_attr: str | None
    ambiguous_attr: str | None
    dtype: torch.dtype

    def store(self, data: Any, r: Any, node_features: torch.Tensor) -> Any:
        """Write graph-level ``(1, k)`` eigenvalues, mask and ambiguity flags of ``r``, then
        ``node_features`` ``(N, F)`` as ``data[attr_name]`` (appended to ``data.x`` when None).
        Everything moves to ``data.edge_index``'s device; floats become ``dtype``."""
        device = data.edge_index.device
        if self.eigvals_attr is not None:
            data[self.eigvals_attr] = r.eigvals.to(device, self.dtype).view(1, -1)
        if self.mask_attr is not None:
            data[self.mask_attr] = r.mask.to(device).view(1, -1)
        if self.ambiguous_attr is not None:
            data[self.ambiguous_attr] = r.ambiguous.to(device).view(1, -1)
        return add_node_attr(data, node_features.to(device, self.dtype), self.attr_name)
