"""Registry of encoders: name → class, option validator, documentation.

Like :data:`structpos.coords.COORDS` for coordinate families, :data:`ENCODERS` lets a config file
or a command line name an encoder (``"rope"``, ``"wire"``, ...) and check its options *before*
building anything: unknown options, missing required ones and values outside an option's choices
raise :class:`~structpos.exceptions.SpecError` naming the encoder and the option. Choices come from
the entry (``choices``) and from ``Literal[...]`` annotations of the class's ``__init__``.

Examples
--------
>>> rope = build("rope", head_dim=8, num_axes=2)
>>> type(rope).__name__, rope.num_axes
('StructuralRoPE', 2)
>>> validate_options("rope", head_dim=8, num_axes=2, allocation="diagonal")
Traceback (most recent call last):
...
structpos.exceptions.SpecError: encoder 'rope': allocation='diagonal' is not one of 'sectioned', 'interleaved', 'per_head', 'mixed'
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import SpecError
from ..registry import Entry, Registry
from ._options import AW_MODES, EDGE_PHASE_SOURCES, LAYOUTS

__all__ = ["ENCODERS", "EncoderEntry", "build", "encoders_markdown", "validate_options"]


@dataclass(frozen=True)
class EncoderEntry(Entry):
    """A registered encoder (an :class:`~structpos.registry.Entry` whose target is a class).

    Parameters
    ----------
    choices : mapping of str to tuple
        Allowed values of string options that the class's ``Literal`` hints do not declare
        (the two are merged; a hint is the one place to declare an option's values).
    coords : str
        The coordinate families that feed it (a spec, for the docs).

    Examples
    --------
    >>> ENCODERS["wire"].coords
    'lap[:k]'
    """

    choices: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    coords: str = ""


def _literal_choices(cls: type) -> dict[str, tuple[Any, ...]]:
    """``Literal[...]`` options of ``cls.__init__`` (also inside ``Optional``)."""
    try:
        hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    except Exception:  # unresolvable annotations: no choices from hints
        return {}
    out: dict[str, tuple[Any, ...]] = {}
    for name, hint in hints.items():
        args = [hint, *typing.get_args(hint)]
        for a in args:
            if typing.get_origin(a) is typing.Literal:
                out[name] = typing.get_args(a)
    return out


def _signature_options(cls: type) -> tuple[dict[str, inspect.Parameter], bool]:
    params = dict(inspect.signature(cls).parameters)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = {k: p for k, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    return named, var_kw


def validate_options(name: str, **options: Any) -> dict[str, Any]:
    """Check ``options`` for the encoder ``name`` without building it.

    Parameters
    ----------
    name : str
        A registered encoder.
    **options
        Keyword arguments for its constructor.

    Returns
    -------
    dict
        ``options`` unchanged (validated).

    Raises
    ------
    SpecError
        On an unknown encoder, an unknown or missing option, or a value outside an option's choices.

    Examples
    --------
    >>> validate_options("spd_bias", num_heads=4)
    {'num_heads': 4}
    >>> validate_options("spd_bias", heads=4)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: encoder 'spd_bias': unknown option 'heads'; options: num_heads, max_distance
    """
    entry = ENCODERS.get(name)
    cls = entry.load()
    params, var_kw = _signature_options(cls)
    unknown = [k for k in options if k not in params]
    if unknown and not var_kw:
        raise SpecError(f"encoder {name!r}: unknown option {unknown[0]!r}; options: {', '.join(params)}")
    missing = [k for k, p in params.items() if p.default is p.empty and k not in options]
    if missing:
        raise SpecError(f"encoder {name!r}: missing required option {missing[0]!r}")
    choices = {**_literal_choices(cls), **entry.choices}
    for key, value in options.items():
        allowed = choices.get(key)
        if allowed is not None and value not in allowed and value is not None:
            raise SpecError(f"encoder {name!r}: {key}={value!r} is not one of {', '.join(map(repr, allowed))}")
    return dict(options)


def build(name: str, **options: Any) -> Any:
    """Validate ``options`` and build the encoder ``name``.

    Parameters
    ----------
    name, **options
        As for :func:`validate_options`.

    Returns
    -------
    torch.nn.Module
        The encoder.

    Raises
    ------
    SpecError
        As :func:`validate_options`.

    Examples
    --------
    >>> build("spd_bias", num_heads=2, max_distance=4).table.num_embeddings
    6
    """
    validate_options(name, **options)
    return ENCODERS.load(name)(**options)


def encoders_markdown() -> str:
    """A markdown table of the registered encoders (for the docs).

    Returns
    -------
    str

    Examples
    --------
    >>> encoders_markdown().splitlines()[0]
    '| name | class | fed by | what | reference |'
    """
    rows = ["| name | class | fed by | what | reference |", "|---|---|---|---|---|"]
    for e in ENCODERS.entries.values():
        cls = e.target.partition(":")[2] if isinstance(e.target, str) else e.target.__name__
        rows.append(f"| `{e.name}` | `{cls}` | `{e.coords}` | {e.summary} | {e.reference} |")
    return "\n".join(rows)


ENCODERS: Registry[EncoderEntry] = Registry("encoder")
"""Every encoder by name (see :class:`EncoderEntry`)."""

ENCODERS.add(
    EncoderEntry(
        "rope",
        "structpos.encoders.rope:StructuralRoPE",
        coords="tree / table / hier / any integer axes",
        summary="N-axis rotary encoding of per-token coordinates; equal axes give exactly 1D RoPE.",
        reference="RoFormer (Su et al. 2021); multi-axis allocation as in M-RoPE / 2D-RoPE.",
    )
)
ENCODERS.add(
    EncoderEntry(
        "extra_plane_rope",
        "structpos.encoders.extra_planes:ExtraPlaneRoPE",
        coords="tree / table / hier axes + the token index",
        summary="Full 1-D RoPE on the head plus structural axes on extra q/k planes; zero structure = 1-D RoPE.",
        reference="structpos (the quality suite's recommended allocation); cf. RoPE + structural bias.",
    )
)
ENCODERS.add(
    EncoderEntry(
        "hier_rope",
        "structpos.encoders.hierarchical:HierarchicalRoPE",
        coords="hier",
        summary="RoPE with one named axis per level (paragraph / sentence / token, code levels).",
        reference="Hierarchical RoPE (He et al. 2024).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "wire",
        "structpos.encoders.wire:WIRE",
        coords="lap[:k]",
        choices={"layout": LAYOUTS},
        summary="Rotations from spectral coordinates, angles φ = Ω t.",
        reference="WIRE: wavelet-induced rotary encodings for graphs.",
    )
)
ENCODERS.add(
    EncoderEntry(
        "aw_rope",
        "structpos.encoders.aw_rope:AWRoPE",
        coords="any node positions + edges",
        choices={"mode": AW_MODES, "phase": EDGE_PHASE_SOURCES, "layout": LAYOUTS},
        summary="Phases transported along edges: exact solve or K-step series.",
        reference="AW-RoPE (attention-walk rotary encoding).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "string",
        "structpos.encoders.string:STRING",
        coords="any real axes",
        summary="R(c) = P·RoPE(c)·Pᵀ, learned orthogonal P (Cayley); exactly relative; P = I is RoPE.",
        reference="STRING (Schenck et al. 2025).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "comrope",
        "structpos.encoders.comrope:ComRoPE",
        coords="any real axes",
        summary="exp(Σ c_a A_a), trainable commuting block-diagonal angle matrices (axis-partitioned or linearly dependent).",
        reference="ComRoPE (Yu et al., CVPR 2025).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "liere",
        "structpos.encoders.liere:LieRE",
        coords="any real axes",
        summary="exp(Σ c_a S_a), learned dense skew generators; relative only where they commute.",
        reference="LieRE (Ostmeier et al. 2024).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "grape",
        "structpos.encoders.grape:GRAPE",
        coords="any real axes",
        summary="Multiplicative GRAPE: rank-2 skew generators, learned commuting planes or non-commuting mixtures.",
        reference="GRAPE (Zhang et al., ICLR 2026).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "grape_additive",
        "structpos.encoders.grape:GRAPEAdditive",
        coords="index / any real axes / forget-gate time",
        summary="Additive GRAPE: unipotent lift, logits + ⟨ω_h, c_j − c_i⟩ (ALiBi, FoX as special cases).",
        reference="GRAPE (Zhang et al., ICLR 2026).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "lap_pe",
        "structpos.encoders.additive:LapPEEmbedding",
        coords="lap[:k]",
        summary="Linear map of Laplacian eigenvectors (and eigenvalues) to additive features, random sign flips.",
        reference="Dwivedi et al. 2020.",
    )
)
ENCODERS.add(
    EncoderEntry(
        "spd_bias",
        "structpos.encoders.attention_bias:SPDBias",
        coords="spd[:max]",
        summary="Learned attention bias per head and hop distance.",
        reference="Graphormer (Ying et al. 2021).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "peg_bias",
        "structpos.encoders.peg:PEGBias",
        coords="peg[:k[:scale]]",
        summary="Learned per-head attention bias MLP(‖z_u − z_v‖) of spectral distances.",
        reference="PEG (Wang et al. 2022).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "tree_embedding",
        "structpos.encoders.tree_embedding:TreePositionEmbedding",
        coords="tree (depth, sibling)",
        summary="Learned depth and sibling-index embeddings added to token embeddings (clipped; -1 → zero row).",
        reference="Tree-enhanced CodeBERTa (tree positional embeddings for code).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "cope",
        "structpos.encoders.cope:CoPE",
        coords="learned gates, or unit boundaries of hier / table / tree",
        summary="Contextual positions p_ij = Σ gates, interpolated embeddings added to logits as q·e(p).",
        reference="CoPE (Golovneva et al. 2024).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "bipe",
        "structpos.encoders.bipe:BiPE",
        coords="bipe[:UNIT] (bipe_segment, bipe_offset)",
        summary="Absolute (learned / sinusoidal) code of the offset inside a segment + RoPE on the segment index.",
        reference="BiPE, bilevel positional encoding (He et al. 2024).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "spe",
        "structpos.encoders.spe:SPE",
        coords="lap[:k]",
        summary="Stable expressive PE: V·diag(φ_ℓ(λ))·Vᵀ with learned φ_ℓ, then an equivariant DeepSets network.",
        reference="SPE (Huang et al. 2024).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "fire",
        "structpos.encoders.fire:FIRE",
        coords="any distance: token, tree, spd[:max]",
        summary="Learned bias f_θ(ψ(d)/ψ(max(L_i, L_thr))), ψ(x) = log(cx + 1); also a FlexAttention score_mod.",
        reference="FIRE (Li et al. 2023).",
    )
)
ENCODERS.add(
    EncoderEntry(
        "tpe_attention",
        "structpos.encoders.tpe:TraversalOrderAttention",
        coords="tpe (traversal_positions of tpe_rank)",
        summary="Attention whose heads mix RoPE attentions under several table traversal orders (gated per token).",
        reference="2D-TPE (Li et al. 2024).",
    )
)
