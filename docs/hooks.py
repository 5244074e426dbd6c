"""mkdocs hook: fill generated sections so the docs read from the code, not from copies.

Markers in a page's markdown:

* ``<!-- structpos:coord-families -->`` — the coordinate family table from the registry;
* ``<!-- structpos:encoders -->`` — the encoder table from the encoder registry;
* ``<!-- structpos:cli -->`` — every command's ``--help`` from the argparse parser;
* ``<!-- structpos:benchmarks -->`` — ``benchmarks/RESULTS.md``;
* ``<!-- structpos:quality -->`` — ``benchmarks/quality/RESULTS.md`` (the quality suite's verdicts).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _import_package() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def coord_families() -> str:
    _import_package()
    from structpos.coords import families_markdown

    return families_markdown()


def encoders() -> str:
    _import_package()
    from structpos.encoders.registry import encoders_markdown

    return encoders_markdown()


def cli_reference() -> str:
    _import_package()
    from structpos.cli import build_parser

    parser = build_parser()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parts = ["## structpos", "", "```text", parser.format_help().rstrip(), "```", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        p.prog = f"structpos {name}"
        parts += [f"## structpos {name}", "", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def _demoted(path: Path) -> str:
    """A markdown file with its headings one level down (the page has its own title)."""
    text = path.read_text(encoding="utf-8")
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


def benchmarks() -> str:
    return _demoted(ROOT / "benchmarks" / "RESULTS.md")


def quality() -> str:
    return _demoted(ROOT / "benchmarks" / "quality" / "RESULTS.md")


MARKERS = {
    "<!-- structpos:coord-families -->": coord_families,
    "<!-- structpos:encoders -->": encoders,
    "<!-- structpos:cli -->": cli_reference,
    "<!-- structpos:benchmarks -->": benchmarks,
    "<!-- structpos:quality -->": quality,
}


def on_page_markdown(markdown: str, **kwargs) -> str:
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
