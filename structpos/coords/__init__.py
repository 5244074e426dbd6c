"""Coordinates: per-node arrays computed from a :class:`~structpos.Structure`.

Every coordinate family is a function ``fn(structure, arg) -> dict[str, np.ndarray]`` whose
arrays have the node count as leading dimension. Families are registered by name so that a
spec string such as ``"tree,lap:8,rw:16"`` selects them (``name[:arg]``, comma separated);
:func:`compute` runs a spec.
"""

from __future__ import annotations

import importlib
from typing import Callable

import numpy as np

from ..structure import Structure

CoordFn = Callable[[Structure, "str | None"], dict[str, np.ndarray]]

# name -> (module, function); modules import lazily so optional deps stay optional.
COORDS: dict[str, tuple[str, str]] = {
    "tree": ("tree", "tree_coords"),
    "table": ("table", "table_coords"),
    "hier": ("hierarchy", "hierarchy_coords"),
    "lap": ("laplacian", "lap_coords"),
    "rw": ("random_walk", "rw_coords"),
    "maglap": ("magnetic", "maglap_coords"),
    "spd": ("distance", "spd_coords"),
    "resistance": ("distance", "resistance_coords"),
}


def register(name: str, fn: CoordFn) -> None:
    """Register a coordinate family under ``name`` (overrides a built-in one)."""
    COORDS[name] = fn  # type: ignore[assignment]


def get(name: str) -> CoordFn:
    try:
        entry = COORDS[name]
    except KeyError:
        raise ValueError(f"unknown coordinate family {name!r}; known: {', '.join(sorted(COORDS))}") from None
    if callable(entry):
        return entry
    mod, fn = entry
    return getattr(importlib.import_module(f"{__name__}.{mod}"), fn)


def parse_spec(spec: str | list[str]) -> list[tuple[str, str | None]]:
    """``"tree,lap:8"`` -> ``[("tree", None), ("lap", "8")]``."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        name, _, arg = item.partition(":")
        get(name)  # validate early
        out.append((name, arg or None))
    return out


def compute(structure: Structure, spec: str | list[str]) -> dict[str, np.ndarray]:
    """Run every family in ``spec`` on ``structure``; merge their outputs."""
    out: dict[str, np.ndarray] = {}
    for name, arg in parse_spec(spec):
        out.update(get(name)(structure, arg))
    return out
