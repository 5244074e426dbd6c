"""Installing structural RoPE into a HF decoder: find the rotary tables, swap the rotary module(s), hook the body.

:func:`install_structural_rope` returns a :class:`StructuralPatch` that knows how to undo itself.

Examples
--------
A body whose ``rotary_emb`` holds HF's ``inv_freq`` buffer is patched and restored:

>>> body = torch.nn.Module()
>>> body.rotary_emb = torch.nn.Module()
>>> body.rotary_emb.register_buffer("inv_freq", torch.tensor([1.0, 0.1]))
>>> original = body.rotary_emb
>>> patch = install_structural_rope(body, num_axes=2, allocation="interleaved")
>>> type(body.rotary_emb).__name__, patch.rope.num_axes
('StructuralRotaryEmbedding', 2)
>>> patch.remove()
>>> body.rotary_emb is original
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ...encoders.rope import Allocation, StructuralRoPE, check_cu_seqlens
from ...exceptions import SpecError
from .attention import _select_attention, register_structural_attention
from .rotary import ScaleAxes, StructuralRotaryEmbedding, _rope_from_table, _rope_on_table, _rotary_tables
from .state import ContinueRule, CoordinateState, continue_axis0


def _decoder_body(model: nn.Module) -> nn.Module:
    """The module that owns ``rotary_emb`` (``model.model`` for ``*ForCausalLM``)."""
    for m in (model, getattr(model, "model", None), getattr(getattr(model, "model", None), "language_model", None)):
        if m is not None and isinstance(getattr(m, "rotary_emb", None), nn.Module):
            return m
    raise SpecError(f"{type(model).__name__} has no rotary_emb module (not a Llama-family decoder?)")


def _past_length(kwargs: dict) -> int:
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    if cache is not None and hasattr(cache, "get_seq_length"):
        return int(cache.get_seq_length())
    cp = kwargs.get("cache_position")
    return int(cp[0]) if cp is not None and cp.numel() else 0


@dataclass
class StructuralPatch:
    """What :func:`install_structural_rope` did: the body, the encoder, the state, and how to undo it.

    Parameters
    ----------
    body : torch.nn.Module
        The decoder body that owns ``rotary_emb``.
    rope : StructuralRoPE
        The encoder behind the structural ``rotary_emb``.
    state : CoordinateState
        The coordinate bookkeeping of the patched model.
    original_rotary : torch.nn.Module
        The model's own ``rotary_emb``, restored by :meth:`remove`.
    handle : torch.utils.hooks.RemovableHandle
        The forward pre-hook on ``body``.
    ropes : dict
        ``layer type → encoder`` for every rotary table of the model (key ``None`` when one
        table serves every layer; ``"sliding_attention"`` and ``"full_attention"`` for Gemma 3).
    originals : dict
        ``attribute → module`` of every rotary module replaced (restored by :meth:`remove`).
    attention : tuple, optional
        ``(model, name)``: the attention implementation a per-head patch replaced (restored by
        :meth:`remove`).

    Examples
    --------
    Any module owning a ``rotary_emb`` with HF's ``inv_freq`` buffer can be patched:

    >>> body = torch.nn.Module()
    >>> body.rotary_emb = torch.nn.Module()
    >>> body.rotary_emb.register_buffer("inv_freq", torch.tensor([1.0, 0.1]))
    >>> patch = install_structural_rope(body, num_axes=2)
    >>> type(body.rotary_emb).__name__, patch.original_rotary.inv_freq.tolist()
    ('StructuralRotaryEmbedding', [1.0, 0.10000000149011612])
    >>> patch.set_coordinates(torch.tensor([[0, 0], [1, 1]]))  # for the next prompt
    >>> patch.state.pending.shape
    torch.Size([2, 2])
    >>> patch.remove()
    >>> body.rotary_emb is patch.original_rotary
    True
    """

    body: nn.Module
    rope: StructuralRoPE
    state: CoordinateState
    original_rotary: nn.Module
    handle: Any
    ropes: dict = field(default_factory=dict)
    originals: dict = field(default_factory=dict)
    attention: tuple | None = None

    def set_coordinates(self, coords: torch.Tensor) -> None:
        """Coordinates ``(B, L, A)`` (or ``(L, A)``) of the next prompt, e.g. before ``generate()``."""
        self.state.pending = coords

    def set_bias(self, **inputs) -> None:
        """Per-token inputs of a structural bias for ``attn_implementation="structpos_flex"`` (see :mod:`structpos.integrations.flex`)."""
        self.state.extras = dict(inputs)

    def remove(self) -> None:
        """Restore the original rotary module(s) and attention implementation; drop the hook and state."""
        for attr, module in (self.originals or {"rotary_emb": self.original_rotary}).items():
            setattr(self.body, attr, module)
        self.handle.remove()
        for m in self.body.modules():
            if getattr(m, "_structpos", None) is not None:
                del m._structpos
        if self.attention is not None:
            _select_attention(*self.attention)


def install_structural_rope(
    model: nn.Module,
    num_axes: int,
    allocation: Allocation = "sectioned",
    *,
    rule: ContinueRule = continue_axis0,
    rope: StructuralRoPE | None = None,
    scale_axes: ScaleAxes = "token",
    **options,
) -> StructuralPatch:
    """Make ``model(input_ids, position_ids=coords)`` take per-token coordinates ``(B, L, A)``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A Llama-family decoder (``LlamaForCausalLM``, ``Qwen2/3ForCausalLM``, ``MistralForCausalLM``,
        ``GemmaForCausalLM``, or their bodies).
    num_axes : int
        ``A``.
    allocation : {"sectioned", "interleaved", "per_head", "mixed"}
        Frequency allocation (see :class:`~structpos.encoders.StructuralRoPE`); ``sections``,
        ``mixing``, ``learnable`` go through ``options``.
    rule : callable
        Continuation rule for tokens after the prompt (:func:`continue_axis0`).
    rope : StructuralRoPE, optional
        A ready encoder (e.g. :class:`~structpos.encoders.HierarchicalRoPE`); by default one is
        built on the model's ``inv_freq``.
    scale_axes : {"token", "all"}
        Where a model's rope scaling (``linear``, ``yarn``, ``llama3``) applies: ``"token"`` — the
        token-index axis 0 only, the structural axes use the unscaled ``rope_theta`` table (a
        tree depth or table row was never stretched); ``"all"`` — the model's scaled table on
        every axis (then index coordinates on every axis give exactly the stock model). Models
        without scaling are the same either way; YaRN's ``attention_scaling`` multiplies every
        pair as in the stock model.

    **options
        Further :class:`~structpos.encoders.StructuralRoPE` options.

    Returns
    -------
    StructuralPatch
        The body, encoder and state, with :meth:`StructuralPatch.remove` to undo the patch.

    Raises
    ------
    SpecError
        The model has no ``rotary_emb`` or a rotary layout it cannot patch; a ready ``rope``
        whose axis count is not ``num_axes``; a per-head encoding on a model whose decoder
        layers hold no attention module it recognises (separate ``q_proj``/``k_proj`` or a
        fused ``qkv_proj``) — the message names the layout.
        ``scale_axes="token"`` with a rope type whose table is not static (``dynamic``,
        ``longrope``, ...).

    Notes
    -----
    ``per_head`` needs a structural attention function: this call registers and selects
    ``"structpos_" + <the model's current implementation>`` (eager or sdpa).

    A model with several rotary tables (Gemma 3: sliding and full layers) gets one encoder per
    table, on that table's frequencies (a ready ``rope`` is copied onto each); they are in
    ``StructuralPatch.ropes`` and ``StructuralPatch.rope`` is the full-attention one.

    With a real model (``tests/test_integrations_transformers.py`` checks this on tiny random
    Llama, Qwen and Gemma configs), coordinates equal to the token index on every axis give the
    stock model's logits::

        model = LlamaForCausalLM(LlamaConfig(...)).eval()
        ref = model(ids).logits
        install_structural_rope(model, num_axes=2)
        same = torch.arange(L)[None, :, None].expand(1, L, 2)
        torch.allclose(model(ids, position_ids=same).logits, ref, atol=1e-6)   # True

    Examples
    --------
    The smallest decoder body: it owns a ``rotary_emb`` (HF's ``inv_freq`` buffer: two
    frequencies here) and calls it with the ``position_ids`` it is given, as HF decoders do:

    >>> class Body(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.rotary_emb = torch.nn.Module()
    ...         self.rotary_emb.register_buffer("inv_freq", torch.tensor([1.0, 0.1]))
    ...
    ...     def forward(self, input_ids, position_ids=None):
    ...         return self.rotary_emb(torch.zeros(*input_ids.shape, 8), position_ids)
    >>> body = Body()
    >>> patch = install_structural_rope(body, num_axes=2)
    >>> ids = torch.zeros(1, 4, dtype=torch.long)

    With ``"sectioned"`` allocation the first frequency reads axis 0 (the token index), the
    second axis 1 (here a tree depth); the angles are ``ω_j · c_n``:

    >>> cos, sin = body(ids, position_ids=torch.tensor([[[0, 0], [1, 1], [2, 1], [3, 2]]]))
    >>> torch.atan2(sin, cos)[0, :, :2]
    tensor([[0.0000, 0.0000],
            [1.0000, 0.1000],
            [2.0000, 0.1000],
            [3.0000, 0.2000]])

    Without structural coordinates it is the stock rotary (``position · ω`` on every frequency):

    >>> cos, sin = body(ids)
    >>> torch.atan2(sin, cos)[0, :, 1]
    tensor([0.0000, 0.1000, 0.2000, 0.3000])
    """
    body = _decoder_body(model)
    tables = _rotary_tables(body)
    if rope is not None and rope.num_axes != num_axes:
        raise SpecError(f"rope has {rope.num_axes} axes, num_axes = {num_axes}")
    if rope is None:
        ropes = {t.layer_type: _rope_from_table(body, t, num_axes, allocation, scale_axes, **options) for t in tables}
    elif len(tables) == 1:
        ropes = {tables[0].layer_type: rope}  # used as given (its own frequencies)
    else:
        ropes = {t.layer_type: _rope_on_table(rope, t) for t in tables}
    per_head = any(r._per_head() for r in ropes.values())
    if per_head:
        _check_attention_layout(body)
    state = CoordinateState(num_axes=num_axes, rule=rule)
    originals: dict[str, nn.Module] = {}
    for attr in dict.fromkeys(t.attr for t in tables):
        mine = [t for t in tables if t.attr == attr]
        typed = {t.layer_type: (ropes[t.layer_type], t.scaling) for t in mine if t.layer_type is not None}
        default = mine[0] if len(mine) == 1 else next((t for t in mine if t.layer_type == "full_attention"), mine[0])
        originals[attr] = getattr(body, attr)
        setattr(
            body,
            attr,
            StructuralRotaryEmbedding(ropes[default.layer_type], state, default.scaling, layer_ropes=typed or None),
        )
    handle = body.register_forward_pre_hook(_make_hook(state), with_kwargs=True)
    _attach_state(body, ropes, state)
    previous = None
    if per_head:
        base = getattr(body.config, "_attn_implementation", "sdpa") or "sdpa"
        if not base.startswith("structpos_"):
            _select_attention(model, register_structural_attention("eager" if base == "eager" else "sdpa"))
            previous = (model, base)
    main = ropes.get("full_attention", next(iter(ropes.values())))
    return StructuralPatch(body, main, state, originals["rotary_emb"], handle, ropes, originals, previous)


def _is_attention(m: nn.Module) -> bool:
    """An HF attention module whose q/k reach the attention function: separate or fused projections."""
    return (hasattr(m, "q_proj") and hasattr(m, "k_proj")) or hasattr(m, "qkv_proj")


def _check_attention_layout(body: nn.Module) -> None:
    """Refuse a per-head encoding when some decoder layer has no attention module :func:`_is_attention` knows."""
    layers = getattr(body, "layers", None)
    layers = list(layers) if isinstance(layers, nn.ModuleList) else [body]
    for i, layer in enumerate(layers):
        if not any(_is_attention(m) for m in layer.modules()):
            attn = next((m for m in layer.modules() if type(m).__name__.endswith("Attention")), None)
            what = type(attn).__name__ if attn is not None else type(layer).__name__
            projections = [n for n, c in (attn or layer).named_children() if isinstance(c, nn.Linear)]
            raise SpecError(
                f"per-head allocation rotates q and k inside the attention function, but layer {i} "
                f"({what}, linear children {projections}) has neither q_proj/k_proj nor a fused qkv_proj; "
                "use a sectioned, interleaved or (P, A)-mixed allocation, which the rotary module applies"
            )


def _layer_type_of(m: nn.Module) -> str:
    """``"sliding_attention"`` / ``"full_attention"`` (5.x ``layer_type``, 4.5x ``is_sliding``)."""
    lt = getattr(m, "layer_type", None)
    if isinstance(lt, str):
        return lt
    return "sliding_attention" if getattr(m, "is_sliding", False) else "full_attention"


def _attach_state(body: nn.Module, ropes: dict, state: CoordinateState) -> None:
    for m in body.modules():
        if _is_attention(m):
            rope = ropes[None] if None in ropes else ropes.get(_layer_type_of(m))
            if rope is None:
                raise SpecError(
                    f"{type(m).__name__} has layer type {_layer_type_of(m)!r}; rotary tables: {sorted(ropes)}"
                )
            m._structpos = rope, state  # type: ignore[assignment]  # a plain attribute on an HF module


def _make_hook(state: CoordinateState):
    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        x = ids if ids is not None else kwargs.get("inputs_embeds")
        if x is None:
            return None
        batch, length = x.shape[0], x.shape[1]
        past = _past_length(kwargs)
        pos = kwargs.get("position_ids")
        state.resolve(pos, batch, length, past, device=x.device)
        mask = kwargs.get("attention_mask")
        state.padding = mask.to(torch.bool) if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None
        state.cu_seqlens = _packed_offsets(module, kwargs, batch, length)
        if pos is None or pos.dim() == 3:
            kwargs["position_ids"] = torch.arange(past, past + length, device=x.device)[None].expand(batch, length)
        return args, kwargs

    return hook


_PACKED_KEYS = ("cu_seqlens", "cu_seq_lens_q", "cu_seq_lens_k")


def _packed_offsets(body: nn.Module, kwargs: dict, batch: int, length: int) -> torch.Tensor | None:
    """``cu_seqlens`` of a packed batch when the attention honours it; SpecError when it would not."""
    given = [key for key in _PACKED_KEYS if kwargs.get(key) is not None]
    if not given:
        return None
    impl = getattr(getattr(body, "config", None), "_attn_implementation", None)
    if impl != "structpos_flex":
        if str(impl).startswith("flash") and "cu_seqlens" not in given:
            return None  # HF's flash-attention reads its own cu_seq_lens_q/k
        raise SpecError(
            f"a packed batch ({given[0]}) needs attn_implementation='structpos_flex' "
            "(register_structural_attention('flex')), which keeps attention inside each document; "
            f"{impl!r} would ignore {given[0]} and attend across documents"
        )
    if batch != 1:
        raise SpecError(f"a packed batch ({given[0]}) must be one row (B = 1), given B = {batch}")
    return check_cu_seqlens(kwargs[given[0]], length)
