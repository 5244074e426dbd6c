"""A guarded call shares one CPU with its helper, and leaves the caller's CPU affinity as it was.

For the length of a call the calling thread and its helper are pinned to the CPU the thread runs on
(:func:`structpos.parsers._guard._pin_together`); the thread's affinity must come back unchanged
whether the call returns, raises, or times out, and a system that refuses the pinning must only
cost the pinning, never the call.
"""

from __future__ import annotations

import os
import time

import pytest

from structpos.exceptions import LimitError, ParseError
from structpos.parsers import _guard
from structpos.parsers._guard import call_guarded

pytestmark = pytest.mark.skipif(
    not _guard.can_fork() or _guard._current_cpu is None, reason="needs fork and Linux CPU affinity"
)


def _call(fn, *args, timeout: float = 60):
    return call_guarded(fn, args, time.monotonic() + timeout, what="test call", timeout=timeout, name="in.py")


def _affinity_seen_inside() -> set[int]:
    """In the helper: its own affinity while it works."""
    return os.sched_getaffinity(0)


def _fail() -> None:
    raise ValueError("inside")


def _caller_cpus() -> set[int]:
    return os.sched_getaffinity(0)


def _stop_idle_helpers() -> None:
    for helper in list(_guard._pool.idle):
        helper.stop()
    _guard._pool.idle.clear()


@pytest.fixture(autouse=True)
def fresh_helpers():
    """Each test starts and ends with no idle helper (one whose pinning was refused is not reused)."""
    _stop_idle_helpers()
    yield
    _stop_idle_helpers()


def test_the_helper_works_on_the_callers_cpu_and_the_callers_affinity_comes_back():
    before = _caller_cpus()
    for _ in range(20):
        inside = _call(_affinity_seen_inside)
        assert len(inside) == 1 and inside <= before
        assert _caller_cpus() == before


def test_a_caller_restricted_to_one_cpu_keeps_it_and_its_helper_follows():
    before = _caller_cpus()
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        assert _call(_affinity_seen_inside) == {cpu}
        assert _caller_cpus() == {cpu}
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.parametrize("how", ["raises", "times out"])
def test_the_callers_affinity_comes_back_when_the_call_fails(how):
    before = _caller_cpus()
    if how == "raises":
        with pytest.raises(ParseError, match="inside"):
            _call(_fail)
    else:
        with pytest.raises(LimitError):
            _call(time.sleep, 30, timeout=0.2)
    assert _caller_cpus() == before


def test_a_refused_pinning_costs_only_the_pinning(monkeypatch):
    def refuse(pid, cpus):
        raise PermissionError("not allowed here")

    before = _caller_cpus()
    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    assert _call(sum, [1, 2, 3]) == 6
    assert _call(sum, [4]) == 4
    assert all(not h.can_pin for h in _guard._pool.idle)
    monkeypatch.undo()
    assert _caller_cpus() == before


def test_a_refused_restore_falls_back_to_every_allowed_cpu(monkeypatch):
    before = _caller_cpus()
    if len(before) < 2 or before != set(range(os.cpu_count() or 1)):
        pytest.skip("needs a caller allowed on every CPU")
    real = os.sched_setaffinity
    refused = []

    def refuse_the_restore(pid, cpus):
        if pid == 0 and set(cpus) == before and not refused:
            refused.append(True)
            raise OSError("the cpuset changed")
        return real(pid, cpus)

    monkeypatch.setattr(os, "sched_setaffinity", refuse_the_restore)
    assert _call(sum, [1]) == 1
    assert refused and _caller_cpus() == before
