"""Tree coordinates from a preorder parent array, vectorized with numpy.

Every function takes ``parent``: an ``(N,)`` int array in **preorder** (``parent[i] < i``,
``-1`` for a root; several roots make a forest, whose trees follow one another, and the
subtree of every node is a contiguous index range). Nothing recurses and nothing loops over
nodes in Python: per-node quantities come from a stable (radix) sort by parent, ``bincount``,
cumulative sums and *pointer jumping* (``f <- f[f]``, which halves every remaining ancestor
chain per round), so a 100k-deep chain costs ``O(N log depth)``; only :func:`root_path`
loops, once per level up to its ``max_depth``.

Definitions (``anc_k(i)`` is the ``k``-th ancestor of ``i``):

* ``depth[i]``: number of edges from ``i`` up to its root (roots have depth 0).
* ``sibling_index[i]``: 0-based position of ``i`` among the children of ``parent[i]``, in
  preorder; roots are numbered among the roots (tree index in a forest).
* ``num_children[i]``, ``subtree_size[i]`` (``i`` included). In preorder the subtree of
  ``i`` is exactly the index range ``[i, i + subtree_size[i])``.
* ``root_path[i]``: the child indices taken on the way from the root down to ``i``,
  ``(sibling_index[anc_{d-1}(i)], ..., sibling_index[anc_1(i)], sibling_index[i])`` with
  ``d = depth[i]`` (the Shiv & Quirk 2019 tree position; a root has the empty path),
  capped to ``max_depth`` steps and ``max_width`` children with an overflow flag.
* ``tree_distance(u, v) = depth[u] + depth[v] - 2 depth[lca(u, v)]``, the number of edges on
  the path between ``u`` and ``v``; ``-1`` when they lie in different trees of a forest.

Validation: every function rejects ``parent[i] >= i`` or ``< -1``; the ones that rely on
contiguous subtrees (:func:`subtree_size`, :func:`root_path`, :func:`lca`,
:func:`tree_distance`, :func:`tree_coords`) also reject a parent array that is not a
preorder, with a :class:`~structpos.StructureError` naming the node.

Length: this module is over 600 lines on purpose. It is one concept, algorithms on a preorder
parent array, whose public functions (per-node arrays, root paths, LCA and distances, the
``tree`` family and its ``tree_arg`` validator) all run on the same private kernels
(``_preorder``, ``_siblings``, ``_subtree_size``, ``_depth_preorder``). Splitting it would
turn those kernels into cross-module private imports, or force the re-export of ``lca`` and
``tree_distance`` from a module that imports this one (an import cycle).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np

from ..exceptions import ShapeError, SpecError
from ..native import native_module
from ..structure import Structure, StructureError, as_int_array, raise_at_first
from ._args import PAIRWISE_MAX_BYTES, check_pairwise_size, int_arg

__all__ = [
    "check_parent",
    "depth",
    "sibling_index",
    "num_children",
    "subtree_size",
    "root_path",
    "path_dtype",
    "lca",
    "tree_distance",
    "tree_coords",
    "tree_arg",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_WIDTH",
    "MAX_TREE_DEPTH",
    "MAX_TREE_WIDTH",
]

DEFAULT_MAX_DEPTH = 32
DEFAULT_MAX_WIDTH = 64
PathEnd = Literal["top", "bottom"]
"""Which end of a capped root path :func:`root_path` keeps."""
PATH_ENDS: tuple[str, ...] = get_args(PathEnd)
MAX_TREE_DEPTH = 4096
"""Largest ``D`` of ``tree:DxW``: the root path is an ``(N, D)`` array, so ``D`` bounds its size."""
MAX_TREE_WIDTH = 2**31 - 1
"""Largest ``W`` of ``tree:DxW`` (sibling indices are clipped to ``W - 1`` and stored as int16/int32)."""


# ---------------------------------------------------------------- validation
def check_parent(parent, name: str = "<parent>") -> np.ndarray:
    """Return ``parent`` as a contiguous int64 array after checking ``-1 <= parent[i] < i``.

    Raises :class:`StructureError` naming the first offending node. (Functions that rely on
    subtrees being contiguous also check the full preorder invariant, see
    :func:`_check_preorder`.)

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots. Integral floats (``-1.0``) are
        accepted; other floats, NaN, strings and booleans are not.
    name : str
        Input name for the error message.

    Returns
    -------
    numpy.ndarray
        ``(N,)`` int64.

    Raises
    ------
    StructureError
        If some ``parent[i] >= i`` or ``< -1``, or a value is not an integer.

    Examples
    --------
    >>> check_parent([-1, 0, 0]).tolist()
    [-1, 0, 0]
    >>> check_parent([-1, 2, 0])
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <parent> at node 1: parent[1]=2 breaks preorder (need -1 <= parent[i] < i)
    """
    p = as_int_array(parent, "parent", name=name)
    if p.ndim != 1:
        raise StructureError(f"parent must be one-dimensional, got shape {p.shape}", name=name)
    raise_at_first(
        (p >= np.arange(p.size)) | (p < -1),
        lambda i: f"parent[{i}]={int(p[i])} breaks preorder (need -1 <= parent[i] < i)",
        name=name,
    )
    return p


def _preorder(parent, name: str = "<parent>") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(parent, sibling_index, subtree_size)`` of a parent array checked to be a preorder."""
    p = check_parent(parent, name=name)
    sib, nxt = _siblings(p)
    size = _subtree_size(p, nxt)
    _check_preorder(p, sib, size, name)
    return p, sib, size


def _check_preorder(p: np.ndarray, sib: np.ndarray, size: np.ndarray, name: str = "<parent>") -> None:
    """Raise unless ``p`` (already ``parent[i] < i``) lists every subtree contiguously.

    With ``size`` from :func:`_subtree_size` (which lays the children of every node end to
    end after it), the numbering is a preorder exactly when every first child directly
    follows its parent (``sib[c] == 0 -> parent[c] == c - 1``) and no subtree comes out
    empty (``size > 0``). (Checked exhaustively against a DFS for all forests up to 7 nodes.)
    """
    first = (sib == 0) & (p >= 0)
    bad_first = first & (p != np.arange(p.size) - 1)
    if not bad_first.any() and not (size <= 0).any():
        return
    raise_at_first(
        bad_first | (size <= 0),
        lambda j: f"node {j} (parent {int(p[j])}) is not in preorder: a subtree is interrupted or misordered near it",
        name=name,
    )


# --------------------------------------------------------------- basic arrays
def depth(parent) -> np.ndarray:
    """Edges from each node to its root, by pointer jumping (list ranking).

    Invariant: ``d[i]`` is the distance from ``i`` to ``jump[i]`` (or to the root once
    ``jump[i] == -1``). Each round ``d[i] += d[jump[i]]; jump[i] = jump[jump[i]]`` doubles the
    covered distance, so ``ceil(log2(max depth)) + 1`` rounds suffice.

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots.

    Returns
    -------
    numpy.ndarray
        ``(N,)`` int64 depths (roots 0).

    Raises
    ------
    StructureError
        If some ``parent[i]`` lies outside ``[-1, i)``.

    Examples
    --------
    >>> depth([-1, 0, 1, 1, 0]).tolist()
    [0, 1, 2, 2, 1]
    """
    return _depth(check_parent(parent))


def _depth(p: np.ndarray) -> np.ndarray:
    d = (p >= 0).astype(np.int64)
    jump = p.copy()
    active = np.flatnonzero(jump >= 0)
    while active.size:
        j = jump[active]
        d[active] += d[j]  # right-hand sides read the previous round (synchronous update)
        jump[active] = jump[j]
        active = active[jump[active] >= 0]
    return d


def _depth_preorder(size: np.ndarray) -> np.ndarray:
    """Depth of a *valid preorder* from subtree sizes in O(N): the proper ancestors of ``i``
    are the ``j < i`` whose subtree ``[j, end_j)`` has not ended by ``i``, so
    ``depth[i] = i - #{j : end_j <= i}`` (a cumulative count of subtree ends)."""
    n = size.size
    ar = np.arange(n)
    ended = np.cumsum(np.bincount(ar + size, minlength=n + 1)[:n])
    return ar - ended


def _siblings(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sibling_index, next_sibling)`` from one stable sort of the nodes by parent.

    The stable sort keeps each parent's children in preorder; a node's sibling index is
    its offset from the start of its parent's run, its next sibling the next node in the
    same run (``-1`` if none).
    """
    n = p.size
    # stable radix sort when the keys fit 16 bits (most files), else timsort
    key = (p + 1).astype(np.uint16) if n < 65536 else p
    order = np.argsort(key, kind="stable")
    sp = p[order]
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = sp[1:] != sp[:-1]
    ar = np.arange(n)
    run_start = np.maximum.accumulate(np.where(new_run, ar, 0))
    sib = np.empty(n, dtype=np.int64)
    sib[order] = ar - run_start
    nxt = np.full(n, -1, dtype=np.int64)
    if n > 1:
        same = ~new_run[1:]
        nxt[order[:-1][same]] = order[1:][same]
    return sib, nxt


def sibling_index(parent) -> np.ndarray:
    """0-based position among the children of the same parent (roots among roots).

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots.

    Returns
    -------
    numpy.ndarray
        ``(N,)`` int64 positions, 0 for a first child.

    Raises
    ------
    StructureError
        If some ``parent[i]`` lies outside ``[-1, i)``.

    Examples
    --------
    >>> sibling_index([-1, 0, 1, 1, 0, -1]).tolist()
    [0, 0, 0, 1, 1, 1]
    """
    return _siblings(check_parent(parent))[0]


def num_children(parent) -> np.ndarray:
    """Number of children of each node (``bincount`` of the parent array).

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots.

    Returns
    -------
    numpy.ndarray
        ``(N,)`` int64 child counts, 0 for a leaf.

    Raises
    ------
    StructureError
        If some ``parent[i]`` lies outside ``[-1, i)``.

    Examples
    --------
    >>> num_children([-1, 0, 1, 1, 0]).tolist()
    [2, 2, 0, 0, 0]
    """
    return _num_children(check_parent(parent))


def _num_children(p: np.ndarray) -> np.ndarray:
    return np.bincount(p[p >= 0], minlength=p.size).astype(np.int64)


def subtree_size(parent) -> np.ndarray:
    """Number of nodes in each subtree (the node included).

    In preorder the subtree of ``i`` ends where the next sibling of ``i`` starts, or, if
    ``i`` has none, where the subtree of ``parent[i]`` ends; the end of the whole forest is
    ``N``. So ``end[i] = next_sibling[a]`` for ``a`` the nearest ancestor-or-self of ``i``
    that has a next sibling (``N`` if none), found by pointer jumping: ``f[i] = i`` if ``i``
    has a next sibling else ``parent[i]``, then ``f <- f[f]`` until nothing moves.

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots.

    Returns
    -------
    numpy.ndarray
        ``(N,)`` int64; the subtree of ``i`` is the index range ``[i, i + size[i])``.

    Raises
    ------
    StructureError
        If the parent array is not a preorder.

    Examples
    --------
    >>> subtree_size([-1, 0, 1, 1, 0]).tolist()
    [5, 3, 1, 1, 1]
    """
    return _preorder(parent)[2]


def _subtree_size(p: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    n = p.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    has = np.append(nxt >= 0, True)  # sentinel n: "no such ancestor", a fixed point
    f = np.empty(n + 1, dtype=np.int64)
    f[:n] = np.where(has[:n], np.arange(n), np.where(p >= 0, p, n))
    f[n] = n
    moving = np.flatnonzero(~has[f[:n]])
    while moving.size:
        f[moving] = f[f[moving]]
        moving = moving[~has[f[moving]]]
    a = f[:n]
    end = np.where(a == n, n, nxt[np.minimum(a, n - 1)])
    return end - np.arange(n)


# ------------------------------------------------------------------ root path
def root_path(
    parent, max_depth: int = DEFAULT_MAX_DEPTH, max_width: int = DEFAULT_MAX_WIDTH, keep: PathEnd = "top"
) -> tuple[np.ndarray, np.ndarray]:
    """Child indices along each node's root path, capped to ``(max_depth, max_width)``.

    Returns ``(path, overflow)``: ``path`` is ``(N, max_depth)`` of :func:`path_dtype` (int16),
    row ``i`` holding the root path of ``i`` (see the module docstring) left-aligned and
    padded with ``-1``;
    ``overflow`` is ``(N,)`` bool, True exactly when the stored row differs from the true path.

    Capping rule:

    * **depth**: a path with more than ``max_depth`` steps is cut to ``max_depth`` steps.
      ``keep="top"`` (default) keeps the steps nearest the root (column ``k`` always means
      "the child taken at depth ``k + 1``"; all descendants of a node at depth ``max_depth``
      share its row). ``keep="bottom"`` keeps the ``max_depth`` steps nearest the node, as
      in Shiv & Quirk's stack, where moving to a child shifts the path by one step.
    * **width**: a child index ``>= max_width`` is clipped to ``max_width - 1``.

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots.
    max_depth, max_width : int
        The caps (steps kept, largest child index stored + 1).
    keep : {"top", "bottom"}
        Which end of a too-long path to keep.

    Raises
    ------
    StructureError
        If the parent array is not a preorder.
    SpecError
        On a cap below 1 or an unknown ``keep``.

    Examples
    --------
    >>> path, overflow = root_path([-1, 0, 1, 1, 0], max_depth=2, max_width=4)
    >>> path.tolist(), overflow.tolist()
    ([[-1, -1], [0, -1], [0, 0], [0, 1], [1, -1]], [False, False, False, False, False])
    """
    if max_depth < 1 or max_width < 1:
        raise SpecError(f"max_depth and max_width must be >= 1, got {max_depth}, {max_width}")
    if keep not in PATH_ENDS:
        raise SpecError(f"keep must be {' or '.join(map(repr, PATH_ENDS))}, got {keep!r}")
    p, sib, size = _preorder(parent)
    return _root_path(p, _depth_preorder(size), sib, max_depth, max_width, keep)


def path_dtype(max_width: int) -> np.dtype:
    """dtype of :func:`root_path` rows: int16 (int32 when ``max_width > 16384``).

    Parameters
    ----------
    max_width : int
        The root path's width cap.

    Returns
    -------
    numpy.dtype

    Examples
    --------
    >>> path_dtype(64), path_dtype(100_000)
    (dtype('int16'), dtype('int32'))
    """
    return np.dtype(np.int16 if max_width <= 16384 else np.int32)


def _root_path(p, d, sib, max_depth, max_width, keep):
    """Level by level: the row of a node at depth ``k <= max_depth`` is its parent's row
    (columns ``< k - 1``) with column ``k - 1`` set to its own clipped sibling index. A node
    deeper than ``max_depth`` (``keep="top"``) copies the row of its ancestor at depth
    ``max_depth``, which in preorder is the last node of that depth up to it.
    """
    n = p.size
    path = np.full((n, max_depth), -1, dtype=path_dtype(max_width))
    overflow = d > max_depth
    if n == 0:
        return path, overflow
    levels = int(min(d.max(), max_depth))
    key = np.minimum(d, levels + 1).astype(np.int16 if levels < 32000 else np.int64)
    order = np.argsort(key, kind="stable")  # radix sort for 16-bit keys
    bounds = np.searchsorted(key[order], np.arange(levels + 2))
    step = np.minimum(sib, max_width - 1).astype(path.dtype)
    wide = sib >= max_width
    rows = path.view(np.dtype((np.void, path.itemsize * max_depth))).ravel()  # one element per row
    flat = path.ravel()
    for k in range(1, levels + 1):
        nodes = order[bounds[k] : bounds[k + 1]]
        up = p[nodes]
        if k > 1:
            rows[nodes] = rows[up]  # whole-row copies (columns >= k - 1 of the parent are -1)
            overflow[nodes] = overflow[up] | wide[nodes]
        else:
            overflow[nodes] |= wide[nodes]
        flat[nodes * max_depth + (k - 1)] = step[nodes]
    deep = np.flatnonzero(d > max_depth)
    if deep.size and keep == "top":
        at_cap = np.maximum.accumulate(np.where(d == max_depth, np.arange(n), -1))
        path[deep] = path[at_cap[deep]]
    elif deep.size:  # keep="bottom": rewrite these rows from the node upwards
        cur = deep
        for col in range(max_depth - 1, -1, -1):
            path[deep, col] = step[cur]
            cur = p[cur]
    return path, overflow


# ---------------------------------------------------------------- LCA/distance
def _sparse_argmin(values: np.ndarray) -> list[np.ndarray]:
    """Sparse table: ``table[k][i]`` = index of the minimum of ``values[i : i + 2**k]``."""
    table = [np.arange(values.size, dtype=np.int64)]
    k = 1
    while (1 << k) <= values.size:
        prev = table[-1]
        half = 1 << (k - 1)
        a, b = prev[:-half], prev[half:]
        table.append(np.where(values[b] < values[a], b, a))
        k += 1
    return table


def _lca_preorder(p: np.ndarray, d: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """LCA of pairs of preorder indices (``-1``: different trees).

    For ``u < v`` in preorder the shallowest node in ``(u, v]`` is a child of ``lca(u, v)``
    (also when ``u`` is an ancestor of ``v``), so ``lca = parent[argmin depth over (u, v]]``;
    the range minimum is answered in O(1) by a sparse table over the span of the queries.
    """
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    out = lo.copy()  # lo == hi: the node itself
    diff = lo != hi
    if not diff.any():
        return out
    a, b = lo[diff] + 1, hi[diff]  # inclusive range [a, b]
    base = int(a.min())
    table = _sparse_argmin(d[base : int(b.max()) + 1])
    length = b - a + 1
    k = np.floor(np.log2(length)).astype(np.int64)
    # guard the float log against rounding at exact powers of two
    k -= (1 << k) > length
    k += (1 << (k + 1)) <= length
    left = np.empty_like(a)
    right = np.empty_like(a)
    for level in np.unique(k):
        sel = k == level
        t = table[level]
        left[sel] = t[a[sel] - base]
        right[sel] = t[b[sel] - base - (1 << level) + 1]
    best = np.where(d[right + base] < d[left + base], right, left) + base
    out[diff] = p[best]
    return out


def lca(parent, u, v) -> np.ndarray:
    """Lowest common ancestor of each pair ``(u[j], v[j])``; ``-1`` if in different trees.

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots.
    u, v : array_like of int
        Node pairs (same shape); integral floats (``2.0``) are accepted, ``2.5`` is not.

    Returns
    -------
    numpy.ndarray
        Ancestor index per pair, ``-1`` across trees.

    Raises
    ------
    StructureError
        If the parent array is not a preorder, or a node does not exist or is not an integer.
    ShapeError
        ``u`` and ``v`` of different shapes.

    Examples
    --------
    >>> lca([-1, 0, 1, 1, 0], [2, 2, 3], [3, 4, 1]).tolist()
    [1, 0, 1]
    """
    p, _, size = _preorder(parent)
    u = as_int_array(u, "u")
    v = as_int_array(v, "v")
    if u.shape != v.shape:
        raise ShapeError(f"u and v must have the same shape, got {u.shape} and {v.shape}")
    _check_nodes(np.concatenate([u.ravel(), v.ravel()]), p.size)
    return _lca_preorder(p, _depth_preorder(size), u, v)


def _check_nodes(nodes: np.ndarray, n: int) -> None:
    bad = np.flatnonzero((nodes < 0) | (nodes >= n))
    if bad.size:
        raise StructureError(
            f"node index {int(nodes[bad[0]])} out of range for a tree of {n} nodes", position=int(bad[0])
        )


def tree_distance(
    parent, nodes=None, *, chunk: int = 1 << 22, max_bytes: int | None = PAIRWISE_MAX_BYTES
) -> np.ndarray:
    """Pairwise path lengths ``(M, M)`` between ``nodes`` (default: all ``N`` nodes).

    ``dist(u, v) = depth[u] + depth[v] - 2 depth[lca(u, v)]``; ``-1`` for nodes in different
    trees of a forest. Cost is ``O(S log S + M^2)`` where ``S`` is the preorder span of
    ``nodes``; pairs are processed ``chunk`` at a time to bound memory.

    Parameters
    ----------
    parent : array_like of int
        ``(N,)`` parent array in preorder, ``-1`` for roots.
    nodes : array_like of int, optional
        The ``M`` nodes to compare (default all).
    chunk : int
        Pairs per batch.
    max_bytes : int or None
        Cap on the ``(M, M)`` output's bytes (default 4 GiB; ``None``: no cap).

    Returns
    -------
    numpy.ndarray
        ``(M, M)`` int64 path lengths.

    Raises
    ------
    StructureError
        If the parent array is not a preorder, a node does not exist or is not an integer
        (integral floats such as ``2.0`` are accepted).
    LimitError
        ``M·M·8`` bytes above ``max_bytes``.

    Examples
    --------
    >>> tree_distance([-1, 0, 1, 1, 0]).tolist()[2]
    [2, 1, 0, 2, 3]
    """
    p, _, size = _preorder(parent)
    d = _depth_preorder(size)
    nodes = np.arange(p.size) if nodes is None else as_int_array(nodes, "nodes").ravel()
    _check_nodes(nodes, p.size)
    m = nodes.size
    check_pairwise_size(m, m, 8, "tree distances", "<parent>", max_bytes)
    out = np.empty((m, m), dtype=np.int64)
    rows_per_chunk = max(1, chunk // max(m, 1))
    for r0 in range(0, m, rows_per_chunk):
        r = nodes[r0 : r0 + rows_per_chunk]
        u = np.repeat(r, m)
        v = np.tile(nodes, r.size)
        a = _lca_preorder(p, d, u, v)
        dist = d[u] + d[v] - 2 * d[np.maximum(a, 0)]
        out[r0 : r0 + r.size] = np.where(a >= 0, dist, -1).reshape(r.size, m)
    return out


# ------------------------------------------------------------- family "tree"
def tree_arg(arg: str | None) -> dict[str, Any]:
    """The argument of spec ``tree[:DxW]``: ``{"D": depth cap, "W": width cap}`` of the root path.

    Either part may be left out (``"16"``, ``"x8"``); it then keeps its default
    (``DEFAULT_MAX_DEPTH`` × ``DEFAULT_MAX_WIDTH``). Bounds: ``1 <= D <= MAX_TREE_DEPTH``,
    ``1 <= W <= MAX_TREE_WIDTH``; anything else is a :class:`~structpos.exceptions.SpecError`.

    Examples
    --------
    >>> tree_arg("16"), tree_arg(None)
    ({'D': 16, 'W': 64}, {'D': 32, 'W': 64})
    >>> tree_arg("0x4")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: tree:0x4: depth must be an integer >= 1 (got '0'), expected e.g. 'tree:32x64'
    """
    if not arg:
        return {"D": DEFAULT_MAX_DEPTH, "W": DEFAULT_MAX_WIDTH}
    dpart, _, wpart = arg.lower().partition("x")
    spec, hint = f"tree:{arg}", ", expected e.g. 'tree:32x64'"
    max_depth = int_arg(spec, dpart, "depth", 1, hint, MAX_TREE_DEPTH) if dpart else DEFAULT_MAX_DEPTH
    max_width = int_arg(spec, wpart, "width", 1, hint, MAX_TREE_WIDTH) if wpart else DEFAULT_MAX_WIDTH
    return {"D": max_depth, "W": max_width}


def _native_tree_coords(parent, max_depth: int, max_width: int) -> dict[str, np.ndarray] | None:
    """:func:`tree_coords`'s arrays from ``structpos._native_tree`` (one stack pass), or ``None``.

    ``None`` when the module is not built or switched off, when ``parent`` is not a 1-D int64
    array, or when it is not a preorder: the pure path then runs (and raises the error naming the node).
    """
    native = native_module("tree")
    if native is None or not isinstance(parent, np.ndarray) or parent.ndim != 1 or parent.dtype != np.int64:
        return None
    p = np.ascontiguousarray(parent).copy()
    n = p.size
    d, sib, nch, size = (np.empty(n, dtype=np.int64) for _ in range(4))
    path = np.empty((n, max_depth), dtype=path_dtype(max_width))
    overflow = np.empty(n, dtype=np.bool_)
    if not native.fill(p, d, sib, nch, size, path, overflow.view(np.uint8), max_depth, max_width):
        return None
    return {
        "depth": d,
        "sibling": sib,
        "parent": p,
        "num_children": nch,
        "subtree_size": size,
        "root_path": path,
        "root_path_overflow": overflow,
    }


def tree_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``"tree"`` (spec ``"tree"`` or ``"tree:DEPTHxWIDTH"``, default 32x64).

    Returns ``depth``, ``sibling``, ``parent``, ``num_children``, ``subtree_size`` (all
    ``(N,)`` int64), ``root_path`` (``(N, DEPTH)`` int16, padded with ``-1``; see
    :func:`root_path` for the capping rule, ``keep="top"``) and ``root_path_overflow``
    (``(N,)`` bool: the stored path was cut or clipped). Raises StructureError if the parent
    array is not a preorder.

    Parameters
    ----------
    structure : Structure
        A tree.
    arg : str, optional
        ``"DEPTHxWIDTH"`` caps of the root path (read by :func:`tree_arg`).

    Returns
    -------
    dict of str to numpy.ndarray

    Raises
    ------
    StructureError
        If the structure has no parent array or it is not a preorder.
    SpecError
        On a bad ``arg``.

    Examples
    --------
    >>> import structpos
    >>> c = tree_coords(structpos.parse("[1, [2]]", "json"), "2x4")
    >>> c["depth"].tolist(), c["root_path"].tolist()
    ([0, 1, 1, 2], [[-1, -1], [0, -1], [1, -1], [1, 0]])
    """
    if structure.parent is None:
        raise StructureError("tree coordinates need a tree (no parent array)", name=structure.name)
    params = tree_arg(arg)
    max_depth, max_width = params["D"], params["W"]
    fast = _native_tree_coords(structure.parent, max_depth, max_width)
    if fast is not None:
        return fast
    p, sib, size = _preorder(structure.parent, structure.name)
    d = _depth_preorder(size)
    path, overflow = _root_path(p, d, sib, max_depth, max_width, "top")
    return {
        "depth": d,
        "sibling": sib,
        "parent": p.copy(),
        "num_children": _num_children(p),
        "subtree_size": size,
        "root_path": path,
        "root_path_overflow": overflow,
    }
