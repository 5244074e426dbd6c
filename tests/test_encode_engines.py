"""The same batch function under HF ``datasets.map``, Ray Data and the Ray engine."""

from __future__ import annotations

import json
import pickle

import pyarrow as pa
import pytest

from structpos.pipeline import EncodeBatch, encode_records, encode_to_parquet, read_errors, read_output
from structpos.pipeline.arrow import rows_to_table
from structpos.pipeline.records import Record, conllu_sentences


def _json_texts(n: int) -> list[str]:
    texts = [json.dumps({"id": i, "tags": ["a"] * (i % 4), "nested": {"depth": [[i]] * (i % 3)}}) for i in range(n)]
    texts[3] = "{broken"
    return texts


def _local_rows(texts: list[str], coords: str) -> pa.Table:
    recs = [Record(str(i), t, f"record {i}", "json") for i, t in enumerate(texts)]
    from structpos.pipeline import EncodeOptions

    rows, errors, n = encode_records(recs, EncodeOptions("json", coords))
    assert n == len(texts) == len(rows) + len(errors)
    return rows_to_table(rows)


def test_batch_function_pickles_and_accepts_every_batch_format():
    texts = _json_texts(12)
    fn = pickle.loads(pickle.dumps(EncodeBatch("json", "tree")))
    expected = _local_rows(texts, "tree")
    as_dict = fn({"text": texts})
    as_arrow = fn(pa.table({"text": texts}))
    as_pandas = fn(pa.table({"text": texts}).to_pandas())
    for out in (as_dict, as_arrow, as_pandas):
        assert out.num_rows == len(texts)  # one row per record: failures keep a row with the error
        ok = out.filter(pa.compute.is_null(out.column("error")))
        assert ok.drop_columns(["error_type", "error"]).equals(expected)
    bad = as_dict.filter(pa.compute.is_valid(as_dict.column("error"))).to_pylist()
    assert [r["id"] for r in bad] == ["3"] and "record 3" in bad[0]["error"]
    assert fn({"text": texts}, indices=range(100, 112)).column("id")[0].as_py() == "100"
    assert EncodeBatch("json", "tree", keep_errors=False)({"text": texts}).num_rows == len(texts) - 1


def test_hf_datasets_map_with_two_processes_matches_local():
    datasets = pytest.importorskip("datasets")
    from structpos.integrations.hf import encode_dataset

    texts = _json_texts(40)
    ds = datasets.Dataset.from_dict({"text": texts, "other": list(range(40))})
    out = encode_dataset(ds, "json", "tree", num_proc=2, batch_size=8)
    assert out.num_rows == len(texts)
    assert "other" not in out.column_names
    table = out.data.table
    ok = table.filter(pa.compute.is_null(table.column("error"))).drop_columns(["error_type", "error"])
    expected = _local_rows(texts, "tree")
    assert ok.column("id").to_pylist() == expected.column("id").to_pylist()
    for name in expected.column_names:
        assert ok.column(name).to_pylist() == expected.column(name).to_pylist(), name


@pytest.mark.slow
def test_ray_engine_and_ray_data_match_local(shared_data, tmp_path):
    ray = pytest.importorskip("ray")
    src = shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"
    common = dict(kind="conllu", coords="tree", limit=60, shard_size=15, progress=False)
    local = encode_to_parquet(src, tmp_path / "local", **common)
    on_ray = encode_to_parquet(src, tmp_path / "ray", engine="ray", workers=2, **common)  # starts a local cluster
    assert not ray.is_initialized()  # and shuts it down again
    assert (on_ray.records, on_ray.encoded, on_ray.errors) == (local.records, local.encoded, local.errors) == (60, 60, 0)
    assert read_output(tmp_path / "ray").equals(read_output(tmp_path / "local"))
    assert read_errors(tmp_path / "ray") == []

    # Ray Data map_batches with the same picklable function
    blocks = [b for _, _, b in conllu_sentences(src.read_text(encoding="utf-8"))][:20]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ds = ray.data.from_items([{"key": f"s{i}", "text": b} for i, b in enumerate(blocks)], override_num_blocks=4)
        out = ds.map_batches(EncodeBatch("conllu", "tree", id_column="key"), batch_size=5, batch_format="pyarrow").take_all()
    finally:
        ray.shutdown()
    got = {r["id"]: r for r in out}
    expected = {r["id"]: r for r in EncodeBatch("conllu", "tree", id_column="key")({"key": [f"s{i}" for i in range(20)], "text": blocks}).to_pylist()}
    assert set(got) == set(expected)
    for k, row in expected.items():
        assert row["error"] is None
        for col in ("labels", "parent", "depth", "sibling", "root_path"):
            assert list(got[k][col]) == row[col] or [list(x) for x in got[k][col]] == row[col], col
