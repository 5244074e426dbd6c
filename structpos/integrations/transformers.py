"""Structural positions inside Hugging Face ``transformers`` decoder models (Llama, Qwen2/3, Mistral, Gemma 1-3, Phi-3).

HF decoder models compute ``(cos, sin) = model.rotary_emb(hidden, position_ids)`` once, of
shape ``(B, L, D_rot)`` (``cat(f, f)``: half-split pairs), and every attention layer applies
``q·cos + rotate_half(q)·sin``. :func:`install_structural_rope` swaps ``rotary_emb`` for a
:class:`StructuralRotaryEmbedding` that returns the same tensors computed from per-token
coordinates ``c_n ∈ ℝ^A``:

    cos = cos(φ_n) · s,   φ_{n,j} = ω_j ⟨W_j, c_n⟩

with the model's own ``inv_freq`` ``ω`` (so ``rope_theta``, ``head_dim`` and partial rotary are
respected) and its ``attention_scaling`` ``s``. Static rope scaling (linear, llama3, yarn) stays
on the token-index axis 0 (``scale_axes="token"``): the structural axes use the unscaled
``rope_theta`` table; ``scale_axes="all"`` puts the scaled table on every axis. With every axis
equal to the token index this is exactly the stock model (for a scaled model: with
``scale_axes="all"``).

Usage::

    patch = install_structural_rope(model, num_axes=3, allocation="sectioned")
    out = model(input_ids, position_ids=coords)            # coords (B, L, 3)
    patch.set_coordinates(prompt_coords)                   # then generate() continues them
    model.generate(input_ids, max_new_tokens=8)

A forward pre-hook on the decoder body takes 3-D ``position_ids`` ``(B, L, A)`` out of the
call (HF's mask code reads ``position_ids`` as 1-D positions and would misread them), keeps
them in a :class:`CoordinateState`, and passes the token index on. **Coordinate continuation**
(KV cache): the coordinates of tokens that arrive after the prompt come from ``rule(last, n)``
with ``last`` the ``(B, A)`` coordinates of the last token seen; the default
:func:`continue_axis0` adds ``1, 2, …, n`` to axis 0 and copies the other axes (a generated
token extends the sequence axis and stays in the structure of the last prompt token). Explicit
3-D ``position_ids`` on a decode step override the rule; a prompt given no structural
coordinates keeps 1-D positions on every axis (the stock model) while generating.

``allocation="per_head"`` (or per-head mixing) cannot be expressed as one ``(B, L, D)`` cos/sin:
the rotary module then returns the identity and the attention function registered by
:func:`register_structural_attention` (``"structpos_eager"`` / ``"structpos_sdpa"`` /
``"structpos_flex"``) rotates ``q`` and the cached keys per head, using the key coordinates the
state keeps for the whole cache. The attention modules are found by their projections: separate
``q_proj``/``k_proj`` or a fused ``qkv_proj`` (Phi-3); any other layout is refused with a
:class:`~structpos.exceptions.SpecError` rather than left unrotated. Dynamic rope types
(``dynamic``, ``longrope``) raise SpecError with ``scale_axes="token"``; with ``"all"`` they are used with
their initial ``inv_freq``. Supports transformers 4.5x
(``past_key_values``) and 5.x (``cache``).

**Several rotary tables.** Gemma 3 rotates its sliding-window layers with one base (10 000) and
its full-attention layers with another (1 000 000). transformers 4.5x keeps two modules
(``rotary_emb`` for full, ``rotary_emb_local`` for sliding layers); 5.x keeps one module with
``{layer_type}_inv_freq`` buffers, called as ``rotary_emb(x, position_ids, layer_type)``. Both
are patched: every table gets its own encoder on its own frequencies (``StructuralPatch.ropes``,
keyed by layer type), all reading the same coordinates, so every layer sees the structure and
token-index coordinates still give the stock model.

**Packed batches.** ``cu_seqlens`` (as :class:`~structpos.integrations.collate.StructuralCollator`
``mode="pack"`` writes it) is honoured by ``attn_implementation="structpos_flex"``, which adds a
document mask (no token attends across a document boundary). Any other attention would ignore it
and attend across documents, so the call raises :class:`~structpos.exceptions.SpecError` instead.

**Tokens without a node.** :func:`structpos.align.token_coords` gives ``-1`` on the structural
axes of tokens that cover no node (BOS/EOS, special and padding tokens); the collator passes
them on. ``-1`` is then an ordinary coordinate: the rotation is relative, so such a token sits
one step before 0 on that axis (a BOS token one level above the root), exactly as if every
coordinate were shifted by +1. No error, no masking; replace the value before batching (e.g.
``np.where(c < 0, 0, c)``, as :func:`qwen_vl_position_ids` does) to place those tokens elsewhere.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from ..encoders._rotary import rope_inv_freq
from ..encoders.rope import Allocation, StructuralRoPE, check_cu_seqlens
from ..exceptions import ShapeError, SpecError

__all__ = [
    "QWEN_VL_AXES",
    "CoordinateState",
    "StructuralPatch",
    "StructuralRotaryEmbedding",
    "continue_axis0",
    "install_structural_rope",
    "qwen_vl_position_ids",
    "register_structural_attention",
]

ContinueRule = Callable[[torch.Tensor, int], torch.Tensor]
BaseAttention = Literal["eager", "sdpa", "flex"]


def continue_axis0(last: torch.Tensor, num_new: int) -> torch.Tensor:
    """Default continuation rule: axis 0 counts on from ``last``, the other axes are copied.

    Parameters
    ----------
    last : torch.Tensor
        ``(B, A)`` coordinates of the last token seen.
    num_new : int
        Number of new tokens.

    Returns
    -------
    torch.Tensor
        ``(B, num_new, A)`` coordinates of the new tokens.

    Examples
    --------
    >>> continue_axis0(torch.tensor([[5, 2, 1]]), 2).tolist()
    [[[6, 2, 1], [7, 2, 1]]]
    """
    steps = torch.arange(1, num_new + 1, device=last.device, dtype=last.dtype)
    new = last[:, None, :].expand(last.shape[0], num_new, last.shape[1]).clone()
    new[..., 0] = new[..., 0] + steps
    return new


@dataclass
class CoordinateState:
    """Per-model coordinate bookkeeping shared by the hook, the rotary module and the attention function.

    Parameters
    ----------
    num_axes : int
        ``A``.
    rule : callable
        ``rule(last (B, A), n) -> (B, n, A)`` for tokens after the prompt (:func:`continue_axis0`).

    Attributes
    ----------
    pending : torch.Tensor or None
        Coordinates set by :meth:`StructuralPatch.set_coordinates` for the next prefill.
    current : torch.Tensor or None
        ``(B, L, A)`` coordinates of the tokens of the running forward pass.
    keys : torch.Tensor or None
        ``(B, S, A)`` coordinates of every token in the KV cache (current ones included).
    padding : torch.Tensor or None
        ``(B, S)`` bool, True on real key tokens (from a 2-D ``attention_mask``).
    extras : dict
        Inputs of structural biases for the ``structpos_flex`` attention (see :mod:`.flex`).
    cu_seqlens : torch.Tensor or None
        ``(D + 1,)`` document offsets of a packed batch (``B = 1``) in the running forward pass.

    Examples
    --------
    >>> st = CoordinateState(num_axes=2)
    >>> st.resolve(None, batch=1, length=3, past=0).tolist()
    [[[0, 0], [1, 1], [2, 2]]]
    >>> st.resolve(torch.tensor([[[0, 0], [1, 5], [2, 5]]]), batch=1, length=3, past=0).shape
    torch.Size([1, 3, 2])
    >>> st.resolve(None, batch=1, length=1, past=3).tolist()  # continues axis 0, copies axis 1
    [[[3, 5]]]
    >>> st.keys.tolist()  # the whole cache: prompt and decoded token
    [[[0, 0], [1, 5], [2, 5], [3, 5]]]
    >>> st.resolve(torch.zeros(1, 3, 4, dtype=torch.long), batch=1, length=3, past=0)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: position_ids must have shape (B, L, A) = (1, 3, 2); given (1, 3, 4)
    """

    num_axes: int
    rule: ContinueRule = continue_axis0
    pending: torch.Tensor | None = None
    current: torch.Tensor | None = None
    keys: torch.Tensor | None = None
    padding: torch.Tensor | None = None
    extras: dict = field(default_factory=dict)
    structural: bool = False
    cu_seqlens: torch.Tensor | None = None

    def _check(self, coords: torch.Tensor, batch: int, length: int, what: str) -> torch.Tensor:
        expected = (batch, length, self.num_axes)
        if not isinstance(coords, torch.Tensor) or coords.dtype in (torch.float16, torch.bfloat16, torch.bool):
            given = (
                f"{coords.dtype} {tuple(coords.shape)}" if isinstance(coords, torch.Tensor) else type(coords).__name__
            )
            raise ShapeError(f"{what} must be an int64 or fp32 tensor of shape {expected}; given {given}")
        if coords.dim() == 2 and coords.shape == (length, self.num_axes):
            coords = coords.expand(batch, length, self.num_axes)
        if tuple(coords.shape) != expected:
            raise ShapeError(f"{what} must have shape (B, L, A) = {expected}; given {tuple(coords.shape)}")
        return coords

    def resolve(self, position_ids, batch: int, length: int, past: int, device=None) -> torch.Tensor:
        """Coordinates ``(B, L, A)`` of the incoming tokens; updates ``current``, ``keys``.

        Order: 3-D ``position_ids``; the pending coordinates at a prefill; the continuation
        rule after a prefill that had structural coordinates; 2-D ``position_ids`` (or the
        token index) on every axis — so a sequence given no structure runs as the stock model.
        """
        if past == 0:
            self.structural = False
        if position_ids is not None and position_ids.dim() == 3:
            coords, self.structural = self._check(position_ids, batch, length, "position_ids"), True
        elif past == 0 and self.pending is not None:
            coords, self.pending = self._check(self.pending.to(device), batch, length, "set_coordinates()"), None
            self.structural = True
        elif past > 0 and self.structural and self.keys is not None and self.keys.shape[0] == batch:
            coords = self.rule(self.keys[:, -1], length).to(self.keys.dtype)
        else:  # no structure given for this sequence: 1-D positions on every axis (the stock model)
            if position_ids is None:
                position_ids = torch.arange(past, past + length, device=device)[None].expand(batch, length)
            coords = position_ids[..., None].expand(*position_ids.shape, self.num_axes)
            coords = coords.expand(batch, length, self.num_axes)
        prev = self.keys if past > 0 and self.keys is not None else None
        self.keys = coords if prev is None else torch.cat([prev.to(coords.dtype), coords], dim=1)
        self.current = coords
        return coords


class StructuralRotaryEmbedding(nn.Module):
    """Drop-in for a HF model's ``rotary_emb``: ``forward(x, position_ids[, layer_type]) -> (cos, sin)`` ``(B, L, D_rot)``.

    Parameters
    ----------
    rope : StructuralRoPE
        The encoder (its ``inv_freq`` is the model's).
    state : CoordinateState
        Where the coordinates of the running forward pass are found.
    attention_scaling : float
        The model's post-scaling of cos/sin (yarn, longrope; 1 otherwise).
    layer_ropes : dict, optional
        ``layer_type → (encoder, attention_scaling)`` for a rotary module called with a layer
        type (Gemma 3 on transformers 5.x: ``rotary_emb(x, position_ids, "sliding_attention")``).
        Each layer type then gets its own frequencies; ``rope`` serves calls without a type.

    Examples
    --------
    >>> rope = StructuralRoPE(8, 2)
    >>> emb = StructuralRotaryEmbedding(rope, CoordinateState(2))
    >>> cos, sin = emb(torch.zeros(1, 3, 4), torch.arange(3)[None])
    >>> cos.shape
    torch.Size([1, 3, 8])

    1-D positions on every axis give HF's stock ``cat(f, f)`` angles ``position · inv_freq``:

    >>> angles = torch.arange(3)[:, None] * rope.inv_freq
    >>> torch.allclose(cos[0], torch.cat((angles, angles), -1).cos())
    True
    """

    def __init__(
        self,
        rope: StructuralRoPE,
        state: CoordinateState,
        attention_scaling: float = 1.0,
        layer_ropes: dict[str, tuple[StructuralRoPE, float]] | None = None,
    ):
        super().__init__()
        self.rope, self.state, self.attention_scaling = rope, state, float(attention_scaling)
        self.layer_ropes = nn.ModuleDict({lt: r for lt, (r, _) in (layer_ropes or {}).items()})
        self.layer_scaling = {lt: float(sc) for lt, (_, sc) in (layer_ropes or {}).items()}
        self.per_head = rope._per_head()

    def rope_for(self, layer_type: str | None) -> tuple[StructuralRoPE, float]:
        """The encoder and cos/sin scaling of ``layer_type`` (``None``: the default ones)."""
        if layer_type is None:
            return self.rope, self.attention_scaling
        if layer_type not in self.layer_ropes:
            raise SpecError(
                f"rotary embedding called for layer type {layer_type!r}; the patch knows {sorted(self.layer_ropes)}"
            )
        rope: Any = self.layer_ropes[layer_type]
        return rope, self.layer_scaling[layer_type]

    def coords_for(self, position_ids: torch.Tensor) -> torch.Tensor:
        """The state's current coordinates when they fit ``position_ids``, else ``position_ids`` on every axis."""
        cur = self.state.current
        if cur is not None and cur.shape[:2] == position_ids.shape[-2:]:
            return cur.to(position_ids.device)
        if position_ids.dim() == 3 and position_ids.shape[-1] == self.rope.num_axes:
            return position_ids
        return position_ids[..., None].expand(*position_ids.shape, self.rope.num_axes)

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        coords = self.coords_for(position_ids)
        rope, scaling = self.rope_for(layer_type)
        if rope._per_head():  # rotation happens in the attention function, per head
            ones = torch.ones(*coords.shape[:-1], rope.head_dim, dtype=x.dtype, device=x.device)
            return ones, torch.zeros_like(ones)
        with torch.autocast(device_type=x.device.type, enabled=False):
            ang = rope.angles(coords.to(x.device))
            emb = torch.cat((ang, ang), dim=-1)
            cos, sin = emb.cos() * scaling, emb.sin() * scaling
        return cos.to(x.dtype), sin.to(x.dtype)


@dataclass(frozen=True)
class _RotaryTable:
    """One frequency table of a model: the body attribute holding it, the layer type it serves
    (``None``: every layer), its ``inv_freq`` and cos/sin scaling."""

    attr: str
    layer_type: str | None
    inv_freq: torch.Tensor
    scaling: float


_LOCAL_ROTARY = {"rotary_emb": "full_attention", "rotary_emb_local": "sliding_attention"}
"""transformers 4.5x Gemma 3: which layer type each of its two rotary modules serves."""


def _rotary_tables(body: nn.Module) -> list[_RotaryTable]:
    """Every rotary table of ``body``: one ``rotary_emb`` (most models), ``rotary_emb`` +
    ``rotary_emb_local`` (Gemma 3, transformers 4.5x) or per-layer-type buffers of one module
    (``{layer_type}_inv_freq``: Gemma 3, transformers 5.x)."""
    mods = {name: m for name, m in body.named_children() if name.startswith("rotary_emb")}
    several = len(mods) > 1
    tables = []
    for attr, mod in mods.items():
        inv = getattr(mod, "original_inv_freq", None)
        inv = getattr(mod, "inv_freq", None) if not isinstance(inv, torch.Tensor) else inv
        if isinstance(inv, torch.Tensor):
            if several and attr not in _LOCAL_ROTARY:
                raise SpecError(
                    f"{type(body).__name__} has rotary modules {sorted(mods)}: the layer type of {attr!r} is unknown"
                )
            layer_type = _LOCAL_ROTARY[attr] if several else None
            tables.append(_RotaryTable(attr, layer_type, inv, float(getattr(mod, "attention_scaling", 1.0))))
            continue
        per_type = [
            lt
            for lt in getattr(mod, "layer_types", ())
            if isinstance(getattr(mod, f"{lt}_inv_freq", None), torch.Tensor)
        ]
        if not per_type:
            raise SpecError(
                f"{type(mod).__name__} ({type(body).__name__}.{attr}) keeps neither an inv_freq buffer nor "
                "per-layer-type {layer_type}_inv_freq buffers: a rotary layout install_structural_rope cannot patch"
            )
        for lt in per_type:
            orig = getattr(mod, f"{lt}_original_inv_freq", None)
            inv = orig if isinstance(orig, torch.Tensor) else getattr(mod, f"{lt}_inv_freq")
            tables.append(_RotaryTable(attr, lt, inv, float(getattr(mod, f"{lt}_attention_scaling", 1.0))))
    return tables


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
        """Per-token inputs of a structural bias for ``attn_implementation="structpos_flex"`` (see :mod:`.flex`)."""
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


ScaleAxes = Literal["token", "all"]
TOKEN_AXIS_SCALING = ("linear", "yarn", "llama3")
"""HF rope types that ``scale_axes="token"`` keeps on axis 0 (static frequency tables)."""


def _rope_from_table(
    body: nn.Module, table: _RotaryTable, num_axes: int, allocation: Allocation, scale_axes: ScaleAxes, **options
) -> StructuralRoPE:
    """An encoder on ``table``'s frequencies; a model-wide rope scaling stays on axis 0 (``scale_axes="token"``)."""
    inv_freq = table.inv_freq
    config = getattr(body, "config", None)
    options.setdefault("num_heads", getattr(config, "num_attention_heads", None))
    per_axis = None
    if table.layer_type is None:  # per-layer-type tables (Gemma 3) keep their own frequencies on every axis
        per_axis = _token_axis_scaling(config, inv_freq.float().cpu(), num_axes, scale_axes)
    freq: dict[str, Any] = {"inv_freq": inv_freq.float()} if per_axis is None else {"axis_inv_freq": per_axis}
    rope = StructuralRoPE(2 * inv_freq.numel(), num_axes, allocation, qk_layout="bhld", **freq, **options)
    return rope.to(inv_freq.device)


def _rope_on_table(rope: StructuralRoPE, table: _RotaryTable) -> StructuralRoPE:
    """``rope`` itself when it already has the table's frequencies, else a copy on them."""
    inv = table.inv_freq.detach().float().to(rope.inv_freq.device)
    if rope.inv_freq.shape != inv.shape:
        raise SpecError(
            f"rope has {rope.num_pairs} rotary pairs; the model's {table.layer_type or 'rotary'} table has {inv.numel()}"
        )
    if torch.equal(rope.inv_freq.detach(), inv):
        return rope
    other = copy.deepcopy(rope)
    with torch.no_grad():
        other.inv_freq.copy_(inv)
    other.cache.clear()
    return other


def _token_axis_scaling(config, inv_freq: torch.Tensor, num_axes: int, scale_axes: ScaleAxes) -> torch.Tensor | None:
    """``(A, P)`` frequencies: the model's (scaled) ``inv_freq`` on axis 0, unscaled on the others.

    ``None`` when nothing is scaled, for one axis, or with ``scale_axes="all"`` (every axis then
    shares the model's table). Raises SpecError for rope types whose table is not static."""
    if scale_axes not in ("token", "all"):
        raise SpecError(f"scale_axes must be 'token' or 'all', got {scale_axes!r}")
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    kind = params.get("rope_type", params.get("type", "default")) if isinstance(params, dict) else "default"
    if scale_axes == "all" or num_axes == 1 or kind == "default" or not isinstance(kind, str):
        return None
    if kind not in TOKEN_AXIS_SCALING:
        raise SpecError(
            f"the model's rope_type {kind!r} cannot be kept on the token axis alone (its frequencies are not "
            f"a static table); supported: {', '.join(TOKEN_AXIS_SCALING)}. Pass scale_axes='all' to use its "
            "initial frequencies on every axis"
        )
    theta = params.get("rope_theta", getattr(config, "rope_theta", None))
    if theta is None:
        raise SpecError(f"rope_type {kind!r}: the config has no rope_theta to build the unscaled structural axes")
    plain = rope_inv_freq(2 * inv_freq.numel(), float(theta))
    return torch.cat([inv_freq[None], plain[None].expand(num_axes - 1, -1)])


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
        from .flex import hf_flex_attention

        inner, mask_fn = hf_flex_attention, (lambda *a, **k: None)
    else:
        if base == "eager":
            from transformers.models.llama.modeling_llama import eager_attention_forward as inner  # type: ignore[assignment]
        else:
            inner = ALL_ATTENTION_FUNCTIONS["sdpa"]
        mask_fn = ALL_MASK_ATTENTION_FUNCTIONS[base] if ALL_MASK_ATTENTION_FUNCTIONS is not None else None

    def attention(module, query, key, value, attention_mask, **kwargs):
        if getattr(module, "_structpos", None) is not None:
            query, key = _rotate_per_head(module, query, key)
        fn = inner
        if base == "eager":  # the model's own eager attention (Gemma's softcapping, ...) when it has one
            fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", inner)
        return fn(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(name, attention)
    if AttentionMaskInterface is not None and mask_fn is not None:
        AttentionMaskInterface.register(name, mask_fn)
    return name


# ------------------------------------------------------------------------------------ Qwen-VL
QWEN_VL_AXES: dict[str, tuple[str, str, str]] = {
    "tree": ("index", "depth", "sibling"),
    "table": ("index", "row", "col"),
    "hier": ("index", "paragraph", "sentence"),
}
"""Structure coordinates behind Qwen-VL's (temporal, height, width) axes, per coordinate family.

Trees (code, JSON, XML, YAML, CoNLL-U): (token index, depth, sibling index); tables: (token
index, row, column) — a table is a grid like an image; documents: (token index, paragraph,
sentence). Tokens without a node (fill ``-1``) take 0 on the structural axes."""


def qwen_vl_position_ids(token_coords: dict, family: str, offset: int = 0) -> torch.Tensor:
    """Qwen2-VL / Qwen2.5-VL / Qwen3-VL ``position_ids`` ``(3, 1, L)`` from :func:`structpos.align.token_coords`.

    No patching: these models already rotate pair sections (Qwen2/2.5-VL ``mrope_section``) or
    interleaved pairs (Qwen3-VL) by three position axes. Axis 0 (temporal) is the token index
    (``+ offset``, e.g. the length of a preceding prompt), so text-like order is kept; the two
    other axes carry the structure (:data:`QWEN_VL_AXES`).

    Parameters
    ----------
    token_coords : dict
        Output of :func:`~structpos.align.token_coords` with the family's columns.
    family : {"tree", "table", "hier"}
        Which coordinates to use.
    offset : int
        Added to the token index.

    Returns
    -------
    torch.Tensor
        int64 ``(3, 1, L)``; stack several along dim 1 for a batch.

    Examples
    --------
    >>> import numpy as np
    >>> tc = {"row": np.array([0, 0, 1]), "col": np.array([0, 1, -1])}
    >>> qwen_vl_position_ids(tc, "table")[:, 0].tolist()
    [[0, 1, 2], [0, 0, 1], [0, 1, 0]]
    """
    if family not in QWEN_VL_AXES:
        raise SpecError(f"family must be one of {sorted(QWEN_VL_AXES)}, got {family!r}")
    _, a1, a2 = QWEN_VL_AXES[family]
    missing = [a for a in (a1, a2) if a not in token_coords]
    if missing:
        raise SpecError(f"token_coords lacks {missing} (computed with the {family!r} coordinate family?)")
    h = torch.as_tensor(token_coords[a1]).to(torch.int64).clamp_min(0)
    w = torch.as_tensor(token_coords[a2]).to(torch.int64).clamp_min(0)
    if h.shape != w.shape or h.dim() != 1:
        raise ShapeError(f"{a1} and {a2} must be (L,) arrays of one length; given {tuple(h.shape)}, {tuple(w.shape)}")
    t = torch.arange(h.numel(), dtype=torch.int64) + offset
    return torch.stack([t, h, w])[:, None, :]
