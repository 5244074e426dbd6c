"""2D-TPE: traversal ranks and token positions against brute-force flattenings, order logits against
1-D RoPE on each flattening, and one-hot mixing against the single-order module."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import structpos
from structpos import SpecError
from structpos.align import token_coords
from structpos.coords import compute
from structpos.coords.traversal import TRAVERSAL_ORDERS, cell_ranks, traversal_positions
from structpos.encoders.registry import build
from structpos.encoders.rope import StructuralRoPE
from structpos.encoders.tpe import TraversalOrderAttention
from structpos.exceptions import ShapeError

CSV = "name,city,age\nann lee,new york,31\nbob,paris,4\ncy,rome st,77\n"
KEYS = {
    "row": lambda r, c: (r, c),
    "column": lambda r, c: (c, r),
    "snake": lambda r, c: (r, c if r % 2 == 0 else -c),
    "antidiagonal": lambda r, c: (r + c, r),
}


def test_cell_ranks_equal_sorting_by_each_key():
    rng = np.random.default_rng(0)
    slots = [(r, c) for r in range(4) for c in range(5)]
    rng.shuffle(slots)
    row = np.array([r for r, _ in slots] + [-1])
    col = np.array([c for _, c in slots] + [-1])
    ranks = cell_ranks(row, col)
    for o, name in enumerate(TRAVERSAL_ORDERS):
        order = sorted(range(len(slots)), key=lambda i: KEYS[name](*slots[i]))
        assert [order.index(i) for i in range(len(slots))] == ranks[:-1, o].tolist(), name
    assert ranks[-1].tolist() == [-1] * 4


def cell_tokens(pattern):
    t = structpos.parse(CSV, "table")
    offsets = [m.span() for m in re.finditer(pattern, CSV)]
    c = token_coords(t, offsets, "tpe,table")
    return c, offsets


def brute_positions(row, col, name):
    """The index of each token in the flattening that lists cells by `name`'s key, tokens of a cell in text order;
    a token in no cell goes with the cell token before it."""
    T = len(row)
    owner = []
    for t in range(T):
        j = t
        while j >= 0 and row[j] < 0:
            j -= 1
        owner.append(j)
    flat = sorted(range(T), key=lambda t: ((-1,) if owner[t] < 0 else KEYS[name](row[owner[t]], col[owner[t]]), t))
    pos = [0] * T
    for i, t in enumerate(flat):
        pos[t] = i
    return pos


@pytest.mark.parametrize("pattern", [r"\w+", r"\w+|[^\w\s]|\n"])
def test_token_positions_equal_the_brute_force_flattenings(pattern):
    c, offsets = cell_tokens(pattern)
    pos = traversal_positions(c["tpe_rank"])
    assert pos[:, 0].tolist() == list(range(len(offsets)))  # the CSV text is the row-major flattening
    for o, name in enumerate(TRAVERSAL_ORDERS):
        assert pos[:, o].tolist() == brute_positions(c["row"].tolist(), c["col"].tolist(), name), name


def qk(T, H=2, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1, T, H, D, generator=g, dtype=torch.float64) for _ in range(3))


@pytest.mark.parametrize("o", range(4))
def test_order_logits_equal_1d_rope_on_that_flattening(o):
    c, offsets = cell_tokens(r"\w+|[^\w\s]|\n")
    pos = torch.as_tensor(traversal_positions(c["tpe_rank"]))[None]
    T, D = len(offsets), 8
    q, k, _ = qk(T)
    att = TraversalOrderAttention(head_dim=D, num_heads=2, num_orders=4)
    got = att.order_logits(q, k, pos)[0, o]  # (H, L, L)
    # the flattening: token perm[i] is at position i; plain 1-D RoPE on the permuted sequence
    perm = torch.argsort(pos[0, :, o])
    qp, kp = StructuralRoPE(D, 1)(q[:, perm], k[:, perm], torch.arange(T)[None, :, None])
    flat = torch.einsum("blhd,bmhd->bhlm", qp, kp)[0] / D**0.5
    assert torch.allclose(got[:, perm][:, :, perm], flat, atol=1e-6, rtol=0)
    if o == 0:  # row-major: the permutation is the identity
        assert torch.equal(perm, torch.arange(T))


def test_one_hot_mixing_reproduces_the_single_order_module():
    torch.manual_seed(0)
    c, offsets = cell_tokens(r"\w+")
    pos = torch.as_tensor(traversal_positions(c["tpe_rank"]))[None]
    T, H, D = len(offsets), 3, 8
    q, k, v = qk(T, H, D, seed=1)
    att = TraversalOrderAttention(head_dim=D, num_heads=H, num_orders=4).double()
    with torch.no_grad():
        att.gate_weight.normal_()
    single = TraversalOrderAttention(head_dim=D, num_heads=H, num_orders=1).double()
    choice = torch.randint(0, 4, (1, T, H))
    one_hot = torch.nn.functional.one_hot(choice, 4).double()
    for causal in (False, True):
        got = att(q, k, v, pos, order_weights=one_hot, is_causal=causal)
        per_order = [single(q, k, v, pos[..., o : o + 1], is_causal=causal) for o in range(4)]
        want = torch.stack(per_order, -1).gather(-1, choice[..., None, None].expand(1, T, H, D, 1))[..., 0]
        assert torch.allclose(got, want, atol=1e-10)
        # and each single-order output is plain softmax attention on that order's RoPE scores
        s = att.order_logits(q, k, pos)[0, 2]
        if causal:
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        ref = torch.einsum("hlm,mhd->lhd", torch.softmax(s, -1), v[0])
        assert torch.allclose(per_order[2][0], ref, atol=1e-10)


def test_gate_weights_are_a_softmax_and_learn():
    torch.manual_seed(2)
    att = TraversalOrderAttention(head_dim=8, num_heads=2, num_orders=4)
    q, k, v = (torch.randn(1, 5, 2, 8) for _ in range(3))
    pos = torch.stack([torch.randperm(5) for _ in range(4)], -1)[None]
    w = att.order_weights(q)
    assert torch.allclose(w.sum(-1), torch.ones(1, 5, 2))
    att(q, k, v, pos).square().sum().backward()
    assert att.gate_weight.grad is not None and att.gate_weight.grad.abs().sum() > 0
    mask = torch.ones(1, 5, 5, dtype=torch.bool)
    mask[..., 4] = False
    y = att(q, k, v, pos, mask=mask)
    v2 = v.clone()
    v2[:, 4] = 100.0
    assert torch.allclose(att(q, k, v2, pos, mask=mask), y)  # a masked key changes nothing


def test_errors_and_registry():
    assert isinstance(build("tpe_attention", head_dim=8, num_heads=2), TraversalOrderAttention)
    att = TraversalOrderAttention(head_dim=8, num_heads=2, num_orders=2)
    q = torch.randn(1, 3, 2, 8)
    with pytest.raises(ShapeError, match="positions"):
        att(q, q, q, torch.zeros(1, 3, 4, dtype=torch.int64))
    with pytest.raises(ShapeError, match="order_weights"):
        att(q, q, q, torch.zeros(1, 3, 2, dtype=torch.int64), order_weights=torch.ones(1, 3, 2, 3))
    with pytest.raises(SpecError):
        TraversalOrderAttention(head_dim=8, num_heads=0)
    with pytest.raises(ShapeError):
        traversal_positions(np.array([[0.5]]))
    with pytest.raises(ValueError):
        compute(structpos.parse("[1]", "json"), "tpe")
