"""Rotation-induced attention scores between nodes, for plotting against structural distance.

For one fixed query vector ``q`` and key vector ``k`` (seeded random, or all-ones), every node
``i`` with coordinates ``c_i`` gets ``R(c_i) q`` and ``R(c_i) k``, and

    score(i, j) = ⟨R(c_i) q, R(c_j) k⟩.

For a relative rotary encoding (``R(a)ᵀR(b) = R(b − a)``) this depends only on ``c_j − c_i``,
so plotting it against the tree/graph distance shows how much of the structure the encoding
exposes to a dot-product attention.

``encoder`` is anything with ``forward(q, k, coords) -> (q_rot, k_rot)`` for ``q, k`` of shape
``(B, L, H, D)`` and ``coords`` of shape ``(B, L, A)`` (e.g.
:class:`structpos.encoders.StructuralRoPE`). Without one, :func:`sectioned_rope_scores` uses
the plain sectioned rotary map (the default of ``StructuralRoPE``): the ``D/2`` rotation pairs
are split into ``A`` contiguous near-equal sections and pair ``j`` of axis ``a``'s section turns
by ``c_a · base^(−2j/D)``.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import ShapeError, SpecError

__all__ = ["probe_vectors", "sectioned_rope_scores", "rotary_scores"]


def probe_vectors(head_dim: int, vectors: str = "random", seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The fixed ``(q, k)`` pair: ``"ones"`` (both all-ones) or ``"random"`` (seeded Gaussian, unit norm).

    Parameters
    ----------
    head_dim : int
        Even, positive.
    vectors : {"ones", "random"}
    seed : int

    Returns
    -------
    q, k : numpy.ndarray
        ``(head_dim,)`` unit vectors.

    Raises
    ------
    SpecError
        On an odd ``head_dim`` or unknown ``vectors``.

    Examples
    --------
    >>> q, k = probe_vectors(4, "ones")
    >>> q.tolist()
    [0.5, 0.5, 0.5, 0.5]
    """
    if head_dim <= 0 or head_dim % 2:
        raise SpecError(f"head_dim must be a positive even number, got {head_dim}")
    if vectors == "ones":
        q = np.ones(head_dim) / np.sqrt(head_dim)
        return q, q.copy()
    if vectors == "random":
        rng = np.random.default_rng(seed)
        q, k = rng.standard_normal((2, head_dim))
        return q / np.linalg.norm(q), k / np.linalg.norm(k)
    raise SpecError(f"unknown probe vectors {vectors!r}; use 'random' or 'ones'")


def _section_freqs(head_dim: int, num_axes: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """Per rotation pair ``j``: the axis it reads (contiguous near-equal sections, remainder to
    the first axes) and its frequency ``ω_j = base^(−2j/D)`` (one table shared by all axes)."""
    pairs = head_dim // 2
    if num_axes > pairs:
        raise SpecError(f"{num_axes} coordinate axes need head_dim >= {2 * num_axes}, got {head_dim}")
    counts = np.full(num_axes, pairs // num_axes)
    counts[: pairs % num_axes] += 1
    axis = np.repeat(np.arange(num_axes), counts)
    freq = base ** (-2.0 * np.arange(pairs) / head_dim)
    return axis, freq


def sectioned_rope_scores(coords: np.ndarray, q: np.ndarray, k: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """``(N, N)`` scores ``⟨R(c_i) q, R(c_j) k⟩`` for the sectioned rotary map (half-split pairs).

    With complex pairs ``q̃_p = q_p + i q_{p+D/2}``: ``score = Re Σ_p conj(q̃_p e^{iφ_ip}) k̃_p e^{iφ_jp}``,
    ``φ_ip = ω_p c_{i, axis(p)}``.

    Parameters
    ----------
    coords : numpy.ndarray
        ``(N, A)`` or ``(N,)``.
    q, k : numpy.ndarray
        ``(D,)`` probe vectors.
    base : float
        RoPE base.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` float64 exact scores (complex arithmetic, no encoder).

    Raises
    ------
    SpecError
        If ``A > D/2``.

    Examples
    --------
    >>> import numpy as np
    >>> q = k = np.ones(4) / 2
    >>> sc = sectioned_rope_scores(np.array([0.0, 1.0, 2.0]), q, k)
    >>> bool(np.allclose(sc[0, 1], sc[1, 2]))      # depends on the offset only
    True
    """
    coords = np.asarray(coords, dtype=np.float64)
    if coords.ndim == 1:
        coords = coords[:, None]
    d = len(q)
    h = d // 2
    axis, freq = _section_freqs(d, coords.shape[1], base)
    phi = coords[:, axis] * freq  # (N, P)
    qc = q[:h] + 1j * q[h:]
    kc = k[:h] + 1j * k[h:]
    left = np.conj(qc * np.exp(1j * phi))
    right = kc * np.exp(1j * phi)
    return np.real(left @ right.T)


def rotary_scores(
    coords: np.ndarray, encoder=None, head_dim: int = 32, vectors: str = "ones", seed: int = 0, base: float = 10000.0
) -> np.ndarray:
    """``(N, N)`` scores ``⟨R(c_i) q, R(c_j) k⟩`` with ``encoder`` (or the sectioned fallback).

    ``coords`` is ``(N, A)`` (or ``(N,)``); non-finite values raise :class:`~structpos.exceptions.ShapeError`.

    Parameters
    ----------
    coords : numpy.ndarray
        ``(N, A)`` or ``(N,)`` finite coordinates.
    encoder : callable, optional
        ``encoder(q, k, coords) -> (q_rot, k_rot)``, e.g. :class:`~structpos.encoders.StructuralRoPE`.
    head_dim, vectors, seed, base
        Probe vectors and RoPE base.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` float64; row ``i`` holds node ``i``'s query against every key.

    Raises
    ------
    ShapeError
        On a non-finite coordinate or a bad shape.

    Examples
    --------
    >>> import numpy as np
    >>> sc = rotary_scores(np.arange(4.0), head_dim=8)
    >>> bool(np.allclose(np.diag(sc), 1.0))
    True
    """
    coords = np.asarray(coords, dtype=np.float64)
    if coords.ndim == 1:
        coords = coords[:, None]
    if coords.ndim != 2:
        raise ShapeError(f"coords must be (N, A), got shape {coords.shape}")
    if not np.isfinite(coords).all():
        bad = np.argwhere(~np.isfinite(coords))[0]
        raise ShapeError(f"coords has a non-finite value at node {bad[0]}, axis {bad[1]}")
    q, k = probe_vectors(head_dim, vectors, seed)
    if encoder is None:
        return sectioned_rope_scores(coords, q, k, base=base)
    import torch

    n = len(coords)
    qt = torch.as_tensor(q, dtype=torch.float32).expand(1, n, 1, head_dim).contiguous()
    kt = torch.as_tensor(k, dtype=torch.float32).expand(1, n, 1, head_dim).contiguous()
    ct = torch.as_tensor(coords, dtype=torch.float32)[None]
    with torch.no_grad():
        out = encoder(qt, kt, ct) if callable(encoder) else encoder.forward(qt, kt, ct)
    q_rot, k_rot = out[0], out[1]
    return (q_rot[0, :, 0].double() @ k_rot[0, :, 0].double().T).numpy()
