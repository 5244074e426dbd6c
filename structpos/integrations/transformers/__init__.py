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
The patch remembers the documents of a packed KV cache: a decode step without ``cu_seqlens``
continues the last document (its tokens see that document only); a step may instead give
``cu_seqlens`` over the cached and the new tokens (``[0, 4, 6, 7]`` after ``[0, 4, 6]``: the new
token starts a document). Offsets that do not end at the cache length plus the new tokens, or that
move the cached documents' starts, raise SpecError, as does a cache that hands the attention
other keys than the tokens seen (a static cache).

**Checked inputs.** Coordinates (3-D ``position_ids``, :meth:`StructuralPatch.set_coordinates`)
may be tensors or array-likes (NumPy, nested lists) and are checked by one function
(:meth:`CoordinateState.coordinates`): integer or fp32/fp64, ``(B, L, A)`` (``(L, A)`` for
``set_coordinates``); 2-D ``position_ids`` must be HF's ``(B, L)`` positions. Coordinates pending
from ``set_coordinates`` are consumed by the next prefill; giving 3-D ``position_ids`` as well
raises (and drops them). A continuation rule's output is checked the same way (ShapeError naming
the rule). ``set_bias`` takes ``score_mod`` / ``mask_mod`` functions only, and a forward pass with
a bias set under an attention other than ``structpos_flex`` raises. A removed patch refuses every
call; installing on a patched model, unknown options, a ready ``rope`` of another rotary dimension
or head count, a per-head allocation that splits a grouped-query (GQA) group across axes, and
multimodal-RoPE models (Qwen2/2.5/3-VL, which take structure through
:func:`qwen_vl_position_ids` without patching) are refused at install.

**Tokens without a node.** :func:`structpos.align.token_coords` gives ``-1`` on the structural
axes of tokens that cover no node (BOS/EOS, special and padding tokens); the collator passes
them on. ``-1`` is then an ordinary coordinate: the rotation is relative, so such a token sits
one step before 0 on that axis (a BOS token one level above the root), exactly as if every
coordinate were shifted by +1. No error, no masking; replace the value before batching (e.g.
``np.where(c < 0, 0, c)``, as :func:`qwen_vl_position_ids` does) to place those tokens elsewhere.

**Layout.** One module a concept, every name importable from here: :mod:`.state` (the coordinate
bookkeeping), :mod:`.rotary` (the drop-in rotary module and the model's frequency tables),
:mod:`.install` (:func:`install_structural_rope`, :class:`StructuralPatch`), :mod:`.attention`
(the ``structpos_*`` attention functions), :mod:`.qwen_vl` (Qwen-VL position ids).
"""

from __future__ import annotations

from .attention import BaseAttention as BaseAttention
from .attention import register_structural_attention
from .install import StructuralPatch, install_structural_rope
from .qwen_vl import QWEN_VL_AXES, qwen_vl_position_ids
from .rotary import TOKEN_AXIS_SCALING as TOKEN_AXIS_SCALING
from .rotary import ScaleAxes as ScaleAxes
from .rotary import StructuralRotaryEmbedding
from .state import ContinueRule as ContinueRule
from .state import CoordinateState, continue_axis0

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
