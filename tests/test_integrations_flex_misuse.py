"""Misuse of the FlexAttention integration: bad inputs raise structpos's own errors, at construction
where the information is there, never a raw IndexError/ValueError/ZeroDivisionError or a silent
truncation; mods run on inputs larger than they were built for are refused by flex()/block_mask()."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import and_masks, or_masks

from structpos.encoders import FIRE, tree_distance
from structpos.exceptions import InputError, ParseError, ShapeError, SpecError
from structpos.integrations.flex import (
    block_mask,
    causal_mask_mod,
    dense_mask,
    distance_score_mod,
    document_mask_mod,
    fire_score_mod,
    flex,
    full_block_mask,
    graph_kv_block_mask,
    graph_kv_mask_mod,
    hf_flex_attention,
    hierarchy_mask_mod,
    spd_distance_fn,
    spd_score_mod,
    spd_tables,
    table_mask_mod,
    token_distance_fn,
    tree_distance_fn,
    tree_distance_score_mod,
)

warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")

PARENT = [-1, 0, 1, 0]


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():  # FlexAttention has no backward on CPU
        yield


def qkv(B, H, L, D=8, seed=0, S=None):
    g = torch.Generator().manual_seed(seed)
    S = L if S is None else S
    return (
        torch.randn(B, H, L, D, generator=g),
        torch.randn(B, H, S, D, generator=g),
        torch.randn(B, H, S, D, generator=g),
    )


def grid(n):
    i = torch.arange(n)
    return i[:, None], i[None, :]


# ------------------------------------------------------------------- silent acceptance (worst first)
@pytest.mark.parametrize("cu", [torch.tensor([0, 2.5, 4]), [0, 2.5, 4], torch.tensor([0.0, 2.0, 4.0])])
def test_document_mask_refuses_float_boundaries_instead_of_truncating(cu):
    """[0, 2.5, 4] used to become [0, 2, 4] silently: a float cu_seqlens is refused (even whole-valued)."""
    with pytest.raises(ShapeError, match="integer"):
        document_mask_mod(cu)


def test_spd_tables_inf_is_unreachable_and_bad_values_are_refused():
    inf = float("inf")
    got = spd_tables([np.array([[0.0, 2.0, inf], [2.0, 0.0, inf], [inf, inf, 0.0]])])
    assert got.dtype == torch.int64
    assert got.tolist() == [[[0, 2, -1], [2, 0, -1], [-1, -1, 0]]]  # inf is "no path" = -1, never INT64_MIN
    # the bias of an inf pair is the unreachable bias, exactly as with -1
    mod = spd_score_mod(torch.zeros(1, 3, dtype=torch.long), torch.arange(3)[None], got, slopes=torch.ones(1))
    q_idx, kv_idx = grid(3)
    bias = mod(torch.zeros(3, 3), 0, torch.tensor(0), q_idx, kv_idx)
    assert bias[0, 2] == float("-inf") and bias[0, 1] == -2.0
    for bad, what in [
        ([[0.0, float("nan")], [1.0, 0.0]], "nan"),
        ([[0, -3], [1, 0]], "-3"),
        ([[0.0, -inf], [1.0, 0.0]], "-inf"),
        ([[0.0, 1.5], [1.5, 0.0]], "1.5"),
    ]:
        with pytest.raises(ShapeError, match=rf"graph 1: distance at \(0, 1\) is {what}"):
            spd_tables([np.zeros((1, 1), dtype=int), np.array(bad)])


def test_spd_distance_fn_refuses_a_table_with_other_negative_distances():
    spd = torch.tensor([[[0, -5], [-5, 0]]])
    with pytest.raises(ShapeError, match=r"spd: distance at \(0, 0, 1\) is -5"):
        spd_distance_fn(torch.zeros(1, 2, dtype=torch.long), torch.tensor([[0, 1]]), spd)


def test_graph_kv_block_mask_refuses_edges_to_missing_segments():
    seg = torch.tensor([0, 0, 1, 1])
    with pytest.raises(ParseError, match=r"edge \(0, 5\) refers to a node outside 0\.\.1"):
        graph_kv_block_mask(seg, torch.tensor([[0], [5]]))
    with pytest.raises(ParseError, match=r"shape \(2, E\)"):
        graph_kv_block_mask(seg, torch.tensor([0, 1]))  # (2,) was silently read as one edge
    with pytest.raises(ParseError, match=r"shape \(2, E\)"):
        graph_kv_block_mask(seg, torch.tensor([[0], [1], [1]]))  # was a raw numpy ValueError
    # an explicit num_segments allows segments without tokens; the mask is the same as without the edge
    bm = graph_kv_block_mask(seg, torch.tensor([[0], [5]]), num_segments=6, causal=False, block=2)
    ref = graph_kv_block_mask(seg, torch.zeros(2, 0, dtype=torch.long), causal=False, block=2)
    assert torch.equal(dense_mask(bm.mask_mod, 1, 1, 4, 4), dense_mask(ref.mask_mod, 1, 1, 4, 4))


def test_graph_kv_block_mask_num_segments_below_the_segment_ids():
    with pytest.raises(ShapeError, match="segment ids must be < num_segments = 2; given max 2"):
        graph_kv_block_mask(torch.tensor([0, 0, 1, 2]), torch.tensor([[0], [1]]), num_segments=2)


@pytest.mark.parametrize("Q,KV", [(-4, 4), (4, -4), (0, 0), (0, 4), (4.0, 4), (True, 4)])
def test_block_mask_refuses_sizes_that_are_not_positive_integers(Q, KV):
    with pytest.raises(ShapeError, match="must be an integer ≥ 1"):
        block_mask(causal_mask_mod(), 1, 1, Q, KV)


@pytest.mark.parametrize("B,H", [(0, 1), (1, 0), (-1, None), (1.0, None)])
def test_block_mask_refuses_bad_batch_and_heads(B, H):
    with pytest.raises(ShapeError, match="must be an integer ≥ 1"):
        block_mask(causal_mask_mod(), B, H, 4, 4)


@pytest.mark.parametrize("block", [0, -1, 2.5, None])
def test_block_size_must_be_a_positive_integer(block):
    with pytest.raises(SpecError, match="block must be an integer ≥ 1"):
        block_mask(causal_mask_mod(), 1, 1, 4, 4, block=block)
    with pytest.raises(SpecError, match="block must be an integer ≥ 1"):
        full_block_mask(5, 5, block=block)


def test_full_block_mask_refuses_empty_lengths():
    with pytest.raises(ShapeError, match="q_len must be an integer ≥ 1"):
        full_block_mask(0, 5)


def test_bias_params_checked_at_construction():
    node = torch.tensor([[0, 1]])
    for kw in ({}, {"slopes": torch.ones(2), "table": torch.ones(5, 2)}):
        with pytest.raises(SpecError, match="exactly one of slopes"):
            tree_distance_score_mod([-1, 0], node, **kw)
        with pytest.raises(SpecError, match="exactly one of slopes"):
            spd_score_mod(torch.zeros(1, 2, dtype=torch.long), node, spd_tables([np.eye(2, dtype=int)]), **kw)
        with pytest.raises(SpecError, match="exactly one of slopes"):
            distance_score_mod(token_distance_fn(), **kw)
    with pytest.raises(ShapeError, match=r"slopes must be a real tensor of shape \(H,\), H ≥ 1"):
        tree_distance_score_mod([-1, 0], node, slopes=torch.ones(0))
    with pytest.raises(ShapeError, match=r"table must be"):
        tree_distance_score_mod([-1, 0], node, table=torch.ones(5, 0))


@pytest.mark.parametrize("offset", [-1, 0.5, "a"])
def test_offsets_must_be_non_negative_integers(offset):
    with pytest.raises(SpecError, match="offset must be an integer ≥ 0"):
        causal_mask_mod(offset)
    with pytest.raises(SpecError, match="offset must be an integer ≥ 0"):
        token_distance_fn(offset=offset)


def test_flags_are_not_coerced_from_floats():
    row = torch.tensor([[0, 0, 1]])
    with pytest.raises(ShapeError, match="header must be a bool"):
        table_mask_mod(row, row, torch.tensor([[0.0, 0.3, 1.0]]), mode="row_column_header")
    with pytest.raises(ShapeError, match="adjacency must be a bool"):
        graph_kv_mask_mod(row, torch.rand(2, 2))
    with pytest.raises(ShapeError, match="adjacency must be a bool"):
        graph_kv_mask_mod(row, torch.tensor([[1, 2], [0, 1]]))
    # 0/1 integers are the same as bools
    adj = torch.tensor([[1, 0], [1, 1]])
    q_idx, kv_idx = grid(3)
    got = graph_kv_mask_mod(row, adj)(0, 0, q_idx, kv_idx)
    assert torch.equal(got, graph_kv_mask_mod(row, adj.bool())(0, 0, q_idx, kv_idx))


# ------------------------------------------------------------------------- raw exceptions before
@pytest.mark.parametrize(
    "cu,match",
    [
        (torch.tensor([], dtype=torch.long), "1-D with ≥ 2 entries"),
        (torch.tensor([[0, 2, 4]]), "1-D with ≥ 2 entries"),
        (torch.tensor([0, 3, 2, 5]), "non-decreasing"),
        (torch.tensor([1, 2, 4]), "start at 0"),
    ],
)
def test_document_mask_bad_cu_seqlens(cu, match):
    with pytest.raises(ShapeError, match=match):
        document_mask_mod(cu)


def test_document_mask_total_must_be_an_integer():
    with pytest.raises(ShapeError, match="total must be an integer"):
        document_mask_mod(torch.tensor([0, 2, 4]), total=4.0)


@pytest.mark.parametrize("level", [1.5, "0", True, -1, 2])
def test_hierarchy_level_must_be_an_integer_level(level):
    with pytest.raises(SpecError, match=r"level must be an integer in 0\.\.1"):
        hierarchy_mask_mod(torch.zeros(1, 4, 2, dtype=torch.long), level)


def test_graph_kv_mask_chunk_ids_checked_at_construction():
    with pytest.raises(ShapeError, match=r"chunk ids must be < C = 3 .*given max 5"):
        graph_kv_mask_mod(torch.tensor([[0, 1, 2, 5]]), torch.ones(3, 3, dtype=torch.bool))


def test_spd_ids_checked_at_construction():
    spd = spd_tables([np.array([[0, 1], [1, 0]]), np.zeros((1, 1), dtype=int)])  # graph 1 has one node
    with pytest.raises(ShapeError, match=r"graph_id ids must be < G = 2 .*given max 3"):
        spd_distance_fn(torch.tensor([[0, 3]]), torch.tensor([[0, 1]]), spd)
    with pytest.raises(ShapeError, match=r"node ids must be < N = 2 .*given max 7"):
        spd_distance_fn(torch.tensor([[0, 0]]), torch.tensor([[0, 7]]), spd)
    # node 1 of graph 1 is padding: it used to read as "unreachable from everything", silently
    with pytest.raises(ShapeError, match=r"token \(0, 1\): node 1 is not a node of graph 1"):
        spd_distance_fn(torch.tensor([[1, 1]]), torch.tensor([[0, 1]]), spd)
    # float graph ids: whole numbers are accepted as before, fractions are refused, not truncated
    q_idx, kv_idx = grid(2)
    dist = spd_distance_fn(torch.tensor([[0.0, 0.0]]), torch.tensor([[0, 1]]), spd)
    assert dist(0, q_idx, kv_idx).tolist() == [[0, 1], [1, 0]]
    with pytest.raises(ShapeError, match="graph_id must hold whole numbers"):
        spd_distance_fn(torch.tensor([[0.0, 0.5]]), torch.tensor([[0, 1]]), spd)


# ------------------------------------------------- mods used beyond the sizes they were built for
def tree_mod(B=1, H=2):
    node = torch.tensor([[0, 1, 2, 3]]).expand(B, -1)
    return tree_distance_score_mod(PARENT, node, slopes=torch.ones(H))


@pytest.mark.parametrize(
    "B,H,L,match",
    [
        (1, 4, 4, r"built for at most 2 heads \(slopes has H = 2\); flex was given 4 heads"),
        (2, 2, 4, r"built for a batch of at most 1 \(node given to tree_distance_fn is \(1, 4\)\)"),
        (1, 2, 6, r"built for at most 4 query positions \(node given to tree_distance_fn is \(1, 4\)\)"),
    ],
)
def test_flex_refuses_score_mod_built_for_smaller_inputs(B, H, L, match):
    q, k, v = qkv(B, H, L)
    with pytest.raises(ShapeError, match=match):
        flex(q, k, v, tree_mod())


def test_flex_refuses_longer_keys_than_the_score_mod_was_built_for():
    q, k, v = qkv(1, 2, 4, S=6)
    with pytest.raises(ShapeError, match="built for at most 4 key positions"):
        flex(q, k, v, tree_mod())


def test_flex_accepts_inputs_within_the_built_sizes():
    """Fewer batch rows, heads or tokens than built for read a prefix of the inputs: equal to the dense reference."""
    mod = tree_mod(B=2, H=4)
    q, k, v = qkv(1, 3, 3)
    dist = torch.as_tensor(tree_distance(PARENT))[:3, :3]
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=-dist.float())  # slopes 1: bias −d
    torch.testing.assert_close(flex(q, k, v, mod), ref, rtol=0, atol=1e-5)


def test_fire_score_mod_records_its_heads_and_query_scale():
    fire = FIRE(num_heads=2)
    mod = fire_score_mod(fire, tree_distance_fn(PARENT, torch.tensor([[0, 1, 2, 3]])), torch.ones(1, 4))
    with pytest.raises(ShapeError, match=r"at most 2 heads \(FIRE\(num_heads=2\)\)"):
        flex(*qkv(1, 3, 4), mod)
    mod = fire_score_mod(fire, token_distance_fn(), torch.ones(1, 3))
    with pytest.raises(ShapeError, match=r"at most 3 query positions \(query_scale given to fire_score_mod"):
        flex(*qkv(1, 2, 4), mod)


def test_block_mask_refuses_mask_mod_built_for_fewer_positions():
    doc = document_mask_mod([0, 2, 4])
    with pytest.raises(ShapeError, match=r"at most 4 key positions \(cu_seqlens .* ends at total = 4\)"):
        block_mask(doc, 1, 1, 4, 8)
    with pytest.raises(ShapeError, match="at most 4 query positions"):
        dense_mask(doc, 1, 1, 6, 4)
    # torch's and_masks / or_masks pass the indices through: their parts' sizes still apply
    with pytest.raises(ShapeError, match="at most 4 key positions"):
        block_mask(and_masks(or_masks(doc, causal_mask_mod()), causal_mask_mod()), 1, 1, 4, 8)
    row = torch.tensor([[0, 0, 1, 1]])
    with pytest.raises(ShapeError, match=r"a batch of at most 1 \(row given to table_mask_mod"):
        block_mask(and_masks(table_mask_mod(row, row), causal_mask_mod()), 2, None, 4, 4)


def test_flex_checks_the_block_masks_mask_mod_against_the_batch():
    """A block mask built with B=None broadcasts, but FlexAttention calls its mask_mod with every b."""
    row = torch.tensor([[0, 0, 1, 1]])
    bm = block_mask(table_mask_mod(row, row, mode="row"), None, None, 4, 4, block=2)
    with pytest.raises(ShapeError, match=r"block_mask's mask_mod was built for a batch of at most 1"):
        flex(*qkv(2, 2, 4), block_mask=bm)
    out = flex(*qkv(1, 2, 4), block_mask=bm)  # the batch it was built for still runs
    assert out.shape == (1, 2, 4, 8)


def test_flex_refuses_inconsistent_q_k_v_and_block_masks():
    q, k, v = qkv(1, 2, 4)
    with pytest.raises(ShapeError, match="same heads"):
        flex(torch.randn(1, 3, 4, 8), k, v)
    with pytest.raises(ShapeError, match="multiple of the key/value heads"):
        flex(torch.randn(1, 3, 4, 8), k, v, enable_gqa=True)
    with pytest.raises(ShapeError, match=r"floating \(B, H, L, D\)"):
        flex(q[0], k[0], v[0])
    with pytest.raises(ShapeError, match="do not fit"):
        flex(q, k, v[..., :3, :])
    with pytest.raises(ShapeError, match="do not fit"):
        flex(q, k[..., :4], v)
    with pytest.raises(InputError, match="must be a torch.Tensor"):
        flex(q.tolist(), k, v)
    with pytest.raises(ShapeError, match=r"block_mask was built for \(B, H, Q, KV\) = \(1, 1, 5, 5\)"):
        flex(q, k, v, block_mask=block_mask(causal_mask_mod(), 1, 1, 5, 5))
    with pytest.raises(InputError, match="block_mask must be a BlockMask"):
        flex(q, k, v, block_mask=causal_mask_mod())
    with pytest.raises(InputError, match="score_mod must be a callable"):
        flex(q, k, v, score_mod=torch.ones(2))


def test_hf_flex_attention_checks_the_patchs_mods():
    """The structural state's score_mod is called with absolute positions up to S (cache included)."""
    state = types.SimpleNamespace(extras={"score_mod": tree_mod(B=1, H=2)}, padding=None, cu_seqlens=None)
    module = torch.nn.Module()
    module._structpos = (None, state)
    q, k, v = qkv(1, 2, 2, S=6)  # 4 cached keys + 2 queries: positions up to 6 > 4
    with pytest.raises(ShapeError, match=r"set_bias\(score_mod=...\) was built for at most 4 query positions"):
        hf_flex_attention(module, q, k, v)
    q, k, v = qkv(1, 2, 1, S=4)  # decoding the last of 4 positions is within the sizes
    out, _ = hf_flex_attention(module, q, k, v)
    assert out.shape == (1, 1, 2, 8)
