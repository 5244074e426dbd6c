"""Batches of token-level structural examples for a torch ``DataLoader`` and the HF ``Trainer``.

Input examples are dicts as written by ``structpos encode --tokenizer`` (one Parquet row:
``input_ids`` and per-token ``tok_<name>`` columns, see :mod:`structpos.pipeline.tokens`) and
read back by :class:`ShardDataset`, or built on the fly. :class:`StructuralCollator` gives

* ``mode="pad"``: ``input_ids`` ``(B, L)`` (``pad_token_id``), ``attention_mask`` ``(B, L)``,
  ``position_ids`` ``(B, L, A)`` (axis 0 the token index when ``index_axis``, then the named
  coordinate columns; 0 on padding), ``labels`` (``-100`` on padding), and each ``extra``
  column ``(B, L, …)`` padded with ``-1`` (bias inputs: ``token_node``, ``tok_root_path``, …).
  Tokens that cover no node (BOS, special tokens) carry ``-1`` in their coordinate columns and
  keep it: a patched model reads it as the coordinate ``-1`` (see
  :mod:`structpos.integrations.transformers`); map it before collating to place them elsewhere;
* ``mode="pack"``: the same tokens concatenated into one row (``(1, T)``, ``(1, T, A)``) with
  ``cu_seqlens`` ``(B + 1,)``; ``labels`` is ``-100`` at each document's first token so no
  token is predicted across a boundary. Use a document mask
  (:func:`structpos.integrations.flex.document_mask_mod`) to keep attention inside documents; a
  patched HF model does so with ``attn_implementation="structpos_flex"`` and refuses
  ``cu_seqlens`` under any other attention.

Both forms come from one mechanism, :mod:`structpos.encoders.batching`: the columns are packed
``(T, …)`` with ``cu_seqlens_from_lengths``, and the padded form is ``unpack_packed`` of them
(so ``pack_padded(padded, attention_mask)`` gives the packed tokens back).

``position_ids`` of shape ``(B, L, A)`` is what a model patched by
:func:`structpos.integrations.transformers.install_structural_rope` takes, so the output goes
straight into ``model(**batch)``; keep ``extra`` empty for the HF ``Trainer`` (it passes every key
to the model).

Every column goes through one check, :func:`as_numbers`: ``input_ids`` must hold integers in
the int64 range, coordinate and extra columns integers or (finite, for coordinates) reals.
Nothing is rounded, wrapped or dropped: a float token id, a ``None`` entry, a string, a
``uint64`` beyond int64 or a column whose length differs from ``input_ids`` is an error naming
the example and the column.

Examples
--------
>>> collate = StructuralCollator(["depth"], pad_token_id=0)
>>> batch = collate([{"input_ids": [5, 6, 7], "depth": [0, 1, 1]}, {"input_ids": [8], "depth": [0]}])
>>> batch["position_ids"][0].tolist()
[[0, 0], [1, 1], [2, 1]]
>>> batch["attention_mask"].tolist()
[[1, 1, 1], [1, 0, 0]]
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ..encoders._checks import check_count, check_flag
from ..encoders.batching import cu_seqlens_from_lengths, unpack_packed
from ..exceptions import InputError, ShapeError, SpecError

__all__ = ["ShardDataset", "StructuralCollator", "as_numbers"]

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min
_SAFE_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)

#: Keys of the collator's output: an ``extra`` column of one of these names would be overwritten.
_OUTPUT_KEYS = ("input_ids", "position_ids", "attention_mask", "labels", "cu_seqlens")


def _not_numbers(a: np.ndarray) -> list:
    """``[v]`` for the first entry of an object array that is not a real number (``None``, a string, ...), else ``[]``."""
    for v in a.reshape(-1):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return [v]
    return []


def as_numbers(value: Any, what: str, *, integers: bool = False, finite: bool = False) -> torch.Tensor:
    """``value`` as a tensor of numbers, checked without rounding, wrapping or dropping anything.

    Integers (of any width, signed or unsigned) become int64; reals stay floating unless
    ``integers`` asks for int64, which they then give only when every value is a whole number.

    Parameters
    ----------
    value : array_like
        A list, NumPy array or tensor of numbers.
    what : str
        What it is, for the messages (``"example 3: column 'depth'"``).
    integers : bool
        Require whole numbers in the int64 range and return int64 (token ids, integer
        coordinates); ``2.0`` is read as ``2``, ``1.7`` is an error.
    finite : bool
        Refuse ``nan`` and ``±inf``.

    Returns
    -------
    torch.Tensor
        int64, or (without ``integers``) the floating dtype of ``value``.

    Raises
    ------
    InputError
        ``None``, strings, booleans, complex numbers or other non-numbers.
    ShapeError
        A ragged nested list, a non-finite value (``finite``), a non-whole value
        (``integers``), an integer outside the int64 range.

    Examples
    --------
    >>> as_numbers([1, 2.0], "ids", integers=True)
    tensor([1, 2])
    >>> as_numbers([0.5, 1], "row").dtype
    torch.float64
    >>> as_numbers([1, 1.7], "ids", integers=True)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: ids must hold whole numbers; given 1.7 at flat index 1
    >>> as_numbers([0, None], "column 'depth'")
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: column 'depth' must hold numbers; given None
    >>> as_numbers(np.array([2**63 + 5], dtype=np.uint64), "depth")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: depth holds 9223372036854775813, outside the int64 range
    """
    if value is None or isinstance(value, (str, bytes)):
        raise InputError(f"{what} must hold numbers; given {value!r}")
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.dtype == torch.bool or t.is_complex():
            raise InputError(f"{what} must hold numbers; given a {t.dtype} tensor")
        if not t.is_floating_point() and t.dtype not in _SAFE_INTS:  # wide unsigned: range-checked as NumPy
            return as_numbers(t.cpu().numpy(), what, integers=integers, finite=finite).to(t.device)
    else:
        try:
            a = np.asarray(value)
        except (ValueError, TypeError, OverflowError) as e:
            raise ShapeError(
                f"{what} must be a rectangular array of numbers ({' '.join(str(e).split())[:120]})"
            ) from None
        if a.dtype.kind == "O":
            bad = _not_numbers(a)
            if bad:
                raise InputError(f"{what} must hold numbers; given {bad[0]!r}")
            # real numbers NumPy keeps as objects: ints beyond 64 bits, or other types (Fraction, ...)
            big = [int(v) for v in a.reshape(-1) if isinstance(v, int) and not _INT64_MIN <= v <= _INT64_MAX]
            if big:
                raise ShapeError(f"{what} holds {big[0]}, outside the int64 range")
            raise InputError(f"{what} must hold int or float numbers; given {type(a.reshape(-1)[0]).__name__} values")
        if a.dtype.kind not in "iuf":
            given = {"b": "booleans", "U": "strings", "S": "bytes", "c": "complex numbers"}.get(
                a.dtype.kind, str(a.dtype)
            )
            given += f" ({a.reshape(-1)[0].item()!r}, ...)" if a.size else ""
            raise InputError(f"{what} must hold numbers; given {given}")
        if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > _INT64_MAX:
            raise ShapeError(f"{what} holds {int(a.max())}, outside the int64 range")
        t = torch.as_tensor(a.astype(np.int64, copy=False) if a.dtype.kind in "iu" else a)
    if t.is_floating_point():
        bad_at = ~torch.isfinite(t)
        if (finite or integers) and bool(bad_at.any()):
            raise ShapeError(f"{what} has non-finite values ({t.reshape(-1)[bad_at.reshape(-1)][0].item()})")
        if integers:
            frac = t != torch.trunc(t)
            if bool(frac.any()):
                at = int(frac.reshape(-1).nonzero()[0])
                raise ShapeError(
                    f"{what} must hold whole numbers; given {t.reshape(-1)[at].item()!r} at flat index {at}"
                )
            wide = t.to(torch.float64)
            if t.numel() and bool(((wide < float(_INT64_MIN)) | (wide >= 2.0**63)).any()):
                raise ShapeError(f"{what} holds values outside the int64 range")
            t = t.to(torch.int64)
    else:
        t = t.to(torch.int64)
    return t


class ShardDataset(torch.utils.data.Dataset):
    """Map-style dataset over the ``part-*.parquet`` shards of an ``encode`` output directory.

    Parameters
    ----------
    path : str or path
        The output directory (or one Parquet file).
    columns : sequence of str, optional
        Columns to read (default: all).

    Raises
    ------
    InputError
        ``path`` does not exist, a shard is not a readable Parquet file (names the file), or a
        requested column is not in the shards (names it and the columns there).
    SpecError
        A directory without ``part-*.parquet`` shards.

    Examples
    --------
    Rows of failed records (a non-null ``error``) are left out; an item is one row as a dict:

    >>> import os, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> out = tempfile.mkdtemp()
    >>> rows = pa.table({"input_ids": [[5, 6], [7]], "error": [None, "bad json"]})
    >>> pq.write_table(rows, os.path.join(out, "part-00000.parquet"))
    >>> ds = ShardDataset(out)
    >>> len(ds), ds[0]
    (1, {'input_ids': [5, 6], 'error': None})
    >>> ShardDataset(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: ...: no part-*.parquet shards here
    >>> ShardDataset(out, columns=["tok_depth"])
    Traceback (most recent call last):
    ...
    structpos.exceptions.InputError: ...: no column 'tok_depth' in the shards (columns: input_ids, error)
    """

    def __init__(self, path: str | os.PathLike, columns: Sequence[str] | None = None):
        import pyarrow as pa
        import pyarrow.parquet as pq

        p = Path(path)
        if not p.exists():
            raise InputError("no such file or directory", name=str(path))
        files = sorted(p.glob("part-*.parquet")) if p.is_dir() else [p]
        if not files:
            raise SpecError("no part-*.parquet shards here", name=str(path))
        if isinstance(columns, str):
            raise SpecError(f"columns must be a sequence of column names, not the string {columns!r}")
        schemas = []
        for f in files:  # each footer up front, so that a bad file is named
            try:
                schemas.append(pq.read_schema(str(f)))
            except (pa.ArrowException, OSError) as e:
                raise InputError(
                    f"not a readable Parquet file ({' '.join(str(e).split())[:200]})", name=str(f)
                ) from None
        for c in columns or ():
            if c not in schemas[0].names:
                raise InputError(
                    f"no column {c!r} in the shards (columns: {', '.join(schemas[0].names)})", name=str(path)
                )
        try:
            self.table = pq.read_table([str(f) for f in files], columns=list(columns) if columns else None)
        except (pa.ArrowException, OSError) as e:  # shards of different schemas, a file truncated after its footer
            raise InputError(f"cannot read the shards ({' '.join(str(e).split())[:200]})", name=str(path)) from None
        if "error" in self.table.column_names:  # rows of failed records carry no tokens
            import pyarrow.compute as pc

            self.table = self.table.filter(pc.is_null(self.table.column("error")))

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i: int) -> dict:
        n = self.table.num_rows
        j = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(f"ShardDataset index {i} out of range for {n} rows")
        return {k: v[0] for k, v in self.table.slice(j, 1).to_pydict().items()}


class StructuralCollator:
    """Collate examples into padded or packed structural batches (see the module docstring).

    Parameters
    ----------
    coords : sequence of str
        Per-token coordinate columns, one position axis each, in axis order.
    pad_token_id : int
        Padding id (an integer ≥ 0).
    mode : {"pad", "pack"}
        Padded ``(B, L)`` or packed ``(1, T)`` with ``cu_seqlens``.
    index_axis : bool
        Prepend the token index (within each example) as axis 0.
    extra : sequence of str
        Further per-token columns to pad (``-1``) or concatenate, e.g. bias inputs.
    labels : bool
        Add causal-LM ``labels``.
    max_length : int, optional
        Truncate every example to this many tokens (an integer ≥ 1; ``None``: no truncation).
        The columns' lengths are checked against the whole ``input_ids`` first.
    pad_to_multiple : int, optional
        Round the padded length up to a multiple (tensor-core / block sizes; an integer ≥ 1,
        ``None`` meaning 1).

    Raises
    ------
    SpecError
        (at construction) An unknown ``mode``, no position axis at all (no ``coords`` and no
        ``index_axis``), ``coords``/``extra`` given as one string, an ``extra`` column named
        like an output key, ``pad_token_id``, ``max_length`` or ``pad_to_multiple`` not an
        integer in range, a flag that is not a bool.
    InputError
        (when called) An example without one of the columns, a column holding non-numbers
        (``None``, strings, booleans).
    ShapeError
        (when called) A coordinate or extra column whose length differs from ``input_ids``
        (names the example and the column), ``input_ids`` that are not a 1-D list of int64
        integers, an extra column whose per-token shape differs between examples, a
        non-finite real coordinate, an empty batch.

    Examples
    --------
    Packed: one row, ``cu_seqlens`` marking the documents, no label on a document's first
    token (nothing may be predicted across the boundary):

    >>> collate = StructuralCollator(["depth"], mode="pack")
    >>> batch = collate([{"input_ids": [5, 6, 7], "depth": [0, 1, 1]}, {"input_ids": [8, 9], "depth": [0, 1]}])
    >>> batch["cu_seqlens"].tolist(), batch["labels"].tolist()
    ([0, 3, 5], [[-100, 6, 7, -100, 9]])
    >>> batch["position_ids"][0, :, 0].tolist()  # the index axis restarts per document
    [0, 1, 2, 0, 1]
    >>> StructuralCollator(["depth"])([{"input_ids": [5, 6], "depth": [0]}])
    Traceback (most recent call last):
    ...
    structpos.exceptions.ShapeError: example 0: column 'depth' must have shape (2,) like input_ids; given (1)
    >>> StructuralCollator(["depth"], max_length=0)
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: max_length must be an integer ≥ 1, got 0
    """

    def __init__(
        self,
        coords: Sequence[str],
        pad_token_id: int = 0,
        mode: Literal["pad", "pack"] = "pad",
        *,
        index_axis: bool = True,
        extra: Sequence[str] = (),
        labels: bool = True,
        max_length: int | None = None,
        pad_to_multiple: int | None = 1,
    ):
        if mode not in ("pad", "pack"):
            raise SpecError(f"mode must be 'pad' or 'pack', got {mode!r}")
        for what, names in (("coords", coords), ("extra", extra)):
            if isinstance(names, str) or not all(isinstance(c, str) for c in names):
                raise SpecError(f"{what} must be a sequence of column names, got {names!r}")
        clash = [c for c in extra if c in _OUTPUT_KEYS]
        if clash:
            raise SpecError(f"extra column {clash[0]!r} would be overwritten by the output key of that name")
        index_axis, labels = check_flag(index_axis, "index_axis"), check_flag(labels, "labels")
        if not coords and not index_axis:
            raise SpecError("no position axis: give coordinate columns or index_axis=True")
        self.coords, self.extra = list(coords), list(extra)
        self.pad_token_id = check_count(pad_token_id, "pad_token_id", minimum=0, maximum=_INT64_MAX)
        self.mode, self.index_axis, self.labels = mode, index_axis, labels
        self.max_length = None if max_length is None else check_count(max_length, "max_length", maximum=None)
        self.pad_to_multiple = 1 if pad_to_multiple is None else check_count(pad_to_multiple, "pad_to_multiple")

    def _column(self, i: int, ex: Mapping, name: str, **check: bool) -> torch.Tensor:
        """Column ``name`` of example ``i`` through :func:`as_numbers`, or :class:`InputError` when it is missing."""
        if name not in ex:
            raise InputError(f"example {i} has no column {name!r} (columns: {', '.join(map(str, ex))})")
        return as_numbers(ex[name], f"example {i}: column {name!r}", **check)

    def _example(self, i: int, ex: Mapping) -> dict[str, torch.Tensor]:
        if not isinstance(ex, Mapping):
            raise InputError(f"example {i} must be a mapping of columns, got {type(ex).__name__}")
        ids = self._column(i, ex, "input_ids", integers=True)
        if ids.dim() != 1:
            raise ShapeError(f"example {i}: input_ids must be a 1-D list of token ids; given shape {tuple(ids.shape)}")
        n = ids.numel()
        cols: dict[str, torch.Tensor] = {}
        for name in self.coords + self.extra:
            col = self._column(i, ex, name, finite=name in self.coords)
            if col.dim() == 0 or col.shape[0] != n or (name in self.coords and col.dim() != 1):
                raise ShapeError(
                    f"example {i}: column {name!r} must have shape ({n},) like input_ids"
                    f"{'' if name in self.coords else ' (then any trailing shape)'}; "
                    f"given ({', '.join(map(str, col.shape))})"
                )
            cols[name] = col
        m = n if self.max_length is None else min(n, self.max_length)  # truncated after the lengths are checked
        axes = ([torch.arange(m)] if self.index_axis else []) + [cols[c][:m] for c in self.coords]
        dtype = torch.float32 if any(a.is_floating_point() for a in axes) else torch.int64
        out = {"input_ids": ids[:m], "position_ids": torch.stack([a.to(dtype) for a in axes], dim=-1)}
        out.update({name: cols[name][:m] for name in self.extra})
        return out

    def __call__(self, examples: Sequence[Mapping]) -> dict[str, torch.Tensor]:
        if isinstance(examples, (Mapping, str, bytes)) or not isinstance(examples, Iterable):
            raise InputError(f"StructuralCollator takes a list of examples (mappings), got {type(examples).__name__}")
        examples = list(examples)
        if not examples:
            raise ShapeError("StructuralCollator: empty batch")
        items = [self._example(i, ex) for i, ex in enumerate(examples)]
        lengths = torch.tensor([it["input_ids"].numel() for it in items], dtype=torch.int64)
        cu = cu_seqlens_from_lengths(lengths)
        packed = {name: _concat([it[name] for it in items], name) for name in items[0]}  # (T, …) each
        return self._pack(packed, cu, lengths) if self.mode == "pack" else self._pad(packed, cu, lengths)

    def _pad(self, packed: dict[str, torch.Tensor], cu: torch.Tensor, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        """The padded form: each packed column unpacked to ``(B, L, …)`` (:func:`~structpos.encoders.unpack_packed`)."""
        longest = int(lengths.max())
        L = -(-longest // self.pad_to_multiple) * self.pad_to_multiple
        fill = {"input_ids": self.pad_token_id, "position_ids": 0}
        batch = {name: unpack_packed(col, cu, L, fill.get(name, -1)) for name, col in packed.items()}
        batch["attention_mask"] = unpack_packed(torch.ones_like(packed["input_ids"]), cu, L, 0)
        if self.labels:
            batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        return batch

    def _pack(
        self, packed: dict[str, torch.Tensor], cu: torch.Tensor, lengths: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The packed form: one row ``(1, T, …)`` per column and the documents' ``cu_seqlens``."""
        batch = {name: col[None] for name, col in packed.items()}
        batch["cu_seqlens"] = cu
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        if self.labels:
            labels = batch["input_ids"].clone()
            labels[0, cu[:-1][lengths > 0].long()] = -100  # each document's first token
            batch["labels"] = labels
        return batch


def _concat(parts: list[torch.Tensor], name: str) -> torch.Tensor:
    """The examples' ``(n_b, …)`` parts of column ``name`` as one ``(T, …)`` tensor.

    An example without tokens carries no values: its dtype (``[]`` reads as float64) and its
    unknown per-token shape (``[]`` is ``(0,)``) take the other examples', so one empty example
    cannot turn a batch's integer columns into floats. The examples with tokens must agree on
    the per-token shape; their dtypes promote as in ``torch.cat`` (int and real give real).
    """
    filled = [(b, p) for b, p in enumerate(parts) if p.shape[0] > 0]
    if not filled:
        return torch.cat([p.to(torch.int64) for p in parts])
    first, trailing = filled[0][0], filled[0][1].shape[1:]
    for b, p in enumerate(parts):
        if p.shape[1:] != trailing and (p.shape[0] > 0 or p.dim() > 1):
            raise ShapeError(
                f"example {b}: column {name!r} has per-token shape {tuple(p.shape[1:])}, example {first} "
                f"{tuple(trailing)}; every example's must match"
            )
    dtype = reduce(torch.promote_types, [p.dtype for _, p in filled])
    return torch.cat([p.reshape(p.shape[0], *trailing).to(dtype) for p in parts])
