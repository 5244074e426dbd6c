r"""Text-grid coordinates: the (line, column) of every node or token in its source text.

A text read as a 2-D grid of characters gives each character ``i`` the coordinates

.. math::

    \mathrm{line}(i) = \#\{\, j < i : \mathrm{text}_j = \texttt{"\\n"} \,\}, \qquad
    \mathrm{col}(i) = i - \big(\max\{\, j < i : \mathrm{text}_j = \texttt{"\\n"} \,\} + 1\big)

(0-based; the max of the empty set is ``-1``, so the first line's column is ``i``). Columns count
code points (a tab is one column; ``"\r"`` before ``"\n"`` ends its line). A node or token takes
the coordinates of its first character. Two-axis RoPE on ``(line, col)`` is the 2-D position
of a text grid (ASCII art, aligned tables, code indentation): tokens in one column keep their
column offset whatever the length of the lines between them, which lets a model copy along a
grid far beyond its trained length (the position-coupling paper's 2-D task).

Everything is one ``searchsorted`` over the newline offsets (no per-token loop).
"""

from __future__ import annotations

import numpy as np

from ..exceptions import SpecError
from ..structure import Structure, StructureError

__all__ = ["line_col", "grid_coords", "token_grid"]


def line_col(text: str, offsets) -> tuple[np.ndarray, np.ndarray]:
    """``(line, col)`` of the characters at ``offsets`` in ``text`` (see the module docstring).

    Parameters
    ----------
    text : str
        The source.
    offsets : array_like of int
        Character offsets, ``0 <= offset <= len(text)`` (``len(text)``: the end of the text).

    Returns
    -------
    line, col : numpy.ndarray
        ``(n,)`` int64 each.

    Raises
    ------
    StructureError
        An offset outside ``[0, len(text)]`` (names the first).

    Examples
    --------
    >>> line, col = line_col("ab\\ncd\\n\\nx", [0, 1, 3, 4, 6, 7])
    >>> line.tolist(), col.tolist()
    ([0, 0, 1, 1, 2, 3], [0, 1, 0, 1, 0, 0])
    """
    at = np.asarray(offsets, dtype=np.int64).reshape(-1)
    bad = np.flatnonzero((at < 0) | (at > len(text)))
    if bad.size:
        i = int(bad[0])
        raise StructureError(f"offset {int(at[i])} lies outside the text (length {len(text)})", position=f"index {i}")
    chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    newlines = np.flatnonzero(chars == ord("\n"))
    line = np.searchsorted(newlines, at, side="left").astype(np.int64)
    before = np.concatenate([[-1], newlines])  # before[l]: offset of the newline that ends line l - 1
    return line, (at - before[line] - 1).astype(np.int64)


def token_grid(text: str, offsets) -> tuple[np.ndarray, np.ndarray]:
    """``(line, col)`` of each token's first character; ``-1`` for empty spans (special tokens).

    Parameters
    ----------
    text : str
        The text the tokens index.
    offsets : array_like of int
        ``(T, 2)`` half-open character spans (HF ``offset_mapping``).

    Returns
    -------
    line, col : numpy.ndarray
        ``(T,)`` int64 each.

    Raises
    ------
    StructureError
        ``offsets`` is not ``(T, 2)``, or a span lies outside the text.

    Examples
    --------
    >>> line, col = token_grid("ab\\n cd", [(0, 0), (0, 2), (4, 6)])
    >>> line.tolist(), col.tolist()
    ([-1, 0, 1], [-1, 0, 1])
    """
    spans = np.asarray(offsets, dtype=np.int64)
    if spans.ndim != 2 or spans.shape[1] != 2:
        raise StructureError(f"offsets must have shape (T, 2), given {spans.shape}")
    empty = spans[:, 1] <= spans[:, 0]
    line, col = line_col(text, np.where(empty, 0, spans[:, 0]))
    return np.where(empty, -1, line), np.where(empty, -1, col)


def grid_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``"grid"``: ``grid_line``, ``grid_col`` of each node's first character.

    Parameters
    ----------
    structure : Structure
        Any structure with character spans into its ``source``.
    arg : str, optional
        Must be empty.

    Returns
    -------
    dict of str to numpy.ndarray
        ``grid_line``, ``grid_col``: ``(N,)`` int64.

    Raises
    ------
    StructureError
        The structure has no source text or no spans.
    SpecError
        ``arg`` is given.

    Examples
    --------
    >>> import structpos
    >>> doc = structpos.parse("One two.\\nThree.", "document")
    >>> c = grid_coords(doc)
    >>> [(str(w), int(a), int(b)) for w, a, b in zip(doc.labels, c["grid_line"], c["grid_col"]) if w == "word"]
    [('word', 0, 0), ('word', 0, 4), ('word', 1, 0)]
    """
    if arg:
        raise SpecError(f"coordinate family 'grid' takes no argument, got {arg!r}")
    if structure.source is None or structure.start is None:
        raise StructureError("grid coordinates need a source text and character spans", name=structure.name)
    line, col = line_col(structure.source, np.minimum(structure.start, len(structure.source)))
    return {"grid_line": line, "grid_col": col}
