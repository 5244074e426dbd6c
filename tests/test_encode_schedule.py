"""How the local engine schedules its workers (issue 24, the encode row): no core idles for the driver.

Every worker starts at once (a task sent to a worker blocks until that worker has imported
structpos), a finished shard reaches the manifest only after its worker has its next shard, and
the input is not walked twice when no progress bar is shown. None of it may change the output:
1 and 2 workers write the same bytes. The timeline that showed where the time went
(:mod:`structpos.pipeline.trace`, ``STRUCTPOS_ENCODE_TRACE``) is checked here too.
"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("pyarrow")

from structpos.pipeline import encode_to_parquet, read_errors, trace
from structpos.pipeline.encode import EncodeOptions
from structpos.pipeline.isolation import WorkerPool
from structpos.pipeline.records import Record
from structpos.pipeline.shard_writer import ShardTask


def _input(tmp_path, n: int = 13):
    src = tmp_path / "in.jsonl"
    texts = [json.dumps(list(range(i % 5))) if i % 4 else "[1," for i in range(n)]  # every 4th record fails
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return src


def _files(out) -> dict[str, bytes]:
    """Every output file but the manifest (which holds timings), by path."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def _shard_entries(out) -> dict:
    shards = json.loads((out / "manifest.json").read_text())["shards"]
    return {k: {f: v for f, v in e.items() if f != "seconds"} for k, e in shards.items()}


def test_one_and_two_workers_write_the_same_bytes(tmp_path):
    src = _input(tmp_path)
    outs = {}
    for workers in (0, 1, 2):
        out = tmp_path / f"w{workers}"
        s = encode_to_parquet(src, out, kind="json", coords="tree", shard_size=2, workers=workers, progress=False)
        assert (s.records, s.encoded, s.errors, s.shards) == (13, 9, 4, 7)
        outs[workers] = out
    assert _files(outs[1]) == _files(outs[0]) == _files(outs[2])
    assert _shard_entries(outs[1]) == _shard_entries(outs[0]) == _shard_entries(outs[2])
    assert [e["id"] for e in read_errors(outs[2])] == ["1", "5", "9", "13"]  # in input order, whoever ran them


def test_a_finished_shard_is_yielded_after_its_worker_has_the_next_one(tmp_path):
    """Each shard naps 0.3 s in the worker, so the driver collects one result at a time."""
    options = EncodeOptions("gil", "tree", extra_parsers=(("gil", f"{__name__.rpartition('.')[2]}:gil_parser"),))
    tasks = [ShardTask(i, [Record(f"r{i}", "nap", f"r{i}")], options, str(tmp_path), [f"d{i}"]) for i in range(4)]
    pool = WorkerPool(1, options)
    seen = []
    for res in pool.run(tasks):
        busy = [w.task.index for w in pool._busy if w.task is not None]
        seen.append((res.index, busy))
    assert seen == [(0, [1]), (1, [2]), (2, [3]), (3, [])]


def test_every_worker_starts_before_the_first_shard_is_sent(tmp_path, monkeypatch):
    where = tmp_path / "trace"
    monkeypatch.setenv(trace.TRACE_ENV, str(where))
    src = _input(tmp_path)
    encode_to_parquet(src, tmp_path / "out", kind="json", coords="tree", shard_size=2, workers=2, progress=False)
    spans = trace.load(where)
    driver = [s for s in spans if s["role"] == "driver"]
    spawns = [s for s in driver if s["name"] == "spawn"]
    submits = [s for s in driver if s["name"] == "submit"]
    assert len(spawns) == 2 and len(submits) >= 2  # to a busy worker a shard goes through its outbox thread
    assert max(s["t1"] for s in spawns) <= min(s["t0"] for s in submits)
    shards = [s for s in spans if s["name"] == "shard"]
    assert sorted(s["shard"] for s in shards) == list(range(7))
    assert {s["pid"] for s in shards} <= {s["pid"] for s in spans if s["name"] == "startup"}
    summary = trace.summarize(spans, cores=2)
    assert summary["wall"] > 0 and summary["idle_core_s"] >= 0
    assert sum(p["shards"] for p in summary["per_process"].values()) == 7
    assert {"run", "read", "manifest", "finish"} <= set(summary["driver"])


def test_no_trace_is_written_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv(trace.TRACE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with trace.span("read", shard=1) as extra:
        extra["records"] = 2
    trace.record("x", 0.0, 1.0)
    assert not trace.enabled() and list(tmp_path.iterdir()) == []


def test_the_input_is_not_counted_without_a_progress_bar(tmp_path, monkeypatch):
    from structpos.pipeline import run

    def refuse(*args, **kwargs):
        raise AssertionError("counted the input for a bar that is not shown")

    monkeypatch.setattr(run, "count_records", refuse)
    s = encode_to_parquet(_input(tmp_path), tmp_path / "out", kind="json", coords="tree", workers=0, progress=False)
    assert s.records == 13


def test_a_death_requeues_the_shard_waiting_in_the_workers_inbox(tmp_path):
    """One worker, one record per shard: each fault strikes while the next shard waits in the inbox."""
    from structpos.limits import Limits

    payloads = ["[0]", "die", "[2, [2]]", "stuck", "[4]", "die", "[6]"]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": p}) + "\n" for p in payloads))
    s = encode_to_parquet(
        src,
        tmp_path / "out",
        kind="faulty",
        extra_parsers={"faulty": "test_faults:faulty_parser"},
        coords="tree",
        limits=Limits(record_timeout=1.0),
        shard_size=1,
        workers=1,
        progress=False,
    )
    assert (s.records, s.encoded, s.errors, s.shards) == (7, 4, 3, 7)
    errors = {e["id"]: e["stage"] for e in read_errors(tmp_path / "out")}
    assert errors == {"2": "worker", "4": "timeout", "6": "worker"}


MARK_ENV = "STRUCTPOS_TEST_NOT_KILLED"


def gil_parser(text, name=None, **_):
    """JSON, except ``"hold"``: 20 s in C code holding the GIL with ``SIGALRM`` blocked (runs in the workers)."""
    if text == "nap":
        import time

        time.sleep(0.3)
        text = "[1]"
    if text == "hold":
        import ctypes
        import signal

        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
        ctypes.PyDLL(None).sleep(20)
        with open(os.environ[MARK_ENV], "w") as fh:  # only reached when the driver failed to kill this worker
            fh.write("not killed")
    from structpos import parse

    return parse(text, "json", name=name)


def test_a_record_holding_the_gil_is_timed_out_while_the_next_large_shard_waits(tmp_path, monkeypatch):
    """The next shard (more than a pipe buffer) is on its way to a worker whose inbox thread cannot run:
    the driver still kills the worker at the record's timeout (the unit test below pins the send down)."""
    from structpos.limits import Limits

    mark = tmp_path / "not-killed"
    monkeypatch.setenv(MARK_ENV, str(mark))
    big = json.dumps(list(range(40_000)))  # ~270 kB: more than the pipe holds
    payloads = ["[0]", "hold", big, big, "[4]"]  # shard 2 is sent once shard 0 is done, while shard 1 holds the GIL
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": p}) + "\n" for p in payloads))
    s = encode_to_parquet(
        src,
        tmp_path / "out",
        kind="gil",
        extra_parsers={"gil": f"{__name__.rpartition('.')[2]}:gil_parser"},
        coords="tree",
        limits=Limits(record_timeout=1.0),
        shard_size=1,
        workers=1,
        progress=False,
    )
    assert (s.records, s.encoded, s.errors) == (5, 4, 1)
    assert [(e["id"], e["stage"]) for e in read_errors(tmp_path / "out")] == [("2", "timeout")]
    assert not mark.exists()  # killed at its timeout, not after its 20 s in C code


def test_a_shard_for_a_busy_worker_never_blocks_the_driver(tmp_path):
    """A worker that does not read (its inbox thread starved of the GIL) cannot stall the driver's send."""
    import multiprocessing as mp
    import threading

    from structpos.pipeline.isolation import _Worker

    options = EncodeOptions("json", "tree")
    pool = WorkerPool(1, options)
    parent, child = mp.Pipe()  # nobody reads child until the end
    w = _Worker(process=None, conn=parent, state=[0.0, 0.0, 0.0])
    w.tasks.append(ShardTask(0, [Record("a", "[1]", "a")], options, str(tmp_path), ["d"]))
    pool._busy.append(w)
    big = ShardTask(1, [Record("b", json.dumps(list(range(60_000))), "b")], options, str(tmp_path), ["d"])
    handed = threading.Event()
    threading.Thread(target=lambda: (pool._submit(big, w), handed.set()), daemon=True).start()
    assert handed.wait(60)  # a hang guard, not a timing: a blocking send would never return here
    assert [t.index for t in w.tasks] == [0, 1]
    received = child.recv()  # the outbox thread delivers it once the worker reads
    assert received.index == 1 and received.records == big.records
    w.outbox.put(None)


def test_the_last_shard_waits_for_a_free_worker_instead_of_queueing_behind_one(tmp_path, monkeypatch):
    """With two workers the input's last shard goes to a worker with nothing to do, so that at the end
    no core idles while the other worker runs two shards in turn; the shards before it do queue."""
    options = EncodeOptions("json", "tree")
    tasks = [ShardTask(i, [Record(f"r{i}", f"[{i}]", f"r{i}")], options, str(tmp_path), [f"d{i}"]) for i in range(7)]
    pool = WorkerPool(2, options)
    handed: list[tuple[int, bool]] = []
    real = pool._submit

    def submit(task, w):
        handed.append((task.index, w is not None and bool(w.tasks)))
        return real(task, w)

    monkeypatch.setattr(pool, "_submit", submit)
    assert sorted(r.index for r in pool.run(tasks)) == list(range(7))
    assert sorted(i for i, _ in handed) == list(range(7))
    assert dict(handed)[6] is False  # to a free worker
    assert any(behind for _, behind in handed)  # the others were queued behind a busy worker
