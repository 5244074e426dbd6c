"""The guarded helper's shared arena (structpos.parsers._guard): large buffers cross it intact.

* large ``bytes`` arguments arrive as ``bytes``, equal; numpy results come back equal, with their
  dtype and shape, writable (the code parser edits its kind column in place);
* what does not fit in the arena, non-contiguous arrays and small buffers cross inside the pickle;
* a result that does not pickle is a ParseError naming the input; the helper's answer after an
  oversized call is still right (the arena is reused from offset 0);
* guarded parses equal in-process ones, on the compiled and the pure path.
"""

from __future__ import annotations

import os
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
        ok, out = _guard._round_trip(
            helper,
            lambda arena: arena.dumps((_arrays, (4096,))),
            _guard._pickled_outcome,
            time.monotonic() + 60,
            "test call",
            60,
            "in.py",
        )
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


# --------------------------------------------------------------- raw calls (call_guarded_raw)
def _raw(fn, request: bytes, payload: bytes):
    return _guard.call_guarded_raw(
        fn, request, payload, time.monotonic() + 60, what="test call", timeout=60, name="in.py"
    )


def _echo_columns(request: bytes, payload: memoryview) -> tuple[bytes, list]:
    """The request reversed; the payload, its bytes as int64 (length a multiple of 8 taken), and a
    ``bytearray`` of ``int(request)`` zero bytes (0: an empty buffer)."""
    data = bytes(payload)
    assert payload.readonly
    whole = data[: len(data) // 8 * 8]
    return request[::-1], [data, np.frombuffer(whole, dtype=np.int64), bytearray(int(request))]


def _raise_in_raw(request: bytes, payload: memoryview):
    if request == b"limit":
        from structpos.exceptions import LimitError

        raise LimitError("too big", limit="max_nodes", value=2, maximum=1, name="in.py")
    raise KeyError(request.decode())


@pytest.mark.parametrize("size", [0, 7, 4096, 100_000, _guard.ARENA_BYTES // 2 + 8, _guard.ARENA_BYTES + 1])
def test_raw_calls_carry_payload_and_buffers_intact(size):
    """Through the arena, or through the pipe where the payload or the buffers do not fit in it."""
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    reply, (same, as_ints, zeros) = _raw(_echo_columns, b"21", payload)
    assert reply == b"12"
    assert same.dtype == np.uint8 and same.tobytes() == payload
    assert np.array_equal(as_ints.view(np.int64), np.frombuffer(payload[: size // 8 * 8], dtype=np.int64))
    assert zeros.tobytes() == bytes(21)
    for b in (same, as_ints, zeros):
        assert b.flags.writeable
    same[:] = 1  # writable in place, and a copy: the next call is not disturbed
    assert _raw(_echo_columns, b"0", b"abc")[1][0].tobytes() == b"abc"


def test_raw_call_errors_cross_like_pickled_ones():
    from structpos.exceptions import LimitError

    with pytest.raises(LimitError, match="too big") as e:
        _raw(_raise_in_raw, b"limit", b"")
    assert e.value.limit == "max_nodes"
    with pytest.raises(ParseError, match="in.py.*test call failed: KeyError: 'boom'"):
        _raw(_raise_in_raw, b"boom", b"x" * 10_000)
    assert _raw(_echo_columns, b"3", b"ok")[0] == b"3"


def test_raw_calls_work_without_an_arena(monkeypatch):
    import errno
    import mmap

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", no_space)
    helper = _guard._Helper()
    try:
        payload = bytes(range(256)) * 100
        ok, (reply, buffers) = _guard._round_trip(
            helper,
            lambda arena: arena.raw_call(f"{__name__}:_echo_columns", b"5", payload),
            _guard._raw_outcome,
            time.monotonic() + 60,
            "test call",
            60,
            "in.py",
        )
        assert ok and reply == b"5" and buffers[0].tobytes() == payload and buffers[2].tobytes() == bytes(5)
    finally:
        helper.stop()


def test_a_raw_reply_cut_short_is_a_parse_error():
    arena = _Arena(1 << 16)
    try:
        msg = _guard._RAW_REPLY.pack(_guard._RAW, 0, 1, False, 0) + np.array([10], dtype="<u8").tobytes() + b"abc"
        with pytest.raises(ValueError, match="wrong length"):
            arena.raw_result(msg)
        past = _guard._RAW_REPLY.pack(_guard._RAW, 0, 1, True, 0) + np.array([1 << 20], dtype="<u8").tobytes()
        with pytest.raises(ValueError, match="arena's end"):
            arena.raw_result(past)
    finally:
        arena.close()


def test_a_language_loaded_after_the_helper_started_parses_in_a_fresh_one(monkeypatch):
    """The raw code parse names its Language by its key in the parser's capsule table; a helper
    forked before that Language was loaded does not know the key (StaleHelper) and a fresh helper
    parses it: the columns equal an in-process parse's."""
    from structpos.limits import Limits
    from structpos.parsers import code

    stale: list[bool] = []
    real = _guard._round_trip

    def spy(*args):
        outcome = real(*args)
        stale.append(outcome[1] is _guard.StaleHelper)
        return outcome

    monkeypatch.setattr(_guard, "_round_trip", spy)
    code.parse_code(b"x = 1\n", "python")  # a helper exists now
    src = b'fn main() { let v = vec![1, 2]; for x in v { println!("{}", x); } }\n'
    code._language.cache_clear()  # the next get_language makes Language objects the helper never saw
    try:
        guarded = code.parse_code(src, "rust")
        local = code.parse_code(src, "rust", limits=Limits(record_timeout=None))
    finally:
        code._language.cache_clear()
    assert stale == [False, True, False]  # the stale helper answered, the fresh one parsed
    assert guarded.num_nodes == local.num_nodes > 20
    assert_same_structure(guarded, local, "code")


def test_guarded_parses_from_threads_equal_in_process_ones():
    """Concurrent guarded parses each take their own helper (and so their own arena): the columns of
    one call never land in another's. With the Language cache cleared first, every helper already
    made is stale: threads stop them while others fork new ones (a child forked then once closed a
    pipe end whose number had just been freed and reused, its own, and ran the parent's code)."""
    from concurrent.futures import ThreadPoolExecutor

    from structpos.limits import Limits
    from structpos.parsers import code
    from structpos.parsers.code import parse_code

    with ThreadPoolExecutor(4) as pool:  # helpers made from threads, kept in the pool
        list(pool.map(lambda s: parse_code(s, "python"), [b"x = 1\n"] * 8))
    code._language.cache_clear()

    sources = [
        (b"def f%d(x):\n    return [x * %d for _ in range(%d)]\n" % (i, i, i)) * (1 + i % 7) + b"class B(:\n" * (i % 2)
        for i in range(24)
    ]
    here = Limits(record_timeout=None)
    want = [parse_code(s, "python", limits=here) for s in sources]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: parse_code(s, "python"), sources))
    for g, w in zip(got, want):
        assert g.num_nodes == w.num_nodes
        assert_same_structure(g, w, "code")


_THREADED_SCRIPT = """
import multiprocessing
import threading
import time
from structpos.parsers import _guard
from structpos.parsers.code import parse_code

make_pipe = multiprocessing.Pipe

def slow_pipe(*args):  # widens the race: other threads run between a helper's pipe and its fork
    ends = make_pipe(*args)
    time.sleep(0.05)
    return ends

multiprocessing.Pipe = slow_pipe

barrier = threading.Barrier(8)

def parse(i):
    barrier.wait()  # eight helpers forked at once
    parse_code(b"x = %d\\n" % i, "python")

threads = [threading.Thread(target=parse, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(OUT, "w") as f:
    f.write(" ".join(str(h.pid) for h in _guard._pool.idle))
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _run_and_wait_for_helpers(script: str, tmp_path) -> tuple[list[int], list[int]]:
    """Run ``script`` (it writes its helpers' pids, then any other pids, to ``OUT``) and wait for its
    helpers to go: ``(helpers, helpers still alive)``; those still alive are killed."""
    import subprocess
    import sys

    pid_file = tmp_path / "pids"
    # no pipe to the child: a helper that outlived it would hold the pipe open and the run would not end
    run = subprocess.run(
        [sys.executable, "-c", f"OUT = {str(pid_file)!r}\n" + script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert run.returncode == 0
    helpers, *_others = pid_file.read_text().split(";")
    pids = [int(p) for p in helpers.split()]
    for _ in range(600):  # bound by work: each helper exits on its first read after the parent has gone
        if not any(_alive(p) for p in pids):
            break
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, 9)
    return pids, left


_FORKING_SCRIPT = """
import os
import threading
import time
from structpos.parsers import _guard
from structpos.parsers.code import parse_code

# a helper forked by a thread (one forked by the main thread is also killed by the kernel with its
# process, PR_SET_PDEATHSIG; this one ends only when its pipe does)
worker = threading.Thread(target=parse_code, args=(b"x = 1\\n", "python"))
worker.start()
worker.join()
child = os.fork()
if child == 0:  # the user's own child, still running when its parent ends
    time.sleep(120)
    os._exit(0)
with open(OUT, "w") as f:
    f.write(" ".join(str(h.pid) for h in _guard._pool.idle) + ";" + str(child))
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_helpers_exit_with_their_process_while_its_children_live(tmp_path):
    """A child forked from a process with helpers inherits the parent's ends of their pipes; it must
    close them, or the helpers outlive their process for as long as the child runs."""
    pids, left = _run_and_wait_for_helpers(_FORKING_SCRIPT, tmp_path)
    child = int((tmp_path / "pids").read_text().split(";")[1])
    try:
        assert len(pids) == 1 and not left, "the helper outlived its process while its child lived"
    finally:
        os.kill(child, 9)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_helpers_forked_by_threads_exit_with_their_process(tmp_path):
    """Helpers forked at the same time from several threads once held each other's pipe ends: after
    their process exited none saw end-of-file, and they lived on (holding its stdout open: a shell
    pipeline reading it never ended). Every helper must see its process go."""
    pids, left = _run_and_wait_for_helpers(_THREADED_SCRIPT, tmp_path)
    assert 2 <= len(pids) <= 8  # forked at once (a helper done with its parse may serve another thread)
    assert not left, f"{len(left)} of {len(pids)} helpers outlived their process"
