"""Task 8 — tree root inference with an exact Bayes limit (belief propagation).

Data (generated): a random rooted tree (Prüfer sequence, node 0 the root); a root symbol
``x_root ∈ {0..Q-1}`` drawn uniformly propagates down every edge through the transition matrix
``M = (1 − ε) I + ε/(Q − 1) (J − I)`` (the child keeps its parent's symbol with probability
``1 − ε``). The model sees the tree serialised in preorder (children in random order): every
**leaf** shows its symbol, every internal node a ``?`` and the root a query token; the task is
the root's symbol, predicted at the query token.

**The ceiling is computed exactly:** upward belief propagation (sum-product) on the known tree
gives the posterior of the root given the leaves; the Bayes-optimal accuracy is the share of
examples whose posterior mode is the true root (row ``bayes``). No model can beat it; the
question is how close each encoding gets. Leaves far from the root carry less information and
the tree's shape decides how much each leaf counts, which is what the tree coordinates carry.

**Why not readable off one token's coordinates:** the root's own coordinates are constant
(depth 0, sibling 0); the answer is a weighted vote of the leaves' symbols, weights set by the
tree. Heuristics: the majority vote of all leaf symbols and the symbol of the shallowest leaf.

Splits: train on 10–20 nodes; ``test`` = new trees of 10–20 nodes; ``extrap`` = 30–50 nodes.

Claim (SEEDS.md, hierarchical filtering): tree coordinates let a transformer approach the
belief-propagation limit, above 1-D positions.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import networkx as nx
import numpy as np

import structpos
from structpos.encoders import tree_distance

from ._common import Task, _tag_accuracy
from .model import Enc

Q, EPS = 4, 0.2
UNKNOWN, QUERY, SYM0 = 1, 2, 3


def transition() -> np.ndarray:
    m = np.full((Q, Q), EPS / (Q - 1))
    np.fill_diagonal(m, 1 - EPS)
    return m


def random_tree(n: int, rng: np.random.Generator) -> np.ndarray:
    """Parent array (``-1`` for the root 0) of a uniform random labelled tree rooted at 0,
    relabelled in BFS order (every parent has a smaller id than its children)."""
    g = nx.from_prufer_sequence(rng.integers(0, n, size=n - 2).tolist())
    bfs = [0] + [v for _, v in nx.bfs_edges(g, 0)]
    new = {old: i for i, old in enumerate(bfs)}
    parent = np.full(n, -1, np.int64)
    for u, v in nx.bfs_edges(g, 0):
        parent[new[v]] = new[u]
    return parent


def preorder(parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Node ids in preorder from the root, children in random order."""
    children: dict[int, list[int]] = {}
    for v, p in enumerate(parent):
        if p >= 0:
            children.setdefault(int(p), []).append(v)
    order, stack = [], [0]
    while stack:
        u = stack.pop()
        order.append(u)
        kids = children.get(u, [])
        stack.extend(rng.permutation(kids).tolist()[::-1] if kids else [])
    return np.array(order)


def root_posterior(parent: np.ndarray, symbol: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """Exact ``P(x_root | leaf symbols)`` by upward sum-product (nodes processed children first)."""
    m = transition()
    n = len(parent)
    msg = np.ones((n, Q))
    depth = np.zeros(n, np.int64)
    for v in range(1, n):  # BFS order from random_tree: parents before children
        depth[v] = depth[parent[v]] + 1
    for v in np.argsort(-depth, kind="stable"):
        if leaf[v]:
            msg[v] = np.eye(Q)[symbol[v]]
        if parent[v] >= 0:
            up = m @ msg[v]  # Σ_y M[x, y] msg_v(y)
            msg[parent[v]] *= up / up.sum()
    post = msg[0] / Q
    return post / post.sum()


def encode_tree(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    parent = random_tree(n, rng)
    m = transition()
    symbol = np.zeros(n, np.int64)
    symbol[0] = rng.integers(Q)
    for v in range(1, n):  # BFS order: parents first
        symbol[v] = rng.choice(Q, p=m[symbol[parent[v]]])
    leaf = np.ones(n, bool)
    leaf[parent[parent >= 0]] = False
    leaf[0] = False
    order = preorder(parent, rng)
    new = np.empty(n, np.int64)
    new[order] = np.arange(n)
    par = np.where(parent[order] >= 0, new[np.maximum(parent[order], 0)], -1)  # parent array in preorder
    s = structpos.Structure(
        kind="tree", labels=["node"] * n, start=np.arange(n), end=np.arange(n) + 1, parent=par, nested_spans=False
    )
    c = structpos.compute_coords(s, "tree")
    tok = np.where(leaf[order], SYM0 + symbol[order], UNKNOWN)
    tok[0] = QUERY
    tgt = np.full(n, -100, np.int64)
    tgt[0] = symbol[0]
    pos = np.arange(n, dtype=np.int64)[:, None]
    ds = np.stack([c["depth"], c["sibling"]], 1).astype(np.int64)
    post = root_posterior(parent, symbol, leaf)
    return {
        "tok": tok,
        "tgt": tgt,
        "pos": pos,
        "ds": ds,
        "tree": np.concatenate([ds, pos], 1),
        "tree_zero": np.concatenate([np.zeros_like(ds), pos], 1),
        "pair_tdist": tree_distance(s),
        "pair_zero": np.zeros((n, n), np.int64),
        "bayes": np.int64(np.argmax(post)),
    }


class TreeRoot(Task):
    name = "tree_root"
    data = "generated: random trees, symbols propagated from the root"
    claim = "hierarchical filtering: tree coordinates approach the exact BP limit, above 1-D positions"
    main_split = "extrap"
    steps: ClassVar[dict[str, int]] = {"quick": 200, "full": 600, "smoke": 30}
    vocab_size = SYM0 + Q
    out_dim = Q
    probe_keys: ClassVar[list[str]] = ["ds"]

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline", about="1-D RoPE on the preorder serialisation"),
            "tree_plane": Enc("plane", "tree", 3, about="1-D RoPE + (depth, sibling) on extra planes"),
            "tree_rope": Enc("rope", "tree", 3, about="StructuralRoPE (depth, sibling, index) sharing the head"),
            "tree_bias": Enc(
                "rope", "pos", 1, bias="pair_tdist", opts={"max_distance": 12}, about="1-D RoPE + tree-distance bias"
            ),
            "tree_plane_zero": Enc("plane", "tree_zero", 3, role="zero", about="tree_plane, depth = sibling = 0"),
            "tree_bias_zero": Enc("rope", "pos", 1, bias="pair_zero", role="zero", about="tree_bias, all distances 0"),
        }

    def heuristics(self):
        """Majority class, majority vote of the leaves, the shallowest leaf's symbol — and the exact BP limit."""
        out = super().heuristics()

        def vote(e):
            leaves = e["tok"][e["tok"] >= SYM0] - SYM0
            return np.full(len(e["tok"]), Counter(leaves.tolist()).most_common(1)[0][0] if len(leaves) else 0)

        def shallowest(e):
            leaves = np.flatnonzero(e["tok"] >= SYM0)
            top = leaves[np.argmin(e["ds"][leaves, 0])] if len(leaves) else 0
            return np.full(len(e["tok"]), e["tok"][top] - SYM0)

        out["leaf_vote"] = lambda exs: _tag_accuracy(exs, vote)
        out["shallowest_leaf"] = lambda exs: _tag_accuracy(exs, shallowest)
        return out

    def reference_runs(self, seed: int):
        runs = super().reference_runs(seed)
        bp = {"task": self.name, "encoding": "bayes", "seed": seed}
        for split, data in {"val": self.val, **self.splits}.items():
            bp[f"{split}_acc"] = _tag_accuracy(data, lambda e: np.full(len(e["tok"]), e["bayes"]))
        return runs + [bp]

    def sample(self, count: int, lo: int, hi: int, rng) -> list[dict[str, np.ndarray]]:
        return [encode_tree(int(rng.integers(lo, hi + 1)), rng) for _ in range(count)]

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(8000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (2000, 300), "full": (4000, 500)}[size]
        self.train = self.sample(n_train, 10, 20, rng)
        self.splits = {"test": self.sample(n_test, 10, 20, rng), "extrap": self.sample(n_test, 30, 50, rng)}
        self.info = {"train_nodes": "10-20", "extrap_nodes": "30-50", "symbols": Q, "flip": EPS}
