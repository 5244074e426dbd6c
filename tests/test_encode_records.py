"""Record readers and the numpy -> Arrow list-column conversion of the encode pipeline."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structpos.exceptions import ParseError
from structpos.parsers import parse
from structpos.pipeline.arrow import list_column
from structpos.pipeline.records import conllu_sentences, count_records, read_records


# ------------------------------------------------------------------ arrow columns
@st.composite
def ragged_arrays(draw):
    ndim = draw(st.integers(1, 3))
    tail = tuple(draw(st.lists(st.integers(0, 3), min_size=ndim - 1, max_size=ndim - 1)))
    dtype = draw(st.sampled_from([np.int64, np.float32, np.float64, np.bool_]))
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()) and draw(st.booleans()):
            rows.append(None)
            continue
        n = draw(st.integers(0, 5))
        rows.append(
            np.arange(n * int(np.prod(tail, dtype=np.int64)), dtype=np.int64).reshape((n,) + tail).astype(dtype)
        )
    return rows


@settings(max_examples=60, deadline=None)
@given(ragged_arrays())
def test_list_column_round_trips_every_row(rows):
    col = list_column(rows)
    assert len(col) == len(rows)
    for got, a in zip(col.to_pylist(), rows):
        if a is None:
            assert got is None
        else:
            assert got == a.tolist()


def test_list_column_keeps_dtype_and_nesting():
    col = list_column([np.ones((2, 3), np.float32), np.zeros((0, 3), np.float32)])
    assert col.type == pa.list_(pa.list_(pa.float32()))
    assert col.to_pylist() == [[[1.0] * 3] * 2, []]


def test_list_column_rejects_mixed_rank():
    with pytest.raises(ValueError, match="same rank"):
        list_column([np.zeros(3), np.zeros((3, 2))])


# ------------------------------------------------------------------ readers
def test_jsonl_records_ids_positions_and_read_errors(tmp_path):
    lines = [
        json.dumps({"text": "[1]", "key": "a"}),
        "",
        "{not json",
        json.dumps([1, 2]),
        json.dumps({"other": 1, "key": "d"}),
        json.dumps({"text": {"x": 1}, "key": "e"}),
    ]
    p = tmp_path / "in.jsonl"
    p.write_text("\n".join(lines) + "\n")
    recs = list(read_records(p, kind="json"))
    assert [r.id for r in recs] == ["1", "3", "4", "5", "6"]  # line numbers; the blank line is no record
    assert count_records(p) == len(recs)
    assert [r.read_error is None for r in recs] == [True, False, False, False, True]
    assert recs[1].read_error[0] == "ParseError" and "in.jsonl line 3" in recs[1].read_error[1]
    assert [r.read_error[0] for r in recs[2:4]] == ["InputError", "InputError"]
    assert "in.jsonl line 5" in recs[3].read_error[1] and "'text'" in recs[3].read_error[1]
    keyed = list(read_records(p, kind="json", id_field="key"))
    assert [r.id for r in keyed if r.read_error is None] == ["a", "e"]


def test_parquet_records(tmp_path):
    p = tmp_path / "in.parquet"
    pq.write_table(pa.table({"body": ["[1]", None, "{}"], "name": ["x", "y", "z"]}), p)
    recs = list(read_records(p, kind="json", field="body"))
    assert [r.id for r in recs] == ["0", "1", "2"]
    assert recs[1].read_error is not None and "row 1" in recs[1].read_error[1]
    assert [r.id for r in read_records(p, kind="json", field="body", id_field="name")] == ["x", "y", "z"]
    assert count_records(p) == 3
    with pytest.raises(ValueError, match="no column"):
        list(read_records(p, kind="json", field="missing"))


def test_null_ids_are_error_records_not_the_id_none(tmp_path):
    p = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["[1]", "[2]", "[3]", "[4]"], "id": ["a", None, "None", None]}), p)
    recs = list(read_records(p, kind="json", id_field="id"))
    good = [r.id for r in recs if r.read_error is None]
    assert good == ["a", "None"]  # a real "None" keeps its id; str(None) no longer collides with it
    bad = [r for r in recs if r.read_error is not None]
    assert [(r.id, r.position) for r in bad] == [("1", "row 1"), ("3", "row 3")]  # their row numbers
    assert all(r.read_error[0] == "ParseError" and "id 'id' is null" in r.read_error[1] for r in bad)
    j = tmp_path / "in.jsonl"
    j.write_text("\n".join(json.dumps({"text": "[1]", "id": i}) for i in ["a", None, "None"]) + "\n")
    recs = list(read_records(j, kind="json", id_field="id"))
    assert [(r.id, r.read_error is None) for r in recs] == [("a", True), ("2", False), ("None", True)]


@pytest.mark.parametrize("keep", [0, 0.5, 0.9])
def test_an_unreadable_parquet_input_is_named(tmp_path, keep):
    from structpos.exceptions import InputError

    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"text": [f"[{i}]" for i in range(100)]}), good)
    data = good.read_bytes()
    p = tmp_path / "cut.parquet"
    p.write_bytes(data[: int(len(data) * keep)])  # truncated (empty: no footer at all)
    with pytest.raises(InputError, match=r"cut\.parquet: cannot read it as Parquet") as e:
        list(read_records(p, kind="json"))  # was a bare pyarrow error that named no file
    assert e.value.input_name == str(p)
    with pytest.raises(InputError, match=r"cut\.parquet"):
        count_records(p)


def test_directory_records_sorted_with_kind_from_suffix(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "t.tsv").write_text("a\tb\n1\t2\n")
    (tmp_path / "a.json").write_text('{"k": 1}')
    (tmp_path / "notes.unknown").write_text("?")
    (tmp_path / "bad.json").write_bytes(b'{"k": "\xff"}')
    recs = list(read_records(tmp_path))
    assert [r.id for r in recs] == ["a.json", "b/t.tsv", "bad.json"]
    assert [r.kind for r in recs] == ["json", "table", "json"]
    assert recs[1].format == "tsv"
    with pytest.raises(ParseError) as api:  # the reader decodes as the parser does, and fails the same way
        parse(tmp_path / "bad.json", "json", name="bad.json")
    assert recs[2].read_error == ("ParseError", str(api.value)) and recs[2].position == "byte 7"
    assert [r.id for r in read_records(tmp_path, kind="table")] == ["b/t.tsv"]
    assert [r.id for r in read_records(tmp_path, kind="json", glob="*.unknown")] == ["notes.unknown"]


def test_conllu_sentences_match_the_conllu_library(shared_data):
    conllu = pytest.importorskip("conllu")
    path = shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"
    text = path.read_text(encoding="utf-8")
    ours = list(conllu_sentences(text))
    sent_ids = [line.split("=", 1)[1].strip() for line in text.splitlines() if line.startswith("# sent_id")]
    assert [s for s, _, _ in ours] == sent_ids
    head = "".join(block + "\n" for _, _, block in ours[:300])  # the library is slow: check a prefix
    assert [t.metadata["sent_id"] for t in conllu.parse(head)] == sent_ids[:300]
    lines = text.splitlines()
    for sent_id, lineno, block in ours[:50]:
        assert block.splitlines()[0] == lines[lineno - 1]
    recs = list(read_records(path))
    assert [r.id for r in recs] == [f"en_ewt-ud-dev.conllu#{s}" for s, _, _ in ours]
    assert count_records(path) is None  # one file, many sentences: not known without reading


def test_string_array_nulls_and_unicode():
    from structpos.pipeline.arrow import string_array

    values = ["a", None, "", "é∑😀", None, "x" * 1000]
    assert string_array(values).to_pylist() == values
    assert string_array([]).to_pylist() == []


def test_encoding_a_shard_does_not_import_pandas(stdlib, tmp_path):
    """pyarrow's ``pa.array`` imports pandas (~1 s CPU per fresh worker); shards avoid it."""
    import subprocess
    import sys

    code = (
        "import sys; from structpos.pipeline import encode_to_parquet; "
        f"encode_to_parquet({str(stdlib / 'json')!r}, {str(tmp_path / 'o')!r}, kind='code', coords='tree', workers=0, progress=False); "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ hostile JSONL lines
_json_texts = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
).map(json.dumps)
_line = st.one_of(
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b" ")),  # random bytes, often not UTF-8
    _json_texts.map(lambda t: json.dumps({"text": t}).encode()),  # good records
    st.sampled_from(
        [b'{"\\ud800": 1, "text": "[1]"}', b'{"text": "[\\"\\udfff\\"]"}', b'{"text": "\xff"}', b"[]", b"{}"]
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_line, max_size=8))
def test_any_jsonl_bytes_give_one_record_per_line_and_in_equals_out_plus_errors(tmp_path_factory, lines):
    from structpos.pipeline import EncodeOptions, encode_records

    p = tmp_path_factory.mktemp("h") / "in.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    recs = list(read_records(p, kind="json"))
    expected = [str(i) for i, line in enumerate(lines, 1) if line.strip()]  # blank lines are no records
    assert [r.id for r in recs] == expected
    rows, errors, n = encode_records(recs, EncodeOptions("json", "tree"))
    assert n == len(expected) and sorted([r["id"] for r in rows] + [e["id"] for e in errors]) == sorted(expected)
    for r in rows:  # whatever was encoded is valid text end to end
        r["id"].encode("utf-8")
        for label in r["labels"]:
            str(label).encode("utf-8")


def test_jsonl_ids_that_are_not_strings_or_numbers_are_errors(tmp_path):
    """``str(True)`` would be the id "True" and ``str({...})`` Python text: like a null id, an error."""
    lines = [
        {"k": "a", "text": "[1]"},
        {"k": 7, "text": "[2]"},
        {"k": True, "text": "[3]"},
        {"k": {"x": 1}, "text": "[4]"},
    ]
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    recs = list(read_records(p, kind="json", id_field="k"))
    assert [r.id for r in recs[:2]] == ["a", "7"] and recs[0].read_error is None is recs[1].read_error
    assert [r.read_error[0] for r in recs[2:]] == ["InputError", "InputError"]
    assert "must be a string or a number" in recs[2].read_error[1]


def test_a_failed_atomic_write_leaves_no_temporary_file_and_names_the_file(tmp_path, monkeypatch):
    import errno
    import os

    from structpos.pipeline import shard_io

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    target = tmp_path / "manifest.json"
    with pytest.raises(OSError) as e:
        shard_io.atomic_write_bytes(target, b"{}")
    assert e.value.filename == str(target) and e.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ payloads that are not text
# The CLI's readers follow the rule of EncodeBatch (structpos.pipeline.payloads): json would otherwise read
# the integer 1 or the boolean true as a one-node document.
SCALAR_LINES = [
    ({"id": "a", "text": 1}, "in.jsonl line 1: payload 'text' is of type int (1), not text or bytes"),
    ({"id": "b", "text": True}, "in.jsonl line 2: payload 'text' is of type bool (True), not text or bytes"),
    ({"id": "c", "text": '{"x": 1}'}, None),
    ({"id": "d", "text": None}, "in.jsonl line 4: payload 'text' is null"),
    ({"id": "e", "text": [1, 2]}, None),  # a JSON array: a payload of the json kind
    ({"id": "f", "text": 2.5}, "in.jsonl line 6: payload 'text' is of type float (2.5), not text or bytes"),
    ({"id": "g", "text": {"x": [1]}}, None),  # a JSON object, as a graph object for --kind graph
]


def test_a_jsonl_payload_that_is_a_number_or_a_boolean_is_the_lines_input_error(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(line) + "\n" for line, _ in SCALAR_LINES))
    recs = list(read_records(p, kind="json", id_field="id"))
    assert [r.id for r in recs] == [line["id"] for line, _ in SCALAR_LINES]
    assert [r.read_error for r in recs] == [None if m is None else ("InputError", m) for _, m in SCALAR_LINES]
    assert [r.position for r in recs] == [f"line {i}" for i in range(1, len(SCALAR_LINES) + 1)]
    assert [r.payload for r in recs if r.read_error is None] == ['{"x": 1}', [1, 2], {"x": [1]}]


@pytest.mark.parametrize(
    "column, shown",
    [
        (pa.array([1, 2], pa.int64()), ["int (1)", "int (2)"]),
        (pa.array([1.5, 0.25]), ["float (1.5)", "float (0.25)"]),
        (pa.array([True, False]), ["bool (True)", "bool (False)"]),
    ],
)
def test_a_parquet_text_column_of_numbers_is_an_input_error_per_row(tmp_path, column, shown):
    p = tmp_path / "in.parquet"
    pq.write_table(pa.table({"name": ["x", "y", "z"], "text": pa.concat_arrays([column, pa.nulls(1, column.type)])}), p)
    recs = list(read_records(p, kind="json", id_field="name"))
    assert [r.id for r in recs] == ["x", "y", "z"]  # the id column still names them
    assert [r.read_error for r in recs] == [
        ("InputError", f"in.parquet row 0: payload 'text' is of type {shown[0]}, not text or bytes"),
        ("InputError", f"in.parquet row 1: payload 'text' is of type {shown[1]}, not text or bytes"),
        ("InputError", "in.parquet row 2: payload 'text' is null"),
    ]
    assert [r.position for r in recs] == ["row 0", "row 1", "row 2"]


def test_a_parquet_id_that_is_a_boolean_is_an_error_as_in_jsonl(tmp_path):
    p = tmp_path / "in.parquet"
    pq.write_table(pa.table({"k": [True, None], "text": ["[1]", "[2]"]}), p)
    recs = list(read_records(p, kind="json", id_field="k"))
    assert [(r.id, r.read_error) for r in recs] == [
        ("0", ("InputError", "in.parquet row 0: id 'k' must be a string or a number, not True")),
        ("1", ("ParseError", "in.parquet row 1: id 'k' is null")),
    ]
    j = tmp_path / "in.jsonl"
    j.write_text('{"k": true, "text": "[1]"}\n{"k": null, "text": "[2]"}\n')
    assert [r.read_error for r in read_records(j, kind="json", id_field="k")] == [
        ("InputError", "in.jsonl line 1: id 'k' must be a string or a number, not True"),
        ("ParseError", "in.jsonl line 2: id 'k' is null"),
    ]


def test_one_payload_rule_for_the_readers_and_encode_batch():
    from structpos.pipeline import adapters, payloads, records

    assert records.payload_problem is payloads.payload_problem is adapters.payload_problem
    assert records.id_problem is payloads.id_problem is adapters.id_problem
