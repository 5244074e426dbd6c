"""Turning a parser's input (text, bytes or a path) into text, with the input-size limit.

Every text parser reads its input through :func:`read_text`, so they all accept the same
three forms and fail the same way:

* ``str`` — used as is; a lone surrogate character (``"\\ud800"``, which no UTF-8 file can
  hold and which nothing downstream can encode) raises :class:`~structpos.exceptions.ParseError`
  naming its character offset;
* ``bytes`` — decoded: a byte-order mark picks UTF-8/16/32, else the ``encoding`` the caller
  found (a PEP 263 line, an XML declaration), else UTF-8; bytes that do not decode raise
  :class:`~structpos.exceptions.ParseError` naming the byte offset;
* ``os.PathLike`` — a regular file, read (at most ``max_input_bytes + 1`` bytes, so a device
  or a growing file cannot be read without bound) and decoded as bytes; the path becomes the
  input's name. Anything else (a directory, a FIFO, a missing file) raises
  :class:`~structpos.exceptions.InputError`.

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
import os
import re
import stat
from typing import Any

from ..exceptions import InputError, ParseError
from ..limits import Limits, check_limit, resolve_limits

__all__ = ["read_text", "read_bytes", "decode_bytes", "check_text", "clean_label", "is_pathlike"]

_SURROGATE = re.compile("[\ud800-\udfff]")
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


def decode_bytes(data: bytes, name: str, encoding: str | None = None) -> str:
    """Decode ``data``: a BOM wins, then ``encoding``, then UTF-8 (ParseError naming the byte).

    Examples
    --------
    >>> decode_bytes("é".encode("latin-1"), "f", "latin-1")
    'é'
    """
    enc = bom_encoding(data) or encoding or "utf-8"
    try:
        codecs.lookup(enc)
    except LookupError:
        raise ParseError(f"unknown text encoding {enc!r}", name=name) from None
    try:
        return bytes(data).decode(enc)
    except UnicodeDecodeError as e:
        raise ParseError(f"not valid {enc} text ({e.reason})", name=name, position=f"byte {e.start}") from None


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
    m = _SURROGATE.search(text)
    if m is not None:
        raise ParseError(
            f"lone surrogate U+{ord(m.group()):04X} in the text (not valid Unicode; cannot be encoded as UTF-8)",
            name=name,
            position=f"char {m.start()}",
        )
    return text


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
    obj: Any, *, name: str | None, default: str, limits: Limits | None = None, encoding: str | None = None
) -> tuple[str, str]:
    """``(text, name)`` of a ``str``/``bytes``/path input (see the module docstring).

    ``encoding`` applies to bytes and files without a byte-order mark. A path's name is the
    path itself unless ``name`` is given; otherwise ``default`` names nameless input.

    Examples
    --------
    >>> read_text("abc", name=None, default="<json>")
    ('abc', '<json>')
    """
    if is_pathlike(obj):
        name = name or os.fspath(obj)
        obj = read_bytes(obj, name, limits)
    name = name or default
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        maximum = resolve_limits(limits).max_input_bytes
        check_limit(len(data), maximum, "max_input_bytes", "bytes of input", name=name)
        return decode_bytes(data, name, encoding), name
    if isinstance(obj, str):
        return check_text(obj, name, limits), name
    raise TypeError(f"{name}: input must be str, bytes or a path, not {type(obj).__name__}")


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
