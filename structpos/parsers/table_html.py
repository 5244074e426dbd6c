"""HTML tables with character offsets, ``rowspan``/``colspan`` and row groups.

A :class:`html.parser.HTMLParser` pass records, for every ``<table>``, its rows and cells with
character offsets (``getpos()`` line/column → offset through a line-start table). Where it is
built, the compiled scanner ``structpos._native_html`` does the same pass in one go: it reads
the subset of HTML on which every :mod:`html.parser` version agrees (the common markup of real
pages, listed in ``native/html.c``) and hands anything else to the HTMLParser pass, so both
give the same tables.

A cell's span is its content — from the end of its start tag to the start of its end tag (or of
the tag that implicitly closes it: the next ``<td>``/``<th>``/``<tr>``, ``</tr>``, a row-group
tag or ``</table>``) — with surrounding whitespace trimmed; it may contain markup. A row's span
runs from ``<tr`` to the end of ``</tr>``; the table's from ``<table`` to the end of ``</table>``.

Cell text is the concatenated character data inside the cell (entities decoded, ``<br>`` as a
newline, nested tables' text included) with whitespace normalised as :func:`pandas.read_html`
does: strip, then every newline run or run of ≥2 whitespace characters becomes one space.
With ``displayed_only=True`` (the default, as in pandas) the content of elements styled
``display:none`` (e.g. Wikipedia's hidden sort keys) and of ``<style>``/``<script>`` is left out
of the text (the span still covers it). A cell that is itself ``display:none`` stays in the grid
as an empty cell, where pandas drops it and shifts the cells after it left: grid positions are
the page's own.

Grid positions come from :func:`~structpos.parsers._table_build.place_cells` (the HTML
grid-filling algorithm; row groups ``<thead>``/``<tbody>``/``<tfoot>`` bound rowspans).
Nested tables stay out of the outer grid. Header rows: the rows of ``<thead>``, or, without
one, the leading rows whose cells are all ``<th>`` (the rule :func:`pandas.read_html` uses);
``header=True`` makes at least the first row a header row, ``header=False`` none. Rows are
kept in source order (a ``<tfoot>`` written before ``<tbody>`` stays there).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

from ..exceptions import SpecError
from ..limits import Limits
from ..native import native_module
from ..structure import Structure, StructureError
from ._input import check_text
from ._table_build import CellRecord, RowRecord, TableData, build_table, check_span_value

__all__ = ["parse_html_tables", "parse_html_table", "normalize_cell_text"]

_WS = re.compile(r"[\r\n]+|\s{2,}")
_SECTIONS = ("thead", "tbody", "tfoot")
_VOID = frozenset("area base br col embed hr img input link meta source track wbr".split())
_INVISIBLE = frozenset(("style", "script"))
_TABLE_TAGS = frozenset(("table", "thead", "tbody", "tfoot", "tr", "td", "th"))  # the tags whose position counts


def _hides(attrs: list[tuple[str, str | None]]) -> bool:
    """The element's ``style`` says ``display:none``."""
    style = (dict(attrs).get("style") or "").replace(" ", "").lower()
    return "display:none" in style


def normalize_cell_text(s: str) -> str:
    """Strip, then collapse newline runs and runs of ≥2 whitespace to one space (as pandas).

    Parameters
    ----------
    s : str
        A cell's character data.

    Returns
    -------
    str
        The text as :func:`pandas.read_html` would give it.

    Examples
    --------
    >>> normalize_cell_text("  New\\nYork   City\\t")
    'New York City'
    """
    return _WS.sub(" ", s.strip())


class _OpenTable:
    """Rows/cells of one ``<table>`` while it is being scanned."""

    def __init__(self, start: int, nested: bool):
        self.start = start
        self.end = -1
        self.nested = nested
        self.rows: list[RowRecord] = []
        self.row: RowRecord | None = None
        self.cell: CellRecord | None = None
        self.cell_parts: list[str] = []
        self.group = 0
        self.in_thead = False


class _TableScanner(HTMLParser):
    def __init__(self, text: str, name: str, displayed_only: bool = True):
        super().__init__(convert_charrefs=True)
        self.text = text
        self.name = name
        self.displayed_only = displayed_only
        self.hidden_tag: str | None = None  # tag name of the outermost hidden element
        self.hidden_depth = 0  # open elements with that name inside it (itself included)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.stack: list[_OpenTable] = []
        self.tables: list[_OpenTable] = []  # finished top-level tables, in order of their end

    def parse_html_declaration(self, i: int) -> int:
        """``<![...`` is a bogus comment up to the next ``>`` in HTML (``_markupbase`` asserts on it)."""
        if self.rawdata.startswith("<![", i):
            j = self.rawdata.find(">", i + 3)
            return -1 if j < 0 else j + 1
        return super().parse_html_declaration(i)

    # ----------------------------------------------------------------- helpers
    def _pos(self) -> int:
        line, col = self.getpos()
        return self.line_starts[line - 1] + col

    def _where(self, t: _OpenTable) -> str:
        return f"line {self.getpos()[0]}, row {len(t.rows)}"

    def _tag_end(self, pos: int) -> int:
        j = self.text.find(">", pos)
        return len(self.text) if j < 0 else j + 1

    def _trimmed(self, s: int, e: int) -> tuple[int, int]:
        seg = self.text[s:e]
        lead = len(seg) - len(seg.lstrip())
        if lead == len(seg):
            return s, s
        return s + lead, e - (len(seg) - len(seg.rstrip()))

    def _close_cell(self, t: _OpenTable, pos: int) -> None:
        if t.cell is None:
            return
        c = t.cell
        self.hidden_tag, self.hidden_depth = None, 0  # a hidden element left open ends with its cell
        c.start, c.end = self._trimmed(c.start, pos)
        c.text = normalize_cell_text("".join(t.cell_parts))
        t.cell, t.cell_parts = None, []

    def _close_row(self, t: _OpenTable, pos: int, end: int | None = None) -> None:
        self._close_cell(t, pos)
        if t.row is None:
            return
        r = t.row
        if end is None:  # implicit end: up to the last non-space character before pos
            end = max(self._trimmed(r.start, pos)[1], r.start)
        r.end = end
        t.rows.append(r)
        t.row = None

    def _open_row(self, t: _OpenTable, pos: int) -> None:
        self._close_row(t, pos)
        t.row = RowRecord(pos, -1, [], group=t.group, in_thead=t.in_thead)

    # ------------------------------------------------------------ callbacks
    def _track_hidden(self, tag: str, attrs) -> None:
        if self.hidden_tag is not None:
            if tag == self.hidden_tag:
                self.hidden_depth += 1
            return
        if not self.displayed_only or tag in _VOID:
            return
        if tag in _INVISIBLE or (any(k == "style" for k, _ in attrs) and _hides(attrs)):
            self.hidden_tag, self.hidden_depth = tag, 1

    def handle_starttag(self, tag, attrs):
        self._track_hidden(tag, attrs)
        if tag not in _TABLE_TAGS:
            if tag == "br" and self.hidden_tag is None:
                for ot in self.stack:
                    if ot.cell is not None:
                        ot.cell_parts.append("\n")
            return
        pos = self._pos()
        if tag == "table":
            self.stack.append(_OpenTable(pos, nested=bool(self.stack)))
            return
        if not self.stack:
            return
        t = self.stack[-1]
        if tag in _SECTIONS:
            self._close_row(t, pos)
            t.group += 1
            t.in_thead = tag == "thead"
        elif tag == "tr":
            self._open_row(t, pos)
        elif tag in ("td", "th"):
            if t.row is None:  # a cell outside <tr>: an implicit row, as browsers do
                t.row = RowRecord(pos, -1, [], group=t.group, in_thead=t.in_thead)
            self._close_cell(t, pos)
            rowspan = colspan = 1
            if attrs:
                a = dict(attrs)
                if "rowspan" in a or "colspan" in a:
                    where = self._where(t)
                    rowspan = check_span_value(a.get("rowspan"), "rowspan", name=self.name, where=where)
                    colspan = check_span_value(a.get("colspan"), "colspan", name=self.name, where=where)
            content = pos + len(self.get_starttag_text() or "")
            t.cell = CellRecord(content, -1, "", rowspan=rowspan, colspan=colspan, is_th=tag == "th")
            t.row.cells.append(t.cell)

    def handle_endtag(self, tag):
        if self.hidden_tag == tag:
            self.hidden_depth -= 1
            if self.hidden_depth == 0:
                self.hidden_tag = None
        if not self.stack or tag not in _TABLE_TAGS:
            return
        pos = self._pos()
        t = self.stack[-1]
        if tag == "table":
            self._close_row(t, pos)
            t.end = self._tag_end(pos)
            self.stack.pop()
            if not t.nested:
                self.tables.append(t)
        elif tag in _SECTIONS:
            self._close_row(t, pos)
            t.group += 1
            t.in_thead = False
        elif tag == "tr":
            if t.row is not None:
                self._close_row(t, pos, end=self._tag_end(pos))
        elif tag in ("td", "th"):
            self._close_cell(t, pos)

    def handle_data(self, data):
        if self.hidden_tag is not None:
            return
        for t in self.stack:
            if t.cell is not None:
                t.cell_parts.append(data)

    def finish(self) -> list[_OpenTable]:
        self.close()
        n = len(self.text)
        while self.stack:  # unclosed tables end with the input
            t = self.stack.pop()
            self._close_row(t, n)
            t.end = n
            if not t.nested:
                self.tables.append(t)
        self.tables.sort(key=lambda t: t.start)
        return self.tables


@dataclass
class _ScannedTable:
    """One top-level table as a scanner found it: its span, rows and cells, and which rows are in ``<thead>``."""

    start: int
    end: int
    data: TableData
    in_thead: list[bool]


def _scan_tables(text: str, name: str, displayed_only: bool) -> list[_ScannedTable]:
    """The top-level tables of ``text`` in document order: the compiled scanner, else the HTMLParser pass."""
    native = native_module("html")
    found = None if native is None else native.scan_tables(text, displayed_only, html.unescape)
    if found is not None:
        return [
            _ScannedTable(start, end, TableData(rs, re_, rc, cs, ce, ct, rg, rsp, csp, th), thead)
            for start, end, rs, re_, rc, rg, thead, cs, ce, ct, rsp, csp, th in found
        ]
    scanner = _TableScanner(text, name, displayed_only)
    try:
        scanner.feed(text)
        tables = scanner.finish()
    except AssertionError as e:  # html.parser / _markupbase report some malformed markup this way
        line, col = scanner.getpos()
        raise StructureError(f"malformed markup: {e}", name=name, position=f"line:col {line}:{col + 1}") from None
    return [_ScannedTable(t.start, t.end, TableData.from_records(t.rows), [r.in_thead for r in t.rows]) for t in tables]


def _header_rows(t: _ScannedTable, header: bool | str) -> int:
    """How many leading rows are header rows (see :func:`parse_html_tables`' ``header``)."""
    if header is False:
        return 0
    count, first = 0, 0
    is_th = t.data.is_th or []
    for in_thead, cells in zip(t.in_thead, t.data.row_count):
        if not (in_thead or (cells > 0 and all(is_th[first : first + cells]))):
            break
        count, first = count + 1, first + cells
    if header is True:
        count = max(count, 1 if t.in_thead else 0)
    return count


def parse_html_tables(
    text: str,
    *,
    name: str = "<html>",
    header: bool | str = "auto",
    displayed_only: bool = True,
    limits: Limits | None = None,
) -> list[Structure]:
    """Every top-level ``<table>`` of ``text`` as a table Structure, in document order.

    Parameters
    ----------
    text : str
        The HTML (the Structures' ``source``; each spans its own table).
    name : str
        The input's name in error messages.
    header : bool or "auto"
        ``"auto"``: the rows of ``<thead>``, else the leading all-``<th>`` rows;
        ``True``: at least the first row; ``False``: none.
    displayed_only : bool
        Leave ``display:none``, ``<style>`` and ``<script>`` content out of cell text.
    limits : Limits, optional
        ``max_input_bytes``; per table ``max_nodes`` and ``max_table_cells`` (grid slots after
        rowspan/colspan expansion; spans are first clamped as HTML does, colspan ≤ 1000,
        rowspan ≤ 65534 and to the end of the row group).

    Returns
    -------
    list of Structure
        One ``kind="table"`` Structure per top-level table (``structure.table.table_index``
        its number); empty when there is none.

    Raises
    ------
    ParseError
        Markup :mod:`html.parser` rejects (naming ``line:col``), a bad ``rowspan``/``colspan``.
    SpecError
        A bad ``header``.
    LimitError
        ``max_input_bytes``, ``max_nodes`` or ``max_table_cells`` exceeded.

    Examples
    --------
    >>> t = parse_html_tables("<table><tr><td colspan=2>a</td></tr><tr><td>b<td>c</table>")[0]
    >>> t.attrs["col"][t.labels != "row"][1:].tolist(), t.table.n_cols, t.table.grid
    ([0, 0, 1], 2, [['a', 'a'], ['b', 'c']])
    >>> html = "<table><thead><tr><th>k<th>v</thead><tr><td rowspan=2>a<td>1<tr><td>2</table><table></table>"
    >>> first, second = parse_html_tables(html)
    >>> first.table.grid, first.table.header_rows, second.table.table_index
    ([['k', 'v'], ['a', '1'], ['a', '2']], 1, 1)
    """
    if header not in (True, False, "auto"):
        raise SpecError(f"header must be True, False or 'auto', not {header!r}")
    check_text(text, name, limits)
    out = []
    for k, t in enumerate(_scan_tables(text, name, displayed_only)):
        s = build_table(
            t.data,
            source=text,
            name=name,
            table_span=(t.start, t.end),
            header_rows=_header_rows(t, header),
            fmt="html",
            table_index=k,
            limits=limits,
        )
        out.append(s)
    return out


def parse_html_table(
    text: str,
    *,
    name: str = "<html>",
    header: bool | str = "auto",
    table: int = 0,
    displayed_only: bool = True,
    limits: Limits | None = None,
) -> Structure:
    """Top-level table number ``table`` of the HTML ``text``.

    Parameters
    ----------
    text : str
        The HTML.
    name, header, displayed_only, limits
        As for :func:`parse_html_tables`.
    table : int
        Which top-level table (negative counts from the end).

    Returns
    -------
    Structure
        ``kind="table"``; its table node spans ``<table`` to the end of ``</table>``.

    Raises
    ------
    ParseError
        No ``<table>`` in ``text``, ``table`` out of range, or as for :func:`parse_html_tables`.
    SpecError, LimitError
        As for :func:`parse_html_tables`.

    Examples
    --------
    >>> html = "<p>intro</p><table><tr><td>a</table> <table><tr><td>z &amp; y</table>"
    >>> t = parse_html_table(html, table=-1)
    >>> t.table.grid, t.node_text(0)
    ([['z & y']], '<table><tr><td>z &amp; y</table>')
    >>> parse_html_table("<p>no table</p>", name="page.html")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: page.html at line 1: no <table> element in the HTML input
    """
    tables = parse_html_tables(text, name=name, header=header, displayed_only=displayed_only, limits=limits)
    if not tables:
        raise StructureError("no <table> element in the HTML input", name=name, position="line 1")
    if not -len(tables) <= table < len(tables):
        raise StructureError(
            f"table index {table} out of range: the input has {len(tables)} top-level tables", name=name
        )
    return tables[table]
