"""The HF example runs end to end in --quick mode and its windows carry real tree positions."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("tree_sitter_python")

PATH = Path(__file__).resolve().parents[1] / "examples" / "train_hf_structural.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("structpos_example_train_hf", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_windows_carry_ast_depth_of_each_token(example):
    import structpos
    from structpos.coords.tree import depth as tree_depth

    path = example.stdlib_files(3)[0]
    text = path.read_text(encoding="utf-8")
    tok = example.train_tokenizer([text], 300)
    win = example.windows(text, tok, 32)[1]
    enc = tok.encode(text)
    tree = structpos.parse(text, "code", language="python")
    d = tree_depth(tree.parent)
    # independent check: the deepest node whose span covers the token's first non-space character
    for i, (s, e) in enumerate(enc.offsets[32:64]):
        while s < e and text[s].isspace():
            s += 1
        if s >= e:
            continue
        covering = np.flatnonzero((tree.start <= s) & (tree.end >= e))
        if covering.size:
            assert win["tok_depth"][i] == d[covering].max()


def test_quick_run_prints_both_variants(example, capsys):
    assert example.main(["--quick", "--threads", "1", "--steps", "3", "--files", "4"]) == 0
    out = capsys.readouterr().out
    rows = dict(re.findall(r"^\| (1-D RoPE|tree RoPE) \| ([0-9.]+) \|", out, flags=re.MULTILINE))
    assert set(rows) == {"1-D RoPE", "tree RoPE"}
    assert all(0 < float(v) < 20 for v in rows.values())
    # progress while it runs (minutes in full mode): each stage announced before the result table
    table = out.index("| positions |")
    for stage in (
        "training a byte-level BPE tokenizer",
        "aligning their tokens",
        "training 1-D RoPE",
        "training tree RoPE",
    ):
        assert -1 < out.find(stage) < table, stage
    steps = re.findall(r"^  (1-D RoPE|tree RoPE) step (\d+)/(\d+): train loss [0-9.]+", out, flags=re.MULTILINE)
    assert {name for name, _, _ in steps} == {"1-D RoPE", "tree RoPE"}
    assert all(done == total for name, done, total in steps[-1:])  # the last report is the last step
