"""Task 6 — multi-digit addition with length generalisation: position coupling vs 1-D RoPE vs NoPE.

Format (all numbers least-significant digit first, operands zero-padded to the same length
``n``, the sum has ``n + 1`` digits): ``a_0 … a_{n-1} + b_0 … b_{n-1} = c_0 … c_n``. A causal
(decoder) model is trained by next-token prediction on the answer digits and evaluated by
greedy decoding; a sum counts only if every digit is right (exact match).

**Position coupling** (Cho et al.): tokens that play the same role for the task share a
position id — digit ``i`` of ``a``, of ``b`` and of ``c`` all get ``i + 1``; ``+`` and ``=``
get ``0``. The ids feed :class:`~structpos.encoders.StructuralRoPE` (one axis), so the
attention score between the token predicting ``c_i`` and ``a_i``, ``b_i`` depends on a fixed
offset whatever ``n`` is. The ids come from :func:`structpos.coords.coupling.coupled_positions`
with the significance of each digit as its group (:func:`coupled_ids`).

**Why not readable off one token's coordinates:** every digit's value depends on two operand
digits and a carry chain — content; the coordinates only say which digits to combine.

Splits: train on ``n = 1..5`` digits; ``test`` = sums with ``n = 1..5`` that are not in the
training set (an earlier version let 122 of 500 test sums repeat training sums verbatim);
``extrap`` = ``n = 6..10`` (up to 2× the trained length).

Claim (SEEDS.md, position coupling): coupling generalises far beyond the trained length
(1–30 digits → 200 in the paper); NoPE is the baseline that often length-generalises best.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from structpos.coords.coupling import coupled_positions

from ._common import Task, shuffled_rows
from .model import Enc

PLUS, EQ = 10, 11
VOCAB = 12


def coupled_ids(n: int) -> np.ndarray:
    """Position ids of ``a_0..a_{n-1} + b_0..b_{n-1} = c_0..c_n`` with equal significance coupled."""
    significance = np.arange(n)
    groups = np.concatenate([significance, [-1], significance, [-1], np.arange(n + 1)])
    return coupled_positions(groups)  # digit i -> i + 1, "+" and "=" -> 0


def encode_sum(a: int, b: int, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    da = [int(x) for x in str(a).zfill(n)[::-1]]
    db = [int(x) for x in str(b).zfill(n)[::-1]]
    dc = [int(x) for x in str(a + b).zfill(n + 1)[::-1]]
    tok = np.array(da + [PLUS] + db + [EQ] + dc, dtype=np.int64)
    L = len(tok)
    tgt = np.full(L, -100, np.int64)
    start = 2 * n + 1  # index of "="
    tgt[start : L - 1] = tok[start + 1 :]  # "=" predicts c_0, c_i predicts c_{i+1}
    cid = coupled_ids(n)[:, None]
    return {
        "tok": tok,
        "tgt": tgt,
        "n": np.int64(n),
        "pos": np.arange(L, dtype=np.int64)[:, None],
        "coupled": cid,
        "coupled_ctrl": shuffled_rows(cid, rng),
    }


def random_operand(n: int, rng: np.random.Generator) -> int:
    return int(rng.integers(10 ** (n - 1) if n > 1 else 0, 10**n))


class Addition(Task):
    name = "addition"
    data = "generated: integer sums"
    claim = "position coupling: trained on short sums, generalises far beyond the trained length"
    causal = True
    main_split = "extrap"
    steps: ClassVar[dict[str, int]] = {"quick": 300, "full": 900, "smoke": 30}
    batch_size = 64
    vocab_size = VOCAB
    out_dim = VOCAB
    metric = "exact"

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline"),
            "coupled": Enc("rope", "coupled", 1, about="RoPE on coupled position ids"),
            "coupled_ctrl": Enc("rope", "coupled_ctrl", 1, role="control", about="coupled ids shuffled among tokens"),
        }

    def heuristics(self):
        """None: exact match of a whole sum has no trivial predictor above 0."""
        return {}

    def sample(self, count: int, lo: int, hi: int, rng, exclude: set | None = None) -> list[dict[str, np.ndarray]]:
        """``count`` distinct sums with ``lo..hi`` digits, none of them in ``exclude`` (the training sums)."""
        out, seen = [], set(exclude or ())
        for _ in range(50 * count):
            if len(out) == count:
                break
            n = int(rng.integers(lo, hi + 1))
            a, b = random_operand(n, rng), random_operand(n, rng)
            if (a, b, n) in seen:
                continue
            seen.add((a, b, n))
            out.append(encode_sum(a, b, n, rng) | {"key": np.array([a, b, n])})
        return out

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(6000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (4000, 300), "full": (8000, 500)}[size]
        self.train = self.sample(n_train, 1, 5, rng)
        seen = {tuple(int(x) for x in e["key"]) for e in self.train}
        self.splits = {"test": self.sample(n_test, 1, 5, rng, seen), "extrap": self.sample(n_test, 6, 10, rng, seen)}
        self.info = {"train_digits": "1-5", "extrap_digits": "6-10", "metric": "exact match, greedy decoding"}

    @torch.no_grad()
    def evaluate(self, model, examples, enc, batch_size: int = 100) -> dict[str, float]:
        """Teacher-forced loss, and exact match of greedy decoding (each prefix re-run: no cache)."""
        model.eval()
        loss_sum = count = exact = 0.0
        by_n: dict[int, list] = {}
        for e in examples:
            by_n.setdefault(int(e["n"]), []).append(e)
        for n, group in sorted(by_n.items()):
            for i in range(0, len(group), batch_size):
                chunk = group[i : i + batch_size]
                b = self.batch(chunk, enc)
                loss, _, k = self.loss_counts(model, b)
                loss_sum += float(loss) * k
                count += k
                start = 2 * n + 1
                cur = dict(b)
                tok = b["tok"].clone()
                for j in range(n + 1):
                    p = start + j  # position whose output is digit j
                    sub = {key: (v[:, : p + 1] if v.dim() >= 2 and key != "edges" else v) for key, v in cur.items()}
                    sub["tok"] = tok[:, : p + 1]
                    pred = model(sub)[:, p].argmax(-1)
                    tok[:, p + 1] = pred
                exact += float((tok[:, start + 1 :] == b["tok"][:, start + 1 :]).all(1).sum())
        model.train()
        return {"acc": exact / max(len(examples), 1), "loss": loss_sum / max(count, 1)}
