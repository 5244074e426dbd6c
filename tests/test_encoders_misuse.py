"""Misuse of the encoders: structpos errors instead of ignored axes, raw torch errors, NaN or inf."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos.encoders import ComRoPE, SPDBias, alibi_distance_bias, cu_seqlens_from_lengths, tree_path_pe
from structpos.exceptions import ShapeError, SpecError


# ----------------------------------------------------------------------------- 6. ComRoPE axes
@pytest.mark.parametrize(
    "head_dim, num_axes, block_size, axis", [(8, 5, 2, 4), (8, 3, 4, 2), (4, 2, 4, 1), (16, 9, 2, 8)]
)
def test_comrope_ap_refuses_an_axis_without_a_block(head_dim, num_axes, block_size, axis):
    with pytest.raises(SpecError, match=f"axis {axis} would get none"):
        ComRoPE(head_dim, num_axes, "ap", block_size=block_size)


@pytest.mark.parametrize("variant, num_axes, block_size", [("ap", 4, 2), ("ap", 2, 4), ("ld", 5, 2), ("ld", 3, 4)])
def test_comrope_every_axis_it_accepts_changes_the_output(variant, num_axes, block_size):
    torch.manual_seed(0)
    enc = ComRoPE(8, num_axes, variant, block_size=block_size, init="random", init_std=0.5).double()
    q = torch.randn(1, 1, 1, 8, dtype=torch.float64)
    base = torch.zeros(1, 1, num_axes, dtype=torch.float64)
    ref = enc(q, q, base)[0]
    for a in range(num_axes):
        moved = base.clone()
        moved[..., a] = 3.0
        assert (enc(q, q, moved)[0] - ref).abs().max() > 1e-3, f"axis {a} is ignored"


# ----------------------------------------------------------------------------- 7. cu_seqlens
@pytest.mark.parametrize(
    "lengths, match",
    [
        (torch.tensor([3, -1]), "non-negative"),
        (torch.tensor([3.5, 1.0]), "integers"),
        (torch.tensor([float("nan")]), "integers"),
        (torch.tensor([[1, 2]]), "1-D"),
        (torch.tensor([True, False]), "integer"),
        (torch.tensor([2**31, 1]), "int32"),
        ("ab", "lengths"),
    ],
)
def test_cu_seqlens_refuses_lengths_that_are_not_counts(lengths, match):
    with pytest.raises(ShapeError, match=match):
        cu_seqlens_from_lengths(lengths)


@pytest.mark.parametrize("lengths", [[3, 0, 2], torch.tensor([3.0, 1.0]), torch.tensor(4), np.array([1, 2, 3])])
def test_cu_seqlens_are_the_non_decreasing_prefix_sums(lengths):
    ref = np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64).reshape(-1))])
    cu = cu_seqlens_from_lengths(lengths)
    assert cu.dtype == torch.int32 and cu.tolist() == ref.tolist()
    assert (cu[1:] >= cu[:-1]).all()


# ----------------------------------------------------------------------------- 10. biases
@pytest.mark.parametrize(
    "dist",
    [
        torch.tensor([0, 1]),
        torch.tensor(3),
        torch.tensor([[1j]]),
        [["a"]],
        torch.tensor([[True, False], [False, True]]),
    ],
    ids=["1d", "0d", "complex", "strings", "bool"],
)
def test_spd_bias_refuses_what_is_not_an_integer_distance_matrix(dist):
    with pytest.raises(ShapeError):
        SPDBias(2, 4)(dist)


def test_spd_bias_is_the_table_lookup_of_the_clipped_distance():
    bias = SPDBias(3, 4)
    with torch.no_grad():
        bias.table.weight.copy_(torch.randn(6, 3))
    d = torch.tensor([[[0, 7, -1], [2, 0, 4]]])  # (1, 2, 3): not square, batched
    bucket = torch.where(d < 0, 5, d.clamp(max=4))
    torch.testing.assert_close(bias(d), bias.table.weight[bucket].movedim(-1, -3))


def test_alibi_refuses_nan_and_shapeless_distances():
    with pytest.raises(ShapeError, match="NaN"):
        alibi_distance_bias(torch.tensor([[0.0, float("nan")], [1.0, 0.0]]), 2)
    with pytest.raises(ShapeError):
        alibi_distance_bias(torch.tensor([0.0, 1.0]), 2)
    with pytest.raises(ShapeError):
        alibi_distance_bias([["a"]], 2)
    d = torch.tensor([[0.0, 2.0], [-1.0, 0.0]])
    b = alibi_distance_bias(d, 2)
    slopes = torch.tensor([2.0**-4, 2.0**-8])
    torch.testing.assert_close(b[:, 0, 1], -2 * slopes)
    assert torch.isneginf(b[:, 1, 0]).all() and not torch.isnan(b).any()
    for dtype in (torch.int64, torch.bool, "float32", None):  # an integer dtype rounded every slope to 0
        with pytest.raises(SpecError, match="dtype"):
            alibi_distance_bias(d, 2, dtype=dtype)
    torch.testing.assert_close(alibi_distance_bias(d, 2, dtype=torch.float64)[:, 0, 1], -2 * slopes.double())


def deep_path(n):
    return np.arange(-1, n - 1)


@pytest.mark.parametrize("decay", [float("nan"), float("inf"), "0.5", None])
def test_tree_path_pe_refuses_a_non_finite_decay(decay):
    with pytest.raises(SpecError, match="decay"):
        tree_path_pe([-1, 0, 0], 2, 2, decay=decay)


def test_tree_path_pe_refuses_a_decay_that_overflows_float32():
    with pytest.raises(SpecError, match="overflows float32"):
        tree_path_pe(deep_path(50), 64, 4, decay=1e10)
    # the same decay on a shallow tree stays finite: only the levels used count
    pe = tree_path_pe([-1, 0, 1], 64, 4, decay=1e10)
    assert np.isfinite(pe).all() and pe[2, 4] == np.float32(1e10)


@pytest.mark.parametrize("decay", [0.0, 0.5, -1.0, 1.0, 2.0])
def test_tree_path_pe_blocks_are_decayed_one_hots(decay):
    """Block ``l`` of node ``i`` is ``decay**l`` times the one-hot of the sibling index ``l`` steps up."""
    parent = np.array([-1, 0, 0, 2, 3, 3])
    sib = np.array([0, 0, 1, 0, 0, 1])
    pe = tree_path_pe(parent, 4, 2, decay=decay).reshape(6, 4, 2)
    ref = np.zeros((6, 4, 2), dtype=np.float32)
    for i in range(6):
        j, level = i, 0
        while parent[j] >= 0:
            ref[i, level, sib[j]] = np.float32(decay) ** level
            j, level = parent[j], level + 1
    np.testing.assert_array_equal(pe, ref)


@pytest.mark.parametrize("args", [(2.5, 2), ("2", 2), (2, 2.0), (0, 2), (True, 2), (10**9, 10)])
def test_tree_path_pe_sizes_are_integers_within_bounds(args):
    with pytest.raises(SpecError, match="max_depth|max_branch"):
        tree_path_pe([-1, 0, 0], *args)


def test_tree_path_pe_refuses_an_output_past_the_table_cap():
    with pytest.raises(SpecError, match="entries"):
        tree_path_pe(deep_path(100), 2**20, 2**10)
