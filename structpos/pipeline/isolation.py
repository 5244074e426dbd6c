"""Worker processes that survive their records: per-record timeout, memory limit, death and replacement.

The local engine runs shards in worker processes (``spawn``), one shard at a time per worker
(the next one waits in the worker's inbox, so it starts without a round trip to the driver).
Before each record a worker writes the record's position in its shard and the start time
into a small shared array, so that its driver always knows which record it is on. Then:

* an exception raised by a record becomes that record's error entry (in the worker);
* a record running past ``record_timeout`` is interrupted by ``SIGALRM`` in the worker; if
  it is stuck in C code the driver kills the worker ``grace`` seconds later;
* a record allocating past ``max_memory_bytes`` (``RLIMIT_AS`` in the worker) raises
  ``MemoryError`` there, and becomes an error entry;
* a worker that dies (the OOM killer, a segfault, ``kill -9``, the driver's timeout kill)
  is replaced by a fresh one, the record it was on gets an error entry (stage ``worker`` or
  ``timeout``), and its shard is started again with that entry preset, so the other records
  of the shard are still encoded.

A worker that dies outside any record (while writing its shard) has its shard retried, at
most twice; a shard that cannot be written (disk full) ends the run with an ``OSError``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait as wait_ready
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import trace
from .encode import EncodeOptions, error_entry
from .shard_writer import ShardResult, ShardTask, encode_shard

__all__ = ["WorkerPool", "limit_memory", "memory_limited"]

MAX_SHARD_RETRIES = 2
"""Deaths outside any record after which a shard is given up (the run then fails)."""


def limit_memory(max_bytes: int | None, *, above_current: bool = False) -> tuple[int, int] | None:
    """Cap this process's address space (``RLIMIT_AS``; a no-op when ``None`` or unsupported).

    By default the cap is ``max_bytes`` but never below what the process already maps plus
    256 MiB, so that a worker can still start (the local engine's workers). With
    ``above_current`` the cap is what the process maps now plus ``max_bytes``: for a Ray
    worker, which reserves gigabytes of address space it never touches (thread stacks, malloc
    arenas, the object store: ~8 GB mapped for 80 MB resident, measured with Ray 2.60), so that
    a record may allocate ``max_bytes`` there as in a local worker.

    Parameters
    ----------
    max_bytes : int or None
        The address-space cap (or headroom, with ``above_current``) in bytes.
    above_current : bool
        Cap at the current mapping plus ``max_bytes``.

    Returns
    -------
    tuple of int or None
        The previous ``(soft, hard)`` limits (see :func:`memory_limited`), ``None`` if unchanged.

    Examples
    --------
    >>> limit_memory(None) is None  # no limit: nothing changes
    True
    """
    if max_bytes is None:
        return None
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    mapped = _mapped_bytes()
    soft = mapped + int(max_bytes) if above_current else max(int(max_bytes), mapped + (256 << 20))
    previous = resource.getrlimit(resource.RLIMIT_AS)
    hard = previous[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return previous


@contextlib.contextmanager
def memory_limited(max_bytes: int | None, *, above_current: bool = False) -> Iterator[None]:
    """:func:`limit_memory` for the duration of a ``with`` block (the previous limit is restored after).

    For work that runs in a process that outlives it (a Ray task in a Ray worker).

    Parameters
    ----------
    max_bytes : int or None
        As for :func:`limit_memory`.
    above_current : bool
        As for :func:`limit_memory`.

    Examples
    --------
    >>> import resource
    >>> before = resource.getrlimit(resource.RLIMIT_AS)
    >>> with memory_limited(2**40, above_current=True):
    ...     resource.getrlimit(resource.RLIMIT_AS)[0] > 2**40
    True
    >>> resource.getrlimit(resource.RLIMIT_AS) == before
    True
    """
    previous = limit_memory(max_bytes, above_current=above_current)
    try:
        yield
    finally:
        if previous is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, previous)


def _mapped_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(64 << 20),
    "MALLOC_TOP_PAD_": str(16 << 20),
}
"""Set in each worker unless the user set them: one BLAS thread per worker (the workers are the
parallelism); few malloc arenas, so that the address-space limit measures memory, not the
64 MiB reserved per thread arena; and blocks up to 32 MiB served from the heap and kept there
(up to 64 MiB free at its top, grown 16 MiB at a time) instead of mapped and unmapped for each
record. Measured on the stdlib encode (benchmarks/RESULTS.md): 2.5-3x fewer page faults,
15-40 % less system time, 0-12 % less wall time over three A/B runs; a worker's peak RSS
~60 MiB (~11 %) higher, still flat in the input size."""


@contextlib.contextmanager
def _worker_environment():
    added = {k: v for k, v in WORKER_ENV.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _watch_parent(parent_pid: int, interval: float = 0.5) -> None:
    """End this worker when the driver dies (even by ``kill -9``): no orphan keeps burning CPU."""

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="structpos-parent-watch").start()


def _receive(conn, inbox) -> None:  # pragma: no cover - runs in a child
    """A worker's inbox thread: tasks arrive while the worker encodes (``None``: stop)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the record timer is the main thread's
    while True:
        try:
            task = conn.recv()
        except Exception:  # the driver is gone, or a task could not be read (MemoryError): stop after this shard
            task = None
        inbox.put(task)
        if task is None:
            return


def _worker_main(
    conn, state, parent_pid: int, max_memory: int | None, started: float = 0.0
) -> None:  # pragma: no cover - runs in a child
    """A worker's life: receive shard tasks, encode and write them, report results.

    Tasks are received by a thread into an inbox, so the driver can hand over the next shard
    while this one is encoded (it never waits for a send, and this worker never waits for it).
    """
    trace.set_role("worker")
    trace.record("startup", started, time.monotonic(), time.process_time())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    _watch_parent(parent_pid)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_receive, args=(conn, inbox), daemon=True, name="structpos-inbox").start()
    limit_memory(max_memory)

    def on_record(k: int) -> None:
        state[1] = time.monotonic()
        state[0] = k

    while True:
        task = inbox.get()
        if task is None:  # the run is over and every result sent (or the driver is gone): exit
            _exit_now()  # without the interpreter's teardown (tens of ms the driver would wait for)
        state[0], state[1], state[2] = -1.0, time.monotonic(), float(task.index)
        try:
            with trace.span("shard", shard=task.index, records=len(task.records)):
                res = encode_shard(task, on_record=on_record)
            conn.send(("done", res))
        except OSError as e:
            conn.send(("oserror", e.errno, e.strerror or str(e), e.filename))
        except BaseException as e:  # reported to the driver, which decides
            conn.send(("fail", type(e).__name__, str(e)))


def _exit_now() -> None:  # pragma: no cover - runs in a child
    """End an idle worker at once: nothing of its is left to flush but the standard streams."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


def _send_in_order(conn, outbox) -> None:
    """The driver's sender to one busy worker: its next shards, in order, without blocking the driver
    (a worker reads its inbox between its own work; a record in C code holding the GIL delays that)."""
    while True:
        message = outbox.get()
        if message is None:
            return
        try:
            conn.send(message)
        except Exception:  # the worker died or was killed: the driver sees it by its sentinel
            return


DEPTH = 2
"""Shards handed to a worker at once: the one it encodes and the next, waiting in its inbox, so
that a worker finishing a shard starts the next without a round trip to the driver."""


@dataclass
class _Worker:
    process: Any
    conn: Any
    state: Any
    tasks: deque[ShardTask] = field(default_factory=deque)
    outbox: Any = None

    def send_later(self, message: ShardTask | None) -> None:
        """Queue ``message`` for :func:`_send_in_order` (started on first use)."""
        if self.outbox is None:
            self.outbox = queue.SimpleQueue()
            threading.Thread(
                target=_send_in_order, args=(self.conn, self.outbox), daemon=True, name="structpos-outbox"
            ).start()
        self.outbox.put(message)

    @property
    def task(self) -> ShardTask | None:
        """The shard it is on (the oldest it was given and has not finished)."""
        return self.tasks[0] if self.tasks else None

    def record(self) -> tuple[int, float]:
        """``(position of the record of :attr:`task` being encoded or -1, its start time)``."""
        if self.task is None or int(self.state[2]) != self.task.index:  # between shards
            return -1, float(self.state[1])
        return int(self.state[0]), float(self.state[1])


@dataclass
class WorkerPool:
    """``workers`` processes encoding :class:`ShardTask` s with per-record isolation (see the module docstring).

    Worker processes start together when the first shards are known (``spawn``); each encodes
    one shard at a time and holds the next in its inbox (:data:`DEPTH`); a worker that dies
    or hangs past the record timeout is replaced and its record becomes an error entry.

    Parameters
    ----------
    workers : int
        The most worker processes at once.
    options : EncodeOptions
        The options every shard is encoded with (timeouts enforced inside the workers).
    grace : float, optional
        Seconds past ``record_timeout`` before a worker stuck in C code is killed.

    Examples
    --------
    One shard with a good and a bad record, encoded (and written) by a worker process:

    >>> import tempfile
    >>> from structpos.pipeline.records import Record
    >>> recs = [Record("a", "[1]", "a"), Record("b", "[", "b")]
    >>> task = ShardTask(0, recs, EncodeOptions("json", "tree"), tempfile.mkdtemp(), ["d1", "d2"])
    >>> pool = WorkerPool(1, task.options)
    >>> [(r.encoded, r.errors) for r in pool.run([task])], pool.deaths
    ([(1, 1)], 0)
    """

    workers: int
    options: EncodeOptions
    grace: float | None = None
    """Seconds past ``record_timeout`` before a worker stuck in C code is killed
    (default: the timeout itself, between 0.5 and 5 s)."""
    _idle: list[_Worker] = field(default_factory=list)
    _busy: list[_Worker] = field(default_factory=list)
    _queue: list[ShardTask] = field(default_factory=list)
    _ctx: Any = None
    deaths: int = 0

    def __post_init__(self) -> None:
        self._ctx = mp.get_context("spawn")
        # records are timed in the worker (SIGALRM) and a worker stuck past the limit is killed
        # here: parsers need no helper process of their own (EncodeOptions.parser_limits)
        self.options = replace(self.options, timeout_in_process=True, killed_past_timeout=True)

    def _start(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        state = self._ctx.Array("d", [-1.0, 0.0, -1.0], lock=False)  # record, its start, shard index
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, state, os.getpid(), self.options.limits.max_memory_bytes, time.monotonic()),
            daemon=True,
            name="structpos-encode-worker",
        )
        with _worker_environment(), trace.span("spawn"):
            proc.start()
        child.close()
        return _Worker(proc, parent, state)

    def _submit(self, task: ShardTask, w: _Worker | None) -> None:
        """Hand ``task`` to ``w`` (``None``: a new worker). An idle worker gets it at once (one that
        died while idle is replaced), a busy one through its outbox thread."""
        message = replace(task, options=self.options)
        if w is not None and w.tasks:  # busy: never wait for it to read (the driver must stay free to time it)
            w.send_later(message)
            w.tasks.append(task)
            return
        while True:
            if w is None:
                w = self._start()
                self._idle.append(w)
            try:
                with trace.span("submit", shard=task.index):
                    w.conn.send(message)
                break
            except OSError:  # it died while idle (e.g. the OOM killer): a new one takes the task
                self._idle.remove(w)
                w.process.kill()
                w.process.join(1)
                w.conn.close()
                w = None
        if not w.tasks:
            self._idle.remove(w)
            self._busy.append(w)
        w.tasks.append(task)

    def _fill(self, pull) -> None:
        """Give every worker a shard to encode, then a next one; start workers up to ``workers``.

        The input's last shard is never queued behind another worker's shard (with several
        workers): it waits for whichever worker is free first, so no core idles at the end while
        one worker runs two shards.
        """
        for depth in range(1, DEPTH + 1):
            while True:
                w = next((w for w in self._busy + self._idle if len(w.tasks) < depth), None)
                if w is None and (depth > 1 or len(self._busy) + len(self._idle) >= self.workers):
                    break
                task = pull()
                if task is None:
                    return
                if depth > 1 and self.workers > 1 and not self._more(pull):
                    self._queue.insert(0, task)
                    return
                self._submit(task, w)

    def _more(self, pull) -> bool:
        """Whether a shard is left after the one just pulled (it is kept first in the queue)."""
        task = pull()
        if task is None:
            return False
        self._queue.insert(0, task)
        return True

    def run(self, tasks: Iterable[ShardTask]) -> Iterator[ShardResult]:
        """Encode ``tasks``, one shard per worker at a time and one more waiting in each worker
        (so at most ``2 x workers`` shards are held, one more with several workers, however large
        the input), yielding results as shards finish.

        A finished shard's result reaches the caller while its worker already encodes the next
        one, and the shard after that is read and sent meanwhile: a worker never waits for the
        driver (reading, the manifest) between shards.

        The workers are stopped when the iteration ends, fails or is abandoned.

        Parameters
        ----------
        tasks : iterable of ShardTask
            The shards; each worker writes the shards it encodes.

        Yields
        ------
        ShardResult
            One per shard; a record that killed or hung its worker is one of its errors.

        Examples
        --------
        See :class:`WorkerPool`.
        """
        it = iter(tasks)
        self._queue = []  # shards to start again after a worker death come first
        exhausted = False

        def pull() -> ShardTask | None:
            nonlocal exhausted
            if self._queue:
                return self._queue.pop(0)
            if exhausted:
                return None
            with trace.span("read"):
                task = next(it, None)
            exhausted = task is None
            return task

        try:
            # every worker needed starts at once: the first task sent to a worker waits until the
            # worker has imported structpos, so starting them one by one as tasks are handed out
            # would leave the second worker's core idle for the first one's start-up
            first = [t for t in (pull() for _ in range(self.workers)) if t is not None]
            self._queue[:0] = first
            for _ in range(len(first) - len(self._idle) - len(self._busy)):
                self._idle.append(self._start())
            while True:
                self._fill(pull)
                if not self._busy:
                    return
                yield from self._collect()
        finally:
            self.close()

    def _timeout(self) -> float | None:
        limit = self.options.limits.record_timeout
        if limit is None:
            return None
        return limit + (self.grace if self.grace is not None else max(0.5, min(5.0, limit)))

    def _drain(self, w: _Worker) -> list[ShardResult]:
        """The results ``w`` has sent (its shards, in order); a worker's error is raised."""
        finished = []
        while w.tasks and w.conn.poll():
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):  # it died
                break
            w.tasks.popleft()
            if not w.tasks:
                self._busy.remove(w)
                self._idle.append(w)
            finished.append(self._result(msg))
        return finished

    def _collect(self) -> Iterator[ShardResult]:
        """Wait for a result, a death or a timeout; handle each."""
        limit = self._timeout()
        wait_for = 1.0 if limit is None else min(1.0, max(0.05, limit / 4))
        ready = wait_ready([w.conn for w in self._busy] + [w.process.sentinel for w in self._busy], timeout=wait_for)
        now = time.monotonic()
        for w in list(self._busy):
            if w.conn in ready:
                finished = self._drain(w)
                if finished:
                    yield from finished
                    continue
            if w.process.sentinel in ready or not w.process.is_alive():
                yield from self._drain(w)  # what it sent before dying
                k, _ = w.record()
                if w.tasks:
                    self._replace(w, k, stage="worker", why=_death_reason(w.process))
                else:  # it died idle: gone before it is given a shard
                    self._idle.remove(w)
                    w.conn.close()
                    w.process.join(1)
                continue
            k, t0 = w.record()
            if limit is not None and k >= 0 and now - t0 > limit:
                w.process.kill()
                w.process.join(5)
                self._replace(
                    w,
                    k,
                    stage="timeout",
                    why=f"took more than {self.options.limits.record_timeout:g} s (record_timeout; "
                    "raise the limit to allow it); its worker was killed",
                )

    @staticmethod
    def _result(msg: tuple) -> ShardResult:
        if msg[0] == "done":
            return msg[1]
        if msg[0] == "oserror":
            _, errno, strerror, filename = msg
            raise OSError(errno, f"writing a shard: {strerror}", filename)
        raise RuntimeError(f"an encode worker failed: {msg[1]}: {msg[2]}")

    def _replace(self, w: _Worker, k: int, *, stage: str, why: str) -> None:
        """Record the death of ``w`` against record ``k`` of its shard and queue its shards again."""
        self._busy.remove(w)
        self.deaths += 1
        task, *rest = w.tasks
        w.tasks.clear()
        if w.outbox is not None:
            w.outbox.put(None)
        w.conn.close()
        w.process.join(1)
        if 0 <= k < len(task.records):
            rec = task.records[k]
            err = error_entry(rec, "WorkerDied" if stage == "worker" else "LimitError", why, stage)
            self._queue[:0] = [replace(task, preset={**task.preset, k: err}), *rest]
            return
        if task.retries >= MAX_SHARD_RETRIES:
            raise RuntimeError(
                f"shard {task.index}: the encode worker died {task.retries + 1} times outside any record "
                f"({why.replace(' while encoding this record', '')}); if it dies as it starts, does the "
                "calling script lack an `if __name__ == '__main__':` guard (workers re-import it), or is "
                "--limit max_memory_bytes too small?"
            )
        self._queue[:0] = [replace(task, retries=task.retries + 1), *rest]

    def close(self) -> None:
        """Stop every worker (idle ones politely, busy ones at once)."""
        with trace.span("close"):
            self._close()

    def _close(self) -> None:
        for w in self._idle + self._busy:
            if w.outbox is not None:
                w.outbox.put(None)
        for w in self._idle:
            try:
                w.conn.send(None)
            except OSError:
                pass
        for w in self._busy:
            w.process.kill()
        for w in self._idle + self._busy:
            w.process.join(2)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(1)
            w.conn.close()
        self._idle.clear()
        self._busy.clear()


def _death_reason(proc) -> str:
    proc.join(1)
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"the encode worker died of {name}{hint} while encoding this record"
    return f"the encode worker exited with status {code} while encoding this record"
