"""Hierarchical document coordinates: paragraph / sentence / token ids (+ sections).

hRoPE-style ids read off any document tree (:func:`structpos.parsers.document.parse_document`,
:func:`structpos.parsers.markdown.parse_markdown`) from its labels and parent array alone:

* ``paragraph[i]`` — document-wide 0-based ordinal (in preorder) of the *block* containing
  node ``i`` (the nearest ancestor-or-self labelled ``paragraph``, ``heading`` or
  ``code_block``); ``-1`` outside blocks (the document, section nodes);
* ``sentence[i]`` — ordinal of the enclosing ``sentence`` node among the sentences of its
  block; ``-1`` outside sentences;
* ``token[i]`` — for token nodes (``word``/``punct``), ordinal among the tokens of its
  sentence (of its block if it has no sentence); ``-1`` for every other node.

When the tree has ``section`` nodes (markdown):

* ``section[i]`` — document-wide ordinal of the innermost section containing ``i`` (``-1``);
* ``section_depth[i]`` — number of sections containing ``i`` (nesting depth, not heading level);
* ``section_path[i]`` — ``(D,)`` row (``D`` = deepest nesting) of the sibling ordinals of the
  enclosing sections from the outermost in (``2.1.3``-style numbering, 0-based), ``-1``-padded.

Everything is vectorized: nearest-labelled-ancestor by pointer jumping over the preorder
parent array (``O(N log depth)``), ordinals within groups by one stable sort.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import SpecError
from ..structure import Structure, StructureError

__all__ = ["hierarchy_coords", "hierarchy_ids", "BLOCK_LABELS", "TOKEN_LABELS"]

BLOCK_LABELS = ("paragraph", "heading", "code_block")
SENTENCE_LABEL = "sentence"
TOKEN_LABELS = ("word", "punct")
SECTION_LABEL = "section"


def nearest_marked(parent: np.ndarray, mask: np.ndarray, proper: bool = False) -> np.ndarray:
    """Index of the nearest ancestor (-or-self unless ``proper``) of each node with ``mask``, else -1.

    ``jump[i]`` starts at ``i`` for marked nodes (a fixed point) and ``parent[i]`` otherwise;
    ``jump <- jump[jump]`` then climbs past unmarked ancestors, doubling the distance per round.

    Parameters
    ----------
    parent : numpy.ndarray
        ``(N,)`` preorder parent array.
    mask : numpy.ndarray
        ``(N,)`` bool: the marked nodes.
    proper : bool
        Skip the node itself (strict ancestors only).

    Returns
    -------
    numpy.ndarray
        ``(N,)`` int64.

    Examples
    --------
    >>> import numpy as np
    >>> nearest_marked(np.array([-1, 0, 1, 2]), np.array([False, True, False, False])).tolist()
    [-1, 1, 1, 1]
    """
    n = parent.size
    idx = np.arange(n)
    if proper:
        start = parent.copy()
        out = np.full(n, -1, dtype=np.int64)
        has = start >= 0
        out[has] = nearest_marked(parent, mask)[start[has]]
        return out
    jump = np.where(mask, idx, parent)
    while True:
        live = np.flatnonzero((jump >= 0) & ~mask[np.maximum(jump, 0)])
        if not live.size:
            return jump
        jump[live] = jump[jump[live]]


def rank_within(group: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """For marked nodes, their 0-based ordinal (in preorder) among marked nodes of the same group.

    Parameters
    ----------
    group : numpy.ndarray
        ``(N,)`` group id per node.
    mask : numpy.ndarray
        ``(N,)`` bool: the nodes to rank.

    Returns
    -------
    numpy.ndarray
        ``(N,)`` int64, ``-1`` for unmarked nodes.

    Examples
    --------
    >>> import numpy as np
    >>> rank_within(np.array([0, 0, 1, 0, 1]), np.array([True, True, True, False, True])).tolist()
    [0, 1, 0, -1, 1]
    """
    out = np.full(group.size, -1, dtype=np.int64)
    nodes = np.flatnonzero(mask)
    if not nodes.size:
        return out
    keys = group[nodes]
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    first = np.ones(sk.size, dtype=bool)
    first[1:] = sk[1:] != sk[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(sk.size), 0))
    out[nodes[order]] = np.arange(sk.size) - group_start
    return out


def hierarchy_ids(labels, parent) -> dict[str, np.ndarray]:
    """The id arrays described in the module docstring, from labels and a preorder parent array.

    Parameters
    ----------
    labels : array_like of str
        Node labels (``paragraph``, ``heading``, ``code_block``, ``sentence``, ``word``, ``punct``, ``section``).
    parent : array_like of int
        ``(N,)`` preorder parent array.

    Returns
    -------
    dict of str to numpy.ndarray
        ``paragraph``, ``sentence``, ``token`` (and ``section``, ``section_depth``, ``section_path``
        when there are sections).

    Examples
    --------
    >>> labels = ["document", "paragraph", "sentence", "word", "punct", "paragraph", "sentence", "word"]
    >>> parent = [-1, 0, 1, 2, 2, 0, 5, 6]
    >>> ids = hierarchy_ids(labels, parent)
    >>> ids["paragraph"].tolist(), ids["token"].tolist()
    ([-1, 0, 0, 0, 0, 1, 1, 1], [-1, -1, -1, 0, 1, -1, -1, 0])
    """
    labels = np.asarray(labels, dtype=object)
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    is_block = np.isin(labels, BLOCK_LABELS)
    is_sent = labels == SENTENCE_LABEL
    is_tok = np.isin(labels, TOKEN_LABELS)
    block = nearest_marked(parent, is_block)
    sent = nearest_marked(parent, is_sent)
    block_ord = rank_within(np.zeros(n, dtype=np.int64), is_block)
    sent_ord = rank_within(block, is_sent)
    tok_group = np.where(sent >= 0, sent, block)
    out = {
        "paragraph": np.where(block >= 0, block_ord[np.maximum(block, 0)], -1),
        "sentence": np.where(sent >= 0, sent_ord[np.maximum(sent, 0)], -1),
        "token": rank_within(tok_group, is_tok),
    }
    is_sec = labels == SECTION_LABEL
    if is_sec.any():
        sec = nearest_marked(parent, is_sec)
        sec_parent = nearest_marked(parent, is_sec, proper=True)
        sec_ord = rank_within(np.zeros(n, dtype=np.int64), is_sec)
        sib_ord = rank_within(sec_parent, is_sec)
        sec_nodes = np.flatnonzero(is_sec)
        depth = np.zeros(n, dtype=np.int64)
        for s in sec_nodes.tolist():  # sections are few; parents come first in preorder
            depth[s] = 1 + (depth[sec_parent[s]] if sec_parent[s] >= 0 else 0)
        dmax = int(depth.max())
        paths = np.full((n, dmax), -1, dtype=np.int64)
        for s in sec_nodes.tolist():
            if sec_parent[s] >= 0:
                paths[s] = paths[sec_parent[s]]
            paths[s, depth[s] - 1] = sib_ord[s]
        inside = sec >= 0
        out["section"] = np.where(inside, sec_ord[np.maximum(sec, 0)], -1)
        out["section_depth"] = np.where(inside, depth[np.maximum(sec, 0)], 0)
        out["section_path"] = np.where(inside[:, None], paths[np.maximum(sec, 0)], -1)
    return out


def hierarchy_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``"hier"``: :func:`hierarchy_ids` of a document Structure.

    Parameters
    ----------
    structure : Structure
        A document tree (plain text or Markdown parser).
    arg : str, optional
        Must be empty.

    Returns
    -------
    dict of str to numpy.ndarray

    Raises
    ------
    StructureError
        If the structure has no parent array.
    SpecError
        If ``arg`` is given.

    Examples
    --------
    >>> import structpos
    >>> doc = structpos.parse("One. Two.\\n\\nThree.", "document")
    >>> int(hierarchy_coords(doc)["sentence"].max()), int(hierarchy_coords(doc)["paragraph"].max())
    (1, 1)
    """
    if structure.parent is None:
        raise StructureError("hierarchy coordinates need a document tree (no parent array)", name=structure.name)
    if arg:
        raise SpecError(f"coordinate family 'hier' takes no argument, got {arg!r}")
    return hierarchy_ids(structure.labels, structure.parent)
