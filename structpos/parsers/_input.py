"""Turning a parser's input (text, bytes or a path) into text, with the input-size limit.

Every text parser reads its input through :func:`read_text`, so they all accept the same
three forms and fail the same way:

* ``str`` — used as is; a lone surrogate character (``"\\ud800"``, which no UTF-8 file can
  hold and which nothing downstream can encode) raises :class:`~structpos.exceptions.ParseError`
  naming its character offset;
* ``bytes`` — decoded: a byte-order mark picks UTF-8/16/32, else the encoding the format
  declares (a PEP 263 line, an XML declaration, an HTML ``<meta charset>``:
  :func:`declared_encoding`), else the caller's ``default_encoding``, else UTF-8; bytes that
  do not decode raise :class:`~structpos.exceptions.ParseError` naming the byte offset,
  and so do bytes whose NULs fall every other (or every fourth) byte, which is UTF-16 (or
  UTF-32) text without its byte-order mark; a declared codec that is not a text encoding
  (``rot13``, ``hex``, ``zlib_codec``) raises a ParseError naming the line that declares it;
* ``os.PathLike`` — a regular file, read (at most ``max_input_bytes + 1`` bytes, so a device
  or a growing file cannot be read without bound) and decoded as bytes; the path becomes the
  input's name. Anything else (a directory, a FIFO, a missing file) raises
  :class:`~structpos.exceptions.InputError`.

Any other object (``None``, a number) raises :class:`~structpos.exceptions.InputError` naming
the accepted types. :func:`decode_input` is the one decoding of a file's bytes for a given
kind: the parsers use it, and so does the command line (``structpos encode`` reads files
through it), so both read the same bytes as the same text.

Inputs larger than :attr:`~structpos.limits.Limits.max_input_bytes` (UTF-8 bytes) raise
:class:`~structpos.exceptions.LimitError` before any parsing.

Examples
--------
>>> from structpos.parsers._input import read_text
>>> read_text(b"\\xef\\xbb\\xbfhi", name=None, default="<in>")
('hi', '<in>')
>>> read_text(b"a\\xff", name="f.txt", default="<in>")
Traceback (most recent call last):
...
structpos.exceptions.ParseError: f.txt at byte 1: not valid utf-8 text (invalid start byte)
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
import tokenize
from typing import Any

from ..exceptions import InputError, ParseError, SpecError
from ..limits import Limits, check_limit, resolve_limits
from ..native import native_module

__all__ = [
    "read_text",
    "read_bytes",
    "decode_bytes",
    "decode_input",
    "declared_encoding",
    "decoding_kind",
    "check_encoding",
    "check_text",
    "clean_label",
    "is_pathlike",
    "wrong_type",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
_XML_DECL_ENCODING = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z][A-Za-z0-9._-]*)[\"']")
_PEP263 = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")  # PEP 263's own pattern
_NUL_SAMPLE = 64  # bytes looked at for the NUL pattern of BOM-less UTF-16/32
# in document order: a comment or a raw-text element (skipped whole: no tag inside is one), or a <meta> tag
_HTML_META_SCAN = re.compile(
    rb"<!--.*?(?:-->|\Z)|<(script|style|title|textarea|xmp)\b.*?(?:</\1[\t\n\f\r ]*>|\Z)|<meta[\t\n\f\r /]([^>]*)",
    re.IGNORECASE | re.DOTALL,
)
_HTML_ATTR = re.compile(
    rb"""([^\t\n\f\r /=>][^\t\n\f\r /=>]*)(?:[\t\n\f\r ]*=[\t\n\f\r ]*("[^"]*"|'[^']*'|[^\t\n\f\r >]*))?"""
)
_CONTENT_CHARSET = re.compile(
    rb"""charset[\t\n\f\r ]*=[\t\n\f\r ]*(?:"([^"]*)"|'([^']*)'|([^\t\n\f\r ;"']+))""", re.IGNORECASE
)
TABLE_SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".html": "html", ".htm": "html"}
HTML_TABLE_HINT = r"<\s*table\b"  # text of no known suffix holding this (any case) is an HTML table
_HTML_TABLE_HINT = re.compile(HTML_TABLE_HINT.encode(), re.IGNORECASE)


def _labels(codec: str, *labels: str) -> dict[str, str]:
    return dict.fromkeys(labels, codec)


# Labels whose WHATWG Encoding Standard decoder (what browsers apply) is a superset of the Python codec of
# the same name: pages declaring ``iso-8859-1`` hold windows-1252 quotes, ``gb2312`` pages GBK characters, ...
# A <meta> declaring UTF-16 means UTF-8 (an ASCII-compatible prescan found it).
_WEB_LABELS = {
    **_labels("cp1252", "ascii", "us-ascii", "ansi_x3.4-1968", "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1",
              "l1", "cp819", "ibm819", "iso-ir-100", "csisolatin1", "iso_8859-1:1987", "windows-1252", "x-cp1252"),
    **_labels("cp1254", "iso-8859-9", "iso8859-9", "iso_8859-9", "latin5", "l5", "windows-1254", "x-cp1254"),
    **_labels("cp874", "iso-8859-11", "iso8859-11", "tis-620", "dos-874", "windows-874"),
    **_labels("gbk", "gbk", "gb2312", "gb_2312", "gb_2312-80", "chinese", "csgb2312", "iso-ir-58", "x-gbk"),
    **_labels("cp949", "euc-kr", "cseuckr", "korean", "ks_c_5601-1987", "ks_c_5601-1989", "ksc5601", "ksc_5601",
              "iso-ir-149", "windows-949"),
    **_labels("cp932", "shift_jis", "shift-jis", "sjis", "ms_kanji", "ms932", "windows-31j", "x-sjis", "csshiftjis"),
    **_labels("big5hkscs", "big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    **_labels("utf-8", "utf-16", "utf-16le", "utf-16be", "unicode", "unicodefeff", "unicodefffe", "csunicode",
              "ucs-2", "iso-10646-ucs-2", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"),
    **_labels("iso8859-8", "iso-8859-8-i", "csiso88598i", "logical"),
    **_labels("koi8-u", "koi8-u", "koi8-ru"),
    **_labels("mac-cyrillic", "x-mac-cyrillic", "x-mac-ukrainian"),
}  # fmt: skip
# The Python codecs of the other WHATWG encodings (a label Python resolves to one of them is taken as it resolves;
# Python's other codecs, e.g. ``unicode_escape`` or EBCDIC ``cp037``, are no web encoding and are passed over)
_WEB_CODECS = frozenset(
    ["utf-8", "cp866", "koi8-r", "mac-roman", "gb18030", "euc_jp", "iso2022_jp"]
    + [f"iso8859-{i}" for i in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)]
    + [f"cp125{i}" for i in range(9)]
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def is_pathlike(obj: Any) -> bool:
    """Whether ``obj`` is a path object (``pathlib.Path`` or any ``os.PathLike``).

    Examples
    --------
    >>> from pathlib import Path
    >>> is_pathlike(Path("a.json")), is_pathlike("a.json")
    (True, False)
    """
    return isinstance(obj, os.PathLike)


def bom_encoding(data: bytes) -> str | None:
    """The codec a byte-order mark at the start of ``data`` selects, else ``None``.

    Examples
    --------
    >>> bom_encoding(b"\\xff\\xfeh\\x00"), bom_encoding(b"plain")
    ('utf-16', None)
    """
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return enc
    return None


def decode_bytes(data: bytes, name: str, encoding: str | None = None, declared_at: str | None = None) -> str:
    """Decode ``data``: a BOM wins, then ``encoding``, then UTF-8 (ParseError naming the byte).

    ``declared_at`` says where ``encoding`` was declared (``"line 1"``): an unknown codec, or
    one that is not a text encoding (``rot13``, ``hex``), is a ParseError naming that place.
    Without a BOM or an ``encoding``, bytes that look like UTF-16/32 without their BOM (NULs
    every other or every fourth byte) are a ParseError saying so, not UTF-8 text with NULs.

    Examples
    --------
    >>> decode_bytes("é".encode("latin-1"), "f", "latin-1")
    'é'
    >>> decode_bytes(b"# coding: rot13\\n", "a.py", "rot13", "line 1")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: a.py at line 1: the declared encoding 'rot13' is not a text encoding
    >>> decode_bytes('{"a": 1}'.encode("utf-16-le"), "a.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: a.json at byte 1: NUL bytes every other byte: looks like UTF-16-LE ...
    """
    data = bytes(data)
    enc = bom_encoding(data)
    if enc is None and encoding is None:
        _check_not_wide(data, name)
    enc = enc or encoding or "utf-8"
    where = declared_at if enc == encoding else None
    try:
        info = codecs.lookup(enc)
    except LookupError:
        raise ParseError(f"unknown text encoding {enc!r}", name=name, position=where) from None
    if not getattr(info, "_is_text_encoding", True):
        raise ParseError(f"the declared encoding {enc!r} is not a text encoding", name=name, position=where)
    try:
        return data.decode(enc)
    except UnicodeDecodeError as e:
        raise ParseError(f"not valid {enc} text ({e.reason})", name=name, position=f"byte {e.start}") from None
    except Exception as e:  # a text codec can still fail its own way (a LookupError inside, ...)
        raise ParseError(f"cannot decode as {enc}: {e}", name=name, position=where) from None


def _check_not_wide(data: bytes, name: str) -> None:
    """ParseError when ``data`` looks like UTF-32 or UTF-16 without a BOM (its NUL pattern).

    ASCII text in UTF-16-LE is ``x\\0x\\0...``, in UTF-16-BE ``\\0x\\0x...``, in UTF-32 three
    NULs per character: valid UTF-8 all the same, so the pattern, over the first
    :data:`_NUL_SAMPLE` bytes (at least 4), is what tells them apart.
    """
    sample = data[: min(len(data), _NUL_SAMPLE) // 4 * 4]
    if len(sample) < 4 or 0 not in sample:
        return
    zero = [sample[k::4].count(0) == len(sample) // 4 for k in range(4)]
    none = [0 not in sample[k::4] for k in range(4)]
    if none[0] and zero[1] and zero[2] and zero[3]:
        guess, first = "UTF-32-LE", 1
    elif zero[0] and zero[1] and zero[2] and none[3]:
        guess, first = "UTF-32-BE", 0
    elif none[0] and none[2] and zero[1] and zero[3]:
        guess, first = "UTF-16-LE", 1
    elif zero[0] and zero[2] and none[1] and none[3]:
        guess, first = "UTF-16-BE", 0
    else:
        return
    raise ParseError(
        f"NUL bytes every {'fourth' if guess.startswith('UTF-32') else 'other'} byte: looks like {guess} "
        "without a byte-order mark; decode it to text first, or save it as UTF-8 (or with a BOM)",
        name=name,
        position=f"byte {first}",
    )


def pep263_encoding(data: bytes) -> tuple[str, str] | None:
    """``(codec, "line N")`` of a PEP 263 coding line in the first two lines of ``data``, else ``None``.

    Read as :func:`tokenize.detect_encoding` reads it; ``utf-8`` (also the default) and a
    declaration naming no codec Python knows (``# coding: uft-8``, which tree-sitter parses all
    the same) are ``None``: the source is read as UTF-8.

    Examples
    --------
    >>> pep263_encoding(b"#!/usr/bin/env python\\n# -*- coding: latin-1 -*-\\n")
    ('iso-8859-1', 'line 2')
    >>> pep263_encoding(b"x = 1\\n") is None
    True
    """
    lines = data.split(b"\n", 2)[:2]
    # no cookie: UTF-8 whatever detect_encoding says (the common case, answered without tokenize)
    if not any(b"coding" in line for line in lines):
        return None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:  # an unknown or conflicting declaration, or first lines that are not UTF-8
        return None
    if encoding in ("utf-8", "utf-8-sig"):
        return None
    declares = [_PEP263.match(line) is not None for line in lines]
    return encoding, f"line {declares.index(True) + 1 if True in declares else 1}"


def xml_encoding(data: bytes) -> str | None:
    """The ``encoding`` of an XML declaration at the start of ``data`` (ASCII-compatible input), else ``None``.

    Examples
    --------
    >>> xml_encoding(b"<?xml version='1.0' encoding='latin-1'?><a/>")
    'latin-1'
    """
    m = _XML_DECL_ENCODING.match(data, 0, 512)
    return None if m is None else m.group(1).decode("ascii")


def html_encoding(data: bytes) -> tuple[str, str] | None:
    """``(codec, "byte N")`` of the first ``<meta>`` charset of HTML ``data``, else ``None``.

    ``<meta charset=X>`` or ``<meta http-equiv="Content-Type" content="...; charset=X">``, outside
    comments and raw-text elements (``script``, ``style``, ``title``, ...), anywhere in the page:
    browsers prescan the first 1,024 bytes (WHATWG "prescan a byte stream") and re-read the page
    when the parser meets one later ("change the encoding"), and lxml's parser applies it where it
    meets it. A label that names no web encoding is passed over, as browsers do. Labels map as
    the WHATWG Encoding Standard maps them where its decoder is the wider one (``iso-8859-1`` and
    ``ascii`` → ``cp1252``, ``gb2312`` → ``gbk``, ``euc-kr`` → ``cp949``, ``shift_jis`` →
    ``cp932``; a declared UTF-16 is UTF-8). UTF-8 itself is ``None`` (the default). ``N`` is
    where the ``<meta`` tag starts.

    Examples
    --------
    >>> html_encoding(b'<html><head><meta charset="ISO-8859-1"><table>')
    ('cp1252', 'byte 12')
    >>> html_encoding(b'<meta http-equiv="content-type" content="text/html; charset=shift_jis">')
    ('cp932', 'byte 0')
    >>> html_encoding(b'<!-- <meta charset="koi8-r"> --><meta charset=utf-8>') is None
    True
    """
    for m in _HTML_META_SCAN.finditer(data):
        attributes = m.group(2)
        codec = None if attributes is None else _web_codec(_meta_charset(attributes))
        if codec is not None:
            return None if codec == "utf-8" else (codec, f"byte {m.start()}")
    return None


def _meta_charset(attributes: bytes) -> bytes | None:
    """The charset label a ``<meta>`` tag's attributes declare (WHATWG: ``charset``, else a
    ``content`` charset when ``http-equiv`` is ``content-type``), else ``None``."""
    attrs: dict[bytes, bytes] = {}
    for m in _HTML_ATTR.finditer(attributes):
        value = m.group(2) or b""
        attrs.setdefault(m.group(1).lower(), value[1:-1] if value[:1] in (b'"', b"'") else value)
    if b"charset" in attrs:
        return attrs[b"charset"]
    if attrs.get(b"http-equiv", b"").strip().lower() == b"content-type":
        found = _CONTENT_CHARSET.search(attrs.get(b"content", b""))
        if found is not None:
            return next(g for g in found.groups() if g is not None)
    return None


def _web_codec(label: bytes | None) -> str | None:
    """The Python codec for an HTML charset label (:data:`_WEB_LABELS`, else a Python name of a web
    encoding, :data:`_WEB_CODECS`), else ``None``."""
    if not label:
        return None
    name = label.strip(b"\t\n\f\r ").decode("ascii", "replace").lower()
    if name in _WEB_LABELS:
        return _WEB_LABELS[name]
    try:
        codec = codecs.lookup(name).name
    except (LookupError, ValueError):  # ValueError: a NUL in the label
        return None
    return codec if codec in _WEB_CODECS else None


def _table_kind(data: bytes, name: str) -> str:
    """``"html"`` for a table input that :func:`~structpos.parsers.table.detect_format` reads as HTML (a
    ``.html``/``.htm`` name, or no ``.csv``/``.tsv``/``.tab`` one and a ``<table`` tag), else ``"table"``."""
    fmt = TABLE_SUFFIX_FORMATS.get(os.path.splitext(name)[1].lower())
    is_html = fmt == "html" if fmt is not None else _HTML_TABLE_HINT.search(data) is not None
    return "html" if is_html else "table"


def declared_encoding(data: bytes, kind: str, language: Any = None) -> tuple[str | None, str | None]:
    """``(encoding, where declared)`` that the format of ``kind`` declares in ``data``; ``(None, None)``: none.

    Python code (``language`` ``"python"`` or an alias) declares it in a PEP 263 line
    (:func:`pep263_encoding`), XML in its declaration (:func:`xml_encoding`), HTML (``kind``
    ``"html"``) in a ``<meta>`` charset (:func:`html_encoding`); a byte-order mark overrides
    them all (:func:`decode_bytes`).

    Examples
    --------
    >>> declared_encoding(b"# coding: latin-1\\n", "code", "py")
    ('iso-8859-1', 'line 1')
    >>> declared_encoding(b"# coding: latin-1\\n", "code", "c"), declared_encoding(b"{}", "json")
    ((None, None), (None, None))
    """
    if bom_encoding(data):
        return None, None
    if kind == "code" and _is_python(language):
        return pep263_encoding(data) or (None, None)
    if kind == "xml":
        enc = xml_encoding(data)
        return enc, (None if enc is None else "line 1")
    if kind == "html":
        return html_encoding(data) or (None, None)
    return None, None


def _is_python(language: Any) -> bool:
    """Whether ``language`` (a name or alias, any case) names Python."""
    if not isinstance(language, str):
        return getattr(language, "name", None) == "python"
    from .code import _canonical

    return _canonical(language) == "python"


def decode_input(data: bytes, name: str, kind: str, language: Any = None, default_encoding: str | None = None) -> str:
    """The text of a file's bytes read as ``kind``: the one decoding the parsers and the command line share.

    A byte-order mark, else the encoding the format declares (:func:`declared_encoding`), else
    ``default_encoding``, else UTF-8 (see :func:`decode_bytes` for the errors).

    Parameters
    ----------
    data : bytes
        The file's bytes.
    name : str
        The input's name in error messages.
    kind : str
        The input kind (``"code"``, ``"xml"``, ``"json"``, ...; ``"html"`` for an HTML table, and
        ``"table"`` for one whose format ``name``'s suffix or a ``<table`` tag tells).
    language : str, optional
        The code language (its PEP 263 line counts only for Python).
    default_encoding : str, optional
        The codec of bytes with neither a byte-order mark nor a declared encoding (default
        UTF-8), checked by :func:`check_encoding`: for legacy files (``cp1252`` CSV, Latin-1 C).

    Returns
    -------
    str

    Raises
    ------
    ParseError
        Bytes that do not decode (naming the byte), a declared codec that is unknown or not a
        text encoding (naming the line), UTF-16/32 without its byte-order mark.

    Examples
    --------
    >>> decode_input("# coding: latin-1\\ns = 'é'\\n".encode("latin-1"), "a.py", "code", "python")[-4:]
    "'é'\\n"
    """
    return _decode(data, name, kind, language, default_encoding)[0]


def decode_as_utf8(
    data: bytes, name: str, kind: str, language: Any = None, default_encoding: str | None = None
) -> tuple[str, bytes]:
    """:func:`decode_input`'s text, and the same text as UTF-8 bytes (``data`` itself where it was
    UTF-8 already: no byte-order mark, no other declared encoding).

    Examples
    --------
    >>> decode_as_utf8("# coding: latin-1\\né\\n".encode("latin-1"), "a.py", "code", "python")[1][-3:]
    b'\\xc3\\xa9\\n'
    >>> data = b"x = 1\\n"
    >>> decode_as_utf8(data, "a.py", "code", "python")[1] is data
    True
    """
    text, encoding = _decode(data, name, kind, language, default_encoding)
    if encoding is None and bom_encoding(data) is None:
        return text, data
    return text, text.encode("utf-8")


def _decode(data: bytes, name: str, kind: str, language: Any, default_encoding: str | None) -> tuple[str, str | None]:
    """The text of ``data``, and the encoding it was read in other than by a BOM or as UTF-8 by default
    (``None``: none); a ``"table"`` is read as HTML where :func:`~structpos.parsers.table.detect_format`
    would call it HTML."""
    if kind == "table":
        kind = _table_kind(data, name)
    encoding, where = declared_encoding(data, kind, language)
    if encoding is None and default_encoding is not None and bom_encoding(data) is None:
        encoding = check_encoding(default_encoding)
    return decode_bytes(data, name, encoding, where), encoding


def check_encoding(codec: str, where: str = "default_encoding") -> str:
    """``codec``'s canonical name if it is a text encoding Python knows, else a SpecError naming ``where``.

    Examples
    --------
    >>> check_encoding("Latin-1"), check_encoding("cp1252")
    ('iso8859-1', 'cp1252')
    >>> check_encoding("rot13")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: default_encoding: 'rot13' is not a text encoding
    """
    try:
        info = codecs.lookup(codec)
    except (LookupError, ValueError, TypeError):
        raise SpecError(f"unknown text encoding {codec!r}", name=where) from None
    if not getattr(info, "_is_text_encoding", True):
        raise SpecError(f"{codec!r} is not a text encoding", name=where)
    return info.name


def decoding_kind(kind: str, fmt: str | None = None) -> str:
    """The ``kind`` :func:`decode_input` reads input of parser kind ``kind`` as, given its ``format``
    option: a table of a given format is ``"html"`` or ``"csv"``, else sniffed (``"table"``).

    Examples
    --------
    >>> decoding_kind("table", "HTML"), decoding_kind("table", "tsv"), decoding_kind("table"), decoding_kind("json")
    ('html', 'csv', 'table', 'json')
    """
    if kind != "table" or fmt is None:
        return kind
    return "html" if str(fmt).lower() == "html" else "csv"


def wrong_type(obj: Any, name: str, accepted: str = "str, bytes or a path (os.PathLike)") -> InputError:
    """The error for an input of a type no parser reads: an InputError naming the accepted types.

    Examples
    --------
    >>> raise wrong_type(123, "<code>")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: <code>: the input must be str, bytes or a path (os.PathLike), not int
    """
    return InputError(f"the input must be {accepted}, not {type(obj).__name__}", name=name)


def check_text(text: str, name: str, limits: Limits | None = None) -> str:
    """Check a ``str`` input: its UTF-8 size against the limit, and no lone surrogates.

    Examples
    --------
    >>> check_text("x\\ud800", "rec")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: rec at char 1: lone surrogate U+D800 in the text (not valid Unicode; ...)
    """
    maximum = resolve_limits(limits).max_input_bytes
    if maximum is not None and len(text) * 4 > maximum:  # a char is at most 4 UTF-8 bytes
        size = len(text.encode("utf-8", "surrogatepass"))
        check_limit(size, maximum, "max_input_bytes", "bytes of input", name=name)
    at = -1 if text.isascii() else _first_surrogate(text)  # isascii is O(1) on str
    if at >= 0:
        raise ParseError(
            f"lone surrogate U+{ord(text[at]):04X} in the text (not valid Unicode; cannot be encoded as UTF-8)",
            name=name,
            position=f"char {at}",
        )
    return text


def _first_surrogate(text: str) -> int:
    """The index of the first lone surrogate in ``text``, or -1 (``native/text.c`` when built)."""
    native = native_module("text")
    if native is not None:
        return native.first_surrogate(text)
    m = _SURROGATE.search(text)
    return -1 if m is None else m.start()


def read_bytes(path: Any, name: str, limits: Limits | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_input_bytes`` (LimitError beyond).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"; _ = p.write_bytes(b"abc")
    >>> read_bytes(p, str(p))
    b'abc'
    """
    maximum = resolve_limits(limits).max_input_bytes
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("not a regular file (directories, FIFOs and devices are not read)", name=name)
        if maximum is not None:
            check_limit(st.st_size, maximum, "max_input_bytes", "bytes of input", name=name)
        with open(path, "rb") as fh:
            data = fh.read() if maximum is None else fh.read(maximum + 1)
    except OSError as e:
        raise InputError(f"cannot read the input: {e.strerror or e}", name=name) from None
    if maximum is not None:
        check_limit(len(data), maximum, "max_input_bytes", "bytes of input", name=name)
    return data


def read_text(
    obj: Any,
    *,
    name: str | None,
    default: str,
    limits: Limits | None = None,
    kind: str | None = None,
    language: Any = None,
    default_encoding: str | None = None,
) -> tuple[str, str]:
    """``(text, name)`` of a ``str``/``bytes``/path input (see the module docstring).

    Bytes and files are decoded by :func:`decode_input` as ``kind`` (``None``: a kind that
    declares no encoding), with ``language`` and ``default_encoding``. A path's name is the path
    itself unless ``name`` is given; otherwise ``default`` names nameless input.

    Examples
    --------
    >>> read_text("abc", name=None, default="<json>")
    ('abc', '<json>')
    >>> read_text(None, name=None, default="<json>")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: <json>: the input must be str, bytes or a path (os.PathLike), not NoneType
    """
    if is_pathlike(obj):
        name = name or os.fspath(obj)
        obj = read_bytes(obj, name, limits)
    name = name or default
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        maximum = resolve_limits(limits).max_input_bytes
        check_limit(len(data), maximum, "max_input_bytes", "bytes of input", name=name)
        return decode_input(data, name, kind or "text", language, default_encoding), name
    if isinstance(obj, str):
        return check_text(obj, name, limits), name
    raise wrong_type(obj, name)


def clean_label(s: str) -> str:
    """``s`` with lone surrogates replaced by U+FFFD, so that it always encodes as UTF-8.

    Examples
    --------
    >>> clean_label("k\\ud800")
    'k\\ufffd'
    """
    if s.isascii():
        return s
    return _SURROGATE.sub("\ufffd", s) if _SURROGATE.search(s) else s
