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

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ...encoders._learned import LearnedRotary
from ...encoders.rope import Allocation, StructuralRoPE, check_cu_seqlens
from ...exceptions import SpecError
from .attention import _select_attention, register_structural_attention
from .rotary import (
    ScaleAxes,
    StructuralRotaryEmbedding,
    _check_pairs,
    _rope_from_table,
    _rope_on_table,
    _rope_params,
    _rotary_tables,
)
from .state import ContinueRule, CoordinateState, as_tensor, continue_axis0

BIAS_INPUTS = ("score_mod", "mask_mod")
"""What :meth:`StructuralPatch.set_bias` takes: the ``structpos_flex`` attention reads these two functions."""

_FROM_MODEL = ("head_dim", "num_axes", "allocation", "inv_freq", "axis_inv_freq", "qk_layout")
""":class:`StructuralRoPE` arguments that :func:`install_structural_rope` sets itself (from the model)."""


def _decoder_body(model: nn.Module) -> nn.Module:
    """The module that owns ``rotary_emb`` (``model.model`` for ``*ForCausalLM``)."""
    for m in (model, getattr(model, "model", None), getattr(getattr(model, "model", None), "language_model", None)):
        if m is not None and isinstance(getattr(m, "rotary_emb", None), nn.Module):
            return m
    raise SpecError(f"{type(model).__name__} has no rotary_emb module (not a Llama-family decoder?)")


def _attention_impl(body: nn.Module) -> str | None:
    """The attention implementation the model runs (``config._attn_implementation``)."""
    return getattr(getattr(body, "config", None), "_attn_implementation", None)


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
    removed : bool
        Set by :meth:`remove`; a removed patch refuses every further call.

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
    >>> patch.set_coordinates(torch.tensor([[0, 0], [1, 1]]))
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: set_coordinates(): this StructuralPatch was removed (the model runs without it); install_structural_rope(model, ...) patches the model again
    """

    body: nn.Module
    rope: StructuralRoPE
    state: CoordinateState
    original_rotary: nn.Module
    handle: Any
    ropes: dict = field(default_factory=dict)
    originals: dict = field(default_factory=dict)
    attention: tuple | None = None
    removed: bool = False

    def _check_installed(self, what: str) -> None:
        if self.removed:
            raise SpecError(
                f"{what}: this StructuralPatch was removed (the model runs without it); "
                "install_structural_rope(model, ...) patches the model again"
            )

    def set_coordinates(self, coords: Any) -> None:
        """Coordinates ``(B, L, A)`` (or ``(L, A)``) of the next prompt, e.g. before ``generate()``.

        ``coords`` is a tensor or array-like (NumPy array, nested list); its dtype and axis count
        are checked now, its ``(B, L)`` at the next prefill, which consumes it. ``None`` clears it.

        Raises
        ------
        SpecError
            The patch was removed.
        InputError, ShapeError
            ``coords`` not an array of numbers, or of the wrong dtype or axis count.
        """
        self._check_installed("set_coordinates()")
        self.state.set_pending(coords)

    def set_bias(self, **inputs) -> None:
        """Structural bias for ``attn_implementation="structpos_flex"``: ``score_mod=`` and/or ``mask_mod=`` functions.

        See :mod:`structpos.integrations.flex` (e.g. :func:`~structpos.integrations.flex.tree_distance_score_mod`);
        ``set_bias()`` without arguments clears the bias. A forward pass with a bias set and any
        other attention implementation raises :class:`~structpos.exceptions.SpecError`.

        Raises
        ------
        SpecError
            An input other than ``score_mod`` / ``mask_mod``, one that is not callable, or a removed patch.
        """
        self._check_installed("set_bias()")
        unknown = sorted(set(inputs) - set(BIAS_INPUTS))
        if unknown:
            raise SpecError(f"set_bias() takes {' and '.join(BIAS_INPUTS)}; unknown input(s) {unknown}")
        for key, fn in inputs.items():
            if fn is not None and not callable(fn):
                raise SpecError(
                    f"set_bias({key}=...) must be a function (see structpos.integrations.flex); given {type(fn).__name__}"
                )
        self.state.extras = {key: fn for key, fn in inputs.items() if fn is not None}

    def remove(self) -> None:
        """Restore the original rotary module(s) and attention implementation; drop the hook and state.

        Raises
        ------
        SpecError
            The patch was already removed.
        """
        self._check_installed("remove()")
        for attr, module in (self.originals or {"rotary_emb": self.original_rotary}).items():
            setattr(self.body, attr, module)
        self.handle.remove()
        for m in self.body.modules():
            if getattr(m, "_structpos", None) is not None:
                del m._structpos
        if self.attention is not None:
            _select_attention(*self.attention)
        self.removed = True


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
        The model has no ``rotary_emb`` or a rotary layout it cannot patch; it is patched
        already (:meth:`StructuralPatch.remove` first); it rotates with multimodal RoPE
        (Qwen2/2.5/3-VL: use :func:`qwen_vl_position_ids` instead, without patching); an
        unknown option, or options beside a ready ``rope``; a ready ``rope`` whose axis count
        is not ``num_axes`` or whose rotary pairs are not the model's; a ``rule`` that is not
        callable; a per-head encoding on a model whose decoder layers hold no attention module
        it recognises (separate ``q_proj``/``k_proj`` or a fused ``qkv_proj``) — the message
        names the layout —, built for another head count, or giving query heads that share a
        key/value head (grouped-query attention) different axes.
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
    _check_patchable(model, body)
    state = CoordinateState(num_axes=num_axes, rule=rule)
    tables = _rotary_tables(body)
    ropes = _encoders(body, tables, num_axes, allocation, rope, scale_axes, options)
    per_head = any(r._per_head() for r in ropes.values())
    if per_head:
        _check_attention_layout(body)
        _check_head_groups(body, ropes)
    originals = _swap_rotary(body, tables, ropes, state)
    handle = body.register_forward_pre_hook(_make_hook(state), with_kwargs=True)
    _attach_state(body, ropes, state)
    previous = _select_per_head_attention(model, body) if per_head else None
    main = ropes.get("full_attention", next(iter(ropes.values())))
    return StructuralPatch(body, main, state, originals["rotary_emb"], handle, ropes, originals, previous)


def _check_patchable(model: nn.Module, body: nn.Module) -> None:
    """Refuse a model patched already, and a multimodal-RoPE model (Qwen-VL: it takes ``(3, B, L)`` ids itself)."""
    patched = [n for n, m in body.named_children() if isinstance(m, StructuralRotaryEmbedding)]
    if patched:
        raise SpecError(
            f"{type(model).__name__} is already patched by install_structural_rope (its {patched[0]} is a "
            "StructuralRotaryEmbedding); call remove() on the StructuralPatch it returned before installing again"
        )
    rotary = [m for n, m in body.named_children() if n.startswith("rotary_emb")]
    params = _rope_params(getattr(body, "config", None))
    section = next((m.mrope_section for m in rotary if getattr(m, "mrope_section", None) is not None), None)
    if section is None and ("mrope_section" in params or "mrope" in (params.get("type"), params.get("rope_type"))):
        section = params.get("mrope_section", "mrope")
    if section is not None:
        raise SpecError(
            f"{type(model).__name__} rotates with multimodal RoPE (mrope_section {section}): it already takes "
            "position_ids (3, B, L) on three axes, and patching it would break them. Give it structure without "
            "patching: position_ids=qwen_vl_position_ids(token_coords, family)"
        )


def _encoders(
    body: nn.Module, tables: list, num_axes: int, allocation: Allocation, rope, scale_axes: ScaleAxes, options: dict
) -> dict:
    """``layer type → encoder``: built on each table's frequencies, or the ready ``rope`` (checked) on each."""
    if rope is None:
        _check_options(options)
        return {t.layer_type: _rope_from_table(body, t, num_axes, allocation, scale_axes, **options) for t in tables}
    if not isinstance(rope, (StructuralRoPE, LearnedRotary)):
        raise SpecError(
            f"rope must be a StructuralRoPE or a learned rotary encoder (STRING, LieRE, ComRoPE, GRAPE); "
            f"given {type(rope).__name__}"
        )
    if options:
        raise SpecError(f"options {sorted(options)} build the encoder, but a ready rope was given: set them on it")
    if rope.num_axes != num_axes:
        raise SpecError(f"rope has {rope.num_axes} axes, num_axes = {num_axes}")
    if len(tables) == 1 or isinstance(rope, LearnedRotary):  # used as given (its own frequencies / generators)
        for t in tables:
            _check_pairs(rope, t)
        return {t.layer_type: rope for t in tables}
    return {t.layer_type: _rope_on_table(rope, t) for t in tables}


def _check_options(options: dict) -> None:
    """Refuse an option :class:`StructuralRoPE` does not take, or one the model sets."""
    known = [p for p in inspect.signature(StructuralRoPE.__init__).parameters if p not in ("self", *_FROM_MODEL)]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise SpecError(
            f"unknown option(s) {unknown}; install_structural_rope takes the StructuralRoPE options {known} "
            f"({', '.join(_FROM_MODEL)} come from the model and the call)"
        )


def _check_head_groups(body: nn.Module, ropes: dict) -> None:
    """Refuse a per-head encoding for the wrong head count, or one that splits a GQA group across axes.

    Query heads sharing a key/value head must share its rotation for every coordinate: decided here
    from the static head → axis assignment (the attention-time check is skipped under ``torch.compile``).
    """
    config = getattr(body, "config", None)
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(heads, int):
        return
    kv = getattr(config, "num_key_value_heads", None) or heads
    for rope in ropes.values():
        if not isinstance(rope, StructuralRoPE) or not rope._per_head():  # a learned rotary: one for every head
            continue
        angles = rope._angle_matrix(torch.float32).detach()  # (H', A, P)
        if angles.shape[0] != heads:
            raise SpecError(
                f"the per-head encoding was built for {angles.shape[0]} heads; the model has num_attention_heads = {heads}"
            )
        if kv == heads or heads % kv:
            continue
        group = heads // kv
        groups = angles.reshape(kv, group, *angles.shape[1:])
        if not torch.equal(groups, groups[:, :1].expand_as(groups)):
            raise SpecError(_split_group_message(rope, heads, kv, group))


def _split_group_message(rope: StructuralRoPE, heads: int, kv: int, group: int) -> str:
    axes = rope._head_axes
    what = f"heads → axes {axes}" if axes is not None else "the (H, P, A) mixing rows"
    example = [group * (kv // rope.num_axes + (a < kv % rope.num_axes)) for a in range(rope.num_axes)]
    return (
        f"per-head encoding on {heads} query heads sharing {kv} key/value heads (groups of {group}): {what} "
        f"differ inside a group, but a cached key can be rotated one way only. Give sections (heads per axis) "
        f"in multiples of {group}, e.g. sections={example}"
    )


def _swap_rotary(body: nn.Module, tables: list, ropes: dict, state: CoordinateState) -> dict[str, nn.Module]:
    """Replace every rotary module of ``body`` by a :class:`StructuralRotaryEmbedding`; return the originals."""
    originals: dict[str, nn.Module] = {}
    for attr in dict.fromkeys(t.attr for t in tables):
        mine = [t for t in tables if t.attr == attr]
        typed = {t.layer_type: (ropes[t.layer_type], t.scaling) for t in mine if t.layer_type is not None}
        default = mine[0] if len(mine) == 1 else next((t for t in mine if t.layer_type == "full_attention"), mine[0])
        originals[attr] = getattr(body, attr)
        rotary = StructuralRotaryEmbedding(ropes[default.layer_type], state, default.scaling, layer_ropes=typed or None)
        setattr(body, attr, rotary)
    return originals


def _select_per_head_attention(model: nn.Module, body: nn.Module) -> tuple | None:
    """Select ``structpos_<eager|sdpa>`` for a per-head encoding; the ``(model, previous)`` to restore."""
    base = _attention_impl(body) or "sdpa"
    if base.startswith("structpos_"):
        return None
    _select_attention(model, register_structural_attention("eager" if base == "eager" else "sdpa"))
    return model, base


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
        batch, length, past = x.shape[0], x.shape[1], _past_length(kwargs)
        impl = _attention_impl(module)
        _check_bias(state, impl)
        documents = _packed_offsets(impl, kwargs, batch, length, past, state.cu_seqlens)
        pos = kwargs.get("position_ids")
        pos = None if pos is None else as_tensor(pos, "position_ids", x.device)
        flat = state.positions(None if pos is None or pos.dim() == 3 else pos, batch, length, past, x.device)
        state.resolve(pos, batch, length, past, device=x.device)
        mask = kwargs.get("attention_mask")
        state.padding = mask.to(torch.bool) if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None
        state.cu_seqlens = documents
        kwargs["position_ids"] = flat
        return args, kwargs

    return hook


def _check_bias(state: CoordinateState, impl: str | None) -> None:
    if state.extras and impl != "structpos_flex":
        raise SpecError(
            f"a structural bias is set (set_bias({', '.join(state.extras)}=...)) but attn_implementation {impl!r} "
            "cannot apply it; select register_structural_attention('flex'), or clear it with set_bias()"
        )


_PACKED_KEYS = ("cu_seqlens", "cu_seq_lens_q", "cu_seq_lens_k")


def _packed_offsets(
    impl: str | None, kwargs: dict, batch: int, length: int, past: int, cached: torch.Tensor | None
) -> torch.Tensor | None:
    """Document offsets of a packed row over the whole KV cache (``None``: not packed).

    ``cached`` are the offsets of the cached tokens (the previous call's). A step with a cache
    either gives ``cu_seqlens`` over cached and new tokens, or none: the new tokens then continue
    the last document. SpecError where the attention would ignore the documents.
    """
    given = [key for key in _PACKED_KEYS if kwargs.get(key) is not None]
    if given and str(impl).startswith("flash") and "cu_seqlens" not in given:
        return None  # HF's flash-attention reads its own cu_seq_lens_q/k
    if not given and (past == 0 or cached is None):
        return None
    what = given[0] if given else "a KV cache filled by a packed batch"
    if impl != "structpos_flex":
        raise SpecError(
            f"a packed batch ({what}) needs attn_implementation='structpos_flex' "
            "(register_structural_attention('flex')), which keeps attention inside each document; "
            f"{impl!r} would ignore {what} and attend across documents"
        )
    if batch != 1:
        raise SpecError(f"a packed batch ({what}) must be one row (B = 1), given B = {batch}")
    if not given:
        cu = _cached_offsets(cached, past).clone()
        cu[-1] = past + length  # the new tokens continue the last document
        return cu
    return _step_offsets(as_tensor(kwargs[given[0]], given[0]), given[0], past, length, cached)


def _cached_offsets(cached: torch.Tensor | None, past: int) -> torch.Tensor:
    """The document offsets of the ``past`` cached tokens (one document when the prefill was not packed)."""
    if cached is None:
        return torch.tensor([0, past])
    if int(cached[-1]) != past:
        raise SpecError(
            f"the KV cache holds {past} tokens, but the packed batch this patch saw last held {int(cached[-1])}: "
            "continue a packed cache with the model call that filled it"
        )
    return cached


def _step_offsets(cu: torch.Tensor, key: str, past: int, length: int, cached: torch.Tensor | None) -> torch.Tensor:
    """``cu_seqlens`` of a call: over its ``length`` tokens at a prefill, over cache and new tokens after one."""
    total = past + length
    if past and (cu.dim() != 1 or cu.numel() == 0 or int(cu[-1]) != total):
        raise SpecError(
            f"{key} on a step with a KV cache of {past} tokens must cover the cached and the {length} new tokens "
            f"(end at {total}, the cached documents' offsets first); given {cu.tolist()}. Or leave it out: "
            "the new tokens then continue the last document"
        )
    cu = check_cu_seqlens(cu, total)
    if past:
        old = _cached_offsets(cached, past)
        old, new = old[old < past].unique_consecutive(), cu[cu < past].unique_consecutive()
        if not torch.equal(old.cpu(), new.cpu()):
            raise SpecError(
                f"{key} {cu.tolist()} moves the document starts of the {past} cached tokens ({old.tolist()}): "
                "their keys were computed within those documents"
            )
    return cu
