"""Task 12 — answer from the cited segments (Graph-KV: a segment graph as a block mask and shared positions).

Data (generated): ``n`` short *fact* segments, each ``[ID] f f f`` (a segment id token, then
three fact tokens, each one key → value pair ``(k, v)``; keys distinct inside a segment), in a
random order, then one *target* segment
``[Q] [ID_s1] … [ID_sm] q`` that cites ``m ∈ {2, 3}`` of them (its *sources*) and asks for key
``q``. The label, predicted at ``q``, is the value of ``q`` in the one source that holds it.
**Why the answer is not readable without the graph:** at least two other (distractor)
segments hold the same key ``q`` with other values, and segment order is random, so neither
the key nor the position of an occurrence tells which value is meant — only knowing which
segments are the sources does.

The graph reaches every encoding (the token sequence is the same for all of them):

- ``rope1d`` / ``nope`` (baselines): the graph is written in the text — the target lists its
  sources' id tokens, so the model must match those ids to segment headers and then find ``q``
  inside those segments (two hops).
- ``graphkv`` (claimed): the library's Graph-KV layout
  (:func:`structpos.coords.graph_kv.graph_kv_layout`: every fact segment starts at position 0,
  sharing one range, the target after it) with its block mask
  (:func:`structpos.integrations.flex.graph_kv_mask_mod` on the segment-level
  :func:`~structpos.coords.graph_kv.graph_kv_reads`: a token reads its own segment and, in the
  target, the source segments) applied as the attention mask (one hop).
- controls: ``gkv_shuffled`` (the same mechanism on a wrong graph: the target's sources redrawn
  at random), ``gkv_positions`` (Graph-KV positions, no mask: the shared range alone) and
  ``gkv_mask_1d`` (the mask with sequential 1-D positions: the mask alone).

Splits: answer pairs ``(q, value)`` are drawn from two disjoint sets per seed (a quarter of the
values of every key is held out), so no test answer pair occurs in training. Train on 5–7 fact
segments; ``test`` = held-out pairs, 5–7 segments; ``extrap`` = held-out pairs, 12–16
segments (more context than trained: Graph-KV's claim is that the context is not consumed
serially).

Heuristics: the majority value, and the value next to the first / last occurrence of ``q``.

Claim (SEEDS.md, Graph-KV): a target attending only to its sources' segments, with positions
allocated so sources share one range, answers from the right sources where serial 1-D context
must resolve the graph from text, and keeps doing so with more segments than trained.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from structpos.coords.graph_kv import graph_kv_layout
from structpos.integrations.flex import graph_kv_mask_mod

from ._common import Task, _tag_accuracy
from .model import Enc

KEYS, VALUES, IDS = 16, 16, 20
PAIRS = 3  # key → value pairs per fact segment
HELD = 4  # values per key whose (key, value) answer pairs only test draws use
Q, ID0 = 1, 2
K0 = ID0 + IDS  # the query's key tokens
P0 = K0 + KEYS  # fact tokens: one per (key, value) pair, ``P0 + key * VALUES + value``


def fact_token(key: int, value: int) -> int:
    return P0 + key * VALUES + value


def fact_key_value(tok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(key, value)`` of fact tokens (the inverse of :func:`fact_token`)."""
    return (tok - P0) // VALUES, (tok - P0) % VALUES


def block_mask(segment: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """``(L, L)`` int8: token ``i`` reads token ``j`` — the library's Graph-KV ``mask_mod`` on index grids."""
    mod = graph_kv_mask_mod(torch.from_numpy(segment)[None], torch.from_numpy(reads))
    i = torch.arange(len(segment))
    return mod(0, 0, i[:, None], i[None, :]).numpy().astype(np.int8)


def graph_kv_arrays(segment: np.ndarray, sources: list[int], target: int) -> tuple[np.ndarray, np.ndarray]:
    """``(positions (L, 1), block mask (L, L))`` of the segment graph ``s → target`` for ``s`` in ``sources``."""
    edges = np.array([sources, [target] * len(sources)], dtype=np.int64)
    lay = graph_kv_layout(segment, edges, target + 1)
    return lay.position[:, None], block_mask(segment, lay.reads)


def fact_segment(keys: np.ndarray, values: np.ndarray, rng: np.random.Generator) -> list[tuple[int, int]]:
    order = rng.permutation(len(keys))
    return [(int(keys[i]), int(values[i])) for i in order]


def draw_segments(n: int, m: int, q: int, a: int, rng: np.random.Generator) -> tuple[list, list[int], int]:
    """``n`` fact segments (lists of (key, value)), the indices of the ``m`` sources and of the answer source.

    The answer source holds ``q → a``; the other sources do not hold ``q``; the first two
    distractors (and each further one with probability 1/2) hold ``q`` with a value other than ``a``.
    """
    others = np.array([k for k in range(KEYS) if k != q])
    wrong = np.array([v for v in range(VALUES) if v != a])
    segs = []
    for j in range(n):
        has_q = j == 0 or (j >= m and (j < m + 2 or rng.random() < 0.5))
        keys = rng.choice(others, PAIRS - has_q, replace=False)
        vals = rng.integers(0, VALUES, size=len(keys))
        if has_q:
            keys = np.append(keys, q)
            vals = np.append(vals, a if j == 0 else rng.choice(wrong))
        segs.append(fact_segment(keys, vals, rng))
    order = rng.permutation(n)  # segment j is written at place inv[j]
    inv = np.argsort(order)
    placed = [segs[j] for j in order]
    return placed, sorted(int(inv[j]) for j in range(m)), int(inv[0])


def encode_example(n: int, q: int, a: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m = int(rng.integers(2, 4))
    segs, sources, answer_seg = draw_segments(n, m, q, a, rng)
    ids = rng.choice(IDS, n, replace=False)
    tok, seg = [], []
    for j, pairs in enumerate(segs):
        tok += [ID0 + int(ids[j])] + [fact_token(k, v) for k, v in pairs]
        seg += [j] * (1 + PAIRS)
    cited = rng.permutation(sources)
    tok += [Q] + [ID0 + int(ids[s]) for s in cited] + [K0 + q]
    seg += [n] * (m + 2)
    L = len(tok)
    segment = np.array(seg, dtype=np.int64)
    tgt = np.full(L, -100, np.int64)
    tgt[-1] = a
    pos, mask = graph_kv_arrays(segment, sources, n)
    wrong = sorted(int(s) for s in rng.choice(n, m, replace=False))
    pos_w, mask_w = graph_kv_arrays(segment, wrong, n)
    return {
        "tok": np.array(tok, dtype=np.int64),
        "tgt": tgt,
        "seg": np.array([0] * (L - m - 2) + [1] * (m + 2), dtype=np.int64),  # fact / target tokens
        "pos": np.arange(L, dtype=np.int64)[:, None],
        "gkv_pos": pos,
        "pair_gkv": mask,
        "gkv_pos_shuf": pos_w,
        "pair_gkv_shuf": mask_w,
        "segment": segment,
        "sources": np.array(sources, dtype=np.int64),
        "answer_segment": np.int64(answer_seg),
    }


def held_values(rng: np.random.Generator) -> np.ndarray:
    """``(KEYS, VALUES)`` bool: the answer pairs reserved for the test splits (``HELD`` values per key)."""
    held = np.zeros((KEYS, VALUES), bool)
    for k in range(KEYS):
        held[k, rng.choice(VALUES, HELD, replace=False)] = True
    return held


def occurrence_value(e: dict[str, np.ndarray], which: int) -> int:
    """The value next to the ``which``-th (0 first, -1 last) occurrence of the query key among the facts."""
    tok = e["tok"]
    fact = np.flatnonzero(e["segment"] < e["segment"][-1])
    fact = fact[tok[fact] >= P0]
    key, value = fact_key_value(tok[fact])
    return int(value[key == tok[-1] - K0][which])


class SegmentGraph(Task):
    name = "segment_graph"
    data = "generated: key-value fact segments, a target citing its sources, distractors holding the same key"
    claim = "Graph-KV: a target reading only its sources (block mask, sources sharing one position range) beats 1-D"
    main_split = "extrap"
    steps: ClassVar[dict[str, int]] = {"quick": 300, "full": 1000, "smoke": 30}
    vocab_size = P0 + KEYS * VALUES
    out_dim = VALUES
    probe_keys: ClassVar[list[str]] = ["pos", "gkv_pos"]

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline", about="no positions; the graph written in the text"),
            "rope1d": Enc("rope", "pos", 1, role="baseline", about="1-D RoPE; the graph written in the text"),
            "graphkv": Enc(
                "rope", "gkv_pos", 1, attend="pair_gkv", about="Graph-KV: shared-range positions + block mask"
            ),
            "gkv_shuffled": Enc(
                "rope",
                "gkv_pos_shuf",
                1,
                attend="pair_gkv_shuf",
                role="control",
                about="Graph-KV on a wrong graph (the target's sources redrawn)",
            ),
            "gkv_positions": Enc("rope", "gkv_pos", 1, role="control", about="Graph-KV positions, no mask"),
            "gkv_mask_1d": Enc(
                "rope", "pos", 1, attend="pair_gkv", role="control", about="Graph-KV mask, sequential 1-D positions"
            ),
        }

    def augment(self, examples, rng):
        """A fresh random code book for keys and for values per batch (the label follows its value):
        matching a key and copying its value is learnable, memorising key → value pairs is not."""
        keys, vals = rng.permutation(KEYS), rng.permutation(VALUES)
        book = np.concatenate([np.arange(K0), K0 + keys, P0 + (keys[:, None] * VALUES + vals[None, :]).ravel()])
        out = []
        for e in examples:
            tgt = e["tgt"].copy()
            tgt[tgt >= 0] = vals[tgt[tgt >= 0]]
            out.append(dict(e, tok=book[e["tok"]], tgt=tgt))
        return out

    def heuristics(self):
        out = super().heuristics()
        for name, which in (("first_occurrence", 0), ("last_occurrence", -1)):

            def predict(e, which=which):
                return np.full(len(e["tok"]), occurrence_value(e, which))

            out[name] = lambda exs, predict=predict: _tag_accuracy(exs, predict)
        return out

    def sample(self, count: int, lo: int, hi: int, held: np.ndarray, test: bool, rng) -> list[dict[str, np.ndarray]]:
        out = []
        for _ in range(count):
            q = int(rng.integers(KEYS))
            a = int(rng.choice(np.flatnonzero(held[q] == test)))
            out.append(encode_example(int(rng.integers(lo, hi + 1)), q, a, rng))
        return out

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(12000 + seed)
        held = held_values(rng)
        n_train, n_test = {"smoke": (64, 32), "quick": (2000, 300), "full": (4000, 500)}[size]
        self.train = self.sample(n_train, 5, 7, held, False, rng)
        self.splits = {
            "test": self.sample(n_test, 5, 7, held, True, rng),
            "extrap": self.sample(n_test, 12, 16, held, True, rng),
        }
        self.info = {
            "train_segments": "5-7",
            "extrap_segments": "12-16",
            "sources": "2-3",
            "held_pairs": int(held.sum()),
        }
