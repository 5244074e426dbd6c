"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL: structure on the models' own three position axes (no patching).

Examples
--------
>>> import numpy as np
>>> qwen_vl_position_ids({"depth": np.array([0, 1, 1]), "sibling": np.array([0, 0, 1])}, "tree")[:, 0].tolist()
[[0, 1, 2], [0, 1, 1], [0, 0, 1]]
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ...encoders._checks import check_count
from ...exceptions import InputError, ShapeError, SpecError
from ..collate import as_numbers

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
        Added to the token index (an integer ≥ 0).

    Returns
    -------
    torch.Tensor
        int64 ``(3, 1, L)``; stack several along dim 1 for a batch.

    Raises
    ------
    SpecError
        An unknown ``family``, ``token_coords`` without the family's columns, ``offset`` not an
        integer ≥ 0.
    InputError
        ``token_coords`` not a mapping; a column holding non-numbers (``None``, strings).
    ShapeError
        A column that is not 1-D, the two columns of different lengths, a value that is not a
        whole number (``1.7``, ``nan``) or is below ``-1`` (the fill of tokens without a node).

    Examples
    --------
    >>> import numpy as np
    >>> tc = {"row": np.array([0, 0, 1]), "col": np.array([0, 1, -1])}
    >>> qwen_vl_position_ids(tc, "table")[:, 0].tolist()
    [[0, 1, 2], [0, 0, 1], [0, 1, 0]]
    >>> qwen_vl_position_ids({"row": [0, 1.7], "col": [0, 0]}, "table")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: token_coords['row'] must hold whole numbers; given 1.7 at flat index 1
    """
    if family not in QWEN_VL_AXES:
        raise SpecError(f"family must be one of {sorted(QWEN_VL_AXES)}, got {family!r}")
    if not isinstance(token_coords, Mapping):
        raise InputError(f"token_coords must be a mapping of coordinate columns, got {type(token_coords).__name__}")
    offset = check_count(offset, "offset", minimum=0, maximum=None)
    _, a1, a2 = QWEN_VL_AXES[family]
    missing = [a for a in (a1, a2) if a not in token_coords]
    if missing:
        raise SpecError(f"token_coords lacks {missing} (computed with the {family!r} coordinate family?)")
    h, w = (as_numbers(token_coords[a], f"token_coords[{a!r}]", integers=True) for a in (a1, a2))
    if h.shape != w.shape or h.dim() != 1:
        raise ShapeError(f"{a1} and {a2} must be (L,) arrays of one length; given {tuple(h.shape)}, {tuple(w.shape)}")
    for a, v in ((a1, h), (a2, w)):
        if v.numel() and int(v.min()) < -1:
            raise ShapeError(f"token_coords[{a!r}] holds {int(v.min())}; coordinates are >= 0, or -1 for no node")
    t = torch.arange(h.numel(), dtype=torch.int64, device=h.device) + offset
    return torch.stack([t, h.clamp_min(0), w.clamp_min(0).to(h.device)])[:, None, :]
