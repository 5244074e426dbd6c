"""CoPE: contextual positions against brute-force counts, the interpolation against the hand formula, gradcheck."""

from __future__ import annotations

import pytest
import torch

from structpos.encoders import CoPE, cope_positions, unit_boundaries
from structpos.encoders.registry import build
from structpos.exceptions import ShapeError, SpecError

B, H, L, D = 2, 3, 7, 8


def brute_positions(g: torch.Tensor) -> torch.Tensor:
    """p[..., i, j] = Σ_{t=j..i} g[..., i, t] by explicit loops (0 for j > i)."""
    p = torch.zeros_like(g)
    n = g.shape[-1]
    for i in range(n):
        for j in range(i + 1):
            p[..., i, j] = sum(g[..., i, t] for t in range(j, i + 1))
    return p


def qk(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, L, H, D, generator=g, dtype=dtype), torch.randn(B, L, H, D, generator=g, dtype=dtype)


def test_positions_equal_brute_force_count_with_given_binary_gates():
    gates = torch.randint(0, 2, (B, H, L, L), generator=torch.Generator().manual_seed(1)).float()
    q, k = qk()
    got = CoPE(D, 16).positions(q, k, gates=gates)
    assert torch.equal(got, brute_positions(gates))


def test_learned_gates_forced_to_zero_or_one_count_exactly():
    """Saturated learned gates (|scale·q·k| huge) are 0/1; positions are then the count of keys with q·k > 0."""
    q, k = qk(2)
    cope = CoPE(D, 16, scale=1e6)
    got = cope.positions(q, k)
    selected = (torch.einsum("blhd,bmhd->bhlm", q, k) > 0).float()
    torch.testing.assert_close(got, brute_positions(selected), rtol=0, atol=1e-4)


def test_all_gates_one_give_relative_token_distance():
    q, k = qk()
    p = CoPE(D, 16).positions(q, k, gates=torch.ones(B, L))
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    expected = torch.where(j <= i, i - j + 1, 0).float()  # the sum includes both ends: i − j + 1
    assert torch.equal(p, expected.expand(B, H, L, L))


@pytest.mark.parametrize("at", ["end", "start"])
def test_unit_boundary_gates_count_units_between_key_and_query(at):
    g = torch.Generator().manual_seed(3)
    units = torch.randint(0, 3, (B, L), generator=g).cumsum(-1)  # non-decreasing unit ids (sentences)
    gates = unit_boundaries(units, at=at)
    q, k = qk()
    p = CoPE(D, 16).positions(q, k, gates=gates)
    for b in range(B):
        u = units[b].tolist()
        for i in range(L):
            for j in range(i + 1):
                if at == "end":
                    count = sum(1 for t in range(j, i + 1) if t == L - 1 or u[t] != u[t + 1])
                else:
                    count = sum(1 for t in range(j, i + 1) if t == 0 or u[t] != u[t - 1])
                assert p[b, 0, i, j] == count
                if at == "end" and u[j] == u[i]:  # ends: every key of the query's own unit alike
                    assert p[b, 0, i, j] == p[b, 0, i, i]
    assert torch.equal(p[:, 0], p[:, 1])  # given per-key gates are shared by every head


def test_unit_ends_give_units_back_with_two_levels():
    """Sentences restart per paragraph: with both levels, a key's position is the number of sentences back."""
    paragraph = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1])
    sentence = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1])  # sentences: {0, 1, 2}, {3, 4}, {5, 6, 7}
    gates = unit_boundaries(paragraph, sentence)[None]
    q, k = torch.zeros(1, 8, 1, 4), torch.zeros(1, 8, 1, 4)
    p = CoPE(4, 8).positions(q, k, gates=gates)[0, 0]
    assert p[6].tolist() == [2.0, 2.0, 2.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert unit_boundaries(sentence)[2] == 0  # the sentence level alone misses the end of paragraph 0


def test_bias_equals_hand_interpolation_and_clips_at_max_position():
    q, k = qk(4)
    P = 4  # small: many positions exceed P − 1 and must clip
    cope = CoPE(D, P)
    bias = cope(q, k)
    pos = cope.positions(q, k)
    assert pos.max() > P - 1
    E = cope.embedding.detach()
    for b in range(B):
        for h in range(H):
            for i in range(L):
                for j in range(i + 1):
                    p = min(float(pos[b, h, i, j]), P - 1.0)
                    lo = int(p // 1)
                    hi = min(lo + 1, P - 1)
                    w = p - lo
                    e = (1 - w) * E[lo] + w * E[hi]
                    torch.testing.assert_close(bias[b, h, i, j], q[b, i, h] @ e, rtol=1e-5, atol=1e-5)


def test_kv_cache_queries_match_the_full_computation():
    q, k = qk(5)
    cope = CoPE(D, 16)
    full = cope(q, k)
    last = cope(q[:, -2:], k)
    torch.testing.assert_close(last, full[:, :, -2:], rtol=0, atol=1e-6)


def test_bhld_layout_matches_blhd():
    q, k = qk(6)
    cope = CoPE(D, 16)
    other = CoPE(D, 16, qk_layout="bhld")
    other.load_state_dict(cope.state_dict())
    torch.testing.assert_close(other(q.transpose(1, 2), k.transpose(1, 2)), cope(q, k))


def test_float64_gradcheck_on_queries_keys_and_embeddings():
    torch.manual_seed(0)
    cope = CoPE(4, 5).double()
    g = torch.Generator().manual_seed(7)
    q = torch.randn(1, 4, 2, 4, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 4, 2, 4, generator=g, dtype=torch.float64, requires_grad=True)

    emb = cope.embedding.detach().clone().requires_grad_(True)

    def f(q, k, emb):
        return torch.func.functional_call(cope, {"embedding": emb}, (q, k))

    assert torch.autograd.gradcheck(f, (q, k, emb))


def test_cope_positions_helper_with_cache_offset():
    g = torch.rand(2, 5)  # 2 queries over 5 keys: the queries are keys 3 and 4
    p = cope_positions(g)
    full = brute_positions(torch.cat([torch.zeros(3, 5), g]))[3:]
    torch.testing.assert_close(p, full)


def test_errors_and_registry():
    q, k = qk()
    with pytest.raises(ShapeError, match="gates must have shape"):
        CoPE(D, 8)(q, k, gates=torch.ones(L))
    with pytest.raises(ShapeError, match="q must have shape"):
        CoPE(D + 2, 8)(q, k)
    with pytest.raises(SpecError, match="max_positions"):
        CoPE(D, 0)
    with pytest.raises(ShapeError, match="unit_ids"):
        unit_boundaries(torch.ones(3))
    with pytest.raises(ShapeError, match="one shape"):
        unit_boundaries(torch.ones(3, dtype=torch.long), torch.ones(4, dtype=torch.long))
    with pytest.raises(SpecError, match="at must be"):
        unit_boundaries(torch.ones(3, dtype=torch.long), at="middle")
    assert isinstance(build("cope", head_dim=D, max_positions=8), CoPE)


def test_fullgraph_compile_matches_eager():
    torch._dynamo.reset()
    q, k = qk(8)
    cope = CoPE(D, 16)
    compiled = torch.compile(cope, fullgraph=True, backend="eager")  # raises on any graph break
    torch.testing.assert_close(compiled(q, k), cope(q, k), rtol=1e-6, atol=1e-6)
    starts = unit_boundaries(torch.randint(0, 3, (B, L), generator=torch.Generator().manual_seed(9)).cumsum(-1))
    torch.testing.assert_close(compiled(q, k, starts), cope(q, k, starts), rtol=1e-6, atol=1e-6)
