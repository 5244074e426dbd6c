"""Smoke test of the quality benchmark suite (``benchmarks/quality``): no accuracy numbers.

Per task: (1) 30 optimiser steps on one fixed batch lower the loss for **every** encoding
(gradients reach the model through each position encoding), and (2) the coordinates in a
batch equal an independent computation for the same input (networkx distances, the library's
own coordinate functions on a freshly parsed input, digit arithmetic). Data: the bundled real
samples in ``tests/data/quality`` (WTQ tables, UD EWT sentences), never ``../shared``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

pytest.importorskip("tree_sitter")

import structpos
from benchmarks.quality import _common
from benchmarks.quality.tasks import TASKS


@pytest.fixture(scope="module", autouse=True)
def bundled_data():
    mp = pytest.MonkeyPatch()
    mp.setenv("STRUCTPOS_DATA", str(_common.FALLBACK_DATA))
    torch.set_num_threads(1)
    yield
    mp.undo()


_BUILT: dict[str, object] = {}


def built(name: str):
    if name not in _BUILT:
        task = TASKS[name]()
        task.build("smoke")
        _BUILT[name] = task
    return _BUILT[name]


def fixed_batch_loss_drops(task, enc: str, steps: int = 30) -> tuple[float, float]:
    model = task.model(enc, seed=0)
    batch = task.batch(task.train[:12], enc)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with torch.no_grad():
        before = float(task.loss_counts(model, batch)[0])
    for _ in range(steps):
        loss = task.loss_counts(model, batch)[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = float(task.loss_counts(model, batch)[0])
    return before, after


@pytest.mark.parametrize("name", list(TASKS))
def test_training_lowers_loss_for_every_encoding(name):
    task = built(name)
    assert _common.data_dir() == _common.FALLBACK_DATA
    assert task.train, f"{name}: no training examples from the bundled data"
    for enc in task.encodings:
        before, after = fixed_batch_loss_drops(task, enc)
        assert np.isfinite(before) and after < 0.9 * before, f"{name}/{enc}: loss {before:.3f} -> {after:.3f}"


def test_table_coordinates_match_a_fresh_parse():
    task = built("table_lookup")
    ex = task.train[0]
    b = task.batch(task.train[:4], "table_rope")
    n = len(ex["tok"])
    rc = b["rc"][0, :n].numpy() - 1
    assert np.array_equal(rc, ex["table_rc"])
    # independent: cells are row-major over an R x C grid
    cols = int(rc[:, 1].max()) + 1
    k = np.arange(len(rc))
    assert np.array_equal(rc[:, 0], k // cols) and np.array_equal(rc[:, 1], k % cols)
    # the answer cell is in the marked key's row and the marked header's column
    r, c = divmod(int(ex["ptr"]), cols)
    key, head = np.flatnonzero(ex["seg"] == 1)[0], np.flatnonzero(ex["seg"] == 2)[0]
    assert key == r * cols and head == c and r >= 1 and c >= 1
    grid = ex["tok"].reshape(-1, cols)
    assert list(grid[1:, 0]).count(grid[r, 0]) == 1  # the key string is unique in its column


def test_ud_tree_coordinates_and_distances_match_networkx():
    task = built("ud_relations")
    s = task.sentences["train"][3]
    ex = task.train[3]
    c = structpos.compute_coords(s, "tree")
    node = [int(w) for w in np.argsort(s.attrs["token_index"])]
    assert np.array_equal(ex["tree_gold"][:, 0], c["depth"][node])  # the oracle columns: the gold parse
    assert np.array_equal(ex["tree_gold"][:, 1], c["sibling"][node])
    g = nx.Graph([(int(p), i) for i, p in enumerate(s.parent) if p >= 0])
    ref = np.array([[nx.shortest_path_length(g, int(u), int(v)) for v in node] for u in node])
    b = task.batch(task.train[3:5], "tree_bias_gold")
    n = len(node)
    assert np.array_equal(b["pair_tdist_gold"][0, :n, :n].numpy(), ref)
    heads = np.asarray(s.attrs["head"])[node]  # 1-based word ids; depth 1 <=> head is the root word
    assert np.array_equal(ex["tree_gold"][:, 0] == 0, heads == 0)


def test_ud_predicted_parse_coordinates_match_networkx_on_the_predicted_heads():
    """The claimed encodings read the predicted tree: depth = hops to its root, distances = hops."""
    from benchmarks.quality.ud_relations import with_heads

    task = built("ud_relations")
    s = task.sentences["test"][2]
    ex = task.splits["test"][2]
    n = s.num_nodes
    depth, dist = ex["tree"][:, 0], ex["pair_tdist"]
    # a word's head is its neighbour one step closer to the root (depth 0)
    heads = np.array(
        [-1 if depth[w] == 0 else int(np.flatnonzero((dist[w] == 1) & (depth == depth[w] - 1))[0]) for w in range(n)]
    )
    g = nx.Graph([(w, int(h)) for w, h in enumerate(heads) if h >= 0])
    g.add_nodes_from(range(n))
    root = int(np.flatnonzero(heads == -1)[0])
    assert nx.is_tree(g)
    assert all(nx.shortest_path_length(g, root, w) == depth[w] for w in range(n))
    assert all(nx.shortest_path_length(g, u, v) == dist[u, v] for u in range(n) for v in range(n))
    again = with_heads(s, heads)  # the library's layout of these heads gives the same coordinates
    c = structpos.compute_coords(again, "tree")
    assert np.array_equal(c["depth"][np.argsort(again.attrs["token_index"])], depth)


def test_decode_heads_returns_a_tree_and_keeps_a_tree_argmax():
    from benchmarks.quality.ud_relations import decode_heads

    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 12):
        for _ in range(20):
            heads = decode_heads(rng.normal(size=(n + 1, n + 1)))
            g = nx.DiGraph([(int(h), w) for w, h in enumerate(heads) if h >= 0])
            g.add_nodes_from(range(n))
            assert (heads == -1).sum() == 1 and nx.is_arborescence(g)
        gold = np.array([-1] + [int(rng.integers(0, w)) for w in range(1, n)])  # a tree: heads point left
        scores = np.full((n + 1, n + 1), -5.0)
        for w, h in enumerate(gold):
            scores[w + 1, h + 1] = 5.0
        assert np.array_equal(decode_heads(scores), gold)


def test_code_window_coordinates_come_from_the_masked_source():
    """No leak: re-parse the window's top-level statements with the masked tokens replaced (string
    surgery written here), and every token's depth and distances must equal the example's."""
    from benchmarks.quality.code_mlm import MASK_TEXT, enclosing_span
    from structpos.coords.code_levels import code_levels

    task = built("code_mlm")
    for ex in task.train[:3]:
        f = task.files["train"][int(ex["file"])]
        lo, n = int(ex["lo"]), len(ex["tok"])
        masked = ex["tok"] == 2
        assert masked.any() and (ex["tgt"][~masked] == -100).all()
        start, stop = enclosing_span(f, lo, lo + n)
        tops = f["top_spans"]  # whole top-level statements only: each one inside the slice or outside it
        assert all(b <= start or a >= stop or (start <= a and b <= stop) for a, b in tops)
        text, shift, new_spans = f["src"][start:stop], -start, []
        for (a, b), m in zip(f["offsets"][lo : lo + n], masked):
            a, b = int(a) + shift, int(b) + shift
            if m:
                text = text[:a] + MASK_TEXT + text[b:]
                shift += len(MASK_TEXT) - (b - a)
                b = a + len(MASK_TEXT)
            new_spans.append((a, b))
        assert all(text[a:b] == MASK_TEXT for (a, b), m in zip(new_spans, masked) if m)
        tree = structpos.parse(text, "code", language=f["language"])
        c = structpos.compute_coords(tree, "tree")
        starts, ends, depth = np.asarray(tree.start), np.asarray(tree.end), c["depth"]

        def deepest_cover(a, b):  # the deepest node whose span holds the token (last in preorder on ties)
            cover = np.flatnonzero((starts <= a) & (ends >= b))
            return int(cover[np.argmax(depth[cover][::-1]) * -1 - 1]) if len(cover) else 0

        nodes = [deepest_cover(a, b) for a, b in new_spans]
        assert np.array_equal(ex["ds"][:, 0], c["depth"][nodes])
        g = nx.Graph([(int(p), i) for i, p in enumerate(tree.parent) if p >= 0])
        lengths = nx.single_source_shortest_path_length(g, nodes[0])
        assert np.array_equal(ex["pair_tdist"][0], [lengths[v] for v in nodes])
        # HiRoPE levels of the library's `hirope` family, token level recounted over the window
        lv = code_levels(tree.labels, tree.parent, f["language"])
        fs = [int(lv["function"][v]) for v in nodes]
        ss = [int(lv["statement"][v]) for v in nodes]
        ts = [sum((fs[j], ss[j]) == (fs[i], ss[i]) for j in range(i)) for i in range(n)]
        assert np.array_equal(ex["hiro_ast"], np.stack([fs, ss, ts], 1))


def test_tree_root_bp_equals_brute_force_enumeration():
    import itertools

    from benchmarks.quality.tree_root import Q, random_tree, root_posterior, transition

    rng = np.random.default_rng(1)
    m = transition()
    for _ in range(5):
        n = 7
        parent = random_tree(n, rng)
        leaf = np.ones(n, bool)
        leaf[parent[parent >= 0]] = False
        leaf[0] = False
        symbol = rng.integers(0, Q, n)
        ref = np.zeros(Q)
        for xs in itertools.product(range(Q), repeat=n):
            if all(xs[v] == symbol[v] for v in range(n) if leaf[v]):
                ref[xs[0]] += np.prod([m[xs[parent[v]], xs[v]] for v in range(1, n)]) / Q
        assert np.allclose(root_posterior(parent, symbol, leaf), ref / ref.sum())


def test_grid_copy_targets_are_the_cell_above():
    task = built("grid_copy")
    for ex in task.train[:5]:
        rc, tok, tgt = ex["rc"], ex["tok"], ex["tgt"]
        for i in np.flatnonzero(tgt >= 0):
            above = np.flatnonzero((rc[:, 0] == rc[i, 0] - 1) & (rc[:, 1] == rc[i, 1]))
            assert len(above) == 1 and tok[above[0]] - 2 == tgt[i]


def test_every_task_declares_roles_and_reference_predictors():
    for name in TASKS:
        task = built(name)
        roles = task.roles()
        assert "claimed" in roles.values() and "baseline" in roles.values(), name
        task.val = task.train[-4:]
        for r in task.reference_runs(0):
            assert all(0.0 <= r[f"{s}_acc"] <= 1.0 for s in task.splits if task.splits[s]), (name, r)
        if task.probe_keys:
            assert any(r["encoding"] == "probe" for r in task.reference_runs(0)), name


def test_graph_distances_and_rwse_match_references():
    task = built("graph_distance")
    ex = task.train[1]
    n = len(ex["tok"])
    ei = ex["edges"]
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(ei[0].tolist(), ei[1].tolist()))
    ref = dict(nx.all_pairs_shortest_path_length(g))
    assert all(ex["pair_spd"][u, v] == ref[u][v] for u in range(n) for v in range(n))
    u, v = np.flatnonzero(ex["tok"] == 2)[0], np.flatnonzero(ex["tok"] == 3)[0]
    assert ex["tgt"][u] == min(ref[u][v], 8) - 1
    A = nx.to_numpy_array(g, nodelist=range(n))
    P = A / A.sum(1, keepdims=True)
    diag = [np.diag(np.linalg.matrix_power(P, k)) for k in range(1, 17)]
    assert np.allclose(ex["rw"], np.stack(diag, 1), atol=1e-5)


def test_dag_labels_follow_edge_direction():
    task = built("dag_reachability")
    for ex in task.train[:10]:
        ei = ex["edges_dir"]
        g = nx.DiGraph()
        g.add_nodes_from(range(len(ex["tok"])))
        g.add_edges_from(zip(ei[0].tolist(), ei[1].tolist()))
        assert nx.is_directed_acyclic_graph(g)
        u, v = np.flatnonzero(ex["tok"] == 2)[0], np.flatnonzero(ex["tok"] == 3)[0]
        assert ex["tgt"][u] == int(nx.has_path(g, u, v))
        assert nx.has_path(g, u, v) != nx.has_path(g, v, u)  # always comparable, one direction
        assert (ex["pair_spd"] == ex["pair_spd"].T).all()  # the symmetric baselines see no direction


def test_addition_test_sums_are_not_training_sums():
    task = built("addition")
    seen = {tuple(e["key"]) for e in task.train}
    for split in task.splits.values():
        keys = [tuple(e["key"]) for e in split]
        assert not seen & set(keys) and len(set(keys)) == len(keys)


def test_addition_coupled_ids_pair_equal_significance():
    task = built("addition")
    for ex in task.train[:10]:
        n = int(ex["n"])
        tok, cid = ex["tok"], ex["coupled"][:, 0]
        a = int("".join(map(str, tok[:n][::-1])))
        b = int("".join(map(str, tok[n + 1 : 2 * n + 1][::-1])))
        c = int("".join(map(str, tok[2 * n + 2 :][::-1])))
        assert a + b == c
        for i in range(1, n + 1):  # digit i-1 of a, b and c share coupled id i
            at = np.flatnonzero(cid == i)
            assert list(at) == [i - 1, n + i, 2 * n + 1 + i]


def test_document_ids_match_a_fresh_parse():
    task = built("doc_retrieval")
    b = task.batch(task.train[:4], "hrope")
    ex = task.train[0]
    n = len(ex["tok"])
    assert np.array_equal(b["hier"][0, 3:n].numpy() - np.array([1, 0, 0]), ex["doc_hier"])
    hier = ex["doc_hier"]
    first = int(ex["ptr"]) - 3
    assert hier[first, 2] == 0  # the answer starts a sentence ...
    w = np.flatnonzero(ex["tok"][3:] == ex["tok"][1])
    assert len(w) == 1 and (hier[w[0], :2] == hier[first, :2]).all()  # ... the one holding the query word


def test_sorting_network_labels_follow_the_zero_one_principle():
    """A network labelled valid sorts random integer inputs too (0-1 principle); an invalid one leaves
    some 0/1 input unsorted (found here by its own enumeration, written apart from the task's)."""
    import itertools

    from benchmarks.quality.sorting_network import network_dag, random_network, sorts

    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(40):
        w = int(rng.integers(4, 7))
        net = random_network(w, rng)
        label = sorts(net, w)
        seen.add(label)

        def run(x, net=net):
            x = list(x)
            for i, j in net:
                if x[i] > x[j]:
                    x[i], x[j] = x[j], x[i]
            return x

        unsorted = [b for b in itertools.product((0, 1), repeat=w) if run(b) != sorted(b)]
        assert label == (not unsorted)
        if label:
            assert all(run(x) == sorted(x) for x in rng.integers(0, 100, size=(50, w)).tolist())
        g = network_dag(net, w)  # a DAG whose sink is OUT and whose edges join comparators sharing a wire
        assert nx.is_directed_acyclic_graph(g) and g.out_degree(len(net)) == 0
        assert all(set(net[u]) & set(net[v]) for u, v in g.edges() if v < len(net))
    assert seen == {True, False}


def test_unit_lookup_target_is_the_first_word_k_sentences_back():
    from benchmarks.quality.unit_lookup import DOT, Q0, W0

    task = built("unit_lookup")
    for ex in task.train[:20]:
        tok, k = ex["tok"], int(ex["tok"][-1] - Q0 + 1)
        words, cur = [], []
        for t in tok[:-1].tolist():  # split on the separator, written apart from the task
            if t == DOT:
                words.append(cur)
                cur = []
            else:
                cur.append(t)
        assert not cur and ex["tgt"][-1] == words[-k][0] - W0 and int(ex["k"]) == k
        assert ex["units"][:, 0].sum() == len(words) + 1  # a gate at every sentence end and at the query
