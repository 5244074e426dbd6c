"""Fault injection for ``structpos encode``: every run ends with records in = rows out + error rows, no duplicates.

The faults: a record that kills its worker (``SIGKILL``), hangs in Python, hangs with
``SIGALRM`` blocked (as C code would), allocates past the memory limit, raises; ``kill -9``
and ``SIGINT`` of the driver; a full disk (``RLIMIT_FSIZE``); a damaged shard found on
resume; hostile directory entries; a second run on the same output; changed records.
Parsers that misbehave on purpose are registered with ``extra_parsers`` and imported by
name in the worker processes (this module is on their ``sys.path``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import long_conllu

from structpos import parse
from structpos.cli import main
from structpos.limits import Limits
from structpos.pipeline import encode_to_parquet, read_errors, read_output
from structpos.pipeline.lock import lock_output

REPO = Path(__file__).resolve().parents[1]
FAULTS = {"faulty": f"{Path(__file__).stem}:faulty_parser"}
CALLS_ENV = "STRUCTPOS_TEST_CALLS"
LITTER_ENV = "STRUCTPOS_TEST_LITTER"


def faulty_parser(text, name=None, **_):
    """A JSON parser that misbehaves when the payload asks it to (runs in the encode workers)."""
    calls = os.environ.get(CALLS_ENV)
    if calls:
        with open(calls, "a") as fh:
            fh.write(f"{text}\n")
    if text == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if text == "sleep":  # a record that sleeps past --record-timeout (SIGALRM interrupts the sleep)
        time.sleep(60)
    if text == "spin":  # pure Python: the worker's own SIGALRM interrupts it
        while True:
            pass
    if text == "stuck":  # SIGALRM blocked, as in C code that never returns: the driver must kill the worker
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
        time.sleep(60)
    if text == "hog":
        return np.ones(2**31, dtype=np.uint8)  # 2 GiB under a 1 GiB address-space limit
    if text == "litter":  # what a writer killed mid-write leaves: a temporary file beside a shard
        out = Path(os.environ[LITTER_ENV])
        (out / ".part-00000.parquet.tmp-1").write_bytes(b"PAR1 half a shard")
        (out / "errors" / ".part-00000.jsonl.tmp-1").write_bytes(b'{"id": ')
    if text == "raise":
        raise IndexError("list index out of range")
    return parse(text, "json", name=name)


def _json_size(obj) -> int:
    """Nodes of a JSON value counted independently of the parser: one per value, one per object member."""
    if isinstance(obj, dict):
        return 1 + sum(1 + _json_size(v) for v in obj.values())
    if isinstance(obj, list):
        return 1 + sum(_json_size(v) for v in obj)
    return 1


def encode_faulty(src: Path, out: Path, **options):
    """``encode_to_parquet`` of a JSON-lines file of ``{"id", "text"}`` records with :func:`faulty_parser`."""
    return encode_to_parquet(
        src, out, kind="faulty", extra_parsers=FAULTS, coords="tree", id_field="id", progress=False, **options
    )


def _check(out: Path, ids: list[str]) -> tuple[dict, dict]:
    """in = out + errors, no duplicates, per shard and in total; returns (rows by id, errors by id)."""
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"]
    rows = read_output(out).to_pylist() if m["shards"] else []
    errors = read_errors(out)
    row_ids = [r["id"] for r in rows]
    err_ids = [e["id"] for e in errors]
    assert len(set(row_ids)) == len(row_ids) and len(set(err_ids)) == len(err_ids), "duplicates"
    assert not set(row_ids) & set(err_ids)
    assert sorted(row_ids + err_ids) == sorted(ids)
    t = m["totals"]
    assert t["records"] == t["encoded"] + t["errors"] == len(ids) and t["errors"] == len(errors)
    for e in m["shards"].values():
        assert pq.read_metadata(out / e["file"]).num_rows == e["rows"]
    assert not list(out.rglob(".*.tmp-*"))
    return {r["id"]: r for r in rows}, {e["id"]: e for e in errors}


def _jsonl(path: Path, payloads: list[str]) -> list[str]:
    path.write_text("".join(json.dumps({"id": f"r{i}", "text": p}) + "\n" for i, p in enumerate(payloads)))
    return [f"r{i}" for i in range(len(payloads))]


def _good(i: int) -> str:
    return json.dumps({"k": i, "v": list(range(i % 5)), "o": {"x": [None] * (i % 3)}})


@pytest.mark.parametrize("workers", [0, 2])
def test_a_run_leaves_no_temporary_file_of_a_writer_killed_mid_write(tmp_path, monkeypatch, workers):
    out = tmp_path / "enc"
    (out / "errors").mkdir(parents=True)
    monkeypatch.setenv(LITTER_ENV, str(out))
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [_good(0), "litter", _good(2)])
    s = encode_faulty(src, out, shard_size=1, workers=workers)
    assert (s.records, s.errors) == (3, 1)  # "litter" itself is no JSON
    _check(out, ids)  # among its checks: no ".*.tmp-*" file is left


def test_worker_death_timeouts_memory_and_exceptions_are_rows_of_errors(tmp_path, monkeypatch):
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(CALLS_ENV, str(calls))
    payloads = [_good(0), "die", _good(2), "spin", _good(4), "stuck", "hog", _good(7), "raise", "[1,", _good(10)]
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, payloads)
    limits = Limits(record_timeout=1.0, max_memory_bytes=2**30)
    out = tmp_path / "enc"
    s = encode_faulty(src, out, limits=limits, shard_size=4, workers=2)
    rows, errors = _check(out, ids)
    assert (s.records, s.errors) == (len(ids), 6)
    assert errors["r1"]["stage"] == "worker" and "SIGKILL" in errors["r1"]["message"]
    assert errors["r3"]["stage"] == "timeout" and errors["r3"]["error_type"] == "LimitError"
    assert errors["r5"]["stage"] == "timeout" and "killed" in errors["r5"]["message"]
    assert errors["r6"]["stage"] == "memory"
    assert errors["r8"]["stage"] == "parse" and errors["r8"]["error_type"] == "IndexError"
    assert errors["r9"]["stage"] == "parse" and "in.jsonl line 10" in errors["r9"]["message"]
    for e in errors.values():
        assert e["input"] == "in.jsonl" and e["position"] == f"line {int(e['id'][1:]) + 1}"
    for rid, row in rows.items():  # the records around the faults, in the same shards, were encoded
        assert row["num_nodes"] == _json_size(json.loads(payloads[int(rid[1:])]))
    # --resume keeps every error (not one faulty record runs again) unless --retry-errors
    before = calls.read_text().splitlines().count("die")
    s2 = encode_to_parquet(
        src,
        out,
        kind="faulty",
        extra_parsers=FAULTS,
        coords="tree",
        limits=limits,
        id_field="id",
        shard_size=4,
        workers=2,
        progress=False,
        resume=True,
    )
    assert s2.shards_skipped == 3 and calls.read_text().splitlines().count("die") == before
    payloads[0] = _good(100)  # a changed record: its shard is encoded again, the killer in it is not run again
    _jsonl(src, payloads)
    s3 = encode_to_parquet(
        src,
        out,
        kind="faulty",
        extra_parsers=FAULTS,
        coords="tree",
        limits=limits,
        id_field="id",
        shard_size=4,
        workers=1,
        progress=False,
        resume=True,
    )
    rows, errors = _check(out, ids)
    assert s3.shards_skipped == 2 and calls.read_text().splitlines().count("die") == before
    assert rows["r0"]["num_nodes"] == _json_size(json.loads(payloads[0])) and "r1" in errors
    payloads[1] = _good(1)
    _jsonl(src, payloads)  # the killer was fixed: --retry-errors encodes it (and retries the other errors)
    encode_to_parquet(
        src,
        out,
        kind="faulty",
        extra_parsers=FAULTS,
        coords="tree",
        limits=limits,
        id_field="id",
        shard_size=4,
        workers=2,
        progress=False,
        resume=True,
        retry_errors=True,
    )
    rows, errors = _check(out, ids)
    assert "r1" in rows and set(errors) == {"r3", "r5", "r6", "r8", "r9"}


def test_bad_unicode_lines_are_errors_and_resume_passes_them(tmp_path):
    src = tmp_path / "in.jsonl"
    lines = [
        json.dumps({"text": "[1]"}).encode(),
        b'{"\\ud800": 1, "text": "[2]"}',
        b'{"text": "[\xff]"}',
        b'{"text": "[\\"\\ud83d\\ude00\\"]"}',
        b'{"text": "[\\"\\udc00\\"]"}',
    ]
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "enc"
    for extra in ([], ["--resume"]):
        assert (
            main(
                ["encode", str(src), "--kind", "json", "--out", str(out), "--shard-size", "2", "--no-progress", *extra]
            )
            == 0
        )
        rows, errors = _check(out, ["1", "2", "3", "4", "5"])
        assert set(rows) == {"1", "4"} and errors["2"]["stage"] == errors["3"]["stage"] == "read"
        assert "surrogate" in errors["2"]["message"] and "surrogate" in errors["5"]["message"]


def _start(cmd: list[str], out: Path, first_shard_timeout: float = 60) -> subprocess.Popen:
    """``cmd`` started with default signal handling, returned once its first shard (any worker's) is written.

    Not shard 0 in particular: with a worker slow to start (a loaded machine, the suite's other
    processes), shard 0 can be among the last written, and a signal sent then lands on a finished run.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals
    )
    deadline = time.monotonic() + first_shard_timeout
    while not any(out.glob("part-*.parquet")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    return proc


def _default_signals() -> None:
    """In the child before ``exec``: ``SIGINT``/``SIGTERM`` at their defaults and unblocked, whatever the
    test process inherited or set (an ignored or blocked signal would carry over into the run)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM]
)  # kill -9: test_encode_cli.py::test_resume_after_kill_9_...
def test_driver_interrupted_then_resumed(shared_data, tmp_path, sig):
    from structpos.pipeline.records import conllu_sentences

    src = long_conllu(shared_data, tmp_path)
    out = tmp_path / "enc"
    cmd = [
        sys.executable,
        "-m",
        "structpos",
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
    ]  # ~2,000 sentences in ~200 shards: the run is far from done when its first shard is written
    proc = _start(cmd, out)
    time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    if sig in (signal.SIGINT, signal.SIGTERM):
        assert proc.returncode == 130 and "interrupted" in err and "--resume" in err and "Traceback" not in err
    assert not json.loads((out / "manifest.json").read_text())["complete"]
    rerun = subprocess.run(
        cmd + ["--resume"], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120
    )
    assert rerun.returncode == 0, rerun.stderr
    expected = [f"{src.name}#{s}" for s, _, _ in conllu_sentences(src.read_text(encoding="utf-8"))]
    _check(out, expected)
    assert read_output(out).column("id").to_pylist() == expected  # in input order, nothing lost or twice


def test_disk_full_fails_in_one_line_then_resume_completes(tmp_path):
    payloads = [_good(i) for i in range(30)] + [json.dumps(list(range(4000)))] * 10  # the last shard is large
    src = tmp_path / "in.jsonl"
    ids = [str(i) for i in range(1, 41)]
    src.write_text("".join(json.dumps({"text": p}) + "\n" for p in payloads))
    out = tmp_path / "enc"
    args = [
        "encode",
        str(src),
        "--kind",
        "json",
        "--out",
        str(out),
        "--shard-size",
        "10",
        "--workers",
        "2",
        "--no-progress",
    ]
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (48000, 48000)); "
        "from structpos.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    full = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert full.returncode == 2 and full.stderr.count("\n") == 1, full.stderr
    assert full.stderr.startswith("structpos: error: ") and "File too large" in full.stderr
    assert not json.loads((out / "manifest.json").read_text())["complete"]
    assert main(args + ["--resume"]) == 0
    rows, errors = _check(out, ids)
    assert not errors and [rows[i]["num_nodes"] for i in ids] == [_json_size(json.loads(p)) for p in payloads]


def test_damaged_shards_are_encoded_again_on_resume(tmp_path):
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [_good(i) for i in range(12)] + ["[1,"])
    out = tmp_path / "enc"
    args = [
        "encode",
        str(src),
        "--kind",
        "json",
        "--id-field",
        "id",
        "--out",
        str(out),
        "--shard-size",
        "3",
        "--workers",
        "0",
        "--no-progress",
    ]
    assert main(args) == 0
    reference = read_output(out)
    (out / "part-00001.parquet").write_bytes(b"PAR1 garbage")  # damaged
    p2 = out / "part-00002.parquet"
    p2.write_bytes(p2.read_bytes()[: p2.stat().st_size // 2])  # truncated
    (out / "errors" / "part-00004.jsonl").write_text("")  # an error line lost
    (out / "part-00003.parquet").unlink()  # missing
    assert main(args + ["--resume"]) == 0
    _check(out, ids)
    assert read_output(out).equals(reference)
    assert json.loads((out / "manifest.json").read_text())["totals"]["errors"] == 1


def test_changed_record_is_encoded_again_and_changed_options_refused(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    payloads = [_good(i) for i in range(9)]
    ids = _jsonl(src, payloads)
    out = tmp_path / "enc"
    args = [
        "encode",
        str(src),
        "--kind",
        "json",
        "--id-field",
        "id",
        "--out",
        str(out),
        "--shard-size",
        "3",
        "--workers",
        "0",
        "--no-progress",
    ]
    assert main(args) == 0
    payloads[4] = json.dumps({"now": [[1, 2], [3, {"deeper": True}]]})
    _jsonl(src, payloads)
    capsys.readouterr()
    assert main(args + ["--resume"]) == 0
    assert "(2 resumed)" in capsys.readouterr().out
    rows, _ = _check(out, ids)
    direct = parse(payloads[4], "json")
    assert rows["r4"]["num_nodes"] == direct.num_nodes == _json_size(json.loads(payloads[4]))
    assert rows["r4"]["parent"] == direct.parent.tolist()
    assert main(args + ["--resume", "--coords", "tree:4x4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "different options" in err and "coords: 'tree' -> 'tree:4x4'" in err


def test_a_second_run_on_the_same_output_is_refused_naming_the_holder(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [_good(1)])
    out = tmp_path / "enc"
    with lock_output(out):
        assert main(["encode", str(src), "--kind", "json", "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"pid {os.getpid()}" in err and "another run" in err
    assert main(["encode", str(src), "--kind", "json", "--out", str(out), "--workers", "0", "--no-progress"]) == 0


def test_hostile_directory_entries_are_skipped_with_reasons_never_opened(tmp_path, monkeypatch):
    d = tmp_path / "corpus"
    (d / "sub").mkdir(parents=True)
    (d / "a.json").write_text('{"a": 1}')
    (d / "sub" / "b.json").write_text("[1, 2]")
    (d / "dangling.json").symlink_to(d / "missing.json")
    (d / "self.json").symlink_to(d / "self.json")  # a symlink loop
    (d / "sub" / "up").symlink_to(d)  # a directory loop
    (d / "zero.json").symlink_to("/dev/zero")
    (d / "link.json").symlink_to(d / "a.json")
    os.mkfifo(d / "pipe.json")
    secret = d / "secret.json"
    secret.write_text("[3]")
    secret.chmod(0)
    if os.geteuid() == 0:  # root reads anything: make the access check see what another user would
        import structpos.pipeline.walk as walk

        real = os.access
        monkeypatch.setattr(walk.os, "access", lambda p, mode: False if Path(p) == secret else real(p, mode))
    (d / "notes.bin").write_bytes(b"\x00\x01")
    with open(os.path.join(os.fsencode(d), b"caf\xe9.json"), "w") as fh:  # a Latin-1 file name
        fh.write("[4]")
    latin = os.fsdecode(b"caf\xe9.json")
    (d / "table.csv").write_text('a,b\n"<table>",2\n')

    def skipped(out: Path) -> dict[str, str]:
        m = json.loads((out / "manifest.json").read_text())
        assert m["skipped"]["count"] == len(m["skipped"]["entries"]) == sum(m["skipped"]["by_reason"].values())
        return {e["path"]: e["reason"] for e in m["skipped"]["entries"]}

    out = tmp_path / "plain"
    t0 = time.monotonic()
    assert main(["encode", str(d), "--kind", "json", "--out", str(out), "--workers", "0", "--no-progress"]) == 0
    rows, errors = _check(out, ["a.json", "sub/b.json", latin])
    assert errors[latin]["stage"] == "read" and "not valid UTF-8" in errors[latin]["message"]
    why = skipped(out)
    for name in ("dangling.json", "self.json", "zero.json", "link.json", "sub/up"):
        assert why[name].startswith("symlink"), (name, why[name])
    assert why["pipe.json"] == "fifo" and why["secret.json"].startswith("unreadable")
    assert "not --kind json" in why["table.csv"] and "unknown suffix" in why["notes.bin"]
    out = d / "follow"  # inside the input: not read as input
    for _ in range(2):  # the second time with the first run's manifest.json etc. in the input directory
        assert (
            main(
                [
                    "encode",
                    str(d),
                    "--kind",
                    "json",
                    "--out",
                    str(out),
                    "--follow-symlinks",
                    "--workers",
                    "0",
                    "--no-progress",
                    "--overwrite",
                ]
            )
            == 0
        )
    rows, _errors = _check(out, ["a.json", "link.json", "sub/b.json", latin])
    why = skipped(out)
    assert why["dangling.json"] == "dangling symlink" and why["self.json"] == "symlink loop"
    assert why["zero.json"] == "character device" and why["pipe.json"] == "fifo"
    assert why["sub/up"].startswith("directory already visited") and why["follow"].startswith("the output directory")
    assert rows["link.json"]["labels"] == rows["a.json"]["labels"]
    assert time.monotonic() - t0 < 30  # nothing blocked on the FIFO or read /dev/zero


def test_suffix_wins_over_sniffing_and_kind_code_reads_only_the_languages_asked(tmp_path):
    pytest.importorskip("structpos.parsers.code")
    d = tmp_path / "src"
    d.mkdir()
    (d / "a.py").write_text("def f(x):\n    return x\n")
    (d / "b.c").write_text("int main(void) { return 0; }\n")
    (d / "c.js").write_text("function f(x) { return x; }\n")
    text = 'name,markup\nx,"<table><tr><td>1</td></tr></table>"\ny,2\n'
    (d / "t.csv").write_text(text)
    out = tmp_path / "py"
    assert (
        main(
            [
                "encode",
                str(d),
                "--kind",
                "code",
                "--language",
                "python",
                "--out",
                str(out),
                "--workers",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    rows, _ = _check(out, ["a.py"])
    why = {e["path"]: e["reason"] for e in json.loads((out / "manifest.json").read_text())["skipped"]["entries"]}
    assert "language c" in why["b.c"] and "language javascript" in why["c.js"] and "t.csv" in why
    out = tmp_path / "all"
    assert (
        main(
            [
                "encode",
                str(d),
                "--coords",
                "table",
                "--glob",
                "*.csv",
                "--kind",
                "table",
                "--out",
                str(out),
                "--workers",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    rows, _errors = _check(out, ["t.csv"])
    import csv
    import io

    reference = list(csv.reader(io.StringIO(text)))  # the csv module's reading of the file (HTML sniffing finds 1 cell)
    labels = rows["t.csv"]["labels"]
    assert labels.count("row") == len(reference) == 3
    assert labels.count("header") + labels.count("cell") == sum(len(r) for r in reference) == 6


def _encode_args(src: Path, out: Path, *extra: str) -> list[str]:
    return [
        "encode",
        str(src),
        "--kind",
        "json",
        "--id-field",
        "id",
        "--out",
        str(out),
        "--shard-size",
        "3",
        "--workers",
        "0",
        "--no-progress",
        *extra,
    ]


def _readable_flip(path: Path) -> None:
    """Flip one byte of a Parquet file so that it still reads (the damage counts alone cannot see)."""
    data = path.read_bytes()
    original = pq.read_table(path)
    for pos in range(4, len(data) - 8):
        flipped = data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :]
        path.write_bytes(flipped)
        try:
            table = pq.read_table(path)
        except Exception:
            continue
        if table.num_rows == original.num_rows:
            return
    raise AssertionError("no readable one-byte flip found")  # pragma: no cover


def test_shard_files_are_checksummed_in_the_manifest(tmp_path):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [_good(i) for i in range(7)] + ["[1,"])
    out = tmp_path / "enc"
    assert main(_encode_args(src, out)) == 0
    m = json.loads((out / "manifest.json").read_text())
    import hashlib

    for index, entry in m["shards"].items():
        files = {entry["file"], entry["errors_file"], entry["index_file"]}
        assert set(entry["sha256"]) == files
        for rel, digest in entry["sha256"].items():
            assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest


def test_resume_re_encodes_a_shard_whose_bytes_changed_but_still_reads(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [_good(i) for i in range(11)] + ["[1,"])
    out = tmp_path / "enc"
    assert main(_encode_args(src, out)) == 0
    reference, ref_errors = read_output(out), read_errors(out)
    _readable_flip(out / "part-00001.parquet")  # one byte, still valid Parquet with the same row count
    err3 = out / "errors" / "part-00003.jsonl"
    err3.write_bytes(err3.read_bytes().replace(b"line", b"lime", 1))  # an error line edited, same line count
    capsys.readouterr()
    assert main(_encode_args(src, out, "--resume")) == 0
    assert "(2 resumed)" in capsys.readouterr().out  # shards 0 and 2 kept, 1 and 3 encoded again
    _check(out, ids)
    assert read_output(out).equals(reference)
    assert read_errors(out) == ref_errors


def test_resume_re_encodes_shards_copied_over_one_another(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [_good(i) for i in range(9)])
    out = tmp_path / "enc"
    assert main(_encode_args(src, out)) == 0
    reference = read_output(out)
    for folder, suffix in (("", ".parquet"), ("errors/", ".jsonl"), ("index/", ".json")):
        (out / f"{folder}part-00002{suffix}").write_bytes((out / f"{folder}part-00000{suffix}").read_bytes())
    capsys.readouterr()
    assert main(_encode_args(src, out, "--resume")) == 0
    assert "(2 resumed)" in capsys.readouterr().out
    _check(out, ids)  # no id twice, none missing
    assert read_output(out).equals(reference)


@pytest.mark.parametrize(
    "shards", ['[["00000", {}]]', '"all"', '{"00000": "done"}', '{"x": {}}', '{"00000": {"records": "3"}}']
)
def test_resume_refuses_a_manifest_whose_shards_are_malformed(tmp_path, capsys, shards):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [_good(i) for i in range(4)])
    out = tmp_path / "enc"
    assert main(_encode_args(src, out)) == 0
    path = out / "manifest.json"
    m = json.loads(path.read_text())
    m["shards"] = json.loads(shards)
    path.write_text(json.dumps(m))
    capsys.readouterr()
    assert main(_encode_args(src, out, "--resume")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "not a structpos manifest" in err and "--overwrite" in err
    assert main(_encode_args(src, out, "--overwrite")) == 0  # the way out it names works


def _poison_writes(monkeypatch, poisoned: set[str], exc: type[BaseException]) -> list[str]:
    """Make every Parquet write of a table holding a row of a ``poisoned`` record raise ``exc``
    (as pyarrow does when a record's output exceeds memory); returns the ids whose writes failed."""
    import pyarrow as pa

    failed: list[str] = []

    def check(table) -> None:
        hit = poisoned & set(table.column("id").to_pylist())
        if hit:
            failed.extend(sorted(hit))
            raise exc(f"malloc of size {2**40} failed")

    real_write_table, real_writer = pq.write_table, pq.ParquetWriter.write_table

    def write_table(table, where, *args, **kwargs):
        check(table)
        return real_write_table(table, where, *args, **kwargs)

    def writer_write_table(self, table, *args, **kwargs):
        check(table)
        return real_writer(self, table, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", write_table)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", writer_write_table)
    assert issubclass(pa.ArrowMemoryError, MemoryError)
    return failed


@pytest.mark.parametrize("exc_name", ["ArrowMemoryError", "MemoryError", "ArrowCapacityError"])
def test_a_record_whose_rows_cannot_be_written_is_an_error_and_the_rest_are_kept(tmp_path, monkeypatch, exc_name):
    import pyarrow as pa

    exc = getattr(pa, exc_name, None) or MemoryError
    src = tmp_path / "in.jsonl"
    payloads = [_good(i) for i in range(10)] + ["[1,"]
    ids = _jsonl(src, payloads)
    reference_out = tmp_path / "ref"
    assert main(_encode_args(src, reference_out, "--coords", "tree,lap:2")) == 0
    reference = {r["id"]: r for r in read_output(reference_out).to_pylist()}

    out = tmp_path / "enc"
    poisoned = {"r1", "r7", "r8"}  # shards 0 and 2 (one of them twice)
    failed = _poison_writes(monkeypatch, poisoned, exc)
    assert main(_encode_args(src, out, "--coords", "tree,lap:2")) == 0
    assert poisoned <= set(failed)
    rows, errors = _check(out, ids)  # in = out + errors, nothing twice
    assert set(errors) == poisoned | {"r10"}
    stage = "memory" if issubclass(exc, MemoryError) else "write"
    assert {errors[i]["stage"] for i in poisoned} == {stage}
    assert all(
        errors[i]["error_type"] == exc.__name__ and "cannot store its rows" in errors[i]["message"] for i in poisoned
    )
    assert errors["r10"]["stage"] == "parse"
    assert rows == {i: r for i, r in reference.items() if i not in poisoned}  # the others exactly as without the fault

    # a resume keeps them as errors; with --retry-errors (the fault gone) they are encoded
    monkeypatch.undo()
    assert main(_encode_args(src, out, "--coords", "tree,lap:2", "--resume")) == 0
    assert set(_check(out, ids)[1]) == poisoned | {"r10"}
    assert main(_encode_args(src, out, "--coords", "tree,lap:2", "--resume", "--retry-errors")) == 0
    rows, errors = _check(out, ids)
    assert set(errors) == {"r10"} and rows == reference


def test_a_shard_too_large_for_one_table_is_written_record_by_record(tmp_path, monkeypatch):
    """Each record's rows fit, all of them together do not (as with ``tree,spd:8`` on many large files):
    nothing is lost, the rows are those of a normal run."""
    import structpos.pipeline.shard_writer as shards

    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [_good(i) for i in range(8)] + ["[1,"])
    reference_out = tmp_path / "ref"
    assert main(_encode_args(src, reference_out, "--coords", "tree,spd")) == 0
    reference = read_output(reference_out)

    real = shards.rows_to_table

    def one_record_at_most(rows, *args, **kwargs):
        if len({r["id"] for r in rows}) > 1:
            raise ValueError("a shard holds more than 2**31 values in one column; use a smaller --shard-size")
        return real(rows, *args, **kwargs)

    monkeypatch.setattr(shards, "rows_to_table", one_record_at_most)
    out = tmp_path / "enc"
    assert main(_encode_args(src, out, "--coords", "tree,spd")) == 0
    _check(out, ids)
    assert read_output(out).equals(reference)
    assert pq.ParquetFile(out / "part-00000.parquet").num_row_groups == 3  # one per record


def test_a_shard_retried_after_its_worker_died_is_written_naming_each_record(tmp_path):
    from structpos.pipeline.encode import EncodeOptions
    from structpos.pipeline.records import Record
    from structpos.pipeline.shards import ShardTask, encode_shard

    recs = [Record(f"r{i}", p, f"r{i}") for i, p in enumerate(["[1]", "[", "[2, [3]]"])]
    seen: list[int] = []
    task = ShardTask(0, recs, EncodeOptions("json", "tree"), str(tmp_path), ["a", "b", "c"], retries=1)
    res = encode_shard(task, on_record=seen.append)
    assert (res.records, res.encoded, res.errors, res.rows) == (3, 2, 1, 2)
    # encoding names records 0, 1, 2 then -1; writing names the two with rows, then -1
    assert seen == [0, 1, 2, -1, 0, 2, -1]
    assert pq.read_table(tmp_path / "part-00000.parquet").column("id").to_pylist() == ["r0", "r2"]


def test_resume_with_another_shard_size_is_refused_saying_which_one_resumes(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [_good(i) for i in range(5)])
    out = tmp_path / "enc"
    assert main(_encode_args(src, out)) == 0  # --shard-size 3
    capsys.readouterr()
    assert main(_encode_args(src, out, "--resume", "--shard-size", "1")) == 2  # the last --shard-size wins
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shard_size: 3 -> 1" in err and "resume with --shard-size 3" in err, err
    assert main(_encode_args(src, out, "--resume")) == 0
    _check(out, ids)


def test_a_shard_whose_rows_are_large_for_max_memory_bytes_is_written_record_by_record(tmp_path):
    """Past a quarter of max_memory_bytes of rows a shard goes record by record from the start (an
    allocation failing inside Arrow's C++ may abort the worker instead of raising); same rows."""
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [json.dumps(list(range(40)))] * 6)  # 41 nodes: spd is 41 x 41 int64 = 13,448 bytes
    reference_out, out = tmp_path / "ref", tmp_path / "enc"
    assert main(_encode_args(src, reference_out, "--coords", "spd")) == 0
    # each record's 13,448 bytes fit 100,000; a shard's three records (~44,000 bytes of rows) exceed a quarter
    assert main(_encode_args(src, out, "--coords", "spd", "--limit", "max_memory_bytes=100000")) == 0
    _check(out, ids)
    assert read_output(out).equals(read_output(reference_out))
    assert pq.ParquetFile(reference_out / "part-00000.parquet").num_row_groups == 1
    assert pq.ParquetFile(out / "part-00000.parquet").num_row_groups == 3


def test_shards_of_a_manifest_without_checksums_are_kept_and_checksummed_on_resume(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    ids = _jsonl(src, [_good(i) for i in range(6)])
    out = tmp_path / "enc"
    assert main(_encode_args(src, out)) == 0
    path = out / "manifest.json"
    m = json.loads(path.read_text())
    m["version"] = 2  # as written before shard files were checksummed
    for entry in m["shards"].values():
        del entry["sha256"]
    path.write_text(json.dumps(m))
    capsys.readouterr()
    assert main(_encode_args(src, out, "--resume")) == 0
    assert "(2 resumed)" in capsys.readouterr().out  # intact by their counts: kept
    import hashlib

    for entry in json.loads(path.read_text())["shards"].values():
        assert {rel: hashlib.sha256((out / rel).read_bytes()).hexdigest() for rel in entry["sha256"]} == entry["sha256"]
    _check(out, ids)
