"""Smoke tests: the examples run end to end in their tiny (``--quick``) modes on real stdlib code."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytest.importorskip("tree_sitter_python")


def load_example(name: str):
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"structpos_example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def train_example():
    pytest.importorskip("torch")
    return load_example("train_structural_task")


def test_train_example_quick_prints_accuracy_table(train_example, capsys):
    assert train_example.main(["--quick", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    rows = dict(re.findall(r"^\| (\S[^|]*?)\s*\|\s*([0-9.]+) \|", out, flags=re.M))
    assert set(train_example.DEFAULT_VARIANTS) | {"label-majority baseline"} == set(rows), out
    for name, acc in rows.items():
        assert 0.0 <= float(acc) <= 1.0, (name, acc)
    base = float(rows.pop("label-majority baseline"))
    assert base > 1.0 / train_example.NUM_CLASSES  # real signal in the data
    # the quick budget shows the wiring: the best variant is clearly above the label-majority baseline
    best = max(rows, key=lambda name: float(rows[name]))
    assert float(rows[best]) >= base + 0.1, (best, rows, base)


def test_train_example_split_is_by_file_and_targets_are_depths(train_example):
    import structpos
    from structpos.coords.tree import depth as tree_depth

    train, test, vocab, n_test_files, n_files = train_example.build_dataset(6, max_per_file=3, seed=0)
    assert train and test and 0 < n_test_files < n_files
    train_files = {e.source.split("@")[0] for e in train}
    test_files = {e.source.split("@")[0] for e in test}
    assert not train_files & test_files  # no file contributes to both sides
    # targets are the depths below the function node, checked against an independent parse
    e = test[0]
    fname, node = e.source.split("@")
    path = next(p for p in train_example.stdlib_files(6) if p.name == fname)
    full = structpos.parse(path.read_text(encoding="utf-8"), "code", language="python")
    node = int(node)
    d = tree_depth(full.parent)
    expect = np.minimum(d[node : node + len(e.tokens)] - d[node], train_example.NUM_CLASSES - 1)
    assert np.array_equal(e.depth, expect)
    assert full.labels[node] == "function_definition"
    assert np.array_equal(e.coords["tree"][:, 0], d[node : node + len(e.tokens)] - d[node])


def test_encode_example_quick(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    ex = load_example("encode_code_to_parquet")
    assert ex.main(["--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "norms preserved: True" in out
    shards = sorted((tmp_path / "source0").glob("part-*.parquet"))
    assert shards
    ds = ex.ParquetStructures(tmp_path / "source0", ["depth", "sibling", "lap"], max_len=64)
    assert len(ds) == 3
    tokens, coords, depth = ds[0]
    assert len(tokens) == min(64, int(np.diff(ds.offsets)[0]))
    assert coords.shape == (len(tokens), 2 + 8)
    assert np.array_equal(coords[:, 0].numpy(), depth.numpy())  # column order follows coord_columns
    batch = ex.pad_collate([ds[0], ds[1], ds[2]])
    lengths = batch["mask"].sum(1)
    assert (batch["depth"][~batch["mask"]] == -100).all()
    assert lengths.max() == batch["tokens"].shape[1]
