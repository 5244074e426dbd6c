"""The compiled tree coordinates (structpos._native_tree) equal the pure path's, errors included."""

from __future__ import annotations

import numpy as np
import pytest

from structpos.coords.tree import tree_coords
from structpos.exceptions import StructureError
from structpos.native import native_module, pure_python
from structpos.structure import Structure

pytestmark = pytest.mark.skipif(native_module("tree") is None, reason="structpos._native_tree not built")


def _tree(parent) -> Structure:
    n = len(parent)
    return Structure(kind="tree", labels=["x"] * n, parent=np.asarray(parent, dtype=np.int64))


def _random_preorder(rng, n: int, roots: float) -> list[int]:
    """A random forest in preorder: each node's parent is an open ancestor of the previous node (or none)."""
    parent, stack = [], []
    for i in range(n):
        if stack and rng.random() > roots:
            del stack[rng.integers(1, len(stack) + 1) :]  # close some subtrees, keep at least one ancestor
            parent.append(stack[-1])
        else:
            stack.clear()
            parent.append(-1)
        stack.append(i)
    return parent


def _same(parent, arg) -> None:
    s = _tree(parent)
    got = tree_coords(s, arg)
    with pure_python():
        want = tree_coords(s, arg)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k


@pytest.mark.parametrize("arg", [None, "1x1", "2x3", "4x2", "64x20000"])
def test_native_tree_coords_equal_pure_on_random_forests(arg):
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 5, 40, 300):
        for roots in (0.0, 0.05, 0.5):
            _same(_random_preorder(rng, n, roots), arg)


def test_native_tree_coords_on_a_deep_chain_and_a_wide_star():
    _same([-1] + list(range(0, 199)), "8x4")  # depth 199 > 8: overflow rows copy the row at the cap
    _same([-1] + [0] * 300, "3x16")  # child indices past the width are clipped and flagged


@pytest.mark.parametrize("parent", [[-1, 2, 0], [-1, 0, 1, 0, 2], [0], [-2, 0], [-1, -1, 0]])
def test_a_non_preorder_raises_the_pure_error(parent):
    s = _tree(parent)
    with pytest.raises(StructureError) as got:
        tree_coords(s)
    with pure_python(), pytest.raises(StructureError) as want:
        tree_coords(s)
    assert str(got.value) == str(want.value)


def test_bad_buffers_are_refused():
    fill = native_module("tree").fill
    p = np.array([-1, 0], dtype=np.int64)
    out = [np.empty(2, dtype=np.int64) for _ in range(4)]
    with pytest.raises(ValueError):
        fill(p, *out, np.empty((2, 3), dtype=np.int16), np.empty(2, dtype=np.uint8), 4, 8)  # path too small
    with pytest.raises(ValueError):
        fill(p, *out[:3], np.empty(1, dtype=np.int64), np.empty((2, 4), dtype=np.int16), np.empty(2, np.uint8), 4, 8)
