"""Task 11 — selective copy by counting structural units (contextual positions, CoPE).

Data (generated): sentences of random words, each ended by a ``.`` token, then a query token
``?k`` (``k ∈ 1..4``). The answer, predicted at the query, is the **first word of the k-th last
sentence**. A causal model reads left to right.

**Why 1-D positions struggle:** sentence lengths vary, so the answer lies at no fixed token
offset from the query; counting ``.`` tokens — units — finds it. CoPE's contextual positions
(``p_ij`` = number of gates between ``j`` and ``i``) count exactly that when the gates fire on
the separators: learned (``cope``) or given by the structure (``cope_units``: the gate is 1 on
each sentence's last token, ``structpos.encoders.cope.unit_boundaries``).
``sent_rope`` is StructuralRoPE on (sentence index, offset in the sentence): the sentence axis
is also a unit count. Train on sentences of 2–5 words; ``extrap`` on sentences of 6–10 words,
where a token offset learned in training points to the wrong place.

Heuristics: the majority word, and copying the first word of the last sentence (right when
``k = 1``).

Claim (SEEDS.md, CoPE): contextual positions count units (words, sentences) where token
positions cannot.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from structpos.encoders.cope import unit_boundaries

from ._common import Task, _tag_accuracy
from .model import Enc

WORDS = 16
DOT, Q0, W0 = 1, 2, 6  # "." , "?1".."?4", words
MAX_K = 4


def encode_example(lengths: list[int], k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    toks, sent, off = [], [], []
    firsts = []
    for s, n in enumerate(lengths):
        words = rng.integers(0, WORDS, size=n)
        firsts.append(int(words[0]))
        toks += [W0 + int(x) for x in words] + [DOT]
        sent += [s] * (n + 1)
        off += list(range(n + 1))
    toks.append(Q0 + k - 1)
    sent.append(len(lengths))
    off.append(0)
    tok = np.array(toks, dtype=np.int64)
    L = len(tok)
    tgt = np.full(L, -100, np.int64)
    tgt[-1] = firsts[-k]
    sent_ids = np.array(sent, dtype=np.int64)
    gates = unit_boundaries(sent_ids, at="end")
    return {
        "tok": tok,
        "tgt": tgt,
        "pos": np.arange(L, dtype=np.int64)[:, None],
        "so": np.stack([sent_ids, np.array(off, dtype=np.int64)], 1),
        "units": np.asarray(gates, dtype=np.int64).reshape(L, 1),
        "k": np.int64(k),
    }


class UnitLookup(Task):
    name = "unit_lookup"
    data = "generated: random sentences, query the first word k sentences back"
    claim = "CoPE: contextual positions count structural units where token positions cannot"
    main_split = "extrap"
    causal = True
    steps: ClassVar[dict[str, int]] = {"quick": 200, "full": 600, "smoke": 30}
    vocab_size = W0 + WORDS
    out_dim = WORDS
    probe_keys: ClassVar[list[str]] = ["units"]

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline"),
            "cope": Enc("cope", "", 1, {"max_positions": 16}, about="CoPE, learned gates"),
            "cope_units": Enc("cope", "units", 1, {"max_positions": 16}, about="CoPE, gates on sentence ends"),
            "sent_rope": Enc("rope", "so", 2, about="StructuralRoPE on (sentence index, offset in sentence)"),
        }

    def heuristics(self):
        out = super().heuristics()

        def last_first(e):
            starts = np.flatnonzero(np.concatenate([[True], e["tok"][:-1] == DOT]))[:-1]
            return np.full(len(e["tok"]), e["tok"][starts[-1]] - W0)

        out["first_of_last"] = lambda exs: _tag_accuracy(exs, last_first)
        return out

    def sample(self, count: int, lo: int, hi: int, rng) -> list[dict[str, np.ndarray]]:
        out = []
        for _ in range(count):
            n_sent = int(rng.integers(MAX_K, MAX_K + 3))
            lengths = rng.integers(lo, hi + 1, size=n_sent).tolist()
            out.append(encode_example(lengths, int(rng.integers(1, MAX_K + 1)), rng))
        return out

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(11000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (2000, 300), "full": (4000, 500)}[size]
        self.train = self.sample(n_train, 2, 5, rng)
        self.splits = {"test": self.sample(n_test, 2, 5, rng), "extrap": self.sample(n_test, 6, 10, rng)}
        self.info = {"train_sentence_words": "2-5", "extrap_sentence_words": "6-10", "k": "1-4"}
