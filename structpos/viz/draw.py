"""Matplotlib drawings of a :class:`~structpos.Structure` (headless: Agg/SVG backends only).

* :func:`draw_structure` — the tree / table grid / graph with nodes coloured by a value.
* :func:`draw_similarity` — three panels: the structural distance matrix, the rotary score
  matrix ``⟨R(c_i) q, R(c_j) k⟩`` (see :mod:`structpos.viz.similarity`), and a scatter of
  score against distance with the mean score per distance.
* :func:`show_figure` — both, in one figure of a given pixel size.

Figures are built with :class:`matplotlib.figure.Figure` directly (never ``pyplot``), so no
GUI backend or display is touched.

Length: this module is over 600 lines on purpose. Its drawings (the structure, the similarity panels and
the figure of both) share the private colour, label and layout helpers; split, each drawing module would import the
others' privates.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ..exceptions import ShapeError, SpecError
from ..node_attrs import has_table_cells, table_cells
from ..structure import Structure
from .layout import hop_distance, layout, tree_depth
from .similarity import rotary_scores

__all__ = [
    "truncate",
    "node_values",
    "coordinate_matrix",
    "structural_distance",
    "draw_structure",
    "draw_similarity",
    "show_figure",
]

LABEL_LIMIT = 60  #: draw text labels only up to this many nodes


# ------------------------------------------------------------------ data preparation
def truncate(s: Structure, max_nodes: int) -> Structure:
    """The first ``max_nodes`` nodes of ``s`` (a connected top of a preorder tree; the induced subgraph of a graph).

    Parameters
    ----------
    s : Structure
        A tree (preorder) or graph.
    max_nodes : int
        How many nodes to keep (> 0).

    Returns
    -------
    Structure
        ``s`` itself when small enough, else the cut copy with ``truncated_from`` set.

    Raises
    ------
    SpecError
        If ``max_nodes <= 0``.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> t = truncate(s, 3)
    >>> t.num_nodes, t.truncated_from, t.parent.tolist()
    (3, 5, [-1, 0, 0])
    """
    n = s.num_nodes
    if max_nodes <= 0:
        raise SpecError(f"max_nodes must be positive, got {max_nodes}")
    if n <= max_nodes:
        return s
    m = max_nodes
    edge_index = edge_weight = None
    if s.edge_index is not None:
        keep = (s.edge_index < m).all(axis=0)
        edge_index = s.edge_index[:, keep]
        edge_weight = None if s.edge_weight is None else s.edge_weight[keep]
    return dataclasses.replace(
        s,
        labels=s.labels[:m],
        start=s.start[:m],
        end=s.end[:m],
        parent=None if s.parent is None else s.parent[:m],
        edge_index=edge_index,
        edge_weight=edge_weight,
        attrs={k: v[:m] for k, v in s.attrs.items()},
        node_texts=None if s.node_texts is None else s.node_texts[:m],
        node_ids=None if s.node_ids is None else s.node_ids[:m],
        edge_attr=None if s.edge_attr is None or edge_index is None else s.edge_attr[keep],
        truncated_from=n,
    )


def _column(arr: np.ndarray, name: str, col: int | None, where: str) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.ndim == 1:
        if col not in (None, 0):
            raise SpecError(f"{where} {name!r} is one column; cannot take column {col}")
        return arr
    flat = arr.reshape(len(arr), -1)
    c = 0 if col is None else col
    if not 0 <= c < flat.shape[1]:
        raise SpecError(f"{where} {name!r} has {flat.shape[1]} columns; column {c} does not exist")
    return flat[:, c]


def node_values(s: Structure, color_by: str, coords: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, bool]:
    """Per-node values to colour by: ``(values, categorical)``.

    ``color_by`` is a coordinate name (``"depth"``, ``"lap:2"`` / ``"lap[2]"`` for column 2 of a
    multi-column one), a node attribute (``"row"``), ``"label"`` (categorical), or one of the
    built-ins ``"depth"`` (trees), ``"degree"``, ``"index"``.

    Parameters
    ----------
    s : Structure
        The structure.
    color_by : str
        What to colour by (see above).
    coords : dict of str to numpy.ndarray, optional
        Computed coordinates to choose from.

    Returns
    -------
    values : numpy.ndarray
        ``(N,)``.
    categorical : bool
        Whether the values are categories.

    Raises
    ------
    SpecError
        If ``color_by`` names nothing available (the message lists what is).

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> node_values(s, "depth")[0].tolist(), node_values(s, "label")[1]
    ([0, 1, 1, 2, 2], True)
    """
    coords = coords or {}
    name, col = color_by, None
    for sep in (":", "["):
        if sep in color_by:
            head, _, tail = color_by.partition(sep)
            tail = tail.rstrip("]")
            if tail.lstrip("-").isdigit():
                name, col = head, int(tail)
    if name == "label":
        return np.asarray([str(x) for x in s.labels], dtype=object), True
    if color_by in coords:
        return _column(coords[color_by], color_by, None, "coordinate"), False
    if name in coords:
        return _column(coords[name], name, col, "coordinate"), False
    if name in s.attrs:
        return _column(s.attrs[name], name, col, "attribute"), False
    if name == "depth" and s.parent is not None:
        return tree_depth(s.parent), False
    if name == "degree":
        ei, _ = s.edges()
        return np.bincount(ei.ravel(), minlength=s.num_nodes), False
    if name in ("index", "position"):
        return np.arange(s.num_nodes), False
    known = sorted(
        set(coords) | set(s.attrs) | {"label", "degree", "index"} | ({"depth"} if s.parent is not None else set())
    )
    raise SpecError(f"{s.name}: cannot colour by {color_by!r}; available: {', '.join(known)}")


def coordinate_matrix(
    coords: dict[str, np.ndarray], names: list[str] | None = None, n: int | None = None
) -> tuple[np.ndarray, list[str]]:
    """Stack the chosen numeric coordinate arrays into ``(N, A)``; return it and the axis names.

    Parameters
    ----------
    coords : dict of str to numpy.ndarray
        Per-node coordinates.
    names : list of str, optional
        Which ones (default: all); non-numeric arrays are skipped.
    n : int, optional
        Expected node count.

    Returns
    -------
    matrix : numpy.ndarray
        ``(N, A)`` float64.
    axis_names : list of str

    Raises
    ------
    SpecError
        On an unknown name or column, or no numeric coordinate.
    ShapeError
        On a wrong row count.

    Examples
    --------
    >>> import numpy as np
    >>> m, names = coordinate_matrix({"depth": np.array([0, 1]), "lap": np.zeros((2, 2))})
    >>> m.shape, names
    ((2, 3), ['depth', 'lap[0]', 'lap[1]'])
    """
    names = list(coords) if names is None else names
    cols, axis_names = [], []
    for name in names:
        if name not in coords:
            raise SpecError(f"unknown coordinate {name!r}; available: {', '.join(coords)}")
        arr = np.asarray(coords[name])
        if arr.dtype.kind not in "iuf":
            continue
        flat = arr.reshape(len(arr), -1).astype(np.float64)
        cols.append(flat)
        axis_names += [name] if flat.shape[1] == 1 else [f"{name}[{j}]" for j in range(flat.shape[1])]
    if not cols:
        raise SpecError(f"no numeric coordinates among {names}")
    mat = np.concatenate(cols, axis=1)
    if n is not None and len(mat) != n:
        raise ShapeError(f"coordinates have {len(mat)} rows, structure has {n} nodes")
    return mat, axis_names


def structural_distance(s: Structure) -> np.ndarray:
    """``(N, N)`` hop distance along edges (tree edges, graph edges); for an edgeless table the
    grid distance ``|Δrow| + |Δcol|``.

    Parameters
    ----------
    s : Structure
        A tree, graph or table.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` float, ``inf`` where unreachable.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> structural_distance(s)[3].tolist()
    [2.0, 3.0, 1.0, 0.0, 2.0]
    """
    ei, _ = s.edges()
    if ei.shape[1] == 0 and has_table_cells(s):
        t = table_cells(s)
        r, c = t.row.astype(float), t.col.astype(float)
        return np.abs(r[:, None] - r[None]) + np.abs(c[:, None] - c[None])
    return hop_distance(s)


# ------------------------------------------------------------------ drawing
def _short(x, width: int = 12) -> str:
    t = " ".join(str(x).split())
    return t if len(t) <= width else t[: width - 1] + "…"


def _node_caption(s: Structure, i: int) -> str:
    """The label, plus the node's text on a second line when that text is short (a word, a token)."""
    lab = _short(s.labels[i])
    text = s.node_text(i)
    if text is None:
        return lab
    text = " ".join(text.split())
    return f"{lab}\n{text}" if text and len(text) <= 14 and text != lab else lab


def _colors(values: np.ndarray, categorical: bool, cmap_name: str = "viridis", shown: np.ndarray | None = None):
    """RGBA per node plus what to put in the legend/colorbar; ``shown`` (bool) limits the
    colour range / legend to the nodes actually drawn."""
    import matplotlib as mpl

    shown = np.ones(len(values), dtype=bool) if shown is None else shown
    if categorical:
        cats, inv = np.unique(values.astype(str), return_inverse=True)
        counts = np.bincount(inv[shown], minlength=len(cats))
        order = np.argsort(-counts, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        cmap = mpl.colormaps["tab20"]
        top = 19
        rgba = np.where((rank[inv] < top)[:, None], cmap(np.minimum(rank[inv], top) % 20), (0.7, 0.7, 0.7, 1.0))
        present = int((counts > 0).sum())
        legend = [(cats[order[r]], cmap(r % 20)) for r in range(min(top, present))]
        if present > top:
            legend.append((f"other ({present - top})", (0.7, 0.7, 0.7, 1.0)))
        return rgba, ("legend", legend)
    v = np.asarray(values, dtype=float)
    finite = np.isfinite(v)
    ranged = finite & shown
    lo, hi = (np.min(v[ranged]), np.max(v[ranged])) if ranged.any() else (0.0, 1.0)
    norm = mpl.colors.Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1)
    cmap = mpl.colormaps[cmap_name]
    rgba = cmap(norm(np.where(finite, v, lo)))
    rgba[~finite] = (0.8, 0.8, 0.8, 1.0)
    return rgba, ("colorbar", mpl.cm.ScalarMappable(norm=norm, cmap=cmap))


def draw_structure(
    s: Structure,
    values: np.ndarray | None = None,
    *,
    categorical: bool = False,
    ax=None,
    title: str | None = None,
    color_label: str = "",
    text: str = "auto",
):
    """Draw ``s`` (tree, table grid or graph) on ``ax`` with node colours from ``values``.

    Parameters
    ----------
    s : Structure
        What to draw; the style comes from :func:`structpos.viz.layout.layout`.
    values : numpy.ndarray, optional
        One value per node (default: depth for trees, degree otherwise).
    categorical : bool
        Colour ``values`` as categories (legend) instead of a continuous map (colour bar).
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new headless figure).
    title : str, optional
        Axes title (default: input name, kind and node count).
    color_label : str
        Colour bar / legend title.
    text : {"auto", "none"}
        ``"auto"`` labels nodes when there are at most :data:`LABEL_LIMIT`.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ShapeError
        If ``values`` does not have one entry per node.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> ax = draw_structure(s)
    >>> ax.get_ylabel(), len(ax.collections[1].get_offsets())
    ('depth', 5)
    """
    from matplotlib.figure import Figure

    if ax is None:
        ax = Figure(figsize=(8, 6)).add_subplot()
    n = s.num_nodes
    style, pos = layout(s)
    if values is None:
        values, categorical = node_values(s, "depth" if s.parent is not None else "degree")
    if len(values) != n:
        raise ShapeError(f"{s.name}: {len(values)} colour values for {n} nodes")
    shown = np.isfinite(pos).all(axis=1) if style == "grid" else None
    rgba, key = _colors(np.asarray(values), categorical, shown=shown)
    show_text = text == "auto" and n <= LABEL_LIMIT
    if style == "grid":
        _draw_grid(ax, s, pos, rgba, show_text)
    else:
        _draw_links(ax, s, style, pos, rgba, show_text)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    _add_color_key(ax, key, color_label)
    total = s.truncated_from
    count = f"first {n} of {total} nodes" if total else f"{n} nodes"
    ax.set_title(title if title is not None else f"{_short(Path(s.name).name, 80)} ({s.kind}, {count})", fontsize=10)
    return ax


def _cell_text(s: Structure, i: int) -> str:
    """What a table cell shows: the decoded/visible text (spans may hold markup), else the span, else the label."""
    texts = s.node_texts
    txt = texts[i] if texts is not None and texts[i] is not None else s.node_text(i)
    return str(s.labels[i]) if txt is None else txt


def _draw_grid(ax, s: Structure, pos: np.ndarray, rgba: np.ndarray, show_text: bool) -> None:
    """Table cells as rectangles covering their row/column spans, with their text."""
    from matplotlib.patches import Rectangle

    cell = np.isfinite(pos).all(axis=1)
    t = table_cells(s, needed_by="a grid drawing")
    rs, cs = np.maximum(t.rowspan, 1).astype(float), np.maximum(t.colspan, 1).astype(float)
    row, col = t.row.astype(float), t.col.astype(float)
    with_text = show_text or cell.sum() <= 150
    for i in map(int, np.flatnonzero(cell)):
        ax.add_patch(
            Rectangle(
                (col[i] - 0.5, -row[i] - rs[i] + 0.5), cs[i], rs[i], facecolor=rgba[i], edgecolor="white", linewidth=1.0
            )
        )
        if with_text:
            lum = 0.299 * rgba[i][0] + 0.587 * rgba[i][1] + 0.114 * rgba[i][2]
            ax.text(
                pos[i, 0],
                pos[i, 1],
                _short(_cell_text(s, i), 14),
                ha="center",
                va="center",
                fontsize=7,
                color="black" if lum > 0.5 else "white",
            )
    if cell.any():
        ax.set_xlim(col[cell].min() - 0.6, (col[cell] + cs[cell]).max() - 0.4)
        ax.set_ylim(-(row[cell] + rs[cell]).max() + 0.4, -row[cell].min() + 0.6)
        cols_u = np.unique(col[cell]).astype(int)
        rows_t = np.unique(row[cell]).astype(int)
        rows_t = rows_t[:: max(1, len(rows_t) // 20)]
        ax.set_xticks(cols_u[:: max(1, len(cols_u) // 20)])
        ax.set_yticks(-rows_t, [str(r) for r in rows_t])
    ax.set_xlabel("column")
    ax.set_ylabel("row")


def _draw_links(ax, s: Structure, style: str, pos: np.ndarray, rgba: np.ndarray, show_text: bool) -> None:
    """Edges as one line collection, nodes as one scatter, captions for small structures."""
    from matplotlib.collections import LineCollection

    n = s.num_nodes
    ei, _ = s.edges()
    if ei.shape[1]:
        seg = np.stack([pos[ei[0]], pos[ei[1]]], axis=1)
        ax.add_collection(
            LineCollection(
                list(seg),
                colors=(0.55, 0.55, 0.55, 0.8),
                linewidths=0.8 if n < 300 else 0.4,
                zorder=1,
                rasterized=n > 500,
            )
        )
    size = 90 if n <= LABEL_LIMIT else max(4.0, 2500.0 / n)
    ax.scatter(
        pos[:, 0],
        pos[:, 1],
        s=size,
        c=rgba,
        edgecolors="black" if n <= LABEL_LIMIT else "none",
        linewidths=0.4,
        zorder=2,
        rasterized=n > 500,
    )
    if show_text:
        tree = style == "tree"
        for i in range(n):
            ax.annotate(
                _node_caption(s, i) if tree else f"{i}",
                pos[i],
                xytext=(0, -8 if tree else 6),
                textcoords="offset points",
                ha="center",
                va="top" if tree else "bottom",
                fontsize=6.5,
                zorder=3,
            )
    ax.autoscale_view()
    ax.margins(0.06)
    ax.set_xticks([])
    if style == "tree" and n:
        _depth_axis(ax, pos)
    else:
        ax.set_yticks([])


def _depth_axis(ax, pos: np.ndarray) -> None:
    """Label the y axis of a tree drawing (``y = -depth``) with depths, at most ~8 ticks."""
    lo, hi = int(-pos[:, 1].max()), int(-pos[:, 1].min())
    ticks = np.arange(lo, hi + 1, max(1, (hi - lo) // 8))
    ax.set_ylabel("depth")
    ax.set_yticks(-ticks, [str(t) for t in ticks])


def _add_color_key(ax, key, color_label: str) -> None:
    """A colour bar for continuous values, a legend for categories."""
    from matplotlib.patches import Patch

    kind, obj = key
    if kind == "colorbar":
        ax.figure.colorbar(obj, ax=ax, label=color_label, shrink=0.8)
        return
    handles = [Patch(facecolor=c, label=_short(lab, 22)) for lab, c in obj]
    ax.legend(
        handles=handles,
        title=color_label or None,
        fontsize=6.5,
        title_fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        frameon=False,
    )


def draw_similarity(
    s: Structure,
    coords: np.ndarray,
    *,
    axes=None,
    distance: np.ndarray | None = None,
    encoder=None,
    head_dim: int = 32,
    vectors: str = "ones",
    seed: int = 0,
    coord_names: list[str] | None = None,
    distance_label: str = "hops",
):
    """Three panels on ``axes`` (three Axes): distance matrix, rotary score matrix, score-vs-distance scatter.

    Returns ``(distance, scores)``.

    Parameters
    ----------
    s : Structure
        The structure (for the distances).
    coords : numpy.ndarray
        ``(N, A)`` coordinates fed to the rotary map.
    axes : sequence of three Axes, optional
        Where to draw (default: a new headless figure).
    distance : numpy.ndarray, optional
        ``(N, N)`` distances (default :func:`structural_distance`).
    encoder : callable, optional
        A rotary encoder ``encoder(q, k, coords)`` (default: exact sectioned RoPE in float64).
    head_dim, vectors, seed
        The probe ``q``, ``k`` (see :func:`structpos.viz.similarity.probe_vectors`).
    coord_names : list of str, optional
        Axis names for the title.
    distance_label : str
        Unit of the distance axis.

    Returns
    -------
    distance, scores : numpy.ndarray
        The two ``(N, N)`` matrices drawn.

    Raises
    ------
    ShapeError
        If ``coords`` does not have one row per node.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> d, sc = draw_similarity(s, [[0], [1], [1], [2], [2]])
    >>> d.shape, bool(sc[0, 0] > sc[0, 3])
    ((5, 5), True)
    """
    from matplotlib.figure import Figure

    n = s.num_nodes
    coords = np.asarray(coords, dtype=float)
    if coords.ndim == 1:
        coords = coords[:, None]
    if len(coords) != n:
        raise ShapeError(f"{s.name}: coordinates have {len(coords)} rows for {n} nodes")
    if axes is None:
        axes = Figure(figsize=(15, 4.5)).subplots(1, 3)
    dist = structural_distance(s) if distance is None else np.asarray(distance, dtype=float)
    scores = rotary_scores(coords, encoder=encoder, head_dim=head_dim, vectors=vectors, seed=seed)
    ax_d, ax_s, ax_x = axes
    fig = ax_d.figure
    finite = np.isfinite(dist)
    dmax = dist[finite].max() if finite.any() else 1.0
    im = ax_d.imshow(np.where(finite, dist, np.nan), cmap="magma_r", vmin=0, vmax=max(dmax, 1), interpolation="nearest")
    fig.colorbar(im, ax=ax_d, shrink=0.8, label=distance_label)
    ax_d.set_title("structural distance d(i, j)", fontsize=10)
    lo, hi = float(scores.min()), float(scores.max())
    if lo < 0 < hi:  # signed scores: diverging map centred on 0
        lim = max(-lo, hi)
        im = ax_s.imshow(scores, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
    else:  # one sign: use the full colour range for contrast
        im = ax_s.imshow(scores, cmap="viridis", vmin=lo, vmax=hi if hi > lo else lo + 1e-9, interpolation="nearest")
    fig.colorbar(im, ax=ax_s, shrink=0.8, label="score")
    enc_name = type(encoder).__name__ if encoder is not None else "sectioned RoPE"
    axes_txt = f" on {_short(', '.join(coord_names), 36)}" if coord_names else ""
    ax_s.set_title(f"score ⟨R(c_i)q, R(c_j)k⟩ ({vectors} q, k)\n{enc_name}{axes_txt}", fontsize=9)
    for a in (ax_d, ax_s):
        a.set_xlabel("node j")
        a.set_ylabel("node i")
    iu = np.triu_indices(n, k=1)
    dv, sv = dist[iu], scores[iu]
    ok = np.isfinite(dv)
    dv, sv = dv[ok], sv[ok]
    if dv.size:
        rng = np.random.default_rng(seed)
        pick = rng.choice(dv.size, size=min(dv.size, 20000), replace=False)
        jitter = rng.uniform(-0.15, 0.15, size=pick.size)
        ax_x.scatter(
            dv[pick] + jitter,
            sv[pick],
            s=3,
            alpha=0.25,
            color="tab:blue",
            linewidths=0,
            label="node pairs",
            rasterized=True,
        )
        uniq = np.unique(dv)
        means = np.array([sv[dv == u].mean() for u in uniq])
        ax_x.plot(uniq, means, "o-", color="tab:red", markersize=3.5, linewidth=1.5, label="mean per distance")
        if dv.size > 2 and np.std(dv) > 0 and np.std(sv) > 0:
            from scipy.stats import spearmanr

            rho = spearmanr(dv, sv).statistic
            ax_x.set_title(f"score vs distance (Spearman ρ = {rho:+.2f})", fontsize=10)
        ax_x.legend(fontsize=7, loc="lower left", framealpha=0.8)
    ax_x.set_xlabel(f"structural distance ({distance_label})")
    ax_x.set_ylabel("score")
    if not ax_x.get_title():
        ax_x.set_title("score vs distance", fontsize=10)
    return dist, scores


def show_figure(
    s: Structure,
    *,
    color_by: str = "depth",
    coords: dict[str, np.ndarray] | None = None,
    rope_coords: list[str] | None = None,
    similarity: bool = True,
    encoder=None,
    size: tuple[int, int] = (1400, 1000),
    dpi: int = 100,
    head_dim: int = 32,
    vectors: str = "ones",
    seed: int = 0,
):
    """One figure of ``size`` pixels: the structure coloured by ``color_by`` and (optionally) the
    similarity panels computed on the ``rope_coords`` columns of ``coords``.

    ``rope_coords=None`` uses every numeric array in ``coords``; when ``coords`` is empty too,
    built-in positions: tree (depth, preorder index), table (row, col), graph (node index).

    Parameters
    ----------
    s : Structure
        What to draw.
    color_by : str
        See :func:`node_values`.
    coords : dict of str to numpy.ndarray, optional
        Computed coordinates.
    rope_coords : list of str, optional
        Which coordinates feed the rotary map.
    similarity : bool
        Add the three similarity panels.
    encoder : callable, optional
        Rotary encoder for the scores.
    size : (int, int)
        Figure size in pixels (at least 200 × 150).
    dpi, head_dim, vectors, seed
        Rendering and probe settings.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    SpecError
        On a too small size or an unknown ``color_by``.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("[1, [2, 3]]", "json")
    >>> fig = show_figure(s, size=(600, 400))
    >>> len(fig.axes) >= 4
    True
    """
    from matplotlib.figure import Figure

    coords = dict(coords or {})
    w, h = size
    if w < 200 or h < 150:
        raise SpecError(f"figure size {w}x{h} px is too small (min 200x150)")
    fig = Figure(figsize=(w / dpi, h / dpi), dpi=dpi, layout="constrained")
    values, categorical = node_values(s, color_by, coords)
    if similarity:
        gs = fig.add_gridspec(2, 3, height_ratios=[1.3, 1])
        ax_tree = fig.add_subplot(gs[0, :])
        axes = [fig.add_subplot(gs[1, j]) for j in range(3)]
    else:
        ax_tree = fig.add_subplot()
    draw_structure(s, values, categorical=categorical, ax=ax_tree, color_label=color_by)
    if similarity:
        mat, names = _rope_matrix(s, coords, rope_coords)
        target, dlabel = s, "hops"
        if layout(s)[0] == "grid":  # a table: compare cells on the grid, not via row/table nodes
            keep = np.flatnonzero(table_cells(s).is_cell)
            target = _select(s, keep)
            mat = mat[keep]
            dlabel = "|Δrow| + |Δcol|"
        draw_similarity(
            target,
            mat,
            axes=axes,
            encoder=encoder,
            head_dim=max(head_dim, 2 * mat.shape[1]),
            vectors=vectors,
            seed=seed,
            coord_names=names,
            distance_label=dlabel,
        )
    return fig


def _select(s: Structure, keep: np.ndarray) -> Structure:
    """The nodes ``keep`` of ``s`` as an edgeless structure (labels, spans and attributes only)."""
    return Structure(
        kind=s.kind,
        labels=s.labels[keep],
        start=s.start[keep],
        end=s.end[keep],
        source=s.source,
        name=s.name,
        attrs={k: v[keep] for k, v in s.attrs.items()},
    )


def _rope_matrix(s: Structure, coords: dict[str, np.ndarray], names: list[str] | None) -> tuple[np.ndarray, list[str]]:
    if names:
        return coordinate_matrix(coords, names, n=s.num_nodes)
    if coords:
        return coordinate_matrix(coords, n=s.num_nodes)
    fallback: dict[str, np.ndarray] = {}
    if s.parent is not None:
        fallback = {"depth": tree_depth(s.parent), "preorder": np.arange(s.num_nodes)}
    elif has_table_cells(s):
        t = table_cells(s)
        fallback = {"row": t.row, "col": t.col}
    else:
        fallback = {"index": np.arange(s.num_nodes)}
    return coordinate_matrix(fallback, n=s.num_nodes)
