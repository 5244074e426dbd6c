"""``StructuralCollator`` on random ragged batches: one pad/pack mechanism with :mod:`structpos.encoders.batching`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpos.encoders.batching import collate, pack_padded, unpack_packed
from structpos.exceptions import ShapeError
from structpos.integrations.collate import StructuralCollator

COORDS, EXTRA = ["depth", "row"], ["node", "path"]


def ragged_examples(rng: np.random.Generator, real_rows: bool = False, empty: bool = False) -> list[dict]:
    """1-5 examples of 0/1-11 tokens: two coordinate columns, a per-token and a (n, 3) extra column."""
    out = []
    for _ in range(int(rng.integers(1, 6))):
        n = int(rng.integers(0 if empty else 1, 12))
        row = rng.random(n) * 3 if real_rows else rng.integers(0, 9, n)
        out.append(
            {
                "input_ids": rng.integers(1, 100, n).tolist(),
                "depth": rng.integers(-1, 5, n).tolist(),
                "row": row.tolist(),
                "node": rng.integers(-1, 20, n).tolist(),
                "path": rng.integers(-1, 9, (n, 3)).reshape(n, 3).tolist(),
            }
        )
    return out


def padded_reference(examples, pad_token_id, index_axis, multiple):
    """The padded batch written out token by token with Python lists (no tensor batching code)."""
    lengths = [len(e["input_ids"]) for e in examples]
    L = -(-max(lengths) // multiple) * multiple
    real = any(isinstance(v, float) for e in examples for v in e["row"])
    ids, mask, pos, node, path = [], [], [], [], []
    for e, n in zip(examples, lengths):
        pad = L - n
        ids.append(e["input_ids"] + [pad_token_id] * pad)
        mask.append([1] * n + [0] * pad)
        axes = ([list(range(n))] if index_axis else []) + [e["depth"], e["row"]]
        pos.append([list(t) for t in zip(*axes)] + [[0] * len(axes)] * pad)
        node.append(e["node"] + [-1] * pad)
        path.append(e["path"] + [[-1, -1, -1]] * pad)
    return {
        "input_ids": torch.tensor(ids),
        "attention_mask": torch.tensor(mask),
        "position_ids": torch.tensor(pos, dtype=torch.float32 if real else torch.int64),
        "node": torch.tensor(node),
        "path": torch.tensor(path),
    }


@pytest.mark.parametrize("seed", range(40))
def test_padded_batch_equals_a_token_by_token_reference(seed):
    rng = np.random.default_rng(seed)
    examples = ragged_examples(rng, real_rows=seed % 4 == 0)
    pad_id, index_axis, multiple = seed % 3, seed % 2 == 0, [1, 4, 8][seed % 3]
    batch = StructuralCollator(COORDS, pad_id, index_axis=index_axis, extra=EXTRA, pad_to_multiple=multiple)(examples)
    ref = padded_reference(examples, pad_id, index_axis, multiple)
    for name, want in ref.items():
        assert batch[name].dtype == want.dtype, name
        torch.testing.assert_close(batch[name], want, rtol=0, atol=0, msg=name)
    assert torch.equal(batch["labels"], ref["input_ids"].masked_fill(ref["attention_mask"] == 0, -100))


@pytest.mark.parametrize("seed", range(40))
def test_pad_and_pack_are_batchings_two_forms_of_the_same_tokens(seed):
    rng = np.random.default_rng(100 + seed)
    examples = ragged_examples(rng, real_rows=seed % 4 == 0, empty=seed % 5 == 0)
    if not any(e["input_ids"] for e in examples):
        examples[0] = ragged_examples(rng)[0]
    multiple = [1, 8][seed % 2]
    pad = StructuralCollator(COORDS, extra=EXTRA, pad_to_multiple=multiple)(examples)
    pack = StructuralCollator(COORDS, mode="pack", extra=EXTRA)(examples)
    lengths = [len(e["input_ids"]) for e in examples]
    assert pack["cu_seqlens"].tolist() == [0, *np.cumsum(lengths).tolist()]
    # batching.collate of the per-example positions gives the same padded coordinates, mask and offsets
    per_example = [pack["position_ids"][0, s:e] for s, e in zip(pack["cu_seqlens"][:-1], pack["cu_seqlens"][1:])]
    ref = collate(per_example, pad_to_multiple=multiple)
    assert torch.equal(pad["position_ids"], ref.coords) and torch.equal(pad["attention_mask"].bool(), ref.mask)
    assert torch.equal(pack["cu_seqlens"], ref.cu_seqlens) and torch.equal(pack["position_ids"][0], ref.packed)
    for name in ["input_ids", "position_ids", *EXTRA]:
        assert torch.equal(pack_padded(pad[name], pad["attention_mask"]), pack[name][0]), name
        fill = {"input_ids": 0, "position_ids": 0}.get(name, -1)
        assert torch.equal(unpack_packed(pack[name][0], pack["cu_seqlens"], pad["input_ids"].shape[1], fill), pad[name])
    starts = {int(c) for c, n in zip(pack["cu_seqlens"][:-1], lengths) if n}
    labels = pack["labels"][0].tolist()
    assert [i for i, v in enumerate(labels) if v == -100] == sorted(starts)  # only documents' first tokens
    assert all(labels[i] == pack["input_ids"][0, i] for i in range(len(labels)) if i not in starts)


def test_empty_last_document_in_a_packed_batch():
    batch = StructuralCollator(["depth"], mode="pack")(
        [{"input_ids": [5, 6], "depth": [0, 1]}, {"input_ids": [], "depth": []}]
    )
    assert batch["cu_seqlens"].tolist() == [0, 2, 2] and batch["labels"].tolist() == [[-100, 6]]


def test_non_finite_coordinates_are_refused():
    with pytest.raises(ShapeError, match="non-finite"):
        StructuralCollator(["row"])([{"input_ids": [1, 2], "row": [0.0, float("nan")]}])
