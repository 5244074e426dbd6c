"""Graph positional encodings in one import (the implementations live one concept per module).

* :mod:`.laplacian` — :func:`laplacian_pe`, :func:`laplacian_pe_batch` (LapPE)
* :mod:`.random_walk` — :func:`random_walk_pe`, :func:`random_walk_pe_batch` (RWSE)
* :mod:`.magnetic` — :func:`magnetic_laplacian_pe`, :func:`magnetic_laplacian_pe_batch`
* :mod:`.distance` — :func:`shortest_path_distance`, :func:`resistance_distance`, their
  ``*_batch`` forms and :func:`pad_pairwise`

Every function takes ``edge_index (2, E)`` + ``num_nodes`` (numpy or torch; torch in → torch
out), or a :class:`~structpos.Structure`, a PyG ``Data`` or an ``(edge_index, num_nodes)``
tuple. PyG transforms: :mod:`structpos.transforms`.
"""

from ._graph_utils import EigenConvergenceError
from .distance import (
    pad_pairwise,
    resistance_distance,
    resistance_distance_batch,
    shortest_path_distance,
    shortest_path_distance_batch,
)
from .laplacian import LapBatch, laplacian_pe, laplacian_pe_batch
from .magnetic import magnetic_laplacian_pe, magnetic_laplacian_pe_batch
from .random_walk import random_walk_pe, random_walk_pe_batch

__all__ = [
    "EigenConvergenceError",
    "LapBatch",
    "laplacian_pe",
    "laplacian_pe_batch",
    "random_walk_pe",
    "random_walk_pe_batch",
    "magnetic_laplacian_pe",
    "magnetic_laplacian_pe_batch",
    "shortest_path_distance",
    "shortest_path_distance_batch",
    "resistance_distance",
    "resistance_distance_batch",
    "pad_pairwise",
]
