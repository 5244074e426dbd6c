"""The coordinate-family registry :data:`COORDS`: every built-in family as one :class:`CoordFamily`.

An entry names the compute function (``"module:function"``, imported on first use, so the
registry stays cheap to import), the validator of its spec argument (``name[:arg]``), the
output columns with their dtypes and trailing shapes, and the documentation rows. The
validators of a family with its own module live there (``tree_arg`` in :mod:`.tree`,
``bipe_arg`` in :mod:`.bilevel`, ``peg_arg`` in :mod:`.peg`); the shared argument parsers are
:mod:`._args`. The public functions over the registry (``compute``, ``parse_spec``,
``register``, ...) are in :mod:`structpos.coords`.

Examples
--------
>>> COORDS["tree"].validate("8x16")
{'D': 8, 'W': 16}
>>> [c.name for c in COORDS["rw"].columns]
['rw']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..exceptions import SpecError
from ..registry import Column, Entry, Registry, no_argument
from ..structure import Structure
from ._args import MAX_K, int_arg, one_int_arg
from .bilevel import bipe_arg
from .tree import MAX_TREE_DEPTH, MAX_TREE_WIDTH, path_dtype, tree_arg

__all__ = ["COORDS", "CoordFamily", "CoordFn", "MAX_K", "MAX_MAGLAP_Q"]

MAX_MAGLAP_Q = 1.0
"""Largest potential ``q`` of ``maglap:k:q``. ``L^(q)`` is periodic in ``q`` with period 1 and ``q``,
``1 - q`` give complex-conjugate eigenvectors, so ``[0, 0.5]`` holds every distinct operator and
``[0, 1]`` one whole period."""

CoordFn = Callable[[Structure, "str | None"], dict[str, np.ndarray]]


@dataclass(frozen=True)
class CoordFamily(Entry):
    """A registered coordinate family (an :class:`~structpos.registry.Entry` with output columns).

    Parameters
    ----------
    columns : tuple of Column
        The arrays the compute function returns (empty when unknown, e.g. a user function).
    default_arg : str
        What an omitted argument means (for the docs).
    maximum : str
        The argument's documented bounds (for the docs), enforced by the validator.

    Examples
    --------
    >>> fam = COORDS["lap"]
    >>> fam.validate("4"), [c.name for c in fam.columns]
    ({'k': 4}, ['lap', 'lap_eigvals', 'lap_mask', 'lap_ambiguous'])
    """

    columns: tuple[Column, ...] = ()
    default_arg: str = ""
    maximum: str = ""
    """The documented bounds of the argument (for the docs), e.g. ``"k <= 4096"``."""


# ----------------------------------------------------------------------- argument validators
def _int_arg_family(
    name: str,
    target: str,
    *,
    param: str,
    default: int | None,
    minimum: int,
    maximum: int | None = None,
    **docs: Any,
) -> CoordFamily:
    """A family whose argument is one optional integer ``param`` (spec ``name[:param]``), at most ``maximum``."""
    return CoordFamily(
        name,
        target,
        one_int_arg(name, param, default, minimum, maximum),
        syntax=f"{name}[:{param}]",
        default_arg="no cap" if default is None else str(default),
        maximum="" if maximum is None else f"{param} <= {maximum}",
        **docs,
    )


def _root_path_dtype(params: Mapping[str, Any]) -> str:
    return path_dtype(params["W"]).name


def _maglap_arg(arg: str | None) -> dict[str, Any]:
    parts = (arg or "").split(":")
    if len(parts) > 2:
        raise SpecError(f"maglap:{arg}: expected maglap[:k[:q]]")
    k = int_arg(f"maglap:{arg}", parts[0], "k", 1, maximum=MAX_K) if parts[0] else 8
    q = 0.25
    if len(parts) > 1 and parts[1]:
        try:
            q = float(parts[1])
        except ValueError:
            q = math.nan
        if not (math.isfinite(q) and 0 <= q <= MAX_MAGLAP_Q):
            raise SpecError(
                f"maglap:{arg}: q must be a number in [0, {MAX_MAGLAP_Q:g}] (got {parts[1]!r}; L^(q) has period 1 in q)"
            )
    return {"k": k, "q": q}


# ----------------------------------------------------------------------------- the registry
_I64, _F64, _BOOL = "int64", "float64", "bool"

COORDS: Registry[CoordFamily] = Registry("coordinate family")
"""Every coordinate family by name (see :class:`CoordFamily`)."""

COORDS.add(
    CoordFamily(
        "tree",
        "structpos.coords.tree:tree_coords",
        tree_arg,
        syntax="tree[:DxW]",
        default_arg="32x64",
        maximum=f"D <= {MAX_TREE_DEPTH}, W <= {MAX_TREE_WIDTH}",
        summary="Depth, sibling index, parent, children, subtree size and the capped root path of each tree node.",
        reference=r"$\mathrm{depth}(v)=\mathrm{depth}(\mathrm{parent}(v))+1$; root path = sibling indices "
        r"from the root, first $D$ levels, each clipped to $W-1$ (Shiv & Quirk 2019).",
        columns=(
            Column("depth", _I64, (), "edges from the root"),
            Column("sibling", _I64, (), "0-based index among the parent's children"),
            Column("parent", _I64, (), "parent node, -1 for roots"),
            Column("num_children", _I64, (), "number of children"),
            Column("subtree_size", _I64, (), "nodes in the subtree, itself included"),
            Column("root_path", "int16", ("D",), "sibling indices from the root, -1 padded", dtype_of=_root_path_dtype),
            Column("root_path_overflow", _BOOL, (), "the stored path was cut or clipped"),
        ),
    )
)
COORDS.add(
    CoordFamily(
        "table",
        "structpos.coords.table:table_coords",
        no_argument("table"),
        summary="Row, column, spans and header flag of each cell, and TAPAS-style row/column ids.",
        reference="Cells keep their top-left grid position; `tapas_row` = data-row ordinal (1-based, 0 in "
        "headers), `tapas_col` = col + 1 (Herzig et al. 2020). Non-cell nodes get -1 (0 for TAPAS ids).",
        columns=tuple(
            Column(c, _I64, (), d)
            for c, d in [
                ("row", "top grid row"),
                ("col", "left grid column"),
                ("rowspan", "rows covered"),
                ("colspan", "columns covered"),
                ("header", "1 in header rows"),
                ("tapas_row", "data-row ordinal, 0 for headers"),
                ("tapas_col", "column + 1"),
            ]
        ),
    )
)
COORDS.add(
    CoordFamily(
        "hier",
        "structpos.coords.hierarchy:hierarchy_coords",
        no_argument("hier"),
        summary="Paragraph, sentence and token ordinals of document nodes (and markdown section ids).",
        reference="Ordinals of the nearest block / sentence / token ancestor-or-self, as in hierarchical "
        "RoPE (He et al. 2024); `-1` outside.",
        columns=(
            Column("paragraph", _I64, (), "document-wide block ordinal"),
            Column("sentence", _I64, (), "sentence ordinal within its block"),
            Column("token", _I64, (), "token ordinal within its sentence"),
            Column("section", _I64, (), "innermost section ordinal (markdown only)", optional=True),
            Column("section_depth", _I64, (), "sections containing the node (markdown only)", optional=True),
            Column(
                "section_path",
                _I64,
                ("S",),
                "sibling ordinals of the enclosing sections, S = deepest nesting (markdown only)",
                optional=True,
            ),
        ),
    )
)
COORDS.add(
    _int_arg_family(
        "lap",
        "structpos.coords.laplacian:lap_coords",
        param="k",
        default=8,
        minimum=1,
        maximum=MAX_K,
        summary="Laplacian eigenvector positional encoding (undirected).",
        reference=r"$L = I - D^{-1/2} A D^{-1/2}$; the $k$ eigenvectors after the zero mode of each component, "
        "sign fixed (Dwivedi et al. 2020).",
        columns=(
            Column("lap", _F64, ("k",), "eigenvector entries of the node"),
            Column("lap_eigvals", _F64, ("k",), "the graph's eigenvalues, repeated per node"),
            Column("lap_mask", _BOOL, ("k",), "False for missing modes (fewer than k)"),
            Column(
                "lap_ambiguous",
                _BOOL,
                ("k",),
                "True for modes whose eigenspace crosses the k-th cut (basis not unique)",
            ),
        ),
    )
)
COORDS.add(
    _int_arg_family(
        "rw",
        "structpos.coords.random_walk:rw_coords",
        param="K",
        default=16,
        minimum=1,
        maximum=MAX_K,
        summary="Random-walk structural encoding: return probabilities after 1..K steps.",
        reference=r"$\mathrm{RWSE}_k(v) = (D^{-1}A)^k_{vv}$, $k = 1..K$ (Dwivedi et al. 2022).",
        columns=(Column("rw", "float32", ("K",), "return probability after 1..K steps"),),
    )
)
COORDS.add(
    CoordFamily(
        "maglap",
        "structpos.coords.magnetic:maglap_coords",
        _maglap_arg,
        syntax="maglap[:k[:q]]",
        default_arg="8:0.25",
        maximum=f"k <= {MAX_K}, 0 <= q <= {MAX_MAGLAP_Q:g}",
        summary="Magnetic Laplacian eigenvectors for directed graphs (real and imaginary parts).",
        reference=r"$L^{(q)} = I - (D_s^{-1/2} A_s D_s^{-1/2}) \odot \exp(i\,2\pi q (B - B^\top))$ "
        "(Geisler et al. 2023).",
        columns=(
            Column("maglap_re", _F64, ("k",), "real part of the eigenvector entries"),
            Column("maglap_im", _F64, ("k",), "imaginary part"),
            Column("maglap_eigvals", _F64, ("k",), "eigenvalues, repeated per node"),
            Column("maglap_mask", _BOOL, ("k",), "False for missing modes"),
            Column("maglap_ambiguous", _BOOL, ("k",), "True for modes whose eigenspace crosses the k-th cut"),
        ),
    )
)
COORDS.add(
    _int_arg_family(
        "spd",
        "structpos.coords.distance:spd_coords",
        param="max",
        default=None,
        minimum=0,
        summary="Shortest-path (hop) distance to every node; -1 beyond `max` or unreachable.",
        reference="Breadth-first hop counts (Graphormer, Ying et al. 2021).",
        columns=(Column("spd", _I64, ("N",), "hops to each node"),),
    )
)
COORDS.add(
    CoordFamily(
        "resistance",
        "structpos.coords.distance:resistance_coords",
        no_argument("resistance"),
        summary="Effective resistance to every node.",
        reference=r"$R_{uv} = (e_u - e_v)^\top L^+ (e_u - e_v)$ with $L = D - A$.",
        columns=(Column("resistance", _F64, ("N",), "effective resistance to each node"),),
    )
)
COORDS.add(
    _int_arg_family(
        "rwdir",
        "structpos.coords.directed_walk:rwdir_coords",
        param="K",
        default=16,
        minimum=1,
        maximum=MAX_K,
        summary="Directional random walks: forward and backward return probabilities after 1..K steps.",
        reference=r"$[(D_{out}^{-1}A)^k]_{vv}$ and $[(D_{in}^{-1}A^\top)^k]_{vv}$, $k = 1..K$; dangling nodes "
        "stay (Geisler et al. 2023).",
        columns=(
            Column("rwdir_fwd", "float32", ("K",), "return probability following the edges"),
            Column("rwdir_bwd", "float32", ("K",), "return probability against the edges"),
        ),
    )
)
COORDS.add(
    _int_arg_family(
        "rwdir_pair",
        "structpos.coords.directed_walk:rwdir_pair_coords",
        param="K",
        default=4,
        minimum=1,
        maximum=MAX_K,
        summary="Directional random walks: k-step landing probability to every node, forward and backward.",
        reference=r"$[(D_{out}^{-1}A)^k]_{uv}$ and $[(D_{in}^{-1}A^\top)^k]_{uv}$; each row a distribution.",
        columns=(
            Column("rwdir_pair_fwd", "float32", ("N", "K"), "landing probability following the edges"),
            Column("rwdir_pair_bwd", "float32", ("N", "K"), "landing probability against the edges"),
        ),
    )
)

COORDS.add(
    _int_arg_family(
        "anchor",
        "structpos.coords.anchors:anchor_coords",
        param="k",
        default=8,
        minimum=1,
        maximum=MAX_K,
        summary="Hop distances to k anchors chosen by greedy k-centre (NT-LLM); -1 unreachable or missing.",
        reference=r"$a_1 = \arg\max_v \deg v$, $a_{j+1} = \arg\max_v \min_{i \le j} d(v, a_i)$, ties to the "
        "lowest index; coordinates $d(v, a_j)$ (Ji et al. 2024).",
        columns=(
            Column("anchor_dist", _I64, ("k",), "hops to each anchor, -1 unreachable or missing"),
            Column("anchor_node", _I64, ("k",), "the anchors' node indices, repeated per node (-1 missing)"),
        ),
    )
)


def _peg_arg(arg: str | None) -> dict[str, Any]:
    # peg imports scipy (through .laplacian): loaded on the first peg spec, not with the registry
    from .peg import peg_arg

    return peg_arg(arg)


COORDS.add(
    CoordFamily(
        "peg",
        "structpos.coords.peg:peg_coords",
        _peg_arg,
        syntax="peg[:k[:scale]]",
        default_arg="8:none",
        maximum=f"k <= {MAX_K}",
        summary="PEG positional distances between Laplacian coordinates (split eigenspaces dropped).",
        reference=r"$\lVert z_u - z_v \rVert$, $z_v = (f(\lambda_j) U_{vj})_j$, $f = 1$ or $\lambda^{-1/2}$ "
        "(Wang et al. 2022).",
        columns=(Column("peg", _F64, ("N",), "spectral distance to each node"),),
    )
)
COORDS.add(
    CoordFamily(
        "graphkv",
        "structpos.coords.graph_kv:graph_kv_coords",
        no_argument("graphkv"),
        summary="Graph-KV segment graph: whether a segment has sources, and which segments it reads.",
        reference=r"$\mathrm{reads}[a, b] = (a = b) \lor (b \to a)$; token positions by "
        "`graph_kv_layout`: sources share one range, targets start after it (Wang et al. 2025).",
        columns=(
            Column("gkv_target", _BOOL, (), "the segment has at least one source"),
            Column("gkv_reads", _BOOL, ("N",), "segments this segment attends to (itself and its sources)"),
        ),
    )
)

COORDS.add(
    CoordFamily(
        "grid",
        "structpos.coords.grid:grid_coords",
        no_argument("grid"),
        summary="Line and column of each node's first character: 2-D text-grid positions.",
        reference=r"line = newlines before the character, col = characters since the last newline "
        "(0-based code points); 2-D grid task of position coupling (Cho et al. 2024).",
        columns=(
            Column("grid_line", _I64, (), "0-based line of the node's first character"),
            Column("grid_col", _I64, (), "0-based column (code points) of the node's first character"),
        ),
    )
)

COORDS.add(
    CoordFamily(
        "hirope",
        "structpos.coords.code_levels:hirope_coords",
        no_argument("hirope"),
        summary="HiRoPE levels of code: function/class ordinal, statement within it, token within the statement.",
        reference="Each level restarts inside its parent (statement 0 = the unit's header); feeds "
        "`HierarchicalRoPE` (HiRoPE, Zhang et al. 2024).",
        columns=(
            Column("hirope_function", _I64, (), "ordinal of the innermost class/function (0: the file)"),
            Column("hirope_statement", _I64, (), "ordinal of the innermost statement within that unit"),
            Column("hirope_token", _I64, (), "leaves of that statement before the node"),
        ),
    )
)

COORDS.add(
    CoordFamily(
        "bipe",
        "structpos.coords.bilevel:bipe_coords",
        bipe_arg,
        syntax="bipe[:UNIT]",
        default_arg="auto",
        summary="Bilevel positions: segment index (sentence / line / cell / statement) and offset inside it.",
        reference=r"$s(n)$ = segment ordinal, $o(n) = \#\{m < n : s(m) = s(n)\}$; absolute code of $o$ + "
        "RoPE on $s$ (BiPE, He et al. 2024).",
        columns=(
            Column("bipe_segment", _I64, (), "segment ordinal (line number for `line`)"),
            Column("bipe_offset", _I64, (), "leaves of the segment before the node"),
        ),
    )
)

COORDS.add(
    CoordFamily(
        "tpe",
        "structpos.coords.traversal:tpe_coords",
        no_argument("tpe"),
        summary="Rank of each table cell under four traversal orders (row, column, snake, anti-diagonal).",
        reference="Sort keys $(r,c)$, $(c,r)$, $(r,\\pm c)$, $(r+c,r)$; per-token positions by "
        "`traversal_positions` (2D-TPE, Li et al. 2024).",
        columns=(Column("tpe_rank", _I64, (4,), "cell rank under row / column / snake / antidiagonal, -1 off cells"),),
    )
)
