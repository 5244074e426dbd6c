"""An exclusive lock on an output directory, naming its holder.

Two ``structpos encode`` runs writing the same ``--out`` would interleave shards and
manifests. :func:`lock_output` takes an OS-level lock (``filelock``; released by the kernel
when the process dies, even by ``kill -9``, so a lock is never stale) and writes who holds it
(pid, host, start time, command) beside it; a second run fails at once with a
:class:`~structpos.exceptions.ResumeError` naming that holder.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Iterator

from ..exceptions import InputError, ResumeError

__all__ = ["lock_output", "LOCK", "HOLDER"]

LOCK = ".structpos.lock"
HOLDER = ".structpos.lock.holder"


def _holder(out: Path) -> str:
    try:
        info = json.loads((out / HOLDER).read_text())
        return f"pid {info['pid']} on {info['host']} since {info['since']} ({info['command']})"
    except (OSError, ValueError, KeyError):
        return "another process (no holder information)"


@contextlib.contextmanager
def lock_output(out: str | Path) -> Iterator[Path]:
    """Hold an exclusive lock on directory ``out`` (created if missing) for the ``with`` block.

    Parameters
    ----------
    out : str or Path
        The output directory.

    Yields
    ------
    Path
        ``out``, locked until the block ends.

    Raises
    ------
    ResumeError
        When another process holds it (the message names the holder).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with lock_output(d):
    ...     with lock_output(d):
    ...         pass
    Traceback (most recent call last):
    ...
    structpos.exceptions.ResumeError: ...: another run is writing this output directory: pid ...
    """
    from filelock import FileLock, Timeout

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError("--out must be a directory (it is created if missing); this is a file", name=str(out))
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out / LOCK), is_singleton=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ResumeError(f"another run is writing this output directory: {_holder(out)}", name=str(out)) from None
    try:
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(sys.argv)[:300],
        }
        (out / HOLDER).write_text(json.dumps(info))
        yield out
    finally:
        (out / HOLDER).unlink(missing_ok=True)
        lock.release()
