"""Tree distance per score from Euler-tour tables (range-minimum LCA depths), no L×L tensor.

``d(m, n) = δ_m + δ_n − 2·δ(lca)``, the LCA depth (= the length of the longest common prefix of
the two root paths, minus one) read as a range minimum over the Euler tour
(:func:`euler_tables`): 6 independent lookups per score into int32 tables, with a separator of
depth −1 before every tree of the tour, so pairs across trees or without a node come out
unreachable with no root lookup; ``⌊log₂⌋`` of the range length comes from float exponent bits.
(A binary search over root-path prefixes chains ``log₂ K`` dependent lookups, which the compiler
inlines into a kernel that took minutes to build.)

Examples
--------
>>> dist = tree_distance_fn([-1, 0, 0], torch.tensor([[0, 1, 2]]))
>>> i = torch.arange(3)
>>> dist(0, i[:, None], i[None, :]).tolist()
[[0, 1, 1], [1, 0, 2], [1, 2, 0]]
"""

from __future__ import annotations

import numpy as np
import torch

from ...coords.tree import check_parent
from ...coords.tree import depth as tree_depth
from ...exceptions import ParseError
from ._common import DistanceFn, ScoreMod, _built_for, _id_bound, _token_sizes, _tokens
from .bias import distance_score_mod


def euler_tables(parent) -> dict[str, torch.Tensor]:
    """Euler-tour tables of a preorder forest for O(1) LCA depths (range-minimum query).

    The Euler tour ``E`` lists a node when the walk enters it and again after each child
    (``2N − #roots`` entries per forest, trees one after another). With ``first[n]`` the first
    position of ``n`` in ``E``, ``depth(lca(u, v)) = min(depth[E[l..r]])`` for
    ``l, r = sorted(first[u], first[v])``, read from a sparse table
    ``sparse[j, i] = min(depth[E[i .. i + 2^j − 1]])`` with two lookups at level
    ``j = ⌊log₂(r − l + 1)⌋``. Memory O(N log N).

    Parameters
    ----------
    parent : array-like
        Preorder parent array (``-1`` for roots).

    Returns
    -------
    dict
        ``first``, ``depth``, ``root`` (``(N,)`` int64: Euler position, depth, root of each node) and
        ``sparse`` (``(J, M)`` int64).

    Raises
    ------
    ParseError
        ``parent`` is not a preorder forest (naming the first node out of order).

    Examples
    --------
    >>> t = euler_tables([-1, 0, 1, 0])
    >>> t["first"].tolist(), t["depth"].tolist(), t["root"].tolist()
    ([0, 1, 2, 5], [0, 1, 2, 1], [0, 0, 0, 0])
    >>> t["sparse"][0].tolist()   # depths along the tour 0 1 2 1 0 3 0
    [0, 1, 2, 1, 0, 1, 0]
    >>> euler_tables([-1, 0, 0, 1])  # node 3 is a child of node 1 but comes after node 2
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <parent> at node 3: node 3 (parent 1) is not in preorder: a subtree is interrupted or misordered near it
    """
    first, dep, root, level = _euler_tour(parent)
    return {
        "first": torch.from_numpy(first),
        "depth": torch.from_numpy(dep),
        "root": torch.from_numpy(root),
        "sparse": torch.from_numpy(_range_min_table(level)),
    }


def _euler_tour(parent) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(first, depth, root, level)`` of a preorder forest: each node's first tour position, depth and root,
    and the depth of every tour entry (trees one after another); ParseError when not in preorder."""
    p = check_parent(parent)
    n = p.size
    dep = tree_depth(p).astype(np.int64)
    root = np.arange(n)
    for i in range(n):
        if p[i] >= 0:
            root[i] = root[p[i]]
    tour: list[int] = []
    stack: list[int] = []
    first = np.zeros(n, dtype=np.int64)
    for i in range(n):  # preorder: close the subtrees that i is not in, then enter i
        while stack and stack[-1] != p[i]:
            stack.pop()
            if stack:
                tour.append(stack[-1])
        if p[i] >= 0 and not stack:  # the parent is not on the path from the root to node i - 1
            raise ParseError(
                f"node {i} (parent {int(p[i])}) is not in preorder: a subtree is interrupted or misordered near it",
                name="<parent>",
                position=f"node {i}",
            )
        first[i] = len(tour)
        tour.append(i)
        stack.append(i)
    while stack:
        stack.pop()
        if stack:
            tour.append(stack[-1])
    level = dep[np.asarray(tour, dtype=np.int64)] if tour else np.zeros(0, dtype=np.int64)
    return first, dep, root, level


def _range_min_table(level: np.ndarray) -> np.ndarray:
    """``(J, M)`` sparse table ``out[j, i] = min(level[i .. i + 2^j − 1])`` (entries past the end keep shorter spans)."""
    if not len(level):
        return np.zeros((1, 0), dtype=level.dtype)
    rows = [level]
    width = 1
    while 2 * width <= len(level):
        prev = rows[-1]
        nxt = prev.copy()
        nxt[: len(prev) - width] = np.minimum(prev[: len(prev) - width], prev[width:])
        rows.append(nxt)
        width *= 2
    return np.stack(rows)


def _floor_log2(n: torch.Tensor) -> torch.Tensor:
    """``⌊log₂ n⌋`` of integers ``1 ≤ n < 2^31`` from the float32 exponent bits (no ``log2`` call).

    Rounding to float32 can carry ``n`` just below a power of two up to it; the step back when
    ``2^level > n`` makes the result exact."""
    bits = n.to(torch.float32).view(torch.int32)
    level = (torch.bitwise_right_shift(bits, 23) - 127).to(n.dtype)
    too_big = torch.bitwise_left_shift(torch.ones_like(level), level) > n
    return level - too_big.to(n.dtype)


def tree_distance_fn(parent, node) -> DistanceFn:
    """``d(b, q_idx, kv_idx)``: tree distance ``δ_q + δ_kv − 2·δ(lca)`` of two tokens' nodes, ``-1`` if unreachable.

    The distance part of :func:`tree_distance_score_mod`, for score_mods that turn it into a bias
    another way (:func:`fire_score_mod`).

    Parameters
    ----------
    parent : array-like
        ``(N,)`` preorder parent array (see :func:`tree_distance_score_mod`).
    node : torch.Tensor
        ``(B, L)`` node of each token (``-1``: none → unreachable).

    Returns
    -------
    callable
        ``dist(b, q_idx, kv_idx)`` → int64 distance: 6 lookups, no chain of dependent lookups.

    Raises
    ------
    ParseError
        ``parent`` is not a preorder forest.
    ShapeError
        ``node`` not an integer ``(B, L)`` tensor, or a node id ``>= N``.

    Examples
    --------
    >>> dist = tree_distance_fn([-1, 0, 1, 0], torch.tensor([[0, 2, 3, -1]]))
    >>> i = torch.arange(4)
    >>> dist(0, i[:, None], i[None, :])[1].tolist()
    [2, 0, 3, -1]
    """
    nid = _tokens(node, "node", 2)
    first, dep, root, level = _euler_tour(parent)
    n = first.size
    _id_bound(nid, n, "node", f"N = {n} (the parent array's length)")
    # a separator of depth -1 before every tree: a range that crosses trees (or starts at position 0,
    # where tokens without a node point) has minimum -1, so "unreachable" needs no root or depth lookup
    roots = np.flatnonzero(root == np.arange(n))
    level = np.insert(level, first[roots], -1) if n else np.full(1, -1, dtype=np.int64)
    first = first + np.searchsorted(roots, root) + 1
    table = _range_min_table(level)
    itype = torch.int32 if table.size < 2**31 else torch.int64  # half the bytes per lookup, narrower vector arithmetic
    sparse = torch.from_numpy(table).reshape(-1).to(itype).contiguous()
    m = table.shape[1]
    slot = torch.where(nid >= 0, nid, n)  # tokens without a node read the appended entry: position 0, depth 0
    first_t = torch.from_numpy(np.append(first, 0))[slot].to(itype).contiguous()
    dep_t = torch.from_numpy(np.append(dep, 0))[slot].to(itype).contiguous()

    def dist(b, q_idx, kv_idx):
        fq, fk = first_t[b, q_idx], first_t[b, kv_idx]
        lo, hi = torch.minimum(fq, fk), torch.maximum(fq, fk)
        level = _floor_log2(hi - lo + 1)
        span = torch.bitwise_left_shift(torch.ones_like(level), level)
        lca = torch.minimum(sparse[level * m + lo], sparse[level * m + hi - span + 1])
        d = dep_t[b, q_idx] + dep_t[b, kv_idx] - 2 * lca
        return torch.where(lca < 0, -1, d).to(torch.int64)

    return _built_for(dist, **_token_sizes(nid, "node", "tree_distance_fn"))


def tree_distance_score_mod(
    parent,
    node,
    *,
    slopes: torch.Tensor | None = None,
    table: torch.Tensor | None = None,
    unreachable: float = float("-inf"),
) -> ScoreMod:
    """``score + bias(d_tree(q, kv), h)`` with ``d = δ_q + δ_kv − 2·δ(lca)`` from Euler-tour tables.

    Parameters
    ----------
    parent : array-like
        ``(N,)`` preorder parent array of the forest the tokens point into (several structures:
        concatenate them as one forest with offset node ids).
    node : torch.Tensor
        ``(B, L)`` node of each token (``-1``: none → unreachable).
    slopes, table, unreachable
        See :func:`distance_to_bias`.

    Returns
    -------
    callable
        ``score_mod(score, b, h, q_idx, kv_idx)``: 6 lookups per score (no chain of dependent
        lookups), per-token inputs O(L), tables O(N log N).

    Raises
    ------
    ParseError
        ``parent`` is not a preorder forest.
    SpecError
        Neither or both of ``slopes`` and ``table`` given.
    ShapeError
        ``node`` not an integer ``(B, L)`` tensor, a node id ``>= N``, bad ``slopes``/``table``.

    Notes
    -----
    The score_mod is built for ``node``'s ``(B, L)`` and the ``H`` of ``slopes``/``table``:
    :func:`~structpos.integrations.flex.flex` refuses more batch rows, tokens or heads with a
    :class:`~structpos.exceptions.ShapeError` naming them.

    Examples
    --------
    >>> mod = tree_distance_score_mod([-1, 0, 0], torch.tensor([[0, 1, 2]]), slopes=torch.ones(1))
    >>> float(mod(torch.tensor(0.0), torch.tensor(0), torch.tensor(0), torch.tensor(1), torch.tensor(2)))
    -2.0
    """
    return distance_score_mod(tree_distance_fn(parent, node), slopes=slopes, table=table, unreachable=unreachable)
