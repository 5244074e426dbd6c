"""Encoding records: parse -> coordinates -> rows.

:func:`encode_records` is the one piece of work every engine runs (the CLI's shards, the
multiprocessing pool, Ray tasks, HF ``datasets.map`` and Ray Data ``map_batches`` through
:class:`~structpos.pipeline.adapters.EncodeBatch`). For each record it either produces rows or
one error entry, never both and never neither, so *records in = records encoded + records in errors*.

The pieces around it live beside it: the run's options (:mod:`.options`), the parser dispatch
(:mod:`.dispatch`), the per-record timer (:mod:`.timer`), the output schema (:mod:`.schema`) and
the batch function of the dataset engines (:mod:`.adapters`). The options', dispatch's and timer's
public names are importable from here too; ``EncodeBatch`` and ``output_schema`` from :mod:`structpos.pipeline`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..exceptions import InputError, LimitError
from ..limits import DEFAULT_LIMITS, Limits, check_limit
from .arrow import BASE_COLUMNS
from .dispatch import load_parser, parse_payload, parser_for
from .options import EncodeOptions, validate_languages, validate_spec
from .records import Record
from .timer import record_timer

__all__ = [
    "EncodeOptions",
    "encode_payload",
    "encode_one",
    "encode_records",
    "encode_each",
    "error_entry",
    "cannot_store",
    "store_error",
    "mark_unstorable",
    "record_timer",
    "StageFailure",
    "load_parser",
    "prepare",
    "validate_spec",
    "validate_languages",
]


def encode_payload(
    record_id: str,
    payload: Any,
    kind: str,
    coords: str,
    *,
    language: str | None = None,
    format: str | None = None,
    parser_options: Mapping[str, Any] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    extra_parsers: Mapping[str, str] | None = None,
    tokenizer: str | None = None,
) -> list[dict]:
    """Parse ``payload`` as ``kind`` and compute ``coords``: one row per resulting Structure.

    A row is a dict with ``id``, ``kind``, ``num_nodes``, ``labels``, ``start``, ``end``,
    ``parent`` (``None`` unless a tree) and ``coords`` (family output name -> per-node array).
    A parser returning several structures (e.g. a CoNLL-U text with several sentences) gives
    rows ``id#<sent_id>`` (or ``id#<k>``). Coordinates whose name clashes with a base column
    are dropped when equal to it (``tree`` returns ``parent``) and otherwise prefixed ``coord_``.

    Parameters
    ----------
    record_id : str
        The record's id (used in rows and error messages).
    payload : str, bytes or object
        What the parser of ``kind`` takes (text, or a dict for ``graph``).
    kind : str
        An input kind (:data:`structpos.parsers.PARSERS`, or one of ``extra_parsers``).
    coords : str
        A coordinate spec (``"tree,lap:4"``); empty for no coordinates.
    language : str, optional
        The code language (``kind="code"``).
    format : str, optional
        The file format, when a file suffix fixed it (``"csv"``, ``"html"``, ...).
    parser_options : mapping, optional
        More keyword arguments of the parser.
    limits : Limits, optional
        Per-record limits (input bytes, nodes, ...).
    extra_parsers : mapping of str to str, optional
        More kinds, ``{kind: "module:function"}``.
    tokenizer : str, optional
        A tokenizer path: the rows gain ``input_ids`` and per-token coordinates
        (:func:`~structpos.pipeline.tokens.add_token_columns`).

    Returns
    -------
    list of dict
        One row per structure.

    Raises
    ------
    ParseError
        The payload does not parse as ``kind``.
    LimitError
        The payload or a structure exceeds a limit (``max_memory_bytes``: the coordinates'
        arrays, estimated by :func:`~structpos.coords.estimated_bytes` before computing them).
    SpecError
        A bad coordinate spec.

    Examples
    --------
    >>> row, = encode_payload("r1", '{"a": [1, 2]}', "json", "tree,lap:2")
    >>> row["num_nodes"], list(row["labels"])
    (5, ['object', 'member:a', 'array', 'number', 'number'])
    >>> row["coords"]["depth"].tolist(), row["coords"]["lap"].shape
    ([0, 1, 2, 3, 3], (5, 2))
    >>> conllu = "# sent_id = x\\n1\\tHi\\thi\\tINTJ\\t_\\t_\\t0\\troot\\t_\\t_\\n\\n" * 2
    >>> [r["id"] for r in encode_payload("doc", conllu.replace("= x", "= y", 1), "conllu", "tree")]
    ['doc#y', 'doc#x']
    """
    try:
        return _rows(
            record_id, payload, kind, coords, language, format, parser_options, limits, extra_parsers, tokenizer
        )
    except StageFailure as failure:
        raise failure.error from None


class StageFailure(Exception):
    """A record's error and the stage of the encoding it happened in (``"coords"``).

    Raised inside this module around a stage other than parsing and unwrapped before it leaves
    (:func:`encode_payload` re-raises the error itself, :func:`encode_one` puts the stage in the
    error entry), so an error's own attributes never carry the stage.

    Parameters
    ----------
    stage : str
        The stage (an :func:`error_entry` stage).
    error : Exception
        What was raised.

    Examples
    --------
    >>> f = StageFailure("coords", ValueError("bad shape"))
    >>> f.stage, str(f)
    ('coords', 'bad shape')
    """

    def __init__(self, stage: str, error: Exception):
        super().__init__(str(error))
        self.stage = stage
        self.error = error


def _rows(
    record_id: str,
    payload: Any,
    kind: str,
    coords: str,
    language: str | None,
    fmt: str | None,
    parser_options: Mapping[str, Any] | None,
    limits: Limits,
    extra_parsers: Mapping[str, str] | None,
    tokenizer: str | None,
    parser_limits: Limits | None = None,
) -> list[dict]:
    """:func:`encode_payload`, with a coordinate failure raised as a :class:`StageFailure`.

    ``parser_limits`` (default ``limits``) go to the parser (:meth:`EncodeOptions.parser_limits`).
    """
    from .tokens import add_token_columns

    if limits.max_input_bytes is not None and isinstance(payload, (str, bytes)):
        check_limit(len(payload), limits.max_input_bytes, "max_input_bytes", "bytes of input", name=record_id)
    parser_limits = limits if parser_limits is None else parser_limits
    out = parse_payload(payload, kind, record_id, language, fmt, parser_options, parser_limits, extra_parsers)
    structures = out if isinstance(out, (list, tuple)) else [out]
    if not structures:  # a record leaves rows or an error, never nothing (a CoNLL-U text without a sentence)
        raise InputError(f"the {kind} input holds no structure", name=record_id)
    rows = []
    for k, s in enumerate(structures):
        rid = record_id
        if len(structures) > 1:
            sent_id = s.sentence.sent_id if getattr(s, "sentence", None) is not None else None
            rid = f"{record_id}#{sent_id if sent_id is not None else k}"
        check_limit(int(s.num_nodes), limits.max_nodes, "max_nodes", "nodes", name=rid)
        try:
            coord_cols = _coordinate_columns(s, coords, limits, rid)
        except Exception as e:  # memory and timeout limits are their own stages (_stage_of)
            raise StageFailure("coords", e) from e
        rows.append(
            {
                "id": rid,
                "kind": kind,
                "num_nodes": int(s.num_nodes),
                "labels": s.labels,
                "start": s.start,
                "end": s.end,
                "parent": s.parent,
                "coords": coord_cols,
            }
        )
        add_token_columns(rows[-1], s, tokenizer)  # --tokenizer: input_ids + per-token coordinates
    return rows


def _coordinate_columns(s: Any, coords: str, limits: Limits, rid: str) -> dict[str, np.ndarray]:
    """The row's coordinate columns: a name clashing with a base column is dropped when equal to it, else ``coord_``-prefixed."""
    from ..coords import compute, estimated_bytes

    if coords and limits.max_memory_bytes is not None:  # a spec too large for this record fails before allocating
        need = estimated_bytes(coords, int(s.num_nodes))
        check_limit(need, limits.max_memory_bytes, "max_memory_bytes", "bytes of coordinates", name=rid)
    coord_cols: dict[str, np.ndarray] = {}
    for name, arr in (compute(s, coords) if coords else {}).items():
        arr = np.asarray(arr)
        if arr.ndim == 0 or arr.shape[0] != s.num_nodes:
            raise ValueError(f"coordinate {name!r} has shape {arr.shape}, expected {s.num_nodes} nodes first")
        if name in BASE_COLUMNS:
            base = getattr(s, name, None)
            if base is not None and np.array_equal(base, arr):
                continue
            name = f"coord_{name}"
        coord_cols[name] = arr
    return coord_cols


def error_entry(record: Record, exc_type: str, message: str, stage: str, offset: Any = None) -> dict:
    """The ``errors.jsonl`` entry of a failed record.

    Keys: ``id``, ``input`` (file), ``position`` (where the record is in it: ``"line 17"``),
    ``stage`` (``read``, ``parse``, ``coords``, ``timeout``, ``memory``, ``worker``, ``write``),
    ``error_type``, ``message`` (naming input and position) and ``offset`` (the position
    inside the record, e.g. ``"3:7"``, when the error knows it).

    Parameters
    ----------
    record : Record
        The failed record.
    exc_type : str
        The exception's class name.
    message : str
        What went wrong (prefixed with the record's place when it does not name it already).
    stage : str
        Where it failed.
    offset : optional
        The position inside the record.

    Returns
    -------
    dict

    Examples
    --------
    >>> r = Record("5", "{", "in.jsonl line 5", "json", input="in.jsonl", position="line 5")
    >>> e = error_entry(r, "ParseError", "unexpected end", "parse", offset="1:2")
    >>> e["message"], e["stage"], e["offset"]
    ("in.jsonl line 5 (id '5'): unexpected end", 'parse', '1:2')
    """
    if record.where not in message:
        message = f"{record.where} (id {record.id!r}): {message}"
    return {
        "id": record.id,
        "input": record.input,
        "position": record.position or record.where,
        "stage": stage,
        "error_type": exc_type,
        "message": message,
        "offset": None if offset is None else str(offset),
    }


def cannot_store(exc: BaseException) -> bool:
    """Whether ``exc`` says that rows cannot be stored (out of memory, too many values, text Arrow
    refuses), as opposed to an I/O error or a bug.

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    bool

    Examples
    --------
    >>> import pyarrow as pa
    >>> cannot_store(pa.ArrowMemoryError("malloc failed")), cannot_store(OSError(28, "No space left"))
    (True, False)
    """
    return isinstance(exc, (MemoryError, ValueError, TypeError, pa.ArrowException)) and not isinstance(exc, OSError)


def store_error(record: Record, exc: BaseException) -> dict:
    """The error entry of a record whose rows cannot be stored: stage ``memory`` (``MemoryError``) or ``write``.

    Parameters
    ----------
    record : Record
        The record.
    exc : BaseException
        What Arrow or Parquet raised.

    Returns
    -------
    dict
        Its :func:`error_entry`.

    Examples
    --------
    >>> import pyarrow as pa
    >>> e = store_error(Record("r", "[1]", "r"), pa.ArrowMemoryError("malloc of size 8 failed"))
    >>> e["stage"], e["error_type"]
    ('memory', 'ArrowMemoryError')
    """
    text = " ".join((str(exc) or type(exc).__name__).split())
    stage = "memory" if isinstance(exc, MemoryError) else "write"
    return error_entry(
        record,
        type(exc).__name__,
        f"cannot store its rows ({text[:300]}); ask for smaller coordinates (--coords) or fewer nodes",
        stage,
    )


def mark_unstorable(
    records: Sequence[Record], per_record: list[tuple[list[dict], dict | None]], to_table: Callable[[list[dict]], Any]
) -> None:
    """Replace, in place, the rows of each record that ``to_table`` cannot store by its :func:`store_error` entry.

    What a shard or a batch does when its rows together do not make one table: find the records at fault.

    Parameters
    ----------
    records : sequence of Record
        The records.
    per_record : list of (rows, error entry or None)
        Their outcomes, as :func:`encode_each` yields them (changed in place).
    to_table : callable
        ``to_table(rows)``, raising what :func:`cannot_store` recognizes for rows it cannot store.

    Raises
    ------
    Exception
        What ``to_table`` raised for a reason other than storage (a bug, an I/O error).

    Examples
    --------
    >>> from structpos.pipeline.arrow import rows_to_table
    >>> recs = [Record("a", "[1]", "a"), Record("b", "[2]", "b")]
    >>> per_record = [encode_one(r, EncodeOptions("json", "tree")) for r in recs]
    >>> def refuse_b(rows):
    ...     if rows[0]["id"] == "b":
    ...         raise MemoryError("no room")
    ...     return rows_to_table(rows)
    >>> mark_unstorable(recs, per_record, refuse_b)
    >>> [(len(rows), err and err["stage"]) for rows, err in per_record]
    [(1, None), (0, 'memory')]
    """
    for k, (ok, _err) in enumerate(per_record):
        if ok:
            try:
                to_table(ok)
            except Exception as e:
                if not cannot_store(e):
                    raise
                per_record[k] = ([], store_error(records[k], e))


def _stage_of(exc: BaseException, stage: str) -> str:
    if isinstance(exc, MemoryError) or (isinstance(exc, LimitError) and exc.limit == "max_memory_bytes"):
        return "memory"
    if isinstance(exc, LimitError) and exc.limit == "record_timeout":
        return "timeout"
    return stage


_PREPARED: set = set()


def prepare(kind: str | None, options: EncodeOptions) -> None:
    """Import the parser of ``kind`` and the coordinate families once, outside any record's time budget.

    Errors are left for the records' own encoding to report.

    Parameters
    ----------
    kind : str or None
        The records' kind (``None``: nothing to import for the parser).
    options : EncodeOptions
        The options (coordinate spec, extra parsers).

    Examples
    --------
    >>> prepare("json", EncodeOptions("json", "tree"))
    """
    key = (kind, options.coords, options.extra_parsers)
    if kind is None or key in _PREPARED:
        return
    from .. import coords as coords_mod

    try:
        parser_for(kind, dict(options.extra_parsers))
        for name, _ in coords_mod.parse_spec(options.coords):
            coords_mod.get(name)
    except Exception:  # the record's own encoding reports it
        return
    _PREPARED.add(key)


def encode_one(rec: Record, options: EncodeOptions) -> tuple[list[dict], dict | None]:
    """Encode one record: ``(rows, None)`` or ``([], error entry)``, never raising for the record's fault.

    Parameters
    ----------
    rec : Record
        The record (one that failed to read carries its error and is not parsed).
    options : EncodeOptions
        How to encode it.

    Returns
    -------
    rows : list of dict
        As :func:`encode_payload` returns them.
    error : dict or None
        Its :func:`error_entry`.

    Examples
    --------
    >>> rows, err = encode_one(Record("a", '{"k": [1]}', "a"), EncodeOptions("json", "tree"))
    >>> rows[0]["num_nodes"], err
    (4, None)
    >>> encode_one(Record("b", "{", "b.json"), EncodeOptions("json", "tree"))[1]["stage"]
    'parse'
    """
    if rec.read_error is not None:
        return [], error_entry(rec, *rec.read_error, stage="read")
    kind = rec.kind or options.kind
    if kind is None:
        return [], error_entry(rec, "InputError", "no input kind (pass --kind)", "read")
    try:
        with record_timer(options.limits.record_timeout if options.timeout_in_process else None, rec.where):
            rows = _rows(
                rec.id,
                rec.payload,
                kind,
                options.coords,
                rec.language or options.language,
                rec.format,
                dict(options.parser_options),
                options.limits,
                dict(options.extra_parsers),
                options.tokenizer,
                options.parser_limits(),
            )
        return rows, None
    except StageFailure as failure:
        return [], _failure_entry(rec, failure.error, failure.stage)
    except Exception as e:  # one bad record must not stop the run; it is counted in errors
        return [], _failure_entry(rec, e, "parse")


def _failure_entry(rec: Record, e: BaseException, stage: str) -> dict:
    if isinstance(e, RecursionError):  # deep input that slipped past a parser's own guard
        return error_entry(rec, "LimitError", f"input nested too deeply ({e})", stage)
    message = str(e) or repr(e)
    return error_entry(rec, type(e).__name__, message, _stage_of(e, stage), getattr(e, "position", None))


def encode_each(
    records: Iterable[Record],
    options: EncodeOptions,
    *,
    preset: Mapping[int, dict] | None = None,
    on_record: Callable[[int], None] | None = None,
) -> Iterator[tuple[list[dict], dict | None]]:
    """``(rows, error entry or None)`` per record, in order (see :func:`encode_records`).

    Parameters
    ----------
    records : iterable of Record
    options : EncodeOptions
    preset : mapping of int to dict, optional
        Error entries used instead of encoding the records at these positions.
    on_record : callable, optional
        Called with each record's position before it is encoded.

    Yields
    ------
    tuple of (list of dict, dict or None)

    Examples
    --------
    >>> recs = [Record("a", "[1]", "a"), Record("b", "[", "b")]
    >>> [(len(rows), err is None) for rows, err in encode_each(recs, EncodeOptions("json", "tree"))]
    [(1, True), (0, False)]
    """
    preset = preset or {}
    for k, rec in enumerate(records):
        if k in preset:
            yield [], preset[k]
            continue
        if on_record is not None:
            prepare(rec.kind or options.kind, options)
            on_record(k)
        yield encode_one(rec, options)
    if on_record is not None:
        on_record(-1)


def encode_records(
    records: Iterable[Record],
    options: EncodeOptions,
    *,
    preset: Mapping[int, dict] | None = None,
    on_record: Callable[[int], None] | None = None,
) -> tuple[list[dict], list[dict], int]:
    """Encode ``records``: ``(rows, errors, number of records)``.

    Every record lands in exactly one place: its rows, or one entry of ``errors`` (see
    :func:`error_entry`). Parser and coordinate failures of one record never stop the others.

    Parameters
    ----------
    records : iterable of Record
        The records, in order.
    options : EncodeOptions
        Kind, coordinate spec, parser options and limits.
    preset : mapping, optional
        Errors already known, by position in ``records`` (a record that killed a worker, one
        in the errors of the run being resumed): used as they are, the record is not encoded.
    on_record : callable, optional
        Called with each record's position before it is encoded, and with ``-1`` at the end
        (how an encode worker tells its driver which record it is on).

    Returns
    -------
    rows : list of dict
        The rows of the records that encoded (see :func:`encode_payload`).
    errors : list of dict
        One entry per record that did not.
    n : int
        The number of records.

    Examples
    --------
    >>> recs = [Record("a", "[1, 2]", "a"), Record("b", "[1,", "b")]
    >>> rows, errors, n = encode_records(recs, EncodeOptions("json", "tree"))
    >>> n, [r["id"] for r in rows], [(e["id"], e["stage"]) for e in errors]
    (2, ['a'], [('b', 'parse')])
    """
    rows: list[dict] = []
    errors: list[dict] = []
    n = 0
    for ok, err in encode_each(records, options, preset=preset, on_record=on_record):
        n += 1
        rows.extend(ok)
        if err is not None:
            errors.append(err)
    return rows, errors, n
