"""Dependency heads → preorder tree, with the checks CoNLL-U and spaCy parsers share.

``heads[w]`` is the 0-based index of word ``w``'s head, ``-1`` for a root. The tree is laid
out in preorder with each node's dependents in word order (``order[k]`` = the word at
preorder position ``k``; ``parent[k]`` = preorder position of its head). Words that the
walk from the roots never reaches lie on a head cycle; heads outside ``[-1, n)`` are out of
range. Both raise :class:`StructureError` naming the input and the offending word.
:func:`dependency_structure` then lays the words' labels, spans and attributes out in that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

import numpy as np

from ..structure import Structure, StructureError, raise_at_first


def heads_to_preorder(
    heads,
    *,
    name: str,
    word_name: Callable[[int], str] = lambda w: f"word {w}",
    single_root: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """``(order, parent)`` of the preorder layout of the dependency tree (or forest) ``heads``."""
    heads = np.asarray(heads, dtype=np.int64)
    n = len(heads)
    raise_at_first(
        (heads < -1) | (heads >= n),
        lambda w: (
            f"the head of {word_name(w)}, {word_name(int(heads[w]))}, is out of range (the sentence has {n} words)"
        ),
        name=name,
        where=word_name,
    )
    roots = np.flatnonzero(heads == -1)
    if single_root and roots.size != 1:
        if roots.size == 0:
            raise StructureError("no root word (every word has a head: a cycle)", name=name)
        raise StructureError(
            f"{roots.size} root words ({', '.join(word_name(int(r)) for r in roots[:5])}); expected exactly one",
            name=name,
            position=word_name(int(roots[1])),
        )
    # dependents of each word in word order: CSR over words sorted by (head, index)
    by_head = np.argsort(heads, kind="stable")
    counts = np.bincount(heads + 1, minlength=n + 1)  # slot 0 holds the roots
    offsets = np.concatenate([[0], np.cumsum(counts)])
    order: list[int] = []
    stack = roots[::-1].tolist()
    while stack:
        w = stack.pop()
        order.append(w)
        stack.extend(by_head[offsets[w + 1] : offsets[w + 2]][::-1].tolist())
    if len(order) != n:
        unreached = np.ones(n, dtype=bool)
        unreached[order] = False
        raise_at_first(
            unreached,
            lambda w: f"{word_name(w)} is not connected to a root (its heads form a cycle)",
            name=name,
            where=word_name,
        )
    order_arr = np.asarray(order, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    pos[order_arr] = np.arange(n)
    h = heads[order_arr]
    parent = np.where(h >= 0, pos[np.maximum(h, 0)], -1)
    return order_arr, parent


def dependency_structure(
    order: np.ndarray,
    parent: np.ndarray,
    labels: Sequence[str],
    start: np.ndarray,
    end: np.ndarray,
    attrs: Mapping[str, np.ndarray | Sequence[Any]],
    **fields: Any,
) -> Structure:
    """The dependency tree as a ``kind="tree"`` :class:`Structure` in the preorder ``order``.

    ``labels``, ``start``, ``end`` and every attribute are given per word in word order and are
    reordered here; an attribute given as a list becomes a 1-D object array. A word's span is the
    word alone (spans do not nest). ``fields`` (``source``, ``name``, ``format``, ...) go to
    :class:`Structure`.
    """

    def in_order(values: np.ndarray | Sequence[Any]) -> np.ndarray:
        if isinstance(values, np.ndarray):
            return values[order]
        out = np.empty(len(order), dtype=object)
        out[:] = [values[w] for w in order]
        return out

    return Structure(
        kind="tree",
        labels=[labels[w] for w in order],
        start=start[order],
        end=end[order],
        parent=parent,
        attrs={key: in_order(values) for key, values in attrs.items()},
        nested_spans=False,
        **fields,
    )
