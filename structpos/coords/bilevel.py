r"""Bilevel positions (BiPE): a segment index and a position inside the segment.

BiPE splits a token's position ``n`` into the index ``s(n)`` of the *segment* it lies in
(a sentence, a line, a table cell, a code statement) and its offset inside that segment:

.. math::

    s(n) = \text{ordinal of } n\text{'s segment}, \qquad
    o(n) = \#\{\, m < n : s(m) = s(n) \,\}.

The offset gets an absolute encoding (learned or sinusoidal, added to the token embedding) and
the segment index a relative one (RoPE); :class:`structpos.encoders.bipe.BiPE` does both.
Offsets are bounded by the longest segment, however long the text, which is BiPE's length
extrapolation argument.

Segment units (``bipe:UNIT``), per node ``i`` of a Structure:

* ``sentence`` — the nearest ``sentence`` ancestor-or-self (document and Markdown trees);
* ``line`` — the line of the node's first character (:mod:`structpos.coords.grid`); ``s`` is the
  line number itself;
* ``cell`` — the nearest table cell (a node with ``row >= 0``) ancestor-or-self;
* ``statement`` — the code statement ``g(i)`` of :mod:`structpos.coords.code_levels` (a unit's
  header is a segment of its own);
* ``auto`` (default) — ``statement`` for code, ``cell`` for tables, ``sentence`` for trees with
  sentences, else ``line``.

For the tree-based units the segment ordinal counts segment nodes in preorder over the whole
input, the root included (``0``: what lies outside every segment). ``bipe_offset`` counts the
leaves of the same segment before the node (its ordinal, for a leaf). Several tokenizer tokens
in one leaf share it; :func:`segment_offsets` recounts the offset over tokenizer tokens.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np

from ..exceptions import ShapeError
from ..node_attrs import ROW
from ..structure import Structure, StructureError
from ._args import choice_arg
from .code_levels import _leaves_before_in_group, statement_groups
from .grid import line_col
from .hierarchy import nearest_marked, rank_within
from .tree import check_parent, num_children

__all__ = ["SEGMENT_UNITS", "SegmentUnit", "bipe_arg", "bipe_coords", "segment_offsets", "segment_unit_for"]

SegmentUnit = Literal["auto", "sentence", "line", "cell", "statement"]
SEGMENT_UNITS: tuple[str, ...] = get_args(SegmentUnit)

_choose_unit = choice_arg("bipe", "unit", SEGMENT_UNITS)


def bipe_arg(arg: str | None) -> dict[str, Any]:
    """The argument of spec ``bipe[:UNIT]``: ``{"unit": UNIT}``, ``"auto"`` when omitted.

    Raises :class:`~structpos.exceptions.SpecError` for a unit outside :data:`SEGMENT_UNITS`.

    Examples
    --------
    >>> bipe_arg(None), bipe_arg("line")
    ({'unit': 'auto'}, {'unit': 'line'})
    >>> bipe_arg("word")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: bipe:word: unit must be one of auto, sentence, line, cell, statement
    """
    return _choose_unit(arg)


def segment_unit_for(structure: Structure) -> str:
    """The unit ``bipe:auto`` picks for ``structure`` (see the module docstring).

    Parameters
    ----------
    structure : Structure
        Any structure.

    Returns
    -------
    str
        ``"statement"``, ``"cell"``, ``"sentence"`` or ``"line"``.

    Examples
    --------
    >>> import structpos
    >>> segment_unit_for(structpos.parse("One. Two.", "document")), segment_unit_for(structpos.parse("[1]", "json"))
    ('sentence', 'line')
    """
    if structure.code is not None and structure.parent is not None:
        return "statement"
    if structure.parent is not None and ROW in structure.attrs:
        return "cell"
    if structure.parent is not None and "sentence" in set(np.asarray(structure.labels, dtype=object).tolist()):
        return "sentence"
    return "line"


def _tree_segments(structure: Structure, unit: str) -> np.ndarray:
    """Each node's segment node (``-1`` never: roots are segments)."""
    if structure.parent is None:
        raise StructureError(f"bipe:{unit} needs a tree (no parent array)", name=structure.name)
    parent = check_parent(structure.parent, name=structure.name)
    roots = parent < 0
    if unit == "statement":
        if structure.code is None:
            raise StructureError("bipe:statement needs a code tree", name=structure.name)
        return statement_groups(structure.labels, parent, structure.code.language)[1]
    if unit == "sentence":
        marked = np.asarray(structure.labels, dtype=object) == "sentence"
    else:  # cell
        if ROW not in structure.attrs:
            raise StructureError(f"bipe:cell needs a table (no {ROW!r} attribute)", name=structure.name)
        marked = np.asarray(structure.attrs[ROW], dtype=np.int64) >= 0
    return nearest_marked(parent, marked | roots)


def bipe_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``"bipe[:UNIT]"``: ``bipe_segment`` and ``bipe_offset`` of every node.

    Parameters
    ----------
    structure : Structure
        A tree for ``sentence`` / ``cell`` / ``statement``; any structure with spans and a source for
        ``line``.
    arg : {"auto", "sentence", "line", "cell", "statement"}, optional
        The segment unit (default ``auto``).

    Returns
    -------
    dict of str to numpy.ndarray
        ``bipe_segment``, ``bipe_offset``: ``(N,)`` int64.

    Raises
    ------
    SpecError
        An unknown unit.
    StructureError
        The structure lacks what the unit reads (a tree, sentences, cells, a code tree, spans).

    Examples
    --------
    >>> import structpos
    >>> doc = structpos.parse("One two. Three.", "document")
    >>> c = bipe_coords(doc, "sentence")
    >>> [(str(lab), int(a), int(b)) for lab, a, b in zip(doc.labels, c["bipe_segment"], c["bipe_offset"])][3:]
    [('word', 1, 0), ('word', 1, 1), ('punct', 1, 2), ('sentence', 2, 0), ('word', 2, 0), ('punct', 2, 1)]
    """
    unit = bipe_arg(arg)["unit"]
    if unit == "auto":
        unit = segment_unit_for(structure)
    if unit == "line":
        if structure.source is None or structure.start is None:
            raise StructureError("bipe:line needs a source text and character spans", name=structure.name)
        segment = line_col(structure.source, np.minimum(structure.start, len(structure.source)))[0]
        leaf = np.ones(structure.num_nodes, dtype=bool)
        if structure.parent is not None:
            leaf = num_children(check_parent(structure.parent, name=structure.name)) == 0
        return {"bipe_segment": segment, "bipe_offset": _leaves_before_in_group(segment, leaf)}
    seg_node = _tree_segments(structure, unit)
    is_seg = np.zeros(structure.num_nodes, dtype=bool)
    is_seg[seg_node] = True
    ordinal = rank_within(np.zeros(structure.num_nodes, dtype=np.int64), is_seg)
    leaf = num_children(np.asarray(structure.parent, dtype=np.int64)) == 0
    return {"bipe_segment": ordinal[seg_node], "bipe_offset": _leaves_before_in_group(seg_node, leaf)}


def segment_offsets(segment) -> tuple[np.ndarray, np.ndarray]:
    """Per-tokenizer-token ``(segment, offset)``: the offset counts earlier tokens of the same segment.

    Parameters
    ----------
    segment : array_like of int
        ``(T,)`` segment ordinal per token (e.g. the aligned ``bipe_segment`` column, or a line
        number per token from :func:`structpos.coords.grid.token_grid`), ``-1`` for unaligned tokens.

    Returns
    -------
    segment, offset : numpy.ndarray
        ``(T,)`` int64 each; ``-1`` for unaligned tokens.

    Raises
    ------
    ShapeError
        ``segment`` is not 1-D.

    Examples
    --------
    >>> seg, off = segment_offsets([-1, 0, 0, 0, 1, 1, 2])
    >>> off.tolist()
    [-1, 0, 1, 2, 0, 1, 0]
    """
    seg = np.asarray(segment, dtype=np.int64)
    if seg.ndim != 1:
        raise ShapeError(f"segment must be 1-D, given shape {seg.shape}")
    aligned = seg >= 0
    return np.where(aligned, seg, -1), rank_within(seg, aligned)
