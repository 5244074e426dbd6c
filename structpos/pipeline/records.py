"""Reading inputs as a deterministic stream of records ``(id, payload)``.

Three input shapes are understood, always read in the same order (so record ``k`` of one run
is record ``k`` of the next, which is what sharding and ``--resume`` rely on):

* **JSONL** (``*.jsonl``, ``*.ndjson``): one record per non-blank line; the payload is the
  ``field`` of the line's object (default ``"text"``), the id its ``id_field`` or, by default,
  the 1-based line number.
* **Parquet** (``*.parquet``): one record per row; payload column ``field``, id column
  ``id_field`` or the 0-based row number.
* **A directory** (or any other single file): one record per file, id = the path relative to
  the directory, files sorted by that path; the kind (and code language) comes from
  ``--kind``/``--language`` or else the suffix (:data:`SUFFIX_KINDS`). A CoNLL-U file yields
  one record per sentence, id ``file#sent_id``.

A line or file that cannot be read (bad JSON, missing field, bad UTF-8) still yields a record,
carrying ``read_error``, so that *records in = records encoded + records in errors* holds.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

__all__ = ["Record", "SUFFIX_KINDS", "read_records", "count_records", "kind_for_path", "conllu_sentences"]

# suffix -> (kind, language)
SUFFIX_KINDS: dict[str, tuple[str, str | None]] = {
    ".py": ("code", "python"),
    ".js": ("code", "javascript"),
    ".mjs": ("code", "javascript"),
    ".java": ("code", "java"),
    ".go": ("code", "go"),
    ".rs": ("code", "rust"),
    ".c": ("code", "c"),
    ".h": ("code", "c"),
    ".cc": ("code", "cpp"),
    ".cpp": ("code", "cpp"),
    ".cxx": ("code", "cpp"),
    ".hpp": ("code", "cpp"),
    ".hh": ("code", "cpp"),
    ".json": ("json", None),
    ".conllu": ("conllu", None),
    ".csv": ("table", None),
    ".tsv": ("table", None),
    ".html": ("table", None),
    ".htm": ("table", None),
    ".md": ("markdown", None),
    ".txt": ("document", None),
    ".xml": ("xml", None),
    ".yaml": ("yaml", None),
    ".yml": ("yaml", None),
}

TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".html": "html", ".htm": "html"}
JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class Record:
    """One unit of work: ``payload`` parsed as ``kind`` becomes one (or more) output rows."""

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


def kind_for_path(path: str | Path) -> tuple[str, str | None] | None:
    """``(kind, language)`` guessed from the suffix, or ``None`` when unknown."""
    return SUFFIX_KINDS.get(Path(path).suffix.lower())


def read_records(
    path: str | Path,
    *,
    kind: str | None = None,
    language: str | None = None,
    field: str = "text",
    id_field: str | None = None,
    glob: str | None = None,
) -> Iterator[Record]:
    """Yield the records of ``path`` (JSONL, Parquet, a directory or a file) in input order."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input {path} does not exist")
    if path.is_dir():
        yield from _directory_records(path, kind, language, glob)
    elif path.name.lower().endswith(JSONL_SUFFIXES):
        yield from _jsonl_records(path, kind, language, field, id_field)
    elif path.name.lower().endswith(PARQUET_SUFFIXES):
        yield from _parquet_records(path, kind, language, field, id_field)
    else:
        yield from _file_records(path, path.name, kind, language)


def count_records(path: str | Path, *, kind: str | None = None, language: str | None = None, glob: str | None = None) -> int | None:
    """The number of records :func:`read_records` will yield when that is cheap to know, else ``None``."""
    path = Path(path)
    if path.is_dir():
        files = list(_directory_files(path, kind, language, glob))
        if any((kind or (kind_for_path(f) or ("",))[0]) == "conllu" for f in files):
            return None
        return len(files)
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES):
        n = 0
        with open(path, "rb") as fh:
            for line in fh:
                n += bool(line.strip())
        return n
    if name.endswith(PARQUET_SUFFIXES):
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    return None if (kind or (kind_for_path(path) or ("",))[0]) == "conllu" else 1


# ------------------------------------------------------------------ JSONL / Parquet
def _jsonl_records(path: Path, kind, language, field, id_field) -> Iterator[Record]:
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{path.name} line {lineno}"
            rid = str(lineno)
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                yield Record(rid, None, where, kind, language, (type(e).__name__, f"{where}: bad JSON: {e}"))
                continue
            if not isinstance(obj, dict):
                yield Record(rid, None, where, kind, language, ("TypeError", f"{where}: expected a JSON object, got {type(obj).__name__}"))
                continue
            if id_field is not None:
                if id_field not in obj:
                    yield Record(rid, None, where, kind, language, ("KeyError", f"{where}: no id field {id_field!r}"))
                    continue
                rid = str(obj[id_field])
            if field not in obj:
                yield Record(rid, None, where, kind, language, ("KeyError", f"{where}: no payload field {field!r}"))
                continue
            if obj[field] is None:
                yield Record(rid, None, where, kind, language, ("ValueError", f"{where}: payload {field!r} is null"))
                continue
            yield Record(rid, obj[field], where, kind, language)


def _parquet_records(path: Path, kind, language, field, id_field) -> Iterator[Record]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    names = pf.schema_arrow.names
    for col in [field] + ([id_field] if id_field else []):
        if col not in names:
            raise ValueError(f"{path}: no column {col!r} (columns: {', '.join(names)})")
    cols = [field] + ([id_field] if id_field and id_field != field else [])
    row = 0
    for batch in pf.iter_batches(columns=cols, batch_size=4096):
        d = batch.to_pydict()
        payloads = d[field]
        ids = d[id_field] if id_field else range(row, row + len(payloads))
        for rid, payload in zip(ids, payloads):
            where = f"{path.name} row {row}"
            if payload is None:
                yield Record(str(rid), None, where, kind, language, ("ValueError", f"{where}: payload {field!r} is null"))
            else:
                yield Record(str(rid), payload, where, kind, language)
            row += 1


# ------------------------------------------------------------------ files
def _directory_files(root: Path, kind, language, glob) -> Iterator[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for fn in filenames:
            files.append(Path(dirpath, fn))
    files.sort(key=lambda p: p.relative_to(root).as_posix())
    for f in files:
        rel = f.relative_to(root).as_posix()
        if glob is not None:
            if fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(f.name, glob):
                yield f
            continue
        guess = kind_for_path(f)
        if guess is None:
            continue
        if kind is not None and guess[0] != kind:
            continue
        if language is not None and guess[1] is not None and guess[1] != language:
            continue
        yield f


def _directory_records(root: Path, kind, language, glob) -> Iterator[Record]:
    for f in _directory_files(root, kind, language, glob):
        yield from _file_records(f, f.relative_to(root).as_posix(), kind, language)


def _file_records(path: Path, rel: str, kind, language) -> Iterator[Record]:
    guess = kind_for_path(path)
    if kind is None:
        if guess is None:
            yield Record(rel, None, rel, None, None, ("ValueError", f"{rel}: cannot tell the input kind from the suffix; pass --kind"))
            return
        kind = guess[0]
    if language is None and guess is not None and guess[0] == kind:
        language = guess[1]
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        yield Record(rel, None, f"{rel} byte {e.start}", kind, language, ("UnicodeDecodeError", f"{rel} byte {e.start}: not UTF-8: {e.reason}"))
        return
    if kind == "conllu":
        for sent_id, lineno, block in conllu_sentences(text):
            yield Record(f"{rel}#{sent_id}", block, f"{rel} line {lineno}", kind, language)
    else:
        fmt = TABLE_FORMATS.get(path.suffix.lower()) if kind == "table" else None
        yield Record(rel, text, rel, kind, language, format=fmt)


def conllu_sentences(text: str) -> Iterator[tuple[str, int, str]]:
    """Split CoNLL-U text into sentences: ``(sent_id, first line number, block text)``.

    A sentence is a maximal run of non-blank lines; its id is the ``# sent_id = ...`` comment
    or, lacking one, ``s<k>`` with ``k`` its 1-based ordinal in the file.
    """
    lines = text.splitlines(keepends=True)
    k = 0
    i = 0
    n = len(lines)
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        j = i
        sent_id = None
        while j < n and lines[j].strip():
            if sent_id is None and lines[j].startswith("#"):
                key, sep, val = lines[j][1:].partition("=")
                if sep and key.strip() == "sent_id":
                    sent_id = val.strip()
            j += 1
        k += 1
        yield (sent_id or f"s{k}"), i + 1, "".join(lines[i:j])
        i = j
