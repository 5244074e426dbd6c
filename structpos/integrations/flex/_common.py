"""Shared pieces of the FlexAttention integration: the callable types, the input checks, and the sizes a mod was built for.

A ``score_mod`` / ``mask_mod`` runs inside ``vmap`` or a compiled kernel, where a Python check of
index *values* is impossible: an index past the end of the per-token tensors it closes over
fails there as a raw ``IndexError`` (or reads out of bounds on a GPU). So every mod made here
records the sizes it was built for (:func:`_built_for`: batch rows, heads, query and key
positions, each with the input that fixed it), and the structpos functions that run one
(:func:`~structpos.integrations.flex.flex`, :func:`~structpos.integrations.flex.block_mask`,
:func:`~structpos.integrations.flex.dense_mask`) check them first (:func:`_check_sizes`) and
raise a :class:`~structpos.exceptions.ShapeError` naming both sizes. Mods combined with
``torch``'s ``and_masks`` / ``or_masks`` keep the tightest sizes of their parts.

Examples
--------
>>> _tokens([[0, 1, -1]], "node", 2)
tensor([[ 0,  1, -1]])
>>> def mod(b, h, q_idx, kv_idx):
...     return q_idx >= kv_idx
>>> mod = _built_for(mod, q=(4, "node is (1, 4)"), kv=(4, "node is (1, 4)"))
>>> _check_sizes(mod, "mask_mod", "block_mask", "Q=6, KV=6", q=6, kv=6)
Traceback (most recent call last):
...
structpos.exceptions.ShapeError: mask_mod was built for at most 4 query positions (node is (1, 4)); block_mask was given 6 query positions (Q=6, KV=6)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...encoders._checks import _is_int
from ...exceptions import InputError, ShapeError, SpecError

ScoreMod = Callable[..., torch.Tensor]
MaskMod = Callable[..., torch.Tensor]
DistanceFn = Callable[..., torch.Tensor]

#: Attribute of a score_mod / mask_mod / distance function holding ``{axis: (size, why)}``.
SIZES_ATTR = "structpos_sizes"
#: How the message names a size of each axis: (what it was built for, what it was given).
_AXES = {
    "batch": ("a batch of at most {}", "a batch of {}"),
    "heads": ("at most {} heads", "{} heads"),
    "q": ("at most {} query positions", "{} query positions"),
    "kv": ("at most {} key positions", "{} key positions"),
}
_TORCH_COMBINERS = ("and_masks.<locals>.and_mask", "or_masks.<locals>.or_mask")


def _flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention


def _tokens(x, name: str, dims: int, dtype=torch.int64) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.dim() != dims or t.is_floating_point() or t.is_complex():
        want = {1: "(L,)", 2: "(B, L)", 3: "(B, L, K)"}[dims]
        raise ShapeError(f"{name} must be an integer tensor of shape {want}; given {t.dtype} {tuple(t.shape)}")
    return t.to(dtype)


def _int_arg(value: Any, name: str, minimum: int = 1, maximum: int | None = None, error: type = SpecError) -> int:
    """``value`` as an ``int`` after checking it is an integer (not a bool) in ``minimum..maximum``.

    A ``torch.SymInt`` (a size traced by ``torch.compile``) passes unchecked.

    Examples
    --------
    >>> _int_arg(3, "block")
    3
    >>> _int_arg(1.5, "level", 0, 1)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: level must be an integer in 0..1; given 1.5
    """
    if isinstance(value, torch.SymInt):
        return value  # type: ignore[return-value]
    if not _is_int(value) or value < minimum or (maximum is not None and value > maximum):
        want = f"≥ {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise error(f"{name} must be an integer {want}; given {value!r}")
    return int(value)


def _id_bound(ids: torch.Tensor, size: int, name: str, bound: str) -> None:
    """ShapeError when an id of ``ids`` is ``>= size`` (``bound`` names that size in the message,
    ``"N = 3 (the parent array's length)"``); negative ids mean "none" and pass."""
    if ids.numel() and int(ids.max()) >= size:
        raise ShapeError(f"{name} ids must be < {bound}; given max {int(ids.max())}")


def _sizes_of(fn: Any) -> dict[str, tuple[int, str]]:
    """``{axis: (size, why)}`` recorded on ``fn`` (:func:`_built_for`), or merged from the parts of a
    ``torch`` ``and_masks`` / ``or_masks`` combination (they pass the indices on unchanged); ``{}``
    for anything else (nothing known, nothing checked)."""
    own = getattr(fn, SIZES_ATTR, None)
    if own is not None:
        return own
    if getattr(fn, "__qualname__", None) in _TORCH_COMBINERS and getattr(fn, "__closure__", None):
        try:
            cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
        except (AttributeError, ValueError):  # a torch whose combiners look otherwise: check nothing
            return {}
        parts = cells.get("mask_mods", ())
        if isinstance(parts, (tuple, list)):
            return _merge(*(_sizes_of(p) for p in parts))
    return {}


def _merge(*sizes: dict[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for s in sizes:
        for axis, (n, why) in s.items():
            if axis not in out or n < out[axis][0]:
                out[axis] = (n, why)
    return out


def _built_for(fn, *parts, **sizes: tuple[int, str] | None):
    """``fn`` with the sizes it was built for attached: ``sizes`` (``batch``/``heads``/``q``/``kv`` →
    ``(size, why)``, ``None``: any) merged with those of the callables in ``parts`` it calls."""
    unknown = set(sizes) - set(_AXES)
    if unknown:
        raise AssertionError(f"unknown axes {sorted(unknown)}")
    own = {axis: s for axis, s in sizes.items() if s is not None}
    setattr(fn, SIZES_ATTR, _merge(*(_sizes_of(p) for p in parts if p is not None), own))
    return fn


def _check_sizes(fn, role: str, caller: str, detail: str, **given: int | None) -> None:
    """ShapeError when ``fn`` (a score_mod or mask_mod) would index past the sizes it was built for.

    ``given``: the ``batch`` / ``heads`` / ``q`` / ``kv`` sizes it is about to be called over
    (``None``: not known, not checked); ``caller`` and ``detail`` say who asks and with what
    (``"flex"``, ``"q (1, 2, 6, 8), k (1, 2, 6, 8)"``).
    """
    if fn is None:
        return
    if not callable(fn):
        raise InputError(f"{role} must be a callable {role}(b, h, q_idx, kv_idx…); given {type(fn).__name__}")
    sizes = _sizes_of(fn)
    for axis, n in given.items():
        if n is None or axis not in sizes or isinstance(n, torch.SymInt):
            continue
        limit, why = sizes[axis]
        if n > limit:
            built, got = _AXES[axis]
            raise ShapeError(
                f"{role} was built for {built.format(limit)} ({why}); {caller} was given {got.format(n)} ({detail})"
            )


def _token_sizes(t: torch.Tensor, name: str, made_by: str) -> dict[str, tuple[int, str]]:
    """The batch / query / key sizes fixed by a ``(B, L, …)`` per-token tensor ``t``."""
    why = f"{name} given to {made_by} is {tuple(t.shape)}"
    return {"batch": (t.shape[0], why), "q": (t.shape[1], why), "kv": (t.shape[1], why)}


def _flags(x, name: str, want: str) -> torch.Tensor:
    """``x`` as a bool tensor: bools, or integers that are all 0 or 1 (floats are refused, not rounded).

    Examples
    --------
    >>> _flags([[0, 1]], "header", "(B, L)").tolist()
    [[False, True]]
    >>> _flags([[0.0, 0.4]], "header", "(B, L)")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: header must be a bool (or 0/1 integer) tensor of shape (B, L); given torch.float32 (1, 2)
    """
    t = torch.as_tensor(x)
    if t.dtype != torch.bool:
        if t.is_floating_point() or t.is_complex() or (t.numel() and not bool(((t == 0) | (t == 1)).all())):
            raise ShapeError(
                f"{name} must be a bool (or 0/1 integer) tensor of shape {want}; given {t.dtype} {tuple(t.shape)}"
            )
        t = t.to(torch.bool)
    return t
