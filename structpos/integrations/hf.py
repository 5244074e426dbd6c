"""Hugging Face ``datasets`` drop-in: ``encode_dataset(ds, kind, coords)``.

Runs the same picklable :class:`~structpos.pipeline.EncodeBatch` that the CLI's workers run,
through ``Dataset.map(batched=True, num_proc=N)``: ``num_proc`` worker processes each get
batches of rows; the input columns are replaced by the output columns ``id, kind, num_nodes,
labels, start, end, parent``, one list column per coordinate, and ``error_type``/``error``
(null for rows that encoded; a failed record keeps one row with null coordinates, so no
record disappears silently). Without an ``id_column`` the id is the dataset row index.

An ``IterableDataset`` (streaming) is encoded lazily, batch by batch, in this process (one that
declares no features is first read for one row, to learn the input columns to replace). The
options and the columns they name are checked before any row is read: a misspelt column, a
text column declared as numbers (``int64``, ``float64``, ``bool``, a ``ClassLabel``, ...) or a
missing kind is one :class:`~structpos.exceptions.InputError` /
:class:`~structpos.exceptions.SpecError`, not an error on every row. A row whose payload is null,
a number, a boolean or a date (a stream that declares no types, a null in a string column) is
that row's ``InputError`` (:func:`~structpos.pipeline.payloads.payload_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..encoders._checks import check_count, check_flag
from ..exceptions import InputError, SpecError
from ..limits import DEFAULT_LIMITS, Limits
from ..pipeline.adapters import EncodeBatch

__all__ = ["encode_dataset", "EncodeBatch"]


def _limits(value: Any) -> Limits:
    """``limits=`` as a :class:`~structpos.limits.Limits`: one as is, a mapping as overrides of the defaults."""
    if isinstance(value, Limits):
        return value
    if isinstance(value, Mapping):
        return DEFAULT_LIMITS.with_overrides(dict(value))
    raise SpecError(
        f"limits must be a structpos.limits.Limits or a mapping such as {{'max_nodes': 1000}}, got {value!r}"
    )


def _check_columns(dataset: Any, options: Mapping[str, Any]) -> None:
    """Every column the options name is in ``dataset`` (when the dataset knows its columns)."""
    columns = getattr(dataset, "column_names", None)
    if columns is None:  # a streaming dataset without features: checked on each batch instead
        return
    for option in ("text_column", "id_column", "kind_column"):
        name = options.get(option, "text" if option == "text_column" else None)
        if name is not None and name not in columns:
            raise InputError(
                f"the dataset has no column {name!r} ({option}); its columns: {', '.join(map(str, columns)) or 'none'}"
            )


_TEXT_DTYPES = frozenset({"string", "large_string", "string_view", "binary", "large_binary", "binary_view"})
"""``datasets.Value`` dtypes of text and bytes (``null``, a column of nulls only, fails row by row instead)."""

_NOT_TEXT_FEATURES = ("ClassLabel", "Image", "Audio", "Video", "Pdf", "Nifti")
"""``datasets`` feature types that hold no text or bytes (class ids, decoded media)."""


def _not_text_type(feature: Any) -> str | None:
    """The type of a column feature whose values no input kind parses (``"int64"``, ``"ClassLabel"``), else ``None``.

    Lists, structs and ``Json`` pass: the objects of the ``json``, ``graph`` and ``table`` kinds.
    """
    import datasets

    if isinstance(feature, datasets.Value):
        return None if feature.dtype in _TEXT_DTYPES or feature.dtype == "null" else str(feature.dtype)
    others = tuple(t for t in (getattr(datasets, n, None) for n in _NOT_TEXT_FEATURES) if isinstance(t, type))
    return type(feature).__name__ if isinstance(feature, others) else None


def _check_text_feature(dataset: Any, text_column: str) -> None:
    """The ``text_column`` is not declared as numbers, booleans, dates or class labels (when the dataset declares it)."""
    import datasets

    features = getattr(dataset, "features", None)
    if not features or text_column not in features:  # a stream without features: checked on each row instead
        return
    found = _not_text_type(features[text_column])
    if found is not None:
        texts = [str(n) for n, f in features.items() if isinstance(f, datasets.Value) and f.dtype in _TEXT_DTYPES]
        raise InputError(
            f"the dataset's column {text_column!r} (text_column) is of type {found}, not text or bytes; "
            f"its text or bytes columns: {', '.join(texts) or 'none'}"
        )


class _StreamingBatch:
    """:class:`EncodeBatch` for ``IterableDataset.map``, which takes dicts of lists, not Arrow tables.

    Also checks the named columns on each batch when the stream did not declare its columns.
    """

    def __init__(self, fn: EncodeBatch):
        self.fn = fn

    def __call__(self, batch: Mapping[str, Sequence], indices: Sequence[int]) -> dict:
        for name in (self.fn.text_column, self.fn.id_column, self.fn.kind_column):
            if name is not None and name not in batch:
                raise InputError(f"the dataset has no column {name!r}; its columns: {', '.join(map(str, batch))}")
        return self.fn(batch, indices).to_pydict()


def encode_dataset(
    dataset: Any,
    kind: str | None,
    coords: str,
    *,
    batch_size: int = 64,
    num_proc: int | None = None,
    **options: Any,
):
    """``dataset.map(EncodeBatch(kind, coords, **options), batched=True, with_indices=True, num_proc=num_proc)``.

    Parameters
    ----------
    dataset : datasets.Dataset or datasets.IterableDataset
        The input rows (one split: pass ``dataset_dict["train"]``, not the ``DatasetDict``).
    kind : str or None
        The input kind of every row, or ``None`` with a ``kind_column``.
    coords : str
        The coordinate spec.
    batch_size : int
        Rows per ``map`` batch (an integer ≥ 1).
    num_proc : int, optional
        Worker processes (``None``: this process; an ``IterableDataset`` always runs here).
    **options
        The options of :class:`~structpos.pipeline.EncodeBatch` (``text_column``, ``id_column``,
        ``kind_column``, ``language``, ``keep_errors``, ``limits``) and parser keyword arguments.
        ``limits`` is a :class:`~structpos.limits.Limits` or a mapping of its fields
        (``{"max_nodes": 1000}``, overriding the defaults).

    Returns
    -------
    datasets.Dataset or datasets.IterableDataset
        One row per encoded structure (and, with ``keep_errors``, one per failed record).

    Raises
    ------
    SpecError
        An unknown kind or a bad coordinate spec, no ``kind`` and no ``kind_column``, bad
        ``limits``, ``batch_size``, ``num_proc`` or ``keep_errors``: before any row is read.
    InputError
        ``dataset`` is not a ``datasets.Dataset`` / ``IterableDataset`` (a ``DatasetDict``: pass
        one split), or lacks the ``text_column``, ``id_column`` or ``kind_column``, or its
        features declare the ``text_column`` as numbers, booleans, dates, a ``ClassLabel`` or
        media (``Value("int64")``, ``Value("float64")``, ...): before any row is read. Lists and
        structs are read (the ``json``, ``graph`` and ``table`` kinds take them).

    Notes
    -----
    A row is never encoded from a payload that no kind parses: a null (a ``None`` in a string
    column), a number, a boolean or a date (a stream that declares no features) makes that row
    fail with an ``InputError`` naming the record and the value's type; it is kept as an error
    row, or dropped with ``keep_errors=False`` like every failed record. ``bytes`` are parsed as
    text is.

    Examples
    --------
    A failed record keeps its row, with the error instead of coordinates:

    >>> import datasets
    >>> ds = datasets.Dataset.from_dict({"text": ['{"a": 1}', "[1, 2", "[]"]})
    >>> out = encode_dataset(ds, "json", "tree")
    >>> list(out["num_nodes"]), list(out["depth"]), list(out["error_type"])
    ([3, None, 1], [[0, 1, 2], None, [0]], [None, 'ParseError', None])
    >>> encode_dataset(ds, "json", "tree", text_column="body")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: the dataset has no column 'body' (text_column); its columns: text
    >>> encode_dataset(datasets.DatasetDict({"train": ds}), "json", "tree")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: encode_dataset takes one split, not a DatasetDict: pass dataset['train'] (splits: train)

    A column of numbers is not a column of documents (``json`` would read ``1`` as the document
    ``1``); a null payload is its row's error:

    >>> encode_dataset(datasets.Dataset.from_dict({"text": [1, 2], "body": ["[1]", "[]"]}), "json", "tree")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: the dataset's column 'text' (text_column) is of type int64, not text or bytes; its text or bytes columns: body
    >>> list(encode_dataset(datasets.Dataset.from_dict({"text": ["[1]", None]}), "json", "tree")["error"])
    [None, "record 1: payload 'text' is null"]
    """
    import datasets

    if isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        raise InputError(
            f"encode_dataset takes one split, not a {type(dataset).__name__}: "
            f"pass dataset[{next(iter(dataset), 'train')!r}] (splits: {', '.join(map(str, dataset))})"
        )
    streaming = isinstance(dataset, datasets.IterableDataset)
    if not streaming and not isinstance(dataset, datasets.Dataset):
        raise InputError(
            f"encode_dataset takes a datasets.Dataset or datasets.IterableDataset, got {type(dataset).__name__} "
            "(build one with datasets.Dataset.from_dict / from_list)"
        )
    batch_size = check_count(batch_size, "batch_size", maximum=None)
    if num_proc is not None:
        num_proc = check_count(num_proc, "num_proc")
        if streaming:
            raise SpecError("an IterableDataset is encoded in this process: pass num_proc=None")
    if kind is None and options.get("kind_column") is None:
        raise SpecError("no input kind: pass kind (e.g. 'json') or a kind_column naming each row's kind")
    if "limits" in options:
        options["limits"] = _limits(options["limits"])
    if "keep_errors" in options:
        options["keep_errors"] = check_flag(options["keep_errors"], "keep_errors")
    fn = EncodeBatch(kind, coords, **options)  # the kind, spec and parser options: SpecError here
    _check_columns(dataset, options)
    _check_text_feature(dataset, fn.text_column)
    columns = dataset.column_names
    if streaming and columns is None:  # a stream that declares nothing: its columns from its first row,
        first = next(iter(dataset.take(1)), None)  # else they would stay beside the output columns
        columns = [] if first is None else list(first)
    if streaming:  # the output columns' types from an empty batch, so that the stream declares them
        empty: dict[str, list] = {
            name: [] for name in (fn.text_column, fn.id_column, fn.kind_column) if name is not None
        }
        features = datasets.Features.from_arrow_schema(fn(empty, []).schema)
        return dataset.map(
            _StreamingBatch(fn),
            batched=True,
            batch_size=batch_size,
            with_indices=True,
            remove_columns=columns,
            features=features,
        )
    return dataset.map(
        fn,
        batched=True,
        batch_size=batch_size,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=list(columns),
        desc="structpos encode",
    )
