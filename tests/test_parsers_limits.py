"""Limits, input forms and the error contract of every parser.

* every limit raises LimitError naming it (input bytes, nodes, table cells after span
  expansion, graph node ids vs edges), before the work it guards;
* text, bytes and paths give the same Structure; invalid UTF-8 names the byte offset, a lone
  surrogate names the character; a PEP 263 Latin-1 Python file parses;
* a known suffix wins over content sniffing;
* the worst inputs we know, each under 1 MiB, stay under 1 GiB of address space (subprocess
  with RLIMIT_AS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from structpos.exceptions import LimitError, ParseError, SpecError, StructposError
from structpos.limits import Limits
from structpos.parsers import parse

REPO = Path(__file__).resolve().parents[1]
ARITH = 'start: NUMBER ("+" NUMBER)*\n%import common.NUMBER\n%ignore " "'

# kind, options, a small valid input with more than 10 nodes
SAMPLES = [
    ("json", {}, json.dumps({"a": [1, 2, 3, {"b": [4, 5, 6]}], "c": "d"})),
    ("xml", {}, "<a>" + "<b>x</b>" * 8 + "</a>"),
    ("yaml", {}, "a: [1, 2, 3]\nb: {c: 4, d: [5, 6, 7]}\n"),
    ("code", {"language": "python"}, "def f(x):\n    return x + 1\n"),
    ("table", {"format": "csv"}, "a,b,c\n1,2,3\n4,5,6\n"),
    ("table", {"format": "html"}, "<table><tr><td>1<td>2<td>3<td>é<tr><td>4<td>5<td>6<td>7</table>"),
    ("document", {}, "One sentence here. Another one there.\n\nA second paragraph."),
    ("markdown", {}, "# Title\n\nSome text here. More text.\n\n## Sub\n\nEnd.\n"),
    (
        "conllu",
        {},
        "1\tI\tI\tPRON\t_\t_\t2\tnsubj\t_\t_\n2\tsee\tsee\tVERB\t_\t_\t0\troot\t_\t_\n"
        "3\tit\tit\tPRON\t_\t_\t2\tobj\t_\t_\n\n" * 6,
    ),
    ("grammar", {"grammar": ARITH}, " + ".join(["1"] * 12)),
]
IDS = [f"{k}-{o.get('format', '')}" for k, o, _ in SAMPLES]


def _structures(out):
    return out if isinstance(out, list) else [out]


def _same(a, b) -> None:
    for x, y in zip(_structures(a), _structures(b), strict=True):
        assert list(x.labels) == list(y.labels) and x.source == y.source
        np.testing.assert_array_equal(x.start, y.start)
        np.testing.assert_array_equal(x.end, y.end)


@pytest.mark.parametrize("kind, opts, text", SAMPLES, ids=IDS)
def test_text_bytes_and_path_agree(kind, opts, text, tmp_path):
    suffix = {"csv": ".csv", "html": ".html"}.get(opts.get("format"), ".txt" if kind != "code" else ".py")
    p = tmp_path / f"input{suffix}"
    p.write_bytes(text.encode("utf-8"))
    a = parse(text, kind, **opts)
    _same(a, parse(text.encode("utf-8"), kind, **opts))
    from_path = parse(p, kind, **opts)
    _same(a, from_path)
    assert all(str(p) in s.name for s in _structures(from_path))


@pytest.mark.parametrize("kind, opts, text", SAMPLES, ids=IDS)
def test_max_nodes_and_max_input_bytes_name_the_limit(kind, opts, text):
    n = sum(s.num_nodes for s in _structures(parse(text, kind, **opts)))
    assert n > 10
    with pytest.raises(LimitError) as e:
        parse(text, kind, limits=Limits(max_nodes=10), **opts)
    assert e.value.limit == "max_nodes" and "max_nodes" in str(e.value)
    size = len(text.encode("utf-8"))
    for obj in (text, text.encode("utf-8")):
        with pytest.raises(LimitError) as e:
            parse(obj, kind, limits=Limits(max_input_bytes=size - 1), **opts)
        assert e.value.limit == "max_input_bytes" and e.value.value == size
    parse(text, kind, limits=Limits(max_input_bytes=size, max_nodes=n), **opts)  # exactly at the limits: fine


@pytest.mark.parametrize("kind, opts, text", SAMPLES, ids=IDS)
def test_invalid_utf8_names_the_byte_and_surrogates_the_char(kind, opts, text):
    data = text.encode("utf-8")
    k = len(data) // 2
    while k < len(data) and data[k] & 0xC0 == 0x80:  # a character boundary
        k += 1
    bad = data[:k] + b"\xff" + data[k:]
    with pytest.raises(ParseError, match=rf"at byte {k}\b"):
        parse(bad, kind, **opts)
    j = len(text) // 2
    with pytest.raises(ParseError, match=rf"at char {j}\b.*surrogate"):
        parse(text[:j] + "\ud800" + text[j:], kind, **opts)


def test_json_lone_surrogate_escapes_parse_and_labels_encode():
    pa = pytest.importorskip("pyarrow")
    text = '{"k\\ud800": "\\udfff", "ok": 1}'
    obj = json.loads(text)  # the reference accepts lone-surrogate escapes
    s = parse(text, "json")
    assert s.attrs["key"][1] == "k\ud800" == next(iter(obj))  # the key exactly as json.loads reads it
    assert s.labels[1] == "member:k\ufffd"  # the label always encodes
    pa.array(list(s.labels), type=pa.string())  # would raise on a lone surrogate
    assert json.loads(s.node_text(2)) == obj["k\ud800"]


def test_json_path_is_read_not_serialized(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"a": [1, 2]}', encoding="utf-8")
    s = parse(p, "json")
    assert s.name == str(p) and list(s.labels) == ["object", "member:a", "array", "number", "number"]
    with pytest.raises(StructposError, match=str(tmp_path / "missing.json")):
        parse(tmp_path / "missing.json", "json")
    with pytest.raises(StructposError, match="not a regular file"):
        parse(tmp_path, "json")


def test_latin1_python_with_coding_line(tmp_path):
    src = "# -*- coding: latin-1 -*-\ns = 'café'\n"
    p = tmp_path / "legacy.py"
    p.write_bytes(src.encode("latin-1"))
    for s in (parse(p, "code"), parse(src.encode("latin-1"), "code", language="python")):
        assert s.source == src
        strings = [s.node_text(i) for i in range(len(s)) if s.labels[i] == "string"]
        assert strings == ["'café'"]
    with pytest.raises(ParseError, match="byte"):  # the same bytes without the coding line are not UTF-8
        parse(src.split("\n", 1)[1].encode("latin-1"), "code", language="python")
    bom = b"\xef\xbb\xbf" + "x = 'é'\n".encode()
    assert parse(bom, "code", language="python").source == "x = 'é'\n"


def test_slow_tree_sitter_parse_stops_at_record_timeout():
    # tree-sitter's error recovery is superlinear here: an unclosed def before many comment lines
    data = b"class A:\n  @d\n  def" + b"# c\n" * 30000
    t = time.perf_counter()
    with pytest.raises(LimitError) as e:
        parse(data, "code", language="python", limits=Limits(record_timeout=0.2))
    assert e.value.limit == "record_timeout" and time.perf_counter() - t < 5
    # the cancelled parser was reset: the next parse of other text is a fresh, correct tree
    small = b"x = 1\n" * 20000
    import tree_sitter
    import tree_sitter_python

    ref = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language())).parse(small)
    assert parse(small, "code", language="python").num_nodes == ref.root_node.descendant_count


# tree-sitter's error recovery at the end of this input accepts every path through its merged
# parse stack (ts_parser__accept over ts_stack_pop_all) and calls no progress callback meanwhile:
# ~25 s on the 2-core dev machine, all past the last callback (a callback deadline stops nothing)
EOF_RECOVERY_BOMB = b"def f(x):\n" + b"/*" * 100 + b'"' + b"/*" * 4500 + b"    return [y for y in"


def test_tree_sitter_eof_recovery_stops_at_record_timeout(monkeypatch):
    # bound by work, not seconds: the bomb's parse runs ~25 s, the limit is 0.5 s, so the outcome is the
    # LimitError and a helper killed while still parsing, whatever the machine's load
    from structpos.parsers import _guard

    stopped: list[tuple[int, bool]] = []  # (helper pid, still running when stopped)
    stop = _guard._Helper.stop

    def spy_stop(helper):
        stopped.append((helper.pid, helper.alive()))
        stop(helper)

    monkeypatch.setattr(_guard._Helper, "stop", spy_stop)
    with pytest.raises(LimitError, match="bomb.py.*record_timeout") as e:
        parse(EOF_RECOVERY_BOMB, "code", language="python", name="bomb.py", limits=Limits(record_timeout=0.5))
    assert (e.value.limit, e.value.maximum, e.value.input_name) == ("record_timeout", 0.5, "bomb.py")
    # the helper was killed mid-parse (alive when stopped), and reaped: no process left parsing
    assert len(stopped) == 1 and stopped[0][1], stopped
    with pytest.raises(ProcessLookupError):
        os.kill(stopped[0][0], 0)
    # the killed helper is replaced: the next parses are correct (against tree-sitter's own count)
    import tree_sitter
    import tree_sitter_python

    src = b"def g(a, b):\n    return a + b\n" * 50
    ref = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language())).parse(src)
    for _ in range(2):
        assert parse(src, "code", language="python").num_nodes == ref.root_node.descendant_count
    assert len(stopped) == 1  # a helper that finished is kept, not killed


def test_code_parse_with_a_language_made_after_the_helper_started():
    import tree_sitter
    import tree_sitter_python

    parse(b"x = 1\n", "code", language="python")  # a helper exists now
    lang = tree_sitter.Language(tree_sitter_python.language())  # an object the helper has never seen
    src = b"class A:\n    def f(self):\n        return [i for i in self]\n"
    s = parse(src, "code", language=lang)
    ref = tree_sitter.Parser(lang).parse(src)
    assert s.num_nodes == ref.root_node.descendant_count
    assert s.labels[0] == "module" and not s.code.has_error


def _die() -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def test_guard_helper_death_is_a_parse_error_and_errors_cross_intact():
    from structpos.parsers._guard import call_guarded

    with pytest.raises(ParseError, match="rec-1.*died.*signal 9"):
        call_guarded(_die, (), time.monotonic() + 30, what="test call", timeout=30, name="rec-1")
    err = LimitError("too big", limit="max_nodes", value=9, maximum=5, name="g")
    with pytest.raises(LimitError) as e:  # raised in the helper, raised again here with its attributes
        call_guarded(_raise, (err,), time.monotonic() + 30, what="test call", timeout=30, name="x")
    assert (str(e.value), e.value.limit, e.value.value, e.value.input_name) == (str(err), "max_nodes", 9, "g")
    with pytest.raises(ParseError, match="test call failed: ZeroDivisionError"):
        call_guarded(divmod, (1, 0), time.monotonic() + 30, what="test call", timeout=30, name="x")
    assert call_guarded(divmod, (7, 2), time.monotonic() + 30, what="test call", timeout=30, name="x") == (3, 1)


def _raise(err: BaseException) -> None:
    raise err


def test_slow_yaml_scan_stops_at_record_timeout():
    pytest.importorskip("yaml")
    deep = "[" * 4000 + "]" * 4000  # PyYAML's scanner is quadratic in the flow nesting depth
    t = time.perf_counter()
    with pytest.raises(LimitError) as e:
        parse(deep, "yaml", limits=Limits(record_timeout=0.2))
    assert e.value.limit == "record_timeout" and time.perf_counter() - t < 3
    assert parse("a: [1, [2]]", "yaml", limits=Limits(record_timeout=0.2)).num_nodes == 6


def test_earley_parse_stops_at_record_timeout_and_agrees_with_the_unguarded_parse():
    lark = pytest.importorskip("lark")
    from structpos.parsers.grammar import parse_grammar

    g = 'start: s\ns: s s | "a"\n'  # ambiguous: Earley is cubic in the input (2,000 chars: minutes)
    t = time.perf_counter()
    with pytest.raises(LimitError) as e:
        parse_grammar("a" * 2000, g, parser="earley", name="amb.txt", limits=Limits(record_timeout=0.3))
    assert e.value.limit == "record_timeout" and "amb.txt" in str(e.value) and time.perf_counter() - t < 5
    guarded = parse_grammar("a" * 25, g, parser="earley")
    here = parse_grammar("a" * 25, g, parser="earley", limits=Limits(record_timeout=None))
    assert guarded.num_nodes == here.num_nodes == 49 + 1  # 25 leaves' rules + 24 inner rules + start
    np.testing.assert_array_equal(guarded.parent, here.parent)
    np.testing.assert_array_equal(guarded.start, here.start)
    # a Lark object made after the helpers started, and an error raised in the helper, cross intact
    made_now = lark.Lark(g, parser="earley", propagate_positions=True)
    np.testing.assert_array_equal(parse_grammar("a" * 25, made_now).parent, here.parent)
    with pytest.raises(ParseError, match="line:col 1:3"):
        parse_grammar("aab", made_now)


def test_code_language_is_never_a_silent_default(tmp_path):
    with pytest.raises(SpecError, match="language"):
        parse("x = 1\n", "code")
    assert parse("fn main() {}", "code", name="m.rs").code.language == "rust"  # from the name's suffix
    assert parse("x = 1\n", "code", language="python").code.language == "python"


def test_known_suffix_wins_over_sniffing(tmp_path):
    text = 'a,b\n"<table><tr><td>x</td></tr></table>",2\n'
    p = tmp_path / "cells.csv"
    p.write_text(text, encoding="utf-8")
    for s in (parse(p, "table"), parse(text, "table", name="cells.csv"), parse(text, "table", format="csv")):
        assert s.format == "csv" and s.table.n_rows == 2 and s.table.n_cols == 2
    assert parse(text, "table").format == "html"  # no suffix, no format: content decides


def test_html_spans_are_clamped_as_html_does():
    s = parse(
        "<table><tr><td colspan=5000 rowspan=99999>x</td></tr><tr><td>y</td></tr></table>", "table", format="html"
    )
    cell = int(np.flatnonzero(s.labels != "row")[1])
    assert s.attrs["colspan"][cell] == 1000  # HTML clamps colspan to 1000
    assert s.attrs["rowspan"][cell] == 2  # rowspan clamps to 65534, then to the end of the row group
    assert s.table.n_cols == 1001


def test_html_huge_spans_fail_fast():
    html = "<table>" + "<tr><td rowspan=65534 colspan=1000>x</td>" * 4000 + "</table>"  # ~170 KB
    t = time.perf_counter()
    with pytest.raises(LimitError) as e:
        parse(html, "table", format="html")
    assert e.value.limit == "max_table_cells"
    assert time.perf_counter() - t < 5
    wide = "<table><tr>" + "<td colspan=1000>x" * 2000 + "</table>"
    with pytest.raises(LimitError, match="max_table_cells"):
        parse(wide, "table", format="html")
    ok = "<table><tr>" + "<td colspan=1000>x" * 2000 + "</table>"
    assert parse(ok, "table", format="html", limits=Limits(max_table_cells=2_000_000)).table.n_cols == 2_000_000


def test_csv_ragged_grid_counts_padded_cells():
    text = "," * 2000 + "\n" + "a\n" * 2000  # 2001 columns × 2001 rows once padded
    with pytest.raises(LimitError, match=r"2001 rows × 2001 columns") as e:
        parse(text, "table", format="csv")
    assert e.value.limit == "max_table_cells" and e.value.value == 2001 * 2001


def test_graph_node_ids_vs_edges():
    with pytest.raises(LimitError) as e:
        parse([[0], [10_000_000]], "graph")  # a 30-byte edge list naming node 10,000,000
    assert e.value.limit == "max_graph_nodes_per_edge"
    s = parse([[0], [4999]], "graph", num_nodes=5000)  # said explicitly: allowed
    assert s.num_nodes == 5000
    assert parse([[0], [1000]], "graph").num_nodes == 1001  # small graphs never trip it
    edges = np.stack([np.arange(100), np.arange(100) * 60])  # 100 edges: up to 64 * 101 nodes
    assert parse(edges, "graph").num_nodes == 5941
    with pytest.raises(LimitError, match="max_nodes"):
        parse([[0], [1]], "graph", num_nodes=10**9)


def test_bad_options_are_spec_errors():
    with pytest.raises(SpecError):
        parse("a,b", "table", format="csv", delimiter="ab")
    with pytest.raises(SpecError):
        parse("x", "nonsense")
    with pytest.raises(SpecError):
        parse("1", "grammar", grammar=ARITH, parser="cyk")


# ------------------------------------------------------------------ memory bound
WORST_CASES = r"""
import json, resource, sys
from structpos.exceptions import StructposError
from structpos.parsers import parse
MiB = 2**20
cases = {
    "html huge spans": ("<table>" + "<tr><td rowspan=65534 colspan=1000>x</td>" * 24000 + "</table>", "table", {"format": "html"}),
    "html wide spans": ("<table><tr>" + "<td colspan=1000>x" * 50000 + "</table>", "table", {"format": "html"}),
    "csv giant row": ("," * 900000, "table", {"format": "csv"}),
    "csv giant row over budget": ("," * (MiB - 10), "table", {"format": "csv"}),
    "csv ragged grid": ("," * 200000 + "\n" + "a\n" * 400000, "table", {"format": "csv"}),
    "json deep": ("[" * (MiB // 2 - 1) + "]" * (MiB // 2 - 1), "json", {}),
    "json wide": ("[" + "0," * (MiB // 2 - 2) + "0]", "json", {}),
    "xml deep": ("<a>" * (MiB // 8) + "</a>" * (MiB // 8), "xml", {}),
    "yaml deep": ("[" * 50000 + "]" * 50000, "yaml", {}),
    "code deep": ("x = " + "(" * 100000 + ")" * 100000 + "\n", "code", {"language": "python"}),
    "code wide": ("x = [" + "1," * 400000 + "]\n", "code", {"language": "python"}),
    "markdown headings": ("# h\n" * (MiB // 4 - 1), "markdown", {}),
    "document dots": ("a" + "." * (MiB - 2), "document", {}),
    "graph sparse ids": ([[0] * 1000, list(range(0, 10**9, 10**6))], "graph", {}),
    "grammar long": (" + ".join(["1"] * 200000), "grammar", {"grammar": 'start: NUMBER ("+" NUMBER)*\n%import common.NUMBER\n%ignore " "'}),
}
for name, (obj, kind, opts) in cases.items():
    size = len(obj.encode()) if isinstance(obj, str) else len(json.dumps(obj))
    assert size < MiB, (name, size)
    try:
        out = parse(obj, kind, **opts)
        res = "ok"
    except StructposError as e:
        res = type(e).__name__ + ":" + getattr(e, "limit", "")
    print(json.dumps({"case": name, "bytes": size, "result": res,
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}), flush=True)
"""


@pytest.mark.slow
def test_worst_inputs_stay_under_1gib():
    pytest.importorskip("lark")
    limit = 2**30
    code = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n" + textwrap.dedent(
        WORST_CASES
    )
    env = {
        "PYTHONPATH": str(REPO),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, proc.stderr[-3000:] + "\n" + proc.stdout[-2000:]
    assert len(rows) == 15
    for r in rows:
        assert not r["result"].startswith("MemoryError"), r
    print("\n" + "\n".join(json.dumps(r) for r in rows))


def test_lalr_parse_stops_at_record_timeout_and_agrees_with_the_untimed_parse(monkeypatch):
    pytest.importorskip("lark")
    import structpos.parsers.grammar as grammar_mod
    from structpos.parsers.grammar import parse_grammar

    big = " + ".join(str(i) for i in range(3000))  # 5,999 tokens
    # the clock is read only every CHECK_EVERY tokens: count the reads to bound the work done past the deadline
    reads = []
    real_passed = grammar_mod.Deadline.passed

    def passed(self):
        reads.append(1)
        return len(reads) >= 3  # the deadline "passes" at the third look

    monkeypatch.setattr(grammar_mod.Deadline, "passed", passed)
    with pytest.raises(LimitError) as e:
        parse_grammar(big, ARITH, name="sum.txt", limits=Limits(record_timeout=60))
    assert e.value.limit == "record_timeout" and "sum.txt at line:col 1:" in str(e.value)
    stopped_at = int(str(e.value).split("line:col 1:")[1].split(":")[0])
    assert stopped_at < len(big) // 2  # stopped after 2 * CHECK_EVERY tokens, far from the end
    assert len(reads) == 3
    monkeypatch.setattr(grammar_mod.Deadline, "passed", real_passed)

    for text in [big, "1 + 22", "1 +", "1 ? 2", "", "7"]:  # timed and untimed agree, errors included
        outcomes = []
        for limits in (Limits(record_timeout=60), Limits(record_timeout=None)):
            try:
                s = parse_grammar(text, ARITH, limits=limits)
                outcomes.append((list(s.labels), s.parent.tolist(), s.start.tolist(), s.end.tolist()))
            except ParseError as err:
                outcomes.append(str(err))
        assert outcomes[0] == outcomes[1], text


# ------------------------------------------------------------------ decoding: one function for the API and the CLI
@pytest.mark.parametrize("codec", ["rot13", "hex", "zlib_codec", "base64"])
@pytest.mark.parametrize("shebang", [False, True])
def test_non_text_coding_line_is_a_parse_error_naming_its_line_in_api_and_cli(tmp_path, codec, shebang):
    from structpos.pipeline.records import read_records

    line = 2 if shebang else 1
    src = ("#!/usr/bin/env python\n" if shebang else "") + f"# -*- coding: {codec} -*-\nx = 1\n"
    path = tmp_path / "legacy.py"
    path.write_bytes(src.encode("ascii"))
    with pytest.raises(ParseError) as api:  # was a LookupError from bytes.decode
        parse(path, "code")
    assert api.value.input_name == str(path) and api.value.position == f"line {line}"
    assert f"{codec!r} is not a text encoding" in str(api.value)
    (rec,) = read_records(tmp_path, kind="code")  # the CLI's reader: the same decoding, the same error
    assert rec.read_error is not None and rec.read_error[0] == "ParseError"
    with pytest.raises(ParseError) as named:
        parse(path, "code", name="legacy.py")
    assert rec.read_error[1] == str(named.value) and rec.position == f"line {line}"


@pytest.mark.parametrize(
    "name, data, kind",
    [
        ("legacy.py", "# coding: latin-1\ns = 'café'\n".encode("latin-1"), "code"),
        ("bom.json", b"\xef\xbb\xbf" + '{"é": 1}'.encode(), "json"),
        ("wide.xml", "\ufeff<a>é</a>".encode("utf-16"), "xml"),
        ("decl.xml", "<?xml version='1.0' encoding='latin-1'?><a>é</a>".encode("latin-1"), "xml"),
        ("plain.json", b'{"a": [1, 2]}', "json"),
    ],
)
def test_cli_reader_and_api_decode_files_the_same(tmp_path, name, data, kind):
    from structpos.pipeline.records import read_records

    (tmp_path / name).write_bytes(data)
    (rec,) = read_records(tmp_path, kind=kind)
    assert rec.read_error is None
    api = parse(tmp_path / name, kind)
    assert rec.payload == api.source  # the text both read; the CLI used to read UTF-8 (BOM kept, Latin-1 refused)
    again = parse(rec.payload, kind, language="python") if kind == "code" else parse(rec.payload, kind)
    assert again.labels.tolist() == api.labels.tolist() and again.start.tolist() == api.start.tolist()


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("kind", ["json", "yaml", "xml", "markdown"])
def test_wide_text_without_bom_says_so(codec, kind):
    text = {"json": '{"a": [1, 2]}', "yaml": "a: [1, 2]\n", "xml": "<a><b/></a>", "markdown": "# T\n\nx\n"}[kind]
    with pytest.raises(ParseError, match=rf"looks like {codec.upper()} without a byte-order mark") as e:
        parse(text.encode(codec), kind, name="in")
    assert e.value.input_name == "in"
    with_bom = parse(("\ufeff" + text).encode(codec), kind)  # the same bytes after a BOM: they parse
    assert with_bom.source == text and with_bom.labels.tolist() == parse(text, kind).labels.tolist()


def test_nul_bytes_that_are_not_a_wide_pattern_are_text():
    from structpos.parsers._input import decode_bytes

    for data in (b"ab\x00c", b"a\x00", b'{"a": 1}\x00\x00', b"\x00\x00\x00"):
        assert decode_bytes(data, "x") == data.decode("utf-8")


TEXT_KINDS = ["code", "json", "xml", "yaml", "conllu", "document", "markdown", "grammar"]


@pytest.mark.parametrize("kind", TEXT_KINDS)
@pytest.mark.parametrize("obj", [None, 123, 4.5, ["a"]])
def test_wrong_input_type_is_an_input_error_naming_the_accepted_types(kind, obj):
    from structpos.exceptions import InputError

    if kind == "json" and obj is not None:
        assert parse(obj, kind).format == "json-object"  # documented: a Python value is serialized
        return
    opts = {"code": {"language": "python"}, "grammar": {"grammar": ARITH}}.get(kind, {})
    with pytest.raises(InputError, match=r"str, bytes or a path|None") as e:  # was a TypeError, or a null tree
        parse(obj, kind, name="rec-1", **opts)
    assert e.value.input_name == "rec-1" and not isinstance(e.value, TypeError)


def test_json_none_is_refused_unless_read_as_an_object():
    from structpos.exceptions import InputError

    with pytest.raises(InputError, match="<json>: the input is None"):
        parse(None, "json")
    s = parse(None, "json", from_object=True)
    assert s.labels.tolist() == ["null"] and s.source == "null"


@pytest.mark.parametrize("fmt", [None, "csv", "tsv", "html", "rows", "dataframe"])
@pytest.mark.parametrize("obj", [None, 7, 2.5, {"a": 1}, object()])
def test_a_table_of_no_table_type_is_an_input_error(fmt, obj):
    from structpos.exceptions import InputError

    with pytest.raises(InputError, match=r"^t: the input must be .*, not ") as e:  # was TypeError / AttributeError
        parse(obj, "table", format=fmt, name="t")
    assert e.value.input_name == "t"


def test_a_row_that_is_not_a_list_of_cells_is_named():
    with pytest.raises(ParseError, match=r"t at row 1: a row must be a list of cells, not int"):
        parse([["a", "b"], 5], "table", format="rows", name="t")
    s = parse([("a", "b"), np.array([1, 2])], "table", format="rows")  # tuples and arrays are rows
    assert s.table.grid == [["a", "b"], ["1", "2"]]


@pytest.mark.parametrize("family, n", [("decoding", 200), ("input-types", 600)])
def test_fuzz_families_of_the_input_space_find_nothing(family, n):
    # benchmarks/fuzz.py's input-space families, briefly: encodings and declared codecs (the CLI reader
    # and the API must agree), odd objects and options; every outcome a Structure or a StructposError
    import importlib.util

    spec = importlib.util.spec_from_file_location("structpos_fuzz", REPO / "benchmarks" / "fuzz.py")
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    import signal

    handler = signal.getsignal(signal.SIGALRM)
    try:
        result = fuzz.run_parser(family, n, seed=1, timeout=60)
    finally:
        signal.signal(signal.SIGALRM, handler)  # run_parser installs its own
    assert result["other"] == 0, result["findings"][:3]
    assert result["ok"] > n // 10 and result["structpos_errors"] > n // 10  # both outcomes are exercised
