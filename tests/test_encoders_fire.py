"""FIRE: the bias against a brute-force evaluation of the formula, the FlexAttention score_mod against the
dense bias (attention outputs and parameter gradients), float64 gradcheck on θ, c and the threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from structpos.encoders import FIRE, row_max_distance, shortest_path_distance, tree_distance
from structpos.exceptions import ShapeError, SpecError
from structpos.integrations.flex import (
    block_mask,
    causal_mask_mod,
    fire_score_mod,
    flex,
    spd_distance_fn,
    spd_tables,
    token_distance_fn,
    tree_distance_fn,
)

PARENT = [-1, 0, 1, 1, 0, 4, 4, 6]  # preorder tree of 8 nodes
H = 3


def brute_bias(fire: FIRE, dist: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """b[h, i, j] = f(ψ(d)/ψ(max(L_i, L_thr)))_h with ψ(x) = log(c x + 1), the MLP written out by hand."""
    c, thr = fire.c.item(), fire.threshold.item()
    w1 = fire.mlp[0].weight.detach().double().numpy()[:, 0]
    b1 = fire.mlp[0].bias.detach().double().numpy()
    w2 = fire.mlp[2].weight.detach().double().numpy()
    b2 = fire.mlp[2].bias.detach().double().numpy()
    n, m = dist.shape
    out = np.zeros((fire.num_heads, n, m))
    for i in range(n):
        for j in range(m):
            d = dist[i, j]
            for h in range(fire.num_heads):
                if d < 0:
                    out[h, i, j] = fire.unreachable
                    continue
                x = math.log(c * d + 1) / math.log(c * max(scale[i], thr) + 1)
                hidden = [max(0.0, w1[u] * x + b1[u]) for u in range(len(w1))]
                out[h, i, j] = sum(hidden[u] * w2[h, u] for u in range(len(w1))) + b2[h]
    return out


def make_fire(seed=0, **kw) -> FIRE:
    torch.manual_seed(seed)
    fire = FIRE(H, hidden=8, **kw)
    with torch.no_grad():
        fire.c.fill_(0.7)
    return fire


@pytest.mark.parametrize("kind", ["token", "tree", "spd"])
def test_bias_equals_brute_force_formula(kind):
    fire = make_fire(threshold=3.0, unreachable=-2.5)
    if kind == "token":
        i = np.arange(9)
        dist = np.where(i[:, None] >= i[None, :], i[:, None] - i[None, :], -1)
    elif kind == "tree":
        dist = tree_distance([-1, 0, 1, 0, -1, 4])  # a forest: two trees, cross pairs unreachable
    else:
        edges = torch.tensor([[0, 1, 2, 3, 5], [1, 2, 3, 0, 6]])
        dist = shortest_path_distance(edges, num_nodes=7)
    scale = np.clip(dist, 0, None).max(-1).astype(float)
    if kind == "token":
        assert (scale == np.arange(9)).all()  # the default L_i of causal token distance is the query position
    got = fire(torch.as_tensor(dist)).double().detach().numpy()
    np.testing.assert_allclose(got, brute_bias(fire, dist, scale), rtol=1e-5, atol=1e-5)


def test_explicit_query_scale_and_batch_shape():
    fire = make_fire(threshold=1.0)
    dist = torch.as_tensor(tree_distance(PARENT))[None].expand(2, -1, -1)
    scale = torch.tensor([[5.0] * 8, [2.0] * 8])
    got = fire(dist, scale).detach().double().numpy()
    assert got.shape == (2, H, 8, 8)
    for b in range(2):
        np.testing.assert_allclose(got[b], brute_bias(fire, dist[b].numpy(), scale[b].numpy()), rtol=1e-5, atol=1e-5)


def attention_pair(fire, dist_fn, dense_dist, scale, mask_mod=None, seed=1):
    """(flex output with the FIRE score_mod, SDPA output with the dense FIRE bias) on the same q, k, v."""
    B, L, D = dense_dist.shape[0], dense_dist.shape[-1], 8
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, D, generator=g) for _ in range(3))
    bias = fire(dense_dist, scale)
    bm = None
    if mask_mod is not None:
        bm = block_mask(mask_mod, B, H, L, L)
        i = torch.arange(L)
        bias = bias.masked_fill(i[None, :] > i[:, None], float("-inf"))
    out_flex = flex(q, k, v, fire_score_mod(fire, dist_fn, scale), bm)
    out_dense = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return out_flex, out_dense


def test_score_mod_matches_dense_bias_token_distance_causal():
    fire = make_fire(threshold=4.0)
    L = 16
    i = torch.arange(L)
    dense = torch.where(i[:, None] >= i[None, :], i[:, None] - i[None, :], -1)[None].expand(2, L, L)
    scale = i[None].float().expand(2, L)
    out_flex, out_dense = attention_pair(fire, token_distance_fn(), dense, scale, causal_mask_mod())
    torch.testing.assert_close(out_flex, out_dense, rtol=1e-5, atol=1e-5)


def test_score_mod_matches_dense_bias_tree_distance():
    fire = make_fire(threshold=2.0, unreachable=-1.0)
    node = torch.tensor([[0, 1, 2, 3, -1, 4, 5, 6, 7, 7], [7, 6, 5, 4, 3, 2, 1, 0, -1, 0]])
    full = torch.as_tensor(tree_distance(PARENT))
    safe = node.clamp(min=0)
    dense = full[safe[:, :, None], safe[:, None, :]]
    dense = torch.where((node[:, :, None] < 0) | (node[:, None, :] < 0), -1, dense)
    torch.testing.assert_close(tree_distance_fn(PARENT, node)(torch.arange(2)[:, None, None], *_grid(10)), dense)
    scale = row_max_distance(dense)
    out_flex, out_dense = attention_pair(fire, tree_distance_fn(PARENT, node), dense, scale)
    torch.testing.assert_close(out_flex, out_dense, rtol=1e-5, atol=1e-5)


def test_score_mod_matches_dense_bias_graph_spd_and_gradients_agree():
    fire = make_fire(threshold=1.5)
    spd0 = shortest_path_distance(torch.tensor([[0, 1, 2], [1, 2, 3]]), num_nodes=4)
    spd1 = shortest_path_distance(torch.tensor([[0, 0], [1, 2]]), num_nodes=3)
    table = spd_tables([spd0, spd1])
    gid = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0, 0]])
    node = torch.tensor([[0, 1, 2, 3, 0, 1, 2], [2, 1, 0, 3, 2, 1, 0]])
    fn = spd_distance_fn(gid, node, table)
    dense = fn(torch.arange(2)[:, None, None], *_grid(7))
    scale = row_max_distance(dense)
    out_flex, out_dense = attention_pair(fire, fn, dense, scale)
    torch.testing.assert_close(out_flex, out_dense, rtol=1e-5, atol=1e-5)
    params = [fire.c, fire.threshold, *fire.mlp.parameters()]
    g_flex = torch.autograd.grad(out_flex.square().sum(), params, allow_unused=True)
    g_dense = torch.autograd.grad(out_dense.square().sum(), params)
    for a, b in zip(g_flex, g_dense):
        torch.testing.assert_close(a if a is not None else torch.zeros_like(b), b, rtol=1e-4, atol=1e-5)


def _grid(n):
    i = torch.arange(n)
    return i[None, :, None], i[None, None, :]


def test_float64_gradcheck_on_theta_c_and_threshold():
    fire = make_fire(threshold=2.5).double()
    i = torch.arange(6)
    dist = torch.where(i[:, None] >= i[None, :], i[:, None] - i[None, :], -1)
    names = [n for n, _ in fire.named_parameters()]
    assert set(names) == {"c", "threshold", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"}
    values = tuple(p.detach().clone().requires_grad_(True) for _, p in fire.named_parameters())

    def f(*vals):
        return torch.func.functional_call(fire, dict(zip(names, vals)), (dist,))

    assert torch.autograd.gradcheck(f, values)
    # rows with L_i < L_thr send a gradient to the threshold (rows with L_i > L_thr do not)
    (g,) = torch.autograd.grad(f(*values).sum(), values[names.index("threshold")])
    assert g.abs() > 0


def test_errors():
    with pytest.raises(SpecError, match="num_heads"):
        FIRE(0)
    with pytest.raises(SpecError, match="c must be a finite number > 0"):
        FIRE(2, c=0.0)
    # each option fine alone, but ψ(threshold) = log1p(c·threshold) would be inf / 0 in float32
    with pytest.raises(SpecError, match="must be finite and > 0"):
        FIRE(2, c=1e308)
    with pytest.raises(SpecError, match="must be finite and > 0"):
        FIRE(2, threshold=1e-300)
    with pytest.raises(ShapeError, match="query_scale"):
        FIRE(2)(torch.zeros(3, 3), torch.zeros(4))
    with pytest.raises(ShapeError, match="query_scale"):
        fire_score_mod(FIRE(2), token_distance_fn(), torch.zeros(3))


def test_fullgraph_compile_matches_eager():
    torch._dynamo.reset()
    fire = make_fire()
    dist = torch.as_tensor(tree_distance(PARENT))
    compiled = torch.compile(fire, fullgraph=True, backend="eager")  # raises on any graph break
    torch.testing.assert_close(compiled(dist), fire(dist), rtol=1e-6, atol=1e-6)
