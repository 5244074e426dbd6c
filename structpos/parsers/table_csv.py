"""CSV/TSV tables with exact character offsets for every field.

:func:`scan_csv` is an offset-tracking scanner that splits records and fields the way
Python's :mod:`csv` module does with the default ``excel`` dialect (``doublequote=True``,
``strict=False``), except that an unterminated quoted field is an error instead of being
silently closed at the end of the input:

* records end at ``\\r\\n``, ``\\r`` or ``\\n`` outside quotes; empty lines yield no record
  (:mod:`csv` yields ``[]`` for them; they carry no cells, so they get no row node);
* a field that starts with the quote character runs to the matching quote (delimiters and
  newlines inside are data; ``""`` is one ``"``); anything between that quote and the next
  delimiter is appended to the value, as :mod:`csv` does;
* a quote inside an unquoted field is an ordinary character;
* with an ``escapechar`` (as in :mod:`csv`), the character after it is literal and the
  escape character is dropped from the value.

Spans: a quoted field's span is the text between its quotes (so ``source[span]`` equals the
value up to ``""`` → ``"`` and escape decoding); an unquoted field's span is exactly its value. A row's
span runs from its first field (opening quote included) to its last, line terminator excluded.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from ..exceptions import SpecError
from ..limits import Limits
from ..native import native_module
from ..structure import Structure, StructureError
from ._input import check_text
from ._substrings import span_mask, split_spans
from ._table_build import TableData, build_table

__all__ = ["scan_csv", "parse_csv_table", "sniff_header"]


@lru_cache(maxsize=32)
def _field_regex(delimiter: str, quotechar: str | None, escapechar: str | None) -> re.Pattern:
    """One field and its terminator (delimiter, newline or end of input).

    Groups: 1 quoted content, 2 text after the closing quote (kept, as :mod:`csv` does),
    3 an unquoted field, 4 the terminator. Quoted content is an unrolled loop (runs of
    ordinary characters separated by doubled quotes or escapes), linear-time.
    """
    d = re.escape(delimiter)
    if escapechar is None:
        plain = rf"([^{d}\r\n]*)"
    else:
        e = re.escape(escapechar)
        plain = rf"((?:[^{d}{e}\r\n]|{e}[\s\S])*)"
    term = rf"({d}|\r\n|\r|\n|\Z)"
    if quotechar is None:
        return re.compile(rf"(?:(?!)()())?{plain}{term}")  # groups 1-2 never match
    q = re.escape(quotechar)
    if escapechar is None:
        quoted = rf"{q}([^{q}]*(?:{q}{q}[^{q}]*)*){q}(?!{q})"
    else:
        quoted = rf"{q}([^{q}{e}]*(?:(?:{q}{q}|{e}[\s\S])[^{q}{e}]*)*){q}(?!{q})"
    return re.compile(rf"(?:{quoted}{plain}|(?!{q}){plain}){term}")


@lru_cache(maxsize=32)
def _decoder(quotechar: str | None, escapechar: str | None, quoted: bool):
    """``raw → value``: drop escape characters; inside quotes also ``""`` → ``"``."""
    alts = []
    if escapechar is not None:
        alts.append(rf"{re.escape(escapechar)}([\s\S])")
    if quoted and quotechar is not None:
        alts.append(re.escape(quotechar * 2))
    if not alts:
        return lambda raw: raw
    rx = re.compile("|".join(alts))
    if escapechar is None:
        q = quotechar or ""  # not None here: alts holds the doubled quote
        return lambda raw: rx.sub(q, raw) if q in raw else raw
    q = quotechar or ""  # only read when the doubled quote matched, so quotechar is not None
    return lambda raw: rx.sub(lambda m: q if m.group(1) is None else m.group(1), raw)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def scan_csv(
    text: str,
    *,
    delimiter: str = ",",
    quotechar: str | None = '"',
    escapechar: str | None = None,
    name: str = "<csv>",
) -> TableData:
    """Split ``text`` into records of fields with character spans (see the module docstring).

    Well-formed input without an escape character takes a vectorized path
    (:func:`_scan_vectorized`); anything else — or input that path declines — takes the
    regex scanner (:func:`_scan_regex`), which also produces the error messages.

    Parameters
    ----------
    text : str
        The CSV text; spans index it.
    delimiter, quotechar : str
        Single characters, as in :mod:`csv` (``quotechar=None``: no quoting).
    escapechar : str, optional
        As in :mod:`csv`: the character after it is taken literally, inside or outside
        quotes; the escape character itself is dropped from the value.
    name : str
        The input's name in error messages.

    Returns
    -------
    TableData
        Columns of rows (``row_start``, ``row_end``, ``row_count``) and cells
        (``cell_start``, ``cell_end``, ``cell_text``); ``text_rows()`` gives the values as
        :func:`csv.reader` would (without its ``[]`` for empty lines).

    Raises
    ------
    ParseError
        An unterminated quoted field (naming the line, record and field).
    SpecError
        ``delimiter``, ``quotechar`` and ``escapechar`` not distinct single non-newline characters.

    Examples
    --------
    >>> import csv, io
    >>> text = 'a,"b,c"\\r\\n1,"say ""hi"" now"\\n'
    >>> data = scan_csv(text)
    >>> data.text_rows() == list(csv.reader(io.StringIO(text)))
    True
    >>> data.text_rows()[1], [text[a:b] for a, b in zip(data.cell_start, data.cell_end)][1:]
    (['1', 'say "hi" now'], ['b,c', '1', 'say ""hi"" now'])
    >>> scan_csv('a,"b\\n1,2\\n', name="x.csv")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: x.csv at line 1: unterminated quoted field (record 0, field 1)
    """
    _check_dialect(delimiter, quotechar, escapechar)
    return _scan(text, delimiter, quotechar, escapechar, name, as_lists=True)


def _check_dialect(delimiter: str, quotechar: str | None, escapechar: str | None) -> None:
    """SpecError unless the three are distinct single non-newline characters (``None``: not used)."""
    if (delimiter, quotechar, escapechar) == (",", '"', None):  # the default: fine
        return
    chars = [c for c in (delimiter, quotechar, escapechar) if c is not None]
    for ch in chars:
        if len(ch) != 1 or ch in "\r\n":
            raise SpecError(f"delimiter, quotechar and escapechar must be single non-newline characters, got {ch!r}")
    if len(set(chars)) != len(chars):
        raise SpecError("delimiter, quotechar and escapechar must differ")


def _scan(
    text: str, delimiter: str, quotechar: str | None, escapechar: str | None, name: str, *, as_lists: bool
) -> TableData:
    """:func:`scan_csv` after its option checks (``as_lists=False``: integer columns may stay arrays).

    The compiled scanner when it is built (any input; ``None`` where the regex scanner raises),
    else the vectorized one (well-formed input without an escape character); the regex scanner
    for the rest and for the error messages.
    """
    native = native_module("table")
    if native is not None:
        data = _scan_native(native, text, delimiter, quotechar, escapechar, as_lists=as_lists)
    elif escapechar is None:
        data = _scan_vectorized(text, delimiter, quotechar, as_lists=as_lists)
    else:
        data = None
    return data if data is not None else _scan_regex(text, delimiter, quotechar, escapechar, name)


def _scan_native(
    native, text: str, delimiter: str, quotechar: str | None, escapechar: str | None, *, as_lists: bool
) -> TableData | None:
    """``native/table.c``'s ``scan_csv``: the regex scanner's fields in one C pass; ``None`` on its errors."""
    found = native.scan_csv(
        text, ord(delimiter), -1 if quotechar is None else ord(quotechar), -1 if escapechar is None else ord(escapechar)
    )
    if found is None:
        return None
    ints, texts = found
    a = np.frombuffer(ints, dtype=np.int64)
    nr, nc = a[:2].tolist()
    row_start, row_end, row_count = a[2 : 2 + nr], a[2 + nr : 2 + 2 * nr], a[2 + 2 * nr : 2 + 3 * nr]
    cell_start, cell_end = a[2 + 3 * nr : 2 + 3 * nr + nc], a[2 + 3 * nr + nc :]
    if as_lists:
        return TableData(
            row_start.tolist(), row_end.tolist(), row_count.tolist(), cell_start.tolist(), cell_end.tolist(), texts
        )
    return TableData(row_start, row_end, row_count, cell_start, cell_end, texts)  # type: ignore[arg-type]


def _scan_vectorized(text: str, delimiter: str, quotechar: str | None, *, as_lists: bool = True) -> TableData | None:
    """numpy scanner for well-formed CSV (RFC 4180 quoting); ``None`` when the input is not.

    A character is inside quotes iff an odd number of quote characters precede it, so the
    separators (delimiters and newlines outside quotes) are those outside the quote pairs. The
    parity reading equals :mod:`csv`'s state machine exactly when every quote is an opening
    quote at a field start, a closing quote before a separator or the end, or half of a
    doubled quote — checked here, vectorized; otherwise (and for an odd quote count) the
    caller falls back to the regex scanner. ``as_lists=False`` leaves the integer columns
    as int64 arrays (same values) for :func:`parse_csv_table`.
    """
    n = len(text)
    if n == 0:
        return TableData([], [], [], [], [], [])
    if text.isascii():  # one byte per character: same offsets, a quarter of the memory traffic
        a = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    else:
        a = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if quotechar is not None:
        is_q = a == ord(quotechar)
        qpos = np.flatnonzero(is_q)
    else:
        is_q, qpos = None, np.zeros(0, np.int64)
    if qpos.size % 2:
        return None
    is_nl = (a == 10) | (a == 13)
    is_sep = (a == ord(delimiter)) | is_nl
    if qpos.size:
        opening, closing = qpos[0::2], qpos[1::2]
        # an odd number of quotes strictly before i: i in (opening, closing]
        is_sep &= ~span_mask(n, opening + 1, closing + 1)[:n]
        before = opening - 1
        ok_open = (before < 0) | is_sep[np.maximum(before, 0)] | is_q[np.maximum(before, 0)]
        after = closing + 1
        ok_close = (after >= n) | is_sep[np.minimum(after, n - 1)] | is_q[np.minimum(after, n - 1)]
        if not (ok_open.all() and ok_close.all()):
            return None
    sep = np.flatnonzero(is_sep)
    # "\r\n" is one terminator: drop the "\n" of every separator pair "\r","\n"
    nxt = np.minimum(sep + 1, n - 1)
    crlf = (a[sep] == 13) & (sep + 1 < n) & is_sep[nxt] & (a[nxt] == 10)
    term_len = np.where(crlf, 2, 1)
    drop = np.zeros(sep.size, dtype=bool)
    drop[1:] = crlf[:-1] & (sep[1:] == sep[:-1] + 1)
    sep, term_len = sep[~drop], term_len[~drop]
    is_newline = a[sep] != ord(delimiter)

    f_start = np.concatenate([[0], sep + term_len])
    f_end = np.concatenate([sep, [n]])
    ends_record = np.concatenate([is_newline, [True]])
    if f_start[-1] == n and (sep.size == 0 or is_newline[-1]):  # input ends with a newline
        f_start, f_end, ends_record = f_start[:-1], f_end[:-1], ends_record[:-1]
    record = np.concatenate([[0], np.cumsum(ends_record)[:-1]]).astype(np.int64)
    counts = np.bincount(record, minlength=int(record[-1]) + 1 if record.size else 0)
    # empty lines: a record whose only field is empty (and unquoted) is no record
    lone = counts[record] == 1
    keep = ~(lone & (f_end == f_start))
    f_start, f_end, record = f_start[keep], f_end[keep], record[keep]
    counts = _run_lengths(record)  # record is non-decreasing: its runs are the kept records

    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if counts.size else np.zeros(0, np.int64)
    row_start = f_start[first]
    row_end = f_end[first + counts - 1]
    if is_q is not None and qpos.size:
        quoted = (f_end > f_start) & is_q[np.minimum(f_start, n - 1)]
    else:
        quoted = np.zeros(f_start.size, dtype=bool)
    c_start = f_start + quoted
    c_end = f_end - quoted
    texts = _joined_cell_texts(text, a, c_start, c_end, quotechar)
    if texts is None:
        texts = _sliced_cell_texts(text, c_start, c_end, quoted, quotechar)
    if not as_lists:
        return TableData(row_start, row_end, counts, c_start, c_end, texts)  # type: ignore[arg-type]
    return TableData(row_start.tolist(), row_end.tolist(), counts.tolist(), c_start.tolist(), c_end.tolist(), texts)


def _sliced_cell_texts(
    text: str, c_start: np.ndarray, c_end: np.ndarray, quoted: np.ndarray, quotechar: str | None
) -> list[str]:
    """Each cell's value: its slice ``text[c_start:c_end]``, doubled quotes undoubled in quoted cells."""
    texts: list[str] = list(map(text.__getitem__, map(slice, c_start.tolist(), c_end.tolist())))
    if quotechar is not None and quoted.any():
        qq = quotechar * 2
        for k in np.flatnonzero(quoted).tolist():
            if qq in texts[k]:
                texts[k] = texts[k].replace(qq, quotechar)
    return texts


def _joined_cell_texts(
    text: str, a: np.ndarray, c_start: np.ndarray, c_end: np.ndarray, quotechar: str | None
) -> list[str] | None:
    """:func:`_sliced_cell_texts` by one ``str.split`` (:mod:`~structpos.parsers._substrings`).

    The second quote of each doubled pair is dropped: in the well-formed CSV the caller passes,
    quotes inside a cell are doubled pairs of quoted cells. ``None`` (slice instead) when the text
    holds a NUL or a run of quotes inside a cell has odd length.
    """
    if c_start.size == 0 or "\x00" in text:
        return None
    keep = span_mask(a.size, c_start, c_end)
    if quotechar is not None:
        inner = np.flatnonzero(keep[: a.size] & (a == ord(quotechar)))
        if inner.size:
            run_first = np.flatnonzero(np.diff(inner, prepend=-2) != 1)
            run_len = np.diff(run_first, append=inner.size)
            if (run_len % 2).any():
                return None
            in_run = np.arange(inner.size) - np.repeat(run_first, run_len)
            keep[inner[in_run % 2 == 1]] = False  # within each run: keep, drop, keep, drop, ...
    return split_spans(a, keep, c_end)


def _run_lengths(sorted_ids: np.ndarray) -> np.ndarray:
    """Lengths of the runs of equal values in a non-decreasing int array (``np.unique``'s counts, no sort)."""
    if sorted_ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    cuts = np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
    return np.diff(np.concatenate([[0], cuts, [sorted_ids.size]])).astype(np.int64)


def _scan_regex(text: str, delimiter: str, quotechar: str | None, escapechar: str | None, name: str) -> TableData:
    """Regex scanner: any input :mod:`csv` reads (lenient quoting, escapes), with errors."""
    field = _field_regex(delimiter, quotechar, escapechar)
    decode_quoted = _decoder(quotechar, escapechar, True)
    decode_plain = _decoder(quotechar, escapechar, False)

    row_start: list[int] = []
    row_end: list[int] = []
    row_count: list[int] = []
    cell_start: list[int] = []
    cell_end: list[int] = []
    cell_text: list[str] = []
    add_start, add_end, add_text = cell_start.append, cell_end.append, cell_text.append
    q = quotechar or ""  # quoted fields (raw_q below) exist only when quotechar is set
    qq = q * 2
    plain_escapes = escapechar is not None
    n = len(text)
    pos = 0
    at_record_start = True
    count = 0
    for m in field.finditer(text):
        m_start, m_end = m.span()
        if m_start != pos:
            what = (
                "unterminated quoted field"
                if text[pos] == quotechar
                else f"unexpected {text[pos]!r} after an escape character"
            )
            raise StructureError(
                f"{what} (record {len(row_start) - (not at_record_start)}, field {0 if at_record_start else count})",
                name=name,
                position=f"line {_line_of(text, pos)}",
            )
        if pos == n and at_record_start:
            break
        raw_q, tail, raw, term = m.groups()
        pos = m_end
        field_end = m_end - len(term)
        if raw_q is None:
            if at_record_start and not raw and term != delimiter:  # an empty line: no record
                continue
            add_start(m_start)
            add_end(field_end)
            add_text(decode_plain(raw) if plain_escapes else raw)
        else:
            add_start(m_start + 1)
            add_end(field_end if tail else m_start + 1 + len(raw_q))
            if escapechar is None:
                value = raw_q.replace(qq, q) if q in raw_q else raw_q
            else:
                value = decode_quoted(raw_q)
            add_text(value + decode_plain(tail) if tail else value)
        if at_record_start:
            row_start.append(m_start)
            at_record_start = False
            count = 1
        else:
            count += 1
        if term != delimiter:
            row_end.append(field_end)
            row_count.append(count)
            at_record_start = True
    else:
        if pos != n:  # the last match stopped early: an unterminated quote at the end
            raise StructureError(
                f"unterminated quoted field (record {len(row_start)})",
                name=name,
                position=f"line {_line_of(text, pos)}",
            )
    return TableData(row_start, row_end, row_count, cell_start, cell_end, cell_text)


def _kind_of(value: str):
    """Sniffer-style column type: ``"num"`` for numbers, else the string length."""
    try:
        float(value.replace(",", ""))
        return "num"
    except ValueError:
        return len(value)


def sniff_header(rows: list[list[str]], sample: int = 20) -> bool:
    """Does the first row look like a header? (:meth:`csv.Sniffer.has_header`'s vote.)

    For every column whose data cells (rows 1..``sample``) all have one type — numeric, or one
    fixed string length — the first-row cell votes "header" when it does not share that type.

    Parameters
    ----------
    rows : list of list of str
        The table's cell values, first row first.
    sample : int
        How many rows after the first take part.

    Returns
    -------
    bool
        True when the header votes outnumber the others (False for fewer than two rows).

    Examples
    --------
    >>> sniff_header([["name", "age"], ["ann", "31"], ["bob", "4"]])
    True
    >>> sniff_header([["1", "2"], ["3", "4"], ["5", "6"]])
    False
    """
    if len(rows) < 2:
        return False
    head, body = rows[0], rows[1 : sample + 1]
    votes = 0
    for j, h in enumerate(head):
        kinds = {_kind_of(r[j]) for r in body if j < len(r)}
        if len(kinds) != 1:
            continue
        votes += 1 if _kind_of(h) not in kinds else -1
    return votes > 0


def parse_csv_table(
    text: str,
    *,
    name: str = "<csv>",
    header: bool | str = True,
    delimiter: str = ",",
    quotechar: str | None = '"',
    escapechar: str | None = None,
    header_rows: int | None = None,
    fmt: str = "csv",
    limits: Limits | None = None,
) -> Structure:
    """A CSV text as a table Structure (layout in :mod:`structpos.parsers.table`).

    Parameters
    ----------
    text : str
        The CSV text (the Structure's ``source``).
    name : str
        The input's name in error messages.
    header : bool or "auto"
        Whether the first row is the header; ``"auto"``: :func:`sniff_header` decides.
    delimiter, quotechar, escapechar
        As for :func:`scan_csv`.
    header_rows : int, optional
        Overrides ``header`` with a number of leading header rows (the DataFrame front end
        uses it for MultiIndex columns).
    fmt : str
        The ``structure.format`` to record (``"csv"``, ``"tsv"``, ``"dataframe"``, ``"rows"``).
    limits : Limits, optional
        ``max_input_bytes``, ``max_nodes`` and ``max_table_cells`` (rows × columns of the
        grid, ragged rows padded) apply.

    Returns
    -------
    Structure
        ``kind="table"``; header cells are labelled ``header``, the others ``cell``.

    Raises
    ------
    ParseError
        An unterminated quoted field, a lone surrogate.
    SpecError
        A bad ``header``, ``delimiter``, ``quotechar`` or ``escapechar``.
    LimitError
        ``max_input_bytes``, ``max_nodes`` or ``max_table_cells`` exceeded.

    Examples
    --------
    >>> s = parse_csv_table("a,b\\n1,2\\n")
    >>> [s.node_text(i) for i in range(len(s)) if s.labels[i] != "row"][1:]
    ['a', 'b', '1', '2']
    >>> [str(l) for l in s.labels]
    ['table', 'row', 'header', 'header', 'row', 'cell', 'cell']
    >>> parse_csv_table("1,2\\n3,4\\n", header="auto").table.header_rows  # all numbers: no header
    0
    """
    check_text(text, name, limits)
    _check_dialect(delimiter, quotechar, escapechar)
    rows = _scan(text, delimiter, quotechar, escapechar, name, as_lists=False)
    if header_rows is None:
        if header == "auto":
            header_rows = int(sniff_header(rows.text_rows()[:21]))
        elif isinstance(header, bool) or header in (0, 1):
            header_rows = int(bool(header)) if len(rows.row_count) else 0
        else:
            raise SpecError(f"header must be True, False or 'auto', not {header!r}")
    return build_table(
        rows, source=text, name=name, table_span=(0, len(text)), header_rows=header_rows, fmt=fmt, limits=limits
    )
