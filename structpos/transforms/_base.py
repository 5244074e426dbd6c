"""Shared pieces of the PyG transforms: the optional import, option and input checks, attribute
writing and the spectral base.

Every transform derives from :class:`GraphTransform`, so each checks its options the same way
when it is built (:func:`check_attr`, :func:`check_dtype`, :func:`check_solver_kwargs`, and
:func:`~structpos.encoders._checks.check_count` for counts) and refuses anything but a
homogeneous PyG ``Data`` when it is called.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from .._optional import require
from ..coords.solver import solver_options
from ..exceptions import InputError, ShapeError, SpecError

pyg_transforms = require("torch_geometric.transforms", "graph", "structpos.transforms")
BaseTransform = pyg_transforms.BaseTransform

#: The solver settings a spectral transform passes on (the keywords of :func:`~structpos.coords.solver.solver_options`).
SOLVER_KWARGS = tuple(inspect.signature(solver_options).parameters)


def check_attr(value: Any, name: str, *, optional: bool = True) -> str | None:
    """An attribute name option: a non-empty string (or ``None`` where ``optional``), else :class:`SpecError`."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise SpecError(f"{name} must be a non-empty string{' or None' if optional else ''}, got {value!r}")
    return value


def check_dtype(value: Any, name: str = "dtype") -> torch.dtype:
    """A floating ``torch.dtype`` (``torch.float32``), else :class:`SpecError`."""
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise SpecError(f"{name} must be a floating torch.dtype such as torch.float32, got {value!r}")
    return value


def check_solver_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The eigensolver keywords of a spectral transform, checked by :func:`solver_options` when it is built."""
    unknown = [k for k in kwargs if k not in SOLVER_KWARGS]
    if unknown:
        raise SpecError(f"unknown option {unknown[0]!r}; the solver options are {', '.join(SOLVER_KWARGS)}")
    solver_options(**kwargs)  # the values: SpecError now rather than on the first graph
    return kwargs


class GraphTransform(BaseTransform):  # type: ignore[valid-type,misc]  # BaseTransform is imported at run time
    """Base of the structpos transforms: a call takes one homogeneous PyG ``Data`` (or a ``Batch`` of them).

    A ``HeteroData`` has no single ``edge_index`` to read; it is refused with
    :class:`~structpos.exceptions.InputError` rather than failing on a missing attribute.
    """

    def __call__(self, data: Any) -> Any:
        from torch_geometric.data import Data

        if not isinstance(data, Data):
            hint = " (convert it with data.to_homogeneous(), or apply the transform per edge type)"
            raise InputError(
                f"{type(self).__name__} needs a homogeneous torch_geometric.data.Data, got {type(data).__name__}"
                + (hint if type(data).__name__ == "HeteroData" else "")
            )
        return super().__call__(data)


def add_node_attr(data: Any, value: torch.Tensor, attr_name: str | None) -> Any:
    """``data[attr_name] = value``, or append to ``data.x`` when ``attr_name`` is None (as PyG).

    Raises :class:`~structpos.exceptions.ShapeError` when ``data.x`` has another number of rows
    than ``value`` (one per node).
    """
    if attr_name is None:
        x = getattr(data, "x", None)
        if x is not None:
            x = x.view(-1, 1) if x.dim() == 1 else x
            if x.dim() != 2 or x.shape[0] != value.shape[0]:
                raise ShapeError(
                    f"data.x must have one row per node, ({value.shape[0]}, F), to append the features to "
                    f"(attr_name=None); given {tuple(x.shape)}"
                )
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


class SpectralTransform(GraphTransform):
    """Base of the eigenvector transforms: stores one graph's :class:`~structpos.coords._spectrum.SpectralPE`.

    Subclasses set ``attr_name``, ``eigvals_attr``, ``mask_attr``, ``ambiguous_attr`` (each may be
    None: not written) and ``dtype``, and call :meth:`store` from ``forward``.
    """

    attr_name: str | None
    eigvals_attr: str | None
    mask_attr: str | None
    ambiguous_attr: str | None
    dtype: torch.dtype

    def set_outputs(
        self,
        attr_name: Any,
        eigvals_attr: Any,
        mask_attr: Any,
        ambiguous_attr: Any,
        dtype: Any,
        solver_kwargs: dict[str, Any],
    ) -> None:
        """Check and keep the output attribute names (each may be None), ``dtype`` and the solver settings."""
        self.attr_name = check_attr(attr_name, "attr_name")
        self.eigvals_attr = check_attr(eigvals_attr, "eigvals_attr")
        self.mask_attr = check_attr(mask_attr, "mask_attr")
        self.ambiguous_attr = check_attr(ambiguous_attr, "ambiguous_attr")
        self.dtype = check_dtype(dtype)
        self.solver_kwargs = check_solver_kwargs(solver_kwargs)

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
