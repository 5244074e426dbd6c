"""cos/sin tables for integer coordinates, cached per axis extent.

For integer coordinates ``n ∈ [0, extent)`` the rotation tables ``cos(n·ω_j)``, ``sin(n·ω_j)``
(``P`` columns, one per pair) do not depend on the sequence: they are computed once in
fp32 (``n·ω_j`` is one correctly rounded fp32 product, as in HF Llama) and cast to the
activation dtype once. The cache is keyed by ``(extent, device, dtype)``; extents are
rounded up to a power of two, so sequences of many lengths share one table, and a table
that is already larger than needed is reused.

This avoids two pitfalls of existing code: positions rounded in the activation dtype
(bf16 cannot represent integers above 256) and caches keyed by sequence length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..exceptions import LimitError

__all__ = ["CosSinCache", "next_extent"]


def next_extent(n: int, minimum: int = 64) -> int:
    """Smallest power of two ``≥ max(n, minimum)``: the table extent that covers ``n`` coordinates.

    Parameters
    ----------
    n : int
        Coordinates needed (``0..n−1``).
    minimum : int
        Smallest extent handed out.

    Returns
    -------
    int

    Examples
    --------
    >>> next_extent(100), next_extent(128), next_extent(3)
    (128, 128, 64)
    """
    n = max(int(n), minimum)
    return 1 << (n - 1).bit_length()


class CosSinCache:
    """Per-``(extent, device, dtype)`` cos/sin tables.

    ``max_extent`` bounds the memory: callers fall back to computing angles directly for
    coordinates at or beyond it. With ``pair_axes`` (the axis of every pair, one-hot
    allocations over several axes) the table is *stacked per axis*: rows
    ``a·extent + n`` hold ``cos(n·ω_j)`` in the columns of axis ``a`` and 0 elsewhere, so one
    ``F.embedding_bag(c + a·extent, mode="sum")`` assembles every token's row exactly (adding
    zeros is exact) — one fused lookup instead of a gather per element or per axis.

    Parameters
    ----------
    max_extent : int
        Largest table extent (rows per axis).
    pair_axes : torch.Tensor, optional
        ``(P,)`` axis of every pair (:func:`structpos.encoders.rope.pair_axes`): stack the
        table per axis.
    num_axes : int, optional
        Axes of the stacked table (default ``max(pair_axes) + 1``).

    Examples
    --------
    Rows are ``cos(n·ω)`` exactly as computed directly in fp32, and one table serves every
    smaller request:

    >>> inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 4, 2) / 4)
    >>> cache = CosSinCache()
    >>> extent, cos, sin = cache.get(inv_freq, 100, torch.float32)
    >>> extent, tuple(cos.shape), torch.equal(cos[5], torch.cos(5 * inv_freq))
    (128, (128, 2), True)
    >>> cache.get(inv_freq, 50, torch.float32)[0], len(cache)
    (128, 1)

    Stacked per axis (pair 0 on axis 0, pair 1 on axis 1): row ``extent + n`` holds axis 1's
    column only.

    >>> stacked = CosSinCache(pair_axes=torch.tensor([0, 1]))
    >>> extent, cos, _ = stacked.get(inv_freq, 10, torch.float32)
    >>> extent, cos[extent + 3, 0].item(), torch.equal(cos[extent + 3, 1], torch.cos(3 * inv_freq[1]))
    (64, 0.0, True)
    """

    def __init__(self, max_extent: int = 1 << 18, pair_axes: torch.Tensor | None = None, num_axes: int | None = None):
        self.max_extent = int(max_extent)
        self.pair_axes = pair_axes
        if pair_axes is not None and num_axes is None:
            num_axes = int(pair_axes.max()) + 1
        self.num_axes: int = 0 if num_axes is None else int(num_axes)  # 0: a shared (unstacked) table
        self._tables: dict[tuple[int, torch.device, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}

    def clear(self) -> None:
        """Drop every cached table."""
        self._tables.clear()

    def __len__(self) -> int:
        return len(self._tables)

    def keys(self):
        """The ``(extent, device, dtype)`` keys of the cached tables."""
        return list(self._tables)

    def get(self, inv_freq: torch.Tensor, needed: int, dtype: torch.dtype) -> tuple[int, torch.Tensor, torch.Tensor]:
        """``(extent, cos, sin)`` covering coordinates ``0..needed−1`` on ``inv_freq``'s device.

        Parameters
        ----------
        inv_freq : torch.Tensor
            ``(P,)`` frequencies ``ω`` (``(A, P)``: one row per axis, stacked tables only).
        needed : int
            Coordinates to cover.
        dtype : torch.dtype
            Table dtype.

        Returns
        -------
        tuple
            ``extent`` (rows per axis, ``≥ needed``) and the ``cos``, ``sin`` tables
            ``(extent, P)`` (``(A·extent, P)`` when stacked).

        Raises
        ------
        LimitError
            ``needed > max_extent``.

        Examples
        --------
        >>> CosSinCache(max_extent=16).get(torch.ones(2), 17, torch.float32)
        Traceback (most recent call last):
        ...
        structpos.exceptions.LimitError: coordinate extent 17 exceeds the table limit (max_table_extent: 17 > 16; raise the limit to allow it)
        """
        if needed > self.max_extent:
            raise LimitError(
                f"coordinate extent {needed} exceeds the table limit",
                limit="max_table_extent",
                value=needed,
                maximum=self.max_extent,
            )
        device = inv_freq.device
        for (extent, dev, dt), tables in self._tables.items():
            if dev == device and dt == dtype and extent >= needed:
                return (extent, *tables)
        extent = min(next_extent(needed), self.max_extent)
        with torch.autocast(device_type=device.type, enabled=False):
            pos = torch.arange(extent, device=device, dtype=torch.int64).to(torch.float32)
            # (extent, P), or (A, extent, P) for per-axis frequencies (stacked tables only)
            angles = pos[:, None] * inv_freq.detach().to(torch.float32)[..., None, :]
            cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
            if self.pair_axes is not None:
                axes = self.pair_axes.to(device)
                own = torch.stack([axes == a for a in range(self.num_axes)])[:, None, :]  # (A, 1, P)
                zero = torch.zeros((), dtype=dtype, device=device)
                cos = torch.where(own, cos, zero).flatten(0, 1)  # broadcast over A when shared
                sin = torch.where(own, sin, zero).flatten(0, 1)
            tables = (cos.contiguous(), sin.contiguous())
        # a bigger table supersedes smaller ones for this device/dtype
        for key in [k for k in self._tables if k[1] == device and k[2] == dtype and k[0] < extent]:
            del self._tables[key]
        self._tables[(extent, device, dtype)] = tables
        return (extent, *tables)

    def lookup(
        self,
        inv_freq: torch.Tensor,
        coords: torch.Tensor,
        dtype: torch.dtype,
        *,
        head_axes: list[int] | None = None,
        single_axis: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``cos φ``, ``sin φ`` of non-negative integer ``coords`` read from the table: ``(..., H', P)``.

        Three reads: ``head_axes`` (every pair of head ``h`` follows axis ``head_axes[h]``,
        ``H' = H``); ``single_axis`` (all pairs follow one axis, ``H' = 1``); otherwise the
        stacked per-axis table, summing row ``a·extent + c_a`` over the axes (``H' = 1``).

        Parameters
        ----------
        inv_freq : torch.Tensor
            ``(P,)`` frequencies (``(A, P)`` for a stacked table with per-axis frequencies).
        coords : torch.Tensor
            ``(..., A)`` int64 coordinates, all in ``0..max_extent−1``.
        dtype : torch.dtype
            Output dtype.
        head_axes : list of int, optional
            Axis of every head (per-head allocation).
        single_axis : int, optional
            The one axis every pair follows.

        Returns
        -------
        tuple of torch.Tensor
            ``(cos, sin)``.

        Raises
        ------
        LimitError
            A coordinate ``≥ max_extent``.

        Examples
        --------
        >>> inv_freq = torch.tensor([1.0, 0.5])
        >>> cos, _ = CosSinCache(pair_axes=torch.tensor([0, 1])).lookup(inv_freq, torch.tensor([[2, 3]]), torch.float32)
        >>> cos.shape, torch.allclose(cos[0, 0], torch.cos(torch.tensor([2.0, 1.5])))
        (torch.Size([1, 1, 2]), True)
        """
        extent, cos_t, sin_t = self.get(inv_freq.to(coords.device), int(coords.max()) + 1, dtype)
        if head_axes is not None:
            idx = coords[..., head_axes]  # (..., H): every pair of a head follows one axis
            return F.embedding(idx, cos_t), F.embedding(idx, sin_t)
        if single_axis is not None:
            idx = coords[..., single_axis]
            return F.embedding(idx, cos_t).unsqueeze(-2), F.embedding(idx, sin_t).unsqueeze(-2)
        # stacked per-axis table: row a·extent + c_a holds axis a's columns, zeros elsewhere
        axes = coords.shape[-1]
        idx = (coords + torch.arange(axes, device=coords.device) * extent).reshape(-1, axes)
        shape = (*coords.shape[:-1], 1, cos_t.shape[-1])
        return (
            F.embedding_bag(idx, cos_t, mode="sum").view(shape),
            F.embedding_bag(idx, sin_t, mode="sum").view(shape),
        )
