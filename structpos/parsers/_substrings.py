"""Many substrings of one text by a single ``str.split``, the spans marked in numpy.

Slicing ``text[s:e]`` once per span costs a Python-level call per cell or key. For spans that
are disjoint and increasing, and whose end position ``e`` lies in no span (the character after
a span: a separator, a closing quote, or the end of the text), the same strings come from one
pass: keep the characters inside the spans, turn the character at each ``e`` into a NUL, decode
the kept characters once and split at NUL. A text holding a NUL has no free split character;
callers then slice.

Examples
--------
>>> import numpy as np
>>> text = 'a,"bc",d'
>>> codes = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
>>> start, end = np.array([0, 3, 7]), np.array([1, 5, 8])
>>> split_spans(codes, span_mask(codes.size, start, end), end)
['a', 'bc', 'd']
"""

from __future__ import annotations

import numpy as np

__all__ = ["span_mask", "split_spans"]


def span_mask(n: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Which of the positions ``0..n`` lie inside a span ``[start[k], end[k])``.

    Parameters
    ----------
    n : int
        The text's length (the mask has ``n + 1`` entries: the end ``n`` may hold a NUL).
    start, end : numpy.ndarray
        Disjoint spans in order: ``start[k] <= end[k] <= start[k + 1]``, ``end[-1] <= n``.

    Returns
    -------
    numpy.ndarray
        Booleans, ``n + 1`` of them.

    Examples
    --------
    >>> span_mask(5, np.array([0, 3]), np.array([2, 3])).tolist()
    [True, True, False, False, False, False]
    """
    bounds = np.empty(2 * start.size + 2, dtype=np.int64)
    bounds[0], bounds[1:-1:2], bounds[2:-1:2], bounds[-1] = 0, start, end, n + 1
    inside = np.zeros(2 * start.size + 1, dtype=bool)
    inside[1::2] = True  # the runs alternate: outside, span 0, outside, span 1, ..., outside
    return np.repeat(inside, np.diff(bounds))  # a run-length fill: no cumulative sum over the text


def split_spans(codes: np.ndarray, keep: np.ndarray, end: np.ndarray) -> list[str]:
    """The strings of the spans: the kept characters, cut at the positions ``end``.

    Parameters
    ----------
    codes : numpy.ndarray
        The text as one integer per character: ``uint8`` for ASCII, ``uint32`` (UTF-32 code
        units) otherwise; it must hold no NUL.
    keep : numpy.ndarray
        :func:`span_mask` of the spans, possibly with more characters cleared (dropped from the
        strings); modified in place.
    end : numpy.ndarray
        Each span's end, a position inside no span.

    Returns
    -------
    list of str
        One string per span, in order.

    Examples
    --------
    >>> codes = np.frombuffer("é,ab".encode("utf-32-le"), dtype=np.uint32)
    >>> keep = span_mask(4, np.array([0, 2]), np.array([1, 4]))
    >>> keep[3] = False  # drop the 'b'
    >>> split_spans(codes, keep, np.array([1, 4]))
    ['é', 'a']
    """
    n = codes.size
    keep[end] = True
    chars = np.empty(n + 1, dtype=codes.dtype)
    chars[:n] = codes
    chars[end] = 0
    encoding = "ascii" if codes.dtype == np.uint8 else "utf-32-le"
    parts = chars[keep].tobytes().decode(encoding, "surrogatepass").split("\x00")
    parts.pop()  # after the last span's NUL
    return parts
