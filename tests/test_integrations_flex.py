"""FlexAttention score_mods / masks equal dense bias + SDPA (fp32, CPU), against independent references."""

from __future__ import annotations

import re
import warnings

import networkx as nx
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import and_masks, create_mask

import structpos
from structpos.align import token_coords
from structpos.encoders import SPDBias, alibi_distance_bias, alibi_slopes, tree_distance, unit_indices
from structpos.exceptions import ParseError, ShapeError
from structpos.integrations.flex import (
    block_mask,
    causal_mask_mod,
    dense_mask,
    document_mask_mod,
    euler_tables,
    flex,
    graph_kv_mask_mod,
    hierarchy_mask_mod,
    spd_score_mod,
    spd_tables,
    table_mask_mod,
    tree_distance_fn,
    tree_distance_score_mod,
)

warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")

H, D = 4, 16
SOURCE = '''def area(w, h):
    """Area of a rectangle."""
    if w < 0 or h < 0:
        raise ValueError("negative")
    return w * h


class Box:
    def __init__(self, w, h):
        self.w, self.h = w, h
'''


def qkv(B, L, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, L, D, generator=g) for _ in range(3))


def sdpa(q, k, v, bias=None, mask=None):
    attn = bias if mask is None else (mask if bias is None else bias.masked_fill(~mask, float("-inf")))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn)


def code_tokens():
    tree = structpos.parse(SOURCE, "code", language="python")
    offsets = [(m.start(), m.end()) for m in re.finditer(r"\w+|\S", SOURCE)]
    tok = token_coords(tree, offsets, "tree")
    return tree, tok


# ------------------------------------------------------------------------------- tree distance
@pytest.mark.parametrize("bias_kind", ["alibi", "table"])
def test_tree_distance_score_mod_equals_dense_bias_sdpa(bias_kind):
    tree, tok = code_tokens()
    node = torch.as_tensor(tok["node"])
    assert (node >= 0).all()
    L = node.numel()
    dist = torch.as_tensor(tree_distance(tree))[node][:, node]  # reference: LCA by range-minimum
    if bias_kind == "alibi":
        slopes = alibi_slopes(H)
        dense = alibi_distance_bias(dist, H)[None]
        mod = tree_distance_score_mod(tree.parent, node[None], slopes=slopes)
    else:
        spd_bias = SPDBias(H, max_distance=6)
        torch.nn.init.normal_(spd_bias.table.weight)
        with torch.no_grad():
            dense = spd_bias(dist)[None]
            mod = tree_distance_score_mod(tree.parent, node[None], table=spd_bias.table.weight.detach())
    q, k, v = qkv(1, L)
    ref = sdpa(q, k, v, dense)
    out = flex(q, k, v, mod)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)


def test_tree_distance_forest_and_special_tokens_unreachable():
    parent = np.array([-1, 0, 0, 2, -1, 4, 4])  # two trees
    dist = torch.as_tensor(tree_distance(parent))
    assert dist[0, 4] == -1
    node = torch.tensor([0, 1, 3, 3, 4, 6, 5, 2])
    q, k, v = qkv(1, node.numel(), seed=3)
    dense = alibi_distance_bias(dist[node][:, node], H, unreachable=-30.0)[None]
    mod = tree_distance_score_mod(parent, node[None], slopes=alibi_slopes(H), unreachable=-30.0)
    torch.testing.assert_close(flex(q, k, v, mod), sdpa(q, k, v, dense), rtol=0, atol=1e-5)
    # a token with no node (depth -1) is unreachable from every token
    node2 = node.clone()
    node2[0] = -1
    mod2 = tree_distance_score_mod(parent, node2[None], slopes=alibi_slopes(H), unreachable=-30.0)
    dense2 = dense.clone()
    dense2[..., 0, :] = -30.0
    dense2[..., :, 0] = -30.0
    torch.testing.assert_close(flex(q, k, v, mod2), sdpa(q, k, v, dense2), rtol=0, atol=1e-5)


def random_preorder_forest(rng: np.random.Generator, n: int) -> np.ndarray:
    """A forest of ``n`` nodes in preorder: each node hangs below a node on the current root path, or starts a tree."""
    parent, path = np.full(n, -1), []
    for i in range(n):
        if path and rng.random() > 0.1:
            path = path[: int(rng.integers(1, len(path) + 1))]
            parent[i] = path[-1]
        else:
            path = []
        path.append(i)
    return parent


@pytest.mark.parametrize("seed", range(6))
def test_tree_distance_fn_equals_tree_distance_on_forests_with_nodeless_tokens(seed):
    """Every pair of a ragged batch: separators between trees and node-less tokens give -1, as the dense reference."""
    rng = np.random.default_rng(seed)
    n = [0, 1, 7, 60, 200, 333][seed]
    parent = random_preorder_forest(rng, n)
    node = torch.as_tensor(rng.integers(-1, n, size=(2, 50))) if n else torch.full((2, 50), -1)
    i = torch.arange(50)
    dist = tree_distance_fn(parent, node)
    for b in range(2):
        got = dist(b, i[:, None], i[None, :])
        if n:
            want = torch.as_tensor(tree_distance(parent))[node[b].clamp(min=0)][:, node[b].clamp(min=0)]
            want = torch.where((node[b][:, None] >= 0) & (node[b][None, :] >= 0), want, -1)
        else:
            want = torch.full((50, 50), -1)
        assert got.dtype == torch.int64 and torch.equal(got, want)


def test_floor_log2_from_float_bits_is_exact_over_int32():
    from structpos.integrations.flex.tree import _floor_log2

    k = torch.arange(31, dtype=torch.int64)
    n = torch.cat([(1 << k) - 1, 1 << k, (1 << k) + 1, torch.randint(1, 2**31 - 1, (20000,))]).clamp(1, 2**31 - 1)
    want = torch.tensor([v.bit_length() - 1 for v in n.tolist()])
    assert torch.equal(_floor_log2(n.to(torch.int32)).long(), want) and torch.equal(_floor_log2(n), want)


def test_euler_tables_lca_depth_equals_parent_walk():
    tree, _ = code_tokens()
    t = euler_tables(tree.parent)
    rng = np.random.default_rng(0)

    def ancestors(n):
        out = []
        while n >= 0:
            out.append(n)
            n = tree.parent[n]
        return out

    first, sparse = t["first"], t["sparse"]
    for u, v in rng.integers(0, tree.num_nodes, size=(200, 2)):
        common = set(ancestors(u)) & set(ancestors(v))
        lca_depth = max(int(t["depth"][a]) for a in common)
        lo, hi = sorted((int(first[u]), int(first[v])))
        assert int(sparse[0, lo : hi + 1].min()) == lca_depth
        j = int(np.floor(np.log2(hi - lo + 1)))
        assert min(int(sparse[j, lo]), int(sparse[j, hi - 2**j + 1])) == lca_depth


def test_euler_tables_refuse_every_forest_not_in_preorder():
    """All parent arrays with ``parent[i] < i`` up to 6 nodes: refused exactly when a DFS
    (children in index order) does not visit the nodes as 0, 1, ..., N - 1."""
    import itertools

    def dfs_order(parent):
        children = {i: [c for c in range(len(parent)) if parent[c] == i] for i in range(-1, len(parent))}
        order, stack = [], children[-1][::-1]
        while stack:
            n = stack.pop()
            order.append(n)
            stack.extend(children[n][::-1])
        return order

    refused = 0
    for n in range(1, 7):
        for parent in itertools.product(*[range(-1, i) for i in range(n)]):
            preorder = dfs_order(parent) == list(range(n))
            if preorder:
                euler_tables(list(parent))
            else:
                refused += 1
                with pytest.raises(ParseError, match="not in preorder"):
                    euler_tables(list(parent))
    assert refused > 0


# ---------------------------------------------------------------------------------------- SPD
def test_spd_score_mod_packed_graphs_equal_networkx_dense_bias():
    graphs = [nx.cycle_graph(7), nx.path_graph(5), nx.balanced_tree(2, 2)]
    mats = []
    for g in graphs:
        n = g.number_of_nodes()
        m = np.full((n, n), -1)
        for s, lengths in nx.all_pairs_shortest_path_length(g):
            for t, d in lengths.items():
                m[s, t] = d
        mats.append(m)
    spd = spd_tables(mats)
    # two batch rows: graphs 0+1 packed, graph 2 then padding tokens (node -1); nodes repeat (several tokens per node)
    rng = np.random.default_rng(0)
    rows = []
    for gs in ([0, 1], [2]):
        gid, nid = [], []
        for g in gs:
            nodes = rng.integers(0, graphs[g].number_of_nodes(), size=9)
            gid += [g] * 9
            nid += nodes.tolist()
        rows.append((gid, nid))
    L = max(len(r[0]) for r in rows)
    gid = torch.full((2, L), -1, dtype=torch.int64)
    nid = torch.full((2, L), -1, dtype=torch.int64)
    for b, (g, n) in enumerate(rows):
        gid[b, : len(g)] = torch.tensor(g)
        nid[b, : len(n)] = torch.tensor(n)
    dense_d = torch.full((2, L, L), -1, dtype=torch.int64)
    for b in range(2):
        for i in range(L):
            for j in range(L):
                if gid[b, i] >= 0 and gid[b, i] == gid[b, j]:
                    dense_d[b, i, j] = mats[int(gid[b, i])][int(nid[b, i]), int(nid[b, j])]
    bias_mod = SPDBias(H, max_distance=4)
    torch.nn.init.normal_(bias_mod.table.weight)
    with torch.no_grad():
        dense = bias_mod(dense_d)
        mod = spd_score_mod(gid, nid, spd, table=bias_mod.table.weight.detach())
    q, k, v = qkv(2, L, seed=1)
    torch.testing.assert_close(flex(q, k, v, mod), sdpa(q, k, v, dense), rtol=0, atol=1e-5)
    mod_a = spd_score_mod(gid, nid, spd, slopes=alibi_slopes(H), unreachable=-50.0)
    dense_a = alibi_distance_bias(dense_d, H, unreachable=-50.0)
    torch.testing.assert_close(flex(q, k, v, mod_a), sdpa(q, k, v, dense_a), rtol=0, atol=1e-5)


# -------------------------------------------------------------------------------------- masks
def table_tokens(shared_data):
    """The first rows of a real WTQ table: the full shared data when present, else the committed sample."""
    files = sorted((shared_data / "wtq").rglob("*.csv"))
    assert files, f"no WTQ csv under {shared_data / 'wtq'}"  # the samples ship in tests/data/sample
    text = files[0].read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)[:6]
    text = "".join(lines)
    table = structpos.parse(text, "table", format="csv")
    offsets = [(m.start(), m.end()) for m in re.finditer(r"\w+|\S", text)][:120]
    return token_coords(table, offsets, "table")


@pytest.mark.parametrize("mode", ["row", "column", "row_or_column", "row_column_header"])
def test_table_masks_equal_dense_mask_sdpa(mode, shared_data):
    tok = table_tokens(shared_data)
    row, col = torch.as_tensor(tok["row"])[None], torch.as_tensor(tok["col"])[None]
    header = torch.as_tensor(tok["header"])[None] > 0
    r, c = row[0], col[0]
    assert r.max() >= 2 and c.max() >= 1  # several rows and columns: the masks are not trivial
    same_r, same_c = r[:, None] == r[None, :], c[:, None] == c[None, :]
    ref_mask = {"row": same_r, "column": same_c}.get(mode, same_r | same_c)
    if mode == "row_column_header":
        ref_mask = ref_mask | header[0][None, :]
    ref_mask = ref_mask | (r[:, None] < 0) | (r[None, :] < 0)
    mm = table_mask_mod(row, col, header, mode=mode)
    L = r.numel()
    assert torch.equal(dense_mask(mm, 1, 1, L, L)[0, 0], ref_mask)
    q, k, v = qkv(1, L, seed=2)
    out = flex(q, k, v, block_mask=block_mask(mm, 1, None, L, L))
    torch.testing.assert_close(out, sdpa(q, k, v, mask=ref_mask[None, None]), rtol=0, atol=1e-5)


def test_hierarchy_mask_sentence_and_paragraph():
    text = "One two. Three four five.\n\nSix seven. Eight.\n\nNine ten eleven. Twelve."
    doc = structpos.parse(text, "document")
    offsets = [(m.start(), m.end()) for m in re.finditer(r"\w+|\S", text)]
    tok = token_coords(doc, offsets, "hier")
    para, sent = torch.as_tensor(tok["paragraph"]), torch.as_tensor(tok["sentence"])
    assert para.max() == 2 and sent.max() == 1  # sentence numbers restart in each paragraph
    ids = unit_indices(torch.stack([para, sent], -1)[None], mode="global")  # global unit ids
    L = para.numel()
    q, k, v = qkv(1, L, seed=4)
    sent_key = para * 100 + sent  # (paragraph, sentence) pairs, computed independently
    for level, key in ((0, para), (1, sent_key)):
        ref = (key[:, None] == key[None, :]) & (torch.arange(L)[None, :] <= torch.arange(L)[:, None])
        mm = and_masks(hierarchy_mask_mod(ids, level), causal_mask_mod())
        out = flex(q, k, v, block_mask=block_mask(mm, 1, None, L, L))
        torch.testing.assert_close(out, sdpa(q, k, v, mask=ref[None, None]), rtol=0, atol=1e-5)


def test_document_mask_from_cu_seqlens_equals_separate_sequences():
    lengths = [5, 9, 3, 11]
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]))
    T = int(cu[-1])
    q, k, v = qkv(1, T, seed=5)
    mm = and_masks(document_mask_mod(cu), causal_mask_mod())
    out = flex(q, k, v, block_mask=block_mask(mm, 1, None, T, T))
    # reference: each document on its own through causal SDPA
    for s, e in zip(cu[:-1].tolist(), cu[1:].tolist()):
        ref = F.scaled_dot_product_attention(q[..., s:e, :], k[..., s:e, :], v[..., s:e, :], is_causal=True)
        torch.testing.assert_close(out[..., s:e, :], ref, rtol=0, atol=1e-5)


def test_graph_kv_block_mask():
    # 3 chunks (documents) then a shared question (-1); chunk 2 cites chunks 0 and 1, chunk 1 cites 0
    chunk = torch.tensor([[0] * 4 + [1] * 5 + [2] * 3 + [-1] * 4])
    adj = torch.zeros(3, 3, dtype=torch.bool)
    adj[2, 0] = adj[2, 1] = adj[1, 0] = True
    L = chunk.shape[1]
    c = chunk[0]
    ref = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        for j in range(L):
            ci, cj = int(c[i]), int(c[j])
            ref[i, j] = ci < 0 or cj < 0 or ci == cj or bool(adj[ci, cj])
    mm = graph_kv_mask_mod(chunk, adj)
    assert torch.equal(dense_mask(mm, 1, 1, L, L)[0, 0], ref)
    q, k, v = qkv(1, L, seed=6)
    out = flex(q, k, v, block_mask=block_mask(mm, 1, None, L, L))
    torch.testing.assert_close(out, sdpa(q, k, v, mask=ref[None, None]), rtol=0, atol=1e-5)


def test_bad_inputs_raise_shape_errors():
    with pytest.raises(ShapeError, match=r"\(B, L\)"):
        tree_distance_score_mod([-1, 0], torch.tensor([0, 1]), slopes=torch.ones(H))
    with pytest.raises(ShapeError, match="< N = 2"):
        tree_distance_score_mod([-1, 0], torch.tensor([[0, 5]]), slopes=torch.ones(H))
    with pytest.raises(ShapeError, match=r"\(G, N, N\)"):
        spd_score_mod(
            torch.zeros(1, 2, dtype=torch.int64),
            torch.zeros(1, 2, dtype=torch.int64),
            torch.zeros(2, 2),
            slopes=torch.ones(H),
        )
    with pytest.raises(ShapeError, match="integer"):
        table_mask_mod(torch.zeros(1, 3), torch.zeros(1, 3))


@pytest.mark.parametrize("K", [5, 16, 32])
def test_tree_distance_deep_random_forests_every_block(K):
    """Random deep forests (depth up to K − 1): Euler-tour LCAs against the range-minimum reference."""
    rng = np.random.default_rng(K)
    n = 120
    parent = np.full(n, -1)
    depth = np.zeros(n, dtype=int)
    path = [0]  # the current root path: a new node hangs below some node on it (keeps preorder)
    for i in range(1, n):
        if rng.random() < 0.03:
            path = [i]  # a new root: a forest
            continue
        keep = len(path) if rng.random() < 0.85 else int(rng.integers(1, len(path) + 1))
        path = path[:keep]
        if len(path) >= K:
            path = path[: K - 1]
        parent[i] = path[-1]
        depth[i] = depth[parent[i]] + 1
        path.append(i)
    assert depth.max() >= min(K - 1, 16)
    node = torch.as_tensor(rng.integers(0, n, size=90))
    dist = torch.as_tensor(tree_distance(parent))[node][:, node]
    q, k, v = qkv(1, node.numel(), seed=K)
    mod = tree_distance_score_mod(parent, node[None], slopes=alibi_slopes(H), unreachable=-40.0)
    ref = sdpa(q, k, v, alibi_distance_bias(dist, H, unreachable=-40.0)[None])
    torch.testing.assert_close(flex(q, k, v, mod), ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("Q,KV", [(300, 300), (128, 520), (77, 77)])
def test_chunked_block_mask_equals_create_block_mask(Q, KV):
    from torch.nn.attention.flex_attention import create_block_mask

    g = torch.Generator().manual_seed(Q + KV)
    doc = torch.sort(torch.randint(0, 4, (KV,), generator=g)).values

    def mm(b, h, q_idx, kv_idx):  # documents + causal with an offset, and a sparse stripe
        qd = doc[(q_idx + KV - Q).clamp(min=0)]
        return ((qd == doc[kv_idx]) & (kv_idx <= q_idx + KV - Q)) | (kv_idx % 97 == 0)

    ours = block_mask(mm, 2, None, Q, KV)
    ref = create_block_mask(mm, 2, None, Q, KV, device="cpu")
    assert torch.equal(ours.to_dense(), ref.to_dense())
    assert torch.equal(ours.kv_num_blocks + ours.full_kv_num_blocks, ref.kv_num_blocks + ref.full_kv_num_blocks)
    q, k, v = (torch.randn(2, H, n, D, generator=g) for n in (Q, KV, KV))
    dense = create_mask(mm, 2, 1, Q, KV, device="cpu")
    torch.testing.assert_close(flex(q, k, v, block_mask=ours), sdpa(q, k, v, mask=dense), rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- compiled flex
@pytest.mark.slow  # two CPU Inductor builds, ~10-25 s each; the tables are kept tiny
def test_compiled_flex_switching_score_mod_kinds_in_one_process():
    """``flex(compile=True)`` keeps one cached compiled function. Switching from a tree score_mod to an
    SPD one recompiles with closure tensors of other shapes; a dynamic recompile then failed in
    Inductor (``CppCompileError … cur_qSplitSize2``). Each kind must compile and equal eager flex and
    the dense bias + SDPA reference."""
    import torch._dynamo

    torch._dynamo.reset()  # start from an empty compile cache whatever ran before
    L = 8
    q, k, v = (t[:, :1] for t in qkv(1, L, seed=7))
    parent = [-1, 0, 1, 1, 0, 4, 5, 4]
    nodes = torch.arange(L)[None]
    slopes = alibi_slopes(1)
    dist_tree = torch.as_tensor(tree_distance(parent))[None]
    path = np.abs(np.arange(L)[:, None] - np.arange(L)[None, :])  # SPD of the path graph 0-1-…-7
    spd_mod = spd_score_mod(torch.zeros(1, L, dtype=torch.long), nodes, spd_tables([path]), slopes=slopes)
    mods = [
        (tree_distance_score_mod(parent, nodes, slopes=slopes), dist_tree),
        (spd_mod, torch.as_tensor(path)[None]),
        (None, None),
    ]
    for mod, dist in mods:
        out = flex(q, k, v, mod, compile=True)
        torch.testing.assert_close(out, flex(q, k, v, mod), rtol=0, atol=1e-5)
        ref = sdpa(q, k, v) if dist is None else sdpa(q, k, v, alibi_distance_bias(dist, 1))
        torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)
