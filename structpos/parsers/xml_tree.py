"""XML → preorder tree of elements and text, with character spans (stdlib expat).

Nodes: one per element (label = tag name, span = ``<tag ...>`` through the end of its
closing tag, or the whole ``<tag/>`` of an empty-element tag) and one per run of
non-whitespace character data (label ``#text``, span trimmed of surrounding whitespace).
A text run covers the raw source of its characters: entity and character references
(``&amp;``, ``&#65;``) and whole CDATA sections (``<![CDATA[`` … ``]]>`` included); it stops
at any tag, comment or processing instruction (comments and PIs get no node). Attribute
``tag_index`` is the 1-based position of an element among its same-tag siblings (MarkupLM's
XPath subscript; 0 for text).

References to entities declared in the document's DTD are **not expanded** (nothing in
the tree comes from outside the element's own source, and no entity-expansion bomb can grow
the tree): ``&name;`` stays in its text run with its source span, as lxml's
``resolve_entities=False`` keeps it. Entities in attribute values are expanded by expat,
which caps the amplification (expat ≥ 2.4). expat reports UTF-8 byte offsets, converted with
:class:`~structpos.parsers._offsets.ByteToChar`.
"""

from __future__ import annotations

import re
from typing import Any
from xml.parsers import expat

import numpy as np

from ..exceptions import ParseError
from ..limits import Limits, node_budget
from ..node_attrs import TAG_INDEX
from ..structure import Structure
from ._input import read_text
from ._offsets import ByteToChar
from ._tree_builder import TreeBuilder

__all__ = ["parse_xml"]

# a start or end tag: "<" then anything but ">" and quotes, or quoted attribute values
_TAG = re.compile(r"<[^>\"']*(?:(?:\"[^\"]*\"|'[^']*')[^>\"']*)*>")


def _tag_end(text: str, start: int) -> int:
    """End (exclusive) of the tag that opens at ``text[start] == '<'``: first ``>`` outside quotes."""
    m = _TAG.match(text, start)
    return len(text) if m is None else m.end()


def _events(data: bytes, name: str) -> list[tuple[str, int, Any]]:
    """expat's events ``(kind, byte offset, payload)``: start, end, text, cdata, other."""
    events: list[tuple[str, int, Any]] = []
    add = events.append
    parser = expat.ParserCreate("UTF-8")  # the data is UTF-8 whatever the declaration says
    parser.buffer_text = False
    parser.StartElementHandler = lambda tag, _a: add(("start", parser.CurrentByteIndex, tag))
    parser.EndElementHandler = lambda tag: add(("end", parser.CurrentByteIndex, tag))
    parser.CharacterDataHandler = lambda d: add(("text", parser.CurrentByteIndex, d))
    parser.StartCdataSectionHandler = lambda: add(("cdata", parser.CurrentByteIndex, ""))
    parser.CommentHandler = lambda _d: add(("other", parser.CurrentByteIndex, ""))
    parser.ProcessingInstructionHandler = lambda _t, _d: add(("other", parser.CurrentByteIndex, ""))
    # a default handler keeps expat from expanding internal entities: "&e;" arrives here
    parser.DefaultHandler = lambda d: add(("text", parser.CurrentByteIndex, d)) if d[:1] == "&" else None
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        where = f"line:col {e.lineno}:{e.offset + 1}"
        raise ParseError(expat.errors.messages[e.code], name=name, position=where) from None
    return events


class _TreeWalk:
    """Replays expat's events into a :class:`TreeBuilder` (elements, text runs)."""

    def __init__(self, text: str, name: str, max_nodes: int):
        self.text = text
        self.b = TreeBuilder({TAG_INDEX: (0, "int64")}, max_nodes=max_nodes, name=name)
        self.stack: list[int] = []  # open element nodes
        self.empty: list[bool] = []  # whether each open element is an empty-element tag <a/>
        self.tag_counts: list[dict[str, int]] = [{}]
        self.run_start = -1  # char offset where the pending text run began
        self.run_blank = True  # the run's characters so far are all whitespace

    def text_event(self, off: int, data: str) -> None:
        if self.run_start < 0:
            self.run_start = off
        if self.run_blank and not data.isspace():
            self.run_blank = False

    def flush(self, upto: int) -> None:
        """Close the pending text run at ``upto``: a ``#text`` node unless it is all whitespace."""
        s = self.run_start
        if s >= 0 and not self.run_blank:
            raw = self.text[s:upto]
            start = s + (len(raw) - len(raw.lstrip()))
            self.b.add("#text", self.stack[-1] if self.stack else -1, start, s + len(raw.rstrip()))
        self.run_start, self.run_blank = -1, True

    def start(self, off: int, tag: str) -> None:
        counts = self.tag_counts[-1]
        counts[tag] = counts.get(tag, 0) + 1
        tag_end = _tag_end(self.text, off)
        node = self.b.add(tag, self.stack[-1] if self.stack else -1, off, tag_end, tag_index=counts[tag])
        self.stack.append(node)
        self.empty.append(self.text[tag_end - 2 : tag_end] == "/>")
        self.tag_counts.append({})

    def end(self, off: int) -> None:
        node = self.stack.pop()
        self.tag_counts.pop()
        if not self.empty.pop():  # an empty-element tag's span is already its whole tag
            self.b.close(node, _tag_end(self.text, off))

    def replay(self, events, offsets: list[int]) -> None:
        for (kind, _, payload), off in zip(events, offsets):
            if kind == "text":
                self.text_event(off, payload)
            elif kind == "cdata":  # the run includes the "<![CDATA[" marker
                if self.run_start < 0:
                    self.run_start = off
            else:
                self.flush(off)
                if kind == "start":
                    self.start(off, payload)
                elif kind == "end":
                    self.end(off)


def parse_xml(
    text: str | bytes, name: str | None = None, *, limits: Limits | None = None, default_encoding: str | None = None
) -> Structure:
    """Parse an XML document into a ``kind="tree"`` Structure (see the module docstring).

    Parameters
    ----------
    text : str, bytes or os.PathLike
        The document. Bytes and files are decoded by their byte-order mark, else the
        ``encoding`` of their XML declaration, else UTF-8.
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
        ``kind="tree"``; ``attrs["tag_index"]``.

    Raises
    ------
    ParseError
        Not well-formed XML (naming ``line:col``), undecodable bytes (naming the byte).
    LimitError
        ``max_input_bytes`` or ``max_nodes`` exceeded.

    Examples
    --------
    >>> s = parse_xml("<a><b/>hi &amp; bye<![CDATA[<x>]]></a>")
    >>> [(str(l), s.node_text(i)) for i, l in enumerate(s.labels)]
    [('a', '<a><b/>hi &amp; bye<![CDATA[<x>]]></a>'), ('b', '<b/>'), ('#text', 'hi &amp; bye<![CDATA[<x>]]>')]
    """
    text, name = read_text(
        text, name=name, default="<xml>", limits=limits, kind="xml", default_encoding=default_encoding
    )
    data = text.encode("utf-8")
    events = _events(data, name)
    offsets = ByteToChar(text, data)(np.array([ev[1] for ev in events], dtype=np.int64)).tolist() if events else []
    walk = _TreeWalk(text, name, node_budget(limits))
    walk.replay(events, offsets)
    return walk.b.build("tree", text, name, format="xml")
