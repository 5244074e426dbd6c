"""Task 5 — directed reachability in random DAGs: does the answer's dependence on direction show?

Input: as in task 4, one token per node in a random listing order, two marked nodes, and the
graph reaches the model only through the position encoding. The pair is always *comparable*:
one of ``source ⇝ target`` or ``target ⇝ source`` holds, and the label says which.

**Why not readable off one token's coordinates, and why symmetric encodings must fail:** the
label is a property of the ordered pair. Reversing every edge gives a DAG from the same
distribution with the same undirected graph — hence identical LapPE / RWSE / WIRE / SPD
inputs — and the opposite label, so any encoding of the *symmetrised* graph is at chance
(50 %) by construction. Direction-aware encodings: the magnetic Laplacian
(``compute_coords(s, "maglap:8")``, real and imaginary parts as additive features) and AW-RoPE
transporting q/k along the directed edges only. ``spd_dir_bias`` (directed SPD, ``-1`` when
unreachable) contains the answer in the marked pair's bias: a ceiling, not a contender.

Splits: train on DAGs of 8–16 nodes; ``test`` = new DAGs of 8–16 nodes; ``extrap`` = 24–40.

Claim (SEEDS.md, magnetic Laplacian / AW-RoPE): direction-aware PE matters on directed graphs.
"""

from __future__ import annotations

from typing import ClassVar

import networkx as nx
import numpy as np

import structpos

from ._common import Task
from .graph_distance import K_LAP, MAX_D, graph_features
from .model import Enc


def random_dag(n: int, rng: np.random.Generator) -> nx.DiGraph:
    """Edges ``i → j`` (``i < j`` in a hidden topological order) with probability ``1.8 / n``, relabelled."""
    perm = rng.permutation(n)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(len(iu)) < 1.8 / n
    g.add_edges_from((int(perm[i]), int(perm[j])) for i, j in zip(iu[keep], ju[keep]))
    return g


def encode_dag(g: nx.DiGraph, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    n = g.number_of_nodes()
    s = structpos.parse(g, "graph")
    c = structpos.compute_coords(s, f"maglap:{K_LAP},spd")
    reach = c["spd"]  # directed hop distances, -1 = unreachable
    pairs = np.argwhere(reach > 0)
    if g.number_of_edges() == 0 or not len(pairs):
        return None
    a, b = pairs[rng.integers(len(pairs))]
    forward = bool(rng.integers(2))
    u, v = (a, b) if forward else (b, a)  # label 1: source reaches target
    tok = np.ones(n, np.int64)
    tok[u], tok[v] = 2, 3
    tgt = np.full(n, -100, np.int64)
    tgt[u] = int(forward)
    ei = np.asarray(s.edges()[0])
    und = structpos.compute_coords(structpos.parse(g.to_undirected(), "graph"), "spd")["spd"]
    ex = {
        "tok": tok,
        "tgt": tgt,
        "pos": np.arange(n, dtype=np.int64)[:, None],
        "pair_spd": und.astype(np.int64),
        "pair_spd_dir": reach.astype(np.int64),
        "maglap": np.concatenate([c["maglap_re"], c["maglap_im"]], 1).astype(np.float32),
    }
    ex.update(graph_features(structpos.parse(g.to_undirected(), "graph"), n))
    ex["edges_dir"] = ei.astype(np.int64)  # u -> v only: AW-RoPE walks follow the direction
    return ex


class DAGReachability(Task):
    name = "dag_reachability"
    data = "generated: random DAGs"
    claim = "magnetic Laplacian / AW-RoPE: direction-aware PE matters on directed graphs (> symmetric LapPE)"
    main_split = "extrap"
    directed_edges = "edges_dir"  # AW-RoPE walks along the edges' direction
    probe_keys: ClassVar[list[str]] = ["maglap"]
    steps: ClassVar[dict[str, int]] = {"quick": 200, "full": 500, "smoke": 30}
    vocab_size = 4
    out_dim = 2

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline", about="1-D RoPE on the random listing order"),
            "lappe": Enc("lappe", "lap", K_LAP, role="baseline", about="symmetric LapPE(8), additive"),
            "spd_bias": Enc(
                "bias", "pair_spd", opts={"max_distance": MAX_D}, role="baseline", about="undirected SPD bias"
            ),
            "maglap": Enc("linear", "maglap", 2 * K_LAP, about="magnetic Laplacian (q=0.25) Re/Im, additive"),
            "awrope_dir": Enc("awrope", "pos", 1, {"K": 6}, about="AW-RoPE along directed edges"),
            "spd_dir_bias": Enc(
                "bias",
                "pair_spd_dir",
                opts={"max_distance": MAX_D},
                role="ceiling",
                about="directed SPD bias (holds the answer)",
            ),
        }

    def sample(self, n: int, lo: int, hi: int, rng) -> list[dict[str, np.ndarray]]:
        out = []
        while len(out) < n:
            ex = encode_dag(random_dag(int(rng.integers(lo, hi + 1)), rng), rng)
            if ex is not None:
                out.append(ex)
        return out

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(5000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (1500, 300), "full": (3000, 500)}[size]
        self.train = self.sample(n_train, 8, 16, rng)
        self.splits = {"test": self.sample(n_test, 8, 16, rng), "extrap": self.sample(n_test, 24, 40, rng)}
        self.info = {"train_nodes": "8-16", "extrap_nodes": "24-40", "chance": 0.5}
