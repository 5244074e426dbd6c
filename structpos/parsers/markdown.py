"""Markdown → document tree with nested sections.

A small line scanner (no dependency) recognizes the block structure that matters for
positions:

* ATX headings (``#`` … ``######``, up to 3 spaces of indent, optional closing ``#``s) and
  setext headings (a paragraph underlined with ``===`` → level 1 or ``---`` → level 2);
* fenced code blocks (```` ``` ```` / ``~~~``, closed by a fence of the same character at
  least as long, or the end of the text) → one ``code_block`` leaf;
* thematic breaks (``***``, ``---``, ``___`` after a blank line) are dropped;
* everything else is paragraph text, paragraphs separated by blank lines (list items, block
  quotes, tables and indented code stay inside paragraph text).

Each heading opens a ``section`` that contains the ``heading`` block and everything up to
the next heading of the same or a higher level (smaller number), so sections nest by
level (a skipped level nests directly). Text before the first heading hangs off the
``document`` root. Paragraphs and headings contain sentences and tokens as in
:mod:`structpos.parsers.document` (a heading is one sentence). Attributes are the
:mod:`structpos.coords.hierarchy` ids (``paragraph``, ``sentence``, ``token``, ``section``,
``section_depth``, ``section_path``) plus ``level`` (heading level on section/heading
nodes, 0 elsewhere).
"""

from __future__ import annotations

import re

import numpy as np

from ..structure import Structure
from ._tree_builder import TreeBuilder
from .document import add_blocks, finish

__all__ = ["parse_markdown"]

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)")
_ATX_CLOSE = re.compile(r"(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


def _lines(text: str):
    """``(start, end_without_newline, next_line_start)`` for each line."""
    pos, n = 0, len(text)
    while pos < n:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        line_end = end - 1 if end > pos and text[end - 1] == "\r" else end  # CRLF
        yield pos, line_end, (n if nl < 0 else nl + 1)
        pos = end + 1


def parse_markdown(text: str, name: str | None = None) -> Structure:
    """Parse Markdown into a ``kind="document"`` tree (see the module docstring)."""
    name = name or "<markdown>"
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    b = TreeBuilder()
    level: dict[int, int] = {}
    root = b.add("document", -1, 0, len(text))
    sections: list[int] = []  # open section nodes, outermost first
    para: list[int] = []  # [start, end] of the paragraph being collected

    def container() -> int:
        return sections[-1] if sections else root

    def extend_sections(end: int) -> None:
        for s in sections:
            b.close(s, max(b.end[s], end))

    def flush() -> None:
        if para:
            s, e = para[0], _trim_end(text, para[0], para[1])
            add_blocks(b, text, container(), s, e)
            extend_sections(e)
            para.clear()

    def heading(lvl: int, line_start: int, content: tuple[int, int], end: int) -> None:
        while sections and level[sections[-1]] >= lvl:
            sections.pop()
        sec = b.add("section", container(), line_start, end)
        level[sec] = lvl
        sections.append(sec)
        cs, ce = content
        if ce > cs:
            add_blocks(b, text, sec, cs, ce, label="heading", split=False)
        else:  # an empty heading ("#"): a block without sentences
            b.add("heading", sec, line_start, end)
        level[sec + 1] = lvl
        extend_sections(end)

    lines = list(_lines(text))
    k = 0
    while k < len(lines):
        ls, le, _ = lines[k]
        line = text[ls:le]
        if not line.strip():
            flush()
            k += 1
            continue
        m = _FENCE.match(line)
        if m:
            flush()
            fence = m.group(1)
            j = k + 1
            while j < len(lines):
                inner = text[lines[j][0]:lines[j][1]].strip()
                if inner.startswith(fence[0] * len(fence)) and not inner.strip(fence[0]):
                    break
                j += 1
            last = lines[min(j, len(lines) - 1)]
            b.add("code_block", container(), ls + len(line) - len(line.lstrip()), last[1])
            extend_sections(last[1])
            k = j + 1
            continue
        m = _ATX.match(line)
        if m:
            flush()
            cs = ls + m.end()
            ce = ls + _ATX_CLOSE.search(line, m.end()).start()
            ce = max(ce, cs)
            heading(len(m.group(1)), ls + line.index("#"), (cs, ce), le)
            k += 1
            continue
        m = _SETEXT.match(line)
        if m and para:
            s, _ = para
            para.clear()
            heading(1 if m.group(1)[0] == "=" else 2, s, (s, _trim_end(text, s, lines[k - 1][1])), le)
            k += 1
            continue
        if not para and _BREAK.match(line):
            k += 1
            continue
        if para:
            para[1] = le
        else:
            para.extend([ls + len(line) - len(line.lstrip()), le])
        k += 1
    flush()
    s = finish(b, "document", text, name, "markdown")
    lv = np.zeros(len(s), dtype=np.int64)
    for node, l in level.items():
        lv[node] = l
    s.attrs["level"] = lv
    return s


def _trim_end(text: str, s: int, e: int) -> int:
    while e > s and text[e - 1].isspace():
        e -= 1
    return e
