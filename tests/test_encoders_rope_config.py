"""RoPEConfig: one validated value for the rotary settings, shared by StructuralRoPE and AWRoPE.

Properties: building from a config is the same module as building from keywords (equal outputs
on random inputs, for every allocation); the config refuses exactly what the constructor refuses,
with the same message; the option tuples and the ``Literal`` annotations of the constructors are
one list (checked against ``typing.get_type_hints``, not against the tuples themselves); the
rewritten allocation helpers agree with counts made by brute force.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest
import torch

from structpos.encoders import AWRoPE, RoPEConfig, StructuralRoPE
from structpos.encoders._options import ALLOCATIONS, AW_MODES, EDGE_PHASE_SOURCES, LAYOUTS, QK_LAYOUTS
from structpos.encoders.registry import ENCODERS
from structpos.encoders.rope import head_axes, pair_axes
from structpos.encoders.rope_tables import CosSinCache
from structpos.exceptions import SpecError

SETTINGS = [
    {"head_dim": 8, "num_axes": 2},
    {"head_dim": 16, "num_axes": 3, "allocation": "interleaved", "sections": [4, 2, 2]},
    {"head_dim": 8, "num_axes": 2, "allocation": "per_head", "num_heads": 4, "sections": [1, 3]},
    {"head_dim": 8, "num_axes": 2, "allocation": "mixed", "learnable": True},
    {"head_dim": 8, "num_axes": 2, "layout": "interleaved", "qk_layout": "bhld", "base": 500.0},
    {
        "head_dim": 8,
        "num_axes": 2,
        "scaling": {1: {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}},
    },
]


@pytest.mark.parametrize("kwargs", SETTINGS)
def test_from_config_builds_the_same_encoder_as_keywords(kwargs):
    torch.manual_seed(0)
    by_keywords = StructuralRoPE(**kwargs)
    by_config = StructuralRoPE.from_config(RoPEConfig(**kwargs))
    assert by_config.config == by_keywords.config
    d = kwargs["head_dim"]
    q, k = torch.randn(2, 6, 4, d), torch.randn(2, 6, 4, d)
    if kwargs.get("qk_layout") == "bhld":
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    coords = torch.randint(0, 50, (2, 6, kwargs["num_axes"]))
    for a, b in zip(by_keywords(q, k, coords), by_config(q, k, coords)):
        assert torch.equal(a, b)
    # the stored config rebuilds it, through keywords as well
    again = StructuralRoPE(**by_keywords.config.as_kwargs())
    assert torch.equal(again(q, k, coords)[0], by_keywords(q, k, coords)[0])


BAD = [
    {"head_dim": 7, "num_axes": 1},
    {"head_dim": 8, "num_axes": 0},
    {"head_dim": 8, "num_axes": 5},
    {"head_dim": 8, "num_axes": 2, "allocation": "diagonal"},
    {"head_dim": 8, "num_axes": 2, "sections": [3, 2]},
    {"head_dim": 8, "num_axes": 2, "sections": [5, -1]},
    {"head_dim": 8, "num_axes": 2, "allocation": "per_head"},
    {"head_dim": 8, "num_axes": 3, "allocation": "per_head", "num_heads": 2},
    {"head_dim": 8, "num_axes": 2, "base": 1.0},
    {"head_dim": 8, "num_axes": 2, "layout": "split"},
    {"head_dim": 8, "num_axes": 2, "qk_layout": "lbhd"},
    {"head_dim": 8, "num_axes": 2, "max_table_extent": 0},
    {"head_dim": 8, "num_axes": 2, "scaling": {2: {"rope_type": "linear", "factor": 2.0}}},
    {"head_dim": 8, "num_axes": 2, "scaling": {0: {"rope_type": "linear", "factor": 2.0}}, "learnable": True},
]


@pytest.mark.parametrize("kwargs", BAD)
def test_config_refuses_what_the_constructor_refuses_with_the_same_message(kwargs):
    with pytest.raises(SpecError) as by_config:
        RoPEConfig(**kwargs)
    with pytest.raises(SpecError) as by_constructor:
        StructuralRoPE(**kwargs)
    assert str(by_config.value) == str(by_constructor.value)


def test_config_is_frozen_normalised_and_replace_validates_again():
    cfg = RoPEConfig(16, 3, sections=[4, 2, 2], base=500)
    assert cfg.sections == (4, 2, 2) and isinstance(cfg.base, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.head_dim = 32  # type: ignore[misc]
    assert cfg.replace(head_dim=32, sections=(8, 4, 4)).head_dim == 32
    with pytest.raises(SpecError, match="summing to head_dim/2 = 16"):
        cfg.replace(head_dim=32)  # the old sections no longer sum to D/2
    with pytest.raises(SpecError, match="config must be a RoPEConfig"):
        StructuralRoPE.from_config({"head_dim": 8})  # type: ignore[arg-type]


def test_awrope_from_config_matches_keywords_and_refuses_unused_settings():
    torch.manual_seed(0)
    cfg = RoPEConfig(head_dim=8, num_axes=2, base=300.0, layout="interleaved")
    a = AWRoPE.from_config(cfg, phase="coords", z=0.5, K=4)
    b = AWRoPE(8, z=0.5, K=4, base=300.0, phase="coords", num_axes=2, layout="interleaved")
    edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    q, k, pos = torch.randn(3, 2, 8), torch.randn(3, 2, 8), torch.randn(3, 2)
    for x, y in zip(a(q, k, edges, pos=pos), b(q, k, edges, pos=pos)):
        assert torch.equal(x, y)
    with pytest.raises(SpecError, match="AWRoPE does not use RoPEConfig.allocation"):
        AWRoPE.from_config(cfg.replace(allocation="interleaved"))
    with pytest.raises(SpecError, match="come from the config"):
        AWRoPE.from_config(cfg, base=10.0)


def _literal_args(func, name: str) -> tuple:
    return typing.get_args(typing.get_type_hints(func)[name])


def test_option_tuples_are_the_constructor_literals():
    """The runtime choices and the annotated ``Literal`` are one list (read from the signatures)."""
    assert _literal_args(StructuralRoPE.__init__, "allocation") == ALLOCATIONS
    assert _literal_args(StructuralRoPE.__init__, "layout") == LAYOUTS
    assert _literal_args(StructuralRoPE.__init__, "qk_layout") == QK_LAYOUTS
    assert _literal_args(AWRoPE.__init__, "mode") == AW_MODES
    assert _literal_args(AWRoPE.__init__, "phase") == EDGE_PHASE_SOURCES
    aw = ENCODERS.get("aw_rope")
    assert aw.choices == {"mode": AW_MODES, "phase": EDGE_PHASE_SOURCES, "layout": LAYOUTS}
    for allocation in ALLOCATIONS:  # every listed choice is accepted ...
        StructuralRoPE(8, 2, allocation, num_heads=2)
    with pytest.raises(SpecError, match="allocation must be one of"):  # ... and nothing else
        StructuralRoPE(8, 2, "diagonal")  # type: ignore[arg-type]


@pytest.mark.parametrize("num_pairs", range(1, 13))
def test_default_allocations_match_brute_force_counts(num_pairs):
    for num_axes in range(1, num_pairs + 1):
        inter = pair_axes(num_pairs, num_axes, "interleaved").tolist()
        assert inter == [j % num_axes for j in range(num_pairs)]
        sect = pair_axes(num_pairs, num_axes, "sectioned").tolist()
        counts = [sect.count(a) for a in range(num_axes)]
        assert sect == sorted(sect) and max(counts) - min(counts) <= 1 and min(counts) >= 1
        assert counts == sorted(counts, reverse=True)  # the remainder goes to the first axes
        heads = head_axes(num_pairs, num_axes).tolist()
        assert heads == sect  # heads are shared out by the same rule as pairs


def test_table_lookup_equals_direct_cos_of_the_angles():
    torch.manual_seed(0)
    inv_freq = torch.rand(4) + 0.01
    coords = torch.randint(0, 100, (3, 5, 2))
    axes = torch.tensor([0, 0, 1, 1])
    expected = torch.cos(coords[..., axes].to(torch.float32) * inv_freq)
    stacked, _ = CosSinCache(pair_axes=axes).lookup(inv_freq, coords, torch.float32)
    assert torch.allclose(stacked[..., 0, :], expected, atol=1e-6)
    single, _ = CosSinCache().lookup(inv_freq, coords, torch.float32, single_axis=1)
    assert torch.allclose(single[..., 0, :], torch.cos(coords[..., 1:2].float() * inv_freq), atol=1e-6)
    per_head, _ = CosSinCache().lookup(inv_freq, coords, torch.float32, head_axes=[1, 0, 1])
    assert per_head.shape == (3, 5, 3, 4)
    assert torch.allclose(per_head[..., 1, :], torch.cos(coords[..., 0:1].float() * inv_freq), atol=1e-6)


def test_hierarchical_from_config_matches_keywords_and_checks_the_level_count():
    from structpos.encoders import HierarchicalRoPE

    torch.manual_seed(0)
    cfg = RoPEConfig(head_dim=12, num_axes=3, allocation="interleaved", base=700.0)
    a = HierarchicalRoPE.from_config(cfg, "code")
    b = HierarchicalRoPE(12, "code", allocation="interleaved", base=700.0)
    q, k = torch.randn(1, 5, 2, 12), torch.randn(1, 5, 2, 12)
    coords = torch.randint(0, 9, (1, 5, 3))
    assert a.levels == b.levels and torch.equal(a(q, k, coords)[0], b(q, k, coords)[0])
    with pytest.raises(SpecError, match="num_axes=3, but there are 2 levels"):
        HierarchicalRoPE.from_config(cfg, ["page", "line"])
    with pytest.raises(SpecError, match="does not use RoPEConfig.scaling"):
        scaled = cfg.replace(scaling={0: {"rope_type": "linear", "factor": 2.0}})
        HierarchicalRoPE.from_config(scaled, "code")
    with pytest.raises(SpecError, match="constructor arguments of its own"):
        from structpos.encoders.bipe import BiPE

        BiPE.from_config(RoPEConfig(8))
