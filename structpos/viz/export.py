"""Write figures to PNG/SVG/PDF or a self-contained HTML page.

The HTML page embeds each figure as inline SVG (vector, selectable text) and a small table
of facts; it references no external script, stylesheet, font or image, so it opens offline.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

from ..exceptions import SpecError

__all__ = ["figure_svg", "html_page", "save"]

_CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:13px}
figure{margin:0}svg{max-width:100%;height:auto}"""


def figure_svg(fig) -> str:
    """The figure as an ``<svg>`` element string (fonts rendered as paths: no font files needed).

    Parameters
    ----------
    fig : matplotlib.figure.Figure

    Returns
    -------
    str
        The ``<svg>`` element (the XML prolog and doctype dropped).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> figure_svg(Figure(figsize=(1, 1))).startswith("<svg")
    True
    """
    import matplotlib as mpl

    buf = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]


def html_page(figures, title: str = "structpos", facts: dict | None = None) -> str:
    """A standalone HTML document with ``figures`` inline as SVG and ``facts`` as a table.

    Parameters
    ----------
    figures : iterable of matplotlib.figure.Figure
    title : str
    facts : dict, optional
        Shown as a two-column table.

    Returns
    -------
    str
        The page, with no external resource (no script, font or link).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> page = html_page([Figure(figsize=(1, 1))], title="t", facts={"nodes": 3})
    >>> page.startswith("<!DOCTYPE html>") and "<svg" in page and "http" not in page.split("<svg")[0]
    True
    """
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in (facts or {}).items()
    )
    body = "".join(f"<figure>{figure_svg(f)}</figure>" for f in figures)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>" + (f"<table>{rows}</table>" if rows else "") + body + "</body></html>\n"
    )


def save(fig, path, *, title: str = "structpos", facts: dict | None = None) -> Path:
    """Save ``fig`` by file extension: ``.png``/``.svg``/``.pdf`` (exact figure size) or ``.html``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or pathlib.Path
        Output file; its suffix picks the format.
    title, facts
        For HTML output (see :func:`html_page`).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SpecError
        On an unsupported suffix.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from matplotlib.figure import Figure
    >>> out = save(Figure(figsize=(1, 1)), pathlib.Path(tempfile.mkdtemp()) / "f.svg")
    >>> out.read_text().count("<svg")
    1
    """
    path = Path(path)
    ext = path.suffix.lower()
    if ext in (".html", ".htm"):
        path.write_text(html_page([fig], title=title, facts=facts), encoding="utf-8")
    elif ext in (".png", ".svg", ".pdf"):
        fig.savefig(path, format=ext[1:])
    else:
        raise SpecError(f"{path}: unsupported output type {ext or '(none)'}; use .png, .svg, .pdf or .html")
    return path
