"""TreePositionEmbedding: clipping by hand, equality with manual lookups, gradients, real code alignment."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import structpos
from structpos import ShapeError, SpecError
from structpos.align import align, token_coords
from structpos.coords.tree import depth as tree_depth
from structpos.encoders.registry import build
from structpos.encoders.tree_embedding import TreePositionEmbedding, clip_tree_index


def test_clipping_matches_a_hand_computation():
    # max_depth=3: rows 0,1,2,3 then padding 4; max_sibling=2: rows 0,1,2, padding 3
    depth = torch.tensor([0, 1, 2, 3, 4, 10, -1])
    sibling = torch.tensor([5, 0, 1, 2, 3, -1, 1])
    assert clip_tree_index(depth, 3).tolist() == [0, 1, 2, 3, 3, 3, 4]
    assert clip_tree_index(sibling, 2).tolist() == [2, 0, 1, 2, 2, 3, 1]


def test_equals_manual_embedding_lookup_sums():
    torch.manual_seed(1)
    emb = TreePositionEmbedding(dim=5, max_depth=3, max_sibling=2, init_std=1.0)
    x = torch.randn(2, 4, 5)
    depth = torch.tensor([[0, 7, -1, 2], [3, 1, 1, -1]])
    sibling = torch.tensor([[1, 0, -1, 9], [2, 2, -1, 0]])
    out = emb(x, depth, sibling)
    Wd, Ws = emb.depth.weight.detach(), emb.sibling.weight.detach()
    for b in range(2):
        for t in range(4):
            d, s = int(depth[b, t]), int(sibling[b, t])
            pd = Wd[min(d, 3)] if d >= 0 else torch.zeros(5)
            ps = Ws[min(s, 2)] if s >= 0 else torch.zeros(5)
            assert torch.equal(out[b, t].detach(), x[b, t] + (pd + ps)), (b, t)


def test_gradient_flows_to_used_rows_only_and_padding_stays_zero():
    torch.manual_seed(0)
    emb = TreePositionEmbedding(dim=4, max_depth=3, max_sibling=3)
    x = torch.randn(1, 3, 4, requires_grad=True)
    out = emb(x, torch.tensor([[0, 5, -1]]), torch.tensor([[1, -1, -1]]))
    (out**2).sum().backward()
    gd, gs = emb.depth.weight.grad, emb.sibling.weight.grad
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert set(torch.nonzero(gd.abs().sum(1)).flatten().tolist()) == {0, 3}  # 5 clipped to row 3
    assert set(torch.nonzero(gs.abs().sum(1)).flatten().tolist()) == {1}
    assert gd[4].abs().sum() == 0 and gs[4].abs().sum() == 0  # padding rows get no gradient
    assert emb.depth.weight[4].abs().sum() == 0


def test_fed_by_tree_coordinates_aligned_to_tokens():
    pytest.importorskip("tree_sitter_python")
    code = "def f(x):\n    return x + 1\n"
    s = structpos.parse(code, "code", language="python")
    offsets = np.array([(0, 0), (0, 3), (4, 5), (5, 6), (6, 7), (14, 20), (21, 22), (23, 24), (25, 26)])
    c = token_coords(s, offsets, "tree")
    emb = build("tree_embedding", dim=8, max_depth=4, max_sibling=4)
    depth, sibling = torch.as_tensor(c["depth"]), torch.as_tensor(c["sibling"])
    out = emb(torch.zeros(len(offsets), 8), depth, sibling)
    assert depth[0] == -1 and torch.equal(out[0], torch.zeros(8))  # the special token
    d = tree_depth(s.parent)
    node = align(s, offsets).node
    assert depth[1:].tolist() == d[node[1:]].tolist()


def test_bad_inputs_raise_named_errors():
    emb = TreePositionEmbedding(dim=4, max_depth=2, max_sibling=2)
    with pytest.raises(ShapeError, match="below -1"):
        emb(torch.zeros(2, 4), torch.tensor([0, -2]), torch.tensor([0, 0]))
    with pytest.raises(ShapeError, match="integers"):
        emb(torch.zeros(2, 4), torch.tensor([0.0, 1.0]), torch.tensor([0, 0]))
    with pytest.raises(ShapeError, match="one shape"):
        emb(torch.zeros(2, 4), torch.tensor([0, 1]), torch.tensor([0]))
    with pytest.raises(ShapeError, match="x must have shape"):
        emb(torch.zeros(2, 5), torch.tensor([0, 1]), torch.tensor([0, 0]))
    with pytest.raises(SpecError, match="max_depth"):
        TreePositionEmbedding(dim=4, max_depth=0)


@pytest.mark.parametrize("init_std", [1e31, 1e300, float("inf"), -0.1])
def test_an_init_std_that_would_overflow_the_float32_tables_is_refused(init_std):
    """Fuzz seed 7 built one with ``init_std = 1e300``: every row then reads inf."""
    with pytest.raises(SpecError, match="init_std"):
        TreePositionEmbedding(dim=4, init_std=init_std)


def test_the_largest_accepted_init_std_keeps_the_tables_finite():
    from structpos.encoders.tree_embedding import MAX_INIT_STD

    torch.manual_seed(0)
    emb = TreePositionEmbedding(dim=4, max_depth=3, max_sibling=3, init_std=MAX_INIT_STD)
    assert torch.isfinite(emb.depth.weight).all() and torch.isfinite(emb.sibling.weight).all()
