"""Walking an input directory safely: regular files only, every other entry skipped with a reason.

A corpus directory may hold anything: dangling symlinks, symlink loops, FIFOs (opening one
blocks forever), sockets, device files (``/dev/zero`` reads without end), entries the user
cannot read. :func:`walk_files` never opens any of them: it looks at each entry with
``lstat`` (``stat`` for followed links), yields the regular files in a deterministic order
(sorted by their path relative to the root), and reports every other entry as a
:class:`Skipped` ``(path, reason)``. Symlinks are followed only when asked
(``follow_symlinks=True``), and then loop-safely: a directory already visited (same device
and inode) is not entered again. Hidden directories and ``__pycache__`` are not entered.

:func:`open_regular` opens a file that was listed as regular without following a symlink
that appeared since (``O_NOFOLLOW``) and without blocking on a FIFO (``O_NONBLOCK``), and
checks again that it is a regular file; :func:`read_bounded` reads at most a byte budget.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..exceptions import InputError, LimitError

__all__ = ["Skipped", "walk_files", "open_regular", "read_bounded", "special_kind"]


@dataclass(frozen=True)
class Skipped:
    """A directory entry that was not read: its path relative to the root and why.

    Parameters
    ----------
    path : str
        The entry's path relative to the walked directory.
    reason : str
        Why it was not read (``"symlink"``, ``"fifo"``, ``"unknown suffix"``, ...).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "a.json"), "w").write("[]")
    >>> os.symlink(os.path.join(d, "a.json"), os.path.join(d, "b.json"))
    >>> files, skipped = walk_files(d)
    >>> [rel for rel, _ in files], [(s.path, s.reason.split(" ")[0]) for s in skipped]
    (['a.json'], [('b.json', 'symlink')])
    """

    path: str
    reason: str


def special_kind(mode: int) -> str | None:
    """The name of a non-regular file type (``"fifo"``, ``"socket"``, ...), ``None`` for a regular file.

    Parameters
    ----------
    mode : int
        ``st_mode`` of an ``os.stat`` result.

    Returns
    -------
    str or None

    Examples
    --------
    >>> import stat
    >>> special_kind(stat.S_IFIFO | 0o644)
    'fifo'
    >>> special_kind(stat.S_IFREG | 0o644) is None
    True
    """
    for test, name in (
        (stat.S_ISREG, None),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISLNK, "symlink"),
    ):
        if test(mode):
            return name
    return "special file"


def _entry_stat(path: Path, follow_symlinks: bool) -> tuple[os.stat_result | None, str | None]:
    """``(stat, None)`` for an entry to consider, or ``(None, reason)`` to skip it."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return None, f"cannot stat: {e.strerror}"
    if stat.S_ISLNK(st.st_mode):
        if not follow_symlinks:
            return None, "symlink (not followed; pass --follow-symlinks)"
        try:
            st = os.stat(path)
        except OSError as e:
            reason = (
                "symlink loop"
                if e.errno == 40
                else "dangling symlink"
                if e.errno == 2
                else f"broken symlink: {e.strerror}"
            )
            return None, reason
    return st, None


def walk_files(
    root: str | Path, *, follow_symlinks: bool = False, exclude: Sequence[str | Path] = ()
) -> tuple[list[tuple[str, Path]], list[Skipped]]:
    """The regular files under ``root`` (sorted by relative path) and the entries skipped.

    Parameters
    ----------
    root : str or Path
        The directory to walk.
    follow_symlinks : bool
        Follow symlinks to files and directories (each directory entered once, so a
        symlink loop ends); by default symlinks are skipped.
    exclude : sequence of paths
        Directories not to enter (the output directory of a run, when it lies inside ``root``).

    Returns
    -------
    files : list of (str, Path)
        ``(path relative to root, path)`` of every readable regular file.
    skipped : list of Skipped
        Every other entry with its reason (symlink, dangling symlink, symlink loop, fifo,
        socket, device, unreadable).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> open(os.path.join(d, "a.json"), "w").write("{}")
    2
    >>> os.symlink("missing", os.path.join(d, "gone.json"))
    >>> os.mkfifo(os.path.join(d, "pipe.json"))
    >>> files, skipped = walk_files(d)
    >>> [rel for rel, _ in files]
    ['a.json']
    >>> sorted((s.path, s.reason.split(" (")[0]) for s in skipped)
    [('gone.json', 'symlink'), ('pipe.json', 'fifo')]
    >>> os.mkdir(os.path.join(d, ".git"))
    >>> sorted(s.reason for s in walk_files(d, follow_symlinks=True)[1])
    ['dangling symlink', 'fifo', 'hidden or cache directory (not entered)']
    """
    root = Path(root)
    files: list[tuple[str, Path]] = []
    skipped: list[Skipped] = []
    seen_dirs: set[tuple[int, int]] = set()
    excluded = {(s.st_dev, s.st_ino) for s in (os.stat(p) for p in exclude if os.path.isdir(p))}
    st = os.stat(root)
    seen_dirs.add((st.st_dev, st.st_ino))
    stack: list[tuple[Path, str]] = [(root, ".")]  # a directory and its path relative to root
    while stack:
        directory, dir_rel = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as e:
            skipped.append(Skipped(dir_rel, f"unreadable directory: {e.strerror}"))
            continue
        prefix = "" if dir_rel == "." else dir_rel + "/"
        for entry in entries:
            path = Path(entry.path)
            rel = prefix + entry.name  # path.relative_to(root).as_posix(), without pathlib's parsing
            found, reason = _entry_stat(path, follow_symlinks)
            if found is None:
                skipped.append(Skipped(rel, reason or "skipped"))
            elif stat.S_ISDIR(found.st_mode):
                if entry.name.startswith(".") or entry.name == "__pycache__":
                    skipped.append(Skipped(rel, "hidden or cache directory (not entered)"))
                    continue
                if (found.st_dev, found.st_ino) in excluded:
                    skipped.append(Skipped(rel, "the output directory (not entered)"))
                    continue
                if (found.st_dev, found.st_ino) in seen_dirs:
                    skipped.append(Skipped(rel, "directory already visited (symlink loop)"))
                    continue
                seen_dirs.add((found.st_dev, found.st_ino))
                stack.append((path, rel))
            elif not stat.S_ISREG(found.st_mode):
                skipped.append(Skipped(rel, special_kind(found.st_mode) or "special file"))
            elif not os.access(path, os.R_OK):
                skipped.append(Skipped(rel, "unreadable: permission denied"))
            else:
                files.append((rel, path))
    files.sort(key=lambda f: f[0])
    skipped.sort(key=lambda s: s.path)
    return files, skipped


def open_regular(path: str | Path, *, follow_symlinks: bool = False) -> int:
    """Open ``path`` for reading only if it is a regular file; return the file descriptor.

    Never blocks (``O_NONBLOCK``: a FIFO opens at once and is then refused) and, unless
    ``follow_symlinks``, never follows a symlink (``O_NOFOLLOW``).

    Parameters
    ----------
    path : str or Path
        The file.
    follow_symlinks : bool, optional
        Open the target of a symlink.

    Returns
    -------
    int
        A file descriptor, open for reading; the caller closes it.

    Raises
    ------
    InputError
        When ``path`` is not a regular file (naming its type).
    OSError
        When it cannot be opened.

    Examples
    --------
    >>> import os, tempfile
    >>> fd = open_regular(__file__); os.close(fd)
    >>> open_regular(tempfile.gettempdir())
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: ...: not a regular file (directory); not read
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise InputError("not a regular file (directory); not read", name=str(path)) from None
    except OSError as e:
        if e.errno == 40 and not follow_symlinks:  # ELOOP: O_NOFOLLOW met a symlink
            raise InputError("is a symlink (not followed; pass --follow-symlinks)", name=str(path)) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"not a regular file ({special_kind(mode)}); not read", name=str(path))
    return fd


def read_bounded(fd: int, max_bytes: int | None, *, name: str) -> bytes:
    """Read all of ``fd`` (then close it), refusing more than ``max_bytes`` (``None``: no bound).

    Parameters
    ----------
    fd : int
        An open file descriptor (closed on return).
    max_bytes : int or None
        The most bytes accepted.
    name : str
        The input named in the error.

    Returns
    -------
    bytes

    Raises
    ------
    LimitError
        ``max_input_bytes`` when the file is larger.

    Examples
    --------
    >>> import os
    >>> r, w = os.pipe(); os.write(w, b"abcdef"); os.close(w)
    6
    >>> read_bounded(r, 4, name="x")
    Traceback (most recent call last):
    ...
    structpos.exceptions.LimitError: x: more than 4 bytes (max_input_bytes: 5 > 4; raise the limit to allow it)
    """
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            want = 1 << 20 if max_bytes is None else min(1 << 20, max_bytes + 1 - size)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise LimitError(
                    f"more than {max_bytes} bytes", limit="max_input_bytes", value=size, maximum=max_bytes, name=name
                )
    finally:
        os.close(fd)
    return b"".join(chunks)
