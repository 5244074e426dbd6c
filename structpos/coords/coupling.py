r"""Position coupling: user-declared groups of tokens that share one position id.

Position coupling (Cho et al. 2024) gives tokens that play "the same position" for a task one
position id: in ``a + b = c`` the digits of equal significance in ``a``, ``b`` and ``c``. With
RoPE on the coupled ids, the attention logit between two tokens depends on their *groups'*
offset only,

.. math::

    p_t = o + 1 + \operatorname{rank}(g_t) \quad (g_t \ge 0), \qquad p_t = f \quad (g_t = -1),
    \qquad
    \langle R(p_i) q, R(p_j) k \rangle = \langle R(p_i - p_j) q, k \rangle,

where ``g_t`` is the token's group key, ``rank`` the 0-based rank of the key among the distinct
keys of the sequence (dense rank, increasing), ``o`` an offset (random in training, so that
long test inputs use ids seen in training) and ``f`` the id of ungrouped tokens (operators,
``=``). A model trained on ``N``-digit sums then meets, at ``2N`` digits, only per-digit
offsets it has seen: the paper trains on 1–30 digits and generalises to 200.

:func:`coupled_positions` takes any per-token group keys; :func:`arithmetic_coupling` builds
them for character-level arithmetic strings (key = significance of the digit in its number,
units = 0; the most significant digits get the smallest ids).
"""

from __future__ import annotations

import numpy as np

from ..exceptions import SpecError

__all__ = ["coupled_positions", "arithmetic_coupling", "digit_significance"]


def coupled_positions(groups, *, offset: int = 0, fill: int = 0) -> np.ndarray:
    """Position ids in which tokens of one group share an id (see the module docstring).

    Parameters
    ----------
    groups : array_like of int
        ``(T,)`` group key per token, ``-1`` for a token in no group. Keys order the groups:
        the smallest key gets id ``offset + 1``, the next distinct key ``offset + 2``, ...
    offset : int
        Added to every group id (``>= 0``).
    fill : int
        Id of ungrouped tokens.

    Returns
    -------
    numpy.ndarray
        ``(T,)`` int64 position ids.

    Raises
    ------
    SpecError
        ``groups`` is not 1-D integer, holds a key below ``-1``, or ``offset`` is negative.

    Examples
    --------
    >>> coupled_positions([5, 9, -1, 5, 9, 7]).tolist()
    [1, 3, 0, 1, 3, 2]
    >>> coupled_positions([5, 9, -1], offset=10, fill=-1).tolist()
    [11, 12, -1]
    """
    g = np.asarray(groups)
    if g.ndim != 1 or (g.size and not np.issubdtype(g.dtype, np.integer)):
        raise SpecError(f"groups must be a 1-D integer array, given dtype {g.dtype} and shape {g.shape}")
    g = g.astype(np.int64)
    if g.size and int(g.min()) < -1:
        raise SpecError(f"group keys must be >= -1 (-1: no group), got {int(g.min())} at token {int(g.argmin())}")
    if offset < 0:
        raise SpecError(f"offset must be >= 0, got {offset}")
    grouped = g >= 0
    _, rank = np.unique(g[grouped], return_inverse=True)
    out = np.full(g.size, fill, dtype=np.int64)
    out[grouped] = offset + 1 + rank.reshape(-1)
    return out


def digit_significance(text: str, reverse_last: bool = False) -> np.ndarray:
    """Significance of every digit character in its number (units = 0), ``-1`` for other characters.

    A number is a maximal run of ASCII digits. With ``reverse_last`` the last number of the
    text is written least significant digit first (the reversed-answer format of the
    length-generalisation papers).

    Parameters
    ----------
    text : str
        E.g. ``"653+49=702"``.
    reverse_last : bool
        The last digit run is written units first.

    Returns
    -------
    numpy.ndarray
        ``(len(text),)`` int64.

    Examples
    --------
    >>> digit_significance("653+49=702").tolist()
    [2, 1, 0, -1, 1, 0, -1, 2, 1, 0]
    >>> digit_significance("653+49=207", reverse_last=True).tolist()[-3:]
    [0, 1, 2]
    """
    chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    is_digit = (chars >= ord("0")) & (chars <= ord("9"))
    idx = np.arange(chars.size)
    starts = is_digit & ~np.concatenate([[False], is_digit[:-1]])
    run = np.cumsum(starts) - 1  # digit-run number of each digit
    ends = is_digit & ~np.concatenate([is_digit[1:], [False]])
    run_start = idx[starts]
    run_end = idx[ends]
    sig = np.full(chars.size, -1, dtype=np.int64)
    d = np.flatnonzero(is_digit)
    sig[d] = run_end[run[d]] - d
    if reverse_last and run_start.size:
        last = d[run[d] == run_start.size - 1]
        sig[last] = last - run_start[-1]
    return sig


def arithmetic_coupling(text: str, *, offset: int = 0, fill: int = 0, reverse_result: bool = False) -> np.ndarray:
    """Coupled position ids of a character-level arithmetic string: one id per significance.

    A digit of significance ``s`` gets ``offset + 1 + (S - s)`` with ``S`` the largest
    significance in ``text`` (so the leading digit of the longest number gets ``offset + 1``
    and all units digits share ``offset + 1 + S``); other characters get ``fill``.
    :func:`coupled_positions` of ``-significance``.

    Parameters
    ----------
    text : str
        E.g. ``"653+49=702"``, one token per character.
    offset, fill : int
        As :func:`coupled_positions`.
    reverse_result : bool
        The last number is written units first (:func:`digit_significance`).

    Returns
    -------
    numpy.ndarray
        ``(len(text),)`` int64.

    Raises
    ------
    SpecError
        ``offset`` is negative.

    Examples
    --------
    Hundreds, tens and units of 653, 49 and 702 share the ids 1, 2, 3; ``+`` and ``=`` get 0:

    >>> arithmetic_coupling("653+49=702").tolist()
    [1, 2, 3, 0, 2, 3, 0, 1, 2, 3]
    """
    sig = digit_significance(text, reverse_last=reverse_result)
    key = np.where(sig >= 0, sig.max(initial=0) - sig, -1)
    return coupled_positions(key, offset=offset, fill=fill)
