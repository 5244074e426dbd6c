"""Text-grid (line, column) coordinates against a brute-force scan; position coupling: shared ids and
RoPE logits that depend on group offsets only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import structpos
from structpos import SpecError
from structpos.coords import compute
from structpos.coords.coupling import arithmetic_coupling, coupled_positions, digit_significance
from structpos.coords.grid import line_col, token_grid
from structpos.encoders.rope import StructuralRoPE

TEXT = "def f(x):\n\treturn x\n\n  # é ünïcode\r\nend"


def brute_line_col(text: str, i: int) -> tuple[int, int]:
    line = col = 0
    for ch in text[:i]:
        if ch == "\n":
            line, col = line + 1, 0
        else:
            col += 1
    return line, col


def test_line_col_equals_a_brute_force_scan():
    offsets = list(range(len(TEXT) + 1))
    line, col = line_col(TEXT, offsets)
    assert list(zip(line.tolist(), col.tolist())) == [brute_line_col(TEXT, i) for i in offsets]


def test_grid_family_on_real_structures_equals_the_scan():
    for s in [
        structpos.parse("One two.\n  Three four.\n\nFive.", "document"),
        structpos.parse("name,age\nann,31\nbob,4\n", "table"),
        structpos.parse('{"a": [1,\n 2], "b": {"c": 3}}', "json"),
    ]:
        c = compute(s, "grid")
        want = [brute_line_col(s.source, int(i)) for i in s.start]
        assert list(zip(c["grid_line"].tolist(), c["grid_col"].tolist())) == want


def test_token_grid_marks_special_tokens_and_uses_token_starts():
    offsets = [(0, 0), (0, 3), (11, 17), (24, 26)]
    line, col = token_grid(TEXT, offsets)
    assert line[0] == col[0] == -1
    assert list(zip(line[1:].tolist(), col[1:].tolist())) == [brute_line_col(TEXT, s) for s, _ in offsets[1:]]


def test_lone_surrogates_count_as_one_column():
    line, col = line_col("a\ud800b\nc", [2, 4])
    assert line.tolist() == [0, 1] and col.tolist() == [2, 0]


def test_grid_errors():
    with pytest.raises(ValueError, match="outside the text"):
        line_col("abc", [0, 4])
    with pytest.raises(SpecError):
        compute(structpos.parse("[1]", "json"), "grid:3")


# ------------------------------------------------------------------------------ coupling
def brute_significance(text: str) -> list[int]:
    out = []
    for i, ch in enumerate(text):
        if not ch.isdigit():
            out.append(-1)
            continue
        j = i
        while j + 1 < len(text) and text[j + 1].isdigit():
            j += 1
        out.append(j - i)  # digits to the right of this one in its number
    return out


@pytest.mark.parametrize("text", ["653+49=702", "7+8=15", "123456789+1=123456790", "0+0=0"])
def test_coupled_digits_of_equal_significance_share_a_position(text):
    sig = brute_significance(text)
    assert digit_significance(text).tolist() == sig
    pos = arithmetic_coupling(text)
    top = max(sig)
    for i, s in enumerate(sig):
        assert pos[i] == (0 if s < 0 else 1 + top - s)
    for i in range(len(text)):
        for j in range(len(text)):
            if sig[i] >= 0 and sig[j] >= 0:
                assert (pos[i] == pos[j]) == (sig[i] == sig[j])


def test_reversed_result_couples_by_significance():
    fwd, rev = arithmetic_coupling("653+49=702"), arithmetic_coupling("653+49=207", reverse_result=True)
    assert np.array_equal(fwd[:7], rev[:7]) and np.array_equal(fwd[7:], rev[7:][::-1])


def test_rope_logits_between_coupled_groups_depend_only_on_group_differences():
    torch.manual_seed(0)
    text = "9876+543=10419"
    pos = arithmetic_coupling(text, offset=3)
    groups = np.unique(pos, return_inverse=True)[1].reshape(-1)
    G, D = int(groups.max()) + 1, 16
    qg, kg = torch.randn(G, D, dtype=torch.float64), torch.randn(G, D, dtype=torch.float64)
    q, k = qg[groups][None, :, None], kg[groups][None, :, None]  # content depends on the group only
    rope = StructuralRoPE(D, 1)
    qr, kr = rope(q, k, torch.as_tensor(pos)[None, :, None])
    logits = torch.einsum("blhd,bmhd->blm", qr, kr)[0]
    # each pair (i, j) equals a one-pair RoPE logit at relative distance p_i - p_j
    group_pos = torch.zeros(G, dtype=torch.int64)
    group_pos[groups] = torch.as_tensor(pos)
    for g in range(G):
        for h in range(G):
            rel = torch.tensor([[[int(group_pos[g] - group_pos[h])], [0]]])
            a, b = rope(qg[g].view(1, 1, 1, D).expand(1, 2, 1, D), kg[h].view(1, 1, 1, D).expand(1, 2, 1, D), rel)
            want = (a[0, 0, 0] * b[0, 1, 0]).sum()
            sel = torch.as_tensor((groups[:, None] == g) & (groups[None, :] == h))
            assert torch.allclose(logits[sel], want.expand(int(sel.sum())), atol=1e-10), (g, h)
    # a different offset moves every digit's id and changes no logit between digits ("+", "=" keep id 0)
    qr2, kr2 = rope(q, k, torch.as_tensor(arithmetic_coupling(text, offset=40))[None, :, None])
    digits = torch.tensor([ch.isdigit() for ch in text])
    pair = digits[:, None] & digits[None, :]
    assert torch.allclose(torch.einsum("blhd,bmhd->blm", qr2, kr2)[0][pair], logits[pair], atol=1e-10)


def test_coupled_positions_errors():
    with pytest.raises(SpecError, match="-1"):
        coupled_positions([0, -3])
    with pytest.raises(SpecError, match="integer"):
        coupled_positions([0.5])
    with pytest.raises(SpecError, match="offset"):
        coupled_positions([0], offset=-1)
