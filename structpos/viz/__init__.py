"""Visualization: draw structures coloured by a coordinate, and rotary-score heatmaps.

Headless by construction (figures are built on :class:`matplotlib.figure.Figure`, rendered
with Agg/SVG); HTML output is self-contained. Needs the ``viz`` extra (matplotlib).
"""

from __future__ import annotations

from .._optional import require

require("matplotlib", "viz", "structpos.viz")

from .draw import (  # noqa: E402
    coordinate_matrix,
    draw_similarity,
    draw_structure,
    node_values,
    show_figure,
    structural_distance,
    truncate,
)
from .export import figure_svg, html_page, save  # noqa: E402
from .layout import graph_layout, grid_layout, hop_distance, layout, tree_depth, tree_layout  # noqa: E402
from .similarity import probe_vectors, rotary_scores, sectioned_rope_scores  # noqa: E402

__all__ = [
    "coordinate_matrix",
    "draw_similarity",
    "draw_structure",
    "node_values",
    "show_figure",
    "structural_distance",
    "truncate",
    "figure_svg",
    "html_page",
    "save",
    "graph_layout",
    "grid_layout",
    "hop_distance",
    "layout",
    "tree_depth",
    "tree_layout",
    "probe_vectors",
    "rotary_scores",
    "sectioned_rope_scores",
]
