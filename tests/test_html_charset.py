"""HTML tables read in the encoding their ``<meta>`` declares (WHATWG prescan), as lxml and browsers read them."""

from __future__ import annotations

import pytest

import structpos
from structpos.exceptions import ParseError
from structpos.parsers._input import decode_input, html_encoding
from structpos.parsers.table import parse_table

lxml_html = pytest.importorskip("lxml.html")

CELLS = {
    "iso-8859-1": ["café", "naïve", "Ærø"],
    "windows-1251": ["привет", "мир", "ёж"],
    "shift_jis": ["日本語", "カタカナ", "ｶﾅ"],
    "euc-kr": ["한국어", "표", "셀"],
    "gb2312": ["中文", "表格", "单元"],
    "koi8-r": ["строка", "столбец", "ячейка"],
    "iso-8859-7": ["αβγ", "δέλτα", "Ωμέγα"],
}


def page(charset: str, meta: str = "charset") -> str:
    cells = "".join(f"<td>{c}</td>" for c in CELLS[charset])
    head = (
        f'<meta charset="{charset}">'
        if meta == "charset"
        else f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">'
    )
    return (
        f"<!DOCTYPE html><html><head><title>t</title>{head}</head><body><table><tr>{cells}</tr></table></body></html>"
    )


def lxml_cells(data: bytes) -> list[str]:
    """The reference: libxml2's HTML parser, which applies the page's own <meta> charset to the bytes."""
    return [td.text_content() for td in lxml_html.document_fromstring(data).iter("td")]


@pytest.mark.parametrize("meta", ["charset", "http-equiv"])
@pytest.mark.parametrize("charset", sorted(CELLS))
def test_declared_charset_gives_the_cells_lxml_reads(charset, meta):
    data = page(charset, meta).encode(charset)
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")  # not UTF-8: the declaration is what makes these bytes readable
    s = parse_table(data)
    assert s.table.grid == [lxml_cells(data)] == [CELLS[charset]]
    assert s.source == page(charset, meta)  # spans index the decoded page


def test_a_path_bytes_the_api_and_the_cli_reader_read_the_same_text(tmp_path):
    from structpos.pipeline.records import read_records

    data = page("windows-1251").encode("windows-1251")
    (tmp_path / "legacy.html").write_bytes(data)
    (rec,) = read_records(tmp_path, kind="table")
    assert rec.read_error is None
    from_path = structpos.parse(tmp_path / "legacy.html", "table")
    assert rec.payload == from_path.source == parse_table(data, name="x.html").source == page("windows-1251")


def test_iso_8859_1_means_windows_1252_as_browsers_read_it():
    """WHATWG maps latin-1 labels to windows-1252: 0x93/0x94 are curly quotes, not C1 controls."""
    data = b'<meta charset="iso-8859-1"><table><tr><td>\x93q\x94 \x80 \xe9</td></tr></table>'
    assert parse_table(data).table.grid == [["\u201cq\u201d \u20ac \xe9"]]
    cell = data[data.index(b"<td>") + 4 : data.index(b"</td>")]
    assert parse_table(data).table.grid == [[cell.decode("cp1252")]]  # Python's windows-1252 codec agrees


@pytest.mark.parametrize(
    "head, expected",
    [
        (b'<meta charset="utf-8">', None),  # UTF-8 is the default
        (b"<meta charset=KOI8-R>", ("koi8-r", "byte 0")),  # unquoted, any case
        (b"<META CHARSET = ' windows-1251 '>", ("cp1251", "byte 0")),  # spaces around the value
        (b'<meta content="text/html; charset=euc-kr" http-equiv="content-type">', ("cp949", "byte 0")),
        (b'<meta content="text/html; charset=euc-kr">', None),  # content without http-equiv: ignored
        (b'<meta http-equiv="refresh" content="5; charset=koi8-r">', None),  # not a content-type
        (b'<!-- <meta charset="koi8-r"> --><meta charset="gb2312">', ("gbk", "byte 32")),  # commented out
        (b'<meta charset="no-such-codec"><meta charset="big5">', ("big5hkscs", "byte 30")),  # unknown label skipped
        (b'<meta charset="rot13">', None),  # Python codecs that are no web encoding: skipped
        (b'<meta charset="unicode_escape">', None),
        (b'<meta charset="cp037">', None),
        (b'<meta charset="utf-32">', None),
        (b'<meta charset="utf-8\x00">', None),  # a NUL in the label (codecs.lookup raised ValueError)
        (b'<meta charset="latin2">', ("iso8859-2", "byte 0")),  # a WHATWG label Python resolves
        (b'<meta charset="x-mac-cyrillic">', ("mac-cyrillic", "byte 0")),
        (b'<meta charset="utf-16le">', None),  # a <meta> found by an ASCII prescan means UTF-8
        (b"<metadata charset=koi8-r>", None),  # not a <meta> tag
        (b" " * 5000 + b'<meta charset="koi8-r">', ("koi8-r", "byte 5000")),  # past the prescan's 1,024 bytes
        (b"<!-- unterminated <meta charset=koi8-r>", None),
        (b"<script>s = '<meta charset=koi8-r>'</script><meta charset=gbk>", ("gbk", "byte 44")),  # raw text
        (b"<TITLE>a <meta charset=koi8-r> b</TITLE >", None),
        (b"<style>p{}</style><p>x</p><meta charset=koi8-r>", ("koi8-r", "byte 26")),  # in the body
    ],
)
def test_the_prescan(head, expected):
    assert html_encoding(head + b"<table><tr><td>x</td></tr></table>") == expected


@pytest.mark.parametrize("where", ["after a long head", "in the body"])
def test_a_late_meta_counts_as_lxml_counts_it(where):
    cells = "<table><tr><td>строка</td></tr></table>"
    html = (
        f"<html><head><script>{'x = 1;' * 500}</script><meta charset='koi8-r'></head><body>{cells}</body></html>"
        if where == "after a long head"
        else f"<html><head></head><body><p>x</p><meta charset='koi8-r'>{cells}</body></html>"
    )
    data = html.encode("koi8-r")
    assert parse_table(data).table.grid == [lxml_cells(data)] == [["строка"]]


def test_a_byte_order_mark_wins_over_the_meta():
    text = '<meta charset="koi8-r"><table><tr><td>é</td></tr></table>'
    assert decode_input(b"\xef\xbb\xbf" + text.encode(), "t.html", "html") == text
    assert decode_input(text.encode("utf-16"), "t.html", "html") == text


def test_csv_is_not_prescanned():
    data = '<meta charset="koi8-r">,é\n1,2\n'.encode()
    assert decode_input(data, "t.csv", "table") == data.decode()  # the suffix says CSV: UTF-8
    assert parse_table(data, name="t.csv").table.grid[0][1] == "é"
    assert parse_table(data, format="csv").table.grid[0][1] == "é"


def test_bytes_the_declared_codec_cannot_read_name_the_byte():
    data = b'<meta charset="shift_jis"><table><tr><td>\x81\xff</td></tr></table>'
    at = data.index(b"\x81")  # a lead byte whose trail byte is not one
    with pytest.raises(ParseError, match=rf"t\.html at byte {at}: not valid cp932 text"):
        parse_table(data, name="t.html")


# the Encoding Standard's names of its encodings (https://encoding.spec.whatwg.org/#names-and-labels)
WHATWG_NAMES = (
    "UTF-8 IBM866 ISO-8859-2 ISO-8859-3 ISO-8859-4 ISO-8859-5 ISO-8859-6 ISO-8859-7 ISO-8859-8 ISO-8859-8-I "
    "ISO-8859-10 ISO-8859-13 ISO-8859-14 ISO-8859-15 ISO-8859-16 KOI8-R KOI8-U macintosh windows-874 "
    "windows-1250 windows-1251 windows-1252 windows-1253 windows-1254 windows-1255 windows-1256 windows-1257 "
    "windows-1258 x-mac-cyrillic GBK gb18030 Big5 EUC-JP ISO-2022-JP Shift_JIS EUC-KR UTF-16BE UTF-16LE"
).split()


@pytest.mark.parametrize("label", WHATWG_NAMES)
def test_every_web_encoding_is_read_by_its_name(label):
    found = html_encoding(f"<meta charset={label}>".encode())
    if label.startswith(("UTF-8", "UTF-16")):
        assert found is None  # UTF-8, the default
    else:
        codec = found[0]
        sample = "<td>x</td>".encode(codec)
        assert sample == b"<td>x</td>"  # ASCII-compatible, as every web encoding but UTF-16 is
