"""Graph positional encodings in one import (the implementations live one concept per module).

* :mod:`.laplacian` — :func:`laplacian_pe`, :func:`laplacian_pe_batch` (LapPE)
* :mod:`.random_walk` — :func:`random_walk_pe`, :func:`random_walk_pe_batch` (RWSE)
* :mod:`.magnetic` — :func:`magnetic_laplacian_pe`, :func:`magnetic_laplacian_pe_batch`
* :mod:`.distance` — :func:`hop_distances`, :func:`resistance_distance`, their ``*_batch``
  forms, :func:`resistance_distance_pairs` (large graphs, requested pairs) and :func:`pad_pairwise`
* :mod:`.directed_walk` — :func:`directed_walk_pe`, :func:`directed_walk_matrices` (forward /
  backward walks on directed graphs)
* :mod:`.anchors` — :func:`kcenter_anchors`, :func:`anchor_distances` (NT-LLM)
* :mod:`.peg` — :func:`peg_distances`, :func:`positional_distances` (PEG)

Every function takes ``edge_index (2, E)`` + ``num_nodes`` (numpy or torch; torch in → torch
out), or a :class:`~structpos.Structure`, a PyG ``Data`` or an ``(edge_index, num_nodes)``
tuple. PyG transforms: :mod:`structpos.transforms`.
"""

from ..exceptions import EigenConvergenceError
from ._spectrum import SolveReport, SpectralPE
from .anchors import anchor_distances, kcenter_anchors
from .directed_walk import directed_walk_matrices, directed_walk_pe
from .distance import (
    hop_distances,
    hop_distances_batch,
    pad_pairwise,
    resistance_distance,
    resistance_distance_batch,
    resistance_distance_pairs,
)
from .laplacian import LapBatch, laplacian_pe, laplacian_pe_batch
from .magnetic import magnetic_laplacian_pe, magnetic_laplacian_pe_batch
from .peg import peg_distances, positional_distances
from .random_walk import random_walk_pe, random_walk_pe_batch

__all__ = [
    "EigenConvergenceError",
    "LapBatch",
    "SpectralPE",
    "SolveReport",
    "laplacian_pe",
    "laplacian_pe_batch",
    "random_walk_pe",
    "random_walk_pe_batch",
    "magnetic_laplacian_pe",
    "magnetic_laplacian_pe_batch",
    "hop_distances",
    "hop_distances_batch",
    "resistance_distance",
    "resistance_distance_batch",
    "resistance_distance_pairs",
    "pad_pairwise",
    "directed_walk_pe",
    "directed_walk_matrices",
    "kcenter_anchors",
    "anchor_distances",
    "peg_distances",
    "positional_distances",
]
