"""What every quality task shares: the Task base class, data location, training and evaluation.

A task builds its examples once per seed (``prepare``: the data build itself depends on the
seed), each example a dict of numpy arrays: ``tok`` (token ids), either ``tgt`` (per-token
class, ``-100`` = no loss) or ``ptr`` (index of the answer token), and one array per
coordinate family its encodings read. ``prepare`` holds out a validation slice of the
training examples (learning-rate selection reads it, never the test splits). ``train_eval``
trains the shared :class:`~benchmarks.quality.model.Transformer` with one encoding and
evaluates the validation and every test split. Within a task and seed the data, its order,
the model core, optimiser and step count are the same for every encoding.

Beside the encodings every task reports, per seed and split, the **coordinates-only probe**
(:meth:`Task.probe_accuracy`: the best a predictor reading one token's position features
alone does — a lookup table for integer coordinates, a linear classifier for real ones) and
its **trivial heuristics** (:meth:`Task.heuristics`, majority class at least). A structural
encoding that does not beat them has shown nothing about structure.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from .model import Enc, build_model, collate, cosine_schedule, count_parameters

Examples = list[dict[str, np.ndarray]]

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
    mode = "tag"  # "tag" (per-token classes) or "pointer" (pick one token)
    causal = False
    metric = "acc"
    main_split = "test"
    steps: ClassVar[dict[str, int]] = {"quick": 150, "full": 400}
    batch_size = 32
    lr = 3e-3
    lrs: ClassVar[tuple[float, ...]] = (1e-3, 3e-3, 1e-2)  # the --full sweep, the same for every encoding
    vocab_size = 0
    out_dim = 1
    layers = 2
    probe_keys: ClassVar[list[str]] = []  # per-token coordinate arrays the coordinates-only probe reads
    report_loss = False  # show the loss columns beside the accuracy
    directed_edges = ""  # an example key of directed edges that AW-RoPE walks instead of ``edges``

    def __init__(self):
        self.encodings: dict[str, Enc] = {}
        self.train: Examples = []
        self.val: Examples = []
        self.splits: dict[str, Examples] = {}
        self.info: dict[str, Any] = {}
        self.device = torch.device("cpu")

    # ------------------------------------------------------------------ to override
    def build(self, size: str = "full", seed: int = 0) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def heuristics(self) -> dict[str, Callable[[Examples], float]]:
        """Trivial predictors fitted on ``self.train``: name → ``accuracy(examples)``.

        The default is the majority class (per-token tasks); tasks add their own.
        """
        if self.mode != "tag":
            return {}
        counts = Counter(int(t) for e in self.train for t in e["tgt"] if t >= 0)
        top = counts.most_common(1)[0][0] if counts else 0
        return {"majority": lambda exs: _tag_accuracy(exs, lambda e: np.full(len(e["tgt"]), top))}

    # ------------------------------------------------------------------ shared
    def prepare(self, size: str = "full", seed: int = 0, device: str | torch.device = "cpu") -> None:
        """Build the data of ``seed`` and hold out the validation slice (10 %, at most 300 examples).

        ``device`` is where a build that trains a model of its own (the UD parser) trains it.
        """
        self.device = torch.device(device)
        self.build(size, seed)
        n_val = min(300, max(1, len(self.train) // 10))
        self.train, self.val = self.train[:-n_val], self.train[-n_val:]

    def roles(self) -> dict[str, str]:
        return {name: spec.role for name, spec in self.encodings.items()}

    def parameter_counts(self, encodings: list[str] | None = None) -> dict[str, list[int]]:
        """``encoding → [all trainable parameters, the encoding's own]`` (from a freshly built model)."""
        return {enc: list(count_parameters(self.model(enc, 0))) for enc in encodings or self.encodings}

    def keys(self, enc: str) -> list[str]:
        spec = self.encodings[enc]
        keys = [spec.key] if spec.key else []
        keys += [k for k in (spec.bias, spec.tree, spec.attend) if k]
        if spec.kind in ("lappe", "spe"):
            keys.append(spec.key + "_eigvals")
        if spec.kind == "awrope":
            keys.append("edges")
        return keys

    def batch(self, examples, enc: str):
        if self.directed_edges and self.encodings[enc].kind == "awrope":
            examples = [dict(e, edges=e[self.directed_edges]) for e in examples]
        return collate(examples, self.keys(enc), self.device)

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
        self,
        enc: str,
        seed: int,
        size: str = "full",
        steps: int | None = None,
        progress=None,
        lr: float | None = None,
        device: str | torch.device = "cpu",
    ) -> dict[str, Any]:
        """Train one encoding from ``seed`` at ``lr``; returns losses, val and per-split metrics, timings."""
        steps = steps or self.steps[size]
        lr = lr or self.lr
        self.device = torch.device(device)
        model = self.model(enc, seed).to(self.device)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
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
            "lr": lr,
            "steps": steps,
            "train_s": round(train_s, 2),
        }
        out["first_loss"] = float(np.mean(losses[:10]))
        out["last_loss"] = float(np.mean(losses[-10:]))
        for split, data in {"val": self.val, **self.splits}.items():
            m = self.evaluate(model, data, enc)
            for k, v in m.items():
                out[f"{split}_{k}"] = v
        out["eval_s"] = round(time.perf_counter() - t0 - train_s, 2)
        out["cpu_s"] = round(time.process_time() - c0, 2)
        return out

    # ------------------------------------------------------------------ probe and heuristics
    def probe_accuracy(self, examples: Examples) -> float:
        """Accuracy of the coordinates-only probe fitted on ``self.train`` (see the module docstring)."""
        if not self.probe_keys:
            return float("nan")
        fit = getattr(self, "_probe", None)
        if fit is None:
            fit = self._probe = lookup_table(self.train, self.probe_keys, self.mode)
        return fit(examples)

    def reference_runs(self, seed: int) -> list[dict[str, Any]]:
        """The probe's and the heuristics' accuracies on every split, as runs of pseudo-encodings."""
        self._probe = None
        named: dict[str, Callable[[Examples], float]] = {f"h_{k}": f for k, f in self.heuristics().items()}
        if self.probe_keys:
            named["probe"] = self.probe_accuracy
        runs = []
        for name, fn in named.items():
            run: dict[str, Any] = {"task": self.name, "encoding": name, "seed": seed}
            for split, data in {"val": self.val, **self.splits}.items():
                run[f"{split}_acc"] = float(fn(data))
            runs.append(run)
        return runs

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "data": self.data,
            "claim": self.claim,
            "roles": self.roles(),
            "splits": {k: len(v) for k, v in self.splits.items()},
            "train": len(self.train),
            "val": len(self.val),
            "main_split": self.main_split,
            "metric": self.metric,
            "report_loss": self.report_loss,
            "probe_keys": self.probe_keys,
            "info": self.info,
        }


def _tag_accuracy(examples: Examples, predict: Callable[[dict[str, np.ndarray]], np.ndarray]) -> float:
    """Per-token accuracy of ``predict(example) → (L,) classes`` over the scored tokens (``tgt ≥ 0``)."""
    hit = total = 0
    for e in examples:
        ok = e["tgt"] >= 0
        hit += int((predict(e)[ok] == e["tgt"][ok]).sum())
        total += int(ok.sum())
    return hit / max(total, 1)


def _pointer_accuracy(examples: Examples, score: Callable[[dict[str, np.ndarray]], np.ndarray]) -> float:
    """Pointer accuracy of ``argmax score(example)`` (first maximum)."""
    return float(np.mean([int(np.argmax(score(e))) == int(e["ptr"]) for e in examples])) if examples else float("nan")


def _features(e: dict[str, np.ndarray], keys: list[str]) -> np.ndarray:
    """``(L, F)`` per-token features: the probe keys' arrays side by side."""
    n = len(e["tok"])
    return np.concatenate([np.asarray(e[k]).reshape(n, -1) for k in keys], 1)


def lookup_table(train: Examples, keys: list[str], mode: str) -> Callable[[Examples], float]:
    """``accuracy(examples)`` of the majority label per value of the per-token ``keys`` (unseen values:
    the overall majority), fitted on ``train``; a linear classifier when the features are real.

    The coordinates-only probe reads the position keys; heuristics read content keys (the previous
    token, the word form).
    """
    feats = [_features(e, keys) for e in train]
    integer = all(np.issubdtype(f.dtype, np.integer) for f in feats)
    if mode == "tag":
        rows = np.concatenate(feats)
        labels = np.concatenate([e["tgt"] for e in train])
        keep = labels >= 0
        rows, labels = rows[keep], labels[keep]
    else:
        rows = np.concatenate(feats)
        labels = np.concatenate([np.arange(len(e["tok"])) == int(e["ptr"]) for e in train]).astype(np.int64)
    if integer:
        return _lookup_probe(rows, labels, keys, mode)
    return _linear_probe(rows, labels, keys, mode)


def _lookup_probe(rows, labels, keys, mode) -> Callable[[Examples], float]:
    table: dict[tuple, Counter] = {}
    for r, y in zip(map(tuple, rows.tolist()), labels.tolist()):
        table.setdefault(r, Counter())[y] += 1
    overall = Counter(labels.tolist()).most_common(1)[0][0]
    if mode == "tag":
        best = {r: c.most_common(1)[0][0] for r, c in table.items()}

        def predict(e):
            return np.array([best.get(r, overall) for r in map(tuple, _features(e, keys).tolist())])

        return lambda exs: _tag_accuracy(exs, predict)
    rate = {r: c[1] / sum(c.values()) for r, c in table.items()}

    def score(e):
        return np.array([rate.get(r, 0.0) for r in map(tuple, _features(e, keys).tolist())])

    return lambda exs: _pointer_accuracy(exs, score)


def _linear_probe(rows, labels, keys, mode, steps: int = 300) -> Callable[[Examples], float]:
    x = torch.from_numpy(np.nan_to_num(rows).astype(np.float32))
    mu, sd = x.mean(0), x.std(0) + 1e-6
    y = torch.from_numpy(labels)
    classes = int(y.max()) + 1
    lin = torch.nn.Linear(x.shape[1], classes)
    opt = torch.optim.Adam(lin.parameters(), lr=0.05)
    for _ in range(steps):
        loss = F.cross_entropy(lin((x - mu) / sd), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    @torch.no_grad()
    def logits(e):
        f = torch.from_numpy(np.nan_to_num(_features(e, keys)).astype(np.float32))
        return lin((f - mu) / sd).numpy()

    if mode == "tag":
        return lambda exs: _tag_accuracy(exs, lambda e: logits(e).argmax(-1))
    return lambda exs: _pointer_accuracy(exs, lambda e: logits(e)[:, -1] - logits(e)[:, 0])


def chance_note(counts: np.ndarray) -> float:
    """Accuracy of always predicting the most frequent class."""
    counts = np.asarray(counts, dtype=float)
    return float(counts.max() / max(counts.sum(), 1.0))


def log2ceil(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))
