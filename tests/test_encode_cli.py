"""``structpos encode`` end to end: real data, the errors invariant, resume after kill -9."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import long_conllu

from structpos import compute_coords, parse
from structpos.cli import main
from structpos.pipeline import read_errors, read_output
from structpos.pipeline.records import conllu_sentences

REPO = Path(__file__).resolve().parents[1]


def _conllu(shared_data) -> Path:
    return shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _check_invariant(out: Path, record_ids: list[str]) -> None:
    """Per shard and in total: every input record is in exactly one of rows / errors."""
    m = _manifest(out)
    assert m["complete"]
    seen: list[str] = []
    for key, e in sorted(m["shards"].items()):
        rows = pq.read_table(out / e["file"], columns=["id"]).column("id").to_pylist()
        errs = [json.loads(x) for x in (out / e["errors_file"]).read_text().splitlines()]
        assert e["records"] == e["encoded"] + e["errors"] == len(set(rows)) + len(errs)
        assert {x["shard"] for x in errs} <= {int(key)}
        assert not set(rows) & {x["id"] for x in errs}
        seen += rows + [x["id"] for x in errs]
    assert sorted(seen) == sorted(record_ids)
    t = m["totals"]
    assert t["records"] == t["encoded"] + t["errors"] == len(record_ids)
    assert len(read_errors(out)) == t["errors"]


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:  # not Linux: nothing to check
        return []


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def test_conllu_file_matches_direct_parse_and_coords(shared_data, tmp_path):
    out = tmp_path / "enc"
    assert (
        main(
            [
                "encode",
                str(_conllu(shared_data)),
                "--kind",
                "conllu",
                "--coords",
                "tree:8x16",
                "--out",
                str(out),
                "--limit",
                "120",
                "--shard-size",
                "50",
                "--no-progress",
            ]
        )
        == 0
    )
    table = read_output(out)
    text = _conllu(shared_data).read_text(encoding="utf-8")
    sentences = list(conllu_sentences(text))[:120]
    sent_ids = [s for s, _, _ in sentences]
    assert table.column("id").to_pylist() == [f"en_ewt-ud-dev.conllu#{s}" for s in sent_ids]
    _check_invariant(out, table.column("id").to_pylist())
    reference = parse("\n".join(b for _, _, b in sentences), "conllu")  # the text through the parser directly
    assert len(reference) == 120
    rows = table.to_pylist()
    for row, s in zip(rows, reference):
        c = compute_coords(s, "tree:8x16")
        assert row["num_nodes"] == s.num_nodes
        assert row["labels"] == list(s.labels)
        assert row["start"] == s.start.tolist() and row["end"] == s.end.tolist()
        assert row["parent"] == s.parent.tolist()
        assert row["depth"] == c["depth"].tolist()
        assert np.array_equal(np.array(row["root_path"]).reshape(c["root_path"].shape), c["root_path"])
    assert len(_manifest(out)["shards"]) == 3


def test_table_directory_by_suffix_and_workers_agree(shared_data, tmp_path):
    src = tmp_path / "tables"
    src.mkdir()
    for f in sorted((shared_data / "wtq" / "200-csv").iterdir())[:24]:
        shutil.copy(f, src / f.name)
    expected = sorted(p.name for p in src.iterdir() if p.suffix in (".csv", ".tsv", ".html"))
    one, two = tmp_path / "w1", tmp_path / "w2"
    for out, w in ((one, "1"), (two, "2")):
        assert (
            main(
                [
                    "encode",
                    str(src),
                    "--coords",
                    "table",
                    "--out",
                    str(out),
                    "--shard-size",
                    "4",
                    "--workers",
                    w,
                    "--no-progress",
                ]
            )
            == 0
        )
    a, b = read_output(one), read_output(two)
    assert a.equals(b)
    _check_invariant(one, expected)
    assert a.column("id").to_pylist() == [x for x in expected if x in set(a.column("id").to_pylist())]
    for row in a.to_pylist()[:6]:
        s = parse((src / row["id"]).read_text(encoding="utf-8"), "table", format=Path(row["id"]).suffix[1:])
        c = compute_coords(s, "table")
        assert row["num_nodes"] == s.num_nodes and row["labels"] == list(s.labels)
        for k, v in c.items():
            assert np.array_equal(np.asarray(row[k]), v), k


def test_stdlib_code_directory(stdlib, tmp_path):
    pytest.importorskip("structpos.parsers.code")
    src = tmp_path / "py"
    src.mkdir()
    names = [
        "json/__init__.py",
        "json/decoder.py",
        "json/encoder.py",
        "json/scanner.py",
        "json/tool.py",
        "textwrap.py",
        "bisect.py",
    ]
    for n in names:
        dst = src / n
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(stdlib / n, dst)
    (src / "broken.py").write_bytes(b"x = '\xff'\n")  # not UTF-8
    out = tmp_path / "enc"
    assert (
        main(
            [
                "encode",
                str(src),
                "--kind",
                "code",
                "--coords",
                "tree",
                "--out",
                str(out),
                "--shard-size",
                "3",
                "--no-progress",
            ]
        )
        == 0
    )
    table = read_output(out)
    ids = sorted(names + ["broken.py"])
    _check_invariant(out, ids)
    assert sorted(table.column("id").to_pylist()) == sorted(names)
    assert read_errors(out)[0]["error_type"] == "ParseError"  # as parse(path, "code") raises it
    for row in table.to_pylist():
        text = (src / row["id"]).read_text(encoding="utf-8")
        s = parse(text, "code", language="python")
        assert row["num_nodes"] == s.num_nodes and row["parent"] == s.parent.tolist()
        assert row["depth"] == compute_coords(s, "tree")["depth"].tolist()


def test_errors_invariant_with_broken_records(tmp_path):
    good = [{"k": i, "v": [i, {"x": "é" * i}]} for i in range(7)]
    lines = [
        json.dumps({"text": json.dumps(good[0])}),
        "{broken json",
        json.dumps({"text": '{"unterminated": [1, 2'}),  # payload is not JSON: parser error
        json.dumps({"nofield": 1}),
        json.dumps({"text": good[1]}),  # an object payload is serialized
        json.dumps([1, 2, 3]),
        json.dumps({"text": json.dumps(good[2])}),
        json.dumps({"text": ""}),
        json.dumps({"text": json.dumps(good[3])}),
        json.dumps({"text": None}),
        json.dumps({"text": json.dumps(good[4])}),
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "enc"
    assert (
        main(
            [
                "encode",
                str(src),
                "--kind",
                "json",
                "--coords",
                "tree",
                "--out",
                str(out),
                "--shard-size",
                "2",
                "--workers",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    record_ids = [str(i) for i in range(1, len(lines) + 1)]
    _check_invariant(out, record_ids)
    errors = {e["id"]: e for e in read_errors(out)}
    assert {"2", "3", "4", "6", "8", "10"} == set(errors)  # an empty or null payload is an error too
    assert errors["2"]["error_type"] == "ParseError"
    import structpos.exceptions as ex

    own = {n for n, c in vars(ex).items() if isinstance(c, type) and issubclass(c, ex.StructposError)}
    assert {e["error_type"] for e in errors.values()} <= own  # the project's own error types, never KeyError & co.
    for e in errors.values():
        assert f"in.jsonl line {e['id']}" in e["message"], e  # names input and position
        assert e["shard"] == (int(e["id"]) - 1) // 2
    schemas = {str(pq.read_schema(p)) for p in out.glob("part-*.parquet")}
    assert len(schemas) == 1  # shard 1 (lines 3-4) failed entirely yet has the same columns
    encoded = read_output(out)
    assert set(encoded.column("id").to_pylist()) == set(record_ids) - set(errors)
    row = {r["id"]: r for r in encoded.to_pylist()}["5"]
    s = parse(json.dumps(good[1]), "json")
    assert row["labels"] == list(s.labels) and row["parent"] == s.parent.tolist()


def test_refuses_to_resume_with_other_options_or_clobber(shared_data, tmp_path, capsys):
    out = tmp_path / "enc"
    base = [
        "encode",
        str(_conllu(shared_data)),
        "--kind",
        "conllu",
        "--out",
        str(out),
        "--limit",
        "10",
        "--no-progress",
    ]
    assert main(base + ["--coords", "tree"]) == 0
    assert main(base + ["--coords", "tree"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(base + ["--coords", "tree:4x4", "--resume"]) == 2
    assert "different options" in capsys.readouterr().err
    assert main(base + ["--coords", "tree", "--resume"]) == 0
    assert "1 resumed" in capsys.readouterr().out
    assert main(base + ["--coords", "tree:4x4", "--overwrite"]) == 0
    assert _manifest(out)["options"]["coords"] == "tree:4x4"


def test_resume_after_kill_9_loses_and_duplicates_nothing(shared_data, tmp_path):
    src = long_conllu(shared_data, tmp_path)
    out = tmp_path / "enc"
    cmd = [
        sys.executable,
        "-m",
        "structpos.cli",
        "encode",
        str(src),
        "--kind",
        "conllu",
        "--coords",
        "tree",
        "--out",
        str(out),
        "--shard-size",
        "10",
        "--workers",
        "2",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60

    def shards_recorded() -> int:  # the manifest is rewritten atomically after each finished shard
        try:
            return len(_manifest(out)["shards"])
        except (OSError, ValueError, KeyError):
            return 0

    while not shards_recorded() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    # killed as soon as one shard is recorded: with the workers holding the next shards, the kill lands
    # mid-run (a fixed nap here let the whole run finish once encoding got faster)
    assert proc.poll() is None, "the run finished before it could be killed: give it more work"
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers), "worker processes outlived the killed driver"
    m = _manifest(out)
    assert not m["complete"]
    done_before = len(m["shards"])
    assert 0 < done_before < 201
    rerun = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert f"({done_before} resumed)" in rerun.stdout  # every shard in the manifest was kept, not redone
    ids = read_output(out).column("id").to_pylist()
    expected = [f"{src.name}#{s}" for s, _, _ in conllu_sentences(src.read_text(encoding="utf-8"))]
    assert ids == expected  # same order, nothing lost, nothing twice
    _check_invariant(out, expected)
    assert not list(out.glob(".*.tmp-*"))


def test_graph_jsonl_with_spectral_coords_matches_direct(tmp_path):
    graphs = [
        {"edge_index": [[0, 1, 2, 3, 1, 2, 3, 0], [1, 2, 3, 0, 0, 1, 2, 3]], "num_nodes": 5},  # 4-cycle + isolated node
        {"edge_index": [[0, 1], [1, 0]]},
        {"edges": []},  # no edge_index: an error naming the line
    ]
    src = tmp_path / "graphs.jsonl"
    src.write_text("".join(json.dumps({"name": f"g{i}", "text": g}) + "\n" for i, g in enumerate(graphs)))
    out = tmp_path / "enc"
    assert (
        main(
            [
                "encode",
                str(src),
                "--kind",
                "graph",
                "--coords",
                "lap:3,rw:4",
                "--id-field",
                "name",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    _check_invariant(out, ["g0", "g1", "g2"])
    (err,) = read_errors(out)
    assert err["id"] == "g2" and "graphs.jsonl line 3" in err["message"]
    rows = read_output(out).to_pylist()
    for row, g in zip(rows, graphs):
        g = dict(g)
        s = parse(np.asarray(g.pop("edge_index")), "graph", **g)
        c = compute_coords(s, "lap:3,rw:4")
        assert row["num_nodes"] == s.num_nodes and row["parent"] is None
        for k, v in c.items():
            assert np.allclose(np.asarray(row[k], dtype=float), v), k


def test_parquet_input_gives_the_same_rows_as_jsonl(tmp_path):
    import pyarrow as pa

    docs = [{"k": i, "v": list(range(i))} for i in range(9)]
    texts = [json.dumps(d) for d in docs]
    names = [f"doc{i}" for i in range(9)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"name": n, "body": t}) + "\n" for n, t in zip(names, texts)))
    pq.write_table(pa.table({"name": names, "body": texts}), tmp_path / "in.parquet")
    for src in ("in.jsonl", "in.parquet"):
        assert (
            main(
                [
                    "encode",
                    str(tmp_path / src),
                    "--kind",
                    "json",
                    "--coords",
                    "tree",
                    "--field",
                    "body",
                    "--id-field",
                    "name",
                    "--out",
                    str(tmp_path / src.replace(".", "_")),
                    "--shard-size",
                    "4",
                    "--no-progress",
                ]
            )
            == 0
        )
    a, b = read_output(tmp_path / "in_jsonl"), read_output(tmp_path / "in_parquet")
    assert a.equals(b) and a.column("id").to_pylist() == names


def test_a_record_without_a_structure_is_an_error_not_nothing(tmp_path):
    """A CoNLL-U text with no sentence parses to no structure: its record is an error, never absent."""
    sentence = "1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n\n"
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in (sentence, "", "\n\n", sentence)))
    out = tmp_path / "enc"
    main(["encode", str(src), "--kind", "conllu", "--out", str(out), "--workers", "0", "--no-progress"])
    _check_invariant(out, ["1", "2", "3", "4"])
    assert {e["id"]: e["error_type"] for e in read_errors(out)} == {"2": "InputError", "3": "InputError"}

    files = tmp_path / "files"
    files.mkdir()
    (files / "empty.conllu").write_text("")
    (files / "one.conllu").write_text(sentence)
    out = tmp_path / "enc2"
    main(["encode", str(files), "--out", str(out), "--workers", "0", "--no-progress"])
    _check_invariant(out, ["empty.conllu", "one.conllu#s1"])
    assert [e["message"] for e in read_errors(out)] == ["empty.conllu: no sentence in the file"]


def test_a_payload_that_is_a_number_or_a_boolean_goes_to_errors_not_a_one_node_tree(tmp_path):
    """``{"text": 1}`` with --kind json used to encode as the one-node document ``1``."""
    import pyarrow as pa

    lines = [
        {"id": "a", "text": 1},
        {"id": "b", "text": True},
        {"id": "c", "text": '{"x": 1}'},
        {"id": "d", "text": None},
        {"id": "e", "text": [1, 2]},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    pq.write_table(
        pa.table({"id": ["a", "b", "c"], "text": pa.array([1, None, 3], pa.int64())}), tmp_path / "in.parquet"
    )
    for src in ("in.jsonl", "in.parquet"):
        out = tmp_path / src.replace(".", "_")
        args = ["encode", str(tmp_path / src), "--kind", "json", "--coords", "tree", "--id-field", "id"]
        status = main([*args, "--out", str(out), "--workers", "0", "--no-progress"])
        assert status == (0 if src == "in.jsonl" else 1)  # 1: no record could be encoded
        _check_invariant(out, ["a", "b", "c", "d", "e"] if src == "in.jsonl" else ["a", "b", "c"])
        errors = {e["id"]: (e["stage"], e["error_type"], e["position"], e["message"]) for e in read_errors(out)}
        if src == "in.jsonl":
            assert read_output(out).column("id").to_pylist() == ["c", "e"]
            assert errors == {
                "a": (
                    "read",
                    "InputError",
                    "line 1",
                    "in.jsonl line 1: payload 'text' is of type int (1), not text or bytes",
                ),
                "b": (
                    "read",
                    "InputError",
                    "line 2",
                    "in.jsonl line 2: payload 'text' is of type bool (True), not text or bytes",
                ),
                "d": ("read", "InputError", "line 4", "in.jsonl line 4: payload 'text' is null"),
            }
        else:
            assert read_output(out).num_rows == 0
            assert errors == {
                "a": (
                    "read",
                    "InputError",
                    "row 0",
                    "in.parquet row 0: payload 'text' is of type int (1), not text or bytes",
                ),
                "b": ("read", "InputError", "row 1", "in.parquet row 1: payload 'text' is null"),
                "c": (
                    "read",
                    "InputError",
                    "row 2",
                    "in.parquet row 2: payload 'text' is of type int (3), not text or bytes",
                ),
            }
