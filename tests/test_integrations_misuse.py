"""Misuse of ``encode_dataset`` (HF ``datasets``) and ``qwen_vl_position_ids``: one structpos error, up front."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos.exceptions import InputError, ShapeError, SpecError
from structpos.integrations.transformers.qwen_vl import qwen_vl_position_ids

datasets = pytest.importorskip("datasets")
datasets.disable_progress_bars()

from structpos.integrations.hf import encode_dataset

TEXTS = ['{"a": 1}', "[1, 2", "[]"]


@pytest.fixture
def ds():
    return datasets.Dataset.from_dict({"text": TEXTS})


# ----------------------------------------------------------------------------- encode_dataset
def test_limits_as_a_mapping_are_the_default_limits_with_overrides(ds):
    out = encode_dataset(ds, "json", "tree", limits={"max_nodes": 2})
    # '{"a": 1}' has 3 nodes: over the limit; "[]" has 1 (a dict used to fail every row with AttributeError)
    errors = list(out["error_type"])
    assert errors[0] == "LimitError" and errors[2] is None
    assert "max_nodes" in out["error"][0]
    assert list(encode_dataset(ds, "json", "tree", limits={"max_nodes": 100})["num_nodes"]) == [3, None, 1]


@pytest.mark.parametrize("limits", [{"bogus_limit": 1}, {"max_nodes": -1}, 5, None])
def test_bad_limits_are_refused_before_any_row(ds, limits):
    with pytest.raises(SpecError, match="limit"):
        encode_dataset(ds, "json", "tree", limits=limits)


@pytest.mark.parametrize("keep_errors", [True, False])
def test_no_kind_and_no_kind_column_is_refused_up_front(ds, keep_errors):
    with pytest.raises(SpecError, match="no input kind"):
        encode_dataset(ds, None, "tree", keep_errors=keep_errors)


@pytest.mark.parametrize("option", ["text_column", "id_column", "kind_column"])
def test_a_missing_column_is_named_with_the_datasets_columns(ds, option):
    kind = None if option == "kind_column" else "json"
    with pytest.raises(InputError, match=rf"no column 'nope' \({option}\); its columns: text"):
        encode_dataset(ds, kind, "tree", **{option: "nope"})


def test_the_default_text_column_must_exist():
    with pytest.raises(InputError, match=r"no column 'text' \(text_column\); its columns: body"):
        encode_dataset(datasets.Dataset.from_dict({"body": ["{}"]}), "json", "tree")


def test_a_dataset_dict_asks_for_one_split(ds):
    with pytest.raises(InputError, match=r"one split.*dataset\['train'\]"):
        encode_dataset(datasets.DatasetDict({"train": ds}), "json", "tree")


@pytest.mark.parametrize("dataset", [[{"text": "[]"}], {"text": ["[]"]}, "[]"])
def test_other_inputs_say_what_is_accepted(dataset):
    with pytest.raises(InputError, match="datasets.Dataset or datasets.IterableDataset"):
        encode_dataset(dataset, "json", "tree")


def test_an_iterable_dataset_streams_the_same_rows(ds):
    ref = encode_dataset(ds, "json", "tree", batch_size=2)
    out = encode_dataset(ds.to_iterable_dataset(), "json", "tree", batch_size=2)
    assert isinstance(out, datasets.IterableDataset) and out.column_names == ref.column_names
    assert list(out) == list(ref)
    with pytest.raises(SpecError, match="num_proc=None"):
        encode_dataset(ds.to_iterable_dataset(), "json", "tree", num_proc=2)
    with pytest.raises(InputError, match="no column 'nope'"):
        encode_dataset(ds.to_iterable_dataset(), "json", "tree", text_column="nope")


def test_a_stream_without_declared_columns_is_checked_per_batch():
    stream = datasets.IterableDataset.from_generator(lambda: iter([{"body": "[1]"}]))
    with pytest.raises(InputError, match="no column 'text'; its columns: body"):
        list(encode_dataset(stream, "json", "tree"))


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": -1}, {"num_proc": 0}, {"keep_errors": "no"}])
def test_bad_map_options_are_refused(ds, kwargs):
    with pytest.raises(SpecError):
        encode_dataset(ds, "json", "tree", **kwargs)


# ----------------------------------------------------------------------------- qwen_vl_position_ids
def test_qwen_vl_refuses_non_integral_coordinates():
    with pytest.raises(ShapeError, match=r"token_coords\['depth'\] must hold whole numbers; given 1.7"):
        qwen_vl_position_ids({"depth": [0, 1.7], "sibling": [0, 0]}, "tree")
    with pytest.raises(ShapeError, match="non-finite"):
        qwen_vl_position_ids({"depth": [0, float("nan")], "sibling": [0, 0]}, "tree")
    with pytest.raises(ShapeError, match=r"holds -2"):
        qwen_vl_position_ids({"depth": [0, -2], "sibling": [0, 0]}, "tree")


@pytest.mark.parametrize("depth", [[0, None], ["a", "b"]])
def test_qwen_vl_refuses_non_numbers(depth):
    with pytest.raises(InputError, match=r"token_coords\['depth'\] must hold numbers"):
        qwen_vl_position_ids({"depth": depth, "sibling": [0, 0]}, "tree")


@pytest.mark.parametrize("offset", [0.5, -1, "3", None])
def test_qwen_vl_offset_must_be_a_non_negative_integer(offset):
    with pytest.raises(SpecError, match="offset"):
        qwen_vl_position_ids({"depth": [0, 1], "sibling": [0, 0]}, "tree", offset=offset)


def test_qwen_vl_output_stays_int64():
    pos = qwen_vl_position_ids({"depth": np.array([0.0, 1.0, -1.0]), "sibling": [0, 1, 0]}, "tree", offset=np.int64(4))
    assert pos.dtype == torch.int64
    assert pos[:, 0].tolist() == [[4, 5, 6], [0, 1, 0], [0, 1, 0]]
    with pytest.raises(InputError, match="mapping"):
        qwen_vl_position_ids([[0, 1], [0, 0]], "tree")


def test_encode_batch_names_a_missing_column_with_a_structpos_error():
    from structpos.pipeline.adapters import EncodeBatch

    for options, missing in (({}, "text"), ({"id_column": "name"}, "name"), ({"kind_column": "k"}, "k")):
        with pytest.raises(InputError, match=rf"no column '{missing}' \(columns: body\)"):
            EncodeBatch("json", "tree", text_column="body" if missing != "text" else "text", **options).records(
                {"body": ["[1]"]}
            )


# ----------------------------------------------------------------------------- payloads that are not text
def _no_row_read(monkeypatch):
    """Make reading any row of a batch fail the test (the empty probe batch of a stream is allowed)."""
    from structpos.pipeline.adapters import EncodeBatch

    real = EncodeBatch.records

    def records(self, batch, indices=None):
        out = real(self, batch, indices)
        assert not out, "a row was read before the text column's type was checked"
        return out

    monkeypatch.setattr(EncodeBatch, "records", records)


@pytest.mark.parametrize(
    "values, declared",
    [([1, 2, 3], "int64"), ([1.5, 2.0], "float64"), ([True, False], "bool"), ([0, 1], "ClassLabel")],
)
@pytest.mark.parametrize("streaming", [False, True])
def test_a_text_column_declared_as_non_text_is_refused_before_any_row(monkeypatch, values, declared, streaming):
    ds = datasets.Dataset.from_dict({"text": values, "body": ["[1]"] * len(values)})
    if declared == "ClassLabel":
        ds = ds.cast_column("text", datasets.ClassLabel(names=["a", "b"]))
    if streaming:
        ds = ds.to_iterable_dataset()
    _no_row_read(monkeypatch)
    message = (
        f"the dataset's column 'text' (text_column) is of type {declared}, not text or bytes; "
        "its text or bytes columns: body"
    )
    for keep_errors in (True, False):
        with pytest.raises(InputError) as info:
            encode_dataset(ds, "json", "tree", keep_errors=keep_errors)
        assert str(info.value) == message


def test_a_non_text_column_named_as_text_column_is_refused_by_its_name():
    ds = datasets.Dataset.from_dict({"label": [1, 2], "blob": [b"[1]", b"[]"]})
    with pytest.raises(InputError, match=r"column 'label' \(text_column\) is of type int64.*columns: blob$"):
        encode_dataset(ds, "json", "tree", text_column="label")
    assert list(encode_dataset(ds, "json", "tree", text_column="blob")["num_nodes"]) == [2, 1]  # bytes still parse


MIXED = ["[1]", 1, 2.5, None, True, [1, 2], {"a": 1}, b"[2]"]
MIXED_ERRORS = [
    None,
    "record 1: payload 'text' is of type int (1), not text or bytes",
    "record 2: payload 'text' is of type float (2.5), not text or bytes",
    "record 3: payload 'text' is null",
    "record 4: payload 'text' is of type bool (True), not text or bytes",
    None,  # a JSON array and a JSON object: the json kind's own payloads
    None,
    None,
]


@pytest.mark.parametrize("fmt", ["dict", "numpy scalars", "pandas"])
def test_encode_batch_makes_a_non_text_payload_its_rows_input_error(fmt):
    from structpos.pipeline.adapters import EncodeBatch

    texts = list(MIXED)
    if fmt == "numpy scalars":
        texts[1:3] = [np.int64(1), np.float64(2.5)]
    batch = {"text": texts}
    if fmt == "pandas":
        pd = pytest.importorskip("pandas")
        batch = pd.DataFrame({"text": pd.Series(texts, dtype=object)})
    out = EncodeBatch("json", "tree")(batch).to_pylist()
    assert [r["id"] for r in out] == [str(i) for i in range(len(MIXED))]
    assert [r["error"] for r in out] == MIXED_ERRORS
    assert [r["error_type"] for r in out] == [None if e is None else "InputError" for e in MIXED_ERRORS]
    assert [r["num_nodes"] for r in out] == [2, None, None, None, None, 3, 3, 2]
    kept = EncodeBatch("json", "tree", keep_errors=False)(batch)  # failed records are dropped, as parse errors are
    assert kept.column("id").to_pylist() == ["0", "5", "6", "7"] and "error" not in kept.column_names


@pytest.mark.parametrize("kind", ["xml", "graph", "code"])
def test_a_number_is_refused_the_same_way_whatever_the_kind(kind):
    from structpos.pipeline.adapters import EncodeBatch

    out = EncodeBatch(kind, "tree" if kind != "graph" else "lap:2", language="python")({"text": [7]}, [41])
    assert out.column("error").to_pylist() == ["record 41: payload 'text' is of type int (7), not text or bytes"]


def test_encode_batch_names_the_row_by_its_id_column():
    from structpos.pipeline.adapters import EncodeBatch

    out = EncodeBatch("json", "tree", id_column="name")(pa_table({"name": ["a", "b"], "text": [1.25, None]}))
    assert out.column("error").to_pylist() == [
        "record a: payload 'text' is of type float (1.25), not text or bytes",
        "record b: payload 'text' is null",
    ]


def pa_table(columns):
    import pyarrow as pa

    return pa.table(columns)


@pytest.mark.parametrize("keep_errors", [True, False])
def test_a_null_in_a_string_column_is_its_rows_error(keep_errors):
    ds = datasets.Dataset.from_dict({"text": ["[1]", None, "[]"]})
    out = encode_dataset(ds, "json", "tree", keep_errors=keep_errors)
    if keep_errors:
        assert list(out["id"]) == ["0", "1", "2"] and list(out["num_nodes"]) == [2, None, 1]
        assert list(out["error"]) == [None, "record 1: payload 'text' is null", None]
    else:
        assert list(out["id"]) == ["0", "2"] and "error" not in out.column_names


@pytest.mark.parametrize("keep_errors", [True, False])
def test_a_stream_without_declared_types_fails_its_non_text_rows(keep_errors):
    rows = [{"text": "[1]"}, {"text": 2}, {"text": None}, {"text": 0.5}, {"text": '{"a": 1}'}]
    rows = [dict(row, other=k) for k, row in enumerate(rows)]
    stream = datasets.IterableDataset.from_generator(lambda: iter(rows))
    assert stream.features is None  # nothing to check up front: each row is checked
    out = list(encode_dataset(stream, "json", "tree", keep_errors=keep_errors, batch_size=2))
    # the input columns are replaced, also when the stream did not declare them (rows out != rows in)
    assert all("text" not in r and "other" not in r for r in out)
    if keep_errors:
        assert [r["error"] for r in out] == [
            None,
            "record 1: payload 'text' is of type int (2), not text or bytes",
            "record 2: payload 'text' is null",
            "record 3: payload 'text' is of type float (0.5), not text or bytes",
            None,
        ]
        assert [r["num_nodes"] for r in out] == [2, None, None, None, 3]
    else:
        assert [r["id"] for r in out] == ["0", "4"]


def test_list_and_struct_columns_stay_payloads_of_the_kinds_that_take_them():
    as_json = datasets.Dataset.from_dict({"text": [[1, 2], [3]]})
    assert list(encode_dataset(as_json, "json", "tree")["num_nodes"]) == [3, 2]
    graphs = datasets.Dataset.from_dict({"text": [{"edge_index": [[0, 1], [1, 0]], "num_nodes": 3}]})
    assert list(encode_dataset(graphs, "graph", "lap:2")["num_nodes"]) == [3]
    rows = datasets.Dataset.from_dict({"text": [[["a", "b"], ["1", "2"]]]})
    assert list(encode_dataset(rows, "table", "tree")["error"]) == [None]


# ----------------------------------------------------------------------------- ids that are null
@pytest.mark.parametrize("fmt", ["dict", "arrow", "pandas"])
def test_a_null_id_is_its_records_error_with_its_index_as_id_as_in_the_cli(fmt):
    """``str(None)`` made every null id the id "None", shared with a real "None" (the CLI's readers never did)."""
    import pyarrow as pa

    from structpos.pipeline.adapters import EncodeBatch

    columns = {"name": ["a", None, "None", True], "text": ["[1]", "[2]", "[3]", "[4]"]}
    batch = {"dict": lambda: columns, "arrow": lambda: pa.table({**columns, "name": ["a", None, "None", "t"]})}.get(
        fmt, lambda: pytest.importorskip("pandas").DataFrame(columns)
    )()
    out = EncodeBatch("json", "tree", id_column="name")(batch, [10, 11, 12, 13]).to_pylist()
    bad_id = "record 13: id 'name' must be a string or a number, not True"
    assert [(r["id"], r["error_type"], r["error"]) for r in out] == [
        ("a", None, None),
        ("11", "ParseError", "record 11: id 'name' is null"),  # the CLI's words: "in.jsonl line 2: id 'name' is null"
        ("None", None, None),  # a real "None" keeps its id
        ("t", None, None) if fmt == "arrow" else ("13", "InputError", bad_id),
    ]
    no_indices = EncodeBatch("json", "tree", id_column="name", keep_errors=False)(batch)
    assert no_indices.column("id").to_pylist() == ["a", "None"] + (["t"] if fmt == "arrow" else [])
    assert EncodeBatch("json", "tree", id_column="name")(batch).column("id").to_pylist()[1] == "1"  # its position


def test_a_null_id_and_a_non_text_payload_fail_as_the_id(tmp_path):
    from structpos.pipeline.adapters import EncodeBatch
    from structpos.pipeline.records import read_records

    out = EncodeBatch("json", "tree", id_column="name")({"name": [None], "text": [5]})
    assert out.column("error").to_pylist() == ["record 0: id 'name' is null"]
    p = tmp_path / "in.jsonl"
    p.write_text('{"name": null, "text": 5}\n')
    assert [r.read_error for r in read_records(p, kind="json", id_field="name")] == [
        ("ParseError", "in.jsonl line 1: id 'name' is null")
    ]


def test_a_pandas_na_is_a_null_id_and_a_null_payload():
    pd = pytest.importorskip("pandas")
    from structpos.pipeline.adapters import EncodeBatch

    df = pd.DataFrame(
        {"k": pd.Series(["a", None, "c"], dtype="string"), "text": pd.Series(["[1]", "[2]", None], dtype="string")}
    )
    out = EncodeBatch("json", "tree", id_column="k")(df).to_pylist()
    assert [(r["id"], r["error"]) for r in out] == [
        ("a", None),
        ("1", "record 1: id 'k' is null"),  # not the id "<NA>"
        ("c", "record c: payload 'text' is null"),  # not a JSON serialization error
    ]
