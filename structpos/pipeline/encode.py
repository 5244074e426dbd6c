"""Encoding records: parse -> coordinates -> rows, and the picklable batch function.

:func:`encode_records` is the one piece of work every engine runs (the CLI's shards, the
multiprocessing pool, Ray tasks, HF ``datasets.map`` and Ray Data ``map_batches`` through
:class:`EncodeBatch`). For each record it either produces rows or one error entry, never
both and never neither, so *records in = records encoded + records in errors*.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import signal
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..exceptions import InputError, LimitError, ParseError, SpecError
from ..limits import DEFAULT_LIMITS, Limits, check_limit
from .arrow import BASE_COLUMNS, rows_to_table
from .records import Record

__all__ = [
    "EncodeOptions",
    "encode_payload",
    "encode_one",
    "encode_records",
    "encode_each",
    "error_entry",
    "cannot_store",
    "store_error",
    "record_timer",
    "validate_spec",
    "validate_languages",
    "EncodeBatch",
    "output_schema",
    "conform",
    "SAMPLES",
]


@dataclass(frozen=True)
class EncodeOptions:
    """What to do with each record: the parser kind/options, the coordinate spec and the limits.

    Parameters
    ----------
    kind : str or None
        The input kind; ``None`` takes each record's own kind.
    coords : str
        The coordinate spec (``"tree,lap:8"``).
    language : str, optional
        The code language(s).
    parser_options : tuple of (str, object) pairs, or a mapping
        More parser keyword arguments (a mapping is stored as sorted pairs).
    limits : Limits, optional
        Per-record limits.
    extra_parsers : tuple of (str, str) pairs, or a mapping
        More input kinds, ``(kind, "module:function")``.
    timeout_in_process : bool, optional
        Enforce ``limits.record_timeout`` with ``SIGALRM`` in the encoding thread.

    Examples
    --------
    >>> from structpos.limits import Limits
    >>> opts = EncodeOptions("json", "tree", limits=Limits(max_nodes=100)).validate()
    >>> opts.as_dict()["limits"]["max_nodes"]
    100
    >>> EncodeOptions("nosuch", "tree").validate()
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --kind: unknown input kind 'nosuch'; known kinds: ...
    """

    kind: str | None
    coords: str
    language: str | None = None
    parser_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    limits: Limits = DEFAULT_LIMITS
    """Per-record limits, passed to the parsers that take ``limits=``."""
    extra_parsers: tuple[tuple[str, str], ...] = ()
    """More input kinds, ``(kind, "module:function")``: imported by name in each worker process."""
    timeout_in_process: bool = False
    """Enforce ``limits.record_timeout`` with ``SIGALRM`` in the encoding thread (main thread only)."""

    def __post_init__(self) -> None:
        if isinstance(self.parser_options, Mapping):
            object.__setattr__(self, "parser_options", tuple(sorted(self.parser_options.items())))
        if isinstance(self.extra_parsers, Mapping):
            object.__setattr__(self, "extra_parsers", tuple(sorted(self.extra_parsers.items())))

    def validate(self) -> "EncodeOptions":
        """Fail fast on an unknown kind or coordinate family (before any record is read).

        Returns
        -------
        EncodeOptions
            ``self``.

        Raises
        ------
        SpecError
            An unknown kind, an ``extra_parsers`` target that does not import, or a bad coordinate spec.

        Examples
        --------
        >>> EncodeOptions("json", "tree").validate().kind
        'json'
        >>> EncodeOptions("json", "nosuch").validate()
        Traceback (most recent call last):
        ...
        structpos.exceptions.SpecError: ...unknown coordinate family 'nosuch'...
        """
        from ..parsers import PARSERS

        known = set(PARSERS) | {k for k, _ in self.extra_parsers}
        if self.kind is not None and self.kind not in known:
            raise SpecError(f"unknown input kind {self.kind!r}; known kinds: {', '.join(sorted(known))}", name="--kind")
        for _kind, target in self.extra_parsers:
            load_parser(target)
        validate_spec(self.coords)
        if self.language is not None:
            validate_languages(self.language)
        self._validate_parser_options(dict(self.extra_parsers))
        return self

    def _validate_parser_options(self, extra: dict[str, str]) -> None:
        """``--parser-opt`` keys the parser of ``kind`` takes, and a ``grammar`` that compiles."""
        from ..parsers import get_parser
        from .tokens import TOKENIZER_OPTION

        options = {k: v for k, v in self.parser_options if k != TOKENIZER_OPTION}
        if self.kind is None:
            return
        fn = load_parser(extra[self.kind]) if self.kind in extra else get_parser(self.kind)
        params = list(inspect.signature(fn).parameters.values())
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            known = {p.name for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
            known -= {"name", "limits"}
            for key in options:
                if key not in known:
                    raise SpecError(
                        f"{self.kind} parser has no option {key!r} (options: {', '.join(sorted(known))})",
                        name="--parser-opt",
                    )
            missing = [p.name for p in params[1:] if p.default is p.empty and p.kind is not p.VAR_POSITIONAL]
            missing = [m for m in missing if m not in options and m not in ("name", "limits")]
            if missing:
                raise SpecError(f"--kind {self.kind} needs {missing[0]}=...", name="--parser-opt")
        if self.kind == "grammar" and self.kind not in extra:
            _validate_grammar(options)

    def as_dict(self) -> dict:
        """What determines the output (kept in the manifest; a resume with other values is refused).

        Returns
        -------
        dict
            JSON-serializable: ``kind``, ``coords``, ``language``, ``parser_options``, ``limits``
            (and ``extra_parsers`` when set).

        Examples
        --------
        >>> d = EncodeOptions("json", "tree", parser_options={"max_depth": 3}).as_dict()
        >>> d["coords"], d["parser_options"]
        ('tree', [['max_depth', 3]])
        """
        return {
            "kind": self.kind,
            "coords": self.coords,
            "language": self.language,
            "parser_options": [list(kv) for kv in self.parser_options],
            "limits": _limits_dict(self.limits),
            **({"extra_parsers": [list(kv) for kv in self.extra_parsers]} if self.extra_parsers else {}),
        }


def validate_languages(language: str) -> list[str]:
    """Check ``--language`` (comma separated) before any record: each a known language or an installed grammar wheel.

    Parameters
    ----------
    language : str
        ``"python"``, ``"python,go"``, an alias (``"py"``) or ``<name>`` of a ``tree_sitter_<name>`` wheel.

    Returns
    -------
    list of str
        The names as given.

    Raises
    ------
    SpecError
        A name that is no language (naming ``--language`` and the known ones).

    Examples
    --------
    >>> validate_languages("python,go")
    ['python', 'go']
    >>> validate_languages("cobol")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --language: unknown language 'cobol'; known: python, javascript, java, go, rust, c, cpp (or <name> of an installed tree_sitter_<name> wheel)
    """
    import importlib.util

    from ..parsers.code import ALIASES, LANGUAGES

    names = [x.strip() for x in language.split(",") if x.strip()]
    if not names:
        raise SpecError(f"no language in {language!r}", name="--language")
    for name in names:
        canon = name.lower().replace("-", "_")
        canon = ALIASES.get(canon, canon)
        if canon in LANGUAGES:
            continue
        if canon.isidentifier() and importlib.util.find_spec(f"tree_sitter_{canon}") is not None:
            continue
        raise SpecError(
            f"unknown language {name!r}; known: {', '.join(LANGUAGES)} "
            "(or <name> of an installed tree_sitter_<name> wheel)",
            name="--language",
        )
    return names


def _validate_grammar(options: Mapping[str, Any]) -> None:
    """``--parser-opt grammar=...`` (with ``start``, ``parser``) compiles: checked once, up front."""
    from ..exceptions import StructposError
    from ..parsers.grammar import parse_grammar

    grammar = options.get("grammar")
    if not isinstance(grammar, str):
        raise SpecError(f"grammar must be lark grammar text, got {type(grammar).__name__}", name="--parser-opt grammar")
    try:
        # compiles (and caches) the grammar; the empty input itself may well be rejected
        start, parser = options.get("start", "start"), options.get("parser", "lalr")
        parse_grammar("", grammar, start=start, parser=parser, limits=Limits(record_timeout=None))
    except StructposError as e:
        if "bad grammar" in str(e) or isinstance(e, SpecError):
            raise SpecError(e.message, name="--parser-opt grammar") from None
    except Exception as e:  # e.g. a lark %import of a missing file, a bad type for start
        raise SpecError(f"bad grammar: {type(e).__name__}: {e}", name="--parser-opt grammar") from None


def load_parser(target: str):
    """The function named by ``"module:function"`` (a parser from outside structpos).

    Parameters
    ----------
    target : str
        ``"module:function"``; the module is imported.

    Returns
    -------
    callable

    Raises
    ------
    SpecError
        Not of the form ``module:function``, or the module or function cannot be found.

    Examples
    --------
    >>> load_parser("json:loads")("[1]")
    [1]
    """
    module, sep, name = target.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name) if sep else None
    except (ImportError, AttributeError) as e:
        raise SpecError(f"cannot load parser {target!r}: {e}", name="extra_parsers") from None
    if not callable(fn):
        raise SpecError(f"{target!r} is not 'module:function'", name="extra_parsers")
    return fn


def _limits_dict(limits: Limits) -> dict:
    # time and memory limits only decide which records fail, not what a row holds: not part of the options hash
    return {k: v for k, v in asdict(limits).items() if k not in ("record_timeout", "max_memory_bytes")}


def validate_spec(spec: str) -> list[tuple[str, str | None]]:
    """Check a ``--coords`` spec before any work starts (the coordinate registry's validators).

    Parameters
    ----------
    spec : str
        Comma-separated ``family[:argument]`` items.

    Returns
    -------
    list of tuple of (str, str or None)
        ``(family, argument)`` per item.

    Raises
    ------
    SpecError
        Naming ``--coords``, the spec item and the reason.

    Examples
    --------
    >>> validate_spec("tree,lap:2")
    [('tree', None), ('lap', '2')]
    >>> validate_spec("lap:abc")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --coords lap:abc: k must be an integer >= 1 (got 'abc')
    """
    from ..coords import parse_spec

    try:
        return parse_spec(spec)
    except SpecError as e:
        raise SpecError(f"--coords {e}") from None


_ACCEPTS: dict[str, bool] = {}


def _parser_accepts(kind: str, fn, arg: str) -> bool:
    key = f"{kind}:{arg}"
    if key not in _ACCEPTS:
        try:
            params = inspect.signature(fn).parameters
            _ACCEPTS[key] = arg in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            _ACCEPTS[key] = False
    return _ACCEPTS[key]


def _parse(
    payload: Any,
    kind: str,
    name: str,
    language: str | None,
    fmt: str | None,
    options: Mapping[str, Any],
    limits: Limits = DEFAULT_LIMITS,
    extra_parsers: Mapping[str, str] | None = None,
):
    """Call the parser of ``kind`` with the record's name, language and format hints.

    JSON objects (not text) given as ``json`` payloads are serialized, so spans index text; a
    ``graph`` payload that is a mapping is read as ``{"edge_index": [[src...], [dst...]], **opts}``.
    """
    from ..parsers import get_parser

    fn = load_parser(extra_parsers[kind]) if extra_parsers and kind in extra_parsers else get_parser(kind)
    kw = dict(options)
    if _parser_accepts(kind, fn, "name"):
        kw.setdefault("name", name)
    if language is not None and kind == "code":
        kw.setdefault("language", language)
    if fmt is not None and _parser_accepts(kind, fn, "format"):
        kw.setdefault("format", fmt)
    if limits is not DEFAULT_LIMITS and _parser_accepts(kind, fn, "limits"):
        kw.setdefault("limits", limits)
    if kind == "json" and not isinstance(payload, (str, bytes)):
        payload = json.dumps(payload)
    if kind == "graph" and isinstance(payload, Mapping):
        return _parse_graph_object(fn, payload, kw, name)
    return fn(payload, **kw)


def _parse_graph_object(fn, payload: Mapping, kw: dict, name: str):
    """A ``graph`` payload object ``{"edge_index": [[src...], [dst...]], **options}``: its keys are
    parser options, and everything wrong with it is a :class:`ParseError` naming the record (as
    ``parse(edge_index, "graph")`` raises)."""
    payload = dict(payload)
    if "edge_index" not in payload:
        raise ParseError(
            "a graph payload object needs an 'edge_index' entry "
            '(graph JSONL records: {"text": {"edge_index": [[src, ...], [dst, ...]], '
            '"num_nodes": n}})',
            name=name,
        )
    edge_index = payload.pop("edge_index")
    if isinstance(edge_index, (list, tuple)) and len(edge_index) == 0:
        edge_index = np.zeros((2, 0), dtype=np.int64)  # no edges: isolated nodes (num_nodes says how many)
    params = list(inspect.signature(fn).parameters.values())
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        options = {p.name for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        options -= {"name", "limits"}  # the record's own
        unknown = sorted(set(payload) - options)
        if unknown:
            known = ", ".join(["edge_index", *sorted(options)])
            raise ParseError(f"graph payload object: unknown key {unknown[0]!r} (known: {known})", name=name)
    try:
        return fn(edge_index, **{**payload, **kw})
    except (TypeError, OverflowError) as e:  # a key of the wrong type
        raise ParseError(f"graph payload object: {e}", name=name) from None


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
    from ..coords import compute, estimated_bytes
    from .tokens import TOKENIZER_OPTION, add_token_columns

    if limits.max_input_bytes is not None and isinstance(payload, (str, bytes)):
        check_limit(len(payload), limits.max_input_bytes, "max_input_bytes", "bytes of input", name=record_id)
    token_options = {k: v for k, v in (parser_options or {}).items() if k == TOKENIZER_OPTION}
    parser_options = {k: v for k, v in (parser_options or {}).items() if k != TOKENIZER_OPTION}
    out = _parse(payload, kind, record_id, language, format, parser_options, limits, extra_parsers)
    structures = out if isinstance(out, (list, tuple)) else [out]
    rows = []
    for k, s in enumerate(structures):
        rid = record_id
        if len(structures) > 1:
            sent_id = s.sentence.sent_id if getattr(s, "sentence", None) is not None else None
            rid = f"{record_id}#{sent_id if sent_id is not None else k}"
        check_limit(int(s.num_nodes), limits.max_nodes, "max_nodes", "nodes", name=rid)
        if coords and limits.max_memory_bytes is not None:  # a spec too large for this record fails before allocating
            need = estimated_bytes(coords, int(s.num_nodes))
            check_limit(need, limits.max_memory_bytes, "max_memory_bytes", "bytes of coordinates", name=rid)
        try:
            c = compute(s, coords) if coords else {}
        except Exception as e:
            e._structpos_stage = "coords"  # type: ignore[attr-defined]
            raise
        coord_cols: dict[str, np.ndarray] = {}
        for name, arr in c.items():
            arr = np.asarray(arr)
            if arr.ndim == 0 or arr.shape[0] != s.num_nodes:
                raise ValueError(f"coordinate {name!r} has shape {arr.shape}, expected {s.num_nodes} nodes first")
            if name in BASE_COLUMNS:
                base = getattr(s, name, None)
                if base is not None and np.array_equal(base, arr):
                    continue
                name = f"coord_{name}"
            coord_cols[name] = arr
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
        add_token_columns(rows[-1], s, token_options)  # --tokenizer: input_ids + per-token coordinates
    return rows


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


def _stage_of(exc: BaseException, stage: str) -> str:
    if isinstance(exc, MemoryError) or (isinstance(exc, LimitError) and exc.limit == "max_memory_bytes"):
        return "memory"
    if isinstance(exc, LimitError) and exc.limit == "record_timeout":
        return "timeout"
    return stage


@contextlib.contextmanager
def record_timer(seconds: float | None, name: str = ""):
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
    from ..parsers import get_parser

    extra = dict(options.extra_parsers)
    try:
        load_parser(extra[kind]) if kind in extra else get_parser(kind)
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
    stage = "parse"
    try:
        with record_timer(options.limits.record_timeout if options.timeout_in_process else None, rec.where):
            rows = encode_payload(
                rec.id,
                rec.payload,
                kind,
                options.coords,
                language=rec.language or options.language,
                format=rec.format,
                parser_options=dict(options.parser_options),
                limits=options.limits,
                extra_parsers=dict(options.extra_parsers),
            )
        return rows, None
    except RecursionError as e:  # deep input that slipped past a parser's own guard
        return [], error_entry(rec, "LimitError", f"input nested too deeply ({e})", stage)
    except Exception as e:  # one bad record must not stop the run; it is counted in errors
        stage = getattr(e, "_structpos_stage", stage)
        message = str(e) or repr(e)
        return [], error_entry(rec, type(e).__name__, message, _stage_of(e, stage), getattr(e, "position", None))


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


# Tiny valid inputs per kind, encoded once to learn the output schema (column names and types)
# so that every batch and shard has the same columns even when all of its records fail.
SAMPLES: dict[str, Any] = {
    "code": "def f(x):\n    return x\n",
    "json": '{"a": [1, {"b": null}]}',
    "xml": "<a><b>t</b><c/></a>",
    "yaml": "a:\n  - 1\n  - b: 2\n",
    "conllu": "# text = Hi there\n1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n2\tthere\tthere\tADV\t_\t_\t1\tadvmod\t_\t_\n\n",
    "table": "a,b\n1,2\n3,4\n",
    "document": "First sentence. Second one.\n\nA new paragraph.\n",
    "markdown": "# Title\n\nSome text.\n\n## Part\n\nMore.\n",
    "graph": {"edge_index": [[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]},
}

_SCHEMAS: dict[tuple[str | None, str], pa.Schema | None] = {}


def output_schema(options: EncodeOptions, kind: str | None = None) -> pa.Schema | None:
    """The schema of encoded rows for ``options`` (learned from :data:`SAMPLES`), or ``None``.

    ``None`` when the kind has no sample, or the sample does not encode (e.g. ``tree``
    coordinates asked of a table: then every record fails anyway).

    Parameters
    ----------
    options : EncodeOptions
        The options of the run.
    kind : str, optional
        The kind to learn it for (default: ``options.kind``).

    Returns
    -------
    pyarrow.Schema or None

    Examples
    --------
    >>> output_schema(EncodeOptions("json", "tree")).names[:3]
    ['id', 'kind', 'num_nodes']
    >>> output_schema(EncodeOptions(None, "tree")) is None
    True
    """
    kind = kind or options.kind
    key = (kind, json.dumps(options.as_dict(), sort_keys=True, default=repr))
    if key not in _SCHEMAS:
        schema = None
        if kind in SAMPLES:
            try:
                lang = (options.language or "python") if kind == "code" else None
                rows = encode_payload(
                    "sample",
                    SAMPLES[kind],
                    kind,
                    options.coords,
                    language=lang,
                    parser_options=dict(options.parser_options),
                )
                schema = rows_to_table(rows).schema
            except Exception:
                schema = None
        _SCHEMAS[key] = schema
    return _SCHEMAS[key]


def conform(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """``table`` with ``schema``'s columns first, in order and type (missing ones null); other
    columns (error columns, unexpected coordinates) follow unchanged.

    Parameters
    ----------
    table : pyarrow.Table
    schema : pyarrow.Schema or None
        ``None`` returns ``table`` as it is.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    pyarrow.ArrowInvalid
        A column that cannot be cast to the schema's type.

    Examples
    --------
    >>> import pyarrow as pa
    >>> schema = pa.schema([("id", pa.string()), ("n", pa.int64())])
    >>> conform(pa.table({"x": [1.5], "id": ["a"]}), schema).to_pydict()
    {'id': ['a'], 'n': [None], 'x': [1.5]}
    """
    if schema is None:
        return table
    cols, names = [], []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, type=f.type))
        names.append(f.name)
    for name in table.column_names:
        if name not in schema.names:
            cols.append(table.column(name))
            names.append(name)
    return pa.Table.from_arrays(cols, names=names)


def _columns(batch: Any) -> Mapping[str, Sequence]:
    if isinstance(batch, pa.Table):
        return batch.to_pydict()
    if hasattr(batch, "to_dict") and hasattr(batch, "columns"):  # pandas DataFrame
        return {c: list(batch[c]) for c in batch.columns}
    return batch


class EncodeBatch:
    """Picklable batch function: a batch of records in, a ``pyarrow.Table`` of rows out.

    Works as ``datasets.Dataset.map(EncodeBatch(...), batched=True, with_indices=True,
    remove_columns=...)`` and as Ray Data ``ds.map_batches(EncodeBatch(...), batch_format=...)``.
    The batch is a mapping column -> values (dict of lists or numpy arrays), a
    ``pyarrow.Table`` or a pandas DataFrame. ``text_column`` holds the payload; ``id_column``
    the record id (else the ``indices`` passed by HF, else the position in the batch).

    With ``keep_errors=True`` (the default) a record that fails becomes one row with null
    coordinates and its ``error_type``/``error`` set, so rows out >= records in; successful
    rows have null error columns. With ``keep_errors=False`` failed records are dropped.
    ``limits`` (:class:`~structpos.limits.Limits`) bounds each record as in ``structpos encode``
    (no per-record timeout or address-space limit here: those need the encode workers; a record
    whose coordinates alone would exceed ``limits.max_memory_bytes`` still fails before computing them).

    Parameters
    ----------
    kind : str or None
        The input kind; ``None`` takes it from ``kind_column``.
    coords : str
        The coordinate spec.
    text_column : str, optional
        The payload column.
    id_column : str, optional
        The record id column.
    kind_column : str, optional
        A column holding each record's kind.
    language : str, optional
        The code language.
    keep_errors : bool, optional
        Keep a failed record as a row with its error (default) or drop it.
    limits : Limits, optional
        Per-record limits.
    **parser_options
        More parser keyword arguments.

    Raises
    ------
    SpecError
        An unknown kind or a bad coordinate spec (at construction, before any batch).
    InputError
        A batch whose rows do not fit one Arrow table although each record's do (a record whose
        own rows cannot be stored is an error row of stage ``memory`` / ``write`` instead).

    Examples
    --------
    >>> fn = EncodeBatch("json", "tree")
    >>> out = fn({"text": ['{"a": 1}', "[1,"]})
    >>> out.column("id").to_pylist(), out.column("error_type").to_pylist()
    (['0', '1'], [None, 'ParseError'])
    """

    def __init__(
        self,
        kind: str | None,
        coords: str,
        *,
        text_column: str = "text",
        id_column: str | None = None,
        kind_column: str | None = None,
        language: str | None = None,
        keep_errors: bool = True,
        limits: Limits = DEFAULT_LIMITS,
        **parser_options: Any,
    ):
        self.options = EncodeOptions(kind, coords, language, tuple(sorted(parser_options.items())), limits).validate()
        self.text_column = text_column
        self.id_column = id_column
        self.kind_column = kind_column
        self.keep_errors = keep_errors

    def records(self, batch: Any, indices: Sequence[int] | None = None) -> list[Record]:
        """The batch's records: payload, id and kind per row (a null payload is a record that fails).

        Parameters
        ----------
        batch : mapping, pyarrow.Table or pandas.DataFrame
            The batch (see the class docstring).
        indices : sequence of int, optional
            The rows' indices in the dataset (HF ``with_indices=True``), the ids when there is no ``id_column``.

        Returns
        -------
        list of Record

        Raises
        ------
        KeyError
            The batch has no ``text_column``.

        Examples
        --------
        >>> [(r.id, r.payload) for r in EncodeBatch("json", "tree").records({"text": ["[1]", None]}, [7, 8])]
        [('7', '[1]'), ('8', None)]
        """
        cols = _columns(batch)
        if self.text_column not in cols:
            raise KeyError(f"batch has no column {self.text_column!r} (columns: {', '.join(cols)})")
        payloads = list(cols[self.text_column])
        if self.id_column is not None:
            ids = [str(x) for x in cols[self.id_column]]
        elif indices is not None:
            ids = [str(int(i)) for i in indices]
        else:
            ids = [str(i) for i in range(len(payloads))]
        kinds = [str(k) for k in cols[self.kind_column]] if self.kind_column else [None] * len(payloads)
        out = []
        for rid, payload, kind in zip(ids, payloads, kinds):
            payload = payload.item() if isinstance(payload, np.generic) else payload
            where = f"record {rid}"
            if payload is None:
                out.append(
                    Record(
                        rid, None, where, kind, None, ("ValueError", f"{where}: payload {self.text_column!r} is null")
                    )
                )
            else:
                out.append(Record(rid, payload, where, kind))
        return out

    def __call__(self, batch: Any, indices: Sequence[int] | None = None) -> pa.Table:
        records = self.records(batch, indices)
        per_record = [encode_one(rec, self.options) for rec in records]
        try:
            return self._table(records, per_record)
        except Exception as e:
            if not cannot_store(e):
                raise
            first = e
        for k, (ok, _err) in enumerate(per_record):  # rows that Arrow refuses: find the records at fault
            if ok:
                try:
                    rows_to_table(ok)
                except Exception as e:
                    if not cannot_store(e):
                        raise
                    per_record[k] = ([], store_error(records[k], e))
        try:
            return self._table(records, per_record)
        except Exception as e:
            if not cannot_store(e):
                raise
            raise InputError(
                f"the rows of a batch of {len(records)} records do not fit one Arrow table "
                f"({type(first).__name__}: {' '.join(str(first).split())[:200]}); pass a smaller batch size"
            ) from e

    def _table(self, records: list[Record], per_record: list[tuple[list[dict], dict | None]]) -> pa.Table:
        rows: list[dict] = []
        error_type: list[str | None] = []
        error: list[str | None] = []
        for rec, (ok, e) in zip(records, per_record):
            rows.extend(ok)
            error_type.extend([None] * len(ok))
            error.extend([None] * len(ok))
            if e is not None and self.keep_errors:
                rows.append(
                    {
                        "id": e["id"],
                        "kind": rec.kind or self.options.kind,
                        "num_nodes": None,
                        "labels": None,
                        "start": None,
                        "end": None,
                        "parent": None,
                        "coords": {},
                    }
                )
                error_type.append(e["error_type"])
                error.append(e["message"])
        schema = output_schema(self.options)
        if not self.keep_errors:
            return conform(rows_to_table(rows), schema)
        return conform(rows_to_table(rows, {"error_type": error_type, "error": error}), schema)

    def __repr__(self) -> str:
        return f"EncodeBatch({self.options!r}, text_column={self.text_column!r}, id_column={self.id_column!r})"
