"""Table parsers (CSV, HTML, DataFrame) and table coordinates, against independent readers.

References: Python's :mod:`csv` module for CSV; pandas' lxml-based HTML table reader (its own
DOM parser and rowspan/colspan expansion) for HTML; lxml for the visible text inside each
cell span; tables with merged cells generated from random rectangle partitions (ground truth
by construction). Real data: the WikiTableQuestions sample in ``shared/data/wtq/200-csv`` (or its
committed subset in ``tests/data/sample``).
"""

from __future__ import annotations

import csv
import io
import random
import re

import numpy as np
import pytest
from conftest import at_least
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structpos import StructureError
from structpos.coords import compute
from structpos.coords.table import cell_grid, header_row_count, table_coords
from structpos.parsers import parse
from structpos.parsers.table import parse_table
from structpos.parsers.table_csv import scan_csv, sniff_header
from structpos.parsers.table_html import normalize_cell_text

pd = pytest.importorskip("pandas")
try:  # the independent HTML reference (pandas.read_html's lxml flavour); only those tests skip
    import lxml.html as lxml_html
except ImportError:  # pragma: no cover - depends on the environment
    lxml_html = None
needs_lxml = pytest.mark.skipif(lxml_html is None, reason="lxml (the independent HTML reference) is not installed")


# ----------------------------------------------------------------------------- helpers
def wtq_stems(shared_data):
    d = shared_data / "wtq" / "200-csv"
    stems = sorted({p.stem for p in d.glob("*.csv")}, key=int)
    assert len(stems) >= at_least(30, 12)
    return d, stems


def strip_holes(grid):
    """Rows of the expanded grid without the ``None`` padding of ragged rows."""
    return [[x for x in row if x is not None] for row in grid]


def pandas_html_grid(text: str):
    """pandas' own reading of the first table: (header rows, body rows, footer rows)."""
    from pandas.io.html import _LxmlFrameParser

    parser = _LxmlFrameParser(io.StringIO(text), re.compile(".+"), None, None, True, None)
    return next(iter(parser.parse_tables()))


def lxml_visible_text(fragment: str) -> str:
    """Visible text of an HTML fragment via lxml (hidden/style/script dropped, <br> = newline)."""
    root = lxml_html.fragment_fromstring(fragment or " ", create_parent="div")
    for el in list(root.iter()):
        if not isinstance(el.tag, str):
            continue
        style = (el.get("style") or "").replace(" ", "").lower()
        if el.tag in ("style", "script") or "display:none" in style:
            el.drop_tree()
    for br in root.iter("br"):
        br.tail = "\n" + (br.tail or "")
    return normalize_cell_text(root.text_content())


def cell_ids(s):
    return np.flatnonzero(s.attrs["row"] >= 0)


def csv_field_value(s, i, escapechar=None):
    """Decode the source slice of CSV cell ``i`` independently, with the csv module."""
    a, b = int(s.start[i]), int(s.end[i])
    raw = s.source[a:b]
    quoted = a > 0 and s.source[a - 1] == '"' and (a - 1 == 0 or s.source[a - 2] in ",\t\r\n")
    closed_here = b < len(s.source) and s.source[b] == '"'  # else the span runs past the closing quote
    line = (f'"{raw}"' if closed_here else f'"{raw}') if quoted else raw
    rows = list(csv.reader(io.StringIO(line, newline=""), escapechar=escapechar))
    return rows[0][0] if rows and rows[0] else ""


# ------------------------------------------------------------------- WTQ: CSV vs csv
@pytest.mark.parametrize("escapechar", [None, "\\"])
def test_wtq_csv_matches_csv_module(shared_data, escapechar):
    d, stems = wtq_stems(shared_data)
    for stem in stems:
        path = d / f"{stem}.csv"
        text = path.read_text(encoding="utf-8")
        ref = [r for r in csv.reader(io.StringIO(text, newline=""), escapechar=escapechar) if r]
        s = parse_table(path, escapechar=escapechar).validate()
        assert s.kind == "table" and s.name == str(path)
        assert strip_holes(s.table.grid) == ref, stem
        assert s.table.n_rows == len(ref) and s.table.n_cols == max(map(len, ref))
        cells = cell_ids(s)
        # grid positions: a cell's column is its index in its CSV record
        for i in cells[:: max(1, len(cells) // 200)]:
            r, c = int(s.attrs["row"][i]), int(s.attrs["col"][i])
            assert ref[r][c] == s.node_texts[i]
            if escapechar is None:  # the slice decodes (independently) to the cell text
                assert csv_field_value(s, i) == s.node_texts[i]
        assert (s.attrs["header"][cells] == (s.attrs["row"][cells] == 0)).all()


# ----------------------------------------------------------------- WTQ: HTML vs pandas
@needs_lxml
def test_wtq_html_matches_pandas_and_spans_hold_cell_text(shared_data):
    d, stems = wtq_stems(shared_data)
    n_merged = 0
    for stem in stems:
        path = d / f"{stem}.html"
        text = path.read_text(encoding="utf-8")
        s = parse_table(path).validate()
        head, body, foot = pandas_html_grid(text)
        assert strip_holes(s.table.grid) == head + body + foot, stem
        assert s.table.header_rows == len(head)
        cells = cell_ids(s)
        n_merged += int(((s.attrs["rowspan"][cells] > 1) | (s.attrs["colspan"][cells] > 1)).sum())
        for i in cells:
            frag = s.source[s.start[i] : s.end[i]]
            assert frag == frag.strip()
            assert lxml_visible_text(frag) == s.node_texts[i], (stem, i)
        # rows' spans are <tr> elements; the table's span is the <table> element
        rows = np.flatnonzero(s.labels == "row")
        assert all(s.source.startswith("<tr", int(a)) for a in s.start[rows])
        assert s.node_text(0).startswith("<table") and s.node_text(0).endswith("</table>")
    assert n_merged > at_least(50, 20)  # the sample really exercises rowspan/colspan


def test_wtq_csv_and_html_grids_agree(shared_data):
    """WTQ's CSVs are cleaned renderings of the HTML tables. Where the HTML has no merged
    cells, one header row and no ragged rows, both grids have the same shape and the same
    cell texts up to the cleaning (footnote marks ``[n]`` and sort keys removed). Elsewhere the
    CSV (merged header, dropped section rows) never has more rows or columns than the HTML."""
    d, stems = wtq_stems(shared_data)
    norm = lambda t: re.sub(r"\s+", " ", re.sub(r"\[[^\]]*\]", "", t)).strip()  # noqa: E731
    n_plain = 0
    for stem in stems:
        c = parse_table(d / f"{stem}.csv", escapechar="\\")
        h = parse_table(d / f"{stem}.html")
        cells = cell_ids(h)
        merged = bool(((h.attrs["rowspan"][cells] > 1) | (h.attrs["colspan"][cells] > 1)).any())
        ragged = any(None in row for row in h.table.grid)
        data_rows_h = h.table.n_rows - max(h.table.header_rows, 1)
        assert c.table.n_cols <= h.table.n_cols, stem
        assert c.table.n_rows - 1 <= data_rows_h, stem
        if merged or ragged or h.table.header_rows > 1:
            continue
        n_plain += 1
        assert (c.table.n_rows, c.table.n_cols) == (h.table.n_rows, h.table.n_cols), stem
        pairs = [(x, y) for rc, rh in zip(c.table.grid, h.table.grid) for x, y in zip(rc, rh)]
        same = sum(norm(x) == norm(y) for x, y in pairs)
        assert same >= 0.95 * len(pairs), (stem, same, len(pairs))
    assert n_plain >= at_least(10, 3)


@needs_lxml
def test_wtq_table_coords_tapas(shared_data):
    d, _ = wtq_stems(shared_data)
    s = parse_table(d / "0.html")  # two header rows, rowspan and colspan in the header
    head, body, _ = pandas_html_grid(s.source)
    co = compute(s, "table")
    cells = cell_ids(s)
    assert set(co) >= {"row", "col", "rowspan", "colspan", "header", "tapas_row", "tapas_col"}
    for k in ("row", "col", "rowspan", "colspan", "header"):
        assert (co[k] == s.attrs[k]).all()
    hdr = s.attrs["row"][cells] < len(head)
    assert (co["tapas_row"][cells][hdr] == 0).all()
    assert sorted(set(co["tapas_row"][cells][~hdr])) == list(range(1, len(body) + 1))
    assert (co["tapas_col"][cells] == s.attrs["col"][cells] + 1).all()
    non = np.setdiff1d(np.arange(s.num_nodes), cells)
    assert (co["tapas_row"][non] == 0).all() and (co["tapas_col"][non] == 0).all()
    # merged header cells cover their full rectangle in the expanded grid
    grid = cell_grid(s)
    assert grid.shape == (s.table.n_rows, s.table.n_cols)
    for i in cells:
        r, c, h, w = (int(s.attrs[k][i]) for k in ("row", "col", "rowspan", "colspan"))
        assert (grid[r : r + h, c : c + w] == i).all()
    assert (grid >= 0).sum() == int((s.attrs["rowspan"][cells] * s.attrs["colspan"][cells]).sum())
    texts = [[s.node_texts[i] for i in row] for row in grid]
    assert texts == s.table.grid == head + body
    # without a recorded count, header rows are inferred from the header flags
    s.table.header_rows = None
    assert header_row_count(s) == len(head)


# --------------------------------------------------------- crafted merged-cell tables
def random_partition(rng: random.Random, n_rows: int, n_cols: int):
    """A random tiling of an R × C grid by rectangles: (grid of ids, [(r, c, h, w)])."""
    owner = np.full((n_rows, n_cols), -1)
    rects = []
    for r in range(n_rows):
        for c in range(n_cols):
            if owner[r, c] >= 0:
                continue
            w_max = 1
            while c + w_max < n_cols and owner[r, c + w_max] < 0:
                w_max += 1
            w = rng.randint(1, min(w_max, 3))
            h_max = 1
            while r + h_max < n_rows and (owner[r + h_max, c : c + w] < 0).all():
                h_max += 1
            h = rng.choice([1, 1, rng.randint(1, min(h_max, 4))])
            owner[r : r + h, c : c + w] = len(rects)
            rects.append((r, c, h, w))
    return owner, rects


def render_html(rng: random.Random, rects, n_rows: int) -> str:
    """Render rectangles as HTML rows, with random end-tag omission, attributes and spacing."""
    out = ['<table class="t">\n']
    for r in range(n_rows):
        out.append("<tr>" if rng.random() < 0.7 else '<tr style="x">\n ')
        for k, (r0, c0, h, w) in enumerate(rects):
            if r0 != r:
                continue
            attrs = (f' rowspan="{h}"' if h > 1 else "") + (f" colspan={w}" if w > 1 else "")
            tag = "th" if rng.random() < 0.2 else "td"
            body = f"c{k}" if rng.random() < 0.7 else f"<b>c{k}</b> <!-- x -->"
            close = f"</{tag}>" if rng.random() < 0.6 else ""
            out.append(f"<{tag}{attrs}> {body}{close}\n")
        out.append("</tr>\n" if rng.random() < 0.7 else "")
    out.append("</table>")
    return "".join(out)


@needs_lxml
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(1, 7), st.randoms(use_true_random=False))
def test_html_spans_recover_random_rectangles(n_rows, n_cols, rng):
    owner, rects = random_partition(rng, n_rows, n_cols)
    html = render_html(rng, rects, n_rows)
    s = parse_table(html, header=False).validate()
    cells = cell_ids(s)
    assert len(cells) == len(rects)
    got = {s.node_texts[i]: tuple(int(s.attrs[k][i]) for k in ("row", "col", "rowspan", "colspan")) for i in cells}
    assert got == {f"c{k}": rect for k, rect in enumerate(rects)}
    grid = cell_grid(s)
    assert [[s.node_texts[i] for i in row] for row in grid] == [[f"c{k}" for k in row] for row in owner]
    assert s.table.grid == [[f"c{k}" for k in row] for row in owner]
    # an independent expansion (pandas) of the same HTML agrees
    head, body, foot = pandas_html_grid(html)
    assert head + body + foot == s.table.grid
    for i in cells:  # spans slice to the cell content
        assert lxml_visible_text(s.node_text(i)) == s.node_texts[i]


def test_html_row_groups_nested_tables_and_implicit_ends():
    html = """<p>intro</p>
<table id=a>
 <caption>Cap</caption>
 <thead><tr><th>A<th>B<th rowspan=4>C</tr></thead>
 <tbody>
  <tr><td rowspan=0>r0<td>x &amp; y
  <tr><td>wide <table><tr><td>inner1</td><td>inner2</td></tr></table> tail</td>
  <tr><td>z<td>w<br>v<span style="display: none">hidden</span>
 </tbody>
 <tfoot><tr><td colspan=3>foot</td></tr></tfoot>
</table>
<table><tr><td>second</td></tr></table>"""
    s = parse_table(html).validate()
    assert s.table.header_rows == 1
    # the thead rowspan (4) is clipped to its row group; rowspan=0 runs to the end of tbody
    assert s.table.grid == [
        ["A", "B", "C"],
        ["r0", "x & y", None],
        ["r0", "wide inner1inner2 tail", None],
        ["r0", "z", "w v"],
        ["foot", "foot", "foot"],
    ]
    assert s.table.n_rows == 5  # the nested table's row is not an outer row
    assert "inner1" not in s.node_texts
    head = [i for i in cell_ids(s) if s.attrs["header"][i] == 1]
    assert [s.node_texts[i] for i in head] == ["A", "B", "C"]
    co = table_coords(s)
    r0 = s.node_texts.index("r0")
    assert co["tapas_row"][r0] == 1 and co["rowspan"][r0] == 3
    second = parse_table(html, table=1)
    assert second.table.grid == [["second"]] and second.node_text(0) == "<table><tr><td>second</td></tr></table>"
    assert len(parse(html, "table", format="html", header=True).table.grid) == 5
    # CRLF line ends and astral characters shift every offset; spans must follow
    crlf = parse_table("🙂\r\n" + html.replace("\n", "\r\n")).validate()
    assert crlf.table.grid == s.table.grid
    for i in cell_ids(s):
        assert crlf.node_text(i).replace("\r\n", "\n") == s.node_text(i)


@pytest.mark.parametrize(
    "html, where",
    [
        ("<table>\n<tr><td>a</td></tr>\n<tr><td rowspan='two'>b</td></tr></table>", "line 3, row 1"),
        ("<table><tr>\n<td colspan=-1>a</td></tr></table>", "line 2, row 0"),
        ("<html><p>no table here</p></html>", "no <table>"),
    ],
)
def test_html_bad_input_names_position(html, where):
    with pytest.raises(StructureError, match=re.escape(where)) as e:
        parse_table(html, format="html", name="page.html")
    assert "page.html" in str(e.value)


# ------------------------------------------------------------------------- CSV edge cases
def test_csv_bad_input_names_line():
    text = 'a,b\n1,2\n3,"unterminated\n4,5\n'
    with pytest.raises(StructureError, match=r"data\.csv at line 3: unterminated quoted field \(record 2, field 1\)"):
        parse_table(text, name="data.csv")
    with pytest.raises(StructureError, match="line 1"):
        parse_table("a,b\\", escapechar="\\")


def test_csv_quotes_newlines_crlf_and_spans():
    text = 'h1,"h,2"\r\n"multi\r\nline","say ""hi"""\r\n\r\nplain,é"x\r\n'
    s = parse_table(text)
    ref = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    assert strip_holes(s.table.grid) == ref
    assert [csv_field_value(s, i) for i in cell_ids(s)] == [x for r in ref for x in r]
    rows = np.flatnonzero(s.labels == "row")
    assert [s.node_text(i) for i in rows] == ['h1,"h,2"', '"multi\r\nline","say ""hi"""', 'plain,é"x']


def test_tsv_is_unquoted_and_header_sniffing(shared_data, tmp_path):
    d, _ = wtq_stems(shared_data)
    s = parse_table(d / "17.tsv")  # fields start with '"' that TSV does not treat as quotes
    ref = [line.split("\t") for line in (d / "17.tsv").read_text(encoding="utf-8").splitlines()]
    assert strip_holes(s.table.grid) == ref
    as_text = parse_table((d / "17.tsv").read_text(encoding="utf-8"), format="tsv")  # same rules for text
    assert as_text.table.grid == s.table.grid
    assert sniff_header([["name", "age"], ["ann", "31"], ["bob", "4"]])
    assert not sniff_header([["1", "2"], ["3", "4"], ["5", "6"]])
    assert parse_table("name,age\nann,31\nbob,4\n", header="auto").table.header_rows == 1
    assert parse_table("1,2\n3,4\n", header="auto").table.header_rows == 0
    assert parse_table("1,2\n3,4\n", header=False).attrs["header"].max() == 0


_cell_text = st.text(alphabet=st.sampled_from(list("ab ,\"\n\r\t'é中🙂\\")), max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_cell_text, min_size=1, max_size=5), min_size=1, max_size=6))
def test_csv_writer_round_trip(rows):
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    text = buf.getvalue()
    s = parse_table(text, format="csv", header=False).validate()
    assert strip_holes(s.table.grid) == rows
    for i in cell_ids(s):
        r, c = int(s.attrs["row"][i]), int(s.attrs["col"][i])
        assert s.node_texts[i] == rows[r][c]
        assert csv_field_value(s, i) == rows[r][c]
    # the same rows given directly
    assert strip_holes(parse_table(rows, header=False).table.grid) == rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4).flatmap(
        lambda w: st.tuples(
            st.lists(_cell_text, min_size=w, max_size=w, unique=True),
            st.lists(st.lists(_cell_text, min_size=w, max_size=w), max_size=5),
        )
    )
)
def test_dataframe_round_trip(columns_and_rows):
    columns, rows = columns_and_rows
    df = pd.DataFrame(rows, columns=columns, dtype=object)
    s = parse_table(df).validate()
    assert s.table.header_rows == 1
    expect = [columns] + rows
    got = [[s.node_texts[i] for i in row] for row in cell_grid(s)]
    assert got == expect
    assert (s.attrs["header"][cell_ids(s)] == (s.attrs["row"][cell_ids(s)] == 0)).all()
    for i in cell_ids(s):
        assert csv_field_value(s, i) == s.node_texts[i]


def test_dataframe_values_index_and_multiindex():
    df = pd.DataFrame({"x": [1.5, None], "y": ["a,b", 'q"q']}, index=["r1", "r2"])
    s = parse_table(df, index=True)
    assert s.table.grid == [["", "x", "y"], ["r1", "1.5", "a,b"], ["r2", "", 'q"q']]
    m = pd.DataFrame([[1, 2]], columns=pd.MultiIndex.from_tuples([("a", "b"), ("a", "c")]))
    s = parse_table(m)
    assert s.table.header_rows == 2 and s.table.grid == [["a", "a"], ["b", "c"], ["1", "2"]]
    assert (table_coords(s)["tapas_row"][cell_ids(s)] == [0, 0, 0, 0, 1, 1]).all()


def test_scan_csv_is_linear_and_fast():
    import time

    text = "".join(f'{i},"v, {i}","a""b"\n' for i in range(20000))
    t0 = time.perf_counter()
    data = scan_csv(text)
    assert len(data.row_count) == 20000 and data.cell_text[2] == 'a"b'
    assert time.perf_counter() - t0 < 2.0
    long_field = '"' + 'x""' * 200000 + '"'
    assert scan_csv(long_field).cell_text == ['x"' * 200000]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab,"\r\n\\é')), max_size=14))
def test_scanner_matches_csv_module_on_arbitrary_text(text):
    """Any text the csv module reads in strict mode gives the same records; the vectorized
    path (well-formed input) and the regex path agree on every span."""
    from structpos.parsers.table_csv import _scan_regex, _scan_vectorized

    try:
        ref = [r for r in csv.reader(io.StringIO(text, newline=""), strict=True) if r]
    except csv.Error:
        ref = None
    if ref is not None:
        assert scan_csv(text).text_rows() == ref
    fast = _scan_vectorized(text, ",", '"')
    if fast is not None:
        assert fast == _scan_regex(text, ",", '"', None, "<t>")
