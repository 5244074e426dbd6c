r"""2D-TPE traversal orders: the position of every table cell (and token) under several flattenings.

Flattening a table row by row loses its columns: two cells of one column are a whole row
apart. 2D-TPE (Li et al. 2024) lets every attention head read the table under a traversal order
of its choice. Each order is a sort key on a cell's grid slot ``(r, c)`` (its top-left corner):

| order | key | reads |
|---|---|---|
| ``row`` | ``(r, c)`` | row by row (the usual flattening) |
| ``column`` | ``(c, r)`` | column by column |
| ``snake`` | ``(r, c)``, odd rows ``(r, −c)`` | rows, odd rows right to left (boustrophedon) |
| ``antidiagonal`` | ``(r + c, r)`` | anti-diagonals from the top-left corner |

Per node, the family ``tpe`` gives ``tpe_rank[i, o]``: the rank of cell ``i`` under order ``o``
(``-1`` for non-cell nodes). Per token, :func:`traversal_positions` turns those ranks into the
position each token has in the order's flattening,

.. math::

    p_o(t) = \#\{\, t' : (\kappa_o(t'), t') < (\kappa_o(t), t) \,\},

with ``κ_o(t)`` the rank of the token's cell (a token in no cell — a separator — takes the key
of the closest cell token before it, so it travels with that cell; tokens before every cell keep
``κ = -1`` and stay first). Under ``row`` on a table written row by row this is the token index
itself; under ``column`` it is the index the token has in the column-by-column text.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import ShapeError, SpecError
from ..structure import Structure
from .table import table_coords

__all__ = ["TRAVERSAL_ORDERS", "cell_ranks", "tpe_coords", "traversal_positions"]

TRAVERSAL_ORDERS: tuple[str, ...] = ("row", "column", "snake", "antidiagonal")
"""The orders of ``tpe_rank``'s columns."""


def cell_ranks(row, col) -> np.ndarray:
    """Rank of every cell under each of :data:`TRAVERSAL_ORDERS` (``-1`` where ``row < 0``).

    Parameters
    ----------
    row, col : array_like of int
        ``(N,)`` grid slot of each cell, ``-1`` for non-cells.

    Returns
    -------
    numpy.ndarray
        ``(N, 4)`` int64.

    Examples
    --------
    A 2 × 2 grid given row by row: cells (0,0) (0,1) (1,0) (1,1).

    >>> cell_ranks([0, 0, 1, 1], [0, 1, 0, 1]).T.tolist()
    [[0, 1, 2, 3], [0, 2, 1, 3], [0, 1, 3, 2], [0, 1, 2, 3]]
    """
    r = np.asarray(row, dtype=np.int64)
    c = np.asarray(col, dtype=np.int64)
    cell = (r >= 0) & (c >= 0)
    ids = np.flatnonzero(cell)
    rr, cc = r[ids], c[ids]
    keys = [
        (cc, rr),  # np.lexsort sorts by the last key first
        (rr, cc),
        (np.where(rr % 2 == 0, cc, -cc), rr),
        (rr, rr + cc),
    ]
    out = np.full((r.size, len(TRAVERSAL_ORDERS)), -1, dtype=np.int64)
    for o, key in enumerate(keys):
        order = np.lexsort(key)
        rank = np.empty(ids.size, dtype=np.int64)
        rank[order] = np.arange(ids.size)
        out[ids, o] = rank
    return out


def tpe_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``"tpe"``: ``tpe_rank`` ``(N, 4)``, each cell's rank under every traversal order.

    Parameters
    ----------
    structure : Structure
        A table (``row``/``col`` attributes).
    arg : str, optional
        Must be empty.

    Returns
    -------
    dict of str to numpy.ndarray
        ``tpe_rank``: ``(N, 4)`` int64, columns in :data:`TRAVERSAL_ORDERS` order.

    Raises
    ------
    StructureError
        Not a table.
    SpecError
        ``arg`` is given.

    Examples
    --------
    >>> import structpos
    >>> t = structpos.parse("a,b\\n1,2\\n", "table")
    >>> tpe_coords(t)["tpe_rank"][:, 1].tolist()  # column order: a, 1, b, 2
    [-1, -1, 0, 2, -1, 1, 3]
    """
    if arg:
        raise SpecError(f"coordinate family 'tpe' takes no argument, got {arg!r}")
    t = table_coords(structure)
    return {"tpe_rank": cell_ranks(t["row"], t["col"])}


def traversal_positions(rank) -> np.ndarray:
    """Per-token positions under each order from the tokens' cell ranks (see the module docstring).

    Parameters
    ----------
    rank : array_like of int
        ``(T, O)`` the aligned ``tpe_rank`` of each token (``-1``: the token is in no cell), or ``(T,)``
        for one order.

    Returns
    -------
    numpy.ndarray
        ``(T, O)`` (or ``(T,)``) int64: each column a permutation of ``0..T-1``.

    Raises
    ------
    ShapeError
        ``rank`` is not 1-D or 2-D integer, or holds values below ``-1``.

    Examples
    --------
    Tokens ``a , b \\n 1 , 2`` of a 2 × 2 table (separators travel with the cell before them):

    >>> ranks = cell_ranks([0, 0, 1, 1], [0, 1, 0, 1])
    >>> tokens = np.array([ranks[0], [-1] * 4, ranks[1], [-1] * 4, ranks[2], [-1] * 4, ranks[3]])
    >>> traversal_positions(tokens)[:, :2].T.tolist()
    [[0, 1, 2, 3, 4, 5, 6], [0, 1, 4, 5, 2, 3, 6]]
    """
    r = np.asarray(rank)
    if r.ndim not in (1, 2) or (r.size and not np.issubdtype(r.dtype, np.integer)):
        raise ShapeError(f"rank must be a (T,) or (T, O) integer array, given dtype {r.dtype} and shape {r.shape}")
    r = r.astype(np.int64)
    if r.size and int(r.min()) < -1:
        raise ShapeError(f"cell ranks must be >= -1, got {int(r.min())}")
    one = r.ndim == 1
    r = r.reshape(r.shape[0], -1)
    T = r.shape[0]
    idx = np.arange(T)
    # forward fill: a token in no cell takes the key of the last cell token before it
    last = np.maximum.accumulate(np.where(r >= 0, idx[:, None], -1), axis=0)
    key = np.where(last >= 0, r[np.maximum(last, 0), np.arange(r.shape[1])], -1)
    out = np.empty_like(r)
    for o in range(r.shape[1]):
        order = np.lexsort((idx, key[:, o]))
        out[order, o] = idx
    return out[:, 0] if one else out
