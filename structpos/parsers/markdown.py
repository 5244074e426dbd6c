"""Markdown → document tree with nested sections.

A small line scanner (no dependency) recognizes the block structure that matters for
positions:

* ATX headings (``#`` … ``######``, up to 3 spaces of indent, optional closing ``#``s; an
  empty one has an empty span) and setext headings (a paragraph underlined with ``===`` →
  level 1 or ``---`` → level 2; not a paragraph holding a list item or block quote line, as
  in CommonMark: a lone ``-`` after a list item is an empty item);
* fenced code blocks (```` ``` ```` / ``~~~``, closed by a fence of the same character at
  least as long, or the end of the text) → one ``code_block`` leaf;
* thematic breaks (``***``, ``---``, ``___`` after a blank line, a list item or a block quote
  line) are dropped;
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

from ..limits import Limits, node_budget
from ..node_attrs import LEVEL
from ..structure import Structure
from ._input import read_text
from ._tree_builder import TreeBuilder
from .document import _add_blocks, _finish, content_start

__all__ = ["parse_markdown"]

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_CONTAINER = re.compile(r" {0,3}(?:>|([-+*]|\d{1,9}[.)])([ \t]+\S|[ \t]*$))")  # a block quote or list item line


def _lines(text: str):
    """``(start, end_without_newline, next_line_start)`` for each line."""
    pos, n = 0, len(text)
    while pos < n:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        line_end = end - 1 if end > pos and text[end - 1] == "\r" else end  # CRLF
        yield pos, line_end, (n if nl < 0 else nl + 1)
        pos = end + 1


class _MarkdownTree:
    """Line-by-line block scanner that grows the document tree (see the module docstring).

    Each ``handle_*`` method looks at line ``k`` and returns the index of the next line to
    read, or ``None`` when the line is not its kind of block.
    """

    def __init__(self, text: str, name: str, max_nodes: int):
        self.text = text
        self.lines = list(_lines(text))
        if self.lines and content_start(text):  # a leading byte-order mark is not part of the first line
            self.lines[0] = (content_start(text), *self.lines[0][1:])
        self.b = TreeBuilder(max_nodes=max_nodes, name=name)
        self.root = self.b.add("document", -1, 0, len(text))
        self.level: dict[int, int] = {}  # heading level of section and heading nodes
        self.sections: list[int] = []  # open section nodes, outermost first
        self.para: list[int] = []  # [start, end] of the paragraph being collected
        self.para_has_container = False  # a line of it starts a list item or block quote

    def line(self, k: int) -> str:
        return self.text[self.lines[k][0] : self.lines[k][1]]

    def container(self) -> int:
        return self.sections[-1] if self.sections else self.root

    def extend_sections(self, end: int) -> None:
        for s in self.sections:
            self.b.close(s, max(self.b.end[s], end))

    def flush(self) -> None:
        """Close the paragraph being collected (its sentences and tokens)."""
        if self.para:
            s, e = self.para[0], _trim_end(self.text, self.para[0], self.para[1])
            _add_blocks(self.b, self.text, self.container(), s, e)
            self.extend_sections(e)
            self.para.clear()
            self.para_has_container = False

    def heading(self, lvl: int, line_start: int, content: tuple[int, int], end: int) -> None:
        """Open a section at ``lvl`` (closing deeper or equal ones) holding its heading block."""
        while self.sections and self.level[self.sections[-1]] >= lvl:
            self.sections.pop()
        sec = self.b.add("section", self.container(), line_start, end)
        self.level[sec] = lvl
        self.sections.append(sec)
        cs, ce = content
        if ce > cs:
            _add_blocks(self.b, self.text, sec, cs, ce, label="heading", split=False)
        else:  # an empty heading ("#", "# #"): an empty block where its text would start, inside its section
            self.b.add("heading", sec, min(cs, end), min(cs, end))
        self.level[sec + 1] = lvl
        self.extend_sections(end)

    def handle_blank(self, k: int) -> int | None:
        if self.line(k).strip():
            return None
        self.flush()
        return k + 1

    def handle_fence(self, k: int) -> int | None:
        """A fenced code block: one leaf up to the closing fence (or the end of the text)."""
        line = self.line(k)
        m = _FENCE.match(line)
        if not m:
            return None
        self.flush()
        fence = m.group(1)
        j = k + 1
        while j < len(self.lines):
            inner = self.line(j).strip()
            if inner.startswith(fence[0] * len(fence)) and not inner.strip(fence[0]):
                break
            j += 1
        last = self.lines[min(j, len(self.lines) - 1)]
        ls = self.lines[k][0]
        self.b.add("code_block", self.container(), ls + len(line) - len(line.lstrip()), last[1])
        self.extend_sections(last[1])
        return j + 1

    def handle_atx(self, k: int) -> int | None:
        line, (ls, le, _) = self.line(k), self.lines[k]
        m = _ATX.match(line)
        if not m:
            return None
        self.flush()
        cs = ls + m.end()
        ce = max(ls + _atx_content_end(line, m.end()), cs)
        end = _trim_end(self.text, ls, le)  # the section's end: its text's, when that ends in a Unicode space
        self.heading(len(m.group(1)), ls + line.index("#"), (cs, ce), max(end, ce) if ce > cs else end)
        return k + 1

    def handle_setext(self, k: int) -> int | None:
        """An underline (``===``/``---``) turns the paragraph above into a heading, unless the paragraph
        holds a list item or block quote line: then, as in CommonMark, the underline is not one (a lone
        ``-`` is an empty list item)."""
        m = _SETEXT.match(self.line(k))
        if not (m and self.para) or self.para_has_container:
            return None
        s = self.para[0]
        self.para.clear()
        content = (s, _trim_end(self.text, s, self.lines[k - 1][1]))
        self.heading(1 if m.group(1)[0] == "=" else 2, s, content, _trim_end(self.text, s, self.lines[k][1]))
        return k + 1

    def handle_break(self, k: int) -> int | None:
        """A thematic break, dropped: after a blank line, or after a list item or block quote line (CommonMark)."""
        if (self.para and not self.para_has_container) or not _BREAK.match(self.line(k)):
            return None
        self.flush()
        return k + 1

    def handle_text(self, k: int) -> int:
        line, (ls, le, _) = self.line(k), self.lines[k]
        self.para_has_container = self.para_has_container or _starts_container(line, first=not self.para)
        if self.para:
            self.para[1] = le
        else:
            self.para.extend([ls + len(line) - len(line.lstrip()), le])
        return k + 1

    def scan(self) -> None:
        handlers = (self.handle_blank, self.handle_fence, self.handle_atx, self.handle_setext, self.handle_break)
        k = 0
        while k < len(self.lines):
            for handle in handlers:
                nxt = handle(k)
                if nxt is not None:
                    break
            else:
                nxt = self.handle_text(k)
            k = nxt
        self.flush()


def parse_markdown(
    text: str, name: str | None = None, *, limits: Limits | None = None, default_encoding: str | None = None
) -> Structure:
    """Parse Markdown into a ``kind="document"`` tree (see the module docstring).

    Parameters
    ----------
    text : str, bytes or os.PathLike
        The Markdown (bytes and files: UTF-8 unless a BOM says otherwise).
    name : str, optional
        The input's name in error messages.
    limits : Limits, optional
        ``max_input_bytes`` and ``max_nodes`` apply.
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    Structure
        ``kind="document"`` with the hierarchy attributes and ``level``.

    Raises
    ------
    ParseError
        Bytes that do not decode (naming the byte offset), a lone surrogate in ``str`` input.
    LimitError
        ``max_input_bytes`` or ``max_nodes`` exceeded.

    Examples
    --------
    >>> s = parse_markdown("# A\\n\\nHi there.\\n\\n## B\\n")
    >>> [str(l) for l in s.labels if l in ("section", "heading", "paragraph")]
    ['section', 'heading', 'paragraph', 'section', 'heading']
    >>> s.attrs["level"][s.labels == "section"].tolist()
    [1, 2]

    Section ``B`` (level 2) nests inside section ``A``; a fenced block is one leaf:

    >>> sections = (s.labels == "section").nonzero()[0].tolist()
    >>> sections, s.parent[sections].tolist()
    ([1, 10], [0, 1])
    >>> [str(l) for l in parse_markdown("# A\\n```\\nx = 1\\n```\\n").labels]
    ['document', 'section', 'heading', 'sentence', 'word', 'code_block']
    """
    text, name = read_text(text, name=name, default="<markdown>", limits=limits, default_encoding=default_encoding)
    md = _MarkdownTree(text, name, node_budget(limits))
    md.scan()
    s = _finish(md.b, "document", text, name, "markdown")
    lv = np.zeros(len(s), dtype=np.int64)
    for node, lvl in md.level.items():
        lv[node] = lvl
    s.attrs[LEVEL] = lv
    return s


def _starts_container(line: str, first: bool) -> bool:
    """Whether ``line`` starts a block quote or a list item in CommonMark's terms: as a paragraph's
    ``first`` line any marker does; inside one, a list item interrupts it only when not empty, and
    an ordered one only when it starts at 1."""
    m = _CONTAINER.match(line)
    if m is None:
        return False
    marker, rest = m.group(1), m.group(2)
    if first or marker is None:
        return True
    return bool(rest.strip()) and (marker in "-+*" or marker[:-1] == "1")


def _atx_content_end(line: str, start: int) -> int:
    """End of an ATX heading's text: before trailing blanks and an optional closing ``#`` run
    preceded by a blank (string operations: a regex search here is quadratic on long blank runs)."""
    end = len(line.rstrip(" \t"))
    body = line[:end].rstrip("#")
    if len(body) < end and len(body) >= start and body[-1] in " \t":  # " ###" closes the heading ("# #": empty)
        end = len(body.rstrip(" \t"))
    return max(end, start)


def _trim_end(text: str, s: int, e: int) -> int:
    while e > s and text[e - 1].isspace():
        e -= 1
    return e
