"""Encoders: coordinates → rotary encodings, additive encodings and attention biases.

* :class:`StructuralRoPE` — rotary encoding of per-token coordinates of any number of axes
  (sectioned / interleaved / per-head / mixed frequency allocation; half or interleaved pairs);
  its settings as one validated value: :class:`RoPEConfig` (``StructuralRoPE.from_config``).
* :class:`ExtraPlaneRoPE` — full 1-D RoPE on the head, structural axes on extra planes
  (structure never takes the token index's frequency ladder away).
  (sectioned / interleaved / per-head / mixed frequency allocation; half or interleaved pairs),
  with per-axis length extrapolation (:mod:`.rope_scaling`: PI, NTK, YaRN, Llama 3, clipping;
  :func:`randomized_positions`).
* :class:`HierarchicalRoPE` — one axis per level (paragraph/sentence/token, code levels).
* :class:`WIRE` — rotations from Laplacian spectral coordinates, ``φ = Ω t``.
* :class:`AWRoPE` — phases transported along edges, exact solve or K-term series.
* learned and generalised rotations: :class:`STRING` (learned orthogonal basis around RoPE),
  :class:`ComRoPE` (commuting angle matrices), :class:`LieRE` (dense skew generators),
  :class:`GRAPE` (rank-2 generators: commuting planes, non-commuting mixtures) and
  :class:`GRAPEAdditive` (unipotent lifts: ALiBi, forgetting-gate biases).
* additive encodings (:func:`tree_path_pe`, :class:`LapPEEmbedding`), attention biases
  (:func:`tree_distance`, :func:`shortest_path_distance`, :class:`SPDBias`), and batching
  (:func:`collate`: padded + packed forms).
* basis-invariant spectral encodings: :class:`SPE` (``V·diag(φ_ℓ(λ))·Vᵀ`` + an equivariant
  network) and :class:`PEGBias` (a learned bias of PEG distances ``‖z_u − z_v‖``).
* :class:`CoPE` — contextual positions (sums of learned or given gates) as a logit bias.
* :class:`FIRE` — a learned function of a progressively normalised distance (token / tree / graph).
"""

from ._rotary import apply_rotary, layout_permutation, rope_inv_freq
from .additive import LapPEEmbedding, tree_depth_sibling, tree_path_pe
from .attention_bias import SPDBias, alibi_distance_bias, alibi_slopes, shortest_path_distance, tree_distance
from .aw_rope import AWRoPE, LearnedEdgePhase, aw_propagate_exact, aw_propagate_sparse, edge_phases_from_coords
from .batching import CoordBatch, collate, cu_seqlens_from_lengths, pack_padded, unpack_packed
from .comrope import ComRoPE
from .cope import CoPE, cope_positions, unit_boundaries
from .extra_planes import ExtraPlaneRoPE
from .fire import FIRE, row_max_distance
from .grape import GRAPE, GRAPEAdditive, forget_gate_coords, rodrigues_exp
from .hierarchical import LEVEL_PRESETS, HierarchicalRoPE, unit_indices
from .liere import LieRE
from .peg import PEGBias
from .rope import StructuralRoPE
from .rope_config import RoPEConfig
from .rope_scaling import randomized_positions, scaled_inv_freq
from .spe import SPE
from .string import STRING
from .wire import WIRE, spectral_coords

__all__ = [
    "StructuralRoPE",
    "RoPEConfig",
    "ExtraPlaneRoPE",
    "scaled_inv_freq",
    "randomized_positions",
    "HierarchicalRoPE",
    "unit_indices",
    "LEVEL_PRESETS",
    "WIRE",
    "spectral_coords",
    "AWRoPE",
    "LearnedEdgePhase",
    "aw_propagate_exact",
    "aw_propagate_sparse",
    "edge_phases_from_coords",
    "STRING",
    "ComRoPE",
    "LieRE",
    "GRAPE",
    "GRAPEAdditive",
    "forget_gate_coords",
    "rodrigues_exp",
    "apply_rotary",
    "layout_permutation",
    "rope_inv_freq",
    "tree_path_pe",
    "tree_depth_sibling",
    "LapPEEmbedding",
    "tree_distance",
    "shortest_path_distance",
    "SPDBias",
    "alibi_slopes",
    "alibi_distance_bias",
    "CoPE",
    "cope_positions",
    "unit_boundaries",
    "FIRE",
    "row_max_distance",
    "collate",
    "CoordBatch",
    "pack_padded",
    "unpack_packed",
    "cu_seqlens_from_lengths",
    "SPE",
    "PEGBias",
]
