"""Length extrapolation for rotary encodings, one scheme per coordinate axis.

A RoPE frequency table ``ω_j = b^{−2j/D}`` (``j = 0..P−1``, ``P = D/2``, base ``b``) trained on
coordinates ``< L₀`` can be stretched to longer ranges by rescaling the frequencies. Each scheme
maps ``ω`` to ``ω'`` and an attention factor ``m`` (cos and sin are multiplied by ``m``, so the
logits of those pairs by ``m²``); ``s`` is the extension factor:

* ``"linear"`` — position interpolation (PI): ``ω'_j = ω_j / s``;
* ``"ntk"`` — NTK-aware scaling: the base grows, ``b' = b · s^{D/(D−2)}``, ``ω'_j = b'^{−2j/D}``
  (high frequencies almost unchanged, the lowest divided by ``s``);
* ``"dynamic"`` — dynamic NTK at the current length ``n``:
  ``b' = b · (s·n/L₀ − (s − 1))^{D/(D−2)}`` for ``n > L₀`` (identity for ``n ≤ L₀``);
* ``"yarn"`` — YaRN: per pair a ramp between interpolation and extrapolation. With
  ``r_j = L₀ ω_j / 2π`` rotations over the trained range, pairs with ``r_j > β_fast`` keep ``ω_j``,
  pairs with ``r_j < β_slow`` get ``ω_j / s``, and in between
  ``ω'_j = ω_j/s · (1 − γ_j) + ω_j · γ_j`` with ``γ`` linear in the pair index between the
  two boundary dimensions ``d(β) = D·log(L₀/(2πβ)) / (2 log b)`` (floored / ceiled when
  ``truncate``); attention temperature ``m = 0.1·ln s + 1`` (or from ``mscale`` /
  ``mscale_all_dim``, or a given ``attention_factor``);
* ``"llama3"`` — Llama 3 smooth low-frequency scaling: wavelengths ``λ_j = 2π/ω_j`` above
  ``L₀/low_freq_factor`` are divided by ``s``, below ``L₀/high_freq_factor`` kept, with
  ``ω'_j = (1 − κ_j)·ω_j/s + κ_j·ω_j``, ``κ_j = (L₀/λ_j − low)/(high − low)`` in between;
* ``"clip"`` — low-frequency clipping: pairs whose wavelength exceeds ``max_wavelength`` get
  ``ω'_j = 0`` (they carry no position, so nothing about them changes past the trained range —
  the truncation of the lowest frequencies studied for p-RoPE).

``linear``, ``dynamic``, ``yarn`` and ``llama3`` are the formulas of Hugging Face's
``modeling_rope_utils`` (same keys: ``factor``, ``original_max_position_embeddings``,
``beta_fast``, ``beta_slow``, ``attention_factor``, ``mscale``, ``mscale_all_dim``,
``truncate``, ``low_freq_factor``, ``high_freq_factor``), so one axis reproduces a HF model's
``rope_parameters``. :class:`~structpos.encoders.StructuralRoPE` takes a mapping
``{axis: spec}``: each axis gets its own scheme (a tree-depth axis has a different trained range
from the token axis), the others keep ``ω``.

:func:`randomized_positions` is the training-time counterpart: positions sampled (sorted) from
a larger range per axis, so that longer test ranges are in distribution.

Examples
--------
>>> inv_freq, m = scaled_inv_freq({"rope_type": "linear", "factor": 4.0}, head_dim=8)
>>> inv_freq.tolist(), m
([0.25, 0.02500000037252903, 0.0024999999441206455, 0.0002500000118743628], 1.0)
>>> freqs, factors = axis_inv_freq({1: {"rope_type": "clip", "max_wavelength": 100.0}}, num_axes=2, head_dim=8)
>>> (freqs[1] == 0).tolist(), torch.equal(freqs[0], rope_inv_freq(8)), factors.tolist()
([False, False, True, True], True, [1.0, 1.0])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..exceptions import ShapeError, SpecError
from ._rotary import rope_inv_freq

__all__ = ["SCALING_TYPES", "scaled_inv_freq", "axis_inv_freq", "randomized_positions"]

# type → (required keys, optional keys)
SCALING_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "linear": (("factor",), ()),
    "ntk": (("factor",), ()),
    "dynamic": (("factor", "original_max_position_embeddings"), ("seq_len",)),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
    ),
    "llama3": (("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"), ()),
    "clip": (("max_wavelength",), ()),
}
"""Scaling type → (required keys, optional keys) of its spec (besides ``rope_type``)."""

_IGNORED = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}  # HF keys that are not scaling options


def _check_spec(spec: Mapping[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(spec, Mapping):
        raise SpecError(f"{where}: a scaling spec is a mapping with 'rope_type', given {type(spec).__name__}")
    kind = spec.get("rope_type", spec.get("type"))
    if kind not in SCALING_TYPES:
        raise SpecError(f"{where}: rope_type {kind!r} is not one of {', '.join(map(repr, SCALING_TYPES))}")
    required, optional = SCALING_TYPES[kind]
    opts = {k: v for k, v in spec.items() if k not in _IGNORED}
    unknown = [k for k in opts if k not in required + optional]
    if unknown:
        raise SpecError(
            f"{where}: {kind!r} scaling has no option {unknown[0]!r}; options: {', '.join(required + optional)}"
        )
    missing = [k for k in required if opts.get(k) is None]
    if missing:
        raise SpecError(f"{where}: {kind!r} scaling needs {missing[0]!r}")
    if "factor" in required and not float(opts["factor"]) >= 1.0:
        raise SpecError(f"{where}: factor must be ≥ 1, given {opts['factor']}")
    return kind, opts


def _base_exponents(head_dim: int) -> torch.Tensor:
    """``2j/D`` in fp32, computed as HF does."""
    return torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim


def _yarn(opts: dict, head_dim: int, base: float) -> tuple[torch.Tensor, float]:
    factor, original = float(opts["factor"]), opts["original_max_position_embeddings"]
    attention = opts.get("attention_factor")
    mscale, mscale_all = opts.get("mscale"), opts.get("mscale_all_dim")

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention is None:
        attention = (
            get_mscale(factor, mscale) / get_mscale(factor, mscale_all) if mscale and mscale_all else get_mscale(factor)
        )
    beta_fast, beta_slow = opts.get("beta_fast") or 32, opts.get("beta_slow") or 1

    def boundary(rotations):  # pair dimension with `rotations` turns over the trained range
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = boundary(beta_fast), boundary(beta_slow)
    if opts.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, head_dim, 2).to(torch.float32) / head_dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp  # γ: 1 keeps ω (high frequencies), 0 interpolates
    return interpolation * (1 - keep) + extrapolation * keep, float(attention)


def _llama3(opts: dict, inv_freq: torch.Tensor) -> torch.Tensor:
    factor, original = float(opts["factor"]), opts["original_max_position_embeddings"]
    low, high = opts["low_freq_factor"], opts["high_freq_factor"]
    low_wavelen, high_wavelen = original / low, original / high
    wavelen = 2 * math.pi / inv_freq
    out = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, out)


def scaled_inv_freq(
    spec: Mapping[str, Any], head_dim: int, base: float = 10000.0, *, where: str = "scaling"
) -> tuple[torch.Tensor, float]:
    """Frequencies ``ω'`` and attention factor ``m`` of one scaling spec (module docstring).

    Parameters
    ----------
    spec : mapping
        ``{"rope_type": <type>, ...}`` with the keys of :data:`SCALING_TYPES` (HF's names;
        ``rope_theta`` and ``partial_rotary_factor`` are ignored, so a HF ``rope_parameters``
        dict can be passed as it is).
    head_dim : int
        Rotated width ``D``.
    base : float
        ``b`` of ``ω_j = b^{−2j/D}``.
    where : str
        Prefix of error messages.

    Returns
    -------
    tuple
        ``(inv_freq, attention_factor)``: ``(D/2,)`` float32 and a float.

    Raises
    ------
    SpecError
        Unknown type, unknown or missing keys, ``factor < 1``.

    Examples
    --------
    NTK-aware scaling leaves the highest frequency and divides the lowest by ``s``... almost:

    >>> f, _ = scaled_inv_freq({"rope_type": "ntk", "factor": 8.0}, head_dim=64)
    >>> f[0].item(), round((rope_inv_freq(64)[-1] / f[-1]).item(), 3)
    (1.0, 8.0)
    >>> scaled_inv_freq({"rope_type": "yarn", "factor": 4.0}, 64)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: scaling: 'yarn' scaling needs 'original_max_position_embeddings'
    """
    kind, opts = _check_spec(spec, where)
    inv_freq = rope_inv_freq(head_dim, base)
    if kind == "linear":
        return inv_freq / float(opts["factor"]), 1.0
    if kind in ("ntk", "dynamic"):
        factor = float(opts["factor"])
        if kind == "dynamic":
            original = opts["original_max_position_embeddings"]
            seq_len = max(int(opts.get("seq_len") or original), original)
            factor = factor * seq_len / original - (factor - 1)
        new_base = base * factor ** (head_dim / (head_dim - 2))
        return 1.0 / (new_base ** _base_exponents(head_dim)), 1.0
    if kind == "yarn":
        return _yarn(opts, head_dim, base)
    if kind == "llama3":
        return _llama3(opts, inv_freq), 1.0
    wavelength = 2 * math.pi / inv_freq
    return torch.where(wavelength > float(opts["max_wavelength"]), torch.zeros_like(inv_freq), inv_freq), 1.0


def axis_inv_freq(
    scaling: Mapping[int, Mapping[str, Any]], num_axes: int, head_dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-axis frequency tables: axis ``a`` scaled by ``scaling[a]``, the other axes unchanged.

    Parameters
    ----------
    scaling : mapping of int to mapping
        ``{axis: spec}`` (:func:`scaled_inv_freq`).
    num_axes : int
        ``A``.
    head_dim : int
        ``D``.
    base : float
        ``b``.

    Returns
    -------
    tuple of torch.Tensor
        ``(A, D/2)`` float32 frequencies and ``(A,)`` attention factors.

    Raises
    ------
    SpecError
        An axis outside ``0..A−1`` or a bad spec (naming the axis).

    Examples
    --------
    >>> f, m = axis_inv_freq({0: {"rope_type": "linear", "factor": 2.0}}, num_axes=2, head_dim=4)
    >>> f.tolist(), m.tolist()
    ([[0.5, 0.004999999888241291], [1.0, 0.009999999776482582]], [1.0, 1.0])
    """
    freqs = rope_inv_freq(head_dim, base)[None].repeat(num_axes, 1)
    factors = torch.ones(num_axes)
    for axis, spec in scaling.items():
        if not isinstance(axis, int) or not 0 <= axis < num_axes:
            raise SpecError(f"scaling: axis {axis!r} is not one of 0..{num_axes - 1}")
        freqs[axis], m = scaled_inv_freq(spec, head_dim, base, where=f"scaling[{axis}]")
        factors[axis] = m
    return freqs, factors


def randomized_positions(
    coords: torch.Tensor, max_positions: int | Sequence[int | None], generator: torch.Generator | None = None
) -> torch.Tensor:
    """Randomised positions: every axis's integer coordinates mapped to sorted random ones from a larger range.

    For each sequence ``b`` and axis ``a`` with ``max_positions[a] = N_a``: draw ``E`` distinct
    values from ``0..N_a−1`` uniformly (``E`` = the largest coordinate + 1 in the sequence), sort
    them (``r_0 < r_1 < …``) and replace coordinate ``c`` by ``r_c``. Order and equality of
    coordinates are kept (tokens of one row stay in one row; a later token keeps a larger
    position), distances are not, so a model trained this way meets positions up to ``N_a`` —
    the test-time range — during training (randomised positional encodings, Ruoss et al. 2023).

    Parameters
    ----------
    coords : torch.Tensor
        ``(B, L, A)`` or ``(L, A)`` non-negative integer coordinates.
    max_positions : int or sequence of (int or None)
        ``N_a`` per axis (one int: every axis); ``None`` leaves an axis unchanged.
    generator : torch.Generator, optional
        Source of randomness.

    Returns
    -------
    torch.Tensor
        Coordinates of the same shape and dtype.

    Raises
    ------
    ShapeError
        Floating or negative coordinates, not 2-D/3-D, or a ``max_positions`` of the wrong length.
    SpecError
        A sequence whose coordinates need more than ``N_a`` positions on axis ``a``.

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> c = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1], [2, 0]])        # (row, column)
    >>> r = randomized_positions(c, [100, None], generator=g)
    >>> r[:, 1].tolist() == c[:, 1].tolist(), r[0, 0] == r[1, 0], bool((r[2:, 0].diff() >= 0).all())
    (True, tensor(True), True)
    """
    c = torch.as_tensor(coords)
    if c.is_floating_point() or c.is_complex() or c.dim() not in (2, 3):
        raise ShapeError(f"coords must be integer (B, L, A) or (L, A); given {c.dtype} {tuple(c.shape)}")
    squeeze = c.dim() == 2
    c = c[None] if squeeze else c
    A = c.shape[-1]
    limits = [max_positions] * A if isinstance(max_positions, int) else list(max_positions)
    if len(limits) != A:
        raise ShapeError(f"max_positions must have one entry per axis ({A}); given {len(limits)}")
    if c.numel() and int(c.min()) < 0:
        raise ShapeError("randomized_positions needs non-negative coordinates")
    out = c.clone()
    for a, n in enumerate(limits):
        if n is None:
            continue
        for b in range(c.shape[0]):
            extent = int(c[b, :, a].max()) + 1 if c.shape[1] else 0
            if extent > n:
                raise SpecError(f"axis {a}: sequence {b} has coordinates up to {extent - 1}, beyond max_positions {n}")
            picks = torch.randperm(n, generator=generator)[:extent].sort().values.to(c.device, c.dtype)
            out[b, :, a] = picks[c[b, :, a]]
    return out[0] if squeeze else out
