"""Encode a directory of real code to Parquet with ``structpos encode``, then train-ready batches.

1. ``structpos encode SRC --glob '*.py' --kind code --language python --coords tree,lap:8 --out OUT``
   parses every file with tree-sitter and writes ``OUT/part-NNNNN.parquet`` shards: one row per
   file with ``id, kind, num_nodes, labels, start, end, parent`` and one list column per
   coordinate (``depth``, ``sibling``, ``root_path`` ..., ``lap``).
2. :class:`ParquetStructures` reads the shards back into flat numpy arrays plus row offsets
   (no per-node Python objects) and serves one example per file: label ids and an
   ``(L, A)`` coordinate matrix, cropped to the first ``max_len`` nodes in preorder (a connected
   top of the tree, so depth/sibling stay valid).
3. A :class:`torch.utils.data.DataLoader` pads examples into batches, and one batch goes through
   :class:`structpos.encoders.StructuralRoPE` to show the shapes line up with attention.

Run: ``python examples/encode_code_to_parquet.py`` (default source: the ``json`` and ``email``
packages of CPython's own stdlib) or ``--src DIR``; ``--quick`` encodes a handful of files.
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader, Dataset

from structpos.cli import main as structpos_cli
from structpos.encoders import StructuralRoPE


def encode_directory(src: Path, out: Path, coords: str, limit: int | None) -> None:
    """Step 1: the ``structpos encode`` command, run in-process."""
    argv = ["encode", str(src), "--glob", "*.py", "--kind", "code", "--language", "python", "--coords", coords, "--out", str(out), "--overwrite", "--no-progress"]
    if limit:
        argv += ["--limit", str(limit)]
    rc = structpos_cli(argv)
    if rc != 0:
        raise SystemExit(f"structpos encode failed with exit code {rc}")


def _flat(col: pa.ChunkedArray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A list column as ``(values, offsets)``; a list-of-lists column as ``(values (T, k), offsets)``."""
    arr = col.combine_chunks()
    offsets = arr.offsets.to_numpy()
    offsets = offsets - offsets[0]
    inner = arr.flatten()  # respects slicing, unlike .values
    if pa.types.is_list(inner.type) or pa.types.is_large_list(inner.type):
        width = inner.value_lengths().to_numpy(zero_copy_only=False)
        k = int(width.max()) if width.size else 0
        if width.size and (width != k).any():
            raise ValueError(f"column {name!r} has nodes with different widths")
        values = inner.flatten().to_numpy(zero_copy_only=False).reshape(-1, k) if k else np.zeros((len(width), 0))
        return values, offsets
    return inner.to_numpy(zero_copy_only=False), offsets


class ParquetStructures(Dataset):
    """Examples from ``structpos encode`` shards: ``(tokens (L,), coords (L, A), depth (L,))``.

    ``coord_columns`` picks the coordinate columns (1-D ones give one axis each, 2-D ones such
    as ``lap`` give ``k`` axes) in order; ``vocab`` maps labels to ids (built from the data
    when ``None``: 0 = padding, 1 = unknown).
    """

    def __init__(self, shard_dir: Path, coord_columns: list[str], max_len: int = 512, vocab: dict[str, int] | None = None):
        files = sorted(Path(shard_dir).glob("part-*.parquet"))
        if not files:
            raise FileNotFoundError(f"no part-*.parquet shards in {shard_dir}")
        table = pa.concat_tables(pq.read_table(f) for f in files)
        self.ids = table.column("id").to_pylist()
        labels, self.offsets = _flat(table.column("labels"), "labels")
        if vocab is None:
            uniq, counts = np.unique(labels.astype(str), return_counts=True)
            vocab = {"<pad>": 0, "<unk>": 1} | {lab: i + 2 for i, lab in enumerate(uniq[np.argsort(-counts, kind="stable")])}
        self.vocab = vocab
        self.tokens = np.array([vocab.get(x, 1) for x in labels], dtype=np.int64)
        cols = []
        for name in coord_columns:
            values, offs = _flat(table.column(name), name)
            if not np.array_equal(offs, self.offsets):
                raise ValueError(f"column {name!r} is not aligned with the node labels")
            cols.append(values.reshape(len(values), -1).astype(np.float32))
        self.coords = np.concatenate(cols, axis=1)
        self.coord_names = coord_columns
        depth, _ = _flat(table.column("depth"), "depth")
        self.depth = depth.astype(np.int64)
        self.max_len = max_len

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        s = int(self.offsets[i])
        e = min(int(self.offsets[i + 1]), s + self.max_len)  # preorder prefix = connected top of the tree
        return torch.from_numpy(self.tokens[s:e]), torch.from_numpy(self.coords[s:e]), torch.from_numpy(self.depth[s:e])


def pad_collate(items):
    """Pad to the longest example: ``tokens (B, L)``, ``coords (B, L, A)``, ``depth (B, L)``, ``mask (B, L)``."""
    L = max(len(t) for t, _, _ in items)
    A = items[0][1].shape[1]
    tokens = torch.zeros(len(items), L, dtype=torch.long)
    coords = torch.zeros(len(items), L, A)
    depth = torch.full((len(items), L), -100, dtype=torch.long)
    for b, (t, c, d) in enumerate(items):
        tokens[b, : len(t)], coords[b, : len(t)], depth[b, : len(t)] = t, c, d
    return {"tokens": tokens, "coords": coords, "depth": depth, "mask": tokens > 0}


def default_sources() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [root / "json", root / "email"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, action="append", help="directory of .py files (repeatable; default: stdlib json/ and email/)")
    ap.add_argument("--out", type=Path, help="output directory (default: a temporary one)")
    ap.add_argument("--coords", default="tree,lap:8", help="coordinate spec for structpos encode")
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="encode only 3 files per source")
    args = ap.parse_args(argv)
    sources = args.src or default_sources()
    tmp = None
    if args.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="structpos-example-")
        args.out = Path(tmp.name)
    t0 = time.perf_counter()
    shard_dirs = []
    for k, src in enumerate(sources):
        out = args.out / f"source{k}"
        encode_directory(src, out, args.coords, 3 if args.quick else None)
        shard_dirs.append(out)
    print(f"encoded {len(sources)} source director{'y' if len(sources) == 1 else 'ies'} in {time.perf_counter() - t0:.1f} s")

    coord_columns = ["depth", "sibling"] + (["lap"] if "lap" in args.coords else [])
    first = ParquetStructures(shard_dirs[0], coord_columns, args.max_len)
    datasets = [first] + [ParquetStructures(d, coord_columns, args.max_len, vocab=first.vocab) for d in shard_dirs[1:]]
    data = torch.utils.data.ConcatDataset(datasets)
    sizes = np.diff(first.offsets)
    print(f"dataset: {len(data)} files, {first.coords.shape[1]} coordinate axes ({', '.join(coord_columns)}), "
          f"vocab {len(first.vocab)}; first source: median {int(np.median(sizes))} nodes/file, max {int(sizes.max())}")

    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, collate_fn=pad_collate, generator=torch.Generator().manual_seed(0))
    batch = next(iter(loader))
    print("batch:", {k: tuple(v.shape) for k, v in batch.items()})

    B, L, A = batch["coords"].shape
    heads, head_dim = 4, max(16, 2 * A + (2 * A) % 4)
    rope = StructuralRoPE(head_dim, A)
    emb = torch.nn.Embedding(len(first.vocab), heads * head_dim, padding_idx=0)
    x = emb(batch["tokens"]).view(B, L, heads, head_dim)
    q_rot, k_rot = rope(x, x, batch["coords"], mask=batch["mask"])
    scores = torch.einsum("blhd,bmhd->bhlm", q_rot, k_rot) / head_dim**0.5
    print(f"rotated q/k {tuple(q_rot.shape)}; attention scores {tuple(scores.shape)}; "
          f"norms preserved: {torch.allclose(q_rot.norm(dim=-1), x.norm(dim=-1), atol=1e-4)}")
    n_batches = sum(1 for _ in loader)
    print(f"one epoch = {n_batches} batches; total {time.perf_counter() - t0:.1f} s")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
