"""XML → preorder tree of elements and text, with character spans (stdlib expat).

Nodes: one per element (label = tag name, span = ``<tag ...>`` through the end of its
closing tag, or the whole ``<tag/>``) and one per run of non-whitespace character data
(label ``#text``, span trimmed of surrounding whitespace; a run stops at any tag, comment
or processing instruction). Attribute ``tag_index`` is the 1-based position of an element
among its same-tag siblings (MarkupLM's XPath subscript; 0 for text). expat reports UTF-8
byte offsets, converted with :class:`~structpos.parsers._offsets.ByteToChar`.
"""

from __future__ import annotations

from xml.parsers import expat

import numpy as np

from ..structure import Structure, StructureError
from ._offsets import ByteToChar
from ._tree_builder import TreeBuilder

__all__ = ["parse_xml"]


def _tag_end(text: str, start: int) -> int:
    """End (exclusive) of the tag that opens at ``text[start] == '<'``: first ``>`` outside quotes."""
    quote = ""
    for j in range(start + 1, len(text)):
        ch = text[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == ">":
            return j + 1
    return len(text)


def parse_xml(text: str | bytes, name: str | None = None) -> Structure:
    """Parse an XML document into a ``kind="tree"`` Structure (see the module docstring)."""
    name = name or "<xml>"
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    data = text.encode("utf-8")
    b = TreeBuilder({"tag_index": (0, "int64")})
    stack: list[int] = []
    tag_counts: list[dict[str, int]] = [{}]
    events: list[tuple[str, int, str]] = []  # kind, byte offset, payload
    parser = expat.ParserCreate()
    parser.buffer_text = False

    def start(tag, _attrs):
        events.append(("start", parser.CurrentByteIndex, tag))

    def end(tag):
        events.append(("end", parser.CurrentByteIndex, tag))

    def chars(data_):
        events.append(("text", parser.CurrentByteIndex, data_))

    def other(*_):
        events.append(("other", parser.CurrentByteIndex, ""))

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.CommentHandler = other
    parser.ProcessingInstructionHandler = other
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise StructureError(expat.errors.messages[e.code], name=name, position=f"line:col {e.lineno}:{e.offset + 1}") from None

    to_char = ByteToChar(text, data)
    offsets = to_char(np.array([ev[1] for ev in events], dtype=np.int64)) if events else np.zeros(0, np.int64)
    text_start = -1  # char offset where the pending text run began
    text_buf: list[str] = []

    def flush(upto: int) -> None:
        nonlocal text_start
        if text_start >= 0 and "".join(text_buf).strip():
            raw = text[text_start:upto]
            s = text_start + (len(raw) - len(raw.lstrip()))
            e = text_start + len(raw.rstrip())
            b.add("#text", stack[-1] if stack else -1, s, e)
        text_start = -1
        text_buf.clear()

    for (kind, _, payload), off in zip(events, offsets.tolist()):
        if kind == "text":
            if text_start < 0:
                text_start = off
            text_buf.append(payload)
            continue
        flush(off)
        if kind == "start":
            counts = tag_counts[-1]
            counts[payload] = counts.get(payload, 0) + 1
            node = b.add(payload, stack[-1] if stack else -1, off, -1, tag_index=counts[payload])
            stack.append(node)
            tag_counts.append({})
        elif kind == "end":
            node = stack.pop()
            tag_counts.pop()
            # a closing tag starts with "</"; an empty element <a/> has none
            closing = text.startswith("</", off)
            b.close(node, _tag_end(text, off if closing else b.start[node]))
    return b.build("tree", text, name, format="xml")
