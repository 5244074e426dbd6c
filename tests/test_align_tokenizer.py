"""Alignment of a real HF fast tokenizer (a byte-level BPE trained offline) on stdlib code."""

from __future__ import annotations

import numpy as np
import pytest

from structpos.align import OUTSIDE, SPECIAL, STRADDLE, align, token_coords
from structpos.parsers.code import parse_code

tokenizers = pytest.importorskip("tokenizers")

FILES = ["json/decoder.py", "textwrap.py", "colorsys.py", "string.py"]


@pytest.fixture(scope="module")
def tokenizer(stdlib):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    trainer = trainers.BpeTrainer(
        vocab_size=800, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([(stdlib / f).read_text() for f in FILES], trainer)
    return tok


@pytest.mark.parametrize("fname", FILES + ["email/_header_value_parser.py"])
def test_every_token_gets_its_deepest_covering_node(stdlib, tokenizer, fname):
    text = (stdlib / fname).read_text()
    tree = parse_code(text, "python", name=fname)
    enc = tokenizer.encode(text)
    offsets = np.array(enc.offsets)
    al = align(tree, offsets)
    assert len(al) == len(enc.ids)
    # the added <s> and </s> come back as empty spans -> special, no node
    assert al.flags[0] & SPECIAL and al.flags[-1] & SPECIAL and al.node[0] == -1

    children: dict[int, list[int]] = {}
    for i, p in enumerate(tree.parent):
        children.setdefault(int(p), []).append(i)
    for t, (s, e) in enumerate(offsets):
        n = al.node[t]
        if s == e:
            continue
        piece = text[s:e]
        if not piece.strip():
            continue  # whitespace tokens: covered by the enclosing node, checked below
        # the lookup span: the token without surrounding whitespace
        s2 = s + len(piece) - len(piece.lstrip())
        e2 = e - (len(piece) - len(piece.rstrip()))
        if n < 0:
            assert al.flags[t] & OUTSIDE
            assert not ((tree.start <= s2) & (tree.end >= e2)).any()
            continue
        assert tree.start[n] <= s2 and e2 <= tree.end[n], (fname, t, piece)
        # no child of n covers it (n is the deepest)
        for c in children.get(int(n), []):
            assert not (tree.start[c] <= s2 and e2 <= tree.end[c]), (fname, t, piece, tree.labels[c])
        if al.flags[t] & STRADDLE:
            assert len(children.get(int(n), [])) > 0


def test_token_coords_gives_every_token_a_row(stdlib, tokenizer):
    text = (stdlib / "colorsys.py").read_text()
    tree = parse_code(text, "python")
    enc = tokenizer.encode(text)
    tok = token_coords(tree, enc.offsets, "tree")
    T = len(enc.ids)
    assert all(len(v) == T for v in tok.values())
    real = tok["node"] >= 0
    assert (tok["depth"][~real] == -1).all()
    # depth per token equals the depth of its node, recomputed by climbing parents
    for t in np.flatnonzero(real)[::7]:
        d, n = 0, tok["node"][t]
        while tree.parent[n] >= 0:
            n, d = tree.parent[n], d + 1
        assert tok["depth"][t] == d
