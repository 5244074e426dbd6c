"""Misuse of the transformers integration fails loudly: structpos errors with one clear message, never a silent
wrong answer (packed KV caches, biases, removed patches, pending coordinates, continuation rules, Qwen-VL,
per-head GQA groups, malformed position_ids and install options)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from conftest import TINY_DECODER

transformers = pytest.importorskip("transformers")

from structpos.encoders import StructuralRoPE
from structpos.exceptions import InputError, ShapeError, SpecError
from structpos.integrations.transformers import install_structural_rope, register_structural_attention

warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")

V, L, A = 97, 8, 3
TF5 = int(transformers.__version__.split(".")[0]) >= 5


def llama(attn="sdpa", **extra):
    """Tiny random Llama: 4 query heads sharing 2 key/value heads, head_dim 8 (4 rotary pairs)."""
    cfg = transformers.LlamaConfig(**{**TINY_DECODER, "vocab_size": V, "max_position_embeddings": 128, **extra})
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def ids(B=2, n=L):
    return torch.randint(1, V, (B, n), generator=torch.Generator().manual_seed(2))


def coords(B=2, n=L):
    c = torch.randint(0, 5, (B, n, A), generator=torch.Generator().manual_seed(1))
    c[..., 0] = torch.arange(n)
    return c


def cache_of(out) -> dict:
    """The KV cache of a model output as the next call's keyword (5.x ``cache``, 4.5x ``past_key_values``)."""
    if getattr(out, "cache", None) is not None:
        return {"cache": out.cache}
    return {"past_key_values": out.past_key_values}


# ------------------------------------------------------------------ 1. packed batch + KV cache
def packed_flex_model():
    model = llama()
    patch = install_structural_rope(model, A)
    model.set_attn_implementation(register_structural_attention("flex"))
    c = coords(1)
    c[0, 4:, 0] = torch.arange(L - 4)  # two documents: tokens 0-3 and 4-
    return model, patch, ids(1), c


def test_packed_cache_decode_stays_in_the_last_document():
    """After a packed prefill, decode tokens attend only to their own document, as the document run alone."""
    model, _, x, c = packed_flex_model()
    with torch.no_grad():
        alone = model(x[:, 4:7], position_ids=c[:, 4:7]).logits[0, -1]
        across = model(x[:, :7], position_ids=c[:, :7]).logits[0, -1]  # what a dropped document mask gives
        for step_cu in (None, torch.tensor([0, 4, 7])):  # left out, or given over cache + new tokens
            out = model(x[:, :6], position_ids=c[:, :6], cu_seqlens=torch.tensor([0, 4, 6]), use_cache=True)
            extra = {} if step_cu is None else {"cu_seqlens": step_cu}
            step = model(x[:, 6:7], position_ids=c[:, 6:7], **cache_of(out), **extra).logits[0, -1]
            torch.testing.assert_close(step, alone, rtol=0, atol=1e-5)
    assert (across - alone).abs().max() > 1e-3


def test_packed_cache_decode_can_start_a_new_document():
    model, _, x, c = packed_flex_model()
    with torch.no_grad():
        out = model(x[:, :6], position_ids=c[:, :6], cu_seqlens=torch.tensor([0, 4, 6]), use_cache=True)
        step = model(x[:, 6:7], position_ids=c[:, 6:7], cu_seqlens=torch.tensor([0, 4, 6, 7]), **cache_of(out))
        alone = model(x[:, 6:7], position_ids=c[:, 6:7]).logits
    torch.testing.assert_close(step.logits, alone, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("step_cu", "match"),
    [
        ([0, 1], r"KV cache of 6 tokens must cover the cached and the 1 new tokens \(end at 7"),
        ([0, 7], r"moves the document starts of the 6 cached tokens \(\[0, 4\]\)"),
    ],
)
def test_packed_cache_step_offsets_that_do_not_fit_the_cache_are_refused(step_cu, match):
    model, _, x, c = packed_flex_model()
    with torch.no_grad():
        out = model(x[:, :6], position_ids=c[:, :6], cu_seqlens=torch.tensor([0, 4, 6]), use_cache=True)
        with pytest.raises(SpecError, match=match):
            model(x[:, 6:7], position_ids=c[:, 6:7], cu_seqlens=torch.tensor(step_cu), **cache_of(out))


def test_packed_cache_that_returns_fewer_keys_is_refused():
    """A static cache hands the attention every slot, not the tokens seen: the document mask cannot apply."""
    model, _, x, c = packed_flex_model()
    cache = transformers.StaticCache(config=model.config, max_cache_len=2 * L)
    with torch.no_grad(), pytest.raises(SpecError, match=r"documents cover the 8 tokens seen.*16 keys"):
        given = {"cache": cache} if TF5 else {"past_key_values": cache}
        model(x, position_ids=c, cu_seqlens=torch.tensor([0, 4, 8]), use_cache=True, **given)


# ------------------------------------------------------------------------------ 2. set_bias
def test_set_bias_refuses_unknown_inputs_and_non_functions():
    patch = install_structural_rope(llama(), A)
    with pytest.raises(SpecError, match=r"takes score_mod and mask_mod; unknown input\(s\) \['bogus'\]"):
        patch.set_bias(bogus=torch.zeros(3))
    with pytest.raises(SpecError, match=r"set_bias\(score_mod=...\) must be a function.*given int"):
        patch.set_bias(score_mod=5)
    assert patch.state.extras == {}


def test_bias_under_an_attention_that_cannot_apply_it_raises_at_forward():
    model = llama("sdpa")
    patch = install_structural_rope(model, A)
    x = ids()
    patch.set_bias(score_mod=lambda score, b, h, q, k: score - (q - k).abs())
    with torch.no_grad():
        with pytest.raises(SpecError, match=r"set_bias\(score_mod=...\).*'sdpa' cannot apply it"):
            model(x)
        patch.set_bias()  # cleared: runs again
        assert model(x).logits.shape == (2, L, V)


# ---------------------------------------------------------------------------- 3. remove()
def test_removed_patch_refuses_every_further_call():
    model = llama()
    patch = install_structural_rope(model, A)
    patch.remove()
    for call in (patch.remove, lambda: patch.set_coordinates(coords()), lambda: patch.set_bias()):
        with pytest.raises(SpecError, match="StructuralPatch was removed"):
            call()
    install_structural_rope(model, A)  # the model itself can be patched again


# -------------------------------------------------------------------- 4. pending coordinates
def test_pending_coordinates_with_explicit_position_ids_raise_and_do_not_leak():
    model = llama()
    x = ids()
    with torch.no_grad():
        stock = model(x).logits
        patch = install_structural_rope(model, A)
        patch.set_coordinates(torch.full((2, L, A), 3))
        with pytest.raises(SpecError, match="set_coordinates.*pending and 3-D position_ids"):
            model(x, position_ids=coords())
        later = model(x).logits  # an unrelated prompt: the stale coordinates are gone
    assert patch.state.pending is None
    torch.testing.assert_close(later, stock, rtol=0, atol=1e-5)


# ------------------------------------------------------------------------ 5. continuation rule
def wrong_axes(last, n):
    return last[:, None, :1].expand(last.shape[0], n, 1)


def wrong_count(last, n):
    return last[:, None, :].expand(last.shape[0], n + 1, last.shape[1])


def half_precision(last, n):
    return last[:, None, :].expand(last.shape[0], n, last.shape[1]).half()


@pytest.mark.parametrize("rule", [wrong_axes, wrong_count, half_precision])
def test_continuation_rule_output_is_checked(rule):
    model = llama()
    patch = install_structural_rope(model, A, rule=rule)
    patch.set_coordinates(coords())
    with (
        torch.no_grad(),
        pytest.raises(ShapeError, match=rf"continuation rule {rule.__name__}\(last, 1\).*\(2, 1, 3\)"),
    ):
        model.generate(ids(), attention_mask=torch.ones(2, L, dtype=torch.long), max_new_tokens=2, do_sample=False)


def test_fractional_continuation_is_not_truncated():
    model = llama()
    install_structural_rope(model, A, rule=lambda last, n: last[:, None, :] + 0.5)
    x, c = ids(), coords()
    with torch.no_grad():
        out = model(x[:, :-1], position_ids=c[:, :-1], use_cache=True)
        step = model(x[:, -1:], **cache_of(out)).logits[:, -1]
        ref = model(x, position_ids=torch.cat([c[:, :-1], c[:, -2:-1] + 0.5], 1).float()).logits[:, -1]
    torch.testing.assert_close(step, ref, rtol=0, atol=1e-4)


def test_rule_that_is_not_callable_is_refused_at_install():
    model = llama()
    with pytest.raises(SpecError, match="rule must be callable.*given int"):
        install_structural_rope(model, A, rule=5)
    assert type(model.model.rotary_emb).__name__ != "StructuralRotaryEmbedding"


# ------------------------------------------------------------------------------- 6. Qwen-VL
@pytest.mark.parametrize("which", ["qwen2_vl", "qwen3_vl"])
def test_multimodal_rope_model_is_refused_with_a_pointer_to_qwen_vl_position_ids(which):
    import importlib

    mod = importlib.import_module(f"transformers.models.{which}.modeling_{which}")
    cls = getattr(mod, {"qwen2_vl": "Qwen2VLTextModel", "qwen3_vl": "Qwen3VLTextModel"}[which], None)
    if cls is None:
        pytest.skip(f"this transformers has no text model class for {which}")
    cfg = cls.config_class(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8,
    )  # fmt: skip
    model = cls(cfg).eval()
    with pytest.raises(SpecError, match=r"multimodal RoPE \(mrope_section .*qwen_vl_position_ids"):
        install_structural_rope(model, A)
    assert type(model.rotary_emb).__name__ != "StructuralRotaryEmbedding"


# -------------------------------------------------------------------- 7. per-head on GQA
def test_per_head_that_splits_a_kv_group_is_refused_at_install():
    """Default per-head sections on 4 heads / 3 axes give heads 0, 1 (one key head) axes 0, 0 but heads 2, 3 axes 1, 2."""
    model = llama()
    with pytest.raises(SpecError, match=r"heads → axes \[0, 0, 1, 2\].*multiples of 2, e.g. sections=\[2, 2, 0\]"):
        install_structural_rope(model, A, "per_head")
    assert type(model.model.rotary_emb).__name__ != "StructuralRotaryEmbedding"
    assert model.config._attn_implementation == "sdpa"
    install_structural_rope(model, A, "per_head", sections=[2, 2, 0])  # groups kept whole: fine


def test_ready_per_head_rope_for_another_head_count_is_refused():
    rope = StructuralRoPE(8, A, "per_head", num_heads=8, qk_layout="bhld")
    with pytest.raises(SpecError, match="built for 8 heads; the model has num_attention_heads = 4"):
        install_structural_rope(llama(), A, rope=rope)


# ---------------------------------------------------------- 8. position_ids, coordinates, options
@pytest.mark.parametrize(
    "pos",
    [
        torch.arange(L)[None].expand(3, L),  # 2-D, wrong B
        torch.arange(L + 3)[None].expand(2, L + 3),  # 2-D, wrong L
        torch.zeros(L, A, dtype=torch.long),  # the (L, A) form
        torch.zeros(1, 2, L, A, dtype=torch.long),  # 4-D
    ],
    ids=["2d-batch", "2d-length", "L-by-A", "4d"],
)
def test_malformed_position_ids_raise_shape_error_before_attention(pos):
    model = llama()
    install_structural_rope(model, A)
    calls = []
    model.model.layers[0].self_attn.register_forward_pre_hook(lambda *a: calls.append(1))
    expected = r"\(B, L, A\) = \(2, 8, 3\) or 1-D positions \(B, L\) = \(2, 8\); given " + re.escape(
        str(tuple(pos.shape))
    )
    with torch.no_grad(), pytest.raises(ShapeError, match=expected):
        model(ids(), position_ids=pos)
    assert not calls


def test_array_like_coordinates_equal_tensors_on_both_paths():
    model = llama()
    patch = install_structural_rope(model, A)
    x, c = ids(), coords()
    with torch.no_grad():
        ref = model(x, position_ids=c).logits
        for value in (c.numpy(), c.tolist()):
            torch.testing.assert_close(model(x, position_ids=value).logits, ref, rtol=0, atol=0)
            patch.set_coordinates(value)
            torch.testing.assert_close(model(x).logits, ref, rtol=0, atol=0)


@pytest.mark.parametrize("bad", [np.array(["a"] * L), [[None] * L]])
def test_non_numeric_coordinates_raise_input_error_on_both_paths(bad):
    model = llama()
    patch = install_structural_rope(model, A)
    with pytest.raises(InputError, match="set_coordinates.*must be a tensor or an array of numbers"):
        patch.set_coordinates(bad)
    with torch.no_grad(), pytest.raises(InputError, match="position_ids must be a tensor or an array of numbers"):
        model(ids(), position_ids=bad)


def test_unknown_and_model_set_options_are_refused_by_name():
    with pytest.raises(SpecError, match=r"unknown option\(s\) \['frobnicate'\].*'sections'"):
        install_structural_rope(llama(), A, frobnicate=1)
    with pytest.raises(SpecError, match=r"unknown option\(s\) \['inv_freq'\].*come from the model"):
        install_structural_rope(llama(), A, inv_freq=torch.ones(4))
    with pytest.raises(SpecError, match=r"options \['sections'\] build the encoder, but a ready rope was given"):
        install_structural_rope(llama(), A, rope=StructuralRoPE(8, A, qk_layout="bhld"), sections=[2, 1, 1])


def test_ready_rope_of_another_rotary_dimension_is_refused_at_install():
    model = llama()
    with pytest.raises(SpecError, match=r"rope has 32 rotary pairs \(head_dim 64\).*table has 4"):
        install_structural_rope(model, 2, rope=StructuralRoPE(64, 2))
    assert type(model.model.rotary_emb).__name__ != "StructuralRotaryEmbedding"


def test_installing_twice_says_the_model_is_patched_already():
    model = llama()
    patch = install_structural_rope(model, A)
    with pytest.raises(SpecError, match=r"already patched by install_structural_rope.*call remove\(\)"):
        install_structural_rope(model, A)
    patch.remove()
    install_structural_rope(model, A)
