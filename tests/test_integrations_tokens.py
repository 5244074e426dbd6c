"""``structpos encode --tokenizer``: input_ids and per-token coordinates in the shards; the collator reads them."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

import structpos
from structpos.align import token_coords
from structpos.cli import main
from structpos.exceptions import ShapeError

tokenizers = pytest.importorskip("tokenizers")

FILES = ["colorsys.py", "textwrap.py", "string.py", "keyword.py", "bisect.py"]


@pytest.fixture(scope="module")
def tokenizer_json(stdlib, tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([(stdlib / f).read_text() for f in FILES[:2]], trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def encoded(stdlib, tokenizer_json, tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    for f in FILES:  # held-in: the tokenizer was trained on the first two
        shutil.copy(stdlib / f, src / f)
    out = tmp_path_factory.mktemp("out") / "enc"
    rc = main(
        [
            "encode",
            str(src),
            "--kind",
            "code",
            "--coords",
            "tree",
            "--out",
            str(out),
            "--tokenizer",
            str(tokenizer_json),
            "--shard-size",
            "2",
            "--no-progress",
        ]
    )
    assert rc == 0
    table = pq.read_table(sorted(out.glob("part-*.parquet")))
    return src, out, table


def test_rows_equal_inputs_and_token_coords_equal_per_node_alignment(encoded, tokenizer_json):
    from tokenizers import Tokenizer

    src, _, table = encoded
    assert table.num_rows == len(FILES)
    tok = Tokenizer.from_file(str(tokenizer_json))
    rows = table.to_pylist()
    for row in rows:
        text = (src / row["id"].split("/")[-1]).read_text() if (src / row["id"].split("/")[-1]).exists() else None
        if text is None:
            text = next((src / f).read_text() for f in FILES if row["id"].endswith(f))
        enc = tok.encode(text)
        assert row["input_ids"] == enc.ids
        assert list(zip(row["token_start"], row["token_end"])) == [tuple(o) for o in enc.offsets]
        # independent path: parse again, align with the public token_coords
        ref = token_coords(structpos.parse(text, "code", language="python"), enc.offsets, "tree")
        for name in ("depth", "sibling", "subtree_size"):
            np.testing.assert_array_equal(np.asarray(row[f"tok_{name}"]), ref[name])
        np.testing.assert_array_equal(np.asarray(row["tok_root_path"]), ref["root_path"])
        np.testing.assert_array_equal(np.asarray(row["token_node"]), ref["node"])
        np.testing.assert_array_equal(np.asarray(row["token_flags"]), ref["align_flags"])
        assert row["token_node"][0] == -1 and row["token_node"][-1] == -1  # <s> and </s> are special


def test_bad_tokenizer_path_is_one_clear_error(tmp_path, capsys):
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    rc = main(
        [
            "encode",
            str(f),
            "--kind",
            "code",
            "--out",
            str(tmp_path / "o"),
            "--tokenizer",
            str(tmp_path / "missing.json"),
            "--no-progress",
        ]
    )
    assert rc == 2
    assert "missing.json" in capsys.readouterr().err


def test_collator_pads_and_packs_shards(encoded):
    from structpos.integrations.collate import ShardDataset, StructuralCollator

    _, out, table = encoded
    ds = ShardDataset(out, columns=["input_ids", "tok_depth", "tok_sibling", "token_node"])
    assert len(ds) == table.num_rows
    examples = [ds[i] for i in range(3)]
    pad = StructuralCollator(["tok_depth", "tok_sibling"], pad_token_id=0, extra=["token_node"])(examples)
    lengths = [len(e["input_ids"]) for e in examples]
    B, Lmax = 3, max(lengths)
    assert pad["input_ids"].shape == (B, Lmax) and pad["position_ids"].shape == (B, Lmax, 3)
    for b, e in enumerate(examples):
        n = lengths[b]
        assert pad["attention_mask"][b].sum() == n
        assert pad["input_ids"][b, :n].tolist() == e["input_ids"]
        assert pad["position_ids"][b, :n, 0].tolist() == list(range(n))  # axis 0: token index
        assert pad["position_ids"][b, :n, 1].tolist() == e["tok_depth"]
        assert pad["position_ids"][b, :n, 2].tolist() == e["tok_sibling"]
        assert (pad["labels"][b, n:] == -100).all() and pad["labels"][b, :n].tolist() == e["input_ids"]
        assert (pad["token_node"][b, n:] == -1).all()
    packed = StructuralCollator(["tok_depth", "tok_sibling"], mode="pack")(examples)
    cu = packed["cu_seqlens"]
    assert cu.tolist() == [0, *np.cumsum(lengths).tolist()]
    assert packed["input_ids"].shape == (1, sum(lengths))
    for b in range(B):
        s, e = int(cu[b]), int(cu[b + 1])
        n = lengths[b]
        torch.testing.assert_close(packed["position_ids"][0, s:e], pad["position_ids"][b, :n])
        assert packed["labels"][0, s] == -100  # no prediction across a document boundary
    # a DataLoader uses it as collate_fn
    loader = torch.utils.data.DataLoader(ds, batch_size=2, collate_fn=StructuralCollator(["tok_depth"]))
    batch = next(iter(loader))
    assert batch["position_ids"].shape[-1] == 2


def test_collator_rejects_mismatched_lengths():
    from structpos.integrations.collate import StructuralCollator

    with pytest.raises(ShapeError, match="tok_depth"):
        StructuralCollator(["tok_depth"])([{"input_ids": [1, 2, 3], "tok_depth": [0, 1]}])


def test_local_transformers_tokenizer_directory(tokenizer_json, tmp_path, stdlib):
    transformers = pytest.importorskip("transformers")
    from structpos.pipeline.tokens import load_tokenizer, tokenize

    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
    fast.save_pretrained(tmp_path / "tok")
    text = (stdlib / "colorsys.py").read_text()
    ids_dir, off_dir = tokenize(load_tokenizer(tmp_path / "tok"), text)
    ids_file, off_file = tokenize(load_tokenizer(tokenizer_json), text)
    np.testing.assert_array_equal(ids_dir, ids_file)
    np.testing.assert_array_equal(off_dir, off_file)
    # the transformers object itself (offsets from offset_mapping) gives the same tokens
    ids_tf, off_tf = tokenize(fast, text)
    np.testing.assert_array_equal(ids_tf, ids_file)
    np.testing.assert_array_equal(off_tf, off_file)
