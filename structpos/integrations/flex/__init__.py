"""Structural attention biases and masks for FlexAttention, computed on the fly from per-token inputs.

FlexAttention (``torch.nn.attention.flex_attention``) calls ``score_mod(score, b, h, q_idx,
kv_idx)`` for every score and keeps only blocks allowed by a ``BlockMask`` built from
``mask_mod(b, h, q_idx, kv_idx)``. The functions here close over per-token tensors of size
O(L) (or a small per-graph table) and never materialise an L×L tensor:

* :func:`tree_distance_score_mod` — tree distance ``d(m, n) = δ_m + δ_n − 2·δ(lca)``, the LCA
  depth (= the length of the longest common prefix of the two root paths, minus one) read as a
  range minimum over the Euler tour (:func:`euler_tables`): 6 independent lookups per score.
  (A binary search over root-path prefixes chains ``log₂ K`` dependent lookups, which the
  compiler inlines into a kernel that took minutes to build);
* :func:`spd_score_mod` — graph shortest-path distance from a per-graph ``(G, N, N)`` table
  indexed by (graph id, node id): O(N²) per graph, not O(L²);
* :func:`fire_score_mod` — FIRE's learned bias ``f_θ(ψ(d)/ψ(max(L_q, L_thr)))`` of any of these
  distances (:func:`token_distance_fn`, :func:`tree_distance_fn`, :func:`spd_distance_fn`);
* a distance ``d`` becomes a bias as in :mod:`structpos.encoders.attention_bias`: ALiBi-style
  ``−slope_h·d`` or a learned ``table[bucket(d), h]`` (:class:`~structpos.encoders.SPDBias`);
  :func:`distance_score_mod` makes the score_mod of any distance function;
* masks: :func:`table_mask_mod` (same row / column / header), :func:`hierarchy_mask_mod`
  (same paragraph / sentence / section), :func:`document_mask_mod` (packed sequences from
  ``cu_seqlens``), :func:`graph_kv_mask_mod` (Graph-KV: a chunk reads itself and its source
  chunks), :func:`causal_mask_mod`; combine with ``and_masks`` / ``or_masks``.

Tokens with no node (special tokens: node ``-1`` / depth ``-1``) are *unreachable* in the
distance biases and *global* (attend and are attended) in the masks.

Bad inputs are refused when a mod is built (:class:`~structpos.exceptions.ShapeError`,
:class:`~structpos.exceptions.SpecError`, never a silent coercion). A mod cannot check its indices
inside FlexAttention (it runs under ``vmap`` or compiled), so each records the sizes it was built
for (batch rows, heads, query and key positions) and :func:`flex`, :func:`block_mask` and
:func:`dense_mask` refuse larger inputs with a ``ShapeError`` naming both; mods combined with
``torch``'s ``and_masks`` / ``or_masks`` keep the sizes of their parts.

One module a concept, every name importable from here: :mod:`.tree` (Euler-tour tree distance),
:mod:`.graph` (SPD tables), :mod:`.bias` (distance → bias, token distance, FIRE), :mod:`.masks`
(mask_mods), :mod:`.blocks` (``BlockMask`` construction without an L×L tensor), :mod:`.attention`
(:func:`flex`, the HF ``structpos_flex`` attention function).

A score_mod goes straight into FlexAttention::

    from torch.nn.attention.flex_attention import flex_attention
    out = flex_attention(q, k, v, score_mod=mod)   # or structpos.integrations.flex.flex

Examples
--------
Evaluated on index grids, a score_mod gives the whole bias matrix FlexAttention adds (here
``−d`` for the tree distances of a 4-node tree; token 2 has no node, so it is unreachable):

>>> import torch
>>> parent = [-1, 0, 1, 0]                       # preorder: 0 → 1 → 2, and 0 → 3
>>> mod = tree_distance_score_mod(parent, torch.tensor([[0, 2, -1, 3]]), slopes=torch.ones(2))
>>> i = torch.arange(4)
>>> mod(torch.zeros(4, 4), 0, 0, i[:, None], i[None, :])
tensor([[ 0., -2., -inf, -1.],
        [-2.,  0., -inf, -3.],
        [-inf, -inf, -inf, -inf],
        [-1., -3., -inf,  0.]])
"""

from __future__ import annotations

from ._common import DistanceFn as DistanceFn  # the callable types, importable from here as before
from ._common import MaskMod as MaskMod
from ._common import ScoreMod as ScoreMod
from .attention import flex, hf_flex_attention
from .bias import distance_score_mod, distance_to_bias, fire_score_mod, token_distance_fn
from .blocks import block_mask, dense_mask, full_block_mask, graph_kv_block_mask
from .graph import spd_distance_fn, spd_score_mod, spd_tables
from .masks import TableMode as TableMode
from .masks import (
    causal_mask_mod,
    document_mask_mod,
    graph_kv_mask_mod,
    hierarchy_mask_mod,
    table_mask_mod,
)
from .tree import euler_tables, tree_distance_fn, tree_distance_score_mod

__all__ = [
    "block_mask",
    "causal_mask_mod",
    "dense_mask",
    "distance_score_mod",
    "distance_to_bias",
    "document_mask_mod",
    "euler_tables",
    "fire_score_mod",
    "flex",
    "full_block_mask",
    "graph_kv_block_mask",
    "graph_kv_mask_mod",
    "hf_flex_attention",
    "hierarchy_mask_mod",
    "spd_distance_fn",
    "spd_score_mod",
    "spd_tables",
    "table_mask_mod",
    "token_distance_fn",
    "tree_distance_fn",
    "tree_distance_score_mod",
]
