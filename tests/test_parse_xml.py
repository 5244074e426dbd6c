"""XML spans against lxml, an independent parser: every element's span re-parses to lxml's element,
every text run decodes to lxml's text/tail segment (empty-element tags, CDATA, comments, entities, PIs)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structpos.exceptions import LimitError, ParseError
from structpos.limits import Limits
from structpos.parsers import parse
from structpos.parsers.xml_tree import parse_xml

etree = pytest.importorskip("lxml.etree")

TAGS = st.sampled_from(["a", "b", "c", "x-y", "n1", "é"])
WORDS = st.sampled_from(["hi", "x < y", "a & b", "ü", "漢字", "  ", "\n", "q'\"", "]]", "\U0001f600", "tab\there"])


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@st.composite
def text_piece(draw) -> str:
    w = draw(WORDS)
    kind = draw(st.sampled_from(["plain", "plain", "cdata", "charref", "entity", "comment", "pi"]))
    if kind == "cdata":
        return f"<![CDATA[{w.replace(']]>', '')}]]>"
    if kind == "charref":
        return f"{_escape(w)}&#{ord(draw(st.sampled_from('Aé€')))};&#x41;"
    if kind == "entity":
        return f"{_escape(w)}&amp;&lt;&gt;&quot;&apos;"
    if kind == "comment":
        return f"<!--{w.replace('--', '')}-->"
    if kind == "pi":
        return f"<?pi {w.replace('?>', '')}?>"
    return _escape(w)


@st.composite
def element(draw, depth: int = 0) -> str:
    tag = draw(TAGS)
    attrs = draw(st.sampled_from(["", ' k="1>2"', ' k=\'a"b\' j="&amp;"', "  z = 'w' "]))
    if draw(st.booleans()) and depth > 0:
        return f"<{tag}{attrs}{draw(st.sampled_from(['/', ' /', '  /']))}>"
    n = draw(st.integers(0, 0 if depth >= 4 else 4))
    parts = [draw(text_piece()) if draw(st.booleans()) else draw(element(depth + 1)) for _ in range(n)]
    return f"<{tag}{attrs}>{''.join(parts)}</{tag} >"


@st.composite
def document(draw) -> str:
    prolog = draw(st.sampled_from(["", '<?xml version="1.0" encoding="UTF-8"?>\n', "<!-- top -->\n", "<?pi x?>"]))
    return prolog + draw(element()) + draw(st.sampled_from(["", "\n", "<!-- end -->"]))


def _lxml_segments(elem) -> list[str]:
    """lxml's text segments of ``elem`` (text, then each child's tail), whitespace-only ones dropped."""
    segs = [elem.text] + [child.tail for child in elem]
    return [s for s in segs if s is not None and s.strip()]


def _decode_text(span: str) -> str:
    return etree.fromstring(f"<r>{span}</r>".encode()).text or ""


def check_against_lxml(text: str) -> None:
    s = parse_xml(text).validate()
    root = etree.fromstring(
        text.encode("utf-8"), etree.XMLParser(remove_comments=False, remove_pis=False, resolve_entities=False)
    )
    ref = [e for e in root.iter() if isinstance(e.tag, str)]  # elements in preorder (no comments/PIs)
    elems = np.flatnonzero(s.labels != "#text")
    assert [s.labels[i] for i in elems] == [e.tag for e in ref]
    for i, e in zip(elems.tolist(), ref):
        span = s.node_text(i)
        again = etree.fromstring(span.encode("utf-8"))
        assert etree.tostring(again) == etree.tostring(e, with_tail=False), (span, i)
        mine = [_decode_text(s.node_text(int(c))).strip() for c in s.children(i) if s.labels[c] == "#text"]
        assert mine == [seg.strip() for seg in _lxml_segments(e)], (text, span)
        kids = [int(c) for c in s.children(i) if s.labels[c] != "#text"]
        assert [s.labels[c] for c in kids] == [c.tag for c in e if isinstance(c.tag, str)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document())
def test_spans_match_lxml(text):
    check_against_lxml(text)


@pytest.mark.parametrize(
    "text",
    [
        "<a><b/></a>",
        "<a><b/><c/></a>",
        "<a>\n  <b   />\n</a>",
        "<a><![CDATA[y<z]]></a>",
        "<a>x<![CDATA[ y ]]>w<!-- c -->v<?pi q?>u</a>",
        "<a>t&amp;u&#65;<b x='1>2'/>&lt;</a>",
    ],
)
def test_known_cases_match_lxml(text):
    check_against_lxml(text)


def test_empty_element_span_is_its_own_tag():
    s = parse_xml("<a><b/></a>")
    assert s.node_text(1) == "<b/>"


def test_internal_entities_stay_unexpanded_references():
    text = '<!DOCTYPE a [<!ENTITY e "<b>q</b>">]><a>1&e;2</a>'
    s = parse_xml(text)
    assert list(s.labels) == ["a", "#text"] and s.node_text(1) == "1&e;2"
    root = etree.fromstring(text.encode(), etree.XMLParser(resolve_entities=False))
    assert [e.tag for e in root.iter() if isinstance(e.tag, str)] == ["a"]  # lxml without expansion agrees


def test_entity_expansion_bomb_is_refused_or_bounded():
    ents = '<!ENTITY a0 "xxxxxxxxxx">' + "".join(f'<!ENTITY a{k} "{f"&a{k - 1};" * 10}">' for k in range(1, 10))
    bomb = f"<!DOCTYPE r [{ents}]><r>&a9;</r>"
    s = parse_xml(bomb)  # not expanded in text: one short text node
    assert s.num_nodes == 2 and len(s.source) == len(bomb)
    with pytest.raises(ParseError):  # in an attribute expat expands, and caps the amplification
        parse_xml(f'<!DOCTYPE r [{ents}]><r k="&a9;"/>')


def test_encoding_from_declaration_bom_and_path(tmp_path):
    doc = '<?xml version="1.0" encoding="ISO-8859-1"?><a>é<b/></a>'
    data = doc.encode("latin-1")
    p = tmp_path / "latin.xml"
    p.write_bytes(data)
    for s in (parse_xml(data), parse(p, "xml")):
        assert s.source == doc and s.node_text(2) == "<b/>"
    assert parse(p, "xml").name == str(p)
    assert parse_xml("<a/>".encode("utf-16")).source == "<a/>"  # encode("utf-16") writes a BOM


def test_errors_name_input_and_position():
    text = "<a>\n<b></a>"
    with pytest.raises(ParseError, match=r"r\.xml at line:col 2:\d+: mismatched tag") as e:
        parse_xml(text, name="r.xml")
    col = int(e.value.position.rsplit(":", 1)[1])
    assert text.split("\n")[1].index("</a>") < col <= len(text.split("\n")[1])  # inside the closing tag
    assert isinstance(e.value, ValueError)
    with pytest.raises(ParseError, match="byte 3"):
        parse_xml(b"<a>\xff</a>")
    with pytest.raises(LimitError, match="max_nodes"):
        parse_xml("<a>" + "<b/>" * 20 + "</a>", limits=Limits(max_nodes=10))
