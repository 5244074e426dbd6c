"""Structural RoPE inside tiny random-init HF decoders (Llama, Qwen2, Qwen3, Mistral, Gemma 1/3, Phi-3) and Qwen-VL ids.

Runs on transformers 4.5x and 5.x; the only version branches are config spellings (``rope_scaling``
vs ``rope_parameters``) and the Qwen2-VL rotary output (per axis on 4.5x, already split on 5.x).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import TINY_DECODER

transformers = pytest.importorskip("transformers")

from structpos.encoders import StructuralRoPE
from structpos.exceptions import ShapeError, SpecError
from structpos.integrations.flex import tree_distance_score_mod
from structpos.integrations.transformers import (
    continue_axis0,
    install_structural_rope,
    qwen_vl_position_ids,
    register_structural_attention,
)

TF5 = int(transformers.__version__.split(".")[0]) >= 5

warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
warnings.filterwarnings("ignore", message=".*attention mask.*")

V, L, A = 97, 12, 3
COMMON = {**TINY_DECODER, "vocab_size": V}  # large enough that positions visibly change the logits
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 8}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None, "head_dim": 8}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 8}),
}


def rope_kwargs(params: dict) -> dict:
    """Config keywords of a rope setup: 5.x ``rope_parameters`` (theta inside), 4.5x ``rope_scaling`` + ``rope_theta``."""
    if TF5:
        return {"rope_parameters": params}
    scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    return {"rope_scaling": scaling, "rope_theta": params["rope_theta"]}


def make_model(family: str, attn: str = "sdpa", seed: int = 0, **extra):
    cfg_name, model_name, kw = FAMILIES[family]
    cfg = getattr(transformers, cfg_name)(**{**COMMON, **kw, **extra})
    cfg._attn_implementation = attn
    torch.manual_seed(seed)
    return getattr(transformers, model_name)(cfg).eval()


def index_coords(B, n, axes=A):
    return torch.arange(n)[None, :, None].expand(B, n, axes)


def struct_coords(B, n, seed=1):
    g = torch.Generator().manual_seed(seed)
    c = torch.randint(0, 9, (B, n, A), generator=g)
    c[..., 0] = torch.arange(n)  # axis 0 = sequence order, axes 1.. = structure
    return c


def ids(B=2, n=L, seed=2):
    return torch.randint(1, V, (B, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_identity_reduction_and_relative_invariance(family, attn):
    model = make_model(family, attn)
    x = ids()
    with torch.no_grad():
        ref = model(x).logits
        install_structural_rope(model, A, "sectioned")
        same = model(x, position_ids=index_coords(2, L)).logits
        c = struct_coords(2, L)
        out = model(x, position_ids=c).logits
        shifted = model(x, position_ids=c + torch.tensor([5, 3, 11])).logits
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)
    assert (out - ref).abs().max() > 1e-4  # structure changes the logits
    torch.testing.assert_close(shifted, out, rtol=0, atol=1e-5)


@pytest.mark.parametrize("allocation", ["interleaved", "per_head", "mixed"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_every_allocation_reduces_and_is_relative(allocation, attn):
    model = make_model("llama", attn)
    x = ids()
    opts = {"sections": [2, 2, 0]} if allocation == "per_head" else {}  # per-head: kv groups of 2 heads
    with torch.no_grad():
        ref = model(x).logits
        patch = install_structural_rope(model, A, allocation, **opts)
        if allocation == "per_head":
            assert model.config._attn_implementation == f"structpos_{attn}"
        same = model(x, position_ids=index_coords(2, L)).logits
        c = struct_coords(2, L)
        out = model(x, position_ids=c).logits
        shifted = model(x, position_ids=c + 4).logits
    tol = 1e-5 if allocation != "mixed" else 2e-5
    if allocation != "mixed":  # mixed rows need not sum to 1, so equal axes are not 1-D RoPE
        torch.testing.assert_close(same, ref, rtol=0, atol=tol)
    torch.testing.assert_close(shifted, out, rtol=0, atol=tol)
    assert patch.rope.allocation == allocation


def test_hierarchical_rope_through_the_hf_path():
    from structpos.encoders import HierarchicalRoPE

    model = make_model("qwen3", "sdpa")
    x = ids()
    with torch.no_grad():
        ref = model(x).logits
        rope = HierarchicalRoPE(8, "document", inv_freq=model.model.rotary_emb.inv_freq, qk_layout="bhld")
        install_structural_rope(model, 3, rope=rope)
        same = model(x, position_ids=index_coords(2, L)).logits
        c = struct_coords(2, L)
        out, shifted = model(x, position_ids=c).logits, model(x, position_ids=c + 6).logits
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(shifted, out, rtol=0, atol=1e-5)
    assert (out - ref).abs().max() > 1e-4


def test_per_head_matches_a_direct_attention_reference():
    """Per-head rotation inside the attention function equals rotating q/k by hand with StructuralRoPE."""
    model = make_model("llama", "eager", num_hidden_layers=1)
    x, c = ids(B=1), struct_coords(1, L)
    attn = model.model.layers[0].self_attn
    with torch.no_grad():
        patch = install_structural_rope(model, A, "per_head", sections=[2, 2, 0])
        captured = {}
        h = model.model.layers[0].register_forward_hook(lambda m, a, o: captured.setdefault("out", o))
        model(x, position_ids=c)
        h.remove()
        hidden = model.model.layers[0].input_layernorm(model.model.embed_tokens(x))
        q = attn.q_proj(hidden).view(1, L, 4, 8)
        k = attn.k_proj(hidden).view(1, L, 2, 8)
        v = attn.v_proj(hidden).view(1, L, 2, 8).transpose(1, 2)
        rope = StructuralRoPE(8, A, "per_head", sections=[2, 2, 0], num_heads=4, inv_freq=patch.rope.inv_freq)
        qr, kr = rope(q, k, c)
        qr, kr = qr.transpose(1, 2), kr.transpose(1, 2).repeat_interleave(2, dim=1)
        v = v.repeat_interleave(2, dim=1)
        o = torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=True)
        o = attn.o_proj(o.transpose(1, 2).reshape(1, L, 32))
        # the per-head output also differs from 1-D RoPE on the same coordinates
        expected = model.model.embed_tokens(x) + o
    out = captured["out"]
    out = out[0] if isinstance(out, tuple) else out
    expected = expected + model.model.layers[0].mlp(model.model.layers[0].post_attention_layernorm(expected))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_training_step(family):
    model = make_model(family, "sdpa").train()
    install_structural_rope(model, A, "sectioned")
    x, c = ids(), struct_coords(2, L)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss0 = model(x, position_ids=c, labels=x).loss
    loss0.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        loss1 = model(x, position_ids=c, labels=x).loss
    assert loss1 < loss0


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("allocation", ["sectioned", "per_head"])
def test_generate_with_kv_cache_follows_the_continuation_rule(family, allocation):
    model = make_model(family, "sdpa")
    opts = {"sections": [2, 2, 0]} if allocation == "per_head" else {}
    patch = install_structural_rope(model, A, allocation, **opts)
    x, c = ids(), struct_coords(2, L)
    new = 5
    patch.set_coordinates(c)
    with torch.no_grad():
        gen = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=new,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
            use_cache=True,
        )
    seq = gen.sequences
    assert seq.shape == (2, L + new)
    step_logits = torch.stack(gen.logits, dim=1)  # (B, new, V)
    # reference: one full forward (no cache) with the documented rule: axis 0 continues, others copied
    full = torch.cat([c, continue_axis0(c[:, -1], new)], dim=1)
    with torch.no_grad():
        ref = model(seq, position_ids=full[:, : L + new], use_cache=False).logits
    torch.testing.assert_close(step_logits, ref[:, L - 1 : L + new - 1], rtol=0, atol=1e-4)
    # and the cache path differs from giving the new tokens 1-D positions on every axis
    other = torch.cat([c, index_coords(2, L + new)[:, L:]], dim=1)
    with torch.no_grad():
        alt = model(seq, position_ids=other, use_cache=False).logits
    assert (alt[:, L:] - ref[:, L:]).abs().max() > 1e-4


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_generate_without_coordinates_is_the_stock_model(family):
    x = ids()
    kw = {
        "attention_mask": torch.ones_like(x),
        "max_new_tokens": 4,
        "do_sample": False,
        "output_logits": True,
        "return_dict_in_generate": True,
    }
    with torch.no_grad():
        ref = make_model(family, "sdpa").generate(x, **kw)
        model = make_model(family, "sdpa")
        install_structural_rope(model, A)
        out = model.generate(x, **kw)
    assert torch.equal(out.sequences, ref.sequences)
    torch.testing.assert_close(torch.stack(out.logits, 1), torch.stack(ref.logits, 1), rtol=0, atol=1e-5)


def test_custom_rule_and_explicit_decode_coordinates():
    model = make_model("llama", "sdpa")
    patch = install_structural_rope(model, A, rule=lambda last, n: last[:, None, :].expand(-1, n, -1) + 2)
    x, c = ids(B=1), struct_coords(1, L)
    with torch.no_grad():
        out = model(x[:, :-1], position_ids=c[:, :-1], use_cache=True)
        past = (
            {"cache": out.cache}
            if getattr(out, "cache", None) is not None
            else {"past_key_values": out.past_key_values}
        )
        step = model(x[:, -1:], **past).logits  # transformers 5.x names it cache, 4.5x past_key_values
        full = torch.cat([c[:, :-1], c[:, -2:-1] + 2], dim=1)
        ref = model(x, position_ids=full, use_cache=False).logits
    torch.testing.assert_close(step[:, -1], ref[:, -1], rtol=0, atol=1e-4)
    assert patch.state.keys.shape == (1, L, A)


@pytest.mark.parametrize("bad", ["axes", "dtype", "length"])
def test_bad_coordinates_raise_before_attention(bad):
    model = make_model("llama", "sdpa")
    install_structural_rope(model, A)
    calls = []
    model.model.layers[0].self_attn.register_forward_pre_hook(lambda *a: calls.append(1))
    x = ids()
    c = {
        "axes": torch.zeros(2, L, 2, dtype=torch.int64),
        "dtype": torch.zeros(2, L, A, dtype=torch.float16),
        "length": torch.zeros(2, L + 1, A, dtype=torch.int64),
    }[bad]
    with pytest.raises(ShapeError, match=r"\(2, 12, 3\)") as err:
        model(x, position_ids=c)
    assert str(tuple(c.shape)) in str(err.value)
    assert not calls


def test_flex_attention_function_equals_dense_bias_reference():
    """``structpos_flex`` with a tree-distance score_mod equals stock SDPA with the dense (causal + bias) mask."""
    parent = [-1, 0, 1, 1, 0, 4, 4, 6, 0, 8, 9, 9]
    node = torch.tensor([0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 10, 11])
    from structpos.encoders import tree_distance

    dist = torch.as_tensor(tree_distance(parent))[node][:, node].float()
    slopes = torch.full((4,), 0.25)
    model = make_model("llama", "sdpa", num_hidden_layers=1)
    x = ids()
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    dense = (-0.25 * dist).masked_fill(~causal, float("-inf"))[None, None].expand(2, 1, L, L)
    with torch.no_grad():
        ref = model(x, attention_mask=dense.contiguous()).logits
        patch = install_structural_rope(model, A)
        model.set_attn_implementation(register_structural_attention("flex"))
        patch.set_bias(score_mod=tree_distance_score_mod(parent, node[None].expand(2, -1), slopes=slopes))
        out = model(x, position_ids=index_coords(2, L)).logits
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)


# --------------------------------------------------------------------------------- Qwen-VL
@pytest.mark.parametrize("which", ["qwen2_vl", "qwen3_vl"])
def test_qwen_vl_position_ids_equal_structural_rope(which):
    """Qwen-VL's own rotary on our (3, B, L) ids == StructuralRoPE (sectioned / interleaved) on the same coords."""
    import numpy as np

    if which == "qwen2_vl":
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig as Cfg
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding as Rot

        section, alloc = [2, 3, 3], "sectioned"
    else:
        from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig as Cfg
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding as Rot

        section, alloc = [4, 2, 2], "interleaved"
    cfg = Cfg(
        hidden_size=64,
        num_attention_heads=4,
        head_dim=16,
        num_key_value_heads=2,
        **rope_kwargs({"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section}),
    )
    rot = Rot(cfg)

    def split_sections(t):  # 4.5x Qwen2-VL returns one cos per axis; apply_multimodal_rotary_pos_emb splits them
        if t.dim() == 3:
            return t
        return torch.cat([m[i % 3] for i, m in enumerate(t.split(section * 2, dim=-1))], dim=-1)

    tok = {"row": np.array([-1, 0, 0, 0, 1, 1, 2, 2]), "col": np.array([-1, 0, 1, 2, 0, 2, 1, 1])}
    pos = qwen_vl_position_ids(tok, "table")
    assert pos.shape == (3, 1, 8)
    cos, sin = map(split_sections, rot(torch.zeros(1, 8, 64), pos))
    rope = StructuralRoPE(16, 3, alloc, sections=section)
    ref_cos, ref_sin = rope.cos_sin(pos.permute(1, 2, 0))
    torch.testing.assert_close(cos, torch.cat([ref_cos[..., 0, :]] * 2, -1), rtol=0, atol=1e-6)
    torch.testing.assert_close(sin, torch.cat([ref_sin[..., 0, :]] * 2, -1), rtol=0, atol=1e-6)
    # text-only input (equal axes) reduces to 1-D RoPE
    idx = torch.arange(8)
    cos1 = split_sections(rot(torch.zeros(1, 8, 64), idx[None, None].expand(3, 1, 8))[0])
    ref1, _ = StructuralRoPE(16, 1).cos_sin(idx[None, :, None])
    torch.testing.assert_close(cos1, torch.cat([ref1[..., 0, :]] * 2, -1), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "rope_parameters",
    [
        {"rope_type": "linear", "factor": 4.0, "rope_theta": 5000.0},
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
            "rope_theta": 500000.0,
        },
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 10000.0},
    ],
)
def test_model_rope_theta_and_scaling_are_kept(rope_parameters):
    model = make_model("llama", "sdpa", **rope_kwargs(rope_parameters))
    x = ids()
    with torch.no_grad():
        ref = model(x).logits
        patch = install_structural_rope(model, A, "interleaved", scale_axes="all")
        same = model(x, position_ids=index_coords(2, L)).logits
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)
    if rope_parameters["rope_type"] == "yarn":
        assert patch.body.rotary_emb.attention_scaling != 1.0


@pytest.mark.parametrize(
    "rope_parameters",
    [
        {"rope_type": "linear", "factor": 4.0, "rope_theta": 5000.0},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 10000.0},
    ],
)
def test_model_rope_scaling_stays_on_the_token_axis(rope_parameters):
    """scale_axes="token" (the default): axis 0 rotates with the model's scaled table, the structural axes with the
    unscaled rope_theta table; HF's own rotary gives the reference for both."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    model = make_model("llama", "sdpa", rope_parameters=rope_parameters)
    body = model.model
    scaled, factor = ROPE_INIT_FUNCTIONS[rope_parameters["rope_type"]](model.config, "cpu")
    theta = rope_parameters["rope_theta"]
    plain = 1.0 / theta ** (torch.arange(0, 2 * scaled.numel(), 2).float() / (2 * scaled.numel()))
    patch = install_structural_rope(model, A, "interleaved")
    c = struct_coords(1, L)
    cos, sin = body.rotary_emb(torch.zeros(1, L, 8), c)
    axes = torch.arange(scaled.numel()) % A  # interleaved: pair j follows axis j mod A
    freq = torch.where(axes == 0, scaled, plain)
    ang = c[0][:, axes].float() * freq
    torch.testing.assert_close(cos[0], torch.cat([ang.cos(), ang.cos()], -1) * factor, rtol=0, atol=1e-5)
    torch.testing.assert_close(sin[0], torch.cat([ang.sin(), ang.sin()], -1) * factor, rtol=0, atol=1e-5)
    assert torch.equal(patch.rope.axis_inv_freq[0], scaled) and torch.equal(patch.rope.axis_inv_freq[1], plain)


def test_dynamic_rope_scaling_cannot_stay_on_the_token_axis():
    from structpos.exceptions import SpecError

    model = make_model("llama", "sdpa", rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4})
    with pytest.raises(SpecError, match="rope_type 'dynamic' cannot be kept on the token axis"):
        install_structural_rope(model, A)
    install_structural_rope(model, A, scale_axes="all")  # its initial frequencies on every axis


def test_partial_rotary_model():
    """StableLM rotates only part of each head (partial_rotary_factor); the drop-in keeps that split."""
    cfg = transformers.StableLmConfig(**{**COMMON, "partial_rotary_factor": 0.5})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.StableLmForCausalLM(cfg).eval()
    x = ids()
    with torch.no_grad():
        ref = model(x).logits
        patch = install_structural_rope(model, 2)
        assert patch.rope.head_dim == 4  # 8-wide heads, half rotated
        same = model(x, position_ids=index_coords(2, L, 2)).logits
        c = struct_coords(2, L)[..., :2]
        out, shifted = model(x, position_ids=c).logits, model(x, position_ids=c + 3).logits
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(shifted, out, rtol=0, atol=1e-5)


def test_flex_attention_function_generate_with_cache():
    """Decode steps through ``structpos_flex`` (score_mod on absolute indices) equal one full forward."""
    parent = [-1, 0, 1, 1, 0, 4, 4, 6, 0, 8, 9, 9, 9, 12, 12, 0, 15]
    new = 4
    node = torch.tensor([0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 14, 15, 16])  # prompt 12 + 4 generated
    model = make_model("mistral", "sdpa")
    patch = install_structural_rope(model, A)
    model.set_attn_implementation(register_structural_attention("flex"))
    patch.set_bias(score_mod=tree_distance_score_mod(parent, node[None].expand(2, -1), slopes=torch.full((4,), 0.3)))
    x = ids()
    with torch.no_grad():
        gen = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=new,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
        # no structural coordinates were given: 1-D positions on every axis, as the stock model
        full = model(gen.sequences, position_ids=index_coords(2, L + new), use_cache=False).logits
    torch.testing.assert_close(torch.stack(gen.logits, 1), full[:, L - 1 : L + new - 1], rtol=0, atol=1e-4)


# ---------------------------------------------------------------------- several rotary tables
def make_gemma3(layer_types, attn="sdpa", seed=0):
    """Tiny Gemma 3: sliding layers rotate with base 10 000, full layers with 1 000 000 (both versions' defaults)."""
    kw = {**COMMON, "head_dim": 8, "sliding_window": 4, "layer_types": list(layer_types)}
    kw["num_hidden_layers"] = len(layer_types)
    cfg = transformers.Gemma3TextConfig(**kw)
    cfg._attn_implementation = attn
    torch.manual_seed(seed)
    return transformers.Gemma3ForCausalLM(cfg).eval()


def gemma3_table(model, layer_type):
    """The model's own frequencies of a layer type (4.5x: two modules; 5.x: per-type buffers)."""
    rot = model.model.rotary_emb
    if hasattr(rot, f"{layer_type}_inv_freq"):
        return getattr(rot, f"{layer_type}_inv_freq")
    return (model.model.rotary_emb_local if layer_type == "sliding_attention" else rot).inv_freq


@pytest.mark.parametrize("allocation", ["sectioned", "per_head"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gemma3_token_index_coordinates_give_the_stock_model(allocation, attn):
    """Sliding and full layers each keep their own base: index coordinates reproduce the stock logits."""
    model = make_gemma3(["sliding_attention", "full_attention"], attn)
    x = ids()
    opts = {"sections": [2, 2, 0]} if allocation == "per_head" else {}
    with torch.no_grad():
        tables = {lt: gemma3_table(model, lt).clone() for lt in ("sliding_attention", "full_attention")}
        ref = model(x).logits
        patch = install_structural_rope(model, A, allocation, **opts)
        same = model(x, position_ids=index_coords(2, L)).logits
        c = struct_coords(2, L)
        out, shifted = model(x, position_ids=c).logits, model(x, position_ids=c + 7).logits
    assert not torch.equal(tables["sliding_attention"], tables["full_attention"])
    for lt, inv in tables.items():
        torch.testing.assert_close(patch.ropes[lt].inv_freq, inv.float(), rtol=0, atol=0)
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(shifted, out, rtol=0, atol=1e-5)
    assert (out - ref).abs().max() > 1e-4
    patch.remove()
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, ref, rtol=0, atol=0)


@pytest.mark.parametrize("layer_type", ["sliding_attention", "full_attention"])
@pytest.mark.parametrize("allocation", ["sectioned", "per_head"])
def test_gemma3_structure_changes_the_logits_of_each_layer_type(layer_type, allocation):
    """A one-layer model of each type: structural coordinates must reach that layer (4.57 left sliding layers 1-D)."""
    model = make_gemma3([layer_type])
    x = ids()
    opts = {"sections": [2, 2, 0]} if allocation == "per_head" else {}
    c = struct_coords(2, L)
    with torch.no_grad():
        ref = model(x).logits
        install_structural_rope(model, A, allocation, **opts)
        out = model(x, position_ids=c).logits
        same = model(x, position_ids=index_coords(2, L)).logits
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)
    assert (out - ref).abs().max() > 1e-3


def test_gemma3_ready_rope_is_copied_onto_each_table():
    from structpos.encoders import HierarchicalRoPE

    model = make_gemma3(["sliding_attention", "full_attention"])
    x = ids()
    with torch.no_grad():
        ref = model(x).logits
        rope = HierarchicalRoPE(8, "document", qk_layout="bhld")  # base 10 000: the sliding table
        patch = install_structural_rope(model, 3, rope=rope)
        same = model(x, position_ids=index_coords(2, L)).logits
    assert patch.ropes["sliding_attention"] is rope and patch.ropes["full_attention"] is not rope
    assert patch.ropes["full_attention"].levels == rope.levels
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)


def test_gemma3_generate_with_cache_follows_the_continuation_rule():
    model = make_gemma3(["sliding_attention", "full_attention"])
    patch = install_structural_rope(model, A)
    x, c = ids(), struct_coords(2, L)
    new = 3
    patch.set_coordinates(c)
    with torch.no_grad():
        gen = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=new,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
        full = torch.cat([c, continue_axis0(c[:, -1], new)], dim=1)
        ref = model(gen.sequences, position_ids=full, use_cache=False).logits
    torch.testing.assert_close(torch.stack(gen.logits, 1), ref[:, L - 1 : L + new - 1], rtol=0, atol=1e-4)


# ------------------------------------------------------------------ fused qkv_proj (Phi-3)
def make_phi3(attn="sdpa", **extra):
    cfg = transformers.Phi3Config(**{**COMMON, "bos_token_id": 1, "eos_token_id": 2, **extra})
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return transformers.Phi3ForCausalLM(cfg).eval()


@pytest.mark.parametrize("partial", [1.0, 0.5])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_phi3_fused_qkv_per_head_rotates_like_a_direct_reference(partial, attn):
    """Phi-3 projects q, k, v with one qkv_proj; per-head allocation must still rotate every head.

    Reference: index coordinates give the stock model; structure changes the logits; and the
    first layer's attention output equals q/k rotated by hand with StructuralRoPE (partial rotary:
    only the first ``rotary_ndims`` channels)."""
    model = make_phi3(attn, partial_rotary_factor=partial, num_hidden_layers=1)
    x, c = ids(B=1), struct_coords(1, L)
    attn_mod = model.model.layers[0].self_attn
    with torch.no_grad():
        ref = model(x).logits
        patch = install_structural_rope(model, A, "per_head", sections=[2, 2, 0])
        same = model(x, position_ids=index_coords(1, L)).logits
        out = model(x, position_ids=c).logits
        captured = {}
        h = attn_mod.register_forward_hook(lambda m, a, o: captured.update(o=o[0]))
        model(x, position_ids=c)
        h.remove()
        hidden = model.model.layers[0].input_layernorm(model.model.embed_tokens(x))
        qkv = attn_mod.qkv_proj(hidden)
        q, k, v = qkv.split([32, 16, 16], dim=-1)
        q, k, v = q.view(1, L, 4, 8), k.view(1, L, 2, 8), v.view(1, L, 2, 8)
        rdim = int(8 * partial)
        rope = StructuralRoPE(rdim, A, "per_head", sections=[2, 2, 0], num_heads=4, inv_freq=patch.rope.inv_freq)
        qr, kr = rope(q[..., :rdim], k[..., :rdim], c)
        qr, kr = torch.cat([qr, q[..., rdim:]], -1), torch.cat([kr, k[..., rdim:]], -1)
        qr, kr, v = (t.transpose(1, 2) for t in (qr, kr, v))
        o = F_sdpa(qr, kr.repeat_interleave(2, 1), v.repeat_interleave(2, 1))
        expected = attn_mod.o_proj(o.transpose(1, 2).reshape(1, L, 32))
    assert patch.rope.head_dim == rdim
    torch.testing.assert_close(same, ref, rtol=0, atol=1e-5)
    assert (out - ref).abs().max() > 1e-4
    torch.testing.assert_close(captured["o"], expected, rtol=0, atol=1e-5)


def F_sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_per_head_on_an_unknown_attention_layout_is_refused():
    """A decoder whose attention projects with a fused ``Wqkv`` (no q_proj/k_proj, no qkv_proj): SpecError naming it."""

    class FusedAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.Wqkv = torch.nn.Linear(32, 96)

    body = torch.nn.Module()
    body.rotary_emb = torch.nn.Module()
    body.rotary_emb.register_buffer("inv_freq", torch.tensor([1.0, 0.1, 0.01, 0.001]))
    body.config = type("Cfg", (), {"num_attention_heads": 4, "_attn_implementation": "sdpa"})()
    body.layers = torch.nn.ModuleList([torch.nn.Module()])
    body.layers[0].attn = FusedAttention()
    with pytest.raises(SpecError, match=r"layer 0 \(FusedAttention, linear children \['Wqkv'\]\)"):
        install_structural_rope(body, A, "per_head", sections=[2, 2, 0])
    assert type(body.rotary_emb).__name__ != "StructuralRotaryEmbedding"  # nothing was patched
    install_structural_rope(body, A, "sectioned")  # the rotary module itself rotates: fine


# ------------------------------------------------------------------------- packed batches
def test_packed_batch_needs_a_document_mask():
    """``cu_seqlens`` with sdpa would attend across documents: SpecError before any attention runs;
    with structpos_flex each document of the packed row equals that document run alone."""
    from structpos.integrations.collate import StructuralCollator

    g = torch.Generator().manual_seed(3)
    docs = []
    for n in (5, 8, 4):
        docs.append(
            {
                "input_ids": torch.randint(1, V, (n,), generator=g).tolist(),
                "depth": torch.randint(0, 4, (n,), generator=g).tolist(),
            }
        )
    batch = StructuralCollator(["depth"], mode="pack")(docs)
    model = make_model("llama", "sdpa")
    install_structural_rope(model, 2)
    calls = []
    h = model.model.layers[0].self_attn.register_forward_pre_hook(lambda *a: calls.append(1))
    with torch.no_grad(), pytest.raises(SpecError, match=r"cu_seqlens.*structpos_flex.*'sdpa' would ignore"):
        model(**batch)
    assert not calls
    h.remove()
    model.set_attn_implementation(register_structural_attention("flex"))
    with torch.no_grad():
        packed = model(**batch).logits[0]
        cu = batch["cu_seqlens"].tolist()
        for i, d in enumerate(docs):
            alone = StructuralCollator(["depth"])([d])
            ref = model(input_ids=alone["input_ids"], position_ids=alone["position_ids"]).logits[0]
            torch.testing.assert_close(packed[cu[i] : cu[i + 1]], ref, rtol=0, atol=1e-5)
    with pytest.raises(SpecError, match="one row"):
        model(input_ids=ids(), cu_seqlens=torch.tensor([0, 6, 12]))


# ---------------------------------------------------------------- tokens without a node (-1)
def test_minus_one_coordinates_of_special_tokens_are_ordinary_coordinates():
    """token_coords gives -1 on the structural axes of BOS / special tokens; the patch takes it as the
    coordinate -1 (documented): the same logits as shifting every coordinate by +1, and not a clamp to 0."""
    model = make_model("llama", "sdpa")
    install_structural_rope(model, A)
    x, c = ids(), struct_coords(2, L)
    c[:, 0, 1:] = -1  # a BOS token that covers no node
    with torch.no_grad():
        out = model(x, position_ids=c).logits
        shifted = model(x, position_ids=c + 1).logits  # BOS at 0, everything else one further
        clamped = model(x, position_ids=c.clamp(min=0)).logits
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, shifted, rtol=0, atol=1e-5)
    assert (out - clamped).abs().max() > 1e-4
