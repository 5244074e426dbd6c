"""``AddLaplacianPE``: drop-in for PyG's ``AddLaplacianEigenvectorPE`` (see
:mod:`structpos.coords.laplacian` for the maths and conventions)."""

from __future__ import annotations

from typing import Any

import torch

from ..coords.laplacian import laplacian_pe
from ..encoders._checks import check_count
from ._base import SpectralTransform, edge_weight_of


class AddLaplacianPE(SpectralTransform):
    """Add the ``k`` smallest non-trivial normalised-Laplacian eigenvectors as node features.

    Unlike PyG: deterministic signs, every connected component's trivial mode is dropped,
    graphs with fewer than ``k + 1`` nodes are zero-padded instead of raising, and large
    graphs use a seeded shift-invert solver. Writes ``data[attr_name]`` ``(N, k)`` float32
    (appended to ``data.x`` when ``attr_name`` is None), plus graph-level ``(1, k)``
    ``data[eigvals_attr]``, ``data[mask_attr]`` and ``data[ambiguous_attr]`` (modes whose
    eigenspace the cut at ``k`` splits; skipped when those are None), which PyG batches to
    ``(B, k)``. ``solver_kwargs`` go to :func:`laplacian_pe` (``method``, ``tol``, ``progress`` ...).

    Raises
    ------
    SpecError
        (at construction) ``k`` not an integer ≥ 1, an attribute name that is not a string, a
        ``dtype`` that is not floating, an unknown or out-of-range solver option.
    InputError
        (when called) Anything but a homogeneous PyG ``Data`` (a ``HeteroData``).
    ShapeError
        (when called) ``attr_name=None`` and a ``data.x`` without one row per node.

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> ring = torch.tensor([[0, 1, 2, 3, 1, 2, 3, 0], [1, 2, 3, 0, 0, 1, 2, 3]])
    >>> d = AddLaplacianPE(2)(Data(edge_index=ring, num_nodes=4))
    >>> d.laplacian_eigenvector_pe.shape, d.laplacian_ambiguous.tolist()
    (torch.Size([4, 2]), [[False, False]])
    """

    def __init__(
        self,
        k: int,
        attr_name: str | None = "laplacian_eigenvector_pe",
        eigvals_attr: str | None = "laplacian_eigenvalues",
        mask_attr: str | None = "laplacian_mask",
        dtype: torch.dtype = torch.float32,
        *,
        ambiguous_attr: str | None = "laplacian_ambiguous",
        **solver_kwargs: Any,
    ) -> None:
        self.k = check_count(k, "k")
        self.set_outputs(attr_name, eigvals_attr, mask_attr, ambiguous_attr, dtype, solver_kwargs)

    def forward(self, data: Any) -> Any:
        r = laplacian_pe(data.edge_index, data.num_nodes, self.k, edge_weight_of(data), **self.solver_kwargs)
        return self.store(data, r, r.pe)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(k={self.k})"
