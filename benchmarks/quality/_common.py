"""What every quality task shares: the Task base class, data location, training and evaluation.

A task builds its examples once (``build``), each example a dict of numpy arrays: ``tok``
(token ids), either ``tgt`` (per-token class, ``-100`` = no loss) or ``ptr`` (index of the
answer token), and one array per coordinate family its encodings read. ``train_eval``
trains the shared :class:`~benchmarks.quality.model.Transformer` with one encoding and
evaluates every test split. Within a task the data, its order (from the seed), the model
core, optimiser and step count are the same for every encoding.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from .model import Enc, build_model, collate, cosine_schedule

ROOT = Path(__file__).resolve().parents[2]
FALLBACK_DATA = ROOT / "tests" / "data" / "quality"


def data_dir() -> Path:
    """``$STRUCTPOS_DATA``, else ``$STRUCTPOS_SHARED/data`` or ``../shared/data`` beside the repository, else the
    bundled samples in ``tests/data/quality``."""
    env = os.environ.get("STRUCTPOS_DATA")
    shared = Path(os.environ.get("STRUCTPOS_SHARED", ROOT.parent / "shared"))
    for cand in ([Path(env)] if env else []) + [shared / "data"]:
        if (cand / "wtq").is_dir() and (cand / "ud_en_ewt").is_dir():
            return cand
    return FALLBACK_DATA


def ud_file() -> Path:
    d = data_dir() / "ud_en_ewt"
    return min(d.glob("*.conllu"))


def shuffled_rows(arr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The hRoPE control: the same per-token coordinate rows, randomly reassigned to tokens.

    The label histogram (density) of every axis is kept; which token carries which label is not.
    """
    return arr[rng.permutation(len(arr))]


class Task:
    """Base class: subclasses set the attributes and implement :meth:`build`."""

    name = ""
    data = "generated"  # or "real: ..."
    claim = ""  # the SEEDS.md claim tested
    claimed: ClassVar[list[str]] = []  # encodings the claim says should win
    baselines: ClassVar[list[str]] = ["rope1d", "nope"]
    mode = "tag"  # "tag" (per-token classes) or "pointer" (pick one token)
    causal = False
    metric = "acc"
    main_split = "test"
    steps: ClassVar[dict[str, int]] = {"quick": 150, "full": 400}
    batch_size = 32
    lr = 3e-3
    vocab_size = 0
    out_dim = 1
    layers = 2

    def __init__(self):
        self.encodings: dict[str, Enc] = {}
        self.train: list[dict[str, np.ndarray]] = []
        self.splits: dict[str, list[dict[str, np.ndarray]]] = {}
        self.info: dict[str, Any] = {}

    # ------------------------------------------------------------------ to override
    def build(self, size: str = "full", seed: int = 0) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def keys(self, enc: str) -> list[str]:
        spec = self.encodings[enc]
        keys = [spec.key] if spec.key else []
        if spec.kind == "lappe":
            keys.append(spec.key + "_eigvals")
        if spec.kind == "awrope":
            keys.append("edges")
        return keys

    def batch(self, examples, enc: str):
        return collate(examples, self.keys(enc))

    def model(self, enc: str, seed: int):
        spec = self.encodings[enc]
        return build_model(spec, self.vocab_size, self.out_dim, seed, causal=self.causal, layers=self.layers)

    def loss_counts(self, model, batch) -> tuple[torch.Tensor, float, int]:
        """``(mean loss, number correct, number scored)`` of one batch."""
        logits = model(batch)
        if self.mode == "pointer":
            scores = logits[..., 0].masked_fill(~batch["mask"], -1e9)
            loss = F.cross_entropy(scores, batch["ptr"])
            pred = scores.argmax(-1)
            hit = self.pointer_hits(batch, pred)
            return loss, float(hit.sum()), len(pred)
        tgt = batch["tgt"]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        ok = tgt >= 0
        return loss, float((logits.argmax(-1)[ok] == tgt[ok]).sum()), int(ok.sum())

    def augment(self, examples, rng: np.random.Generator):
        """Per-batch training augmentation (same rng stream for every encoding); none by default."""
        return examples

    def pointer_hits(self, batch, pred: torch.Tensor) -> torch.Tensor:
        return pred == batch["ptr"]

    @torch.no_grad()
    def evaluate(self, model, examples, enc: str, batch_size: int = 64) -> dict[str, float]:
        model.eval()
        tot_loss = correct = count = 0.0
        for i in range(0, len(examples), batch_size):
            b = self.batch(examples[i : i + batch_size], enc)
            loss, c, n = self.loss_counts(model, b)
            tot_loss += float(loss) * n
            correct += c
            count += n
        model.train()
        return {"acc": correct / max(count, 1), "loss": tot_loss / max(count, 1)}

    def train_eval(
        self, enc: str, seed: int, size: str = "full", steps: int | None = None, progress=None
    ) -> dict[str, Any]:
        """Train one encoding from ``seed``; returns losses, per-split metrics and timings."""
        steps = steps or self.steps[size]
        model = self.model(enc, seed)
        opt = torch.optim.AdamW(model.parameters(), lr=self.lr, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_schedule(steps))
        rng = np.random.default_rng(seed)  # data order: the same for every encoding
        order = rng.permutation(len(self.train))
        pos, losses = 0, []
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            if pos + self.batch_size > len(order):
                order, pos = rng.permutation(len(self.train)), 0
            b = self.batch(self.augment([self.train[j] for j in order[pos : pos + self.batch_size]], rng), enc)
            pos += self.batch_size
            loss, _, _ = self.loss_counts(model, b)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            if progress is not None:
                progress.update(1)
        train_s = time.perf_counter() - t0
        out: dict[str, Any] = {
            "task": self.name,
            "encoding": enc,
            "seed": seed,
            "steps": steps,
            "train_s": round(train_s, 2),
        }
        out["first_loss"] = float(np.mean(losses[:10]))
        out["last_loss"] = float(np.mean(losses[-10:]))
        for split, data in self.splits.items():
            m = self.evaluate(model, data, enc)
            for k, v in m.items():
                out[f"{split}_{k}"] = v
        out["eval_s"] = round(time.perf_counter() - t0 - train_s, 2)
        out["cpu_s"] = round(time.process_time() - c0, 2)
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "data": self.data,
            "claim": self.claim,
            "claimed": self.claimed,
            "baselines": self.baselines,
            "splits": {k: len(v) for k, v in self.splits.items()},
            "train": len(self.train),
            "main_split": self.main_split,
            "metric": self.metric,
            "info": self.info,
        }


def chance_note(counts: np.ndarray) -> float:
    """Accuracy of always predicting the most frequent class."""
    counts = np.asarray(counts, dtype=float)
    return float(counts.max() / max(counts.sum(), 1.0))


def log2ceil(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))
