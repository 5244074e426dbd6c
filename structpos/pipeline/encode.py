"""Encoding records: parse -> coordinates -> rows, and the picklable batch function.

:func:`encode_records` is the one piece of work every engine runs (the CLI's shards, the
multiprocessing pool, Ray tasks, HF ``datasets.map`` and Ray Data ``map_batches`` through
:class:`EncodeBatch`). For each record it either produces rows or one error entry, never
both and never neither, so *records in = records encoded + records in errors*.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from .arrow import BASE_COLUMNS, rows_to_table
from .records import Record

__all__ = ["EncodeOptions", "encode_payload", "encode_records", "EncodeBatch", "output_schema", "conform", "SAMPLES"]


@dataclass(frozen=True)
class EncodeOptions:
    """What to do with each record: the parser kind/options and the coordinate spec."""

    kind: str | None
    coords: str
    language: str | None = None
    parser_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if isinstance(self.parser_options, Mapping):
            object.__setattr__(self, "parser_options", tuple(sorted(self.parser_options.items())))

    def validate(self) -> "EncodeOptions":
        """Fail fast on an unknown kind or coordinate family (before any record is read)."""
        from .. import coords as coords_mod
        from ..parsers import PARSERS

        if self.kind is not None and self.kind not in PARSERS:
            raise ValueError(f"unknown input kind {self.kind!r}; known kinds: {', '.join(sorted(PARSERS))}")
        coords_mod.parse_spec(self.coords)
        return self

    def as_dict(self) -> dict:
        return {"kind": self.kind, "coords": self.coords, "language": self.language, "parser_options": [list(kv) for kv in self.parser_options]}


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


def _parse(payload: Any, kind: str, name: str, language: str | None, fmt: str | None, options: Mapping[str, Any]):
    """Call the parser of ``kind`` with the record's name, language and format hints.

    JSON objects (not text) given as ``json`` payloads are serialized, so spans index text; a
    ``graph`` payload that is a mapping is read as ``{"edge_index": [[src...], [dst...]], **opts}``.
    """
    from ..parsers import get_parser

    fn = get_parser(kind)
    kw = dict(options)
    if _parser_accepts(kind, fn, "name"):
        kw.setdefault("name", name)
    if language is not None and kind == "code":
        kw.setdefault("language", language)
    if fmt is not None and _parser_accepts(kind, fn, "format"):
        kw.setdefault("format", fmt)
    if kind == "json" and not isinstance(payload, (str, bytes)):
        payload = json.dumps(payload)
    if kind == "graph" and isinstance(payload, Mapping):
        payload = dict(payload)
        if "edge_index" not in payload:
            raise ValueError("a graph payload object needs an 'edge_index' entry")
        edge_index = np.asarray(payload.pop("edge_index"), dtype=np.int64).reshape(2, -1)
        kw = {**payload, **kw}
        payload = edge_index
    return fn(payload, **kw)


def encode_payload(
    record_id: str,
    payload: Any,
    kind: str,
    coords: str,
    *,
    language: str | None = None,
    format: str | None = None,
    parser_options: Mapping[str, Any] | None = None,
) -> list[dict]:
    """Parse ``payload`` as ``kind`` and compute ``coords``: one row per resulting Structure.

    A row is a dict with ``id``, ``kind``, ``num_nodes``, ``labels``, ``start``, ``end``,
    ``parent`` (``None`` unless a tree) and ``coords`` (family output name -> per-node array).
    A parser returning several structures (e.g. a CoNLL-U text with several sentences) gives
    rows ``id#<sent_id>`` (or ``id#<k>``). Coordinates whose name clashes with a base column
    are dropped when equal to it (``tree`` returns ``parent``) and otherwise prefixed ``coord_``.
    """
    from ..coords import compute
    from .tokens import TOKENIZER_OPTION, add_token_columns

    token_options = {k: v for k, v in (parser_options or {}).items() if k == TOKENIZER_OPTION}
    parser_options = {k: v for k, v in (parser_options or {}).items() if k != TOKENIZER_OPTION}
    out = _parse(payload, kind, record_id, language, format, parser_options)
    structures = out if isinstance(out, (list, tuple)) else [out]
    rows = []
    for k, s in enumerate(structures):
        rid = record_id
        if len(structures) > 1:
            rid = f"{record_id}#{s.meta.get('sent_id', k) if isinstance(getattr(s, 'meta', None), dict) else k}"
        c = compute(s, coords) if coords else {}
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


def _error(record: Record, exc_type: str, message: str) -> dict:
    if record.where not in message:
        message = f"{record.where} (id {record.id!r}): {message}"
    return {"id": record.id, "position": record.where, "error_type": exc_type, "message": message}


def encode_records(records: Iterable[Record], options: EncodeOptions) -> tuple[list[dict], list[dict], int]:
    """Encode ``records``: ``(rows, errors, number of records)``.

    Every record lands in exactly one place: its rows, or one entry of ``errors`` (``id``,
    ``position``, ``error_type``, ``message`` naming the input and position). Parser and
    coordinate failures of one record never stop the others.
    """
    rows: list[dict] = []
    errors: list[dict] = []
    n = 0
    opts = dict(options.parser_options)
    for rec in records:
        n += 1
        if rec.read_error is not None:
            errors.append(_error(rec, *rec.read_error))
            continue
        kind = rec.kind or options.kind
        if kind is None:
            errors.append(_error(rec, "ValueError", "no input kind (pass --kind)"))
            continue
        try:
            rows.extend(encode_payload(rec.id, rec.payload, kind, options.coords, language=rec.language or options.language,
                                       format=rec.format, parser_options=opts))
        except Exception as e:  # one bad record must not stop the run; it is counted in errors
            errors.append(_error(rec, type(e).__name__, str(e) or repr(e)))
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
    """
    kind = kind or options.kind
    key = (kind, json.dumps(options.as_dict(), sort_keys=True, default=repr))
    if key not in _SCHEMAS:
        schema = None
        if kind in SAMPLES:
            try:
                lang = (options.language or "python") if kind == "code" else None
                rows = encode_payload("sample", SAMPLES[kind], kind, options.coords, language=lang, parser_options=dict(options.parser_options))
                schema = rows_to_table(rows).schema
            except Exception:
                schema = None
        _SCHEMAS[key] = schema
    return _SCHEMAS[key]


def conform(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """``table`` with ``schema``'s columns first, in order and type (missing ones null); other
    columns (error columns, unexpected coordinates) follow unchanged."""
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
        **parser_options: Any,
    ):
        self.options = EncodeOptions(kind, coords, language, tuple(sorted(parser_options.items()))).validate()
        self.text_column = text_column
        self.id_column = id_column
        self.kind_column = kind_column
        self.keep_errors = keep_errors

    def records(self, batch: Any, indices: Sequence[int] | None = None) -> list[Record]:
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
                out.append(Record(rid, None, where, kind, None, ("ValueError", f"{where}: payload {self.text_column!r} is null")))
            else:
                out.append(Record(rid, payload, where, kind))
        return out

    def __call__(self, batch: Any, indices: Sequence[int] | None = None) -> pa.Table:
        rows: list[dict] = []
        error_type: list[str | None] = []
        error: list[str | None] = []
        for rec in self.records(batch, indices):
            ok, errs, _ = encode_records([rec], self.options)
            rows.extend(ok)
            error_type.extend([None] * len(ok))
            error.extend([None] * len(ok))
            if errs and self.keep_errors:
                e = errs[0]
                rows.append({"id": e["id"], "kind": rec.kind or self.options.kind, "num_nodes": None, "labels": None,
                             "start": None, "end": None, "parent": None, "coords": {}})
                error_type.append(e["error_type"])
                error.append(e["message"])
        schema = output_schema(self.options)
        if not self.keep_errors:
            return conform(rows_to_table(rows), schema)
        return conform(rows_to_table(rows, {"error_type": error_type, "error": error}), schema)

    def __repr__(self) -> str:
        return f"EncodeBatch({self.options!r}, text_column={self.text_column!r}, id_column={self.id_column!r})"
