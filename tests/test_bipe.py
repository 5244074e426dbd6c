"""BiPE: the bilevel coordinates against brute force, and the encoder's singleton-segment identity
with 1-D RoPE (up to the constant absolute code P[0] added to every embedding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import structpos
from structpos import SpecError
from structpos.coords import compute
from structpos.coords.bilevel import segment_offsets
from structpos.encoders.bipe import BiPE, sinusoidal_table
from structpos.encoders.registry import build
from structpos.encoders.rope import StructuralRoPE
from structpos.exceptions import ShapeError

DOC = "One two three. Four five.\n\nSix seven. Eight!"
CODE = "import os\ndef f(a, b):\n    c = a + b\n    return c\n"


def brute_tree_segments(s, is_segment):
    """Segment node of each node by climbing parents, ordinals by counting, offsets by counting leaves."""
    n = s.num_nodes
    seg = []
    for i in range(n):
        j = i
        while not (is_segment(j) or s.parent[j] < 0):
            j = int(s.parent[j])
        seg.append(j)
    seg_nodes = sorted(set(seg) | {i for i in range(n) if s.parent[i] < 0})
    leaves = [i for i in range(n) if i not in set(s.parent.tolist())]
    ordinal = [seg_nodes.index(g) for g in seg]
    offset = [sum(1 for j in leaves if j < i and seg[j] == seg[i]) for i in range(n)]
    return ordinal, offset


def test_sentence_and_cell_segments_equal_brute_force():
    doc = structpos.parse(DOC, "document")
    c = compute(doc, "bipe:sentence")
    want = brute_tree_segments(doc, lambda j: doc.labels[j] == "sentence")
    assert (c["bipe_segment"].tolist(), c["bipe_offset"].tolist()) == want
    assert np.array_equal(compute(doc, "bipe")["bipe_segment"], c["bipe_segment"])  # auto = sentence
    table = structpos.parse("name,age\nann,31\nbob,4\n", "table")
    c = compute(table, "bipe:cell")
    want = brute_tree_segments(table, lambda j: table.attrs["row"][j] >= 0)
    assert (c["bipe_segment"].tolist(), c["bipe_offset"].tolist()) == want


def test_statement_segments_are_the_hirope_statements():
    pytest.importorskip("tree_sitter_python")
    s = structpos.parse(CODE, "code", language="python")
    c = compute(s, "bipe:statement,hirope")
    pairs = list(zip(c["hirope_function"].tolist(), c["hirope_statement"].tolist()))
    seg = c["bipe_segment"].tolist()
    assert len(set(zip(seg, pairs))) == len(set(seg)) == len(set(pairs))  # one segment per (unit, statement)
    assert np.array_equal(c["bipe_offset"], c["hirope_token"])


def test_line_segments_equal_brute_force():
    pytest.importorskip("tree_sitter_python")
    s = structpos.parse(CODE, "code", language="python")
    c = compute(s, "bipe:line")
    lines = [CODE[: int(a)].count("\n") for a in s.start]
    leaves = [i for i in range(s.num_nodes) if i not in set(s.parent.tolist())]
    offsets = [sum(1 for j in leaves if j < i and lines[j] == lines[i]) for i in range(s.num_nodes)]
    assert c["bipe_segment"].tolist() == lines and c["bipe_offset"].tolist() == offsets


def test_segment_offsets_per_token_equal_a_loop():
    rng = np.random.default_rng(0)
    seg = np.sort(rng.integers(-1, 6, 40))
    got_seg, got_off = segment_offsets(seg)
    want = [-1 if s < 0 else int((seg[:t] == s).sum()) for t, s in enumerate(seg)]
    assert got_off.tolist() == want and np.array_equal(got_seg, np.where(seg < 0, -1, seg))


@pytest.mark.parametrize("absolute", ["learned", "sinusoidal"])
def test_singleton_segments_equal_rope_on_the_token_index_of_shifted_embeddings(absolute):
    """Every token its own segment (s = n, o = 0): BiPE's logits equal those of plain 1-D RoPE on the
    token index, for the embeddings x + P[0] (P[0] the same vector for every token)."""
    torch.manual_seed(0)
    B, L, dim, H, hd = 2, 7, 12, 2, 8
    bipe = BiPE(hd, dim, absolute=absolute, max_offset=4)
    with torch.no_grad():
        if bipe.offset_table is not None:
            bipe.offset_table.weight.normal_()
    wq, wk = torch.randn(dim, H * hd, dtype=torch.float64), torch.randn(dim, H * hd, dtype=torch.float64)
    x = torch.randn(B, L, dim, dtype=torch.float64)
    pos = torch.arange(L).expand(B, L)

    def logits(rope, h, coords):
        q, k = (h @ wq).view(B, L, H, hd), (h @ wk).view(B, L, H, hd)
        qr, kr = rope(q, k, coords)
        return torch.einsum("blhd,bmhd->bhlm", qr, kr)

    got = logits(bipe, bipe.embed(x, torch.zeros(B, L, dtype=torch.int64)), pos)
    p0 = bipe.offset_table.weight[0].detach() if bipe.offset_table is not None else torch.tensor([0.0, 1.0] * 6)
    want = logits(StructuralRoPE(hd, 1), x + p0.double(), pos[..., None])
    assert torch.allclose(got, want, atol=1e-6, rtol=0)  # fp64 logits of magnitude ~100
    enc = bipe.absolute_encoding(torch.zeros(B, L, dtype=torch.int64))
    assert torch.equal(enc, p0.expand(B, L, dim))  # the absolute part is one constant vector


def test_logits_depend_on_segment_differences_and_offsets_are_clipped():
    torch.manual_seed(1)
    bipe = BiPE(8, 4, max_offset=3)
    q, k = torch.randn(1, 6, 2, 8), torch.randn(1, 6, 2, 8)
    seg = torch.tensor([[0, 0, 1, 1, 1, 2]])

    def scores(s):
        qr, kr = bipe(q, k, s)
        return torch.einsum("blhd,bmhd->bhlm", qr, kr)

    assert torch.allclose(scores(seg), scores(seg + 11), atol=1e-5)
    assert not torch.allclose(scores(seg), scores(torch.zeros_like(seg)), atol=1e-3)
    enc = bipe.absolute_encoding(torch.tensor([3, 4, 50, -1]))
    assert torch.equal(enc[0], enc[1]) and torch.equal(enc[0], enc[2]) and not enc[3].any()


def test_sinusoidal_table_matches_the_formula():
    o = torch.tensor([0, 1, 5, 17])
    got = sinusoidal_table(o, 6)
    for r, off in enumerate(o.tolist()):
        for i in range(3):
            w = 10000.0 ** (-2 * i / 6)
            assert got[r, 2 * i].item() == pytest.approx(np.sin(off * w), abs=1e-6)
            assert got[r, 2 * i + 1].item() == pytest.approx(np.cos(off * w), abs=1e-6)


def test_errors_and_registry():
    assert isinstance(build("bipe", head_dim=8, dim=4), BiPE)
    with pytest.raises(SpecError):
        BiPE(8, 4, absolute="alibi")
    with pytest.raises(SpecError):
        BiPE(8, 3, absolute="sinusoidal")
    with pytest.raises(ShapeError):
        BiPE(8, 4).embed(torch.zeros(2, 4), torch.tensor([0, -2]))
    with pytest.raises(SpecError, match="unit must be one of"):
        compute(structpos.parse(DOC, "document"), "bipe:word")
    with pytest.raises(ValueError, match="code tree"):
        compute(structpos.parse(DOC, "document"), "bipe:statement")
