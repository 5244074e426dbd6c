"""The compiled HTML table scanner (native/html.c) against the HTMLParser pass it stands in for.

On every input the compiled scanner must either give exactly the tables of the Python pass or
decline (``None``: the caller then runs the Python pass). Generated pages mix the markup it reads
with markup it must decline (odd whitespace, unterminated constructs, raw-text elements, bad
spans); the real pages must be read without declining, so the fast path is what they get.
"""

import html
import random
from pathlib import Path

import pytest
from conftest import assert_same_structure

from structpos import native
from structpos.exceptions import StructposError
from structpos.parsers.table_html import _scan_tables, parse_html_tables

HTML = native.native_module("html")
needs_html = pytest.mark.skipif(HTML is None, reason="structpos._native_html is not built")
WTQ = Path(__file__).resolve().parents[2] / "shared" / "data" / "wtq" / "200-csv"

TAGS = ["table", "tr", "td", "th", "thead", "tbody", "tfoot", "TD", "Tr", "span", "div", "b", "br", "p", "svg", "math"]
ATTRS = [  # read by the compiled scanner
    ' rowspan="2"', " colspan=3", " rowspan=' 2 '", " colspan=0", " rowspan=0", ' colspan="99999"', ' rowspan="70000"', " rowspan",
    ' style="display:none"', " style='DISPLAY: NONE'", ' style="color:red"', ' class="a b"', " data-x=1",
    ' title="a>b"', "\n class=x", "\tid=y", " a = 'q'",
]  # fmt: skip
ODD_ATTRS = [  # declined, or reported as errors by the Python pass
    ' rowspan="x"', ' colspan=""', ' colspan="&#50;"', " rowspan=2/", ' style="display:nonè"',
    ' style="display&#58;none"', "\vid=z", "\xa0id=z", ' a="x"b=1', " @x=1", " a==b", " a=`b`",
]  # fmt: skip
PIECES = [
    "x", "New\nYork", "  a  b ", "&amp;", "&lt", "&#160;", "&notit;", "&", "< b", "<3", "é", "\U0001f600",
    "\r\n", "\xa0", "<!-- c -->", "<!-- <table> -->", "<!doctype html>", "<![CDATA[x]]>", "<?php x ?>", "</td >",
    "<script>a<b</script>", "<SCRIPT>1</Script>", "<style>td{}</style>", "<style><!-- a --></style>",
    "<title>t</title>", "<title>a&amp;b</title>", "<textarea>q</textarea>", "<noscript><td>n</noscript>",
    "<b>", "</b>", "<br/>", "<td/>", "<table/>", "</svg>", "</math>",
]  # fmt: skip
ODD_PIECES = [
    "<", "<!---->", "<!-->", "<!-- a -- b -->", "<!--x--!>", "<!bogus>", "</>", "</ td>", "</td\v>", "</td x>",
    "<script>'<!--<script>'</script>", "<script>x</script >", "<script/>", "<title>a<b>c</title>", "<xmp>&amp;</xmp>",
    "<plaintext>", "<td", "<table", "<!--",
]  # fmt: skip


def _random_page(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randrange(0, 40)):
        odd = rng.random() < 0.03
        r = rng.random()
        if r < 0.45:
            tag = rng.choice(TAGS)
            attrs = "".join(rng.choice(ODD_ATTRS if odd else ATTRS) for _ in range(rng.choice([0, 0, 1, 2])))
            end = rng.choice([">", ">", ">", " >", "/>", " />"])
            parts.append(f"<{tag}{attrs}{end}")
        elif r < 0.6:
            parts.append(f"</{rng.choice(TAGS)}>")
        else:
            parts.append(rng.choice(ODD_PIECES if odd else PIECES))
    return "".join(parts)


def _compare(text: str, displayed_only: bool) -> bool:
    """Whether the compiled scanner read ``text``; when it did, its tables must equal the Python pass's."""
    if HTML.scan_tables(text, displayed_only, html.unescape) is None:
        return False
    fast = _scan_tables(text, "<t>", displayed_only)
    with native.pure_python():
        slow = _scan_tables(text, "<t>", displayed_only)
    assert fast == slow, text
    return True


@needs_html
@pytest.mark.parametrize("displayed_only", [True, False])
def test_generated_pages_give_the_python_tables_or_are_declined(displayed_only):
    rng = random.Random(5 + displayed_only)
    pages = [_random_page(rng) for _ in range(4000)]
    read = sum(_compare(p, displayed_only) for p in pages)
    assert 1000 < read < len(pages) - 500  # both paths were taken many times


@needs_html
def test_what_the_python_pass_rejects_is_declined_and_reported_alike():
    rng = random.Random(9)
    reported = 0
    for _ in range(3000):
        page = "<table><tr>" + _random_page(rng)
        try:
            fast = parse_html_tables(page)
        except StructposError as e:
            with pytest.raises(type(e)) as info, native.pure_python():
                parse_html_tables(page)
            assert str(info.value) == str(e)
            reported += 1
            continue
        with native.pure_python():
            slow = parse_html_tables(page)
        assert len(fast) == len(slow)
        for a, b in zip(fast, slow):
            assert_same_structure(a, b, "node_texts", "table")
    assert reported > 50  # bad rowspan/colspan values were among the inputs


@needs_html
@pytest.mark.skipif(not WTQ.is_dir(), reason="the WTQ sample is not present")
@pytest.mark.parametrize("displayed_only", [True, False])
def test_real_pages_are_read_without_declining(displayed_only):
    pages = [p.read_text(encoding="utf-8") for p in sorted(WTQ.glob("*.html"))]
    assert pages and all(_compare(p, displayed_only) for p in pages)


@needs_html
@pytest.mark.parametrize(
    "page",
    [
        "<table><tr><td><script>'<!--<script>'</script>x</script></table>",  # the standard's double escape
        "<table><tr><td><svg><style>a</style></svg></table>",  # markup inside <svg> for newer versions
        "<table><tr><td><math><script>1</script></math></table>",
        "<table><tr><td><svg></math><style>a</style></svg></table>",  # </math> does not close <svg>
        "<table><tr><td><xmp>a &amp; b</xmp></table>",  # raw text: references left alone by newer versions
        "<table><tr><td><title>a <b>c</b></title></table>",
        "<table><tr><td><plaintext>x</table>",
        "<table><tr><td><script/>x</table>",
        '<table><tr><td rowspan="&#50;">x</table>',  # attribute references: decoded differently by versions
        '<table><tr><td style="display&#58;none">x</table>',
    ],
)
def test_markup_that_html_parser_versions_read_differently_is_declined(page):
    assert HTML.scan_tables(page, True, html.unescape) is None


@needs_html
@pytest.mark.parametrize(
    "page",
    [
        "<table><tr><td><svg><path/></svg><style>a</style>x</table>",  # <svg> closed: raw text again
        "<table><tr><td><title>a &amp; b</title><xmp>a b</xmp></table>",
    ],
)
def test_the_same_markup_outside_those_cases_is_read(page):
    assert _compare(page, True)


@needs_html
@pytest.mark.parametrize(
    "page",
    [
        "<table><tr><td>a<td>b</table>",
        "<html><head><title>T &amp; U</title><script>if (a<b) {}</script><style>td{}</style></head>"
        "<body><noscript>x</noscript><svg><path/></svg><table><tr><td>1</td></tr></table></body></html>",
        '<table><tr><td style="display:none">k</td><td>v<br>w</td></tr></table>',
    ],
)
def test_common_markup_is_read(page):
    assert _compare(page, True)
