"""Hierarchical RoPE: one rotary axis per level of a hierarchy.

Documents (hRoPE): ``paragraph, sentence, token``; code (HiRoPE-style): ``function,
statement, token``; any other list of level names works. Token ``n`` gets one coordinate
per level, ``c_n = (u_{n,1}, …, u_{n,A})``, and :class:`StructuralRoPE` rotates pair ``j`` by
``ω_j · c_{n, axis(j)}`` (sectioned allocation by default: the highest frequencies go to the
outermost level). Scores then depend on the per-level offsets ``c_m − c_n`` only.

:func:`unit_indices` turns per-token unit ids (which paragraph, which sentence, …) into
coordinates, counted either globally or within the enclosing unit. The coordinate families
``hier`` (documents) and ``hirope`` (code, :mod:`structpos.coords.code_levels`, with the
training-free use on an existing RoPE model) compute the levels from a parsed input.
"""

from __future__ import annotations

from typing import Literal, Mapping, Sequence

import torch

from ..exceptions import ShapeError, SpecError
from ._checks import QKLayout, check_choice
from ._options import Allocation, PairLayout
from .rope import StructuralRoPE
from .rope_config import RoPEConfig

__all__ = ["HierarchicalRoPE", "unit_indices", "resolve_levels", "LEVEL_PRESETS"]

LEVEL_PRESETS: dict[str, tuple[str, ...]] = {
    "document": ("paragraph", "sentence", "token"),
    "code": ("function", "statement", "token"),
    "table": ("row", "column", "token"),
}
"""Level names of the ``levels=`` presets of :class:`HierarchicalRoPE`, outermost first."""


def unit_indices(unit_ids: torch.Tensor, mode: Literal["within", "global"] = "within") -> torch.Tensor:
    """Per-level unit indices ``(..., L, A)`` (the coordinates of :class:`HierarchicalRoPE`) from unit ids.

    ``unit_ids[..., n, a]`` names the level-``a`` unit that token ``n`` lies in (any integers;
    a new unit starts wherever the id — or the id of an enclosing level — changes). With
    ``mode="global"`` the coordinate is the index of that unit in the sequence (0, 1, …);
    with ``mode="within"`` it is its index inside the enclosing unit (sentence number within
    its paragraph, token number within its sentence); level 0 is the same in both modes.

    Parameters
    ----------
    unit_ids : torch.Tensor
        ``(..., L, A)`` integer ids, outermost level first.
    mode : {"within", "global"}
        Count units inside their enclosing unit, or along the whole sequence.

    Returns
    -------
    torch.Tensor
        ``(..., L, A)`` int64 indices.

    Raises
    ------
    SpecError
        Another ``mode``.
    ShapeError
        Fewer than two dimensions, or ids that are not integers.

    Examples
    --------
    Two paragraphs (ids 7, 9) holding sentences (ids 1, 2 | 3); the ids themselves do not matter:

    >>> ids = torch.tensor([[7, 1], [7, 1], [7, 2], [9, 3], [9, 3]])
    >>> unit_indices(ids, "within")[:, 1].tolist(), unit_indices(ids, "global")[:, 1].tolist()
    ([0, 0, 1, 0, 0], [0, 0, 1, 2, 2])
    """
    check_choice(mode, "mode", ("within", "global"))
    ids = torch.as_tensor(unit_ids)
    if ids.dim() < 2:
        raise ShapeError(f"unit_ids must have shape (..., L, A), got {tuple(ids.shape)}")
    if ids.is_floating_point() or ids.is_complex():
        raise ShapeError(f"unit_ids must be integers, got {ids.dtype}")
    L, A = ids.shape[-2], ids.shape[-1]
    if L == 0:
        return ids.to(torch.int64)
    changed = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
    changed[..., 1:, :] = ids[..., 1:, :] != ids[..., :-1, :]
    # a unit also starts when any enclosing unit starts
    starts = torch.cumsum(changed.to(torch.int64), dim=-1) > 0
    starts[..., 0, :] = True
    global_idx = torch.cumsum(starts.to(torch.int64), dim=-2) - 1
    if mode == "global":
        return global_idx
    out = global_idx.clone()
    pos = torch.arange(L, device=ids.device).expand(ids.shape[:-1])
    for a in range(1, A):
        parent_start = torch.where(starts[..., a - 1], pos, torch.zeros_like(pos))
        parent_start = torch.cummax(parent_start, dim=-1).values
        out[..., a] = global_idx[..., a] - torch.gather(global_idx[..., a], -1, parent_start)
    return out


def resolve_levels(levels: str | Sequence[str]) -> tuple[str, ...]:
    """Level names, outermost first, from a preset name or a sequence of distinct names.

    Examples
    --------
    >>> resolve_levels("table"), resolve_levels(["page", "line"])
    (('row', 'column', 'token'), ('page', 'line'))
    >>> resolve_levels(["a", "a"])
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: levels must be distinct and non-empty, got ('a', 'a')
    """
    if isinstance(levels, str):
        if levels not in LEVEL_PRESETS:
            raise SpecError(f"unknown level preset {levels!r}; known: {sorted(LEVEL_PRESETS)}")
        levels = LEVEL_PRESETS[levels]
    if not isinstance(levels, Sequence) or not all(isinstance(v, str) for v in levels):
        raise SpecError(f"levels must be a preset name or a sequence of level names, got {levels!r}")
    names = tuple(levels)
    if len(set(names)) != len(names) or not names:
        raise SpecError(f"levels must be distinct and non-empty, got {names}")
    return names


class HierarchicalRoPE(StructuralRoPE):
    """:class:`StructuralRoPE` with named levels, one axis per level.

    ``levels`` is a preset name (``"document"``, ``"code"``, ``"table"``) or a sequence of level
    names. ``forward(q, k, coords, cu_seqlens=None)`` accepts ``coords`` as a ``(..., A)``
    tensor in level order or as a mapping ``level name → (...)`` tensor.

    Parameters
    ----------
    head_dim : int
        Rotated width ``D`` (even).
    levels : str or sequence of str
        A key of :data:`LEVEL_PRESETS` or distinct level names, outermost first.
    allocation, sections, base, layout, num_heads, learnable, qk_layout, inv_freq
        As :class:`StructuralRoPE` (sectioned by default: the outermost level gets the
        highest frequencies).

    Raises
    ------
    SpecError
        Unknown preset, empty or repeated level names, or more levels than ``head_dim/2`` pairs
        (a level would get no pair); otherwise as :class:`StructuralRoPE`.

    Examples
    --------
    Four tokens of a document: (paragraph, sentence within it, token within the sentence).
    A mapping by level name is the same as a tensor in level order.

    >>> _ = torch.manual_seed(0)
    >>> rope = HierarchicalRoPE(head_dim=12, levels="document")
    >>> rope.levels, rope.axis_map.tolist()
    (('paragraph', 'sentence', 'token'), [[0, 0, 1, 1, 2, 2]])
    >>> q, k = torch.randn(1, 4, 2, 12), torch.randn(1, 4, 2, 12)
    >>> by_name = {
    ...     "paragraph": torch.tensor([[0, 0, 1, 1]]),
    ...     "sentence": torch.tensor([[0, 1, 0, 0]]),
    ...     "token": torch.tensor([[0, 0, 0, 1]]),
    ... }
    >>> coords = torch.tensor([[[0, 0, 0], [0, 1, 0], [1, 0, 0], [1, 0, 1]]])
    >>> torch.equal(rope(q, k, by_name)[0], rope(q, k, coords)[0])
    True

    Scores depend on per-level offsets only: numbering the paragraphs from 2 changes nothing.

    >>> def scores(c):
    ...     qr, kr = rope(q, k, c)
    ...     return torch.einsum("blhd,bmhd->bhlm", qr, kr)
    >>> torch.allclose(scores(coords), scores(coords + torch.tensor([2, 0, 0])), atol=1e-5)
    True
    """

    def __init__(
        self,
        head_dim: int,
        levels: str | Sequence[str] = "document",
        allocation: Allocation = "sectioned",
        sections: Sequence[int] | None = None,
        base: float = 10000.0,
        layout: PairLayout = "half",
        num_heads: int | None = None,
        learnable: bool = False,
        *,
        qk_layout: QKLayout = "blhd",
        inv_freq: torch.Tensor | None = None,
    ):
        levels = resolve_levels(levels)
        super().__init__(
            head_dim,
            len(levels),
            allocation=allocation,
            sections=sections,
            base=base,
            layout=layout,
            num_heads=num_heads,
            learnable=learnable,
            qk_layout=qk_layout,
            inv_freq=inv_freq,
        )
        self.levels = levels

    @classmethod
    def from_config(  # type: ignore[override]
        cls, config: RoPEConfig, levels: str | Sequence[str] = "document", *, inv_freq: torch.Tensor | None = None
    ) -> HierarchicalRoPE:
        """A :class:`HierarchicalRoPE` with the rotary settings of ``config``, one axis per level.

        Parameters
        ----------
        config : RoPEConfig
            Shared settings; ``config.num_axes`` must be the number of levels, and ``scaling``
            and ``max_table_extent`` keep their defaults (this class does not take them).
        levels : str or sequence of str
            As the constructor.
        inv_freq : torch.Tensor, optional
            As the constructor.

        Returns
        -------
        HierarchicalRoPE

        Raises
        ------
        SpecError
            ``config`` not a :class:`RoPEConfig`, another number of axes than levels, a setting
            this class does not take, or as the constructor.

        Examples
        --------
        >>> cfg = RoPEConfig(head_dim=12, num_axes=3, sections=(2, 2, 2))
        >>> HierarchicalRoPE.from_config(cfg, "code").levels
        ('function', 'statement', 'token')
        """
        if not isinstance(config, RoPEConfig):
            raise SpecError(f"config must be a RoPEConfig, got {type(config).__name__}")
        levels = resolve_levels(levels)
        if config.num_axes != len(levels):
            raise SpecError(f"config has num_axes={config.num_axes}, but there are {len(levels)} levels {levels}")
        config.refuse_unused(
            "HierarchicalRoPE", [n for n in config.as_kwargs() if n not in ("scaling", "max_table_extent")]
        )
        kwargs = config.as_kwargs()
        for name in ("num_axes", "scaling", "max_table_extent"):
            del kwargs[name]
        return cls(levels=levels, inv_freq=inv_freq, **kwargs)

    def extra_repr(self) -> str:
        return f"levels={self.levels}, " + super().extra_repr()

    def stack_levels(self, coords) -> torch.Tensor:
        """A mapping ``level → tensor`` becomes a ``(..., A)`` tensor in level order (tensors pass through).

        Parameters
        ----------
        coords : mapping of str to array_like, or torch.Tensor
            One ``(...)`` tensor per level, or coordinates already stacked.

        Returns
        -------
        torch.Tensor
            ``(..., A)`` coordinates.

        Raises
        ------
        ShapeError
            The mapping misses a level or names an unknown one.

        Examples
        --------
        >>> rope = HierarchicalRoPE(head_dim=12, levels=("row", "column"))
        >>> rope.stack_levels({"column": [0, 1], "row": [3, 3]}).tolist()
        [[3, 0], [3, 1]]
        >>> rope.stack_levels({"row": [3, 3]})
        Traceback (most recent call last):
        ...
        structpos.exceptions.ShapeError: coords mapping: missing levels ['column'], unknown levels []; expected ('row', 'column')
        """
        if not isinstance(coords, Mapping):
            return coords
        missing = [lv for lv in self.levels if lv not in coords]
        extra = [k for k in coords if k not in self.levels]
        if missing or extra:
            raise ShapeError(
                f"coords mapping: missing levels {missing}, unknown levels {extra}; expected {self.levels}"
            )
        return torch.stack([torch.as_tensor(coords[lv]) for lv in self.levels], dim=-1)

    def angles(self, coords) -> torch.Tensor:
        """:meth:`StructuralRoPE.angles` of ``coords`` (a tensor or a mapping by level).

        Examples
        --------
        >>> rope = HierarchicalRoPE(head_dim=4, levels=("row", "column"))
        >>> torch.equal(rope.angles({"row": [2], "column": [5]}), rope.angles(torch.tensor([[2, 5]])))
        True
        """
        return super().angles(self.stack_levels(coords))

    def rotate(self, x, coords=None, cu_seqlens=None, *, mask=None):
        """:meth:`StructuralRoPE.rotate` with ``coords`` a tensor or a mapping by level."""
        return super().rotate(x, self.stack_levels(coords) if coords is not None else None, cu_seqlens, mask=mask)

    def forward(self, q, k, coords=None, cu_seqlens=None, *, mask=None, k_coords=None):
        """:meth:`StructuralRoPE.forward` with ``coords`` / ``k_coords`` tensors or mappings by level."""
        if coords is not None:
            coords = self.stack_levels(coords)
        if k_coords is not None:
            k_coords = self.stack_levels(k_coords)
        return super().forward(q, k, coords, cu_seqlens, mask=mask, k_coords=k_coords)
