"""ExtraPlaneRoPE: the token index keeps the whole 1-D ladder; structure lives on extra planes."""

from __future__ import annotations

import math

import pytest
import torch

from structpos.encoders import ExtraPlaneRoPE
from structpos.exceptions import ShapeError, SpecError


def rope_1d_reference(x: torch.Tensor, pos: torch.Tensor, base: float) -> torch.Tensor:
    """Plain 1-D RoPE, half layout, written from the formula: pair j rotates (x_j, x_{j+D/2}) by pos·base^(-2j/D)."""
    d = x.shape[-1]
    j = torch.arange(d // 2, dtype=torch.float64)
    ang = pos.double()[..., None, None] * base ** (-2 * j / d)  # (B, L, 1, D/2)
    a, b = x[..., : d // 2].double(), x[..., d // 2 :].double()
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1)


def scores(q, k):
    return torch.einsum("blhd,bmhd->bhlm", q, k)


@pytest.fixture
def qk():
    g = torch.Generator().manual_seed(3)
    return torch.randn(2, 7, 3, 20, generator=g, dtype=torch.float64), torch.randn(
        2, 7, 3, 20, generator=g, dtype=torch.float64
    )


def test_token_part_is_exactly_1d_rope_with_the_full_ladder(qk):
    q, k = qk
    rope = ExtraPlaneRoPE(head_dim=16, extra_dim=4, num_axes=3, base=100.0)
    coords = torch.cat([torch.randint(0, 5, (2, 7, 2)), torch.arange(7).expand(2, 7)[..., None]], -1)
    q_rot, k_rot = rope(q, k, coords)
    torch.testing.assert_close(q_rot[..., :16], rope_1d_reference(q[..., :16], coords[..., 2], 100.0))
    torch.testing.assert_close(k_rot[..., :16], rope_1d_reference(k[..., :16], coords[..., 2], 100.0))


def test_zero_structure_gives_1d_rope_plus_a_position_free_content_term(qk):
    q, k = qk
    rope = ExtraPlaneRoPE(head_dim=16, extra_dim=4, num_axes=3, token_axis=0)
    pos = torch.arange(7).expand(2, 7)
    coords = torch.stack([pos, torch.zeros_like(pos), torch.zeros_like(pos)], -1)
    q_rot, k_rot = rope(q, k, coords)
    ref = scores(rope_1d_reference(q[..., :16], pos, 10000.0), rope_1d_reference(k[..., :16], pos, 10000.0))
    torch.testing.assert_close(scores(q_rot, k_rot), ref + scores(q[..., 16:], k[..., 16:]))


def test_scores_depend_only_on_coordinate_differences(qk):
    q, k = qk
    rope = ExtraPlaneRoPE(head_dim=16, extra_dim=4, num_axes=3)
    coords = torch.randint(0, 9, (2, 7, 3))
    shifted = coords + torch.tensor([4, -2, 11])
    torch.testing.assert_close(scores(*rope(q, k, coords)), scores(*rope(q, k, shifted)))


def test_structure_changes_the_scores(qk):
    q, k = qk
    rope = ExtraPlaneRoPE(head_dim=16, extra_dim=4, num_axes=3)
    pos = torch.arange(7).expand(2, 7)[..., None]
    flat = torch.cat([torch.zeros(2, 7, 2, dtype=torch.int64), pos], -1)
    tree = torch.cat([torch.randint(0, 5, (2, 7, 2)), pos], -1)
    diff = (scores(*rope(q, k, flat)) - scores(*rope(q, k, tree))).abs().max()
    assert diff > 1e-2


def test_norms_are_kept(qk):
    q, k = qk
    q_rot, _ = ExtraPlaneRoPE(16, 4, 3)(q, k, torch.randint(0, 9, (2, 7, 3)))
    torch.testing.assert_close(q_rot.norm(dim=-1), q.norm(dim=-1))


@pytest.mark.parametrize(
    "kwargs",
    [dict(num_axes=1), dict(num_axes=3, token_axis=3), dict(num_axes=4, extra_dim=4)],
)
def test_bad_options_are_spec_errors(kwargs):
    opts = dict(head_dim=8, extra_dim=4, num_axes=3) | kwargs
    with pytest.raises(SpecError):
        ExtraPlaneRoPE(**opts)


def test_wrong_widths_are_shape_errors():
    rope = ExtraPlaneRoPE(8, 4, 3)
    with pytest.raises(ShapeError, match="head_dim \\+ extra_dim = 12"):
        rope(torch.zeros(1, 2, 1, 8), torch.zeros(1, 2, 1, 8), torch.zeros(1, 2, 3, dtype=torch.int64))
    with pytest.raises(ShapeError, match="3 axes"):
        rope(torch.zeros(1, 2, 1, 12), torch.zeros(1, 2, 1, 12), torch.zeros(1, 2, 2, dtype=torch.int64))
    assert math.isfinite(float(rope(torch.ones(1, 2, 1, 12), torch.ones(1, 2, 1, 12), torch.zeros(1, 2, 3))[0].sum()))
