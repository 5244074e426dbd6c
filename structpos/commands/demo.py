"""``structpos demo``: parse embedded examples (code, JSON, table, graph) and print coordinates."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ..structure import Structure

CODE = """def greet(name):
    if name:
        return f"hello {name}"
    return "hello"
"""

JSON = '{"model": {"layers": 2, "heads": [4, 8]}, "name": "tiny"}'

TABLE = """city,country,population
Paris,France,2102650
"Washington, D.C.",USA,689545
"""

GRAPH_EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (3, 4)]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``structpos demo`` on ``sub``, the ``structpos`` subcommands (``func`` = :func:`run`).

    Parameters
    ----------
    sub : argparse._SubParsersAction

    Examples
    --------
    >>> from structpos.cli import build_parser
    >>> build_parser().parse_args(["demo", "--max-rows", "3"]).max_rows
    3
    """
    p = sub.add_parser("demo", help="print coordinates for small embedded examples")
    p.add_argument("--max-rows", type=int, default=12, help="rows to print per example")
    p.set_defaults(func=run)


def _show(title: str, structure, coords: dict, columns: list[str], max_rows: int) -> None:
    print(f"\n== {title}: {structure!r}")
    header = ["node", "label", "text"] + columns
    rows = []
    for i in range(min(structure.num_nodes, max_rows)):
        text = structure.node_text(i)
        text = "" if text is None else text.replace("\n", "\\n")
        text = text if len(text) <= 18 else text[:15] + "..."
        vals = []
        for c in columns:
            v = np.asarray(coords[c][i])
            vals.append(
                np.array2string(v, precision=2, separator=",", suppress_small=True)
                if v.ndim
                else f"{v:.3g}"
                if v.dtype.kind == "f"
                else str(v)
            )
        rows.append([str(i), str(structure.labels[i])[:22], text] + vals)
    widths = [max(len(r[j]) for r in rows + [header]) for j in range(len(header))]
    for r in [header] + rows:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)))
    if structure.num_nodes > max_rows:
        print(f"... {structure.num_nodes - max_rows} more nodes")


def _parse_one(obj: Any, kind: str, **options: Any) -> Structure:
    """:func:`structpos.parse` of an input that holds exactly one structure."""
    from .. import parse

    structure = parse(obj, kind, **options)
    if not isinstance(structure, Structure):
        raise TypeError(f"the {kind} demo input parsed into {len(structure)} structures, expected one")
    return structure


def run(args: argparse.Namespace) -> int:
    """Run ``structpos demo``: print the coordinates of the embedded code, JSON, table and graph, then of tokens.

    Parameters
    ----------
    args : argparse.Namespace
        With ``max_rows``, the rows printed per example.

    Returns
    -------
    int
        0.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     status = run(argparse.Namespace(max_rows=2))
    >>> status, [line.split(":")[0] for line in out.getvalue().splitlines() if line.startswith("== ")]
    (0, ['== Python code (tree-sitter)', '== JSON', '== CSV table', '== Graph (4-cycle with a tail)', '== Tokens of the code aligned to their deepest AST node'])
    """
    from .. import compute_coords
    from ..exceptions import SpecError

    if args.max_rows < 0:
        raise SpecError(f"must be 0 or more, got {args.max_rows}", name="--max-rows")
    code = _parse_one(CODE, "code", language="python", name="demo.py")
    c = compute_coords(code, "tree:6x8")
    _show(
        "Python code (tree-sitter)", code, c, ["depth", "sibling", "parent", "subtree_size", "root_path"], args.max_rows
    )

    js = _parse_one(JSON, "json", name="demo.json")
    c = compute_coords(js, "tree")
    _show("JSON", js, c, ["depth", "sibling", "parent", "subtree_size"], args.max_rows)

    table = _parse_one(TABLE, "table", name="demo.csv")
    c = compute_coords(table, "table")
    _show("CSV table", table, c, ["row", "col", "rowspan", "colspan", "header"], args.max_rows)

    ei = np.array(GRAPH_EDGES).T
    graph = _parse_one(np.concatenate([ei, ei[::-1]], 1), "graph", num_nodes=5, name="demo-graph")
    c = compute_coords(graph, "lap:2,rw:3")
    cols = [k for k in c if k.startswith(("lap", "rw"))]
    _show("Graph (4-cycle with a tail)", graph, c, cols, args.max_rows)

    # tokens -> coordinates: a whitespace/punctuation tokenizer stands in for an HF fast tokenizer
    import re

    from ..align import token_coords

    offsets = [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", CODE)]
    tok = token_coords(code, offsets, "tree")
    print("\n== Tokens of the code aligned to their deepest AST node")
    for (s, e), n, d, sib in list(zip(offsets, tok["node"], tok["depth"], tok["sibling"]))[: args.max_rows]:
        print(f"  {CODE[s:e]!r:12} node={n:<3} {code.labels[n]:<22} depth={d} sibling={sib}")
    if len(offsets) > args.max_rows:
        print(f"... {len(offsets) - args.max_rows} more tokens")
    return 0
