r"""Coordinates: per-node arrays computed from a :class:`~structpos.Structure`.

Every coordinate family is a function ``fn(structure, arg) -> dict[str, np.ndarray]`` whose
arrays have the node count as leading dimension. The families live in one registry,
:data:`COORDS` (name → :class:`CoordFamily`: compute function, argument validator, output
columns, documentation), so that a spec string such as ``"tree,lap:8,rw:16"`` selects them
(``name[:arg]``, comma separated), a bad spec fails in :func:`parse_spec` before any work, and
the CLI and the docs list the families from the same place. Adding a family means adding one
:class:`CoordFamily` to :mod:`structpos.coords._registry` (or calling :func:`register`); a
family's argument validator lives in its own module when it has one (``tree_arg`` in
:mod:`.tree`), built from the shared parsers of :mod:`structpos.coords._args`.

Examples
--------
>>> import structpos
>>> s = structpos.parse("[1, [2, 3]]", "json")
>>> sorted(compute(s, "tree:4x8"))[:3]
['depth', 'num_children', 'parent']
>>> parse_spec("tree:4x8, lap")
[('tree', '4x8'), ('lap', None)]
>>> parse_spec("lap:abc")
Traceback (most recent call last):
...
structpos.exceptions.SpecError: lap:abc: k must be an integer >= 1 (got 'abc')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..exceptions import SpecError
from ..registry import Column
from ..structure import Structure
from ._registry import COORDS, MAX_K, MAX_MAGLAP_Q, CoordFamily, CoordFn
from .solver import SolverOptions
from .tree import MAX_TREE_DEPTH, MAX_TREE_WIDTH

__all__ = [
    "COORDS",
    "Column",
    "CoordFamily",
    "CoordFn",
    "compute",
    "estimated_bytes",
    "families_markdown",
    "spec_syntax",
    "get",
    "parse_spec",
    "register",
    "validate_spec",
    "MAX_TREE_DEPTH",
    "MAX_TREE_WIDTH",
    "MAX_K",
    "MAX_MAGLAP_Q",
    "SolverOptions",
]


# ------------------------------------------------------------------------------- public API
def register(
    name: str,
    fn: CoordFn,
    *,
    validate: Callable[[str | None], dict[str, Any]] | None = None,
    summary: str = "",
    columns: tuple[Column, ...] = (),
) -> CoordFamily:
    """Register a coordinate family under ``name`` (replacing a built-in one of that name).

    Parameters
    ----------
    name : str
        The spec name.
    fn : callable
        ``fn(structure, arg) -> dict[str, np.ndarray]`` with ``arg`` the spec text after ``:``.
    validate : callable, optional
        ``validate(arg) -> dict``, raising :class:`~structpos.exceptions.SpecError`; default accepts any.
    summary : str, optional
        One line of documentation (default: the first line of ``fn``'s docstring).
    columns : tuple of Column, optional
        The output arrays, for the docs and the schema.

    Returns
    -------
    CoordFamily
        The new entry.

    Examples
    --------
    >>> import numpy as np, structpos
    >>> _ = register("ones", lambda s, arg: {"ones": np.ones(s.num_nodes)})
    >>> compute(structpos.parse("[1]", "json"), "ones")["ones"].tolist()
    [1.0, 1.0]
    >>> del COORDS.entries["ones"]
    """
    doc = summary or ((fn.__doc__ or "").strip().splitlines() or [""])[0]
    family = CoordFamily(name, fn, validate or (lambda arg: {"arg": arg}), summary=doc, columns=columns)
    return COORDS.add(family)


def get(name: str) -> CoordFn:
    """The compute function of the family ``name``.

    Parameters
    ----------
    name : str
        A registered family.

    Returns
    -------
    callable
        ``fn(structure, arg) -> dict[str, np.ndarray]``.

    Raises
    ------
    SpecError
        If no family has that name.

    Examples
    --------
    >>> get("tree").__name__
    'tree_coords'
    """
    return COORDS.load(name)


def validate_spec(spec: str | list[str]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """Split and check a spec: ``[(name, arg, params)]``, every argument validated.

    Parameters
    ----------
    spec : str or list of str
        ``"name[:arg],..."`` or a list of ``"name[:arg]"`` items.

    Returns
    -------
    list of (str, str or None, dict)

    Raises
    ------
    SpecError
        On an unknown family, a bad argument (one past its documented maximum: ``MAX_TREE_DEPTH``,
        ``MAX_TREE_WIDTH``, ``MAX_K``, ``MAX_MAGLAP_Q``), or an empty spec.

    Examples
    --------
    >>> validate_spec("tree:8, maglap:4:0.1")
    [('tree', '8', {'D': 8, 'W': 64}), ('maglap', '4:0.1', {'k': 4, 'q': 0.1})]
    >>> validate_spec("rw:100000000")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: rw:100000000: K must be <= 4096 (got 100000000; the documented maximum)
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        name, _, arg = item.partition(":")
        params = COORDS.get(name.strip()).validate(arg or None)
        out.append((name.strip(), arg or None, params))
    if not out:
        raise SpecError(f"empty coordinate spec {spec!r}; known families: {', '.join(COORDS)}")
    return out


def parse_spec(spec: str | list[str]) -> list[tuple[str, str | None]]:
    """``"tree,lap:8"`` → ``[("tree", None), ("lap", "8")]``, every name and argument validated.

    Parameters
    ----------
    spec : str or list of str
        The coordinate spec.

    Returns
    -------
    list of (str, str or None)

    Raises
    ------
    SpecError
        On an unknown family or a bad argument (before any work is done).

    Examples
    --------
    >>> parse_spec("tree,lap:8")
    [('tree', None), ('lap', '8')]
    """
    return [(name, arg) for name, arg, _ in validate_spec(spec)]


def estimated_bytes(spec: str | list[str], num_nodes: int) -> int:
    """The bytes of the arrays ``spec`` computes for ``num_nodes`` nodes, from the families' columns.

    Exact for families whose per-node shapes are fixed by their arguments (``tree``, ``lap``,
    ``rw``, ``maglap``, ``spd``, ``resistance``, ``table``); a data-dependent dimension counts as 1
    and a family registered without columns as 0. The encode pipeline checks it against
    ``max_memory_bytes`` before computing, so a spec too large for a record fails at once.

    Parameters
    ----------
    spec : str or list of str
        The coordinate spec.
    num_nodes : int
        The structure's node count.

    Returns
    -------
    int

    Raises
    ------
    SpecError
        On a bad spec.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> estimated_bytes("tree,spd", s.num_nodes) == sum(a.nbytes for a in compute(s, "tree,spd").values())
    True
    >>> estimated_bytes("tree:4096", 10**6) == 10**6 * (4096 * 2 + 5 * 8 + 1)  # int16 paths, 5 int64s, a flag
    True
    """
    total = 0
    for name, _arg, params in validate_spec(spec):
        for col in COORDS[name].columns:
            dims = [1 if d is None else int(d) for d in col.concrete_shape(params, num_nodes)]
            total += int(num_nodes) * math.prod(dims) * np.dtype(col.dtype).itemsize
    return total


def compute(structure: Structure, spec: str | list[str]) -> dict[str, np.ndarray]:
    """Run every family in ``spec`` on ``structure``; merge their outputs.

    Parameters
    ----------
    structure : Structure
        The parsed input.
    spec : str or list of str
        The coordinate spec (see :func:`parse_spec`).

    Returns
    -------
    dict of str to numpy.ndarray
        Every family's arrays, each with the node count as leading dimension.

    Raises
    ------
    SpecError
        On a bad spec.
    ParseError
        When a family does not apply to the structure (e.g. ``tree`` on a graph without parents).

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> compute(s, "tree")["depth"].tolist()
    [0, 1, 1, 2, 2]
    """
    out: dict[str, np.ndarray] = {}
    for name, arg in parse_spec(spec):
        out.update(get(name)(structure, arg))
    return out


def families_markdown() -> str:
    """A markdown table of every registered family (the docs site and ``--help`` read it).

    Returns
    -------
    str
        One row per family: spec syntax, default, output columns (dtype, per-node shape), summary
        and formula.

    Examples
    --------
    >>> print(families_markdown().splitlines()[0])
    | spec | default | outputs (dtype, per-node shape) | what | formula / reference |
    """
    rows = [
        "| spec | default | outputs (dtype, per-node shape) | what | formula / reference |",
        "|---|---|---|---|---|",
    ]
    for fam in COORDS.entries.values():
        cols = "<br>".join(
            f"`{c.name}` {c.dtype} ({', '.join(map(str, c.shape))}{',' if len(c.shape) == 1 else ''})"
            + (" *optional*" if c.optional else "")
            for c in fam.columns
        )
        default = (fam.default_arg or "—") + (f" ({fam.maximum})" if fam.maximum else "")
        rows.append(f"| `{fam.syntax}` | {default} | {cols} | {fam.summary} | {fam.reference} |")
    return "\n".join(rows)


def spec_syntax() -> str:
    """Every family's spec syntax, comma separated (for ``--coords`` help texts).

    Returns
    -------
    str

    Examples
    --------
    >>> spec_syntax().split(", ")[:2]
    ['tree[:DxW]', 'table']
    """
    return ", ".join(fam.syntax for fam in COORDS.entries.values())
