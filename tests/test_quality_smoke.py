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
    # 2D-TPE positions: the row order is the token index, the column order lists column by column
    assert np.array_equal(ex["tpe_pos"][:, 0], k)
    rows = len(rc) // cols
    assert np.array_equal(ex["tpe_pos"][:, 1], rc[:, 1] * rows + rc[:, 0])


def test_ud_tree_coordinates_and_distances_match_networkx():
    task = built("ud_relations")
    s = task.sentences["train"][3]
    ex = task.train[3]
    c = structpos.compute_coords(s, "tree")
    node = ex["node"]
    assert np.array_equal(ex["tree"][:, 0], c["depth"][node])
    assert np.array_equal(ex["tree"][:, 1], c["sibling"][node])
    g = nx.Graph([(int(p), i) for i, p in enumerate(s.parent) if p >= 0])
    ref = np.array([[nx.shortest_path_length(g, int(u), int(v)) for v in node] for u in node])
    b = task.batch(task.train[3:5], "tdist_bias")
    n = len(node)
    assert np.array_equal(b["pair_tdist"][0, :n, :n].numpy(), ref)
    heads = np.asarray(s.attrs["head"])[node]  # 1-based word ids; depth 1 <=> head is the root word
    assert np.array_equal(ex["tree"][:, 0] == 0, heads == 0)


def test_code_window_coordinates_match_the_tree():
    task = built("code_mlm")
    ex = task.train[0]
    f = task.files["train"][int(ex["file"])]
    s = f["tree"]
    lo = int(np.flatnonzero(f["leaves"] == ex["node"][0])[0])
    assert np.array_equal(f["leaves"][lo : lo + len(ex["node"])], ex["node"])  # consecutive leaves
    c = structpos.compute_coords(s, "tree,hirope")
    assert np.array_equal(ex["tree"][:, 0], c["depth"][ex["node"]])
    levels = np.stack([c["hirope_function"], c["hirope_statement"], c["hirope_token"]], 1)
    assert np.array_equal(ex["hiro_ast"], levels[ex["node"]])
    g = nx.Graph([(int(p), i) for i, p in enumerate(s.parent) if p >= 0])
    u = int(ex["node"][0])
    lengths = nx.single_source_shortest_path_length(g, u)
    assert np.array_equal(ex["pair_tdist"][0], [lengths[int(v)] for v in ex["node"]])
    masked = ex["tok"] == 2
    assert masked.any() and (ex["tgt"][~masked] == -100).all()


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
    # BiPE: one segment per (paragraph, sentence), numbered from 1 in order; offsets = token ids
    seg, off = ex["bipe"][3:, 0], ex["bipe"][3:, 1]
    pairs = [tuple(p) for p in hier[:, :2]]
    ordinal = {p: i + 1 for i, p in enumerate(dict.fromkeys(pairs))}
    assert (hier[:, 1] >= 0).all() and seg.tolist() == [ordinal[p] for p in pairs]
    assert np.array_equal(off, hier[:, 2]) and ex["bipe"][:3].tolist() == [[0, 0], [0, 1], [0, 2]]
