"""The guarded helper's shared arena (structpos.parsers._guard): large buffers cross it intact.

* large ``bytes`` arguments arrive as ``bytes``, equal; numpy results come back equal, with their
  dtype and shape, writable (the code parser edits its kind column in place);
* what does not fit in the arena, non-contiguous arrays and small buffers cross inside the pickle;
* a result that does not pickle is a ParseError naming the input; the helper's answer after an
  oversized call is still right (the arena is reused from offset 0);
* guarded parses equal in-process ones, on the compiled and the pure path.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import assert_same_structure

from structpos.exceptions import ParseError
from structpos.parsers import _guard
from structpos.parsers._guard import _Arena, call_guarded

pytestmark = pytest.mark.skipif(not _guard.can_fork(), reason="needs fork")


def _call(fn, *args):
    return call_guarded(fn, args, time.monotonic() + 60, what="test call", timeout=60, name="in.py")


def _describe(data: bytes) -> tuple[str, int, bytes]:
    return type(data).__name__, len(data), data[-3:]


def _arrays(n: int) -> tuple:
    return (
        np.arange(n, dtype=np.int64),
        np.arange(n, dtype=np.int32).reshape(-1, 2) if n % 2 == 0 else np.arange(n, dtype=np.int32),
        np.arange(n) % 3 == 0,
        np.arange(2 * n, dtype=np.float64)[::2],  # not contiguous: numpy's own reduction
        np.zeros(0, dtype=np.int64),
        "tail",
    )


def _unpicklable() -> object:
    return lambda: None


@pytest.mark.parametrize("size", [0, 10, 4095, 4096, 20_000, _guard.ARENA_BYTES + 1])
def test_bytes_arguments_arrive_as_bytes(size):
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert _call(_describe, data) == ("bytes", size, data[-3:])


@pytest.mark.parametrize("n", [1, 512, 4096, 200_000, 1_200_000])  # the last is larger than the arena
def test_numpy_results_come_back_equal_and_writable(n):
    got = _call(_arrays, n)
    for a, b in zip(got[:-1], _arrays(n)[:-1]):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        assert a.flags.writeable
        a[...] = 0  # writable in place
    assert got[-1] == "tail"
    assert _call(_describe, b"y" * 50_000) == ("bytes", 50_000, b"yyy")  # the helper goes on after it


def test_a_result_that_does_not_pickle_is_a_parse_error():
    with pytest.raises(ParseError, match="in.py.*test call failed: .*(pickle|Pickl)"):
        _call(_unpicklable)
    assert _call(divmod, 7, 2) == (3, 1)


def test_arena_falls_back_to_the_pickle_when_full():
    arena = _Arena(8192)
    big, small = np.arange(5000, dtype=np.int64), np.arange(1000, dtype=np.int64)
    msg = arena.dumps((big, small))
    assert len(msg) > big.nbytes  # the big one in band; the small one (8000 bytes) in the arena
    a, b = arena.loads(msg, as_bytes=False)
    assert np.array_equal(a, big) and np.array_equal(b, small)
    arena.close()


def test_an_arena_without_address_space_sends_everything_in_band(monkeypatch):
    """Under a memory limit the arena's mmap can fail (ENOMEM): calls still work, through the pipe
    (found by the argument fuzz: ``encode --max-memory`` with code records)."""
    import errno
    import mmap

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", no_space)
    arena = _Arena(_guard.ARENA_BYTES)
    assert arena.size == 0
    big = np.arange(50_000, dtype=np.int64)
    msg = arena.dumps((big, b"z" * 20_000))
    got, data = arena.loads(msg, as_bytes=False)
    assert np.array_equal(got, big) and got.flags.writeable and data == b"z" * 20_000
    arena.close()
    helper = _guard._Helper()  # a helper made under the same failure answers a large call
    try:
        assert helper.arena.size == 0
        ok, out = _guard._round_trip(helper, _arrays, (4096,), time.monotonic() + 60, "test call", 60, "in.py")
        assert ok and np.array_equal(out[0], np.arange(4096)) and out[-1] == "tail"
    finally:
        helper.stop()


def test_guarded_parses_equal_in_process_ones():
    from structpos.limits import Limits
    from structpos.native import pure_python
    from structpos.parsers.code import parse_code

    src = b"def f(x):\n    return [y for y in x if y]\n" * 300 + b"class A(:\n"
    here = Limits(record_timeout=None)
    with pure_python():
        pure = parse_code(src, "python", fields=True), parse_code(src, "python", fields=True, limits=here)
    native = parse_code(src, "python", fields=True), parse_code(src, "python", fields=True, limits=here)
    for guarded, local in (pure, native, (native[0], pure[1])):
        assert guarded.num_nodes == local.num_nodes > 3000
        assert_same_structure(guarded, local, "code")
