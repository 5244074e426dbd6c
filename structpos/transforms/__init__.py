"""PyG ``BaseTransform`` drop-ins for the graph coordinate families (one per module).

Usable as ``transform=`` / ``pre_transform=`` of any PyG dataset::

    from structpos.transforms import AddLaplacianPE, AddRandomWalkPE
    ds = TUDataset(root, "MUTAG", transform=Compose([AddLaplacianPE(8), AddRandomWalkPE(16)]))

They need ``torch_geometric`` (``pip install 'structpos[graph]'``), imported on first use.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "AddLaplacianPE": "laplacian",
    "AddRandomWalkPE": "random_walk",
    "AddMagneticLaplacianPE": "magnetic",
    "AddShortestPathDistance": "distance",
    "AddResistanceDistance": "distance",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
