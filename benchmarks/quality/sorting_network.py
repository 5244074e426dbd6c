"""Task 10 — sorting-network validity: does a comparator network sort every input? (directed graphs)

Data (generated): a comparator network on ``w`` wires — a list of comparators ``(i, j)``,
``i < j``, each putting the smaller value on wire ``i``. Valid networks start from the
odd–even transposition sort of ``w`` wires with random redundant comparators inserted; then,
half the time, one comparator is removed. The label is computed exactly: the network sorts
every one of the ``2^w`` 0/1 inputs (the 0–1 principle), checked by brute force; classes are
balanced by rejection.

**The model sees a DAG, not a sequence:** one token per comparator (its wire pair is the
token's content) plus an ``OUT`` token, listed in a **random order**; the network's time order
reaches the model only through the position encoding of the dependency DAG (comparator →
the next comparator on each of its wires; the last comparator on every wire → ``OUT``). The
label is predicted at ``OUT``. Reversing every edge gives a different network over the same
undirected graph, so symmetric encodings (LapPE, 1-D RoPE on the random listing) see less.
``rope_time`` — 1-D RoPE on the network's own time order — is the natural sequence input:
reported as an oracle, apart from the verdict.

Heuristics: the majority class and the majority label per (wires, comparators) count.

Splits: train on 4–6 wires; ``test`` = new networks on 4–6 wires; ``extrap`` = 7 wires.

Claim (SEEDS.md, magnetic Laplacian / directional walks / AW-RoPE): direction-aware PE helps on
sorting networks, above symmetric LapPE and 1-D positions.
"""

from __future__ import annotations

from typing import ClassVar

import networkx as nx
import numpy as np

import structpos

from ._common import Task, _tag_accuracy
from .model import Enc

K_LAP, K_RW = 8, 8
OUT = 1
PAIR0 = 2
MAX_W = 8
PAIRS = {(i, j): PAIR0 + n for n, (i, j) in enumerate((i, j) for i in range(MAX_W) for j in range(i + 1, MAX_W))}


def sorts(network: list[tuple[int, int]], w: int) -> bool:
    """True iff ``network`` sorts all ``2^w`` 0/1 inputs (ascending from wire 0)."""
    x = ((np.arange(2**w)[:, None] >> np.arange(w)) & 1).astype(np.int8)  # every 0/1 input
    for i, j in network:
        lo, hi = np.minimum(x[:, i], x[:, j]), np.maximum(x[:, i], x[:, j])
        x[:, i], x[:, j] = lo, hi
    return bool((np.diff(x, axis=1) >= 0).all())


def random_network(w: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Odd–even transposition sort, random extra comparators, and half the time one comparator removed."""
    net = [(i, i + 1) for r in range(w) for i in range(r % 2, w - 1, 2)]
    for _ in range(int(rng.integers(0, w + 1))):
        i, j = sorted(rng.choice(w, size=2, replace=False).tolist())
        net.insert(int(rng.integers(0, len(net) + 1)), (i, j))
    if rng.random() < 0.5:
        net.pop(int(rng.integers(len(net))))
    return net


def network_dag(network: list[tuple[int, int]], w: int) -> nx.DiGraph:
    """Comparators 0..m-1 and OUT = m; an edge to the next comparator on each wire, the last ones to OUT."""
    m = len(network)
    g = nx.DiGraph()
    g.add_nodes_from(range(m + 1))
    last: dict[int, int] = {}
    for t, (i, j) in enumerate(network):
        for wire in (i, j):
            if wire in last:
                g.add_edge(last[wire], t)
            last[wire] = t
    for t in set(last.values()):
        g.add_edge(t, m)
    return g


def encode_network(network, w: int, label: bool, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m = len(network)
    g = network_dag(network, w)
    perm = rng.permutation(m + 1)  # random listing order: token perm[v] is node v
    g = nx.relabel_nodes(g, {v: int(perm[v]) for v in range(m + 1)})
    s = structpos.parse(g, "graph")
    c = structpos.compute_coords(s, f"maglap:{K_LAP},rwdir:{K_RW}")
    und = structpos.compute_coords(structpos.parse(g.to_undirected(), "graph"), f"lap:{K_LAP}")
    n = m + 1
    tok = np.empty(n, np.int64)
    time = np.empty(n, np.int64)
    for v, (i, j) in enumerate(network):
        tok[perm[v]] = PAIRS[(i, j)]
        time[perm[v]] = v
    tok[perm[m]], time[perm[m]] = OUT, m
    tgt = np.full(n, -100, np.int64)
    tgt[perm[m]] = int(label)
    ei = np.asarray(s.edges()[0]).astype(np.int64)
    return {
        "tok": tok,
        "tgt": tgt,
        "pos": np.arange(n, dtype=np.int64)[:, None],
        "time": time[:, None],
        "lap": np.nan_to_num(und["lap"]).astype(np.float32),
        "lap_eigvals": np.nan_to_num(und["lap_eigvals"]).astype(np.float32),
        "maglap": np.concatenate([c["maglap_re"], c["maglap_im"]], 1).astype(np.float32),
        "rwdir": np.concatenate([c["rwdir_fwd"], c["rwdir_bwd"]], 1).astype(np.float32),
        "edges_dir": ei,
        "size": np.array([w, m]),
    }


class SortingNetwork(Task):
    name = "sorting_network"
    data = "generated: comparator networks on 4–7 wires (label by the 0–1 principle)"
    claim = "magnetic Laplacian / directional walks / AW-RoPE: direction-aware PE helps on sorting networks"
    main_split = "extrap"
    directed_edges = "edges_dir"  # AW-RoPE walks along the edges' direction
    steps: ClassVar[dict[str, int]] = {"quick": 200, "full": 500, "smoke": 30}
    vocab_size = PAIR0 + len(PAIRS)
    out_dim = 2
    probe_keys: ClassVar[list[str]] = ["maglap", "rwdir"]

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline", about="1-D RoPE on the random listing order"),
            "lappe": Enc("lappe", "lap", K_LAP, role="baseline", about="symmetric LapPE(8), additive"),
            "maglap": Enc("linear", "maglap", 2 * K_LAP, about="magnetic Laplacian (q=0.25) Re/Im, additive"),
            "rwdir": Enc("linear", "rwdir", 2 * K_RW, about="directional random walks, forward + backward, additive"),
            "awrope_dir": Enc("awrope", "pos", 1, {"K": 6}, about="AW-RoPE along the DAG's edges"),
            "rope_time": Enc("rope", "time", 1, role="oracle", about="1-D RoPE on the network's time order"),
        }

    def heuristics(self):
        """Majority class, and the majority label of each (wires, comparators) count: a removed comparator
        shortens the network, so size alone says much."""
        out = super().heuristics()
        table: dict[tuple[int, int], list[int]] = {}
        for e in self.train:
            table.setdefault(tuple(int(x) for x in e["size"]), []).append(int(e["tgt"].max()))
        best = {k: int(np.mean(v) >= 0.5) for k, v in table.items()}

        def by_size(e):
            return np.full(len(e["tok"]), best.get(tuple(int(x) for x in e["size"]), 0))

        out["size"] = lambda exs: _tag_accuracy(exs, by_size)
        return out

    def sample(self, count: int, lo: int, hi: int, rng) -> list[dict[str, np.ndarray]]:
        out, want = [], 0
        while len(out) < count:
            w = int(rng.integers(lo, hi + 1))
            net = random_network(w, rng)
            label = sorts(net, w)
            if label != bool(want):  # balanced classes by rejection
                continue
            out.append(encode_network(net, w, label, rng))
            want = 1 - want
        return out

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(10000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (1500, 300), "full": (3000, 500)}[size]
        self.train = self.sample(n_train, 4, 6, rng)
        self.splits = {"test": self.sample(n_test, 4, 6, rng), "extrap": self.sample(n_test, 7, 7, rng)}
        self.info = {"train_wires": "4-6", "extrap_wires": 7, "chance": 0.5}
