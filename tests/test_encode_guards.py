"""``structpos encode`` options checked up front: limits, coordinate spec bounds, tokenizer, kinds.

Each bad option must fail before any record is read, in one line naming the option, with exit
status 2 (never 3, "internal error"), and leave no output directory behind.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import structpos
from structpos.cli import main
from structpos.coords import COORDS, MAX_K, MAX_MAGLAP_Q, MAX_TREE_DEPTH, MAX_TREE_WIDTH, compute, validate_spec
from structpos.exceptions import SpecError
from structpos.limits import Limits


def _src(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": '{"a": [1, 2]}'}) + "\n")
    return src


def _refused(tmp_path: Path, capsys, *extra: str) -> str:
    """Run ``encode`` with ``extra``; it must exit 2 in one line without creating the output."""
    out = tmp_path / "enc"
    code = main(["encode", str(_src(tmp_path)), "--kind", "json", "--out", str(out), "--workers", "0", *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("structpos: error: ") and err.count("\n") == 1, err
    assert not out.exists()  # refused before the run started
    return err


@pytest.mark.parametrize(
    "args, named",
    [
        (["--record-timeout", "nan"], "--record-timeout"),
        (["--record-timeout", "inf"], "--record-timeout"),
        (["--record-timeout", "-inf"], "--record-timeout"),
        (["--record-timeout", "0"], "--record-timeout"),
        # finite but past the platform's timer (OverflowError in setitimer per record, found by fuzz.py --args cli)
        (["--record-timeout", "1e308"], "--record-timeout"),
        (["--record-timeout", "99999999999999999999"], "--record-timeout"),
        (["--limit", "record_timeout=1e308"], "--limit record_timeout"),
        (["--limit", "record_timeout=inf"], "--limit record_timeout"),
        (["--limit", "record_timeout=nan"], "--limit record_timeout"),
        (["--limit", "record_timeout=-1"], "--limit record_timeout"),
        (["--limit", "max_nodes=inf"], "--limit max_nodes"),
        (["--limit", "max_memory_bytes=-5"], "--limit max_memory_bytes"),
    ],
)
def test_non_finite_or_non_positive_limits_are_refused_naming_the_option(tmp_path, capsys, args, named):
    assert named in _refused(tmp_path, capsys, *args)


@pytest.mark.parametrize("field", ["record_timeout", "max_nodes", "max_memory_bytes"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0, -1])
def test_limits_refuse_non_finite_and_non_positive_values_in_the_api(field, value):
    with pytest.raises(SpecError, match=f"limit {field}"):
        Limits(**{field: value})
    assert getattr(Limits(**{field: None}), field) is None  # None still turns the limit off


def test_record_timeout_bound_is_inclusive_and_none_still_turns_it_off():
    from structpos.limits import MAX_RECORD_TIMEOUT

    assert Limits(record_timeout=MAX_RECORD_TIMEOUT).record_timeout == MAX_RECORD_TIMEOUT
    with pytest.raises(SpecError, match="at most"):
        Limits(record_timeout=MAX_RECORD_TIMEOUT * 1.5)
    assert Limits().with_overrides({"record_timeout": "none"}).record_timeout is None


def test_finite_limits_still_work_end_to_end(tmp_path, capsys):
    out = tmp_path / "enc"
    argv = ["encode", str(_src(tmp_path)), "--kind", "json", "--out", str(out), "--workers", "0"]
    assert main(argv + ["--record-timeout", "30", "--limit", "max_nodes=10", "--no-progress"]) == 0
    assert json.loads((out / "manifest.json").read_text())["totals"]["encoded"] == 1


@pytest.mark.parametrize(
    "family, at_max, past_max",
    [
        ("tree", f"tree:{MAX_TREE_DEPTH}", f"tree:{MAX_TREE_DEPTH + 1}"),
        ("tree", f"tree:8x{MAX_TREE_WIDTH}", f"tree:8x{MAX_TREE_WIDTH + 1}"),
        ("lap", f"lap:{MAX_K}", f"lap:{MAX_K + 1}"),
        ("rw", f"rw:{MAX_K}", f"rw:{MAX_K + 1}"),
        ("maglap", f"maglap:{MAX_K}", f"maglap:{MAX_K + 1}"),
        ("maglap", f"maglap:2:{MAX_MAGLAP_Q}", "maglap:2:1.0001"),
        ("peg", f"peg:{MAX_K}", f"peg:{MAX_K + 1}"),
        ("rwdir", f"rwdir:{MAX_K}", f"rwdir:{MAX_K + 1}"),
        ("rwdir_pair", f"rwdir_pair:{MAX_K}", f"rwdir_pair:{MAX_K + 1}"),
        ("anchor", f"anchor:{MAX_K}", f"anchor:{MAX_K + 1}"),
    ],
)
def test_spec_parameters_are_bounded_exactly_at_the_documented_maximum(family, at_max, past_max):
    assert validate_spec(at_max)[0][0] == family
    with pytest.raises(SpecError) as e:
        validate_spec(past_max)
    assert str(e.value).startswith(past_max + ":")


@pytest.mark.parametrize(
    "spec",
    [
        "tree:100000000x100000000",
        "rw:100000000",
        "lap:1000000000",
        "maglap:2:1e308",
        "maglap:2:-0.5",
        "peg:99999999999999999999",
        "rwdir_pair:100000000",
        "anchor:100000000",
    ],
)
def test_huge_spec_parameters_fail_up_front_in_the_cli(tmp_path, capsys, spec):
    err = _refused(tmp_path, capsys, "--coords", spec)
    assert f"--coords {spec}:" in err


CUTOFF_FAMILIES = {"spd"}
"""Families whose integer argument is a cutoff (no array grows with it): any value is fine."""


@pytest.mark.parametrize("name", sorted(COORDS.entries))
def test_every_integer_sized_family_refuses_a_huge_argument(name):
    """A family that takes an integer (``name:8``) must refuse ``name:100000000`` up front unless the
    integer is a cutoff; otherwise a record allocates ``O(argument)`` and fails late (fuzz seed 7:
    ``peg:100000000`` reached the record as a MemoryError)."""
    try:
        COORDS[name].validate("8")
    except SpecError:
        return  # takes no integer
    if name in CUTOFF_FAMILIES:
        COORDS[name].validate("100000000")
        return
    with pytest.raises(SpecError):
        COORDS[name].validate("100000000")


def test_maglap_q_range_holds_every_distinct_operator():
    """Period 1 in ``q``, and ``q`` / ``1 - q`` conjugate: the same spectrum, so ``[0, 1]`` loses nothing."""
    s = structpos.parse(np.array([[0, 1, 2, 3, 1], [1, 2, 3, 0, 3]]), "graph", num_nodes=4, directed=True)
    ev = {q: compute(s, f"maglap:3:{q}")["maglap_eigvals"][0] for q in ("0", "1", "0.3", "0.7")}
    np.testing.assert_allclose(ev["0"], ev["1"], atol=1e-9)
    np.testing.assert_allclose(ev["0.3"], ev["0.7"], atol=1e-9)
    assert not np.allclose(ev["0"], ev["0.3"])  # the potential does change the operator inside the range


@pytest.mark.parametrize("content", [b"not json", b'{"version": "1.0"}', b"\x00\xff" * 10])
def test_a_bad_tokenizer_file_is_one_error_naming_it(tmp_path, capsys, content):
    tok = tmp_path / "tokenizer.json"
    tok.write_bytes(content)
    err = _refused(tmp_path, capsys, "--tokenizer", str(tok))
    assert f"{tok}: not a tokenizer.json" in err


@pytest.mark.parametrize(
    "args, named",
    [
        (["--kind", "code", "--language", "cobol"], "--language: unknown language 'cobol'"),
        (["--language", "python,cobol"], "--language: unknown language 'cobol'"),
        (["--kind", "grammar"], "--parser-opt: --kind grammar needs grammar="),
        (["--kind", "grammar", "--parser-opt", "grammar=start: (("], "--parser-opt grammar: bad grammar"),
        (["--kind", "grammar", "--parser-opt", "grammar=%import nosuch.MOD"], "--parser-opt grammar: bad grammar"),
        (["--kind", "grammar", "--parser-opt", 'grammar=start: "a"', "--parser-opt", "parser=cyk"], "--parser-opt"),
        (["--kind", "json", "--parser-opt", "bogus=1"], "--parser-opt: json parser has no option 'bogus'"),
    ],
)
def test_languages_grammars_and_parser_options_are_checked_before_any_record(tmp_path, capsys, args, named):
    out = tmp_path / "enc"
    argv = ["encode", str(_src(tmp_path)), "--out", str(out), "--workers", "0", *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err, err
    assert not out.exists()


def test_a_good_grammar_and_language_still_encode(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["aa", "aab"]))
    out = tmp_path / "enc"
    grammar = 'start: A+\nA: "a"'
    argv = ["encode", str(src), "--kind", "grammar", "--parser-opt", f"grammar={grammar}", "--out", str(out)]
    assert main(argv + ["--workers", "0", "--no-progress"]) == 0
    m = json.loads((out / "manifest.json").read_text())["totals"]
    assert (m["encoded"], m["errors"]) == (1, 1)  # "aab" is the record's own fault, found per record


@pytest.mark.parametrize(
    "graph, expect",
    [
        ({"edge_index": "abc"}, "edge_index"),
        ({"edge_index": [[0, 1], [2]]}, "edge_index"),
        ({"edge_index": [[1e30], [0]]}, "edge_index"),
        ({"edge_index": None}, "edge_index"),
        ({"edge_index": [[0, 1], [1, 0]], "bogus": 1}, "unknown key 'bogus'"),
        ({"edge_index": [[0, 1], [1, 2]], "node_text": 5}, "graph payload object"),
        ({"nodes": [0, 1]}, "needs an 'edge_index' entry"),
    ],
)
def test_graph_jsonl_records_fail_with_parse_error_like_the_api(tmp_path, graph, expect):
    from structpos.pipeline import encode_to_parquet, read_errors

    src = tmp_path / "g.jsonl"
    good = {"edge_index": [[0, 1, 1, 2], [1, 0, 2, 1]], "num_nodes": 3}
    empty = {"edge_index": [], "num_nodes": 2}  # no edges: isolated nodes
    src.write_text("".join(json.dumps({"text": g}) + "\n" for g in [good, graph, empty]))
    s = encode_to_parquet(src, tmp_path / "out", kind="graph", coords="lap:2", workers=0, progress=False)
    assert (s.records, s.encoded, s.errors) == (3, 2, 1)
    (e,) = read_errors(tmp_path / "out")
    assert e["id"] == "2" and e["error_type"] == "ParseError" and e["stage"] == "parse", e
    assert expect in e["message"]
    if isinstance(graph.get("edge_index"), list) and "bogus" not in graph and "node_text" not in graph:
        with pytest.raises(structpos.exceptions.ParseError):  # the API's answer for the same edge_index
            structpos.parse(graph["edge_index"], "graph")


@pytest.mark.parametrize("spec", ["tree", "tree:7x3", "lap:3", "rw:5", "spd", "spd:2", "resistance", "maglap:3:0.1"])
def test_estimated_bytes_is_what_compute_allocates(spec):
    from structpos.coords import estimated_bytes

    rng = np.random.default_rng(0)
    for n in (1, 4, 17):
        value = {"k": [list(range(int(rng.integers(0, 4)))) for _ in range(n)]}
        s = structpos.parse(json.dumps(value), "json")
        out = compute(s, spec)
        assert estimated_bytes(spec, s.num_nodes) == sum(np.asarray(a).nbytes for a in out.values())


def test_a_record_whose_coordinates_exceed_max_memory_bytes_fails_before_allocating(tmp_path):
    from structpos.pipeline import encode_to_parquet, read_errors, read_output

    src = tmp_path / "in.jsonl"
    small, big = json.dumps([1, 2]), json.dumps(list(range(200)))  # 3 and 201 nodes
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in [small, big, small]))
    per_node = MAX_TREE_DEPTH * 2 + 5 * 8 + 1  # tree:4096 -> int16 root paths, five int64 columns, one flag
    limit = 100 * per_node  # room for 100 nodes' coordinates
    s = encode_to_parquet(
        src,
        tmp_path / "out",
        kind="json",
        coords=f"tree:{MAX_TREE_DEPTH}",
        limits=Limits(max_memory_bytes=limit),
        workers=0,
        progress=False,
    )
    assert (s.records, s.encoded, s.errors) == (3, 2, 1)
    (e,) = read_errors(tmp_path / "out")
    assert e["id"] == "2" and e["stage"] == "memory" and e["error_type"] == "LimitError"
    assert f"{201 * per_node} bytes of coordinates" in e["message"] and "max_memory_bytes" in e["message"]
    assert read_output(tmp_path / "out").column("num_nodes").to_pylist() == [3, 3]


def _refusing_rows_to_table(monkeypatch, refuse):
    """``rows_to_table`` of the batch function's module raising ArrowMemoryError when ``refuse(ids)`` says so."""
    import pyarrow as pa

    import structpos.pipeline.adapters as encode_mod

    real = encode_mod.rows_to_table

    def rows_to_table(rows, *args, **kwargs):
        ids = {r["id"] for r in rows if r.get("num_nodes") is not None}
        if refuse(ids):
            raise pa.ArrowMemoryError(f"malloc of size {2**40} failed")
        return real(rows, *args, **kwargs)

    monkeypatch.setattr(encode_mod, "rows_to_table", rows_to_table)


def test_encode_batch_turns_a_record_whose_rows_cannot_be_stored_into_an_error_row(monkeypatch):
    from structpos.pipeline import EncodeBatch

    fn = EncodeBatch("json", "tree")
    texts = ["[1]", "[2, [3]]", '{"a": 4}']
    reference = fn({"text": texts})
    _refusing_rows_to_table(monkeypatch, lambda ids: "1" in ids)
    out = fn({"text": texts})
    assert out.column("id").to_pylist() == ["0", "1", "2"]
    assert out.column("error_type").to_pylist() == [None, "ArrowMemoryError", None]
    assert "cannot store its rows" in out.column("error").to_pylist()[1]
    keep = [0, 2]
    assert (
        out.take(keep)
        .select(["id", "num_nodes", "parent"])
        .equals(reference.take(keep).select(["id", "num_nodes", "parent"]))
    )


def test_encode_batch_too_large_for_one_table_says_to_shrink_the_batch(monkeypatch):
    from structpos.exceptions import InputError
    from structpos.pipeline import EncodeBatch

    fn = EncodeBatch("json", "tree")
    _refusing_rows_to_table(monkeypatch, lambda ids: len(ids) > 1)
    with pytest.raises(InputError, match="a batch of 3 records do not fit one Arrow table.*smaller batch size"):
        fn({"text": ["[1]", "[2]", "[3]"]})
