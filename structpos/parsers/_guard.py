"""Run a function in a helper process that is killed at a deadline.

For C code that neither checks a deadline nor can be interrupted by a signal (tree-sitter's
error recovery at the end of an input calls no progress callback, see
:mod:`structpos.parsers.code`). Helpers are ``fork`` s of this process, started on first use
and kept for the next calls (one per concurrent call): a call sends the function (by
reference) and its arguments through a pipe and waits for the pickled result until the
deadline. A helper still working at the deadline is killed with ``SIGKILL`` and
:class:`~structpos.exceptions.LimitError` (``record_timeout``) is raised; a helper that dies
(a segfault in C code) raises :class:`~structpos.exceptions.ParseError`. An exception the
function raises is raised again here (structpos's own errors and ``MemoryError`` as they are,
anything else as a ``ParseError``).

A helper inherits this process's memory when it starts (loaded modules and objects: no
import), so a call costs a pipe round trip, not a ``fork``. The caller sleeps while its helper works
and the other way round, so the two never need two CPUs at once: on Linux, for the length of a call,
the calling thread and its helper are pinned to the CPU the thread runs on (:func:`_pin_together`;
the thread's own affinity is restored when the call ends, however it ends), so each hand-over is a
context switch on one CPU rather than the wake-up of another, idle one (on a 2-vCPU VM, two
processes passing a pipe message between 1.5 ms of work each took 98 µs a round trip on two CPUs
and 7.5 µs on one; a guarded call's round trip went from 223 to 98 µs).

Large buffers do not cross the pipe: each helper shares an arena (:class:`_Arena`, an anonymous
shared ``mmap`` made before the ``fork``) with this process, and pickle protocol 5 moves the
arguments' large ``bytes`` and the result's numpy arrays through it out of band (one copy each
way); the pipe carries only the pickle and the buffers' sizes. A buffer that does not fit in what
is left of the arena crosses the pipe inside the pickle. A call made once per record (the compiled
code parse) goes through :func:`call_guarded_raw` instead: a small request and reply in the
caller's own format and raw buffers, nothing pickled at either end (with the parse taken out, a
stdlib file's round trip took about half the pickled one's time: ``benchmarks/bench_guard.py``).
Helpers ignore ``SIGINT`` and exit when this process does; a process forked from this one starts
its own. POSIX only: :func:`can_fork` says whether helpers are available.
"""

from __future__ import annotations

import functools
import importlib
import io
import math
import mmap
import multiprocessing as mp
import os
import pickle
import select
import signal
import struct
import threading
import time
import warnings
import weakref
from typing import Any, Callable

import numpy as np

from ..exceptions import LimitError, ParseError, StructposError

__all__ = ["can_fork", "call_guarded", "call_guarded_raw", "StaleHelper"]


class StaleHelper(Exception):
    """Raised by a guarded function that needs an object created after its helper started:
    :func:`call_guarded` then runs it once more in a fresh helper."""


def can_fork() -> bool:
    """Whether :func:`call_guarded` can run here (a POSIX ``fork``).

    Returns
    -------
    bool

    Examples
    --------
    >>> import os
    >>> can_fork() == hasattr(os, "fork")
    True
    """
    return hasattr(os, "fork")


ARENA_BYTES = 8 << 20
"""Size of each helper's shared arena (pages are touched only as calls use them)."""

_OUT_OF_BAND_MIN = 4096  # smaller buffers stay inside the pickle
_ALIGN = 64
_COUNT = struct.Struct("<I")


class _Arena:
    """A shared ``mmap`` through which one call's large buffers travel (out-of-band pickle buffers).

    Both ends fill it from offset 0: the parent with a call's arguments, which the helper copies
    out before it writes the result's buffers over them. A message is ``count, sizes..., pickle``;
    the buffers lie back to back in the arena at ``_ALIGN``-rounded offsets.
    """

    def __init__(self, size: int) -> None:
        self.map: mmap.mmap | None
        try:
            self.map = mmap.mmap(-1, size)  # MAP_SHARED | MAP_ANONYMOUS: the forked helper sees the same pages
        except OSError:  # no address space left for it (a memory limit): every buffer crosses the pipe in band
            self.map, size = None, 0
        self.size = size
        _arenas.add(self)

    def dumps(self, obj: object) -> bytes:
        """``obj`` as a message: out-of-band buffers of at least ``_OUT_OF_BAND_MIN`` bytes go to the arena."""
        sizes: list[int] = []
        end = 0

        def place(buf: pickle.PickleBuffer) -> bool:
            nonlocal end
            with buf.raw() as raw:
                n = raw.nbytes
                if n < _OUT_OF_BAND_MIN or end + n > self.size or self.map is None:
                    return True  # in band
                self.map[end : end + n] = raw
            sizes.append(n)
            end += _aligned(n)
            return False

        out = io.BytesIO()
        _Pickler(out, protocol=5, buffer_callback=place).dump(obj)
        data = out.getvalue()
        return _COUNT.pack(len(sizes)) + struct.pack(f"<{len(sizes)}Q", *sizes) + data

    def loads(self, msg: bytes, as_bytes: bool) -> Any:
        """The object of a :meth:`dumps` message, its buffers copied out of the arena.

        As ``bytes`` (``as_bytes``: the helper's side, where a large ``bytes`` argument must arrive
        as ``bytes``; arrays made on them are read-only) or as slices of one writable ``uint8``
        array (the parent's side: the result's arrays are writable and share that block).
        """
        (count,) = _COUNT.unpack_from(msg)
        sizes = struct.unpack_from(f"<{count}Q", msg, _COUNT.size)
        buffers: list[bytes] | list[np.ndarray]
        if as_bytes:
            offsets = self._layout(sizes, 0)
            buffers = [self.map[o : o + n] for o, n in zip(offsets, sizes)]  # type: ignore[index]  # not None
        else:  # one writable copy (numpy arrays made on it are writable)
            buffers = self._copies(sizes, 0)
        with memoryview(msg) as body:
            return pickle.loads(body[_COUNT.size + 8 * count :], buffers=buffers)

    def raw_call(self, ref: str, request: bytes, payload: bytes) -> bytes:
        """A raw call's message (:func:`call_guarded_raw`): ``payload`` goes to the arena's start
        when it fits, else it follows the message."""
        name = ref.encode()
        in_arena = self.map is not None and len(payload) <= self.size
        if in_arena:
            self.map[: len(payload)] = payload  # type: ignore[index]  # not None
        head = _RAW_CALL.pack(_RAW, len(name), len(request), len(payload), in_arena)
        return b"".join((head, name, request, b"" if in_arena else payload))

    def raw_serve(self, msg: bytes) -> bytes:
        """In the helper: run the raw call ``msg`` asks for and return its reply message.

        The function gets a read-only view of the payload (valid for the call) and returns
        ``(reply, buffers)``; the buffers go to the arena after the payload when they fit, else
        they follow the reply in the message.
        """
        _magic, n_ref, n_request, n_payload, in_arena = _RAW_CALL.unpack_from(msg)
        at = _RAW_CALL.size
        fn = _raw_function(msg[at : at + n_ref].decode())
        request = msg[at + n_ref : at + n_ref + n_request]
        with memoryview(self.map if in_arena else msg) as whole:  # type: ignore[arg-type]  # map not None when in_arena
            start = 0 if in_arena else at + n_ref + n_request
            with whole[start : start + n_payload].toreadonly() as payload:
                reply, buffers = fn(request, payload)
        sizes = [memoryview(b).nbytes for b in buffers]
        base = _aligned(n_payload) if in_arena else 0
        offsets = _aligned_offsets(sizes, base)
        in_arena = self.map is not None and offsets[-1] <= self.size
        if in_arena:
            for b, at, n in zip(buffers, offsets, sizes):
                self.map[at : at + n] = b  # type: ignore[index]  # not None
        head = _RAW_REPLY.pack(_RAW, len(reply), len(sizes), in_arena, base)
        parts = [head, struct.pack(f"<{len(sizes)}Q", *sizes), reply]
        return b"".join(parts if in_arena else parts + [bytes(b) for b in buffers])

    def raw_result(self, msg: bytes) -> tuple[bytes, list[np.ndarray]]:
        """The parent's side of a :meth:`raw_serve` reply: ``(reply, buffers)``, the buffers as
        ``uint8`` slices of one writable copy."""
        _magic, n_reply, count, in_arena, base = _RAW_REPLY.unpack_from(msg)
        at = _RAW_REPLY.size
        sizes = struct.unpack_from(f"<{count}Q", msg, at)
        at += 8 * count
        reply = msg[at : at + n_reply]
        if in_arena:
            if self.map is None:
                raise ValueError("buffers past the arena's end")
            return reply, self._copies(sizes, base)
        block = np.frombuffer(bytearray(msg[at + n_reply :]), dtype=np.uint8)
        if block.size != sum(sizes):
            raise ValueError("a raw reply of the wrong length")
        ends = np.cumsum((0, *sizes)).tolist()
        return reply, [block[a:b] for a, b in zip(ends, ends[1:])]

    def _layout(self, sizes, base: int) -> list[int]:
        """:func:`_aligned_offsets` of buffers in this arena (ValueError past its end, or without one)."""
        offsets = _aligned_offsets(sizes, base)
        if offsets[-1] > self.size or (sizes and self.map is None):
            raise ValueError("buffers past the arena's end")
        return offsets

    def _copies(self, sizes, base: int) -> list[np.ndarray]:
        """The buffers of ``sizes`` lying from ``base`` (:meth:`_layout`), as ``uint8`` slices of one
        writable copy."""
        offsets = self._layout(sizes, base)
        if not sizes:
            return []
        block = np.frombuffer(self.map, dtype=np.uint8, count=offsets[-1] - base, offset=base).copy()  # type: ignore[arg-type]  # not None
        return [block[o - base : o - base + n] for o, n in zip(offsets, sizes)]

    def close(self) -> None:
        if self.map is None:
            return
        try:
            self.map.close()
        except BufferError:  # pragma: no cover - a view still exported (an interrupted copy)
            pass


_arenas: weakref.WeakSet[_Arena] = weakref.WeakSet()  # a helper unmaps the others' it inherited
_helpers: weakref.WeakSet["_Helper"] = weakref.WeakSet()  # their pipe ends are closed in any forked child
_forking = threading.Lock()


def _file_id(fd: int) -> tuple[int, int]:
    """What ``fd`` is open on (device, inode): a number freed and reused refers to something else."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _close_inherited_ends() -> None:  # pragma: no cover - runs in forked children
    """In a child just forked (a helper, or any fork of this process): close the parent's ends of the
    helpers' pipes, so that the helpers see their process end even while its children live on.

    Only an end still open on its own pipe is closed: a thread of the parent may have been stopping
    a helper at the fork (its number freed, perhaps already reused for something else); that
    connection is forgotten, not closed.
    """
    for helper in list(_helpers):
        conn = helper.conn
        try:
            same = _file_id(conn.fileno()) == helper.conn_id
        except OSError:  # closed
            continue
        if same:
            conn.close()
        else:
            conn._handle = None  # multiprocessing's Connection: closing it later would close another file


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_ends)

_RAW = 0xFFFFFFFF  # a raw call's messages start with this where an arena message has its buffer count
_RAW_CALL = struct.Struct("<IHIQ?")  # _RAW, len(function reference), len(request), len(payload), payload in arena
_RAW_REPLY = struct.Struct("<III?Q")  # _RAW, len(reply), buffer count, buffers in arena, where they start there


def _aligned(n: int) -> int:
    """``n`` bytes rounded up to a multiple of ``_ALIGN`` (the room a buffer takes in an arena)."""
    return -(-n // _ALIGN) * _ALIGN


def _aligned_offsets(sizes, base: int) -> list[int]:
    """Where buffers of ``sizes`` lie from ``base`` at ``_ALIGN``-rounded offsets, and (last) where they end."""
    offsets = [base]
    for n in sizes:
        offsets.append(offsets[-1] + _aligned(n))
    return offsets


def _is_raw(msg: bytes) -> bool:
    return len(msg) >= 4 and _COUNT.unpack_from(msg)[0] == _RAW


@functools.lru_cache(maxsize=None)
def _raw_function(ref: str) -> Callable[[bytes, memoryview], tuple[bytes, list]]:
    """The module-level function ``"module:qualname"`` names."""
    module, _, qualname = ref.partition(":")
    fn: Any = importlib.import_module(module)
    for part in qualname.split("."):
        fn = getattr(fn, part)
    return fn


def _array(buf, dtype: str, shape: tuple) -> np.ndarray:
    """The array :class:`_Pickler` reduced (on the buffer the arena gave back)."""
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class _Pickler(pickle.Pickler):
    """Pickles a contiguous numpy array as its raw buffer, its dtype string and its shape.

    numpy's own protocol-5 reduction moves the same buffer out of band, but pickles the dtype
    object (several microseconds an array).
    """

    def reducer_override(self, obj):
        if type(obj) is np.ndarray and obj.flags.c_contiguous and not obj.dtype.hasobject and obj.dtype.names is None:
            return _array, (pickle.PickleBuffer(obj), obj.dtype.str, obj.shape)
        return NotImplemented


def _out_of_band(args: tuple) -> tuple:
    """``args`` with each large ``bytes`` wrapped to travel out of band (it arrives as ``bytes``)."""
    if not any(type(a) is bytes and len(a) >= _OUT_OF_BAND_MIN for a in args):
        return args
    return tuple(pickle.PickleBuffer(a) if type(a) is bytes and len(a) >= _OUT_OF_BAND_MIN else a for a in args)


def _cpu_reader() -> Callable[[], int] | None:
    """Linux's ``sched_getcpu`` (the CPU the calling thread runs on, ``-1`` on failure), or ``None``
    where it or ``os.sched_setaffinity`` is missing."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


_current_cpu = _cpu_reader()


def _pin_together(helper: "_Helper") -> set[int] | None:
    """Pin ``helper`` and the calling thread to the CPU the thread runs on (module docstring).

    Returns the thread's affinity before, for :func:`_unpin`, or ``None`` when nothing of the
    thread's changed. Where the system refuses (a restricted cpuset, a helper gone), pinning
    stops for that helper and the call goes on unpinned.
    """
    if _current_cpu is None or not helper.can_pin:
        return None
    cpu = _current_cpu()
    if cpu < 0:
        return None
    try:
        if helper.cpu != cpu:
            os.sched_setaffinity(helper.pid, {cpu})
            helper.cpu = cpu
        mask = os.sched_getaffinity(0)
        if len(mask) < 2:
            return None
        os.sched_setaffinity(0, {cpu})
    except OSError:
        helper.can_pin = False
        return None
    return mask


def _unpin(mask: set[int] | None) -> None:
    """Give the calling thread back the affinity :func:`_pin_together` returned."""
    if mask is None:
        return
    try:
        os.sched_setaffinity(0, mask)
    except OSError:  # the CPUs allowed changed during the call: every one the system now allows
        os.sched_setaffinity(0, range(os.cpu_count() or 1))


class _Helper:
    """One forked helper process, the parent's end of its pipe and the arena they share.

    A helper exits when it reads the end of its pipe, which comes when every copy of the parent's
    end is closed: so every child forked from this process closes the parent's ends of the helpers
    made before it (:func:`_close_inherited_ends`), and helpers are made one at a time (under
    ``_forking``), so that none is half made when another forks. Helpers forked at once by several
    threads used to hold each other's ends, and all outlived their process.
    """

    pid: int
    conn: Any  # multiprocessing.connection.Connection
    conn_id: tuple[int, int]  # what conn is open on (_file_id)
    arena: _Arena

    def __init__(self) -> None:
        arena = _Arena(ARENA_BYTES)
        parent = os.getpid() if threading.current_thread() is threading.main_thread() else None
        with _forking:  # one helper made at a time: no other's pipe is half made when this one forks
            ours, theirs = mp.Pipe()
            with warnings.catch_warnings():  # the helper runs only guarded functions: no other thread's lock is needed
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # pragma: no cover - the helper (coverage does not follow it)
                try:  # never back into the forking thread's code, whatever happens here
                    ours.close()  # (the other helpers' ends are closed by _close_inherited_ends)
                    _serve(theirs, arena, parent)
                finally:
                    os._exit(1)
            theirs.close()
            self.pid, self.conn, self.arena = pid, ours, arena
            self.conn_id = _file_id(ours.fileno())
            _helpers.add(self)
        self.poller = select.poll()
        self.poller.register(ours.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        self.cpu: int | None = None  # the CPU it is pinned to (:func:`_pin_together`)
        self.can_pin = True

    def wait(self, seconds: float) -> bool:
        """Whether the helper's answer (or its death) is readable within ``seconds``."""
        while True:
            if self.poller.poll(max(0, math.ceil(seconds * 1000))):
                return True
            if seconds <= 0:
                return False
            seconds = 0.0  # poll's millisecond rounding is upward: one last look, then give up

    def alive(self) -> bool:
        """Whether the helper has not exited (reaps it if it has)."""
        try:
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return False

    def stop(self) -> None:
        """Kill the helper and reap it."""
        self.conn.close()
        self.arena.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _die_with(parent: int | None) -> None:  # pragma: no cover - runs in the helper
    """Linux: have the kernel kill this helper when its parent dies, even mid-call (no orphan keeps burning CPU).

    Only for a helper forked by the main thread: the kernel watches the forking *thread*, and a
    helper forked by a worker thread would die with it while other threads still use it.
    """
    if parent is None:
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the call above
        os._exit(0)


def _serve(conn, arena: _Arena, parent: int | None) -> None:  # pragma: no cover - runs in the helper
    """The helper's loop: run each ``(fn, args)`` received, send ``(ok, result or error)``; exit at EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _die_with(parent)
    _pool.clear()  # helpers of the parent are not this process's children
    for other in list(_arenas):  # other helpers' arenas: their pages are freed when those helpers stop
        if other is not arena:
            other.close()
    try:
        while True:
            try:
                msg = conn.recv_bytes()
            except (EOFError, OSError):
                return
            answer = None
            try:
                if _is_raw(msg):
                    answer = arena.raw_serve(msg)
                else:
                    fn, args = arena.loads(msg, as_bytes=True)
                    outcome: tuple = (True, fn(*args))
            except StaleHelper:
                outcome = (False, StaleHelper)
            except (StructposError, MemoryError) as e:
                outcome = (False, e)
            except BaseException as e:  # reported to the parent, which raises it as a ParseError
                outcome = (False, f"{type(e).__name__}: {e}")
            if answer is None:
                try:
                    answer = arena.dumps(outcome)
                except BaseException as e:  # a result that does not pickle
                    answer = arena.dumps((False, f"{type(e).__name__}: {e}"))
            conn.send_bytes(answer)
    finally:
        os._exit(0)


class _Pool:
    """Idle helpers of this process (a forked child of this process forgets them)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Helper] = []
        self.owner = os.getpid()

    def take(self) -> _Helper:
        with self.lock:
            if self.owner != os.getpid():  # inherited through a fork: not our children
                self.idle, self.owner = [], os.getpid()
            while self.idle:
                helper = self.idle.pop()
                if helper.alive():
                    return helper
                helper.stop()  # died while idle (the OOM killer, ...)
        return _Helper()

    def give_back(self, helper: _Helper) -> None:
        with self.lock:
            if self.owner == os.getpid():
                self.idle.append(helper)

    def clear(self) -> None:
        self.idle, self.owner = [], os.getpid()


_pool = _Pool()


def call_guarded(
    fn: Callable[..., Any], args: tuple, deadline: float, *, what: str, timeout: float, name: str | None
) -> Any:
    """``fn(*args)`` computed in a helper process, killed at ``deadline`` (a ``time.monotonic()`` value).

    Parameters
    ----------
    fn : callable
        A module-level function (it is sent by reference); its arguments and result must pickle.
    args : tuple
        Its arguments.
    deadline : float
        When to give up, on the ``time.monotonic()`` clock.
    what : str
        The work, as the timeout message names it (``"tree-sitter parse"``).
    timeout : float
        The limit the deadline comes from, for the message.
    name : str or None
        The input, for the messages.

    Returns
    -------
    object
        What ``fn(*args)`` returned.

    Raises
    ------
    LimitError
        ``record_timeout``: the deadline passed (the helper was killed).
    ParseError
        The helper died, or ``fn`` raised an exception other than structpos's own or ``MemoryError``.
    StructposError, MemoryError
        As ``fn`` raised them.

    Examples
    --------
    >>> import time
    >>> call_guarded(sum, ([1, 2, 3],), time.monotonic() + 10, what="a sum", timeout=10, name="x")
    6
    >>> call_guarded(time.sleep, (60,), time.monotonic() + 0.1, what="a nap", timeout=0.1, name="x")
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: x: a nap still running after 0.1 s (record_timeout: ...)
    """
    return _call(lambda arena: arena.dumps((fn, _out_of_band(args))), _pickled_outcome, deadline, what, timeout, name)


def call_guarded_raw(
    fn: Callable[[bytes, memoryview], tuple[bytes, list]],
    request: bytes,
    payload: bytes,
    deadline: float,
    *,
    what: str,
    timeout: float,
    name: str | None,
) -> tuple[bytes, list[np.ndarray]]:
    """:func:`call_guarded` without pickling, for a call made once per record: ``fn(request, payload)``
    in a helper process, killed at ``deadline``.

    ``payload`` crosses through the shared arena, ``fn`` gets a read-only view of it (valid for
    the call) and returns ``(reply, buffers)``: the reply crosses the pipe, the buffers the arena
    (or the pipe, past the arena's end). The same errors as :func:`call_guarded`.

    Parameters
    ----------
    fn : callable
        A module-level function ``(request: bytes, payload: memoryview) -> (bytes, list of buffers)``.
    request : bytes
        A small message for ``fn``.
    payload : bytes
        The call's large argument.
    deadline, what, timeout, name
        As for :func:`call_guarded`.

    Returns
    -------
    tuple of (bytes, list of numpy.ndarray)
        ``fn``'s reply, and its buffers as ``uint8`` arrays (slices of one writable copy).

    Examples
    --------
    >>> import time
    >>> reply, (twice,) = call_guarded_raw(
    ...     _double, b"2", b"ab", time.monotonic() + 10, what="a copy", timeout=10, name="x")
    >>> reply, twice.tobytes()
    (b'2', b'abab')
    """
    ref = f"{fn.__module__}:{fn.__qualname__}"
    return _call(lambda arena: arena.raw_call(ref, request, payload), _raw_outcome, deadline, what, timeout, name)


def _double(request: bytes, payload: memoryview) -> tuple[bytes, list]:
    """For :func:`call_guarded_raw`'s example: the request, and the payload ``int(request)`` times."""
    return request, [bytes(payload) * int(request)]


def _pickled_outcome(arena: _Arena, msg: bytes) -> tuple:
    """``(ok, value)`` of a helper's pickled answer."""
    return arena.loads(msg, as_bytes=False)


def _raw_outcome(arena: _Arena, msg: bytes) -> tuple:
    """``(ok, value)`` of a raw call's answer (a pickled one when the function raised)."""
    return (True, arena.raw_result(msg)) if _is_raw(msg) else _pickled_outcome(arena, msg)


def _call(encode, decode, deadline: float, what: str, timeout: float, name: str | None) -> Any:
    """One call through a helper (a second, fresh one when the first was stale): its value, or its error raised."""
    helper = _pool.take()
    for _attempt in range(2):
        ok, value = _round_trip(helper, encode, decode, deadline, what, timeout, name)
        if ok:
            return value
        if value is not StaleHelper:
            break
        helper = _Helper()  # a fresh fork (another idle one may be as stale) knows what this process has loaded
    if isinstance(value, BaseException):
        raise value
    raise ParseError(f"{what} failed: {value}", name=name)


def _round_trip(helper: _Helper, encode, decode, deadline: float, what: str, timeout: float, name: str | None):
    """Send ``encode(arena)`` to ``helper`` and return ``decode(arena, answer)``, the ``(ok, value)``
    outcome, read before the helper can take another call; a helper in any doubt is stopped, not reused."""
    start = time.monotonic()
    kept = False
    mask = None
    try:
        mask = _pin_together(helper)
        helper.conn.send_bytes(encode(helper.arena))
        if not helper.wait(deadline - start):
            raise LimitError(
                f"{what} still running after {timeout:g} s",
                limit="record_timeout",
                value=round(time.monotonic() - start, 1),
                maximum=timeout,
                name=name,
            )
        try:
            msg = helper.conn.recv_bytes()
        except (EOFError, OSError):
            raise ParseError(f"the process running the {what} died ({_death(helper)})", name=name) from None
        try:
            outcome = decode(helper.arena, msg)
        except (ValueError, struct.error, pickle.UnpicklingError, EOFError) as e:
            raise ParseError(f"the {what}'s result did not arrive intact ({e})", name=name) from None
        kept = outcome[1] is not StaleHelper
        return outcome
    finally:
        _unpin(mask)
        if kept:
            _pool.give_back(helper)
        else:  # timed out, died, interrupted here (Ctrl-C, an alarm) or stale: never reuse
            helper.stop()


def _death(helper: _Helper) -> str:
    try:
        _, status = os.waitpid(helper.pid, 0)
    except ChildProcessError:
        return "unknown status"
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
