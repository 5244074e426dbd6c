"""Engines: who runs the shards. Each takes :class:`~structpos.pipeline.shard_writer.ShardTask` s and
yields :class:`~structpos.pipeline.shard_writer.ShardResult` s as shards finish (in any order).

* ``local`` with ``workers=0``: in this process (no isolation from crashes; for debugging).
* ``local`` with ``N >= 1`` workers: a :class:`~structpos.pipeline.isolation.WorkerPool` of
  ``spawn`` processes; each encodes *and writes* its shard (only counts travel back), a record
  that times out or kills its worker becomes an error entry and the worker is replaced. Each
  worker encodes one shard while the next waits in its inbox (its records read and sent while the
  workers encode), so memory stays bounded however large the input and no worker waits for the
  driver between shards; the workers start together. Workers parse in their own
  process (no helper per parse: :meth:`~structpos.pipeline.options.EncodeOptions.parser_limits`).
* ``ray``: one Ray task per shard on a local cluster (``ray.init(num_cpus=N)``) or on an
  existing one (``address``). On a cluster of one node, the driver's, each task writes its
  shard itself and returns only its counts, as a local worker does (no table through the object
  store, no Parquet writing serialised in the driver); on a cluster of several nodes tasks
  return the Arrow table and errors and the driver writes them, so the workers need no shared
  filesystem. A shard whose task dies or runs past its
  time is run again one task per record, so only the record at fault becomes an error. Ray
  restarts dead workers itself. The per-record limits are the local workers' own: records are
  timed by ``SIGALRM`` inside the task (Ray runs tasks on the worker's main thread; a record
  stuck in C code is caught by the shard's time limit, then alone, by ``ray.get``'s timeout),
  and each task runs under ``max_memory_bytes`` of address space above what its worker
  already maps (:func:`~structpos.pipeline.isolation.memory_limited`; a record allocating past
  it fails with ``MemoryError`` and becomes an error entry of stage ``memory``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from .encode import EncodeOptions, cannot_store, encode_one, error_entry
from .isolation import WorkerPool, memory_limited
from .records import Record
from .shard_io import shard_digest, write_shard
from .shard_writer import ShardResult, ShardTask, encode_shard, encode_shard_table, write_shard_records

__all__ = ["run_serial", "run_processes", "run_ray", "ENGINES"]


def run_serial(tasks: Iterable[ShardTask], workers: int = 0, **_) -> Iterator[ShardResult]:
    """Encode each shard in this process (``SIGALRM`` per-record timeouts when in the main thread).

    Parameters
    ----------
    tasks : iterable of ShardTask
        The shards to encode.
    workers : int, optional
        Ignored (the signature every engine shares).

    Yields
    ------
    ShardResult
        One per shard, in order, after its files are written.

    Examples
    --------
    >>> import tempfile
    >>> from structpos.pipeline.encode import EncodeOptions
    >>> recs = [Record("a", "[1]", "a"), Record("b", "[", "b")]
    >>> task = ShardTask(0, recs, EncodeOptions("json", "tree"), tempfile.mkdtemp(), ["d1", "d2"])
    >>> [(r.index, r.encoded, r.errors) for r in run_serial([task])]
    [(0, 1, 1)]
    """
    for task in tasks:
        yield encode_shard(replace(task, options=replace(task.options, timeout_in_process=True)))


def run_processes(tasks: Iterable[ShardTask], workers: int = 1, **_) -> Iterator[ShardResult]:
    """The ``local`` engine: isolated worker processes, or this process when ``workers == 0``.

    Parameters
    ----------
    tasks : iterable of ShardTask
        The shards to encode; all share the options of the first.
    workers : int, optional
        ``spawn`` worker processes (each writes its own shards); 0 runs :func:`run_serial`.

    Yields
    ------
    ShardResult
        One per shard, in the order shards finish.

    Examples
    --------
    >>> import tempfile
    >>> from structpos.pipeline.encode import EncodeOptions
    >>> out, opts = tempfile.mkdtemp(), EncodeOptions("json", "tree")
    >>> tasks = [ShardTask(i, [Record(str(i), "[1, 2]", str(i))], opts, out, ["d"]) for i in range(2)]
    >>> sorted(r.index for r in run_processes(tasks, workers=0))
    [0, 1]
    """
    if workers <= 0:
        yield from run_serial(tasks)
        return
    it = iter(tasks)
    first = next(it, None)
    if first is not None:
        yield from WorkerPool(workers, first.options).run(itertools.chain([first], it))


# ------------------------------------------------------------------ Ray
def _ray_shard(task: ShardTask):
    with memory_limited(task.options.limits.max_memory_bytes, above_current=True):
        return encode_shard_table(task.index, task.records, _in_task(task.options), preset=task.preset)


def _ray_write_shard(task: ShardTask) -> tuple:
    """A task on the driver's node: encode the shard and write it here; ``("done", ShardResult)``
    or ``("oserror", errno, strerror, filename)`` (a disk full ends the run, as with local workers)."""
    with memory_limited(task.options.limits.max_memory_bytes, above_current=True):
        try:
            return ("done", encode_shard(replace(task, options=_in_task(task.options))))
        except OSError as e:
            return ("oserror", e.errno, e.strerror or str(e), e.filename)


def _on_driver_node(ray) -> bool:
    """The cluster is this machine alone (its tasks see the driver's filesystem)."""
    try:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        return len(alive) == 1 and alive[0]["NodeID"] == ray.get_runtime_context().get_node_id()
    except Exception:  # an older Ray, a client connection: assume no shared filesystem
        return False


def _ray_init(ray, workers: int, address: str | None) -> bool:
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
    return True


def _ray_per_record(ray, task: ShardTask, why: str) -> ShardResult:
    """Run a shard whose task died one record per task; a record whose task dies or hangs is an error."""
    t0 = time.perf_counter()
    options = task.options
    limit = options.limits.record_timeout
    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_one)
    refs = {k: remote.remote(rec, options) for k, rec in enumerate(task.records) if k not in task.preset}
    per_record: list = [([], task.preset.get(k)) for k in range(len(task.records))]
    for k, ref in refs.items():
        try:
            per_record[k] = ray.get(ref, timeout=None if limit is None else limit + 5.0)
        except Exception as e:  # the task died, was killed or timed out
            ray.cancel(ref, force=True)
            stage = "timeout" if type(e).__name__ == "GetTimeoutError" else "worker"
            per_record[k] = (
                [],
                error_entry(task.records[k], type(e).__name__, f"{why}; alone: {_first_line(e)}", stage),
            )
    return write_shard_records(
        Path(task.out_dir), task.index, task.records, per_record, options, task.record_digests(), t0=t0
    )


def _ray_one(record: Record, options: EncodeOptions):
    with memory_limited(options.limits.max_memory_bytes, above_current=True):
        return encode_one(record, _in_task(options))


def _in_task(options: EncodeOptions) -> EncodeOptions:
    """A Ray task's options: records timed by ``SIGALRM``; a task past its time is cancelled by the
    driver, so parsers need no helper process of their own (:meth:`EncodeOptions.parser_limits`)."""
    return replace(options, timeout_in_process=True, killed_past_timeout=True)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def run_ray(tasks: Iterable[ShardTask], workers: int = 2, address: str | None = None, **_) -> Iterator[ShardResult]:
    """The ``ray`` engine (see the module docstring).

    Parameters
    ----------
    tasks : iterable of ShardTask
        The shards to encode (at most two per CPU of the cluster in flight).
    workers : int, optional
        CPUs of the local cluster started when none is running and ``address`` is ``None``.
    address : str, optional
        The address of an existing Ray cluster.

    Yields
    ------
    ShardResult
        One per shard, in the order shards finish; the driver writes each shard's files.

    Raises
    ------
    ImportError
        Ray is not installed (the ``ray`` extra).

    Examples
    --------
    >>> ENGINES["ray"] is run_ray
    True
    >>> import tempfile  # starting Ray takes seconds, so this one is not run as a doctest
    >>> from structpos.pipeline.encode import EncodeOptions
    >>> task = ShardTask(0, [Record("a", "[1]", "a")], EncodeOptions("json", "tree"), tempfile.mkdtemp(), ["d"])
    >>> [r.encoded for r in run_ray([task], workers=1)]  # doctest: +SKIP
    [1]
    """
    from .._optional import require

    ray = require("ray", "ray", "--engine ray")
    started = _ray_init(ray, workers, address)
    try:
        in_task = _on_driver_node(ray)
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_write_shard if in_task else _ray_shard)
        cap = 2 * max(1, int(ray.available_resources().get("CPU", workers)))
        pending: dict = {}
        it = iter(tasks)
        exhausted = False
        while True:
            while not exhausted and len(pending) < cap:
                try:
                    task = next(it)
                except StopIteration:
                    exhausted = True
                    break
                pending[remote.remote(task)] = task
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1, timeout=_shard_timeout(pending))
            if not done:  # the oldest shard ran past its time: cancel it, then go record by record
                ref = next(iter(pending))
                _cancel_and_wait(ray, ref)
                yield _ray_per_record(ray, pending.pop(ref), "the shard's task ran past its time")
                continue
            for ref in done:
                task = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as e:  # the worker died (OOM, segfault): isolate the record
                    yield _ray_per_record(ray, task, f"the shard's task failed ({_first_line(e)})")
                    continue
                if in_task:
                    yield _written(outcome)
                    continue
                table, errors, res = outcome
                ids, digests = [r.id for r in task.records], task.record_digests()
                try:
                    res.sha256 = write_shard(Path(task.out_dir), res.index, table, errors, ids, digests)
                except Exception as e:  # rows the driver cannot store: record by record, the culprit an error
                    if not cannot_store(e):
                        raise
                    yield _ray_per_record(ray, task, f"the shard could not be stored ({_first_line(e)})")
                    continue
                res.digest = shard_digest(ids, digests)
                yield res
    finally:
        if started:
            ray.shutdown()


def _cancel_and_wait(ray, ref, wait: float = 60.0) -> None:
    """Kill a shard's task and wait until Ray reports it ended, so that a task cancelled while it was
    writing the shard cannot replace the files the driver writes for the shard next."""
    ray.cancel(ref, force=True)
    try:
        ray.get(ref, timeout=wait)
    except Exception:  # TaskCancelledError / WorkerCrashedError: it ended; GetTimeoutError: go on regardless
        pass


def _written(outcome: tuple) -> ShardResult:
    if outcome[0] == "oserror":
        _, errno, strerror, filename = outcome
        raise OSError(errno, f"writing a shard: {strerror}", filename)
    return outcome[1]


def _shard_timeout(pending: dict) -> float | None:
    tasks: Sequence[ShardTask] = list(pending.values())
    limit = tasks[0].options.limits.record_timeout if tasks else None
    return None if limit is None else limit * max(len(t.records) for t in tasks) + 5.0


ENGINES = {"local": run_processes, "ray": run_ray}
