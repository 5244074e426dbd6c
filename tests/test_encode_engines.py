"""The same batch function under HF ``datasets.map``, Ray Data and the Ray engine."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from structpos.cli import main
from structpos.pipeline import EncodeBatch, encode_records, encode_to_parquet, read_errors, read_output
from structpos.pipeline.arrow import rows_to_table
from structpos.pipeline.records import Record, conllu_sentences

REPO = Path(__file__).resolve().parents[1]


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
    texts[:8] = ["[unclosed"] * 8  # a whole first batch of failures must not change the columns
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


def test_hf_encode_dataset_passes_the_encode_batch_options_through():
    datasets = pytest.importorskip("datasets")
    from structpos.integrations.hf import encode_dataset

    ds = datasets.Dataset.from_dict({"body": ["[1]", "[unclosed", "[[2]]"], "name": ["a", "b", "c"]})
    out = encode_dataset(ds, "json", "tree", text_column="body", id_column="name", keep_errors=False)
    assert out["id"] == ["a", "c"] and "error" not in out.column_names
    assert out["num_nodes"] == [2, 3]


@pytest.fixture(scope="module")
def ray_cluster():
    """One small local Ray cluster for the module (starting one costs seconds)."""
    ray = pytest.importorskip("ray")
    saved = os.environ.get("PYTHONPATH")
    here = str(Path(__file__).parent)  # so that Ray workers can import the faulty parsers of test_faults
    os.environ["PYTHONPATH"] = os.pathsep.join([here, str(REPO)] + ([saved] if saved else []))
    try:
        ctx = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    yield ray, ctx.address_info["address"]
    ray.shutdown()


@pytest.mark.slow
def test_ray_engine_on_an_existing_cluster_matches_local(ray_cluster, shared_data, tmp_path, monkeypatch):
    from structpos.pipeline import engines

    ray, address = ray_cluster
    src = shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"
    common = [
        "encode",
        str(src),
        "--kind",
        "conllu",
        "--coords",
        "tree",
        "--limit",
        "60",
        "--shard-size",
        "15",
        "--no-progress",
    ]
    assert main(common + ["--out", str(tmp_path / "local")]) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = (
        [sys.executable, "-m", "structpos.cli"]
        + common
        + ["--out", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2", "--ray-address", address]
    )
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "60 records: 60 encoded" in proc.stdout
    assert read_output(tmp_path / "ray").equals(read_output(tmp_path / "local"))
    assert read_errors(tmp_path / "ray") == []
    # a cluster of this machine alone: each task writes its own shard, only counts come back
    assert engines._on_driver_node(ray)

    def driver_writes(*args, **kwargs):
        raise AssertionError("the driver wrote a shard that its task could write")

    monkeypatch.setattr(engines, "write_shard", driver_writes)
    in_process = encode_to_parquet(
        src,
        tmp_path / "ray2",
        kind="conllu",
        coords="tree",
        limit=60,
        shard_size=15,
        engine="ray",
        workers=2,
        progress=False,
    )
    assert in_process.shards == 4 and ray.is_initialized()  # used the running cluster and left it up
    assert read_output(tmp_path / "ray2").equals(read_output(tmp_path / "local"))
    for part in sorted((tmp_path / "local").glob("part-*.parquet")):  # written by the same code: the same bytes
        assert part.read_bytes() == (tmp_path / "ray2" / part.name).read_bytes(), part.name


@pytest.mark.slow
def test_ray_data_map_batches_matches_local(ray_cluster, shared_data):
    ray, _ = ray_cluster
    src = shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"
    blocks = [b for _, _, b in conllu_sentences(src.read_text(encoding="utf-8"))][:20]
    keys = [f"s{i}" for i in range(20)]
    ds = ray.data.from_items([{"key": k, "text": b} for k, b in zip(keys, blocks)], override_num_blocks=4)
    out = ds.map_batches(
        EncodeBatch("conllu", "tree", id_column="key"), batch_size=5, batch_format="pyarrow"
    ).take_all()
    got = {r["id"]: r for r in out}
    expected = {
        r["id"]: r for r in EncodeBatch("conllu", "tree", id_column="key")({"key": keys, "text": blocks}).to_pylist()
    }
    assert set(got) == set(expected) == set(keys)
    for k, row in expected.items():
        assert row["error"] is None and got[k]["error"] is None
        for col in ("labels", "parent", "depth", "sibling", "root_path"):
            assert np.asarray(list(got[k][col])).tolist() == row[col], col  # Ray hands back numpy arrays


def _ray_faults(tmp_path, payloads, workers, limits):
    """Encode ``payloads`` (the faulty parser of test_faults, shards of 3) on Ray; the summary, rows and errors by id.

    Checks in = out + errors with no duplicates, and that every good record (a JSON payload) was
    encoded with its own node count."""
    from test_faults import _check, _json_size, _jsonl, encode_faulty

    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, payloads)
    out = tmp_path / "enc"
    s = encode_faulty(src, out, shard_size=3, engine="ray", workers=workers, limits=limits)
    rows, errors = _check(out, ids)
    for rid, text in zip(ids, payloads):
        if rid in rows:
            assert rows[rid]["num_nodes"] == _json_size(json.loads(text))
    return s, rows, errors


@pytest.mark.slow
def test_ray_engine_isolates_a_record_that_kills_its_worker(ray_cluster, tmp_path):
    from structpos.limits import Limits

    payloads = ["[1]", "die", "[2, [3]]", "raise", '{"a": [4]}', "[5]"]
    s, rows, errors = _ray_faults(tmp_path, payloads, 2, Limits(record_timeout=20))
    assert (s.records, s.errors) == (6, 2)
    assert errors["r1"]["stage"] == "worker" and errors["r3"]["error_type"] == "IndexError"
    assert set(rows) == {"r0", "r2", "r4", "r5"}  # the shard-mates of the killer were encoded one task each


@pytest.mark.slow
def test_ray_engine_applies_the_record_timeout_and_memory_limit(ray_cluster, tmp_path):
    from structpos.limits import Limits

    payloads = ["[1]", "sleep", "[2, [3]]", "hog", '{"a": [4]}', "[5]"]
    # 10 s: enough for a small record in a Ray worker on a loaded 2-core machine (1 s was not, once;
    # 5 s failed once at load 3.7); the sleeper sleeps 60 s, so a "timeout" entry means it was stopped
    s, rows, errors = _ray_faults(tmp_path, payloads, 1, Limits(record_timeout=10.0, max_memory_bytes=2**30))
    assert (s.records, s.errors) == (6, 2), errors
    sleeper, hog = errors["r1"], errors["r3"]
    assert sleeper["stage"] == "timeout" and sleeper["error_type"] == "LimitError"
    assert "record_timeout" in sleeper["message"] and "in.jsonl line 2" in sleeper["message"]
    assert hog["stage"] == "memory" and hog["error_type"] == "MemoryError", hog  # 2 GiB under a 1 GiB limit
    assert set(rows) == {"r0", "r2", "r4", "r5"}  # their shard-mates were encoded
    # the limit was lifted after the tasks: the Ray worker can map more again
    ray, _ = ray_cluster
    assert ray.get(ray.remote(_address_space_limit).remote()) == -1


def _address_space_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_AS)[0]
