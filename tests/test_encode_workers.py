"""Isolated workers parse in their own process (issue 24): no helper round trip per record, the same bytes.

A parse whose C code cannot be interrupted (tree-sitter) normally runs in a forked helper killed at
``record_timeout`` (:func:`structpos.parsers._guard.call_guarded`): a pipe round trip per record
that pickles the parse's arrays back. A worker of the local engine or a Ray task is itself killed
past the deadline by its driver, so there the helper is skipped
(:meth:`~structpos.pipeline.EncodeOptions.parser_limits`).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("tree_sitter_python")

from structpos.pipeline.encode import EncodeOptions
from structpos.pipeline.records import Record
from structpos.pipeline.shard_writer import ShardTask, encode_shard

SOURCES = ["def f(x):\n    return x + 1\n", "class A:\n    def g(self):\n        pass\n", "def (:\n"]


def _records() -> list[Record]:
    return [Record(f"r{i}", s, f"r{i}.py", "code", "python") for i, s in enumerate(SOURCES)]


def _encode(tmp_path, name: str, options: EncodeOptions) -> tuple[str, int]:
    out = tmp_path / name
    res = encode_shard(ShardTask(0, _records(), options, str(out), ["d0", "d1", "d2"]))
    digest = hashlib.sha256((out / "part-00000.parquet").read_bytes()).hexdigest()
    return digest, res.encoded


def test_an_isolated_worker_parses_without_the_helper_and_writes_the_same_bytes(tmp_path, monkeypatch):
    from structpos.parsers import _guard

    calls: list[str] = []
    real = _guard._call  # every guarded call, pickled or raw, goes through it

    def spy(*args):
        calls.append(args[-1])  # the input's name
        return real(*args)

    monkeypatch.setattr(_guard, "_call", spy)
    options = EncodeOptions("code", "tree", "python", timeout_in_process=True)
    assert options.limits.record_timeout is not None  # the default limits time every record
    guarded = _encode(tmp_path, "guarded", options)
    assert calls == ["r0", "r1", "r2"]  # one helper round trip per record
    calls.clear()
    isolated = _encode(tmp_path, "isolated", replace(options, killed_past_timeout=True))
    assert calls == []
    assert isolated == guarded and guarded[1] == 3  # a parse with errors is still a tree


def test_the_worker_pool_and_ray_tasks_mark_their_options_killed_past_timeout():
    from structpos.pipeline.engines import _in_task
    from structpos.pipeline.isolation import WorkerPool

    options = EncodeOptions("code", "tree", "python")
    assert not options.killed_past_timeout
    for isolated in (WorkerPool(1, options).options, _in_task(options)):
        assert isolated.killed_past_timeout and isolated.timeout_in_process
        assert isolated.parser_limits().record_timeout is None
        assert isolated.limits == options.limits  # the record's own budget (SIGALRM, the driver's kill) is kept
        assert isolated.as_dict() == options.as_dict()  # not part of what the manifest compares


def test_the_pool_reads_the_next_shard_while_its_worker_encodes(tmp_path):
    """I/O overlapped with parsing, memory still bounded: when a shard's result arrives, the next shard's
    records are already read (one per worker ahead), and never more than that."""
    from structpos.pipeline.isolation import WorkerPool

    options = EncodeOptions("json", "tree")
    pulled = 0

    def tasks():
        nonlocal pulled
        for i in range(5):
            pulled += 1
            yield ShardTask(i, [Record(f"r{i}", f"[{i}]", f"r{i}")], options, str(tmp_path), [f"d{i}"])

    seen = []
    for done, res in enumerate(WorkerPool(1, options).run(tasks()), start=1):
        seen.append((res.index, pulled))
        # never more than one shard ahead of the results; fewer when two results arrive together
        # (both are yielded before the next read)
        assert min(5, done) <= pulled <= min(5, done + 1)
    assert seen[0][1] == 2  # the shard after the first was read before the first result
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]


def _child_environment(names, queue) -> None:  # pragma: no cover - runs in a spawned child
    import os

    queue.put({k: os.environ.get(k) for k in names})


def test_workers_start_with_the_worker_environment_unless_the_user_set_a_variable(monkeypatch):
    """A spawned worker sees :data:`WORKER_ENV` (one BLAS thread, the malloc settings), a variable the
    user set keeps the user's value, and the driver's own environment is left as it was."""
    import multiprocessing as mp
    import os

    from structpos.pipeline.isolation import WORKER_ENV, _worker_environment

    names = sorted(WORKER_ENV)
    assert {"OPENBLAS_NUM_THREADS", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"} <= set(names)
    for k in names:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")  # the user's choice wins
    before = dict(os.environ)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with _worker_environment():
        proc = ctx.Process(target=_child_environment, args=(names, queue))
        proc.start()
    seen = queue.get(timeout=60)
    proc.join(60)
    assert dict(os.environ) == before
    expected = dict(WORKER_ENV, MALLOC_TRIM_THRESHOLD_="12345")
    assert seen == expected
    assert int(seen["MALLOC_MMAP_THRESHOLD_"]) == 32 << 20
