"""The issue-21 graph families through ``structpos encode --coords`` (spec → Parquet → same arrays)."""

from __future__ import annotations

import json

import numpy as np

from structpos import compute_coords, parse
from structpos.cli import main
from structpos.pipeline import read_output

SPEC = "rwdir:3,rwdir_pair:2,anchor:2,peg:2,graphkv"


def test_encode_writes_the_new_graph_families(tmp_path):
    graphs = [
        {"edge_index": [[0, 1, 2, 2], [1, 2, 0, 3]], "num_nodes": 5},  # a directed cycle, a tail, an isolated node
        {"edge_index": [[0, 1], [1, 2]]},
    ]
    src = tmp_path / "graphs.jsonl"
    src.write_text("".join(json.dumps({"name": f"g{i}", "text": g}) + "\n" for i, g in enumerate(graphs)))
    out = tmp_path / "enc"
    args = ["encode", str(src), "--kind", "graph", "--coords", SPEC, "--id-field", "name", "--out", str(out)]
    assert main([*args, "--no-progress"]) == 0
    rows = read_output(out).to_pylist()
    assert [r["id"] for r in rows] == ["g0", "g1"]
    for row, g in zip(rows, graphs):
        g = dict(g)
        s = parse(np.asarray(g.pop("edge_index")), "graph", **g)
        c = compute_coords(s, SPEC)
        assert {"rwdir_fwd", "rwdir_pair_bwd", "anchor_dist", "peg", "gkv_reads"} <= set(c)
        for k, v in c.items():
            got = np.asarray(row[k], dtype=float)
            assert got.shape == v.shape, k
            assert np.allclose(got, v.astype(float)), k
