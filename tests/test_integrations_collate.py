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


# ------------------------------------------------------------------------------- misuse
def test_an_empty_example_keeps_the_batch_integer():
    """``[]`` reads as float64; an example without tokens must not turn int64 columns into floats."""
    examples = [
        {"input_ids": [], "depth": [], "node": []},
        {"input_ids": [8, 9], "depth": [0, 1], "node": [[3, 4], [5, 6]]},
    ]
    for mode in ("pad", "pack"):
        batch = StructuralCollator(["depth"], mode=mode, extra=["node"])(examples)
        assert batch["position_ids"].dtype == torch.int64, mode
        assert batch["node"].dtype == torch.int64 and batch["node"].shape[-1] == 2, mode
    pad = StructuralCollator(["depth"], extra=["node"])(examples)
    assert pad["position_ids"].tolist() == [[[0, 0], [0, 0]], [[0, 0], [1, 1]]]
    assert pad["node"].tolist() == [[[-1, -1], [-1, -1]], [[3, 4], [5, 6]]]


def test_lengths_are_checked_before_max_length_truncates():
    ragged = [{"input_ids": [1, 2, 3], "depth": [0, 1]}]
    with pytest.raises(ShapeError, match=r"example 0: column 'depth' must have shape \(3,\)"):
        StructuralCollator(["depth"], max_length=2)(ragged)
    batch = StructuralCollator(["depth"], max_length=2)([{"input_ids": [1, 2, 3], "depth": [0, 1, 2]}])
    assert batch["input_ids"].tolist() == [[1, 2]] and batch["position_ids"].tolist() == [[[0, 0], [1, 1]]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_length": 0}, "max_length"),
        ({"max_length": -1}, "max_length"),
        ({"max_length": 2.5}, "max_length"),
        ({"pad_to_multiple": 0}, "pad_to_multiple"),
        ({"pad_to_multiple": -3}, "pad_to_multiple"),
        ({"pad_to_multiple": "a"}, "pad_to_multiple"),
        ({"pad_token_id": None}, "pad_token_id"),
        ({"pad_token_id": -1}, "pad_token_id"),
        ({"index_axis": "no"}, "index_axis"),
        ({"extra": ["labels"]}, "labels"),
        ({"coords": "depth"}, "coords"),
    ],
)
def test_bad_options_are_refused_at_construction(kwargs, match):
    from structpos.exceptions import SpecError

    kwargs = {"coords": ["depth"], **kwargs}
    with pytest.raises(SpecError, match=match):
        StructuralCollator(**kwargs)


def test_pad_to_multiple_none_means_no_rounding():
    batch = StructuralCollator(["depth"], pad_to_multiple=None)([{"input_ids": [1, 2, 3], "depth": [0, 1, 1]}])
    assert batch["input_ids"].shape == (1, 3)


def test_token_ids_and_coordinates_are_never_rounded_or_wrapped():
    collate = StructuralCollator(["depth"])
    with pytest.raises(ShapeError, match=r"column 'input_ids' must hold whole numbers; given 1.7"):
        collate([{"input_ids": [1.7, 2.2], "depth": [0, 1]}])
    huge = np.array([2**63 + 5], dtype=np.uint64)
    with pytest.raises(ShapeError, match=r"column 'depth' holds 9223372036854775813, outside the int64 range"):
        collate([{"input_ids": [1], "depth": huge}])
    with pytest.raises(ShapeError, match="outside the int64 range"):
        collate([{"input_ids": huge, "depth": [0]}])
    with pytest.raises(ShapeError, match="outside the int64 range"):
        collate([{"input_ids": [2**70], "depth": [0]}])
    # whole numbers stored as floats lose nothing and are read exactly
    assert collate([{"input_ids": np.array([3.0, 4.0]), "depth": [0, 1]}])["input_ids"].tolist() == [[3, 4]]


@pytest.mark.parametrize(
    "example, error, match",
    [
        ({"depth": [0]}, "InputError", r"example 0 has no column 'input_ids' \(columns: depth\)"),
        ({"input_ids": [1, 2], "depth": [0, None]}, "InputError", r"column 'depth' must hold numbers; given None"),
        ({"input_ids": [1, 2], "depth": None}, "InputError", r"column 'depth' must hold numbers; given None"),
        ({"input_ids": [1, 2], "depth": ["a", "b"]}, "InputError", r"column 'depth' must hold numbers; given strings"),
        ({"input_ids": [1, 2], "depth": [True, False]}, "InputError", r"given booleans"),
        ({"input_ids": 5, "depth": [0]}, "ShapeError", r"input_ids must be a 1-D list of token ids; given shape \(\)"),
        ({"input_ids": [[1, 2]], "depth": [0]}, "ShapeError", r"input_ids must be a 1-D list"),
        ({"input_ids": [1, 2], "depth": [[0], [1, 2]]}, "ShapeError", r"column 'depth' must be a rectangular array"),
        ("not a mapping", "InputError", r"example 0 must be a mapping"),
    ],
)
def test_bad_examples_raise_one_structpos_error(example, error, match):
    import structpos.exceptions as E

    with pytest.raises(getattr(E, error), match=match) as info:
        StructuralCollator(["depth"])([example])
    assert type(info.value) is getattr(E, error)


def test_extra_columns_with_different_per_token_shapes_are_named():
    examples = [
        {"input_ids": [1], "depth": [0], "x": [[1, 2]]},
        {"input_ids": [1], "depth": [0], "x": [[1, 2, 3]]},
    ]
    with pytest.raises(ShapeError, match=r"example 1: column 'x' has per-token shape \(3,\), example 0 \(2,\)"):
        StructuralCollator(["depth"], extra=["x"])(examples)


def test_a_single_example_instead_of_a_list_is_refused():
    from structpos.exceptions import InputError

    with pytest.raises(InputError, match="list of examples"):
        StructuralCollator(["depth"])({"input_ids": [1], "depth": [0]})


def test_shard_dataset_names_a_missing_path_and_a_bad_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from structpos.exceptions import InputError
    from structpos.integrations.collate import ShardDataset

    with pytest.raises(InputError, match="no such file or directory") as info:
        ShardDataset(tmp_path / "missing")
    assert info.value.input_name == str(tmp_path / "missing")
    bad = tmp_path / "notes.txt"
    bad.write_text("not parquet")
    with pytest.raises(InputError, match="not a readable Parquet file") as info:
        ShardDataset(bad)
    assert info.value.input_name == str(bad)
    shards = tmp_path / "enc"
    shards.mkdir()
    pq.write_table(pa.table({"input_ids": [[1, 2]]}), shards / "part-00000.parquet")
    (shards / "part-00001.parquet").write_bytes(b"garbage")
    with pytest.raises(InputError) as info:
        ShardDataset(shards)
    assert info.value.input_name == str(shards / "part-00001.parquet")
    (shards / "part-00001.parquet").unlink()
    with pytest.raises(InputError, match=r"no column 'tok_depth' in the shards \(columns: input_ids\)"):
        ShardDataset(shards, columns=["tok_depth"])
    ds = ShardDataset(shards)
    assert ds[-1] == ds[0] == {"input_ids": [1, 2]}
    with pytest.raises(IndexError):
        ds[1]
