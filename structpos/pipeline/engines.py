"""Engines: who runs the shards. Each takes ``(index, records)`` pairs and yields
:class:`~structpos.pipeline.shards.ShardResult` as shards finish (in any order).

* ``local`` with one worker: in this process.
* ``local`` with ``N > 1`` workers: a ``spawn`` process pool; each worker encodes *and writes*
  its shard (only counts travel back). At most ``2 N`` shards are in flight, so memory stays
  bounded however large the input.
* ``ray``: one Ray task per shard on a local cluster (``ray.init(num_cpus=N)``) or on an
  existing one (``address``); tasks return the Arrow table and errors and the driver writes
  them, so the workers need no shared filesystem.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from .encode import EncodeOptions
from .records import Record
from .shards import ShardResult, encode_shard, encode_shard_table, write_shard

__all__ = ["run_serial", "run_processes", "run_ray", "ENGINES"]

Shard = tuple[int, Sequence[Record]]


def run_serial(shards: Iterable[Shard], options: EncodeOptions, out_dir: Path, workers: int = 1, **_) -> Iterator[ShardResult]:
    for index, records in shards:
        yield encode_shard(index, records, options, out_dir)


def _exit_with_parent(parent_pid: int, interval: float = 0.5) -> None:
    """Worker initializer: end this worker when the driver dies (even by ``kill -9``), so no
    orphan keeps burning CPU on shards nobody will record."""

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="structpos-parent-watch").start()


def run_processes(shards: Iterable[Shard], options: EncodeOptions, out_dir: Path, workers: int = 2, **_) -> Iterator[ShardResult]:
    if workers <= 1:
        yield from run_serial(shards, options, out_dir)
        return
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                               initializer=_exit_with_parent, initargs=(os.getpid(),))
    try:
        pending = set()
        it = iter(shards)
        exhausted = False
        while True:
            while not exhausted and len(pending) < 2 * workers:
                try:
                    index, records = next(it)
                except StopIteration:
                    exhausted = True
                    break
                pending.add(pool.submit(encode_shard, index, list(records), options, str(out_dir)))
            if not pending:
                break
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
    except BaseException:  # Ctrl-C, a broken pool, a refused resume: drop queued shards, don't wait for them
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _ray_encode(index: int, records: Sequence[Record], options: EncodeOptions):
    return encode_shard_table(index, records, options)


def run_ray(shards: Iterable[Shard], options: EncodeOptions, out_dir: Path, workers: int = 2, address: str | None = None, **_) -> Iterator[ShardResult]:
    from ..parsers import require

    ray = require("ray", "ray", "--engine ray")
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(_ray_encode)
        cap = 2 * max(1, int(ray.available_resources().get("CPU", workers)))
        pending: list = []
        it = iter(shards)
        exhausted = False
        while True:
            while not exhausted and len(pending) < cap:
                try:
                    index, records = next(it)
                except StopIteration:
                    exhausted = True
                    break
                pending.append(remote.remote(index, list(records), options))
            if not pending:
                return
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                table, errors, res = ray.get(ref)
                write_shard(out_dir, res.index, table, errors)
                yield res
    finally:
        if started:
            ray.shutdown()


ENGINES = {"local": run_processes, "ray": run_ray}
