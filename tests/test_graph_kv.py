"""Graph-KV: the mask equals one built by brute force from the segment graph, the FlexAttention
block mask's dense form equals it, and positions follow the rule (sources share a range, targets
after it, the question after everything)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from structpos import Structure
from structpos.coords import compute, parse_spec
from structpos.coords.graph_kv import graph_kv_layout, graph_kv_reads
from structpos.exceptions import ShapeError
from structpos.integrations.flex import dense_mask, flex, graph_kv_block_mask, graph_kv_mask_mod


def random_layout(seed: int, C: int = 5):
    """Prompt, C segments of random lengths (tokens of a segment contiguous), question; random edges."""
    rng = np.random.default_rng(seed)
    seg = [-1] * int(rng.integers(0, 3))
    for c in rng.permutation(C):
        seg += [int(c)] * int(rng.integers(1, 6))
    seg += [-1] * int(rng.integers(0, 4))
    edges = [(int(s), int(t)) for s in range(C) for t in range(C) if s != t and rng.random() < 0.3]
    return np.array(seg), np.array(edges, dtype=np.int64).T.reshape(2, -1), C


def brute_mask(seg, edges, causal: bool) -> torch.Tensor:
    E = {(int(s), int(t)) for s, t in edges.T}
    L = len(seg)
    ref = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        for j in range(L):
            a, b = int(seg[i]), int(seg[j])
            ok = a < 0 or b < 0 or a == b or (b, a) in E
            ref[i, j] = ok and (j <= i or not causal)
    return ref


def block_mask_dense(bm, L: int) -> torch.Tensor:
    """Token-level form of a BlockMask from its tables: full tiles True, partial tiles by mask_mod."""
    Bs = bm.BLOCK_SIZE[0]
    out = torch.zeros(L, L, dtype=torch.bool)
    idx = torch.arange(L)
    zero = torch.tensor(0)
    partial_vals = bm.mask_mod(zero, zero, idx[:, None], idx[None, :])
    nq = bm.kv_num_blocks.shape[-1]
    for qb in range(nq):
        rows = slice(qb * Bs, min(L, (qb + 1) * Bs))
        for n_blocks, table, full in (
            (bm.kv_num_blocks, bm.kv_indices, False),
            (bm.full_kv_num_blocks, bm.full_kv_indices, True),
        ):
            for kb in table[0, 0, qb, : int(n_blocks[0, 0, qb])].tolist():
                cols = slice(kb * Bs, min(L, (kb + 1) * Bs))
                out[rows, cols] = True if full else partial_vals[rows, cols]
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("causal", [False, True])
def test_mask_equals_brute_force_and_block_mask(seed, causal):
    seg, edges, C = random_layout(seed)
    L = len(seg)
    ref = brute_mask(seg, edges, causal)
    bm = graph_kv_block_mask(torch.from_numpy(seg), edges, C, causal=causal, block=4)
    assert torch.equal(dense_mask(bm.mask_mod, 1, 1, L, L)[0, 0], ref)
    assert torch.equal(block_mask_dense(bm, L), ref)
    if not causal:
        mm = graph_kv_mask_mod(torch.from_numpy(seg)[None], torch.from_numpy(graph_kv_reads(edges, C)))
        assert torch.equal(dense_mask(mm, 1, 1, L, L)[0, 0], ref)
    # attention through FlexAttention with the block mask = SDPA with the brute-force mask
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, L, 8, generator=g) for _ in range(3))
    out = flex(q, k, v, block_mask=bm)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=ref), rtol=0, atol=1e-5)


def reference_positions(seg, edges, C):
    """The allocation rule, token by token."""
    lengths = [int((seg == c).sum()) for c in range(C)]
    has_source = [any(int(t) == c and int(s) != c for s, t in edges.T) for c in range(C)]
    P = 0
    while P < len(seg) and seg[P] < 0:
        P += 1
    R = max([lengths[c] for c in range(C) if not has_source[c]], default=0)
    T = max([lengths[c] for c in range(C) if has_source[c]], default=0)
    seen = [0] * C
    pos, after = [], 0
    for i, c in enumerate(seg):
        if c < 0:
            if i < P:
                pos.append(i)
            else:
                pos.append(P + R + T + after)
                after += 1
        else:
            pos.append(P + (R if has_source[c] else 0) + seen[c])
            seen[c] += 1
    return pos


@pytest.mark.parametrize("seed", range(8))
def test_positions_follow_the_rule(seed):
    seg, edges, C = random_layout(seed)
    lay = graph_kv_layout(seg, edges, C)
    assert lay.position.tolist() == reference_positions(seg, edges, C)
    reads = graph_kv_reads(edges, C)
    # every token a target reads in a source-only segment sits at an earlier position than the target's tokens
    src_only = ~(reads & ~np.eye(C, dtype=bool)).any(axis=1)
    for i in range(len(seg)):
        for j in range(len(seg)):
            a, b = seg[i], seg[j]
            if a >= 0 and b >= 0 and a != b and reads[a, b] and src_only[b]:
                assert lay.position[j] < lay.position[i]
    # all source-only segments start at the same position
    starts = {int(lay.position[np.flatnonzero(seg == c)[0]]) for c in range(C) if src_only[c] and (seg == c).any()}
    assert len(starts) <= 1


def test_rag_example_and_family():
    # three passages answer a question: the question-side segment 3 cites all of them
    seg = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, -1, -1])
    edges = np.array([[0, 1, 2], [3, 3, 3]])
    lay = graph_kv_layout(seg, edges)
    assert lay.position.tolist() == [0, 1, 2, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7]
    assert lay.target.tolist() == [False] * 9 + [True, True, False, False]
    s = Structure("graph", ["p0", "p1", "p2", "q"], edge_index=edges, directed=True)
    assert parse_spec("graphkv") == [("graphkv", None)]
    c = compute(s, "graphkv")
    assert c["gkv_target"].tolist() == [False, False, False, True]
    np.testing.assert_array_equal(c["gkv_reads"], graph_kv_reads(edges, 4))
    with pytest.raises(ShapeError, match="segment"):
        graph_kv_layout(np.array([0, 5]), edges, 4)
    with pytest.raises(ShapeError, match="segment"):
        graph_kv_layout(np.array([[0, 1]]), edges, 4)
