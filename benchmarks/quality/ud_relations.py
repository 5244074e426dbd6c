"""Task 3 — dependency relation labels on real sentences (UD English EWT).

Input: the words of a real EWT sentence (lower-cased forms; the 2,000 most frequent train
forms, others ``<unk>``). Each sentence is parsed with ``structpos.parse(..., "conllu")`` and
every word's coordinates come from ``structpos.align.token_coords(tree, word_spans, "tree")``
(depth, sibling index) plus the tree distance between words
(:func:`structpos.encoders.tree_distance`) and the additive tree-path PE
(:func:`structpos.encoders.tree_path_pe`).

Label: each word's universal relation (``nsubj``, ``obj``, ``amod``, … — the part of DEPREL
before ``:``).

**No gold parse at test time.** The claimed encodings read the tree of a *predicted* parse: a
small head-selection parser (:func:`train_head_parser`, the suite's transformer with 1-D RoPE,
dot-product arc scores, greedy tree decoding) trained on the training split's heads only,
applied to train and test sentences alike (its test UAS is in the task info). The same
encodings on the gold parse are reported as **oracles**, apart from the verdict: with the gold
tree the shallowest word is ``root`` in every sentence, and (depth, sibling) alone scores
0.31 against a 0.12 majority class. The coordinates-only probe is that (depth, sibling) lookup
on the predicted parse; the heuristics are the majority relation and each word form's
majority relation.

Splits: a random 80 % of the sentences (the seed chooses which) train, the rest ``test``.
The claim below measures no length extrapolation, so there is no extrapolation split.

Claim (SEEDS.md, tree PE from dependency parses): positions derived from the dependency tree
help sequence labelling. Controls: tree RoPE with shuffled labels (hRoPE control) and RoPE on
a shuffled word order.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

import structpos
from structpos.align import token_coords
from structpos.encoders import tree_distance, tree_path_pe
from structpos.parsers._dependency import dependency_structure, heads_to_preorder

from ._common import Task, lookup_table, shuffled_rows, ud_file
from .model import Enc, build_model, collate, cosine_schedule

VOCAB = 2000
PATH_DEPTH, PATH_WIDTH = 6, 6


def load_sentences():
    return structpos.parse(ud_file(), "conllu")


# ---------------------------------------------------------------------- the predicted parse
ROOT_TOKEN = 2  # the parser's input: [ROOT] + words


def _parser_batch(sents, vocab, heads=True, device="cpu"):
    examples = []
    for s in sents:
        order = np.argsort(s.attrs["token_index"])
        forms = [str(f).lower() for f in s.attrs["form"][order]]
        ex = {
            "tok": np.array([ROOT_TOKEN] + [vocab.get(f, 1) for f in forms], dtype=np.int64),
            "pos": np.arange(len(forms) + 1, dtype=np.int64)[:, None],
        }
        if heads:
            ex["head"] = np.concatenate([[-100], np.asarray(s.attrs["head"])[order]]).astype(np.int64)
        examples.append(ex)
    b = collate(examples, ["pos"], device)
    if heads:
        L = b["tok"].shape[1]
        h = np.full((len(examples), L), -100, np.int64)
        for i, e in enumerate(examples):
            h[i, : len(e["head"])] = e["head"]
        b["head"] = torch.from_numpy(h).to(device)
    return b


def _arc_scores(model, b) -> torch.Tensor:
    """``(B, L, L)`` scores of word ``i`` taking ``j`` as its head (``j = 0``: the root)."""
    out = model(b)
    dep, head = out.chunk(2, -1)
    scores = dep @ head.transpose(1, 2) / math.sqrt(dep.shape[-1])
    L = scores.shape[1]
    eye = torch.eye(L, dtype=torch.bool, device=scores.device)
    return scores.masked_fill(eye | ~b["mask"][:, None, :], -1e9)


def train_head_parser(sents, vocab, seed: int, steps: int, device="cpu"):
    """A small head-selection parser (1-D RoPE transformer, biaffine-free dot-product arcs) on ``sents``."""
    model = build_model(Enc("rope", "pos", 1), len(vocab), 64, seed + 101, layers=2).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_schedule(steps))
    rng = np.random.default_rng(seed + 101)
    for _ in range(steps):
        b = _parser_batch([sents[i] for i in rng.integers(0, len(sents), 32)], vocab, device=device)
        scores = _arc_scores(model, b)
        loss = F.cross_entropy(scores.reshape(-1, scores.shape[-1]), b["head"].reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return model


def decode_heads(scores: np.ndarray) -> np.ndarray:
    """0-based heads (``-1`` = root) of a tree from ``(n+1, n+1)`` arc scores: one root, no cycles.

    Greedy: the best-scoring root word, every other word its best head; a word left on a cycle
    is re-attached to its best head among the words already connected to the root, until all are.
    """
    n = scores.shape[0] - 1
    s = scores[1:, :].copy()  # s[w, j]: word w+1 takes j (0 = root)
    root = int(np.argmax(s[:, 0]))
    s[:, 0] = -np.inf
    head = s.argmax(1)  # 1-based heads, 0 = root
    head[root] = 0
    connected = np.zeros(n + 1, bool)
    connected[0] = True
    while True:
        changed = True
        while changed:  # spread "reaches the root"
            reach = connected[head] & ~connected[1:]
            changed = bool(reach.any())
            connected[1:] |= reach
        todo = np.flatnonzero(~connected[1:])
        if not len(todo):
            break
        cand = np.where(connected[None, :], s[todo], -np.inf)
        best = int(np.argmax(cand.max(1)))
        w = todo[best]
        head[w] = int(np.argmax(cand[best]))
    return head - 1


@torch.no_grad()
def predicted_heads(model, sents, vocab, device="cpu") -> list[np.ndarray]:
    """Each sentence's predicted 0-based heads in word order."""
    out = []
    for i in range(0, len(sents), 64):
        chunk = sents[i : i + 64]
        scores = _arc_scores(model, _parser_batch(chunk, vocab, heads=False, device=device)).float().cpu().numpy()
        for k, snt in enumerate(chunk):
            n = snt.num_nodes
            out.append(decode_heads(scores[k, : n + 1, : n + 1]))
    return out


def with_heads(s, heads: np.ndarray):
    """The sentence ``s`` re-laid as a tree with the given 0-based heads (word order), via the library."""
    order_w = np.argsort(s.attrs["token_index"])
    order, parent = heads_to_preorder(heads, name=s.name or "sentence")
    attrs = {"token_index": np.arange(len(heads)), "form": s.attrs["form"][order_w]}
    labels = [str(x) for x in s.labels[order_w]]
    return dependency_structure(order, parent, labels, s.start[order_w], s.end[order_w], attrs, source=s.source)


# ---------------------------------------------------------------------- examples
def _tree_arrays(s, tag: str, rng) -> dict[str, np.ndarray]:
    """Word-order tree coordinates of ``s`` under the key suffix ``tag`` ("" predicted, "_gold")."""
    order = np.argsort(s.attrs["token_index"])
    offsets = np.stack([s.start[order], s.end[order]], axis=1)
    tc = token_coords(s, offsets, "tree")
    node = tc["node"]
    n = len(order)
    pos = np.arange(n, dtype=np.int64)[:, None]
    ds = np.stack([tc["depth"], tc["sibling"]], 1).astype(np.int64)
    out = {
        f"ds{tag}": ds,
        f"tree{tag}": np.concatenate([ds, pos], 1),
        f"pair_tdist{tag}": tree_distance(s)[np.ix_(node, node)],
        f"path{tag}": tree_path_pe(s, PATH_DEPTH, PATH_WIDTH, clip=True)[node],
    }
    if not tag:
        out["tree_shuf"] = np.concatenate([shuffled_rows(ds, rng), pos], 1)
        out["node"] = node
    return out


def encode_sentence(
    s, pred, vocab: dict[str, int], rels: dict[str, int], rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """One example: gold relation labels; coordinates from the predicted parse ``pred`` and the gold ``s``."""
    order = np.argsort(s.attrs["token_index"])
    n = len(order)
    pos = np.arange(n, dtype=np.int64)[:, None]
    forms = [str(f).lower() for f in s.attrs["form"][order]]
    labels = [str(x).split(":")[0] for x in s.labels[order]]
    tok = np.array([vocab.get(f, 1) for f in forms], dtype=np.int64)
    ex = {
        "tok": tok,
        "tgt": np.array([rels.get(x, -100) for x in labels], dtype=np.int64),
        "pos": pos,
        "pos_shuf": rng.permutation(n)[:, None],
        "tree_zero": np.concatenate([np.zeros((n, 2), np.int64), pos], 1),
        "pair_zero": np.zeros((n, n), np.int64),
        "form": tok[:, None],
    }
    ex.update(_tree_arrays(pred, "", rng))
    ex.update(_tree_arrays(s, "_gold", rng))
    return ex


class UDRelations(Task):
    name = "ud_relations"
    data = "real: UD English EWT dev sentences"
    claim = "tree PE from dependency parses improves sequence labelling (tree positions > 1-D)"
    main_split = "test"
    steps: ClassVar[dict[str, int]] = {"quick": 150, "full": 400, "smoke": 30}
    parser_steps: ClassVar[dict[str, int]] = {"quick": 300, "full": 600, "smoke": 20}
    probe_keys: ClassVar[list[str]] = ["ds"]

    def __init__(self):
        super().__init__()
        pred = "from the predicted parse"
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline"),
            "tree_plane": Enc("plane", "tree", 3, about=f"1-D RoPE + (depth, sibling) on extra planes, {pred}"),
            "tree_rope": Enc(
                "rope", "tree", 3, about=f"StructuralRoPE (depth, sibling, index) sharing the head, {pred}"
            ),
            "tree_bias": Enc(
                "rope",
                "pos",
                1,
                bias="pair_tdist",
                opts={"max_distance": 8},
                about=f"1-D RoPE + tree-distance bias, {pred}",
            ),
            "tree_path": Enc("linear", "path", PATH_DEPTH * PATH_WIDTH, about=f"additive tree-path PE, {pred}"),
            "tree_plane_zero": Enc("plane", "tree_zero", 3, role="zero", about="tree_plane, depth = sibling = 0"),
            "tree_rope_zero": Enc("rope", "tree_zero", 3, role="zero", about="tree_rope, depth = sibling = 0"),
            "tree_plane_gold": Enc("plane", "tree_gold", 3, role="oracle", about="tree_plane on the gold parse"),
            "tree_bias_gold": Enc(
                "rope",
                "pos",
                1,
                bias="pair_tdist_gold",
                opts={"max_distance": 8},
                role="oracle",
                about="tree_bias on the gold parse",
            ),
            "tree_rope_ctrl": Enc("rope", "tree_shuf", 3, role="control", about="tree RoPE, depth/sibling shuffled"),
            "rope1d_shuf": Enc("rope", "pos_shuf", 1, role="control", about="1-D RoPE on a shuffled word order"),
        }

    def heuristics(self):
        """Majority relation, and the majority relation of each word form (unknown forms: majority)."""
        return super().heuristics() | {"form": lookup_table(self.train, ["tok"], self.mode)}

    def build(self, size: str = "full", seed: int = 0) -> None:
        device = self.device
        rng = np.random.default_rng(3000 + seed)
        sents = [s for s in load_sentences() if 3 <= s.num_nodes <= 48]
        if size == "smoke":
            sents = sents[:120]
        perm = rng.permutation(len(sents))  # the seed decides which sentences are held out
        cut = int(0.8 * len(sents))
        train_s, test_s = [sents[i] for i in perm[:cut]], [sents[i] for i in perm[cut:]]
        forms = Counter(str(f).lower() for s in train_s for f in s.attrs["form"])
        vocab = {"<pad>": 0, "<unk>": 1, "<root>": ROOT_TOKEN}
        for f, _ in forms.most_common(VOCAB):
            vocab[f] = len(vocab)
        rel_counts = Counter(str(x).split(":")[0] for s in train_s for x in s.labels)
        rels = {r: i for i, (r, _) in enumerate(sorted(rel_counts.items(), key=lambda t: (-t[1], t[0])))}
        self.vocab_size, self.out_dim = len(vocab), len(rels)
        parser = train_head_parser(train_s, vocab, seed, self.parser_steps[size], device)
        # predicted parses of the training sentences come from the same parser (no gold leaks into training)
        pred_train = predicted_heads(parser, train_s, vocab, device)
        pred_test = predicted_heads(parser, test_s, vocab, device)
        uas = np.mean(np.concatenate([h == _gold_heads(s) for h, s in zip(pred_test, test_s)]))
        self.train = [encode_sentence(s, with_heads(s, h), vocab, rels, rng) for s, h in zip(train_s, pred_train)]
        self.splits = {
            "test": [encode_sentence(s, with_heads(s, h), vocab, rels, rng) for s, h in zip(test_s, pred_test)]
        }
        self.sentences = {"train": train_s, "test": test_s}
        majority = max(rel_counts.values()) / sum(rel_counts.values())
        self.info = {
            "sentences": len(sents),
            "relations": len(rels),
            "vocab": len(vocab),
            "majority_class_acc": round(majority, 3),
            "parser_test_UAS": round(float(uas), 3),
        }


def _gold_heads(s) -> np.ndarray:
    order = np.argsort(s.attrs["token_index"])
    return np.asarray(s.attrs["head"])[order] - 1
