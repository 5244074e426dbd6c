"""An opt-in timeline of an encode run: who was busy when (driver spans, each worker's shards).

Set ``STRUCTPOS_ENCODE_TRACE`` to a directory and every process of the run (the driver and the
local engine's workers, which inherit the variable) appends one JSON line per span to
``<dir>/<pid>.jsonl``: ``{"pid", "role", "name", "t0", "t1", "cpu", ...}``, with ``t0`` and
``t1`` from ``time.monotonic()`` (one clock for every process of the machine on Linux) and
``cpu`` the span's ``time.process_time()``. Unset (the default), :func:`span` costs one
dictionary lookup.

:func:`load` reads a trace back and :func:`summarize` turns it into the figures that explain
a wall-time speed-up below the CPU bound: per process busy and CPU seconds, and the *idle-core
seconds* of the run (``cores x wall`` minus the time summed over cores while some process was
busy; the driver's spans that wait, :data:`WAITS`, do not count), split into start-up (before
the first worker starts its first shard), the middle, and the tail (after the last shard
started; a core waiting for the last shard to finish).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

__all__ = ["TRACE_ENV", "enabled", "set_role", "span", "record", "load", "summarize"]

TRACE_ENV = "STRUCTPOS_ENCODE_TRACE"
"""The environment variable naming the trace directory (unset: no trace)."""

_ROLE = {"role": "driver"}


def enabled() -> bool:
    """Whether this process traces (``STRUCTPOS_ENCODE_TRACE`` is set).

    Examples
    --------
    >>> import os
    >>> enabled() == bool(os.environ.get(TRACE_ENV))
    True
    """
    return bool(os.environ.get(TRACE_ENV))


def set_role(role: str) -> None:
    """Name this process in the trace (``"driver"`` unless set; workers set ``"worker"``).

    Parameters
    ----------
    role : str
        The name its spans carry.

    Examples
    --------
    >>> set_role("driver")
    """
    _ROLE["role"] = role


def record(name: str, t0: float, t1: float, cpu: float = 0.0, **attrs: Any) -> None:
    """Append one span to this process's trace file (nothing when tracing is off).

    Parameters
    ----------
    name : str
        What was done (``"read"``, ``"shard"``, ``"manifest"``...).
    t0, t1 : float
        ``time.monotonic()`` at its start and end.
    cpu : float, optional
        The CPU seconds of this process during the span.
    **attrs
        More JSON-serializable fields (a shard's index, its records).

    Examples
    --------
    >>> record("nothing", 0.0, 1.0)  # tracing off: a no-op
    """
    where = os.environ.get(TRACE_ENV)
    if not where:
        return
    line = json.dumps(
        {"pid": os.getpid(), "role": _ROLE["role"], "name": name, "t0": t0, "t1": t1, "cpu": cpu, **attrs}
    )
    Path(where).mkdir(parents=True, exist_ok=True)
    with open(Path(where) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
        f.write(line + "\n")


@contextlib.contextmanager
def span(name: str, **attrs: Any) -> Iterator[dict]:
    """Time the ``with`` block as one span of the trace (see :func:`record`).

    Yields a dict the block may add fields to.

    Examples
    --------
    >>> with span("read", shard=0) as extra:
    ...     extra["records"] = 16
    """
    if not os.environ.get(TRACE_ENV):
        yield attrs
        return
    t0, c0 = time.monotonic(), time.process_time()
    try:
        yield attrs
    finally:
        record(name, t0, time.monotonic(), time.process_time() - c0, **attrs)


def load(where: str | Path) -> list[dict]:
    """Every span of a trace directory, sorted by start.

    Parameters
    ----------
    where : str or Path
        The directory ``STRUCTPOS_ENCODE_TRACE`` named.

    Returns
    -------
    list of dict

    Examples
    --------
    >>> import tempfile
    >>> load(tempfile.mkdtemp())
    []
    """
    spans: list[dict] = []
    for p in sorted(Path(where).glob("*.jsonl")):
        spans.extend(json.loads(line) for line in p.read_text().splitlines() if line.strip())
    return sorted(spans, key=lambda s: s["t0"])


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


WAITS = frozenset({"run", "submit", "spawn", "close"})
"""Driver spans that mostly wait (a send blocked until the worker reads, a worker's exit): not busy."""


def _busy(s: dict) -> bool:
    return bool(s.get("busy", s["name"] not in WAITS))


def _busy_cores(spans: list[dict], cores: int, lo: float, hi: float) -> float:
    """Core-seconds in ``[lo, hi]`` during which some process was busy, at most ``cores`` at a time."""
    per_pid: dict[int, list[tuple[float, float]]] = {}
    for s in spans:
        if _busy(s):
            per_pid.setdefault(s["pid"], []).append((max(lo, s["t0"]), min(hi, s["t1"])))
    events: list[tuple[float, int]] = []
    for ivs in per_pid.values():
        for a, b in _union([iv for iv in ivs if iv[1] > iv[0]]):
            events += [(a, 1), (b, -1)]
    events.sort()
    total, level, last = 0.0, 0, lo
    for t, d in events:
        total += min(level, cores) * (t - last)
        level, last = level + d, t
    return total


def summarize(spans: list[dict], cores: int = 2) -> dict[str, Any]:
    """The breakdown of a run's timeline (see the module docstring).

    Parameters
    ----------
    spans : list of dict
        From :func:`load`; the driver's ``"run"`` span bounds the run.
    cores : int, optional
        The cores the run had.

    Returns
    -------
    dict
        ``wall``; ``idle_core_s`` (total), ``idle_startup``, ``idle_middle``, ``idle_tail``;
        ``per_process`` (role, busy and CPU seconds, shards); ``driver`` (seconds per span name).

    Examples
    --------
    >>> spans = [{"pid": 1, "role": "driver", "name": "run", "t0": 0.0, "t1": 2.0, "cpu": 0.1, "busy": False},
    ...          {"pid": 2, "role": "worker", "name": "shard", "t0": 0.5, "t1": 2.0, "cpu": 1.5}]
    >>> s = summarize(spans)
    >>> s["wall"], s["idle_core_s"], s["idle_startup"], s["idle_tail"]
    (2.0, 2.5, 1.0, 1.5)
    """
    run = [s for s in spans if s["name"] == "run"]
    lo = min(s["t0"] for s in run) if run else min(s["t0"] for s in spans)
    hi = max(s["t1"] for s in run) if run else max(s["t1"] for s in spans)
    shards = [s for s in spans if s["name"] == "shard"]
    first = min((s["t0"] for s in shards), default=hi)
    last_start = max((s["t0"] for s in shards), default=hi)
    parts = {"startup": (lo, first), "middle": (first, last_start), "tail": (last_start, hi)}
    idle = {k: cores * (b - a) - _busy_cores(spans, cores, a, b) for k, (a, b) in parts.items()}
    per_process: dict[int, dict[str, Any]] = {}
    driver: dict[str, float] = {}
    for s in spans:
        p = per_process.setdefault(s["pid"], {"role": s["role"], "busy": 0.0, "cpu": 0.0, "shards": 0})
        if _busy(s):
            p["busy"] += s["t1"] - s["t0"]
            p["cpu"] += s["cpu"]
        p["shards"] += s["name"] == "shard"
        if s["role"] == "driver":
            driver[s["name"]] = driver.get(s["name"], 0.0) + s["t1"] - s["t0"]
    return {
        "wall": hi - lo,
        "idle_core_s": sum(idle.values()),
        **{f"idle_{k}": v for k, v in idle.items()},
        "per_process": per_process,
        "driver": driver,
    }
