"""Learned and generalised rotations (STRING, ComRoPE, LieRE, GRAPE): relativity, RoPE reductions, exponentials, gradients."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import perturbed

from structpos.encoders import GRAPE, STRING, ComRoPE, GRAPEAdditive, LieRE, StructuralRoPE, forget_gate_coords
from structpos.encoders._rotary import rope_inv_freq
from structpos.encoders.grape import rodrigues_exp
from structpos.encoders.registry import ENCODERS, build
from structpos.exceptions import ShapeError, SpecError

D, H, L = 8, 2, 7


def omega(d: int = D, base: float = 10000.0) -> torch.Tensor:
    """RoPE's ω_j = base^(−2j/D), as the fp32 table every encoder (and HF) starts from."""
    expect = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    table = rope_inv_freq(d, base).double()
    torch.testing.assert_close(table, expect)
    return table


def plain_rope(x: torch.Tensor, coords: torch.Tensor, rates: torch.Tensor, layout: str = "half") -> torch.Tensor:
    """Independent RoPE: pair j of x (B, L, H, D) turns by Σ_a c_a rates[a, j]; pairs (j, j+P) or (2j, 2j+1)."""
    p = x.shape[-1] // 2
    phi = (coords.double() @ rates.double())[..., None, :]
    xd = x.double()
    if layout == "half":
        a, b = xd[..., :p], xd[..., p:]
    else:
        a, b = xd[..., 0::2], xd[..., 1::2]
    ra, rb = a * phi.cos() - b * phi.sin(), b * phi.cos() + a * phi.sin()
    out = torch.cat([ra, rb], -1) if layout == "half" else torch.stack([ra, rb], -1).flatten(-2)
    return out.to(x.dtype)


def onehot_rates(axes: list[int], num_axes: int, d: int = D) -> torch.Tensor:
    r = torch.zeros(num_axes, d // 2, dtype=torch.float64)
    r[torch.tensor(axes), torch.arange(d // 2)] = omega(d)
    return r


def scores(enc, q, k, c):
    qr, kr = enc(q, k, c)
    return torch.einsum("blhd,bmhd->bhlm", qr.double(), kr.double())


def qk(seed=0, dtype=torch.float32, heads=H, d=D, length=L):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, length, heads, d, generator=g, dtype=dtype), torch.randn(
        2, length, heads, d, generator=g, dtype=dtype
    )


def commuting_encoders(num_axes):
    torch.manual_seed(0)
    encs = {
        "string": perturbed(STRING(D, num_axes)),
        "string_interleaved": perturbed(STRING(D, num_axes, "interleaved", layout="interleaved")),
        # random blocks turn at most ~1 rad per unit coordinate, RoPE's highest frequency
        "comrope_ap_b2": ComRoPE(D, num_axes, "ap", block_size=2, init="random", init_std=0.3),
    }
    if D // 4 >= num_axes:  # "ap" needs a 4x4 block per axis (fewer would leave an axis ignored: refused)
        encs["comrope_ap_b4"] = ComRoPE(D, num_axes, "ap", block_size=4, init="random", init_std=0.2)
    encs["comrope_ld_b4"] = perturbed(ComRoPE(D, num_axes, "ld", block_size=4, init="random", init_std=0.2), std=0.1)
    encs["grape_commuting"] = perturbed(GRAPE(D, num_axes, "commuting"), std=0.1)
    return encs


# ----------------------------------------------------------------------------- relativity
@pytest.mark.parametrize("num_axes", [2, 3])
@pytest.mark.parametrize("name", list(commuting_encoders(2)))
def test_commuting_encoders_depend_only_on_coordinate_differences(name, num_axes):
    enc = commuting_encoders(num_axes).get(name)
    if enc is None:
        pytest.skip(f"{name} with {num_axes} axes at head_dim={D} is refused (an axis without a block)")
    q, k = qk()
    g = torch.Generator().manual_seed(3)
    c = torch.rand(2, L, num_axes, generator=g) * 6
    shift = torch.randn(num_axes, generator=g) * 5
    with torch.no_grad():
        s0, s1 = scores(enc, q, k, c), scores(enc, q, k, c + shift)
    torch.testing.assert_close(s1, s0, rtol=1e-5, atol=1e-5)
    assert (s0 - scores(StructuralRoPE(D, num_axes), q, k, c)).abs().max() > 1e-2  # not plain RoPE


def test_generators_commute_and_are_skew():
    for enc in commuting_encoders(3).values():
        g = enc.generators(torch.float64)
        assert torch.equal(g, -g.transpose(-1, -2)) or torch.allclose(g, -g.transpose(-1, -2), atol=1e-12)
        for a in range(3):
            for b in range(a):
                torch.testing.assert_close(g[a] @ g[b], g[b] @ g[a], rtol=0, atol=1e-10)


def test_liere_non_commuting_breaks_shift_invariance_and_one_axis_keeps_it():
    torch.manual_seed(0)
    liere = LieRE(D, 2, init="random", init_std=0.3)
    g = liere.generators(torch.float64)
    comm = (g[0] @ g[1] - g[1] @ g[0]).norm() / (g[0].norm() * g[1].norm())
    assert comm > 0.1  # the generators are far from commuting
    q, k = qk()
    c = torch.rand(2, L, 2, generator=torch.Generator().manual_seed(3)) * 4
    with torch.no_grad():
        s0, s1 = scores(liere, q, k, c), scores(liere, q, k, c + torch.tensor([2.0, -3.0]))
    assert (s1 - s0).abs().max() > 0.1 * s0.abs().max()  # a large, not a rounding, deviation
    one = LieRE(D, 1, init="random", init_std=0.3)  # one generator always commutes with itself
    with torch.no_grad():
        torch.testing.assert_close(
            scores(one, q, k, c[..., :1] + 4.5), scores(one, q, k, c[..., :1]), rtol=1e-5, atol=1e-5
        )


def test_grape_mixture_is_relative_along_one_axis_not_across_axes():
    torch.manual_seed(0)
    q, k = qk()
    pos = torch.arange(L, dtype=torch.float32)[None, :, None].expand(2, L, 1)
    mix = GRAPE(D, 1, "mixture", rank=3, init="random")
    planes = mix.generators(torch.float64)[0]
    assert (planes @ planes.T - planes.T @ planes).abs().max() < 1e-12  # (skew: trivially normal)
    with torch.no_grad():
        torch.testing.assert_close(scores(mix, q, k, pos + 9), scores(mix, q, k, pos), rtol=1e-5, atol=1e-4)
    two = perturbed(GRAPE(D, 2, "mixture", rank=3, init="random"), std=0.5)
    c = torch.rand(2, L, 2, generator=torch.Generator().manual_seed(3)) * 4
    with torch.no_grad():
        dev = (scores(two, q, k, c + torch.tensor([3.0, -2.0])) - scores(two, q, k, c)).abs().max()
    assert dev > 1e-2  # per-axis rates on non-commuting generators: only approximately relative


# ----------------------------------------------------------------------------- reductions to RoPE
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(
    ("dtype", "extent", "tol"),
    [(torch.float64, 1000, 1e-9), (torch.float32, 10, 2e-5)],  # fp32 angles up to 30 rad (LD sums 3 axes)
)
def test_identity_settings_are_exactly_rope(layout, dtype, extent, tol):
    q, k = qk(dtype=dtype)
    c = torch.randint(0, extent, (2, L, 3))
    sectioned = onehot_rates([0, 0, 1, 2], 3)  # near-equal sections: the first axis takes the remainder
    interleaved = onehot_rates([0, 1, 2, 0], 3)
    ref = plain_rope(q, c, sectioned, layout)
    cases = {
        "string": (STRING(D, 3, layout=layout), ref),
        "liere": (LieRE(D, 3, layout=layout), ref),
        "grape_commuting": (GRAPE(D, 3, layout=layout), ref),
        "grape_mixture": (GRAPE(D, 3, "mixture", layout=layout), ref),
        "comrope_ap_b2": (ComRoPE(D, 3, "ap", block_size=2, layout=layout), plain_rope(q, c, interleaved, layout)),
        # b = 4: pairs 2k, 2k+1 form block k, on axis k mod A; head_dim 8 has 2 blocks, so A = 2
        # (with 3 axes, axis 2 would get no block: refused, see test_encoders_misuse)
        "comrope_ap_b4": (
            ComRoPE(D, 2, "ap", block_size=4, layout=layout),
            plain_rope(q, c[..., :2], onehot_rates([0, 0, 1, 1], 2), layout),
        ),
        "comrope_ld_b4": (
            ComRoPE(D, 3, "ld", block_size=4, layout=layout),
            plain_rope(q, c, omega()[None].expand(3, -1), layout),
        ),  # θ = 1: every pair turns by ω_j Σ_a c_a
    }
    with torch.no_grad():
        for name, (enc, expect) in cases.items():
            got = enc.to(dtype)(q, k, c[..., : enc.num_axes])[0]
            torch.testing.assert_close(got, expect, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")
        # and the library's own RoPE agrees with the test's
        torch.testing.assert_close(StructuralRoPE(D, 3, layout=layout)(q, k, c)[0], ref, rtol=tol, atol=tol)


def test_liere_block_diagonal_generators_equal_rope_with_their_rates():
    g = torch.Generator().manual_seed(5)
    rates = torch.rand(2, D // 2, generator=g, dtype=torch.float64)
    liere = LieRE(D, 2, init="random")
    p = D // 2
    with torch.no_grad():
        liere.generator_params.zero_()
        j = torch.arange(p)
        liere.generator_params[:, j + p, j] = rates.float()  # W − Wᵀ: +r below, −r above (pair (j, j+P))
    q, k = qk()
    c = torch.rand(2, L, 2, generator=g) * 10
    with torch.no_grad():
        torch.testing.assert_close(liere(q, k, c)[0], plain_rope(q, c, rates), rtol=1e-5, atol=2e-5)


# ----------------------------------------------------------------------------- exponentials
def all_rotations(num_axes=2):
    encs = dict(commuting_encoders(num_axes))
    torch.manual_seed(2)
    encs["liere"] = LieRE(D, num_axes, init="random", init_std=0.3)
    encs["grape_mixture_r3"] = GRAPE(D, num_axes, "mixture", rank=3, init="random")
    encs["grape_mixture_r2"] = GRAPE(
        D, num_axes, "mixture", rank=num_axes, init="random"
    )  # rank 1 < 2 axes is refused (an unused axis)
    return {n: e.double() for n, e in encs.items()}


@pytest.mark.parametrize("name", list(all_rotations()))
def test_rotation_is_the_matrix_exponential_of_the_generators(name):
    enc = all_rotations()[name]
    c = torch.tensor([[0.7, -1.3], [2.5, 0.4]], dtype=torch.float64)
    with torch.no_grad():
        expect = torch.linalg.matrix_exp(torch.einsum("na,aij->nij", c, enc.generators(torch.float64)))
        got = enc.rotation(c)
        torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(got @ got.transpose(-1, -2), torch.eye(D, dtype=torch.float64).expand(2, D, D))


def test_comrope_angle_matrices_match_the_paper_constructions():
    torch.manual_seed(0)
    ap = ComRoPE(D, 2, "ap", block_size=4, init="random", init_std=1.0).double()
    ld = perturbed(ComRoPE(D, 2, "ld", block_size=4, init="random", init_std=1.0)).double()
    for enc in (ap, ld):
        blocks = [b - b.T for b in enc.blocks.detach()]  # P_k − P_kᵀ
        zero = torch.zeros(4, 4, dtype=torch.float64)
        for a in range(2):
            if enc.variant == "ap":  # block k belongs to axis k mod A
                dense = torch.block_diag(*[blocks[kk] if kk % 2 == a else zero for kk in range(2)])
            else:  # θ_a (P_k − P_kᵀ)
                dense = torch.block_diag(*[enc.scales[a].detach() * bk for bk in blocks])
            # channel order of the "half" layout: block k holds pairs 2k, 2k+1 = channels (2k, 2k+4, 2k+1, 2k+5)
            order = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])
            expect = torch.zeros(D, D, dtype=torch.float64)
            expect[order[:, None], order[None, :]] = dense
            torch.testing.assert_close(enc.generators(torch.float64)[a], expect)


def test_rodrigues_closed_form_matches_matrix_exp():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(3, 6, generator=g, dtype=torch.float64), torch.randn(3, 6, generator=g, dtype=torch.float64)
    theta = torch.tensor([0.3, -2.0, 7.5], dtype=torch.float64)
    gen = b[:, :, None] * a[:, None, :] - a[:, :, None] * b[:, None, :]
    torch.testing.assert_close(rodrigues_exp(a, b, theta), torch.linalg.matrix_exp(theta[:, None, None] * gen))
    torch.testing.assert_close(rodrigues_exp(a, 2 * a, theta), torch.eye(6, dtype=torch.float64).expand(3, 6, 6))


# ----------------------------------------------------------------------------- additive GRAPE
def test_grape_additive_equals_alibi():
    heads, length = 4, 6
    slopes = torch.tensor([2.0 ** (-8 * h / heads) for h in range(1, heads + 1)])  # ALiBi, power-of-two heads
    grape = GRAPEAdditive(D, 1, heads)
    pos = torch.arange(length)[None, :, None]
    bias = grape.bias(pos)[0].detach()
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    causal = j <= i
    alibi = -slopes[:, None, None] * (i - j)
    torch.testing.assert_close(bias[:, causal], alibi[:, causal])
    q, k = qk(heads=heads, length=length)
    kv = k[:, :, :2]  # two key heads: grouped-query attention
    with torch.no_grad():
        qh, kh = grape(q, kv)
    assert qh.shape[-1] == kh.shape[-1] == D + 2
    logits = torch.einsum("blhd,bmhd->bhlm", qh, kh.repeat_interleave(2, dim=2))
    plain = torch.einsum("blhd,bmhd->bhlm", q, kv.repeat_interleave(2, dim=2))
    torch.testing.assert_close(logits, plain + alibi, rtol=1e-5, atol=1e-5)


def test_grape_additive_equals_forgetting_transformer_decay():
    g = torch.Generator().manual_seed(0)
    length, heads = 6, 2
    f = torch.randn(1, length, heads, generator=g, dtype=torch.float64)
    grape = GRAPEAdditive(D, heads, heads, slopes=torch.eye(heads)).double()
    bias = grape.bias(forget_gate_coords(f))[0].detach()
    logf = torch.nn.functional.logsigmoid(f[0])  # (L, H)
    for h in range(heads):
        for i in range(length):
            for j in range(i + 1):
                assert bias[h, i, j].item() == pytest.approx(logf[j + 1 : i + 1, h].sum().item(), abs=1e-12)


def test_grape_additive_is_relative_in_several_axes():
    grape = perturbed(GRAPEAdditive(D, 3, H))
    q, k = qk()
    c = torch.rand(2, L, 3, generator=torch.Generator().manual_seed(1)) * 5
    with torch.no_grad():
        torch.testing.assert_close(
            scores(grape, q, k, c + torch.tensor([1.0, -4.0, 2.5])), scores(grape, q, k, c), rtol=1e-5, atol=1e-5
        )
    with pytest.raises(SpecError, match="not a rotation"):
        grape.rotate(q, c)
    torch._dynamo.reset()
    lifted = torch.compile(grape, fullgraph=True, backend="eager")(q, k, c)  # raises on any graph break
    torch.testing.assert_close(lifted[0], grape(q, k, c)[0])
    big = c * 1000  # bf16 would round these positions to 8 significant bits
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        inside = grape.bias(big)
    assert inside.dtype == torch.float32 and torch.equal(inside, grape.bias(big))


# ----------------------------------------------------------------------------- gradients
def gradcheck_cases():
    torch.manual_seed(0)
    return {
        "string": perturbed(STRING(4, 2, learnable_freqs=True)),
        # head_dim=4 has one 4x4 block: too few for two "ap" axes (axis 1 would be ignored), so
        # "ap" takes 2x2 blocks here and "ld" covers the 4x4 matrix exponential
        "comrope_ap": perturbed(ComRoPE(4, 2, "ap", block_size=2, init="random")),
        "comrope_ld_b2": perturbed(ComRoPE(4, 2, "ld", block_size=2, init="random")),
        "comrope_ld_b4": perturbed(ComRoPE(4, 2, "ld", block_size=4, init="random")),
        "liere": LieRE(4, 2, init="random", init_std=0.3),
        "grape_commuting": perturbed(GRAPE(4, 2), std=0.1),
        "grape_mixture": GRAPE(4, 2, "mixture", rank=2, init="random"),
        "grape_mixture_r2": GRAPE(4, 2, "mixture", rank=2, init="random"),
        "grape_additive": GRAPEAdditive(4, 2, 2),
    }


@pytest.mark.parametrize("name", list(gradcheck_cases()))
def test_gradcheck_every_learned_parameter(name):
    enc = gradcheck_cases()[name].double()
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 3, 2, 4, generator=g, dtype=torch.float64)
    k = torch.randn(1, 3, 2, 4, generator=g, dtype=torch.float64)
    c = torch.rand(1, 3, 2, generator=g, dtype=torch.float64) * 3
    params = dict(enc.named_parameters())
    assert params, name
    for pname, p in params.items():

        def f(value, pname=pname):
            qr, kr = torch.func.functional_call(enc, {pname: value}, (q, k, c))
            return qr, kr

        assert torch.autograd.gradcheck(f, (p.detach().clone().requires_grad_(True),)), pname


# ----------------------------------------------------------------------------- call shape
@pytest.mark.parametrize("name", list(all_rotations()))
def test_call_shape_layouts_mask_gqa_and_compile(name):
    torch.manual_seed(0)
    enc = all_rotations()[name].float()
    q, k = qk()
    c = torch.randint(0, 9, (2, L, 2))
    with torch.no_grad():
        qr, kr = enc(q, k, c)
        torch.testing.assert_close(qr.norm(dim=-1), q.norm(dim=-1), rtol=1e-5, atol=1e-5)  # a rotation
        enc.qk_layout = "bhld"  # heads before tokens
        qh, _ = enc(q.transpose(1, 2), k.transpose(1, 2), c)
        enc.qk_layout = "blhd"
        torch.testing.assert_close(qh.transpose(1, 2), qr)
        mask = torch.rand(2, L, generator=torch.Generator().manual_seed(1)) > 0.5
        qm, _ = enc(q, k, c, mask=mask)
        torch.testing.assert_close(qm[~mask], q[~mask])  # padding: the identity
        torch.testing.assert_close(qm[mask], qr[mask])
        _, k1 = enc(q, k[:, :5, :1], c, k_coords=c[:, :5])  # fewer key tokens and heads
        torch.testing.assert_close(k1, kr[:, :5, :1])
        packed, _ = enc(q[0], k[0], cu_seqlens=torch.tensor([0, 3, L]))
        torch.testing.assert_close(packed[3:], enc(q[0, 3:], k[0, 3:])[0])
        bf16, _ = enc(q.bfloat16(), k.bfloat16(), c)  # fp32 exponentials, bf16 product
        assert bf16.dtype == torch.bfloat16
        torch.testing.assert_close(bf16.float(), qr, rtol=0.02, atol=0.05)
        with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast reaches the products, not the exponentials
            auto, _ = enc(q, k, c * 100)
        torch.testing.assert_close(auto.float(), enc(q, k, c * 100)[0], rtol=0.02, atol=0.05)
    torch._dynamo.reset()
    compiled = torch.compile(enc, fullgraph=True, backend="eager")  # raises on any graph break
    out = compiled(q, k, c.float())
    torch.testing.assert_close(out[0], enc(q, k, c.float())[0], rtol=1e-5, atol=1e-5)


def test_inductor_fullgraph_compile_of_a_matrix_exponential_encoder():
    """The backends above are "eager" (graph breaks only); one real inductor build, ~20 s on a CPU."""
    torch._dynamo.reset()
    enc = ComRoPE(D, 2, block_size=4, init="random", init_std=0.3)
    q, k = qk()
    c = torch.rand(2, L, 2) * 4
    out = torch.compile(enc, fullgraph=True)(q, k, c)
    torch.testing.assert_close(out[0], enc(q, k, c)[0], rtol=1e-5, atol=1e-5)


def test_bad_inputs_raise_structpos_errors():
    enc = STRING(D, 2)
    q, k = qk()
    with pytest.raises(ShapeError, match="num_axes = 2"):
        enc(q, k, torch.zeros(2, L, 3))
    with pytest.raises(ShapeError, match="non-finite"):
        enc(q, k, torch.full((2, L, 2), math.nan))
    with pytest.raises(ShapeError, match="same tokens"):
        enc(q, k[:, :3])
    with pytest.raises(SpecError, match="block_size"):
        ComRoPE(D, 2, block_size=3)
    with pytest.raises(SpecError, match="rank"):
        GRAPE(D, 2, "mixture", rank=3, init="rope")
    with pytest.raises(SpecError, match="per_head"):
        STRING(D, 2, "per_head")  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="slopes"):
        GRAPEAdditive(D, 2, 4, slopes=torch.ones(3))


@pytest.mark.parametrize("name", ["string", "comrope", "liere", "grape", "grape_additive"])
def test_registry_builds_and_validates(name):
    opts = {"head_dim": 8, "num_axes": 2}
    if name == "grape_additive":
        opts["num_heads"] = 2
    enc = build(name, **opts)
    assert type(enc).__name__ == ENCODERS.load(name).__name__
    if name == "comrope":
        with pytest.raises(SpecError, match="variant"):
            build(name, variant="xx", **opts)


# ----------------------------------------------------------------------------- HF integration
def tiny_llama(attn: str):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=0,
        initializer_range=0.3,
    )
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_installable_into_hf_models(attn):
    from structpos.integrations.transformers import install_structural_rope

    ids = torch.randint(1, 97, (2, 10), generator=torch.Generator().manual_seed(2))
    c = torch.randint(0, 9, (2, 10, 3), generator=torch.Generator().manual_seed(1))
    c[..., 0] = torch.arange(10)
    index = torch.arange(10)[None, :, None].expand(2, 10, 3)
    with torch.no_grad():
        model = tiny_llama(attn)
        stock = model(ids).logits
        patch = install_structural_rope(model, 3)
        rope_logits = model(ids, position_ids=c).logits
        patch.remove()
        model = tiny_llama(attn)  # a fresh model: the first patch selected a structural attention
        string = STRING(8, 3, qk_layout="bhld")
        install_structural_rope(model, 3, rope=string)
        assert model.config._attn_implementation == f"structpos_{attn}"
        torch.testing.assert_close(model(ids, position_ids=index).logits, stock, rtol=0, atol=1e-5)
        torch.testing.assert_close(model(ids, position_ids=c).logits, rope_logits, rtol=0, atol=1e-5)  # P = I
        perturbed(string, std=0.2)
        out = model(ids, position_ids=c).logits
        assert (out - rope_logits).abs().max() > 1e-3  # the learned basis is used
        torch.testing.assert_close(model(ids, position_ids=c + torch.tensor([4, 2, 7])).logits, out, rtol=0, atol=1e-4)
        # decoding rotates the new queries and the cached keys: the same tokens as recomputing everything
        cached = model.generate(ids[:1], max_new_tokens=4, do_sample=False, use_cache=True)
        recomputed = model.generate(ids[:1], max_new_tokens=4, do_sample=False, use_cache=False)
        assert cached.shape == (1, 14) and torch.equal(cached, recomputed)


# ----------------------------------------------------------------------------- CUDA
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", [*all_rotations(), "grape_additive"])
def test_cuda_matches_cpu_with_fp32_exponentials_under_autocast(name):
    torch.manual_seed(0)
    enc = perturbed(GRAPEAdditive(D, 2, H)) if name == "grape_additive" else all_rotations()[name].float()
    q, k = qk()
    c = torch.rand(2, L, 2, generator=torch.Generator().manual_seed(1)) * 8
    with torch.no_grad():
        cpu = enc(q, k, c)
    enc = enc.cuda()
    qg, kg, cg = q.cuda().requires_grad_(), k.cuda(), c.cuda()
    out = enc(qg, kg, cg)
    torch.testing.assert_close(out[0].cpu(), cpu[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out[1].cpu(), cpu[1], rtol=1e-4, atol=1e-4)
    (out[0].square().sum() + out[1].sum()).backward()
    for pname, p in enc.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        half = enc(q.cuda().bfloat16(), k.cuda().bfloat16(), cg)
    assert half[0].dtype == torch.bfloat16
    torch.testing.assert_close(half[0].float().cpu(), cpu[0], rtol=0.02, atol=0.05)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_inductor_fullgraph_compile():
    torch._dynamo.reset()
    enc = perturbed(STRING(D, 2)).cuda()
    q, k = (t.cuda() for t in qk())
    c = torch.rand(2, L, 2, device="cuda") * 8
    out = torch.compile(enc, fullgraph=True)(q, k, c)
    torch.testing.assert_close(out[0], enc(q, k, c)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", ["liere_rope", "liere_random", "comrope_b4"])
@pytest.mark.parametrize("extent", [1e4, 1e5])
def test_float32_exponentials_stay_rotations_at_long_range(make, extent):
    """float32 ``matrix_exp`` drifts off the rotation group as ``‖Σ c_a S_a‖`` grows (``RᵀR − I`` ~1e-3
    at 10⁴, ~1e-2 at 10⁵): it would scale q and k. The encoders take the exponential in float64 and
    cast it: float32 inputs get the float64 result to float32 rounding (huge coordinates:
    ``test_encoders_learned_rotary_precision.py``)."""
    torch.manual_seed(1)
    enc = {
        "liere_rope": lambda: LieRE(8, 2),
        "liere_random": lambda: LieRE(8, 2, init="random", init_std=0.3),
        "comrope_b4": lambda: ComRoPE(8, 2, "ap", block_size=4, init="random", init_std=0.3),
    }[make]()
    c = torch.tensor([[extent, -0.6 * extent], [0.25 * extent, extent]])
    x = torch.randn(2, 3, 8)  # (L, H, D)
    with torch.no_grad():
        y32 = enc._transform(x, c)
        y64 = enc.double()._transform(x.double(), c.double())
    norms = y32.norm(dim=-1) / x.norm(dim=-1)
    assert (norms - 1).abs().max() < 1e-5, (norms - 1).abs().max()
    raw = torch.linalg.matrix_exp(torch.einsum("na,aij->nij", c, enc.float().generators(torch.float32)))
    raw_drift = (raw.transpose(-1, -2) @ raw - torch.eye(8)).abs().max()
    assert raw_drift > 1e-4  # the case is a real one: the bare float32 exponential drifts here
    assert (y32.double() - y64).abs().max() < 1e-5 * (y64.norm(dim=-1).max())


def test_polar_steps_leave_gradients_of_exact_rotations_unchanged():
    """Along skew directions (the generators' parameters enter as ``W − Wᵀ``) the corrected
    exponential has the exponential's derivative."""
    from structpos.encoders._learned import rotation_exp, skew

    torch.manual_seed(2)
    w32 = torch.randn(3, 6, 6, requires_grad=True)
    w64 = w32.detach().double().requires_grad_()
    probe = torch.randn(3, 6, 6)
    (rotation_exp(skew(w32)) * probe).sum().backward()
    (torch.linalg.matrix_exp(skew(w64)) * probe.double()).sum().backward()
    torch.testing.assert_close(w32.grad.double(), w64.grad, rtol=1e-4, atol=1e-5)
