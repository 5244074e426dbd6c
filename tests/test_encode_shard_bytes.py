"""``structpos encode`` writes the same shard bytes as the stored digests, for every shipped sample kind.

The corpus is the package's own demo inputs (``structpos demo``), a tiny input of every text kind,
the CoNLL-U and WikiTableQuestions samples in ``tests/data/sample``, a graph JSONL and, in every run,
a record that fails, so that a shard holding only errors (its schema from
:func:`~structpos.pipeline.output_schema` alone) is written too. Each run encodes with ``--kind`` so
the declared output schema shapes the shards.

``tests/data/shard_digests.json`` holds the SHA-256 of every ``part-*.parquet`` as written before the
encode pipeline's refactor (issue 23); Parquet files name the writer's version, so the check runs
with the pyarrow version that wrote them. Regenerate (only for an intended change of the output)::

    python tests/test_encode_shard_bytes.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from structpos.cli import main
from structpos.commands import demo

DATA = Path(__file__).resolve().parent / "data"
DIGESTS = DATA / "shard_digests.json"

TEXTS = {
    "xml": "<a><b>t</b><c/></a>",
    "yaml": "a:\n  - 1\n  - b: 2\n",
    "markdown": "# Title\n\nSome text.\n\n## Part\n\nMore.\n",
    "document": "First sentence. Second one.\n\nA new paragraph.\n",
}
BROKEN = {"xml": "<a><b></a>", "yaml": "a: [1,", "markdown": None, "document": None}


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _conllu_head(sentences: int) -> str:
    text = (DATA / "sample" / "ud_en_ewt" / "en_ewt-ud-dev.conllu").read_text()
    return "\n\n".join(text.split("\n\n")[:sentences]) + "\n\n"


def _runs(src: Path) -> list[tuple[str, list[str]]]:
    """``(name, encode arguments)`` per run; the inputs are written under ``src``."""
    code = src / "code"
    code.mkdir()
    (code / "demo.py").write_text(demo.CODE)
    (code / "sample.py").write_text("def f(x):\n    return x\n")
    tables = src / "tables"
    tables.mkdir()
    for suffix in ("csv", "tsv", "html"):
        (tables / f"4.{suffix}").write_bytes((DATA / "sample" / "wtq" / "200-csv" / f"4.{suffix}").read_bytes())
    (src / "demo.csv").write_text(demo.TABLE)
    json_in = _jsonl(
        src / "json.jsonl",
        [{"text": demo.JSON}, {"text": '{"a": [1, {"b": null}]}'}, {"text": '{"a": [1,'}],
    )
    edges = [list(e) for e in zip(*demo.GRAPH_EDGES)]
    graph_in = _jsonl(
        src / "graph.jsonl",
        [
            {"name": "demo", "text": {"edge_index": [edges[0] + edges[1], edges[1] + edges[0]], "num_nodes": 5}},
            {"name": "tri", "text": {"edge_index": [[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]}},
            {"name": "bad", "text": {"edges": [[0], [1]]}},
        ],
    )
    conllu = src / "ud.conllu"
    conllu.write_text(_conllu_head(5))
    runs = [
        ("code", [str(code), "--kind", "code", "--language", "python", "--coords", "tree:6x8"]),
        ("json", [str(json_in), "--kind", "json", "--coords", "tree"]),
        ("graph", [str(graph_in), "--kind", "graph", "--id-field", "name", "--coords", "lap:2,rw:3"]),
        ("conllu", [str(conllu), "--kind", "conllu", "--coords", "tree"]),
        ("tables", [str(tables), "--kind", "table", "--coords", "table"]),
        ("demo_table", [str(src / "demo.csv"), "--kind", "table", "--coords", "table"]),
    ]
    for kind, text in TEXTS.items():
        records = [{"text": text}] + ([{"text": BROKEN[kind]}] if BROKEN[kind] else [])
        coords = "tree,hier" if kind in ("markdown", "document") else "tree"
        runs.append((kind, [str(_jsonl(src / f"{kind}.jsonl", records)), "--kind", kind, "--coords", coords]))
    return runs


def shard_digests(tmp: Path) -> dict[str, str]:
    """``{"<run>/part-NNNNN.parquet": sha256}`` of every shard the runs write under ``tmp``."""
    src, out = tmp / "src", tmp / "out"
    src.mkdir()
    digests = {}
    for name, args in _runs(src):
        status = main(
            ["encode", *args, "--out", str(out / name), "--shard-size", "2", "--workers", "0", "--no-progress"]
        )
        assert status in (0, 1), (name, status)  # 1: some records failed, as the corpus asks
        for part in sorted((out / name).glob("part-*.parquet")):
            digests[f"{name}/{part.name}"] = hashlib.sha256(part.read_bytes()).hexdigest()
    return digests


def test_shard_bytes_equal_the_stored_digests(tmp_path):
    stored = json.loads(DIGESTS.read_text())
    if stored["pyarrow"] != pa.__version__:
        pytest.skip(f"the digests were written by pyarrow {stored['pyarrow']}, this is {pa.__version__}")
    got = shard_digests(tmp_path)
    want = stored["shards"]
    assert sorted(got) == sorted(want)
    assert {k: v for k, v in got.items() if want[k] != v} == {}


if __name__ == "__main__" and "--write" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        shards = shard_digests(Path(d))
    DIGESTS.write_text(json.dumps({"pyarrow": pa.__version__, "shards": shards}, indent=1, sort_keys=True) + "\n")
    print(f"{len(shards)} shards -> {DIGESTS}")
