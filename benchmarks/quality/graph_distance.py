"""Task 4 — shortest-path distance between two marked nodes of a random graph; larger test graphs.

Input: one token per node, listed in a random order; every token is the same except the two
marked nodes (``source``, ``target``). The graph reaches the model **only through the position
encoding**: ``structpos.parse(graph, "graph")`` → ``structpos.compute_coords(s, "lap:8,rw:16,spd")``
→ LapPE (:class:`~structpos.encoders.LapPEEmbedding`), RWSE (linear), SPD attention bias
(:class:`~structpos.encoders.SPDBias`), WIRE rotations from
:func:`~structpos.encoders.spectral_coords`, AW-RoPE transport along the edges. NoPE and 1-D
RoPE on the (random) listing order see no structure: they are the floor.

Graph families (networkx): Erdős–Rényi (largest component), random trees, 2-D grids,
Watts–Strogatz, Barabási–Albert. Label: ``d(source, target)`` in classes ``1..7`` and
``8 = "≥ 8"``, distances drawn uniformly among those present; predicted at the source
token. **Why not readable off one token's coordinates:** the distance is a property of the
pair; every single node's PE is compatible with many distances. The SPD bias is itself a
pairwise distance: it is fed the label, so it is reported as a **ceiling**, never a win. The
coordinates-only probe is a linear classifier on one node's LapPE and RWSE.

Splits: train on 8–16 nodes; ``test`` = new graphs of 8–16 nodes; ``extrap`` = 24–40 nodes.

Claim (SEEDS.md, WIRE / LapPE / RWSE / SPD): spectral and distance encodings inject graph
structure into attention (WIRE: rotations from spectral coordinates).
"""

from __future__ import annotations

from typing import ClassVar

import networkx as nx
import numpy as np

import structpos
from structpos.encoders import spectral_coords

from ._common import Task
from .model import Enc

K_LAP, K_RW, MAX_D, K_ANCHOR = 8, 16, 8, 4


def random_graph(n: int, family: str, rng: np.random.Generator) -> nx.Graph:
    seed = int(rng.integers(1 << 31))
    if family == "er":
        g = nx.gnp_random_graph(n, 2.5 / n, seed=seed)
        g = g.subgraph(max(nx.connected_components(g), key=len)).copy()
    elif family == "tree":
        g = nx.from_prufer_sequence(rng.integers(0, n, size=n - 2).tolist()) if n > 2 else nx.path_graph(n)
    elif family == "grid":
        a = int(rng.integers(2, max(3, int(np.sqrt(n)) + 1)))
        g = nx.grid_2d_graph(a, max(2, n // a))
    elif family == "ws":
        g = nx.connected_watts_strogatz_graph(n, 4, 0.15, seed=seed)
    else:
        g = nx.barabasi_albert_graph(n, 1 + int(rng.integers(2)), seed=seed)
    g = nx.convert_node_labels_to_integers(g)
    perm = rng.permutation(g.number_of_nodes())  # random listing order
    return nx.relabel_nodes(g, {i: int(perm[i]) for i in range(len(perm))})


FAMILIES = ("er", "tree", "grid", "ws", "ba")


def graph_features(s, n: int, edges_dir: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-node PE arrays of a graph Structure (the library's own output)."""
    c = structpos.compute_coords(s, f"lap:{K_LAP},rw:{K_RW},peg:{K_LAP},anchor:{K_ANCHOR}")
    ei, _ = s.edges()
    ei = np.asarray(ei)
    k = min(K_LAP, n - 1)
    wire = np.zeros((n, K_LAP), np.float32)
    wire[:, :k] = spectral_coords(ei, n, k).numpy()
    und = np.concatenate([ei, ei[::-1]], 1)
    return {
        "lap": np.nan_to_num(c["lap"]).astype(np.float32),
        "lap_eigvals": np.nan_to_num(c["lap_eigvals"]).astype(np.float32),
        "rw": c["rw"].astype(np.float32),
        "wire": wire * np.sqrt(n),  # spectral coordinates are O(1/√N): per-node scale near 1
        "edges": und if edges_dir is None else edges_dir,
        "awpos": np.nan_to_num(c["lap"][:, :2]).astype(np.float32) * np.sqrt(n),
        "pair_peg": np.nan_to_num(c["peg"]).astype(np.float32),
        "anchor": c["anchor_dist"].astype(np.float32),
    }


def encode_graph(g: nx.Graph, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    n = g.number_of_nodes()
    s = structpos.parse(g, "graph")
    spd = structpos.compute_coords(s, "spd")["spd"]
    avail = sorted({int(min(d, MAX_D)) for d in np.unique(spd) if d > 0})
    if not avail:
        return None
    want = int(rng.choice(avail))
    pairs = np.argwhere(np.minimum(spd, MAX_D) == want)
    u, v = pairs[rng.integers(len(pairs))]
    tok = np.ones(n, np.int64)
    tok[u], tok[v] = 2, 3
    tgt = np.full(n, -100, np.int64)
    tgt[u] = want - 1
    ex = {"tok": tok, "tgt": tgt, "pos": np.arange(n, dtype=np.int64)[:, None], "pair_spd": spd.astype(np.int64)}
    ex.update(graph_features(s, n))
    return ex


def graph_encodings() -> dict[str, Enc]:
    return {
        "nope": Enc("none", role="baseline"),
        "rope1d": Enc("rope", "pos", 1, role="baseline", about="1-D RoPE on the random listing order"),
        "lappe": Enc("lappe", "lap", K_LAP, about="LapPE(8) + eigenvalues, additive"),
        "rwse": Enc("linear", "rw", K_RW, about="RWSE(16), additive"),
        "wire": Enc("wire", "wire", K_LAP, {"scale": 4.0}, about="WIRE on 8 Laplacian modes"),
        "awrope": Enc("awrope", "awpos", 2, {"K": 6}, about="AW-RoPE, phases from 2 LapPE coordinates"),
        "spe": Enc("spe", "lap", K_LAP, about="SPE: V·diag(φ(λ))·Vᵀ + equivariant DeepSets, additive"),
        "peg": Enc("peg", "pair_peg", about="PEG: learned bias of spectral distances ‖z_u − z_v‖"),
        "anchors": Enc("linear", "anchor", K_ANCHOR, about="NT-LLM: hop distances to 4 greedy k-centre anchors"),
        "spd_bias": Enc(
            "bias", "pair_spd", opts={"max_distance": MAX_D}, role="ceiling", about="SPD bias: fed d(u, v), the label"
        ),
    }


class GraphDistance(Task):
    name = "graph_distance"
    data = "generated: ER / tree / grid / WS / BA graphs"
    claim = "WIRE / LapPE / RWSE / SPD: spectral and distance encodings inject graph structure"
    main_split = "extrap"
    probe_keys: ClassVar[list[str]] = ["lap", "rw"]
    steps: ClassVar[dict[str, int]] = {"quick": 200, "full": 500, "smoke": 30}
    vocab_size = 4
    out_dim = MAX_D

    def __init__(self):
        super().__init__()
        self.encodings = graph_encodings()

    def sample(self, n: int, lo: int, hi: int, rng) -> list[dict[str, np.ndarray]]:
        out = []
        while len(out) < n:
            g = random_graph(int(rng.integers(lo, hi + 1)), FAMILIES[len(out) % len(FAMILIES)], rng)
            if g.number_of_nodes() >= 4:
                ex = encode_graph(g, rng)
                if ex is not None:
                    out.append(ex)
        return out

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(4000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (1500, 300), "full": (3000, 500)}[size]
        self.train = self.sample(n_train, 8, 16, rng)
        self.splits = {"test": self.sample(n_test, 8, 16, rng), "extrap": self.sample(n_test, 24, 40, rng)}
        self.info = {"train_nodes": "8-16", "extrap_nodes": "24-40", "classes": "d=1..7, 8+"}
