"""The compiled table paths (native/table.c, native/text.c) against the pure-Python ones.

The CSV scanner must split exactly as the regex scanner (itself checked against :mod:`csv`) and
decline exactly the inputs that scanner reports as errors; the layout of tables without merged
cells must give the Structure the general layout gives; the surrogate check must find the first
lone surrogate as the regex does.
"""

import contextlib
import csv
import io
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_structure

from structpos import native
from structpos.exceptions import LimitError, ParseError, StructposError
from structpos.limits import Limits
from structpos.parsers.table import parse_table
from structpos.parsers.table_csv import _scan_native, _scan_regex

TABLE = native.native_module("table")
TEXT = native.native_module("text")
needs_table = pytest.mark.skipif(TABLE is None, reason="structpos._native_table is not built")
needs_text = pytest.mark.skipif(TEXT is None, reason="structpos._native_text is not built")
WTQ = Path(__file__).resolve().parents[2] / "shared" / "data" / "wtq" / "200-csv"


def test_built_where_a_compiler_exists():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the optional extensions are skipped by design")
    assert {"table", "text"} <= set(native.native_available())


def _random_csv(rng: random.Random, alphabet: list[str]) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))


DIALECTS = [  # (delimiter, quotechar, escapechar)
    (",", '"', None),
    (",", '"', "\\"),
    ("\t", None, None),
    (";", "'", "\\"),
    ("é", "\U0001f600", None),  # characters outside ASCII and outside the BMP
]


def _native_fields(text, delimiter, quotechar, escapechar):
    data = _scan_native(TABLE, text, delimiter, quotechar, escapechar, as_lists=True)
    if data is None:
        return None
    return [data.row_start, data.row_end, data.row_count, data.cell_start, data.cell_end, data.cell_text]


@needs_table
@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: repr(d))
def test_scanner_equals_the_regex_scanner_and_declines_exactly_its_errors(dialect):
    d, q, e = dialect
    rng = random.Random(7)
    alphabet = ["a", "b", d, "\r\n", "\n", "\r", " ", "é", "ü", "\U0001f600", "\x00"]
    alphabet += [q, q * 2] * 2 if q else []
    alphabet += [e] * 2 if e else []
    declined = 0
    for _ in range(3000):
        text = _random_csv(rng, alphabet)
        got = _native_fields(text, d, q, e)
        try:
            ref = _scan_regex(text, d, q, e, "t")
        except ParseError:
            assert got is None, text
            declined += 1
            continue
        assert got is not None, text
        want = [ref.row_start, ref.row_end, ref.row_count, ref.cell_start, ref.cell_end, ref.cell_text]
        assert got == want, text
        assert all(t == "".join(list(t)) for t in got[5])  # canonical strs: equal to a rebuilt copy
    if q or e:  # unterminated quotes and trailing escapes were among the inputs
        assert declined > 50


@needs_table
def test_values_equal_the_csv_module_on_well_formed_input():
    rng = random.Random(11)
    alphabet = ["a", "é", ",", '"', '""', "\r\n", "\n", " ", "\U0001f600"]
    checked = 0
    for _ in range(2000):
        text = _random_csv(rng, alphabet)
        got = _native_fields(text, ",", '"', None)
        if got is None:
            continue
        rows, k = [], 0
        for c in got[2]:
            rows.append(got[5][k : k + c])
            k += c
        want = [r for r in csv.reader(io.StringIO(text, newline="")) if r]  # csv yields [] for empty lines
        assert rows == want, text
        checked += 1
    assert checked > 500


def _assert_same_structure(fast, slow):
    assert_same_structure(fast, slow, "node_texts", "table")


def _tables():
    rng = random.Random(3)
    alphabet = ["a", "12", ",", '"', '""', "\r\n", "\n", " ", "é", "\\"]
    texts = [_random_csv(rng, alphabet) for _ in range(800)]
    texts += [p.read_text(encoding="utf-8") for p in sorted(Path(__file__).parent.glob("data/**/*.csv"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted(WTQ.glob("*.csv"))[:40]]
    return texts


@needs_table
@pytest.mark.parametrize("options", [{}, {"header": "auto"}, {"header": False, "escapechar": "\\"}])
def test_parse_table_equals_the_pure_path(options):
    compared = 0
    for text in _tables():
        try:
            fast = parse_table(text, format="csv", **options)
        except StructposError as e:
            with pytest.raises(type(e)) as info, native.pure_python():
                parse_table(text, format="csv", **options)
            assert str(info.value) == str(e)
            continue
        with native.pure_python():
            slow = parse_table(text, format="csv", **options)
        _assert_same_structure(fast, slow)
        compared += 1
    assert compared > 500


@needs_table
def test_the_grid_limit_is_checked_before_the_grid_is_built():
    # 2,000 rows, one of them 2,000 cells wide: 4,000 cells in the input, a 4,000,000-slot grid
    text = ",".join(["x"] * 2000) + "\n" + "y\n" * 1999
    with pytest.raises(LimitError, match="max_table_cells"):
        parse_table(text, format="csv", limits=Limits(max_table_cells=100_000))
    assert parse_table(text, format="csv", limits=Limits(max_table_cells=None)).table.n_cols == 2000


@needs_table
def test_layout_rejects_arrays_that_do_not_add_up():
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    with pytest.raises(ValueError, match="inconsistent"):  # the row counts sum to 3, not the 2 cells
        TABLE.layout(i64(2, 1), i64(0, 5), i64(4, 6), i64(0, 2), i64(1, 3), ["a", "b"], 0, 0, 7)
    with pytest.raises(ValueError, match="inconsistent"):  # one text short
        TABLE.layout(i64(2), i64(0), i64(3), i64(0, 2), i64(1, 3), ["a"], 0, 0, 3)
    with pytest.raises(TypeError, match="int64"):
        TABLE.layout(np.array([1], np.int32), i64(0), i64(1), i64(0), i64(1), ["a"], 0, 0, 1)


_SURROGATE = re.compile("[\ud800-\udfff]")


@needs_text
def test_first_surrogate_equals_the_regex():
    rng = random.Random(5)
    alphabet = ["a", "é", "\u4e00", "\U0001f600", "\ud800", "\udfff", "\ud7ff", "\ue000"]
    for _ in range(3000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        m = _SURROGATE.search(s)
        assert TEXT.first_surrogate(s) == (-1 if m is None else m.start()), ascii(s)
    with pytest.raises(TypeError):
        TEXT.first_surrogate(b"x")


@needs_text
def test_a_lone_surrogate_is_reported_at_its_position_on_both_paths():
    text = "a,b\nc,\u4e00\ud83d\n"
    messages = []
    for pure in (False, True):
        with native.pure_python() if pure else contextlib.nullcontext():
            with pytest.raises(ParseError, match=r"char 7: lone surrogate U\+D83D") as info:
                parse_table(text, format="csv")
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@needs_table
def test_dataframes_and_rows_equal_the_pure_path():
    pd = pytest.importorskip("pandas")
    frames = [
        pd.DataFrame({"a": [1, 2, None], "b": ["x", "é", ""]}),
        pd.DataFrame(np.arange(12).reshape(3, 4), columns=pd.MultiIndex.from_product([["A", "B"], ["x", "y"]])),
    ]
    cases = [(f, {"index": index}) for f in frames for index in (False, True)] + [
        ([["h1", "h2"], ["1"], ["a", "b", "c"]], {})
    ]
    for obj, options in cases:
        fast = parse_table(obj, **options)
        with native.pure_python():
            slow = parse_table(obj, **options)
        _assert_same_structure(fast, slow)
