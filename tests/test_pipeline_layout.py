"""The pipeline's modules stay small (issue 23: under 600 lines each) and ``pipeline.shards`` keeps its names."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

PIPELINE = Path(__file__).resolve().parents[1] / "structpos" / "pipeline"
MAX_LINES = 600

# the public names of ``structpos.pipeline.shards`` before it was split (issue 23)
SHARDS_NAMES = {
    "ShardResult": "shard_writer",
    "ShardTask": "shard_writer",
    "Manifest": "manifest",
    "ShardFiles": "shard_io",
    "shard_files": "shard_io",
    "encode_shard": "shard_writer",
    "encode_shard_table": "shard_writer",
    "write_shard": "shard_io",
    "write_shard_records": "shard_writer",
    "shard_digest": "shard_io",
    "options_hash": "manifest",
    "atomic_write_bytes": "shard_io",
    "file_sha256": "shard_io",
}


@pytest.mark.parametrize("path", sorted(PIPELINE.glob("*.py")), ids=lambda p: p.name)
def test_every_pipeline_module_is_under_600_lines(path):
    assert len(path.read_text().splitlines()) < MAX_LINES


def test_shards_keeps_its_public_names_each_defined_once():
    shards = importlib.import_module("structpos.pipeline.shards")
    assert set(shards.__all__) == set(SHARDS_NAMES) | {"ResumeError"}
    for name, home in SHARDS_NAMES.items():
        obj = getattr(shards, name)
        assert obj.__module__ == f"structpos.pipeline.{home}", name
        assert getattr(importlib.import_module(f"structpos.pipeline.{home}"), name) is obj
    # the facade defines nothing itself: only imports and the name list
    tree = ast.parse((PIPELINE / "shards.py").read_text())
    defined = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert defined == []


def test_the_split_modules_import_downwards_only():
    """shard_io <- shard_writer <- manifest: no module imports one that imports it."""
    imports = {}
    for name in ("shard_io", "shard_writer", "manifest"):
        tree = ast.parse((PIPELINE / f"{name}.py").read_text())
        imports[name] = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
    assert not imports["shard_io"] & {"shard_writer", "manifest", "shards"}
    assert not imports["shard_writer"] & {"manifest", "shards"}
    assert "shards" not in imports["manifest"]
