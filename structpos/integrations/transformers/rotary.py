"""The rotary side of the patch: a drop-in ``rotary_emb`` computing cos/sin from coordinates, and the model's tables.

A model keeps one frequency table (``rotary_emb.inv_freq``) or several (Gemma 3: one per layer
type); each gets a :class:`~structpos.encoders.StructuralRoPE` on its own frequencies, with a
static rope scaling kept on the token axis (``scale_axes="token"``) or on every axis.

Examples
--------
Coordinates equal to the token index on every axis give HF's stock angles ``position · inv_freq``:

>>> rope = StructuralRoPE(12, 3)
>>> emb = StructuralRotaryEmbedding(rope, CoordinateState(3))
>>> cos, sin = emb(torch.zeros(1, 5, 12), torch.arange(5)[None])
>>> angles = torch.arange(5)[:, None] * rope.inv_freq
>>> torch.allclose(sin[0], torch.cat((angles, angles), -1).sin())
True
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from ...encoders._rotary import rope_inv_freq
from ...encoders.rope import Allocation, StructuralRoPE
from ...exceptions import SpecError
from .state import CoordinateState


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


def _check_pairs(rope, table: _RotaryTable) -> None:
    """Refuse a ready ``rope`` (a StructuralRoPE or a learned rotary) whose rotary pairs are not those of
    the model's ``table`` (``head_dim`` mismatch)."""
    if rope.head_dim // 2 != table.inv_freq.numel():
        raise SpecError(
            f"rope has {rope.head_dim // 2} rotary pairs (head_dim {rope.head_dim}); the model's "
            f"{table.layer_type or 'rotary'} table has {table.inv_freq.numel()} (rotary dimension "
            f"{2 * table.inv_freq.numel()}): build the encoder with that head_dim"
        )


def _rope_on_table(rope: StructuralRoPE, table: _RotaryTable) -> StructuralRoPE:
    """``rope`` itself when it already has the table's frequencies, else a copy on them."""
    _check_pairs(rope, table)
    inv = table.inv_freq.detach().float().to(rope.inv_freq.device)
    if torch.equal(rope.inv_freq.detach(), inv):
        return rope
    other = copy.deepcopy(rope)
    with torch.no_grad():
        other.inv_freq.copy_(inv)
    other.cache.clear()
    return other


def _rope_params(config) -> dict:
    """The config's rope settings: 5.x ``rope_parameters``, 4.5x ``rope_scaling`` (``{}`` when none)."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    return params if isinstance(params, dict) else {}


def _token_axis_scaling(config, inv_freq: torch.Tensor, num_axes: int, scale_axes: ScaleAxes) -> torch.Tensor | None:
    """``(A, P)`` frequencies: the model's (scaled) ``inv_freq`` on axis 0, unscaled on the others.

    ``None`` when nothing is scaled, for one axis, or with ``scale_axes="all"`` (every axis then
    shares the model's table). Raises SpecError for rope types whose table is not static."""
    if scale_axes not in ("token", "all"):
        raise SpecError(f"scale_axes must be 'token' or 'all', got {scale_axes!r}")
    params = _rope_params(config)
    kind = params.get("rope_type", params.get("type", "default"))
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
