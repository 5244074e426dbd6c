"""A per-record time budget in the encoding thread: ``SIGALRM`` raising :class:`~structpos.exceptions.LimitError`."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from ..exceptions import LimitError

__all__ = ["record_timer"]


@contextlib.contextmanager
def record_timer(seconds: float | None, name: str = "") -> Iterator[None]:
    """Raise :class:`~structpos.exceptions.LimitError` (``record_timeout``) in this thread after ``seconds``.

    Uses ``SIGALRM`` (POSIX, main thread only; elsewhere a no-op): Python code is interrupted
    between bytecodes; C code that never returns is the encode workers' driver's job (it kills
    the worker and records the record as timed out).

    Parameters
    ----------
    seconds : float or None
        The time budget; ``None`` means no limit.
    name : str, optional
        The record named in the error.

    Returns
    -------
    contextlib.AbstractContextManager
        Arms the alarm on entry, disarms it on exit.

    Raises
    ------
    LimitError
        Inside the ``with`` block, once ``seconds`` have passed.

    Examples
    --------
    >>> import time
    >>> with record_timer(0.05, "slow"):
    ...     time.sleep(1)
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: slow: took more than 0.05 s (record_timeout; raise the limit to allow it)
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if seconds is None or not usable:
        yield
        return

    def expire(signum, frame):
        raise LimitError(f"took more than {seconds:g} s", limit="record_timeout", name=name or None)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
