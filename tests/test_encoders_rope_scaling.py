"""Per-axis length extrapolation: one axis against Hugging Face's own implementation, per-axis isolation,
relative invariance and table/direct agreement with scaled axes, randomised positions."""

from __future__ import annotations

import math

import pytest
import torch

from structpos.encoders import StructuralRoPE, rope_inv_freq
from structpos.encoders.rope_scaling import axis_inv_freq, randomized_positions, scaled_inv_freq
from structpos.exceptions import ShapeError, SpecError

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

D, THETA, L0 = 64, 10000.0, 512

HF_SPECS = [
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 4.0},
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 128},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256, "beta_fast": 16, "beta_slow": 2},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256, "truncate": False},
    {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 64, "mscale": 1.0, "mscale_all_dim": 0.5},
    {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128, "attention_factor": 1.3},
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 128,
    },
]


def hf_inv_freq(spec: dict, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    cfg = transformers.LlamaConfig(
        hidden_size=4 * D,
        num_attention_heads=4,
        head_dim=D,
        max_position_embeddings=L0,
        rope_parameters={**spec, "rope_theta": THETA},
    )
    return ROPE_INIT_FUNCTIONS[spec["rope_type"]](cfg, "cpu", seq_len=seq_len)


def ours(spec: dict, seq_len: int | None = None) -> dict:
    """Our spec for the HF one: HF's dynamic reads L₀ from max_position_embeddings, ours from the spec."""
    if spec["rope_type"] == "dynamic":
        return {**spec, "original_max_position_embeddings": L0, "seq_len": seq_len}
    return spec


@pytest.mark.parametrize("spec", HF_SPECS, ids=lambda s: "-".join(f"{v}" for v in s.values()))
@pytest.mark.parametrize("seq_len", [None, 3 * L0])
def test_one_axis_equals_hf_inv_freq_and_attention_factor(spec, seq_len):
    ref, ref_factor = hf_inv_freq(spec, seq_len)
    got, factor = scaled_inv_freq(ours(spec, seq_len), D, THETA)
    torch.testing.assert_close(got, ref.float(), rtol=1e-6, atol=1e-6)
    assert math.isclose(factor, ref_factor, rel_tol=1e-6)
    # and the encoder with that axis scaled rotates exactly as HF's cos/sin (cat(f, f) · m) do
    rope = StructuralRoPE(D, 1, base=THETA, scaling={0: ours(spec, seq_len)})
    pos = torch.tensor([0, 1, 7, 100, 2000])
    cos, sin = rope.cos_sin(pos[:, None])
    ang = pos[:, None].float() * ref.float()[None]
    torch.testing.assert_close(cos[:, 0], ang.cos() * ref_factor, rtol=0, atol=1e-6)
    torch.testing.assert_close(sin[:, 0], ang.sin() * ref_factor, rtol=0, atol=1e-6)


def test_dynamic_is_the_identity_within_the_trained_range():
    plain = rope_inv_freq(D, THETA)
    got, _ = scaled_inv_freq({"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": L0}, D, THETA)
    torch.testing.assert_close(got, plain, rtol=1e-6, atol=0)


def test_ntk_aware_is_hf_dynamic_at_factor_times_the_trained_length():
    """b' = b·s^{D/(D−2)} is HF's dynamic NTK with factor 1 at n = s·L₀; the top frequency is unchanged and the
    lowest is divided by exactly s."""
    s = 8.0
    got, m = scaled_inv_freq({"rope_type": "ntk", "factor": s}, D, THETA)
    ref, _ = hf_inv_freq({"rope_type": "dynamic", "factor": 1.0}, seq_len=int(s * L0))
    torch.testing.assert_close(got, ref.float(), rtol=1e-6, atol=0)
    plain = rope_inv_freq(D, THETA)
    assert got[0] == plain[0] and m == 1.0
    assert math.isclose(float(plain[-1] / got[-1]), s, rel_tol=1e-5)


def test_low_frequency_clipping_zeroes_exactly_the_long_wavelengths():
    plain = rope_inv_freq(D, THETA)
    got, _ = scaled_inv_freq({"rope_type": "clip", "max_wavelength": 1000.0}, D, THETA)
    long = 2 * math.pi / plain.double() > 1000.0
    assert 0 < int(long.sum()) < D // 2
    assert (got[long] == 0).all() and torch.equal(got[~long], plain[~long])
    rope = StructuralRoPE(D, 1, base=THETA, scaling={0: {"rope_type": "clip", "max_wavelength": 1000.0}})
    cos, sin = rope.cos_sin(torch.tensor([[3], [123456]]))
    assert (cos[:, 0, long] == 1).all() and (sin[:, 0, long] == 0).all()  # no position in the clipped pairs


SCALED = {1: {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}}


@pytest.mark.parametrize("allocation", ["sectioned", "interleaved", "per_head"])
@pytest.mark.parametrize("floating", [False, True])
def test_scaling_one_axis_leaves_the_other_axes_unchanged(allocation, floating):
    """Pairs of axes 0 and 2 rotate as without scaling; axis 1's pairs use the YaRN table and factor."""
    opts = {"num_heads": 3} if allocation == "per_head" else {}
    plain = StructuralRoPE(D, 3, allocation, **opts)
    scaled = StructuralRoPE(D, 3, allocation, scaling=SCALED, **opts)
    g = torch.Generator().manual_seed(0)
    coords = torch.randint(0, 300, (2, 9, 3), generator=g)
    coords = coords.double() if floating else coords
    c0, s0 = plain.cos_sin(coords)
    c1, s1 = scaled.cos_sin(coords)
    axes = plain.axis_map.expand(c0.shape[-2], -1)  # (H', P) axis of every pair
    other = axes != 1
    torch.testing.assert_close(c1[..., other], c0[..., other], rtol=0, atol=0)
    torch.testing.assert_close(s1[..., other], s0[..., other], rtol=0, atol=0)
    yarn, m = scaled_inv_freq(SCALED[1], D)
    j = torch.nonzero(axes[0] == 1)[:, 0] if allocation != "per_head" else torch.arange(D // 2)
    h = 0 if allocation != "per_head" else 1  # per_head: head 1 follows axis 1
    ang = coords[..., 1:2].double() * yarn.double()[j]
    torch.testing.assert_close(c1[..., h, j].double(), ang.cos() * m, rtol=0, atol=2e-5)
    torch.testing.assert_close(s1[..., h, j].double(), ang.sin() * m, rtol=0, atol=2e-5)


def test_per_axis_frequency_tables():
    freqs, factors = axis_inv_freq(SCALED, 3, D)
    plain = rope_inv_freq(D)
    assert torch.equal(freqs[0], plain) and torch.equal(freqs[2], plain)
    assert torch.equal(freqs[1], scaled_inv_freq(SCALED[1], D)[0])
    assert factors.tolist()[0] == factors.tolist()[2] == 1.0 and factors[1] > 1


@pytest.mark.parametrize("allocation", ["sectioned", "mixed"])
def test_scores_still_depend_only_on_coordinate_differences(allocation):
    scaling = {0: {"rope_type": "linear", "factor": 3.0}, 2: {"rope_type": "ntk", "factor": 2.0}}
    rope = StructuralRoPE(D, 3, allocation, scaling=scaling)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 6, 2, D, generator=g), torch.randn(1, 6, 2, D, generator=g)
    coords = torch.randint(0, 50, (1, 6, 3), generator=g)

    def scores(c):
        qr, kr = rope(q, k, c)
        return torch.einsum("blhd,bmhd->bhlm", qr, kr)

    torch.testing.assert_close(scores(coords), scores(coords + torch.tensor([7, 100, 3])), rtol=0, atol=2e-4)


def test_given_axis_inv_freq_and_option_errors():
    freqs = torch.stack([rope_inv_freq(8) / 2, rope_inv_freq(8)])
    rope = StructuralRoPE(8, 2, "interleaved", axis_inv_freq=freqs)
    torch.testing.assert_close(rope.angles(torch.tensor([3.0, 5.0])), torch.tensor([1.5, 0.5, 0.015, 0.005]))
    with pytest.raises(ShapeError, match="axis_inv_freq"):
        StructuralRoPE(8, 2, axis_inv_freq=freqs[:1])
    with pytest.raises(SpecError, match="'cubic' is not one of"):
        StructuralRoPE(8, 2, scaling={0: {"rope_type": "cubic"}})
    with pytest.raises(SpecError, match=r"scaling\[1\]: 'linear' scaling needs 'factor'"):
        StructuralRoPE(8, 2, scaling={1: {"rope_type": "linear"}})
    with pytest.raises(SpecError, match="no option 'beta'"):
        StructuralRoPE(8, 2, scaling={1: {"rope_type": "linear", "factor": 2.0, "beta": 1}})
    with pytest.raises(SpecError, match="axis 2 is not one of"):
        StructuralRoPE(8, 2, scaling={2: {"rope_type": "linear", "factor": 2.0}})
    with pytest.raises(SpecError, match="inv_freq or learnable"):
        StructuralRoPE(8, 2, scaling={0: {"rope_type": "linear", "factor": 2.0}}, learnable=True)
    with pytest.raises(SpecError, match="one-hot allocation"):
        StructuralRoPE(D, 2, "mixed", scaling=SCALED)


def test_randomized_positions_keep_order_and_ties_and_reach_the_larger_range():
    g = torch.Generator().manual_seed(0)
    row = torch.arange(20).repeat_interleave(3)  # 20 rows of 3 cells
    col = torch.arange(3).repeat(20)
    coords = torch.stack([row, col], -1)[None].expand(4, -1, -1)
    top = 0
    for _ in range(25):
        r = randomized_positions(coords, [1000, None], generator=g)
        assert torch.equal(r[..., 1], coords[..., 1])  # None: unchanged
        for b in range(4):
            x = r[b, :, 0]
            assert ((x[:, None] == x[None, :]) == (row[:, None] == row[None, :])).all()  # ties kept, no new ties
            assert ((x[:, None] < x[None, :]) == (row[:, None] < row[None, :])).all()  # order kept
        assert int(r[..., 0].max()) < 1000
        top = max(top, int(r[..., 0].max()))
    assert top > 900  # positions beyond the 20 trained rows are seen in training
    with pytest.raises(SpecError, match="axis 0: sequence 0 has coordinates up to 19"):
        randomized_positions(coords, 10)
    with pytest.raises(ShapeError):
        randomized_positions(coords.float(), 100)


@pytest.mark.parametrize("allocation", ["sectioned", "per_head"])
def test_fullgraph_compile_with_a_scaled_axis_matches_eager(allocation):
    torch._dynamo.reset()
    rope = StructuralRoPE(16, 3, allocation, num_heads=4, scaling=SCALED, qk_layout="bhld")
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)
    c = torch.randint(0, 300, (2, 9, 3))
    compiled = torch.compile(rope, fullgraph=True, backend="eager")  # raises on any graph break
    for got, ref in zip(compiled(q, k, c), rope(q, k, c)):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_scaled_tables_are_derived_state_not_checkpoint_entries():
    """Per-axis tables come from the options (like inv_freq): checkpoints load across scaling settings."""
    scaled = StructuralRoPE(D, 3, scaling=SCALED)
    assert set(scaled.state_dict()) == set(StructuralRoPE(D, 3).state_dict())
    StructuralRoPE(D, 3).load_state_dict(scaled.state_dict(), strict=True)
