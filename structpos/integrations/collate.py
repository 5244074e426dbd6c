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

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ..encoders.batching import cu_seqlens_from_lengths, unpack_packed
from ..exceptions import ShapeError, SpecError

__all__ = ["ShardDataset", "StructuralCollator"]


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
    """

    def __init__(self, path: str | os.PathLike, columns: Sequence[str] | None = None):
        import pyarrow.parquet as pq

        p = Path(path)
        files = sorted(p.glob("part-*.parquet")) if p.is_dir() else [p]
        if not files:
            raise SpecError("no part-*.parquet shards here", name=str(path))
        self.table = pq.read_table([str(f) for f in files], columns=list(columns) if columns else None)
        if "error" in self.table.column_names:  # rows of failed records carry no tokens
            import pyarrow.compute as pc

            self.table = self.table.filter(pc.is_null(self.table.column("error")))

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i: int) -> dict:
        return {k: v[0] for k, v in self.table.slice(int(i), 1).to_pydict().items()}


class StructuralCollator:
    """Collate examples into padded or packed structural batches (see the module docstring).

    Parameters
    ----------
    coords : sequence of str
        Per-token coordinate columns, one position axis each, in axis order.
    pad_token_id : int
        Padding id.
    mode : {"pad", "pack"}
        Padded ``(B, L)`` or packed ``(1, T)`` with ``cu_seqlens``.
    index_axis : bool
        Prepend the token index (within each example) as axis 0.
    extra : sequence of str
        Further per-token columns to pad (``-1``) or concatenate, e.g. bias inputs.
    labels : bool
        Add causal-LM ``labels``.
    max_length : int, optional
        Truncate every example to this many tokens.
    pad_to_multiple : int
        Round the padded length up to a multiple (tensor-core / block sizes).

    Raises
    ------
    SpecError
        An unknown ``mode``, or no position axis at all (no ``coords`` and no ``index_axis``).
    ShapeError
        (when called) A coordinate or extra column whose length differs from ``input_ids``
        (names the example and the column), a non-finite real coordinate, an empty batch.

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
        pad_to_multiple: int = 1,
    ):
        if mode not in ("pad", "pack"):
            raise SpecError(f"mode must be 'pad' or 'pack', got {mode!r}")
        if not coords and not index_axis:
            raise SpecError("no position axis: give coordinate columns or index_axis=True")
        self.coords, self.extra = list(coords), list(extra)
        self.pad_token_id, self.mode, self.index_axis = int(pad_token_id), mode, index_axis
        self.labels, self.max_length, self.pad_to_multiple = labels, max_length, max(1, int(pad_to_multiple))

    def _example(self, i: int, ex: Mapping) -> dict[str, torch.Tensor]:
        ids = torch.as_tensor(np.asarray(ex["input_ids"], dtype=np.int64))
        if self.max_length is not None:
            ids = ids[: self.max_length]
        n = ids.numel()
        axes = [torch.arange(n)] if self.index_axis else []
        out = {"input_ids": ids}
        for name in self.coords + self.extra:
            if name not in ex:
                raise ShapeError(f"example {i} has no column {name!r}")
            col = torch.as_tensor(np.asarray(ex[name]))
            full = col.shape[0]
            col = col[:n] if self.max_length is not None else col
            if col.dim() == 0 or col.shape[0] != n or (name in self.coords and col.dim() != 1):
                raise ShapeError(
                    f"example {i}: column {name!r} must have shape ({n},) like input_ids"
                    f"{'' if name in self.coords else ' (then any trailing shape)'}; "
                    f"given ({full}{', ' if col.dim() > 1 else ''}{', '.join(map(str, col.shape[1:]))})"
                )
            if name in self.coords:
                if col.is_floating_point() and not bool(torch.isfinite(col).all()):
                    raise ShapeError(f"example {i}: column {name!r} has non-finite coordinates")
                axes.append(col.to(torch.int64) if not col.is_floating_point() else col)
            else:
                out[name] = col
        dtype = torch.float32 if any(a.is_floating_point() for a in axes) else torch.int64
        out["position_ids"] = torch.stack([a.to(dtype) for a in axes], dim=-1)
        return out

    def __call__(self, examples: Sequence[Mapping]) -> dict[str, torch.Tensor]:
        if not examples:
            raise ShapeError("StructuralCollator: empty batch")
        items = [self._example(i, ex) for i, ex in enumerate(examples)]
        lengths = torch.tensor([it["input_ids"].numel() for it in items], dtype=torch.int64)
        cu = cu_seqlens_from_lengths(lengths)
        packed = {name: torch.cat([it[name] for it in items]) for name in items[0]}  # (T, …) each
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
