"""``AddMagneticLaplacianPE``: magnetic Laplacian eigenvectors of directed graphs (see
:mod:`structpos.coords.magnetic`)."""

from __future__ import annotations

from typing import Any

import torch

from ..coords.magnetic import magnetic_laplacian_pe
from ..encoders._checks import check_count, check_flag, check_real
from ._base import SpectralTransform, edge_weight_of


class AddMagneticLaplacianPE(SpectralTransform):
    """Add the ``k`` lowest magnetic-Laplacian eigenvectors (potential ``q``).

    ``data[attr_name]`` is real ``(N, 2k)``: real parts then imaginary parts of the complex
    eigenvectors (canonical phase); graph-level ``(1, k)`` eigenvalues and mask as for
    :class:`~structpos.transforms.AddLaplacianPE` (with ``ambiguous_attr``). Edge directions are
    taken as given.

    Raises
    ------
    SpecError
        (at construction) ``k`` not an integer ≥ 1, ``q`` not a finite number ≥ 0, an attribute
        name that is not a string, a ``dtype`` that is not floating, a bad solver option.
    InputError
        (when called) Anything but a homogeneous PyG ``Data`` (a ``HeteroData``).
    ShapeError
        (when called) ``attr_name=None`` and a ``data.x`` without one row per node.

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> d = AddMagneticLaplacianPE(2)(Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3))
    >>> d.magnetic_laplacian_pe.shape, d.magnetic_ambiguous.shape
    (torch.Size([3, 4]), torch.Size([1, 2]))
    """

    def __init__(
        self,
        k: int,
        q: float = 0.25,
        attr_name: str | None = "magnetic_laplacian_pe",
        *,
        q_relative: bool = False,
        eigvals_attr: str | None = "magnetic_eigenvalues",
        mask_attr: str | None = "magnetic_mask",
        dtype: torch.dtype = torch.float32,
        ambiguous_attr: str | None = "magnetic_ambiguous",
        **solver_kwargs: Any,
    ) -> None:
        self.k, self.q = check_count(k, "k"), check_real(q, "q", low=0.0)
        self.q_relative = check_flag(q_relative, "q_relative")
        self.set_outputs(attr_name, eigvals_attr, mask_attr, ambiguous_attr, dtype, solver_kwargs)

    def forward(self, data: Any) -> Any:
        r = magnetic_laplacian_pe(
            data.edge_index,
            data.num_nodes,
            self.k,
            self.q,
            edge_weight_of(data),
            q_relative=self.q_relative,
            **self.solver_kwargs,
        )
        return self.store(data, r, torch.cat([r.pe.real, r.pe.imag], dim=-1))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(k={self.k}, q={self.q})"
