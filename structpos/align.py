"""Alignment: map node coordinates onto a tokenizer's tokens through character offsets.

A token is a half-open character span ``[s, e)`` into the structure's source (HF
``offset_mapping`` rows, or any list of ``(start, end)`` pairs). The rules:

1. **Deepest covering node.** A token takes the deepest node ``n`` whose span covers it:
   ``start[n] <= s`` and ``e <= end[n]``. When nodes share a span (``expression_statement``
   → ``call``) the later one in preorder, i.e. the deeper one, wins.
2. **Tokens that straddle nodes** (``")):"`` covering the ends of several nodes) take the
   deepest node covering the *whole* token — the lowest common ancestor of the nodes under
   its characters — and are flagged :data:`STRADDLE`.
3. **Whitespace.** With ``strip=True`` (default) leading/trailing whitespace inside a token's
   span is ignored for the lookup (``"Ġfoo"`` style tokens keep their word's node). A token
   made only of whitespace keeps its span, takes the smallest node enclosing the gap, and is
   flagged :data:`WHITESPACE`.
4. **Special tokens** (empty span, e.g. HF's ``(0, 0)`` for ``[CLS]``/``<s>``) and tokens
   outside every node get ``node = -1``, the ``fill`` value in every coordinate, and the
   :data:`SPECIAL` / :data:`OUTSIDE` flag. Every token therefore gets coordinates.

Algorithm (vectorized, no per-token Python loop): spans of a tree in preorder have
non-decreasing starts, so ``c = searchsorted(start, s, 'right') - 1`` is the last node
starting at or before ``s``; the deepest node covering ``[s, e)`` is ``c`` or the first
ancestor of ``c`` whose span reaches ``e`` (ancestors' ends only grow going up). All tokens
climb together, one parent step per round, only those not yet placed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .exceptions import ShapeError
from .structure import Structure, StructureError, raise_at_first

__all__ = ["align", "Alignment", "SPECIAL", "OUTSIDE", "STRADDLE", "WHITESPACE", "token_coords"]

SPECIAL = 1  #: empty span: a special token added by the tokenizer
OUTSIDE = 2  #: no node covers the token
STRADDLE = 4  #: the token covers parts of several leaves; it took their common ancestor
WHITESPACE = 8  #: the token is only whitespace


@dataclass
class Alignment:
    """Per-token result of :func:`align`.

    Parameters
    ----------
    node : numpy.ndarray
        ``(T,)`` node index per token.
    flags : numpy.ndarray
        ``(T,)`` bit flags.

    Examples
    --------
    >>> import numpy as np
    >>> a = Alignment(np.array([-1, 0, 2]), np.array([SPECIAL, 0, 0]))
    >>> a.valid.tolist(), len(a)
    ([False, True, True], 3)
    """

    node: np.ndarray
    """``(T,)`` node index per token, ``-1`` for special/outside tokens."""
    flags: np.ndarray
    """``(T,)`` bit flags (:data:`SPECIAL`, :data:`OUTSIDE`, :data:`STRADDLE`, :data:`WHITESPACE`)."""

    def __len__(self) -> int:
        return len(self.node)

    @property
    def valid(self) -> np.ndarray:
        """``(T,)`` bool: the token has a node."""
        return self.node >= 0

    def take(self, coords: dict[str, np.ndarray], fill: float = -1) -> dict[str, np.ndarray]:
        """Gather node coordinates per token; tokens without a node get ``fill``.

        Parameters
        ----------
        coords : dict of str to numpy.ndarray
            Per-node arrays (leading dimension ``N``).
        fill : float
            Value for tokens without a node (booleans become int64 to hold it).

        Returns
        -------
        dict of str to numpy.ndarray
            Per-token arrays (leading dimension ``T``).

        Examples
        --------
        >>> import numpy as np
        >>> a = Alignment(np.array([-1, 0, 2]), np.array([SPECIAL, 0, 0]))
        >>> a.take({"depth": np.array([0, 1, 2])})["depth"].tolist()
        [-1, 0, 2]
        """
        out = {}
        idx = np.where(self.node >= 0, self.node, 0)
        for name, arr in coords.items():
            arr = np.asarray(arr)
            vals = arr[idx] if len(arr) else np.zeros((len(idx),) + arr.shape[1:], dtype=arr.dtype)
            if (self.node < 0).any():
                dtype = np.result_type(vals.dtype, np.asarray(fill).dtype) if arr.dtype != bool else np.int64
                vals = vals.astype(dtype, copy=True)
                vals[self.node < 0] = fill
            out[name] = vals
        return out


def _as_offsets(offsets) -> np.ndarray:
    if hasattr(offsets, "detach"):  # torch tensor
        offsets = offsets.detach().cpu().numpy()
    arr = np.asarray(offsets, dtype=np.int64)
    if arr.size == 0:
        return arr.reshape(0, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ShapeError(f"offsets must have shape (T, 2); got {arr.shape} (align one sequence at a time)")
    return arr


def _strip(source: str, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shrink spans ``[s, e)`` to exclude whitespace at both ends.

    Returns the new spans and a mask of non-empty spans made only of whitespace (those keep
    their original span).
    """
    nonws = np.flatnonzero(~_ws_mask(source))
    if nonws.size == 0:
        return s, e, e > s
    i = np.searchsorted(nonws, s, side="left")  # first non-space at or after s
    j = np.searchsorted(nonws, e, side="left") - 1  # last non-space before e
    new_s = np.where(i < nonws.size, nonws[np.minimum(i, nonws.size - 1)], len(source))
    new_e = np.where(j >= 0, nonws[np.maximum(j, 0)] + 1, 0)
    all_ws = (new_s >= new_e) & (e > s)
    keep = all_ws | (e <= s)
    return np.where(keep, s, new_s), np.where(keep, e, new_e), all_ws


def _ws_mask(source: str) -> np.ndarray:
    codes = np.frombuffer(source.encode("utf-32-le"), dtype=np.uint32)
    mask = np.isin(codes, [9, 10, 11, 12, 13, 32, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000])
    mask |= (codes >= 0x2000) & (codes <= 0x200A)
    mask |= (codes >= 0x1C) & (codes <= 0x1F)
    return mask


def align(structure: Structure, offsets, *, base: int = 0, strip: bool = True) -> Alignment:
    """Align tokens (character ``offsets``, shape ``(T, 2)``) to the nodes of ``structure``.

    ``base`` is added to every offset (when the tokenizer saw ``source[base:]``).
    See the module docstring for the rules. Returns an :class:`Alignment`.

    Parameters
    ----------
    structure : Structure
        A tree with character spans (or a dependency tree with ``nested_spans=False``).
    offsets : array_like
        ``(T, 2)`` token character spans, e.g. a HF tokenizer's ``offset_mapping``.
    base : int
        Added to every offset.
    strip : bool
        Ignore whitespace at the ends of a token for the lookup.

    Returns
    -------
    Alignment

    Raises
    ------
    StructureError
        If the structure has no spans or its spans are not in preorder.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[10, 20]", "json")
    >>> align(s, [(0, 0), (1, 3), (3, 4), (5, 7)]).node.tolist()
    [-1, 1, 0, 2]
    """
    off = _as_offsets(offsets)
    s = off[:, 0] + base
    e = off[:, 1] + base
    T = len(s)
    flags = np.zeros(T, dtype=np.int64)
    node = np.full(T, -1, dtype=np.int64)
    if T == 0:
        return Alignment(node, flags)
    raise_at_first(
        e < s,
        lambda t: f"token {t} has span ({s[t]}, {e[t]}) ending before it starts",
        name=structure.name,
        where="token",
    )
    special = e == s
    flags[special] |= SPECIAL
    if structure.source is not None:
        n_src = len(structure.source)
        raise_at_first(
            ~special & ((s < 0) | (e > n_src)),
            lambda t: f"token {t} span ({s[t]}, {e[t]}) lies outside the source of length {n_src}",
            name=structure.name,
            where="token",
        )
        if strip:
            s, e, ws = _strip(structure.source, s, e)
            flags[ws] |= WHITESPACE

    start, end = structure.start, structure.end
    spanned = np.flatnonzero(start >= 0)
    if spanned.size == 0:
        raise StructureError("structure has no node spans to align tokens to", name=structure.name)
    if not structure.nested_spans:
        return _align_flat(structure, s, e, special, flags)
    sp_start = start[spanned]
    if (np.diff(sp_start) < 0).any():
        raise StructureError(
            "node starts are not in preorder; alignment needs a preorder tree with nested spans", name=structure.name
        )
    parent = structure.parent if structure.parent is not None else np.full(structure.num_nodes, -1, dtype=np.int64)

    pos = np.searchsorted(sp_start, s, side="right") - 1
    cand = np.where(pos >= 0, spanned[np.maximum(pos, 0)], -1)
    active = np.flatnonzero(~special & (cand >= 0))
    cur = cand[active]
    # the deepest candidate covering the token's first character (for the straddle flag)
    first_leaf = np.full(T, -1, dtype=np.int64)
    while active.size:
        ok_full = (start[cur] >= 0) & (start[cur] <= s[active]) & (end[cur] >= e[active])
        ok_first = (start[cur] >= 0) & (end[cur] > s[active])
        fl = first_leaf[active]
        first_leaf[active] = np.where((fl < 0) & ok_first, cur, fl)
        node[active[ok_full]] = cur[ok_full]
        keep = ~ok_full
        active, cur = active[keep], parent[cur[keep]]
        alive = cur >= 0
        active, cur = active[alive], cur[alive]
    outside = (node < 0) & ~special
    flags[outside] |= OUTSIDE
    straddle = (node >= 0) & (first_leaf >= 0) & (first_leaf != node) & (end[np.maximum(first_leaf, 0)] < e)
    flags[straddle & ((flags & WHITESPACE) == 0)] |= STRADDLE
    return Alignment(node, flags)


def _align_flat(structure: Structure, s, e, special, flags) -> Alignment:
    """Alignment when node spans do not nest (dependency trees: each node spans one word).

    A token takes the node whose span covers it; ties (a multiword token's words share a
    surface span) go to the first such node in source order. A token crossing several words
    takes the word under its first character and is flagged :data:`STRADDLE`.
    """
    start, end = structure.start, structure.end
    spanned = np.flatnonzero(start >= 0)
    order = spanned[np.lexsort((-end[spanned], start[spanned]))]
    o_start = start[order]
    # the last node starting at or before s whose span reaches past s
    pos = np.searchsorted(o_start, s, side="right") - 1
    node = np.full(len(s), -1, dtype=np.int64)
    ok = (pos >= 0) & ~special
    cand = np.where(ok, order[np.maximum(pos, 0)], -1)
    contains_first = ok & (end[np.maximum(cand, 0)] > s)
    # multiword tokens: earlier nodes with the same start (sorted longest first) also cover s
    node[contains_first] = cand[contains_first]
    same = np.searchsorted(o_start, s, side="left")
    first_same = np.where(ok, order[np.minimum(same, len(order) - 1)], -1)
    use_first = (
        contains_first
        & (start[np.maximum(first_same, 0)] == start[np.maximum(cand, 0)])
        & (end[np.maximum(first_same, 0)] >= e)
    )
    node[use_first] = first_same[use_first]
    full = (node >= 0) & (end[np.maximum(node, 0)] >= e)
    flags[(node >= 0) & ~full] |= STRADDLE
    flags[(node < 0) & ~special] |= OUTSIDE
    return Alignment(node, flags)


def token_coords(structure: Structure, offsets, spec: str, *, fill: float = -1, **kw) -> dict[str, np.ndarray]:
    """Compute coordinate families ``spec`` on ``structure`` and gather them per token.

    Adds ``"node"`` (the token's node, -1 if none) and ``"align_flags"``.

    Parameters
    ----------
    structure : Structure
        The parsed input.
    offsets : array_like
        ``(T, 2)`` token character spans.
    spec : str
        Coordinate spec (see :func:`structpos.coords.parse_spec`).
    fill : float
        Value for tokens without a node.
    **kw
        Passed to :func:`align`.

    Returns
    -------
    dict of str to numpy.ndarray
        Per-token coordinates plus ``node`` and ``align_flags``.

    Raises
    ------
    SpecError
        On a bad spec.
    StructureError
        As :func:`align`.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[10, [20]]", "json")
    >>> token_coords(s, [(1, 3), (6, 8)], "tree")["depth"].tolist()
    [1, 2]
    """
    from .coords import compute

    al = align(structure, offsets, **kw)
    out = al.take(compute(structure, spec), fill=fill)
    out["node"] = al.node
    out["align_flags"] = al.flags
    return out
