r"""Graph-KV layout: which text segments a segment reads, and the position of every token.

Graph-KV (Wang et al. 2025) lets text segments (retrieved passages, cited papers, …) keep their own
KV-cache and injects a graph between them: for an edge ``s → t`` (``s`` a *source* of the
*target* ``t``), the tokens of ``t`` attend to the cached tokens of ``s`` — one step of message
passing inside the LLM — and to their own segment, nothing else:

.. math::  \mathrm{reads}[a, b] = (a = b) \lor (b \to a \in E).

Position allocation: segments are not laid out one after the other. Every segment without a
source (a *source* segment) starts at the same position, so they **share one range**
``[P, P + R)``, ``R`` the longest source segment; every segment with at least one source (a
*target*) starts right after that range, at ``P + R``; targets share their range as well. For
token ``i`` in segment ``a`` with ``o_i`` its ordinal inside the segment:

.. math::  \mathrm{pos}_i = P + o_i \text{ (source)}, \qquad \mathrm{pos}_i = P + R + o_i \text{ (target)}.

Tokens outside every segment (segment ``-1``) are shared text: the leading run (a system prompt)
takes positions ``0..P-1``, every later one (the question) follows the end of all segments,
``P + max(R, R + T)`` onward in order (``T`` the longest target). In attention they are global
(see :func:`structpos.integrations.flex.graph_kv_mask_mod`; combine with a causal mask so
that segments do not read the question that follows them).

A segment that is a target and also a source of another segment is positioned as a target (one
message-passing step: every target reads its sources' first-pass caches). The segment graph is
given as ``edge_index (2, E)`` of ``source → target`` edges between segments ``0..C-1``;
self-loops are ignored.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..exceptions import ShapeError
from ..structure import Structure, as_int_array
from ._args import PAIRWISE_MAX_BYTES, check_pairwise_size
from ._graph_utils import as_graph

__all__ = ["GraphKVLayout", "graph_kv_reads", "graph_kv_layout", "graph_kv_coords"]


class GraphKVLayout(NamedTuple):
    """Per-token ``position (L,)`` and ``target (L,)`` flags, and the segment-level ``reads (C, C)``.

    Examples
    --------
    >>> GraphKVLayout(np.arange(3), np.zeros(3, bool), np.eye(1, dtype=bool)).position.tolist()
    [0, 1, 2]
    """

    position: np.ndarray
    target: np.ndarray
    reads: np.ndarray


def graph_kv_reads(edge_index: Any, num_segments: int, *, max_bytes: int | None = PAIRWISE_MAX_BYTES) -> np.ndarray:
    """``reads (C, C)`` bool: ``reads[a, b]`` when segment ``a`` attends to segment ``b``.

    Parameters
    ----------
    edge_index : array_like, shape (2, E)
        ``source → target`` edges between segments.
    num_segments : int
        ``C``.
    max_bytes : int or None
        Cap on the memory of the dense ``(C, C)`` masks (3 bytes a pair: the result and two
        temporaries); default 4 GiB, ``None``: no cap.

    Returns
    -------
    numpy.ndarray
        ``(C, C)`` bool: the diagonal and ``reads[t, s]`` for every edge ``s → t``. It is the
        ``adjacency`` argument of :func:`structpos.integrations.flex.graph_kv_mask_mod`.

    Raises
    ------
    LimitError
        ``C·C·3`` bytes above ``max_bytes`` (``max_memory_bytes``).

    Examples
    --------
    Segments 0 and 1 are cited by segment 2:

    >>> graph_kv_reads([[0, 1], [2, 2]], 3).astype(int).tolist()
    [[1, 0, 0], [0, 1, 0], [1, 1, 1]]
    """
    g = as_graph(edge_index, num_segments, directed=True, name="segment graph")
    check_pairwise_size(g.num_nodes, g.num_nodes, 3, "Graph-KV segment reads", g.name, max_bytes)
    reads = np.eye(g.num_nodes, dtype=bool)
    src, dst = g.edge_index
    reads[dst, src] = True
    return reads


def graph_kv_layout(segment: Any, edge_index: Any, num_segments: int | None = None) -> GraphKVLayout:
    """Positions of the tokens of segments wired by ``source → target`` edges (see the module docstring).

    Parameters
    ----------
    segment : array_like of int, shape (L,)
        Segment of each token, ``-1`` for shared text (prompt before, question after).
    edge_index : array_like, shape (2, E)
        ``source → target`` edges between segments.
    num_segments : int, optional
        ``C`` (default: one more than the largest segment id or edge endpoint).

    Returns
    -------
    GraphKVLayout
        ``position (L,)`` int64, ``target (L,)`` bool (the token's segment has a source) and
        ``reads (C, C)`` (:func:`graph_kv_reads`).

    Raises
    ------
    ShapeError
        ``segment`` not 1-D integers, or a segment id below ``-1`` or ``>= num_segments``.

    Examples
    --------
    A 2-token prompt, sources 0 (3 tokens) and 1 (2 tokens) cited by target 2 (2 tokens), then
    a 2-token question: both sources start at 2, the target after the longer source (2 + 3),
    the question after the target:

    >>> seg = [-1, -1, 0, 0, 0, 1, 1, 2, 2, -1, -1]
    >>> graph_kv_layout(seg, [[0, 1], [2, 2]]).position.tolist()
    [0, 1, 2, 3, 4, 2, 3, 5, 6, 7, 8]
    """
    seg = np.asarray(segment)
    if seg.ndim != 1 or (seg.size and not np.issubdtype(seg.dtype, np.integer)):
        raise ShapeError(f"segment must be a 1-D integer array; given {seg.dtype} {seg.shape}")
    seg = seg.astype(np.int64)
    ei = as_int_array(edge_index, "edge_index", error=ShapeError)
    if ei.size == 0:
        ei = ei.reshape(2, 0)
    elif ei.ndim != 2 or ei.shape[0] != 2:
        raise ShapeError(f"edge_index must have shape (2, E), got {ei.shape}")
    if num_segments is None:
        num_segments = int(max(seg.max(initial=-1), ei.max(initial=-1))) + 1
    bad = np.flatnonzero((seg < -1) | (seg >= num_segments))
    if bad.size:
        raise ShapeError(f"segment[{bad[0]}] = {seg[bad[0]]} is not -1 or a segment in 0..{num_segments - 1}")
    reads = graph_kv_reads(ei, num_segments)
    is_target = _has_source(reads)
    # ordinal of every token inside its segment (order of appearance)
    ordinal = np.zeros(seg.size, dtype=np.int64)
    counts = np.zeros(num_segments, dtype=np.int64)
    inside = seg >= 0
    if inside.any():
        order = np.argsort(seg[inside], kind="stable")
        s_sorted = seg[inside][order]
        starts = np.searchsorted(s_sorted, s_sorted)
        ordinal_inside = np.empty(order.size, dtype=np.int64)
        ordinal_inside[order] = np.arange(order.size) - starts
        ordinal[inside] = ordinal_inside
        counts = np.bincount(seg[inside], minlength=num_segments)
    prefix = int(np.argmax(inside)) if inside.any() else seg.size  # the leading run of shared tokens
    R = int(counts[~is_target].max(initial=0))
    T = int(counts[is_target].max(initial=0))
    tok_target = np.zeros(seg.size, dtype=bool)
    tok_target[inside] = is_target[seg[inside]]
    position = np.where(tok_target, prefix + R + ordinal, prefix + ordinal)
    suffix = ~inside
    suffix[:prefix] = False
    position[:prefix] = np.arange(prefix)
    position[suffix] = prefix + R + T + np.arange(int(suffix.sum()))
    return GraphKVLayout(position.astype(np.int64), tok_target, reads)


def graph_kv_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``graphkv``: nodes are segments, edges ``source → target``.

    Token positions need token counts, so they are computed after alignment: the aligned node of
    each token is its segment, and :func:`graph_kv_layout` gives the positions.

    Parameters
    ----------
    structure : Structure
        A graph whose nodes are text segments.
    arg : str, optional
        Unused.

    Returns
    -------
    dict
        ``{"gkv_target": (N,) bool, "gkv_reads": (N, N) bool}``: whether the segment has a source,
        and the segment-level mask row (:func:`graph_kv_reads`).

    Examples
    --------
    >>> from structpos import Structure
    >>> s = Structure("graph", ["doc a", "doc b", "paper"], edge_index=[[0, 1], [2, 2]], directed=True)
    >>> c = graph_kv_coords(s)
    >>> c["gkv_target"].tolist(), c["gkv_reads"][2].tolist()
    ([False, False, True], [True, True, True])
    """
    g = as_graph(structure, directed=True)
    reads = graph_kv_reads(g, g.num_nodes)
    return {"gkv_target": _has_source(reads), "gkv_reads": reads}


def _has_source(reads: np.ndarray) -> np.ndarray:
    """``(C,)`` bool: the segment reads another segment (it is a target)."""
    off = reads & ~np.eye(reads.shape[0], dtype=bool)
    return np.asarray(off.any(axis=1), dtype=bool)
