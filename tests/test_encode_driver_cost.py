"""The encode driver's cheaper paths give what the plain ones gave (issue 24: the driver shares a core with the workers).

* the manifest renders each shard entry once: its bytes are ``json.dumps(..., indent=1)`` of the whole;
* a run that resumes nothing has its workers hash the records (``ShardTask(digests=None)``): same files;
* a suffix is read without pathlib, a PEP 263 cookie looked for only when a first line says ``coding``.
"""

from __future__ import annotations

import io
import itertools
import json
import tokenize
from pathlib import Path

from structpos.parsers._input import _PEP263, pep263_encoding
from structpos.pipeline.encode import EncodeOptions
from structpos.pipeline.manifest import Manifest, _with_shards
from structpos.pipeline.records import Record, _suffix, record_digest
from structpos.pipeline.shard_io import shard_files
from structpos.pipeline.shard_writer import ShardTask, encode_shard
from structpos.pipeline.walk import walk_files


def test_shard_entries_rendered_once_make_the_same_json():
    for head in ({}, {"a": 1, "b": {"c": [1, {"d": "x\ny"}]}, "e": {}}):
        for n in (0, 1, 3):
            shards = {f"{k:05d}": {"n": k, "sha256": {"p": "x"}, "l": [None, {}], "e": {}} for k in range(n)}
            texts = [(key, json.dumps(v, indent=1).replace("\n", "\n  ")) for key, v in shards.items()]
            assert _with_shards(head, texts) == json.dumps({**head, "shards": shards}, indent=1)


def test_manifest_bytes_unchanged_and_a_changed_entry_rerendered(tmp_path):
    recs = [Record("a", "[1]", "a"), Record("b", "[", "b")]
    m = Manifest(tmp_path, {"coords": "tree"}, shard_size=1)
    for i, r in enumerate(recs):
        m.add(encode_shard(ShardTask(i, [r], EncodeOptions("json", "tree"), str(tmp_path), [f"d{i}"])))
        m.save()
    m.shards[0]["sha256"] = {"changed": "in place"}  # as is_done does for a version-2 entry
    m.save()
    data = json.loads(m.path.read_text())
    assert data["shards"]["00000"]["sha256"] == {"changed": "in place"}
    assert m.path.read_text() == json.dumps(data, indent=1) + "\n"
    m.drop(1)
    m.save()
    assert list(json.loads(m.path.read_text())["shards"]) == ["00000"]


def test_digests_computed_in_the_worker_write_the_same_files(tmp_path):
    recs = [Record("a", "[1, 2]", "a"), Record("b", "[", "b"), Record("c", {"x": 1}, "c")]
    options = EncodeOptions("json", "tree")
    given = encode_shard(ShardTask(0, recs, options, str(tmp_path / "given"), [record_digest(r) for r in recs]))
    later = encode_shard(ShardTask(0, recs, options, str(tmp_path / "later"), None))
    assert given.digest == later.digest and given.sha256 == later.sha256
    for a, b in zip(shard_files(tmp_path / "given", 0), shard_files(tmp_path / "later", 0)):
        assert a.read_bytes() == b.read_bytes()


def test_suffix_is_pathlibs():
    for n in range(8):
        for t in itertools.product("a./", repeat=n):
            s = "".join(t)
            assert _suffix(s) == Path(s).suffix, s


def test_walk_relative_paths_are_pathlibs(tmp_path):
    for rel in ("a.py", "d/b.py", "d/e/c.json", "f g/h.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    files, _ = walk_files(tmp_path)
    assert [rel for rel, _ in files] == [p.relative_to(tmp_path).as_posix() for _, p in files]
    assert [rel for rel, _ in files] == ["a.py", "d/b.py", "d/e/c.json", "f g/h.py"]


def _pep263_slow(data: bytes):
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return None
    if encoding in ("utf-8", "utf-8-sig"):
        return None
    declares = [_PEP263.match(line) is not None for line in data.split(b"\n", 2)[:2]]
    return encoding, f"line {declares.index(True) + 1 if True in declares else 1}"


def test_pep263_fast_path_agrees_with_tokenize():
    cases = [
        b"",
        b"x = 1\n",
        b"# coding: latin-1\n",
        b"#!/bin/python\n# -*- coding: cp1252 -*-\n",
        b"\xef\xbb\xbf# coding: latin-1\n",
        b"#!x\r# coding: latin-1\n",
        b"x\n\n# coding: latin-1\n",
        b"# vim: set fileencoding=koi8-r :\n",
        b"\xe9\n# coding: latin-1\n",
        b"# coding: uft-8\n",
        b"\xff\xfe#",
    ]
    for data in cases:
        assert pep263_encoding(data) == _pep263_slow(data), data


def test_hashing_in_the_workers_or_the_driver_writes_the_same_output_and_resumes(tmp_path, monkeypatch):
    """With the workers taking every core they hash the records; the files, and a resume, are the same."""
    import os

    from structpos.pipeline import encode_to_parquet

    src = tmp_path / "in"
    src.mkdir()
    for i in range(5):
        (src / f"r{i}.json").write_text(f'{{"a": [{i}, 2]}}' if i != 3 else "{")
    outs = {}
    for cores, name in (({0}, "workers"), (set(range(64)), "driver")):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, cores=cores: cores, raising=False)
        out = tmp_path / name
        s = encode_to_parquet(src, out, coords="tree", shard_size=2, workers=1, progress=False)
        assert (s.records, s.errors) == (5, 1)
        again = encode_to_parquet(src, out, coords="tree", shard_size=2, workers=1, progress=False, resume=True)
        assert again.shards_skipped == again.shards == 3
        outs[name] = {
            p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", ".lock") and not p.name.startswith(".")
        }
    assert outs["workers"] == outs["driver"]
