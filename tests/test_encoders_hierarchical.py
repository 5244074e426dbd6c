"""HierarchicalRoPE and unit_indices, checked on UD English-EWT paragraphs/sentences."""

from __future__ import annotations

import pytest
import torch

from structpos.encoders import HierarchicalRoPE, StructuralRoPE, unit_indices


def loop_reference(ids, mode):
    """Per-token loop: count units globally or within the enclosing unit."""
    L, A = ids.shape
    out = torch.zeros(L, A, dtype=torch.int64)
    counters = [-1] * A
    for n in range(L):
        first_change = A
        for a in range(A):
            if n == 0 or ids[n, a] != ids[n - 1, a]:
                first_change = a
                break
        for a in range(first_change, A):
            counters[a] += 1
            if mode == "within" and a > first_change:
                counters[a] = 0
        out[n] = torch.tensor(counters)
    return out


@pytest.mark.parametrize("mode", ["within", "global"])
def test_unit_indices_match_loop(mode):
    g = torch.Generator().manual_seed(0)
    steps = torch.randint(0, 2, (60, 3), generator=g)
    steps[:, 2] = 1  # every token is a new token
    ids = torch.cumsum(steps, 0)
    got = unit_indices(ids, mode)
    ref = loop_reference(ids, mode)
    assert torch.equal(got, ref)
    batched = unit_indices(torch.stack([ids, ids + 5]), mode)
    assert torch.equal(batched[0], got) and torch.equal(batched[1], got)


def read_ud_slice(path, max_sentences=60):
    """(paragraph, sentence, CoNLL-U ID) per word from the first sentences of the file."""
    rows, par, sent, n_sent, sent_in_par = [], -1, -1, 0, -1
    within_par = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# newpar"):
                par += 1
                sent_in_par = 0  # "# newpar" follows the sent_id of the paragraph's first sentence
            elif line.startswith("# sent_id"):
                sent += 1
                sent_in_par += 1
                n_sent += 1
                if n_sent > max_sentences:
                    break
            elif line and not line.startswith("#"):
                tid = line.split("\t", 1)[0]
                if tid.isdigit():
                    rows.append((par, sent, int(tid)))
                    within_par.append(sent_in_par)
    return torch.tensor(rows), torch.tensor(within_par)


def test_document_levels_on_ud_ewt(shared_data):
    rows, sent_in_par = read_ud_slice(shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu")
    ids = torch.stack([rows[:, 0], rows[:, 1], torch.arange(len(rows))], dim=-1)
    within = unit_indices(ids, "within")
    assert torch.equal(within[:, 2], rows[:, 2] - 1)  # token index within sentence == CoNLL-U ID - 1
    assert torch.equal(within[:, 1], sent_in_par)  # sentence index within paragraph
    assert torch.equal(within[:, 0], rows[:, 0] - rows[0, 0])
    glob = unit_indices(ids, "global")
    assert torch.equal(glob[:, 1], rows[:, 1] - rows[0, 1]) and torch.equal(glob[:, 2], torch.arange(len(rows)))

    rope = HierarchicalRoPE(32, "document", num_heads=2)
    q, k = torch.randn(1, len(rows), 2, 32, dtype=torch.float64), torch.randn(1, len(rows), 2, 32, dtype=torch.float64)
    c = within[None]
    as_map = {"paragraph": c[..., 0], "sentence": c[..., 1], "token": c[..., 2]}
    qr, kr = rope(q, k, as_map)
    qt, kt = rope(q, k, c)
    assert torch.equal(qr, qt) and torch.equal(kr, kt)
    s = torch.einsum("blhd,bmhd->bhlm", qr, kr)
    s2 = torch.einsum("blhd,bmhd->bhlm", *rope(q, k, c + torch.tensor([3, 0, 0])))
    torch.testing.assert_close(s, s2)  # relative in every level


def test_presets_and_errors():
    assert HierarchicalRoPE(16, "code").levels == ("function", "statement", "token")
    rope = HierarchicalRoPE(24, ["file", "token"])
    one_d = StructuralRoPE(24, 1)
    x = torch.randn(1, 5, 1, 24)
    pos = torch.arange(5)[None]
    assert torch.equal(rope(x, x, {"file": pos, "token": pos})[0], one_d(x, x, pos[..., None])[0])
    with pytest.raises(ValueError, match="missing levels"):
        rope(x, x, {"file": pos})
    with pytest.raises(ValueError, match="preset"):
        HierarchicalRoPE(16, "poem")
    with pytest.raises(ValueError, match="integers"):
        unit_indices(torch.rand(4, 2))
