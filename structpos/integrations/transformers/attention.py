"""The ``structpos_<base>`` attention functions: per-head structural rotation, then eager, SDPA or FlexAttention.

Examples
--------
>>> register_structural_attention("eager")
'structpos_eager'
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import torch

from ...exceptions import SpecError

BaseAttention = Literal["eager", "sdpa", "flex"]


def _select_attention(model: Any, name: str) -> None:
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        try:
            setter(name)
            return
        except (ValueError, TypeError, KeyError):  # older versions validate against built-ins only
            pass
    model.config._attn_implementation = name


def _rotate_per_head(module, query, key):
    rope, state = module._structpos
    if not rope._per_head() or state.current is None:
        return query, key
    rdim = rope.head_dim
    kc = state.keys[:, -key.shape[-2] :].to(query.device)
    q_rot = rope.rotate(query[..., :rdim], state.current.to(query.device))
    k_rot = rope.rotate(key[..., :rdim], kc)
    if rdim < query.shape[-1]:  # partial rotary: the rest passes through
        q_rot = torch.cat([q_rot, query[..., rdim:]], dim=-1)
        k_rot = torch.cat([k_rot, key[..., rdim:]], dim=-1)
    return q_rot, k_rot


def _check_documents(state, key: torch.Tensor) -> None:
    """Refuse a packed row whose document offsets do not cover the keys (the document mask would be dropped)."""
    seen = state.keys.shape[1] if state.keys is not None else None
    if state.cu_seqlens is not None and key.shape[-2] != seen:
        raise SpecError(
            f"the packed batch's documents cover the {seen} tokens seen, but the attention gets {key.shape[-2]} "
            "keys (a static or sliding-window cache?): structpos_flex keeps documents apart only with a cache "
            "that returns every cached key (DynamicCache)"
        )


def register_structural_attention(base: BaseAttention = "sdpa") -> str:
    """Register ``"structpos_<base>"`` with HF ``AttentionInterface`` (and its mask function); return the name.

    The function applies a per-head structural rotation when the installed encoder needs one,
    then runs ``base``: HF's ``eager`` / ``sdpa``, or ``flex`` — FlexAttention with the structural
    ``score_mod`` / ``mask_mod`` built by :func:`structpos.integrations.flex.hf_flex_attention`
    from ``StructuralPatch.set_bias(...)`` inputs (causal and padding added, no L×L tensor).

    Parameters
    ----------
    base : {"eager", "sdpa", "flex"}
        The attention that runs after the rotation.

    Returns
    -------
    str
        The registered name, ``"structpos_<base>"``, for ``attn_implementation=`` or
        ``model.set_attn_implementation``.

    Raises
    ------
    SpecError
        An unknown ``base`` (checked before transformers is imported).

    Examples
    --------
    The first call in a process imports ``transformers.modeling_utils`` (about 2 s on a CPU):

    >>> from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    >>> name = register_structural_attention("sdpa")
    >>> name, name in ALL_ATTENTION_FUNCTIONS
    ('structpos_sdpa', True)
    >>> register_structural_attention("flash")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: base attention must be 'eager', 'sdpa' or 'flex', got 'flash'
    """
    if base not in ("eager", "sdpa", "flex"):
        raise SpecError(f"base attention must be 'eager', 'sdpa' or 'flex', got {base!r}")
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    except ImportError:  # transformers < 4.53: masks do not go through an interface
        ALL_MASK_ATTENTION_FUNCTIONS = AttentionMaskInterface = None  # type: ignore[assignment,misc]
    name = f"structpos_{base}"
    if base == "flex":
        from ..flex import hf_flex_attention

        inner, mask_fn = hf_flex_attention, (lambda *a, **k: None)
    else:
        if base == "eager":
            from transformers.models.llama.modeling_llama import eager_attention_forward as inner  # type: ignore[assignment]
        else:
            inner = ALL_ATTENTION_FUNCTIONS["sdpa"]
        mask_fn = ALL_MASK_ATTENTION_FUNCTIONS[base] if ALL_MASK_ATTENTION_FUNCTIONS is not None else None

    def attention(module, query, key, value, attention_mask, **kwargs):
        if getattr(module, "_structpos", None) is not None:
            if base == "flex":
                _check_documents(module._structpos[1], key)
            query, key = _rotate_per_head(module, query, key)
        fn = inner
        if base == "eager":  # the model's own eager attention (Gemma's softcapping, ...) when it has one
            fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", inner)
        return fn(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(name, attention)
    if AttentionMaskInterface is not None and mask_fn is not None:
        AttentionMaskInterface.register(name, mask_fn)
    return name
