"""``structpos show FILE -o out.png|out.svg|out.html``: draw a structure coloured by a coordinate,
with the rotary score heatmap against tree/graph distance (headless; HTML is self-contained)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..exceptions import InputError, ParseError, SpecError
from .encode import add_parser_opt

DEFAULT_COORDS = {"graph": "lap:4", "table": "table"}
ROPE_PREFERENCE = [("depth", "sibling"), ("row", "col"), ("lap",), ("rw",)]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``structpos show`` and its arguments on ``sub`` (``func`` = :func:`run`).

    Parameters
    ----------
    sub : argparse._SubParsersAction
        Where ``structpos`` keeps its subcommands.

    Examples
    --------
    >>> from structpos.cli import build_parser
    >>> args = build_parser().parse_args(["show", "a.json", "-o", "a.svg", "--parser-opt", "max_depth=2"])
    >>> args.output, args.parser_opt, args.max_nodes, args.func is run
    ('a.svg', [('max_depth', 2)], 200, True)
    """
    p = sub.add_parser(
        "show",
        help="draw a structure coloured by a coordinate, with a rotary-score vs distance heatmap",
        description="Parse FILE, compute coordinates, and draw the tree / table / graph with nodes coloured "
        "by one coordinate, plus the heatmap of <R(c_i) q, R(c_j) k> next to the structural distance matrix.",
    )
    p.add_argument(
        "file",
        help="input file: code, JSON, CoNLL-U, CSV/TSV/HTML table, Markdown, ..., or a graph (.edgelist/.adjlist/.gml/.graphml)",
    )
    p.add_argument("--kind", help="input kind (default: from the file suffix)")
    p.add_argument("--language", help="code language (default: from the file suffix)")
    add_parser_opt(p)
    p.add_argument(
        "--index",
        type=int,
        default=0,
        help="which structure when the file holds several (e.g. CoNLL-U sentence), 0-based; negative counts "
        "from the end; a file of one structure takes 0 or -1",
    )
    p.add_argument("-o", "--output", required=True, help="output file: .png, .svg, .pdf or .html")
    p.add_argument(
        "--coords",
        default=None,
        help="coordinate spec, e.g. 'tree' or 'lap:8,rw:16' (default: tree for trees, table for tables, lap:4 for graphs)",
    )
    p.add_argument(
        "--color-by",
        default=None,
        help="coordinate, attribute or 'label' to colour nodes by (default: depth / row / degree)",
    )
    p.add_argument(
        "--rope-coords",
        default=None,
        help="comma-separated coordinates fed to the rotary map (default: depth,sibling / row,col / lap)",
    )
    p.add_argument(
        "--max-nodes",
        type=int,
        default=200,
        help="draw at most this many nodes (the first ones in preorder); default 200",
    )
    p.add_argument("--size", default="1400x1000", help="image size in pixels WxH (default 1400x1000)")
    p.add_argument("--dpi", type=int, default=100, help="image resolution in dots per inch (default 100)")
    p.add_argument("--no-similarity", action="store_true", help="draw only the structure")
    p.add_argument(
        "--probe", choices=["ones", "random"], default="ones", help="the fixed q and k vectors (default: all-ones)"
    )
    p.add_argument("--head-dim", type=int, default=32, help="rotary head dimension (default 32)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the 'random' probe vectors (default 0)")
    p.set_defaults(func=run)


def _parse_size(text: str) -> tuple[int, int]:
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or int(w) < 1 or int(h) < 1:
        raise SpecError(f"must look like 1400x1000 (positive pixels), got {text!r}", name="--size")
    return int(w), int(h)


def _check_args(args: argparse.Namespace) -> tuple[Path, tuple[int, int]]:
    """Every argument checked before any work: ``(input path, size)``; raises a one-line structpos error."""
    path = Path(args.file)
    if not path.is_file():
        raise InputError("no such file" if not path.exists() else "not a regular file", name=str(path))
    out = Path(args.output)
    if out.suffix.lower() not in (".png", ".svg", ".pdf", ".html", ".htm"):
        raise SpecError("unsupported output type; use .png, .svg, .pdf or .html", name=str(out))
    if not out.parent.is_dir():
        raise InputError(f"output directory {str(out.parent)!r} does not exist", name=str(out))
    for name, value in (("--max-nodes", args.max_nodes), ("--dpi", args.dpi), ("--head-dim", args.head_dim)):
        if value <= 0:
            raise SpecError(f"must be positive, got {value}", name=name)
    if args.coords:
        from ..pipeline.encode import validate_spec

        validate_spec(args.coords)
    return path, _parse_size(args.size)


def load_structure(path: Path, kind: str | None, language: str | None, options: dict, index: int):
    """Parse ``path`` as ``kind`` (guessed from the suffix when ``None``); pick structure ``index``.

    Parameters
    ----------
    path : Path
        The input file (a graph file by its suffix: see :data:`GRAPH_READERS`).
    kind : str or None
        The input kind; ``None`` guesses it from the suffix.
    language : str or None
        The code language; ``None`` guesses it from the suffix.
    options : dict
        More parser options.
    index : int
        Which structure when the file holds several (negative counts from the end).

    Returns
    -------
    Structure

    Raises
    ------
    InputError
        The kind or language cannot be guessed, the file cannot be read, or it holds no structure.
    SpecError
        ``index`` is out of range.
    ParseError
        The file does not parse as ``kind``, or does not decode (read as ``structpos encode``
        and ``parse(path, kind)`` read it: byte-order mark, PEP 263 line or XML declaration, UTF-8).

    Examples
    --------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "a.json"
    >>> _ = p.write_text('{"a": [1, 2]}')
    >>> load_structure(p, None, None, {}, 0).num_nodes
    5
    >>> load_structure(p.with_suffix(".xyz"), None, None, {}, 0)
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: ...a.xyz: cannot guess the kind from the suffix '.xyz'; pass --kind
    """
    from ..parsers import parse
    from ..parsers._input import decode_input, read_bytes
    from ..pipeline.records import kind_for_path

    guess = kind_for_path(path)
    if kind is None and path.suffix.lower() in GRAPH_READERS:
        kind = "graph"
    if kind == "graph":
        return _pick(parse(read_graph_file(path), "graph", name=str(path), **options), path, index)
    if kind is None:
        if guess is None:
            raise InputError(f"cannot guess the kind from the suffix {path.suffix!r}; pass --kind", name=str(path))
        kind = guess[0]
    if kind == "code":
        language = language or (guess[1] if guess and guess[0] == "code" else None)
        if language is None:
            raise InputError("cannot guess the code language; pass --language", name=str(path))
        options = {"language": language, **options}
    data = read_bytes(path, str(path), options.get("limits"))
    # as parse(path) and encode read it
    text = decode_input(data, str(path), kind, options.get("language"), options.get("default_encoding"))
    result = parse(text, kind, name=str(path), **options)
    return _pick(result, path, index)


def _pick(result, path: Path, index: int):
    """Structure ``index`` of what a file parsed to (one Structure, or a list: CoNLL-U sentences)."""
    structures = result if isinstance(result, list) else [result]
    if not structures:
        raise InputError("no structures found", name=str(path))
    if not -len(structures) <= index < len(structures):
        raise SpecError(f"{index} is out of range; {path} holds {len(structures)} structure(s)", name="--index")
    return structures[index]


GRAPH_READERS = {
    ".edgelist": "read_edgelist",
    ".edges": "read_edgelist",
    ".adjlist": "read_adjlist",
    ".gml": "read_gml",
    ".graphml": "read_graphml",
}


def read_graph_file(path: Path):
    """A networkx graph from ``.graphml``/``.gml``/``.adjlist`` or an edge list (``u v`` per line, any other suffix).

    Parameters
    ----------
    path : Path
        The graph file.

    Returns
    -------
    networkx.Graph

    Raises
    ------
    InputError
        The file cannot be read as a graph of that format.
    ImportError
        networkx is not installed (the ``graph`` extra).

    Examples
    --------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "g.edgelist"
    >>> _ = p.write_text("0 1\\n1 2\\n")
    >>> sorted(read_graph_file(p).edges())
    [('0', '1'), ('1', '2')]
    """
    from .._optional import require

    nx = require("networkx", "graph", "reading graph files")
    reader = getattr(nx, GRAPH_READERS.get(path.suffix.lower(), "read_edgelist"))
    try:
        return reader(path)
    except UnicodeDecodeError as e:  # as every other kind words it
        raise ParseError(
            f"not valid {e.encoding} text ({e.reason})", name=str(path), position=f"byte {e.start}"
        ) from None
    except Exception as e:  # networkx raises many types for malformed files
        raise InputError(f"cannot read as a graph ({type(e).__name__}: {e})", name=str(path)) from None


def default_spec(structure) -> str:
    """The coordinate spec ``show`` draws when ``--coords`` is not given.

    ``tree`` for trees, ``table`` for tables, ``lap:4`` for graphs.

    Parameters
    ----------
    structure : Structure

    Returns
    -------
    str

    Examples
    --------
    >>> from structpos import parse
    >>> default_spec(parse("[1]", "json")), default_spec(parse("a,b\\n1,2\\n", "table"))
    ('tree', 'table')
    """
    if structure.parent is not None and structure.kind != "table":
        return "tree"
    return DEFAULT_COORDS.get(structure.kind, "tree" if structure.parent is not None else "lap:4")


def default_rope_names(coords: dict) -> list[str] | None:
    """First preference group whose coordinates were all computed, else ``None`` (all numeric).

    The groups, in order: ``depth, sibling``; ``row, col``; ``lap``; ``rw``.

    Parameters
    ----------
    coords : dict
        Computed coordinates by name.

    Returns
    -------
    list of str or None

    Examples
    --------
    >>> default_rope_names({"row": 0, "col": 0, "lap": 0})
    ['row', 'col']
    >>> default_rope_names({"spd": 0}) is None
    True
    """
    for group in ROPE_PREFERENCE:
        if all(g in coords for g in group):
            return list(group)
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``structpos show``: parse, compute coordinates, draw, save; prints the output path.

    Parameters
    ----------
    args : argparse.Namespace
        Arguments parsed by the ``show`` parser (:func:`add_parser`).

    Returns
    -------
    int
        0.

    Raises
    ------
    InputError
        The input file is missing or cannot be parsed, or the output directory does not exist.
    SpecError
        A bad argument (output type, ``--size``, ``--coords``, ...).

    Examples
    --------
    >>> import os, tempfile
    >>> from structpos.cli import build_parser
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "a.json"), "w").write('{"a": [1, 2]}')
    >>> run(build_parser().parse_args(["show", os.path.join(d, "a.json"), "-o", os.path.join(d, "a.html"),
    ...                                "--no-similarity"]))
    wrote .../a.html
    0
    """
    from .. import viz
    from ..coords import compute

    path, size = _check_args(args)
    options = dict(args.parser_opt)
    full = load_structure(path, args.kind, args.language, options, args.index)
    spec = args.coords or default_spec(full)
    n = full.num_nodes
    progress(f"parsed {path}: {n} nodes ({full.kind}); computing coordinates {spec!r}")
    coords = compute(full, spec)
    s = viz.truncate(full, args.max_nodes)
    if s.num_nodes < n:
        how = "in preorder" if full.parent is not None else "by node index, with the edges among them"
        print(
            f"structpos show: {path} has {n} nodes; drawing only the first {s.num_nodes} ({how}). "
            f"Raise --max-nodes to draw more.",
            file=sys.stderr,
        )
        coords = {k: np.asarray(v)[: s.num_nodes] for k, v in coords.items()}
    color_by = args.color_by or ("depth" if "depth" in coords else "row" if "row" in coords else "degree")
    rope_names = (
        [x.strip() for x in args.rope_coords.split(",") if x.strip()]
        if args.rope_coords
        else default_rope_names(coords)
    )
    heatmap = "" if args.no_similarity else " and the rotary-score heatmap"
    progress(f"drawing {s.num_nodes} nodes{heatmap} to {args.output}")
    encoder = _encoder(coords, rope_names, args.head_dim) if not args.no_similarity else None
    fig = viz.show_figure(
        s,
        color_by=color_by,
        coords=coords,
        rope_coords=rope_names,
        similarity=not args.no_similarity,
        encoder=encoder,
        size=size,
        dpi=args.dpi,
        head_dim=args.head_dim,
        vectors=args.probe,
        seed=args.seed,
    )
    facts = {
        "input": str(path),
        "kind": s.kind,
        "nodes drawn": f"{s.num_nodes} of {n}",
        "coordinates": spec,
        "coloured by": color_by,
        "rotary coordinates": ", ".join(rope_names) if rope_names else "all numeric",
    }
    out = viz.save(fig, args.output, title=f"structpos show: {path.name}", facts=facts)
    print(f"wrote {out}")
    return 0


def progress(message: str) -> None:
    """Print one progress line on stderr (``structpos show: <message>``) as a stage starts.

    Drawing can take many seconds (matplotlib, torch, the score heatmap); these lines say what is
    going on. They come only after the input has parsed, so a bad input still gets its one error line.

    Parameters
    ----------
    message : str
        What starts now.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     progress("drawing 5 nodes")
    >>> err.getvalue()
    'structpos show: drawing 5 nodes\\n'
    """
    print(f"structpos show: {message}", file=sys.stderr, flush=True)


def _encoder(coords: dict, names: list[str] | None, head_dim: int):
    """The library encoder for these coordinates, built through the encoder registry: ``wire``
    for Laplacian eigenvectors (``lap``, with ``scale = N`` so that spectral steps of size
    ``O(1/√N)`` turn by useful angles), else ``rope`` (sectioned); ``None`` (the viz fallback)
    when the encoders cannot load."""
    from ..encoders.registry import build
    from ..viz import coordinate_matrix

    mat, _ = coordinate_matrix(coords, names)
    n, a = mat.shape
    dim = max(head_dim, 2 * a)
    if names and all(x == "lap" for x in names):
        name, options = "wire", {"head_dim": dim, "k": a, "scale": float(max(n, 1))}
    else:
        name, options = "rope", {"head_dim": dim, "num_axes": a}
    try:
        return build(name, **options)
    except ImportError:  # torch missing: the viz's own sectioned RoPE
        return None
