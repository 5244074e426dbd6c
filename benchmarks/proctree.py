"""CPU seconds and peak memory of this process and every process below it (workers, their helpers, Ray's).

``resource.getrusage(RUSAGE_CHILDREN)`` counts only children that were waited for: a helper forked
by a worker and killed when the worker exits is never counted, nor is a Ray worker that outlives
the run. :class:`TreeSampler` instead reads every descendant with ``psutil`` every ``interval``
seconds and keeps, per process, the last CPU time seen (a process's last ``interval`` of life is
missed) and the peak of the tree's summed resident memory (RSS; shared pages are counted once per
process, so this is an upper bound on the memory used).
"""

from __future__ import annotations

import os
import threading
import time

import psutil

try:
    _TICKS = os.sysconf("SC_CLK_TCK")
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
    _TICKS, _PAGE = 100, 4096


class TreeSampler:
    """Sample the process tree rooted at this process in a background thread.

    Examples
    --------
    >>> with TreeSampler(interval=0.01) as s:
    ...     _ = sum(range(10**6))
    >>> s.cpu_seconds() > 0 and s.peak_rss_total >= s.peak_rss_self > 0
    True
    """

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.root = psutil.Process(os.getpid())
        self.cpu: dict[tuple[int, float], float] = {}  # (pid, create_time) -> last user+system seconds
        self.peak_rss_total = 0  # the tree's summed RSS, at its peak
        self.peak_rss_self = 0  # this (driver) process
        self.peak_rss_child = 0  # the largest single descendant
        self.processes = 0
        self._cpu0: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _tree_pids(self) -> list[int] | None:
        """This process and its descendants from ``/proc/<pid>/task/<tid>/children`` (``None`` where unsupported)."""
        pids, todo = [], [self.root.pid]
        try:
            while todo:
                pid = todo.pop()
                pids.append(pid)
                for task in os.listdir(f"/proc/{pid}/task"):
                    try:
                        with open(f"/proc/{pid}/task/{task}/children") as f:
                            todo.extend(int(c) for c in f.read().split())
                    except FileNotFoundError:  # the thread or process ended meanwhile
                        continue
        except FileNotFoundError:
            if pid == self.root.pid:
                return None
        except OSError:
            return None
        return pids

    def _sample_proc(self, pids: list[int]) -> None:
        """:meth:`sample` from ``/proc/<pid>/stat`` (a tenth of psutil's cost: the sampler shares the cores it measures)."""
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):  # it ended meanwhile
                continue
            key = (pid, float(fields[19]))  # (pid, start time in clock ticks)
            self.cpu[key] = (int(fields[11]) + int(fields[12])) / _TICKS
            rss = int(fields[21]) * _PAGE
            total += rss
            if pid == self.root.pid:
                self.peak_rss_self = max(self.peak_rss_self, rss)
            else:
                self.peak_rss_child = max(self.peak_rss_child, rss)
        self.peak_rss_total = max(self.peak_rss_total, total)
        self.processes = max(self.processes, len(self.cpu))

    def _procs(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return [self.root]

    def sample(self) -> None:
        """Read every process of the tree once."""
        pids = self._tree_pids()
        if pids is not None:
            self._sample_proc(pids)
            return
        total = 0
        for p in self._procs():
            try:
                with p.oneshot():
                    key = (p.pid, p.create_time())
                    t = p.cpu_times()
                    rss = p.memory_info().rss
            except psutil.Error:  # it ended meanwhile
                continue
            self.cpu[key] = t.user + t.system
            total += rss
            if p.pid == self.root.pid:
                self.peak_rss_self = max(self.peak_rss_self, rss)
            else:
                self.peak_rss_child = max(self.peak_rss_child, rss)
        self.peak_rss_total = max(self.peak_rss_total, total)
        self.processes = max(self.processes, len(self.cpu))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> "TreeSampler":
        self.sample()
        self._cpu0 = dict(self.cpu)  # processes alive before (an idle Ray cluster): count only their new CPU
        self.peak_rss_total = self.peak_rss_self = self.peak_rss_child = 0
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def cpu_seconds(self, *, children_only: bool = False) -> float:
        """CPU seconds (user + system) spent by the tree inside the ``with`` block."""
        return sum(
            t - self._cpu0.get(key, 0.0)
            for key, t in self.cpu.items()
            if not (children_only and key[0] == self.root.pid)
        )


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages and the CPU count, for the record beside every figure."""
    one, five, fifteen = os.getloadavg()
    now = time.strftime("%H:%M:%S", time.gmtime())
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs at {now} UTC"
