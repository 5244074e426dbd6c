"""Reading inputs as a deterministic stream of records ``(id, payload)``.

Three input shapes are understood, always read in the same order (so record ``k`` of one run
is record ``k`` of the next, which is what sharding and ``--resume`` rely on):

* **JSONL** (``*.jsonl``, ``*.ndjson``): one record per non-blank line; the payload is the
  ``field`` of the line's object (default ``"text"``), the id its ``id_field`` or, by default,
  the 1-based line number. A line whose id is missing, null, a boolean, an object or a list is
  an error record (id: its line number).
* **Parquet** (``*.parquet``): one record per row; payload column ``field``, id column
  ``id_field`` or the 0-based row number. A row whose id is null (or a boolean, ...) is an error
  record (id: its row number), never the id ``"None"``; a file pyarrow cannot read (truncated,
  corrupt) is an :class:`~structpos.exceptions.InputError` naming it.

In both, a payload that is null, a number, a boolean or a date is the record's ``InputError``
(``in.jsonl line 3: payload 'text' is of type int (1), not text or bytes``), never parsed: the
rule of :mod:`.payloads`, which :class:`~structpos.pipeline.EncodeBatch` follows too.
* **A directory** (or any other single file): one record per file, id = the path relative to
  the directory, files sorted by that path; the kind (and code language) comes from
  ``--kind``/``--language`` or else the suffix (:func:`~structpos.parsers.kinds.kind_for_suffix`). A CoNLL-U file yields
  one record per sentence, id ``file#sent_id``. Only regular files are read (see
  :mod:`.walk`); every other entry, and every file of another kind or language or with an
  unknown suffix, is reported as skipped with its reason. A known suffix also fixes the
  format the parser is told (a ``.csv`` is read as CSV whatever it contains).

A line or file that cannot be read (bad JSON, missing field, bad UTF-8, a lone surrogate, a
file over ``max_input_bytes``) still yields a record, carrying ``read_error``, so that
*records in = records encoded + records in errors* holds. A file's bytes become text exactly as
the parsers read them (:func:`~structpos.parsers._input.decode_input`: a byte-order mark, else a
Python PEP 263 line or an XML declaration, else UTF-8), so ``structpos encode`` and
``parse(path, kind)`` read the same file the same way and fail it with the same ParseError.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Iterator, Sequence

from ..exceptions import InputError, ParseError
from ..parsers._conllu_lines import conllu_sentences
from ..parsers._input import decode_input
from ..parsers.kinds import format_for_suffix, kind_for_suffix
from .payloads import id_problem, payload_problem
from .walk import Skipped, open_regular, read_bounded, special_kind, walk_files

__all__ = [
    "Record",
    "read_records",
    "check_input",
    "count_records",
    "kind_for_path",
    "conllu_sentences",
    "record_digest",
]

JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class Record:
    """One unit of work: ``payload`` parsed as ``kind`` becomes one (or more) output rows.

    Parameters
    ----------
    id : str
        The record id (unique within the input).
    payload : object
        What the parser takes (text, bytes, or a dict for graphs); ``None`` for a record that could not be read.
    where : str
        Input and position, for error messages.
    kind, language, format : str, optional
        How to parse it (``None``: the run's ``--kind`` / ``--language``).
    read_error : tuple of (str, str), optional
        ``(error type, message)`` when the record could not even be read.
    input, position : str, optional
        The input it comes from and where in it.

    Examples
    --------
    >>> r = Record("7", "[1]", "in.jsonl line 7", "json", input="in.jsonl", position="line 7")
    >>> record_digest(r) == record_digest(Record("7", "[1]", "elsewhere", "json"))
    True
    """

    id: str
    payload: Any
    where: str
    """Input and position, for error messages: ``"data.jsonl line 17"``."""
    kind: str | None = None
    language: str | None = None
    read_error: tuple[str, str] | None = None
    """``(error type, message)`` when the record could not even be read."""
    format: str | None = None
    """Format hint for the parser's ``format`` option (``"tsv"`` for a ``.tsv`` table)."""
    input: str | None = None
    """The input the record comes from (a file name, a path relative to the input directory)."""
    position: str | None = None
    """Where in that input (``"line 17"``, ``"row 4"``), ``None`` for a whole file."""


def record_digest(record: Record) -> str:
    """A content hash of what determines the record's output (payload, kind, language, format).

    ``--resume`` compares it with the one in the manifest to re-encode records that changed.

    Parameters
    ----------
    record : Record

    Returns
    -------
    str
        16 hex digits.

    Examples
    --------
    >>> a, b = Record("1", "[1]", "x", "json"), Record("1", "[2]", "x", "json")
    >>> record_digest(a) == record_digest(b), len(record_digest(a))
    (False, 16)
    """
    h = hashlib.blake2b(digest_size=8)
    payload = record.payload
    if isinstance(payload, str):
        data = payload.encode("utf-8", "surrogatepass")
    elif isinstance(payload, bytes):
        data = payload
    else:
        data = json.dumps(payload, sort_keys=True, default=repr).encode("utf-8", "surrogatepass")
    h.update(data)
    h.update(repr((record.kind, record.language, record.format, record.read_error)).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def kind_for_path(path: str | Path) -> tuple[str, str | None] | None:
    """``(kind, language)`` guessed from the suffix, or ``None`` when unknown.

    Parameters
    ----------
    path : str or Path
        A file name or path.

    Returns
    -------
    tuple of (str, str or None), or None
        The kind and, for code, the language.

    Examples
    --------
    >>> kind_for_path("src/a.py")
    ('code', 'python')
    >>> kind_for_path("notes.bin") is None
    True
    """
    return kind_for_suffix(path.suffix if isinstance(path, PurePath) else _suffix(os.fspath(path)))


def _suffix(path: str) -> str:
    """``Path(path).suffix`` without building a ``Path`` (called for every file of a directory input)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name in (".", ""):  # a path ending in "." or the root: Path's own rules
        return Path(path).suffix
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def read_records(
    path: str | Path,
    *,
    kind: str | None = None,
    language: str | None = None,
    field: str = "text",
    id_field: str | None = None,
    glob: str | None = None,
    follow_symlinks: bool = False,
    max_input_bytes: int | None = None,
    skipped: list | None = None,
    exclude: Sequence[str | Path] = (),
    default_encoding: str | None = None,
) -> Iterator[Record]:
    """Yield the records of ``path`` (JSONL, Parquet, a directory or a file) in input order.

    Parameters
    ----------
    path : str or Path
        A ``.jsonl``/``.ndjson`` file, a ``.parquet`` file, a directory, or any other file.
    kind, language : str, optional
        The input kind and code language(s) (comma separated); for directories they select
        the files to read (otherwise the suffix decides, :func:`kind_for_path`).
    field, id_field : str
        JSONL / Parquet: the payload field and the id field (default: the line / row number).
    glob : str, optional
        Directories: read only files matching this pattern (relative path or file name).
    follow_symlinks : bool
        Directories: follow symlinks (loop-safe); by default they are skipped.
    max_input_bytes : int, optional
        A file larger than this becomes an error record (``LimitError``), not read.
    skipped : list, optional
        Receives a :class:`~structpos.pipeline.walk.Skipped` per directory entry not read.
    exclude : sequence of paths
        Directories not to enter (an output directory inside the input directory).
    default_encoding : str, optional
        Files: the codec of those with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`).

    Yields
    ------
    Record
        One per JSONL line / Parquet row / file (a CoNLL-U file: one per sentence); a record
        that cannot be read carries its ``read_error`` instead of raising.

    Raises
    ------
    InputError
        When ``path`` does not exist or is not a regular file or directory.

    Examples
    --------
    >>> import json, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "in.jsonl")
    >>> _ = open(p, "w").write(json.dumps({"text": "[1]"}) + "\\n\\n{oops\\n")
    >>> [(r.id, r.read_error is None) for r in read_records(p, kind="json")]
    [('1', True), ('3', False)]
    """
    path = check_input(path)
    if path.is_dir():
        yield from _directory_records(
            path, kind, language, glob, follow_symlinks, max_input_bytes, skipped, exclude, default_encoding
        )
        return
    if path.name.lower().endswith(JSONL_SUFFIXES):
        yield from _jsonl_records(path, kind, language, field, id_field, max_input_bytes)
    elif path.name.lower().endswith(PARQUET_SUFFIXES):
        yield from _parquet_records(path, kind, language, field, id_field)
    else:
        yield from _file_records(path, path.name, kind, language, True, max_input_bytes, default_encoding)


def check_input(path: str | Path) -> Path:
    """``path`` as a ``Path`` if it is a directory or a regular file (symlinks followed), else raise.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    Path

    Raises
    ------
    InputError
        It does not exist, or is a FIFO, a device, a socket, a dangling symlink.

    Examples
    --------
    >>> check_input("/dev/null")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: /dev/null: not a regular file or directory (character device)
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise InputError("input does not exist", name=str(path))
    if not (path.is_dir() or path.is_file()):
        mode = os.stat(path).st_mode if path.exists() else 0
        raise InputError(
            f"not a regular file or directory ({special_kind(mode) if mode else 'dangling symlink'})", name=str(path)
        )
    return path


def count_records(
    path: str | Path,
    *,
    kind: str | None = None,
    language: str | None = None,
    glob: str | None = None,
    follow_symlinks: bool = False,
    exclude: Sequence[str | Path] = (),
) -> int | None:
    """The number of records :func:`read_records` will yield when that is cheap to know, else ``None``.

    Parameters
    ----------
    path : str or Path
        As for :func:`read_records`.
    kind, language, glob, follow_symlinks, exclude
        As for :func:`read_records` (they select a directory's files).

    Returns
    -------
    int or None
        Known for JSONL (non-blank lines), Parquet (rows) and directories without CoNLL-U files.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "in.jsonl")
    >>> _ = open(p, "w").write('{"text": "[1]"}\\n\\n{"text": "[2]"}\\n')
    >>> count_records(p)
    2
    """
    path = Path(path)
    if path.is_dir():
        files = [f for _, f in _directory_files(path, kind, language, glob, follow_symlinks, exclude=exclude)]
        if any((kind or (kind_for_path(f) or ("",))[0]) == "conllu" for f in files):
            return None
        return len(files)
    if not path.is_file():
        return None
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES):
        n = 0
        with open(path, "rb") as fh:
            for line in fh:
                n += bool(line.strip())
        return n
    if name.endswith(PARQUET_SUFFIXES):
        return _open_parquet(path).metadata.num_rows
    return None if (kind or (kind_for_path(path) or ("",))[0]) == "conllu" else 1


# ------------------------------------------------------------------ JSONL / Parquet
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(obj: Any) -> str | None:
    """The first string (value or key) in ``obj`` that is not valid Unicode text, else ``None``."""
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError as e:
                return f"lone surrogate U+{ord(x[e.start]):04X} at char {e.start} of {x[:40]!r}"
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return None


def _jsonl_line(
    raw: bytes, field: str, id_field: str | None, where: str, rid: str
) -> tuple[str, Any, tuple[str, str] | None]:
    """``(id, payload, read error)`` of one JSONL line."""
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return rid, None, ("ParseError", f"{where}: bad JSON: {e}")
    except RecursionError:
        return rid, None, ("LimitError", f"{where}: JSON nested too deeply for the line reader")
    if not isinstance(obj, dict):
        return rid, None, ("InputError", f"{where}: expected a JSON object, got {type(obj).__name__}")
    if _SURROGATE_ESCAPE.search(raw):
        bad = _lone_surrogate(obj)
        if bad is not None:
            return rid, None, ("InputError", f"{where}: not valid Unicode text: {bad}")
    if id_field is not None:
        if id_field not in obj:
            return rid, None, ("InputError", f"{where}: no id field {id_field!r}")
        bad_id = id_problem(obj[id_field], id_field)  # str(None) would be the id "None", str(True) "True"
        if bad_id is not None:
            return rid, None, (bad_id[0], f"{where}: {bad_id[1]}")
        rid = str(obj[id_field])
    if field not in obj:
        return rid, None, ("InputError", f"{where}: no payload field {field!r}")
    problem = payload_problem(obj[field], field)  # null, or a number json would read as the document "1"
    if problem is not None:
        return rid, None, ("InputError", f"{where}: {problem}")
    return rid, obj[field], None


def _jsonl_records(path: Path, kind, language, field, id_field, max_input_bytes=None) -> Iterator[Record]:
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{path.name} line {lineno}"
            if max_input_bytes is not None and len(raw) > max_input_bytes:
                too_big = (
                    "LimitError",
                    f"{where}: line of {len(raw)} bytes (max_input_bytes: {len(raw)} > "
                    f"{max_input_bytes}; raise the limit to allow it)",
                )
                yield Record(
                    str(lineno), None, where, kind, language, too_big, input=path.name, position=f"line {lineno}"
                )
                continue
            rid, payload, err = _jsonl_line(raw, field, id_field, where, str(lineno))
            yield Record(rid, payload, where, kind, language, err, input=path.name, position=f"line {lineno}")


def _open_parquet(path: Path):
    """``pyarrow.parquet.ParquetFile(path)``; a file pyarrow cannot read is an InputError naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:  # truncated, corrupt, or not Parquet at all
        raise InputError(f"cannot read it as Parquet: {e}", name=str(path)) from None


def _parquet_batches(path: Path, pf, cols: list[str]) -> Iterator[dict]:
    """The row batches of ``cols`` as dicts of lists; a batch that cannot be read is an InputError naming the file."""
    import pyarrow as pa

    batches = pf.iter_batches(columns=cols, batch_size=4096)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as e:  # a damaged page or column chunk
            raise InputError(f"cannot read it as Parquet: {e}", name=str(path)) from None
        yield batch.to_pydict()


def _parquet_records(path: Path, kind, language, field, id_field) -> Iterator[Record]:
    pf = _open_parquet(path)
    names = pf.schema_arrow.names
    for col in [field] + ([id_field] if id_field else []):
        if col not in names:
            raise InputError(f"no column {col!r} (columns: {', '.join(names)})", name=str(path))
    cols = [field] + ([id_field] if id_field and id_field != field else [])
    row = 0
    for d in _parquet_batches(path, pf, cols):
        payloads = d[field]
        ids = d[id_field] if id_field else range(row, row + len(payloads))
        for rid, payload in zip(ids, payloads):
            where = f"{path.name} row {row}"
            bad_id = id_problem(rid, id_field) if id_field else None  # str(None) would be the id "None"
            if bad_id is not None:
                err: tuple[str, str] | None = (bad_id[0], f"{where}: {bad_id[1]}")
                rid = row
            else:
                problem = payload_problem(payload, field)  # null, or a number json would read as the document "1"
                err = None if problem is None else ("InputError", f"{where}: {problem}")
            yield Record(str(rid), payload, where, kind, language, err, input=path.name, position=f"row {row}")
            row += 1


# ------------------------------------------------------------------ files
def _wanted(rel: str, kind, languages, glob) -> str | None:
    """``None`` when the file at ``rel`` is to be read, else why it is skipped."""
    if glob is not None:
        name = rel.rsplit("/", 1)[-1]
        return None if fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(name, glob) else "does not match --glob"
    guess = kind_for_path(rel)
    if guess is None:
        return f"unknown suffix {Path(rel).suffix or '(none)'!r} (pass --kind with --glob to read it)"
    if kind is not None and guess[0] != kind:
        return f"suffix {Path(rel).suffix!r} is {guess[0]}, not --kind {kind}"
    if languages and guess[1] is not None and guess[1] not in languages:
        return f"language {guess[1]} not in --language {','.join(languages)}"
    return None


def _languages(language: str | None) -> tuple[str, ...]:
    return tuple(x.strip() for x in language.split(",") if x.strip()) if language else ()


def _directory_files(
    root: Path,
    kind,
    language,
    glob,
    follow_symlinks: bool = False,
    skipped: list | None = None,
    exclude: Sequence[str | Path] = (),
) -> Iterator[tuple[str, Path]]:
    files, special = walk_files(root, follow_symlinks=follow_symlinks, exclude=exclude)
    if skipped is not None:
        skipped.extend(special)
    languages = _languages(language)
    for rel, f in files:
        reason = _wanted(rel, kind, languages, glob)
        if reason is None:
            yield rel, f
        elif skipped is not None:
            skipped.append(Skipped(rel, reason))


def _directory_records(
    root: Path,
    kind,
    language,
    glob,
    follow_symlinks=False,
    max_input_bytes=None,
    skipped: list | None = None,
    exclude: Sequence[str | Path] = (),
    default_encoding: str | None = None,
) -> Iterator[Record]:
    for rel, f in _directory_files(root, kind, language, glob, follow_symlinks, skipped, exclude):
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:  # a file name in another encoding: ids must be text
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            err = ("InputError", f"{shown}: the file name is not valid UTF-8; rename it")
            yield Record(rel, None, shown, kind, language, err, input=shown)
            continue
        yield from _file_records(f, rel, kind, language, follow_symlinks, max_input_bytes, default_encoding)


def _file_error(rel: str, kind, language, exc: BaseException, position: str | None = None) -> Record:
    """The error record of a file that cannot be read: an ``InputError`` for the system's refusal
    (``OSError``), else the structpos error raised."""
    where = rel if position is None else f"{rel} {position}"
    message = getattr(exc, "message", None) or str(exc)
    if isinstance(exc, OSError):
        message = f"cannot read: {exc.strerror or exc}"
    error_type = "InputError" if isinstance(exc, OSError) else type(exc).__name__
    return Record(rel, None, where, kind, language, (error_type, f"{where}: {message}"), input=rel, position=position)


def _file_records(
    path: Path,
    rel: str,
    kind,
    language,
    follow_symlinks: bool = False,
    max_input_bytes: int | None = None,
    default_encoding: str | None = None,
) -> Iterator[Record]:
    guess = kind_for_path(path)
    if kind is None:
        if guess is None:
            yield Record(
                rel,
                None,
                rel,
                None,
                None,
                ("InputError", f"{rel}: cannot tell the input kind from the suffix; pass --kind"),
                input=rel,
            )
            return
        kind = guess[0]
    if (language is None or "," in language) and guess is not None and guess[0] == kind:
        language = guess[1]
    try:
        data = read_bounded(open_regular(path, follow_symlinks=follow_symlinks), max_input_bytes, name=rel)
        text = decode_input(data, rel, kind, language, default_encoding)
    except ParseError as e:  # the parsers' own decoding and message: the API reads these bytes the same way
        where = rel if e.position is None else f"{rel} {e.position}"
        yield Record(
            rel,
            None,
            where,
            kind,
            language,
            ("ParseError", str(e)),
            input=rel,
            position=None if e.position is None else str(e.position),
        )
        return
    except (OSError, InputError) as e:
        yield _file_error(rel, kind, language, e)
        return
    if kind == "conllu":
        sentences = 0
        for sent_id, lineno, block in conllu_sentences(text):
            sentences += 1
            yield Record(
                f"{rel}#{sent_id}", block, f"{rel} line {lineno}", kind, language, input=rel, position=f"line {lineno}"
            )
        if not sentences:  # the file leaves an error, not nothing
            yield Record(rel, None, rel, kind, language, ("InputError", f"{rel}: no sentence in the file"), input=rel)
    else:
        fmt = format_for_suffix(path.suffix) if (guess or ("",))[0] == kind else None
        yield Record(rel, text, rel, kind, language, format=fmt, input=rel)
