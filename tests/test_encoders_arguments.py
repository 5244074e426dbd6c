"""Encoder options: every axis an allocation accepts is used; every bad option is a SpecError / ShapeError.

The first half checks one property by brute force: a rotary encoder accepts ``(head_dim, num_axes,
allocation)`` exactly when a unit step on *every* axis changes some rotation angle. Before the
check existed, ``StructuralRoPE(head_dim=8, num_axes=5)`` ignored axis 4 without a word.
"""

from __future__ import annotations

import math

import pytest
import torch

from structpos.encoders import WIRE, AWRoPE, HierarchicalRoPE, StructuralRoPE
from structpos.encoders.attention_bias import SPDBias, alibi_slopes
from structpos.encoders.batching import collate
from structpos.encoders.hierarchical import unit_indices
from structpos.encoders.rope import check_cu_seqlens, pair_axes
from structpos.exceptions import ShapeError, SpecError, StructposError


def axes_that_move_an_angle(angles_of) -> list[bool]:
    """For each axis ``a``: does the unit coordinate ``e_a`` give a non-zero angle anywhere?"""
    out, a = [], 0
    while True:
        try:
            ang = angles_of(a)
        except IndexError:
            return out
        out.append(bool(ang.abs().max() > 0))
        a += 1


def rope_axes_used(rope: StructuralRoPE) -> list[bool]:
    eye = torch.eye(rope.num_axes)

    def angles_of(a):
        if a >= rope.num_axes:
            raise IndexError
        return rope.angles(eye[a])

    return axes_that_move_an_angle(angles_of)


@pytest.mark.parametrize("allocation", ["sectioned", "interleaved", "mixed", "per_head"])
def test_construction_succeeds_exactly_when_every_axis_moves_an_angle(allocation):
    """Brute force over small sizes: accepted ⇔ every axis is read; refused ⇔ some axis would be ignored."""
    accepted = refused = 0
    for head_dim in range(2, 17, 2):
        for num_axes in range(1, 11):
            heads = (1, 2, 3, 6) if allocation == "per_head" else (None,)
            for num_heads in heads:
                # what the allocation gives each axis, counted independently of the library
                units = num_heads if allocation == "per_head" else head_dim // 2
                expect_ok = units >= num_axes
                try:
                    rope = StructuralRoPE(head_dim, num_axes, allocation, num_heads=num_heads)
                except SpecError as err:
                    assert not expect_ok, (head_dim, num_axes, num_heads, err)
                    assert f"axis {units}" in str(err) and f"num_axes={num_axes}" in str(err)
                    refused += 1
                    continue
                assert expect_ok, (head_dim, num_axes, num_heads)
                assert all(rope_axes_used(rope)), (head_dim, num_axes, num_heads)
                accepted += 1
    assert accepted and refused


def test_the_issue_cases_raise():
    with pytest.raises(SpecError, match=r"head_dim=8 has 4 rotary pairs, too few for num_axes=5: axis 4"):
        StructuralRoPE(head_dim=8, num_axes=5)
    with pytest.raises(SpecError, match=r"too few for num_axes=100: axis 4 would get none"):
        StructuralRoPE(head_dim=8, num_axes=100, allocation="interleaved")
    with pytest.raises(SpecError, match="axis 2"):
        HierarchicalRoPE(head_dim=4, levels="document")  # 2 pairs, 3 levels
    with pytest.raises(SpecError, match="num_heads=2 has 2 heads, too few for num_axes=3"):
        StructuralRoPE(8, 3, "per_head", num_heads=2)


def test_explicit_zero_sections_stay_allowed_and_leave_that_axis_unused():
    """A 0 in explicit ``sections`` is a deliberate choice (an ablation, GQA-aligned head groups)."""
    rope = StructuralRoPE(8, 3, sections=[2, 2, 0])
    assert rope_axes_used(rope) == [True, True, False]
    per_head = StructuralRoPE(8, 3, "per_head", num_heads=4, sections=[2, 2, 0])
    assert rope_axes_used(per_head) == [True, True, False]


def test_wire_default_omega_reads_every_spectral_coordinate():
    for head_dim in range(2, 13, 2):
        for k in range(1, 9):
            if k > head_dim // 2:
                with pytest.raises(SpecError, match=f"axis {head_dim // 2} would get none"):
                    WIRE(head_dim, k)
                continue
            wire = WIRE(head_dim, k)
            eye = torch.eye(k)
            assert all(bool(wire.angles(eye[a]).abs().max() > 0) for a in range(k)), (head_dim, k)
    WIRE(8, 5, omega=torch.randn(4, 5))  # an explicit Ω is the caller's business


BAD_OPTIONS = [
    (lambda: StructuralRoPE(7, 2), SpecError, "head_dim must be a positive even integer, got 7"),
    (lambda: StructuralRoPE(-4, 2), SpecError, "head_dim must be a positive even integer, got -4"),
    (lambda: StructuralRoPE(0, 1), SpecError, "head_dim"),
    (lambda: StructuralRoPE(8.0, 2), SpecError, "head_dim"),
    (lambda: StructuralRoPE(8, 0), SpecError, "num_axes must be an integer ≥ 1"),
    (lambda: StructuralRoPE(8, 2, sections=[5, -1]), SpecError, "non-negative integer entries"),
    (lambda: StructuralRoPE(8, 2, sections=[2.5, 1.5]), SpecError, "integer entries"),
    (lambda: StructuralRoPE(8, 2, sections=[3, 3]), SpecError, "summing to head_dim/2 = 4"),
    (lambda: StructuralRoPE(8, 2, "per_head", num_heads=4, sections=[5, -1]), SpecError, "num_heads = 4"),
    (lambda: StructuralRoPE(8, 2, "per_head", num_heads=0), SpecError, "num_heads"),
    (lambda: StructuralRoPE(8, 2, base=float("nan")), SpecError, "base must be a finite number > 1.0"),
    (lambda: StructuralRoPE(8, 2, base=1.0), SpecError, "base"),
    (lambda: StructuralRoPE(8, 2, layout="zigzag"), SpecError, "layout"),
    # found by benchmarks/fuzz_encoders.py: a frequency underflowing to 0 silently dropped pairs (and an axis)
    (lambda: StructuralRoPE(8, 2, base=1e308), SpecError, "frequency 1 underflows to 0"),
    (lambda: StructuralRoPE(8, 2, allocation="mixed", mixing="w"), ShapeError, "mixing must be a real tensor"),
    (lambda: StructuralRoPE(8, 2, inv_freq=[1.0, math.inf, 0.1, 0.01]), SpecError, "inv_freq"),
    (lambda: WIRE(8, k=2, omega="w"), ShapeError, "omega must be a real tensor"),
    (lambda: WIRE(8, k=2, scale=1e308), SpecError, "overflows"),
    (lambda: StructuralRoPE(8, 2, max_table_extent=0), SpecError, "max_table_extent"),
    (lambda: HierarchicalRoPE(6, levels="novel"), SpecError, "preset"),
    (lambda: HierarchicalRoPE(6, levels=("a", "a")), SpecError, "distinct"),
    (lambda: HierarchicalRoPE(5, levels=("a", "b")), SpecError, "head_dim"),
    (lambda: WIRE(8, k=0), SpecError, "k must be an integer ≥ 1, got 0"),
    (lambda: WIRE(8, k=-3), SpecError, "k must be"),
    (lambda: WIRE(7, k=1), SpecError, "head_dim"),
    (lambda: WIRE(8, k=1, scale=float("inf")), SpecError, "scale"),
    (lambda: WIRE(8, k=1, omega=torch.zeros(3, 1)), ShapeError, "omega must have shape"),
    (lambda: WIRE(8, k=1, omega=torch.full((4, 1), float("nan"))), SpecError, "omega"),
    (lambda: WIRE(8, k=1, qk_layout="lhbd"), SpecError, "qk_layout"),
    (lambda: AWRoPE(7), SpecError, "head_dim"),
    (lambda: AWRoPE(8, z=float("nan")), SpecError, r"z must be a finite number in \[0.0, 1.0\)"),
    (lambda: AWRoPE(8, K=-1), SpecError, "K must be an integer ≥ 0"),
    (lambda: AWRoPE(8, mode="dense"), SpecError, "mode"),
    (lambda: AWRoPE(8, phase="coords", num_axes=0), SpecError, "num_axes"),
    (lambda: AWRoPE(8, phase="learned"), SpecError, "feature_dim"),
    (lambda: SPDBias(0), SpecError, "num_heads"),
    (lambda: SPDBias(2, max_distance=-1), SpecError, "max_distance"),
    (lambda: alibi_slopes(0), SpecError, "num_heads"),
    (lambda: pair_axes(4, 2, "per_head"), SpecError, "allocation"),
    (lambda: unit_indices(torch.zeros(3, 2, dtype=torch.long), mode="local"), SpecError, "mode"),
    # found by benchmarks/fuzz.py --args encoders (issue 20): sizes that failed in torch's allocator or
    # in int(); wrong types and values built silently; every registered encoder's options
    (lambda: StructuralRoPE(2**40, 1), SpecError, "head_dim must be a positive even integer ≤ 65536"),
    (lambda: StructuralRoPE(16, 2**40, "interleaved"), SpecError, r"num_axes must be an integer in \[1, 1048576\]"),
    (lambda: StructuralRoPE(8, 2, learnable="yes"), SpecError, "learnable must be True or False"),
    (lambda: AWRoPE(2**40), SpecError, "head_dim"),
    (lambda: AWRoPE(8, feature_dim=0), SpecError, "feature_dim"),  # checked though phase='given' ignores it
    (lambda: AWRoPE(8, hidden=-1), SpecError, "hidden"),
    (lambda: HierarchicalRoPE(8, levels=3), SpecError, "sequence of level names"),
    (lambda: SPDBias(2, max_distance=2**40), SpecError, "max_distance"),
    (lambda: SPDBias(2**19, max_distance=2**19), SpecError, "SPDBias table .* more than 268435456"),
    (lambda: SPDBias("8"), SpecError, "num_heads"),
    (lambda: SPDBias(True), SpecError, "num_heads"),
    (lambda: SPDBias(2.5), SpecError, "num_heads"),
    (lambda: WIRE(8, k=1, scale=0.0), SpecError, "scale must be a finite number > 0"),
    (lambda: WIRE(8, k=1, scale=-1.0), SpecError, "scale"),
    (lambda: WIRE(8, k=1, scale=1e-300), SpecError, "underflows"),
]


def _newer_encoder_bad_options():
    from structpos.encoders.additive import LapPEEmbedding
    from structpos.encoders.bipe import BiPE
    from structpos.encoders.comrope import ComRoPE
    from structpos.encoders.cope import CoPE
    from structpos.encoders.extra_planes import ExtraPlaneRoPE
    from structpos.encoders.fire import FIRE
    from structpos.encoders.grape import GRAPE, GRAPEAdditive
    from structpos.encoders.liere import LieRE
    from structpos.encoders.peg import PEGBias
    from structpos.encoders.spe import SPE
    from structpos.encoders.string import STRING
    from structpos.encoders.tpe import TraversalOrderAttention
    from structpos.encoders.tree_embedding import TreePositionEmbedding

    return [
        (lambda: LapPEEmbedding(k=True, dim=4), "k must be an integer"),
        (lambda: LapPEEmbedding(k=0, dim=4), "k must be an integer ≥ 1"),
        (lambda: LapPEEmbedding(k=float("nan"), dim=4), "k must be"),
        (lambda: LapPEEmbedding(k=4, dim="8"), "dim must be"),
        (lambda: LapPEEmbedding(k=2**40, dim=2), "k must be an integer in"),
        (lambda: LapPEEmbedding(k=4, dim=4, sign_flip="no"), "sign_flip must be True or False"),
        (lambda: BiPE(8, dim=None), "BiPE: dim"),
        (lambda: BiPE(8, dim=4, max_offset=None), "max_offset"),
        (lambda: ComRoPE(8, 1, block_size="8"), "block_size"),
        (lambda: ComRoPE(8, 1, init="random", base=float("inf")), "base"),
        (lambda: CoPE(2**40, 2), "head_dim"),
        (lambda: CoPE(8, 2, scale=float("-inf")), "scale"),
        (lambda: CoPE(8, 2, scale=1e-300), "scale"),  # 0 in float32: the term would vanish
        (lambda: ExtraPlaneRoPE(8, None, 8), "extra_dim"),
        (lambda: ExtraPlaneRoPE(8, 4, None), "num_axes"),
        (lambda: ExtraPlaneRoPE(8, 4, 2, token_axis="8"), "token_axis"),
        (lambda: FIRE("8"), "num_heads"),
        (lambda: FIRE(2**40), "num_heads"),
        (lambda: FIRE(2, unreachable=1e308), "unreachable"),
        (lambda: GRAPE(8, 1, mode="mixture", rank="2"), "rank"),
        (lambda: GRAPE(8, 1, learn_basis="yes"), "learn_basis"),
        (lambda: GRAPEAdditive(8, 1, num_heads=None), "num_heads"),
        (lambda: LieRE(8, 1, init="random", init_std=float("nan")), "init_std"),
        (lambda: LieRE(8, 1, init="random", init_std=1e31), "init_std"),  # float32 generators overflow
        (lambda: ComRoPE(8, 1, init="random", init_std=1e39), "init_std"),
        (lambda: LieRE("8", 1), "head_dim"),
        (lambda: STRING(8, 1, learnable_freqs="yes"), "learnable_freqs"),
        (lambda: PEGBias("8"), "num_heads"),
        (lambda: PEGBias(2, hidden=0), "hidden"),
        (lambda: SPE(2**40), "out_dim"),
        (lambda: SPE(8, num_filters=2.5), "num_filters"),
        (lambda: TraversalOrderAttention(float("nan"), 2), "head_dim"),
        (lambda: TraversalOrderAttention(8, None), "num_heads"),
        (lambda: TraversalOrderAttention(8, 2, gate=None), "gate"),
        (lambda: TreePositionEmbedding(None), "dim"),
        (lambda: TreePositionEmbedding(2.5), "dim"),
        (lambda: TreePositionEmbedding(4, max_sibling=2**40), "max_sibling"),
    ]


@pytest.mark.parametrize("case", range(37))
def test_newer_encoders_refuse_bad_options_with_spec_error(case):
    cases = _newer_encoder_bad_options()
    assert len(cases) == 37
    make, match = cases[case]
    with pytest.raises(SpecError, match=match):
        make()


def test_size_bounds_are_inclusive():
    from structpos.encoders._checks import MAX_HEAD_DIM, MAX_TABLE_ENTRIES, check_count, check_table_size

    assert StructuralRoPE(MAX_HEAD_DIM, 1).inv_freq.numel() == MAX_HEAD_DIM // 2  # the largest head_dim builds
    assert check_count(2**20, "n") == 2**20 and check_count(2**40, "n", maximum=None) == 2**40
    # a memory cap, not a size: a long-context model may raise the lazily grown table's cap past 2²⁰
    assert StructuralRoPE(8, 1, max_table_extent=2**22).cache.max_extent == 2**22
    check_table_size("t", MAX_TABLE_ENTRIES // 4, 4)  # exactly at the bound: no error
    with pytest.raises(SpecError):
        check_table_size("t", MAX_TABLE_ENTRIES // 4 + 1, 4)


def test_lap_pe_and_aw_rope_shape_errors():
    from structpos.encoders.additive import LapPEEmbedding

    emb = LapPEEmbedding(k=2, dim=4)
    with pytest.raises(ShapeError, match="eigvecs must be a floating tensor"):
        emb(torch.zeros(3, 3))
    with pytest.raises(ShapeError, match="eigvals must have shape"):
        emb(torch.zeros(3, 2), torch.zeros(5))
    # learned phases: node features of the wrong width are a ShapeError, also on a graph without edges
    aw = AWRoPE(8, phase="learned", feature_dim=8)
    q = torch.randn(1, 2, 8)
    no_edges = torch.zeros(2, 0, dtype=torch.long)
    with pytest.raises(ShapeError, match="feature_dim = 8"):
        aw(q, q, no_edges, h=torch.randn(1, 4))
    qo, ko = aw(q, q, no_edges, h=torch.randn(1, 8))
    assert torch.equal(qo, q) and torch.equal(ko, q)  # no edge: nothing transported


@pytest.mark.parametrize("make,error,match", BAD_OPTIONS)
def test_bad_options_raise_the_project_error(make, error, match):
    with pytest.raises(error, match=match) as info:
        make()
    assert isinstance(info.value, StructposError) and isinstance(info.value, ValueError)  # old callers keep working


def test_bad_tensor_inputs_raise_shape_error():
    wire = WIRE(8, k=2)
    q = torch.randn(5, 1, 8)
    for bad in (float("nan"), float("inf"), -float("inf")):
        t = torch.zeros(5, 2)
        t[3, 1] = bad
        with pytest.raises(ShapeError, match=r"non-finite value in spectral coordinates at index \[3, 1\]"):
            wire(q, q, t)
    rope = StructuralRoPE(8, 2)
    c = torch.zeros(1, 5, 2)
    c[0, 2, 0] = math.nan
    with pytest.raises(ShapeError, match=r"non-finite value in coords at index \[0, 2, 0\]"):
        rope(q[None], q[None], c)
    with pytest.raises(ShapeError, match="decreases at index 2"):
        check_cu_seqlens(torch.tensor([0, 3, 2, 5]), 5)
    with pytest.raises(ShapeError, match="integer tensor"):
        check_cu_seqlens(torch.tensor([0.0, 5.0]), 5)
    with pytest.raises(ShapeError, match="missing levels"):
        HierarchicalRoPE(6, levels=("row", "column")).stack_levels({"row": [0]})
    with pytest.raises(ShapeError, match="integer distances"):
        SPDBias(2)(torch.zeros(2, 2))
    with pytest.raises(ShapeError, match="non-finite"):
        collate([torch.tensor([[0.0, math.inf]])])


def test_encoder_fuzz_harness_finds_no_escape_on_a_small_run():
    """benchmarks/fuzz_encoders.py (run it with --n 3000 for the full sweep) stays runnable and clean."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_encoders.py"
    spec = importlib.util.spec_from_file_location("fuzz_encoders", path)
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    report = fuzz.run(40, seed=0)
    assert report["escapes"] == 0, report["findings"]
    assert report["built"] > 0 and report["refused"] > 0  # both sides of the contract were exercised
