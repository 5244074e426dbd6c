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
