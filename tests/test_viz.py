"""structpos.viz and ``structpos show``: layouts, distances, rotary scores, rendered files."""

from __future__ import annotations

import os
import struct
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from structpos import (
    Structure,
    StructureError,
    viz,
)
from structpos.cli import main as cli_main


def random_preorder_tree(n: int, rng: np.random.Generator) -> np.ndarray:
    """A random tree in preorder: node i's parent is on the root path of node i-1."""
    parent = np.full(n, -1)
    path = [0]
    for i in range(1, n):
        keep = int(rng.integers(1, len(path) + 1))
        path = path[:keep]
        parent[i] = path[-1]
        path.append(i)
    return parent


def loop_depth(parent: np.ndarray) -> np.ndarray:
    d = np.zeros(len(parent), dtype=np.int64)
    for i, p in enumerate(parent):
        d[i] = 0 if p < 0 else d[p] + 1
    return d


def png_size(path) -> tuple[int, int]:
    data = open(path, "rb").read(32)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    return struct.unpack(">II", data[16:24])


def tree(parent, labels=None, name="t") -> Structure:
    parent = np.asarray(parent)
    return Structure(kind="tree", labels=labels or [f"n{i}" for i in range(len(parent))], parent=parent, name=name)


# ------------------------------------------------------------------ layouts and distances
@pytest.mark.parametrize("seed", range(4))
def test_tree_depth_and_layout_match_definitions(seed):
    rng = np.random.default_rng(seed)
    parent = random_preorder_tree(300, rng)
    parent[150] = -1  # a forest: a second root
    parent[151:][parent[151:] < 150] = 150
    depth = viz.tree_depth(parent)
    assert np.array_equal(depth, loop_depth(parent))
    pos = viz.tree_layout(tree(parent))
    child = np.flatnonzero(parent >= 0)
    assert np.allclose(pos[child, 1], pos[parent[child], 1] - 1)  # one level per edge
    leaves = np.setdiff1d(np.arange(300), parent[child])
    assert len(np.unique(pos[leaves, 0])) == len(leaves)  # leaves never overlap
    for p in np.unique(parent[child]):  # a parent sits within its children's span
        xs = pos[parent == p, 0]
        assert xs.min() - 1e-9 <= pos[p, 0] <= xs.max() + 1e-9


def test_tree_layout_rejects_non_preorder():
    s = Structure(kind="tree", labels=["a", "b", "c"], parent=[-1, 2, 0], name="bad.json")
    with pytest.raises(StructureError, match="bad.json"):
        viz.tree_layout(s)


def test_hop_distance_matches_networkx_and_tree_distance():
    nx = pytest.importorskip("networkx")
    g = nx.les_miserables_graph()
    nodes = sorted(g.nodes)
    idx = {v: i for i, v in enumerate(nodes)}
    ei = np.array([[idx[u], idx[v]] for u, v in g.edges()]).T
    s = Structure(kind="graph", labels=nodes, edge_index=ei, name="lesmis")
    d = viz.structural_distance(s)
    ref = dict(nx.all_pairs_shortest_path_length(g))
    for u in nodes[:10]:
        for v in nodes:
            assert d[idx[u], idx[v]] == ref[u][v]
    tree_mod = pytest.importorskip("structpos.coords.tree")
    parent = random_preorder_tree(120, np.random.default_rng(7))
    assert np.array_equal(viz.structural_distance(tree(parent)), tree_mod.tree_distance(parent))


def test_graph_layout_recovers_a_path_exactly():
    # hop distances on a path are Euclidean in 1-D, so classical MDS must reproduce them
    n = 12
    s = Structure(
        kind="graph", labels=[str(i) for i in range(n)], edge_index=np.array([np.arange(n - 1), np.arange(1, n)])
    )
    pos = viz.graph_layout(s)
    euclid = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    assert np.allclose(euclid, np.abs(np.arange(n)[:, None] - np.arange(n)[None]), atol=1e-6)


def test_truncate_keeps_prefix_and_induced_edges():
    ei = np.array([[0, 1, 2, 3, 0], [1, 2, 3, 4, 4]])
    s = Structure(kind="graph", labels=list("abcde"), edge_index=ei, attrs={"w": np.arange(5)})
    t = viz.truncate(s, 3)
    assert t.num_nodes == 3 and t.truncated_from == 5
    assert t.edge_index.tolist() == [[0, 1], [1, 2]]
    assert t.attrs["w"].tolist() == [0, 1, 2]
    assert viz.truncate(s, 10) is s
    with pytest.raises(ValueError):
        viz.truncate(s, 0)


# ------------------------------------------------------------------ rotary scores
def test_sectioned_scores_match_structural_rope_and_are_relative():
    enc_mod = pytest.importorskip("structpos.encoders")
    rng = np.random.default_rng(0)
    coords = rng.integers(0, 30, size=(40, 3)).astype(float)
    for vectors in ("ones", "random"):
        ours = viz.rotary_scores(coords, head_dim=32, vectors=vectors)
        lib = viz.rotary_scores(coords, encoder=enc_mod.StructuralRoPE(32, 3), head_dim=32, vectors=vectors)
        assert np.allclose(ours, lib, atol=1e-5)
        # relative: a common shift of every coordinate changes nothing
        assert np.allclose(viz.rotary_scores(coords + [5, -3, 11], head_dim=32, vectors=vectors), ours, atol=1e-9)
    ones = viz.rotary_scores(coords, head_dim=32, vectors="ones")
    assert np.allclose(np.diag(ones), 1.0)  # ⟨Rq, Rq⟩ = |q|² = 1
    assert (ones <= 1 + 1e-9).all()  # Cauchy–Schwarz


def test_rotary_scores_brute_force_rotation_matrices():
    # independent reference: build each 2x2 block rotation explicitly (half-split pairs)
    rng = np.random.default_rng(1)
    c = rng.normal(size=(9, 2)) * 4
    d, base = 8, 10000.0
    q, k = viz.probe_vectors(d, "random", seed=3)
    axis = np.array([0, 0, 1, 1])
    freq = base ** (-2 * np.arange(4) / d)

    def rot(x, ci):
        y = x.copy()
        for j in range(4):
            a = ci[axis[j]] * freq[j]
            y[j], y[j + 4] = np.cos(a) * x[j] - np.sin(a) * x[j + 4], np.sin(a) * x[j] + np.cos(a) * x[j + 4]
        return y

    ref = np.array([[rot(q, c[i]) @ rot(k, c[j]) for j in range(9)] for i in range(9)])
    assert np.allclose(viz.rotary_scores(c, head_dim=d, vectors="random", seed=3), ref, atol=1e-12)


def test_rotary_scores_reject_bad_input():
    with pytest.raises(ValueError, match="node 2"):
        viz.rotary_scores(np.array([[0.0], [1.0], [np.nan]]))
    with pytest.raises(ValueError, match="head_dim"):
        viz.rotary_scores(np.zeros((3, 1)), head_dim=7)
    with pytest.raises(ValueError, match="axes"):
        viz.rotary_scores(np.zeros((3, 5)), head_dim=8)


def test_node_values_and_errors():
    s = tree([-1, 0, 0, 1], labels=["a", "b", "b", "c"])
    vals, cat = viz.node_values(s, "depth")
    assert vals.tolist() == [0, 1, 1, 2] and not cat
    vals, cat = viz.node_values(s, "label")
    assert cat and list(vals) == ["a", "b", "b", "c"]
    vals, _ = viz.node_values(s, "lap:1", {"lap": np.arange(8).reshape(4, 2)})
    assert vals.tolist() == [1, 3, 5, 7]
    with pytest.raises(ValueError, match="available"):
        viz.node_values(s, "nonsense")
    with pytest.raises(ValueError, match="column 5"):
        viz.node_values(s, "lap:5", {"lap": np.zeros((4, 2))})


# ------------------------------------------------------------------ rendering
def test_show_figure_png_size_and_html_self_contained(tmp_path):
    parent = random_preorder_tree(45, np.random.default_rng(2))
    s = tree(parent)
    fig = viz.show_figure(s, size=(640, 480), dpi=80)
    png = viz.save(fig, tmp_path / "t.png")
    assert png_size(png) == (640, 480)
    assert png.stat().st_size > 10_000  # a real drawing, not a blank canvas
    html = viz.save(fig, tmp_path / "t.html", facts={"nodes": 45}).read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "</html>" in html
    lowered = html.lower()
    for external in ("<script", "<link", 'src="http', "url(http", "@import"):
        assert external not in lowered
    with pytest.raises(ValueError, match="unsupported"):
        viz.save(fig, tmp_path / "t.bmp")


def test_blank_png_differs_from_drawing(tmp_path):
    # the non-emptiness check above must be able to fail: an empty figure compresses far smaller
    from matplotlib.figure import Figure

    blank = viz.save(Figure(figsize=(8, 6), dpi=80), tmp_path / "blank.png")
    assert png_size(blank) == (640, 480)
    assert blank.stat().st_size < 10_000


def test_cli_show_conllu_png(shared_data, tmp_path, capsys):
    out = tmp_path / "ud.png"
    rc = cli_main(
        [
            "show",
            str(shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"),
            "--index",
            "5",
            "-o",
            str(out),
            "--size",
            "900x700",
            "--color-by",
            "label",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert png_size(out) == (900, 700) and out.stat().st_size > 10_000


def test_cli_show_table_html_truncates_with_message(shared_data, tmp_path, capsys):
    out = tmp_path / "table.html"
    rc = cli_main(["show", str(shared_data / "wtq" / "200-csv" / "0.csv"), "-o", str(out), "--max-nodes", "40"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "has 99 nodes" in err and "first 40" in err and "--max-nodes" in err
    text = out.read_text()
    assert "40 of 99" in text and "<svg" in text


def test_cli_show_errors_are_clean(tmp_path, capsys):
    src = tmp_path / "x.json"
    src.write_text('{"a": [1, 2, {"b": null}]}')
    assert cli_main(["show", str(src), "-o", str(tmp_path / "x.png"), "--color-by", "nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err
    assert cli_main(["show", str(src), "-o", str(tmp_path / "x.png"), "--size", "big"]) == 2
    assert "--size" in capsys.readouterr().err
    assert cli_main(["show", str(tmp_path / "missing.json"), "-o", str(tmp_path / "x.png")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli_main(["show", str(src), "-o", str(tmp_path / "x.gif")]) == 2
    assert "unsupported" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_viz_never_loads_a_gui_backend(tmp_path):
    import subprocess

    code = (
        "import sys, numpy as np; from structpos import Structure, viz;"
        "s = Structure(kind='tree', labels=list('abc'), parent=[-1, 0, 0]);"
        f"viz.save(viz.show_figure(s, size=(400, 300)), r'{tmp_path / 'a.png'}');"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert png_size(tmp_path / "a.png") == (400, 300)


def test_cli_show_graph_edgelist_svg(tmp_path, capsys):
    nx = pytest.importorskip("networkx")
    src = tmp_path / "karate.edgelist"
    nx.write_edgelist(nx.karate_club_graph(), src, data=False)
    out = tmp_path / "karate.svg"
    rc = cli_main(["show", str(src), "-o", str(out), "--color-by", "lap:0", "--size", "800x600"])
    assert rc == 0, capsys.readouterr().err
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "WIRE" in text  # spectral coords -> WIRE
    bad = tmp_path / "bad.gml"
    bad.write_text("graph [ node [ id 0 ")
    assert cli_main(["show", str(bad), "-o", str(out)]) == 2
    assert "cannot read as a graph" in capsys.readouterr().err
