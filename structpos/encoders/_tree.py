"""Input coercion for the tree encoders: a :class:`Structure` or a parent array → parent array.

The tree arithmetic itself (depth, sibling index, root paths, LCA, tree distance) lives in
:mod:`structpos.coords.tree`; this module only accepts the encoders' looser input.
"""

from __future__ import annotations

import numpy as np

from ..coords.tree import check_parent
from ..structure import Structure, StructureError

__all__ = ["as_parent"]


def as_parent(tree) -> tuple[np.ndarray, str]:
    """Validated int64 parent array (``-1 <= parent[i] < i``) and a name for messages.

    ``tree`` is a :class:`Structure` (its ``parent``; a structure without one raises
    :class:`StructureError` "not a tree") or anything array-like.
    """
    name = "<parent array>"
    if isinstance(tree, Structure):
        if tree.parent is None:
            raise StructureError("not a tree (no parent array)", name=tree.name)
        name, tree = tree.name, tree.parent
    return check_parent(tree, name=name), name
