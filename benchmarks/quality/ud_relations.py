"""Task 3 — dependency relation labels on real sentences (UD English EWT).

Input: the words of a real EWT sentence (lower-cased forms; the 2,000 most frequent train
forms, others ``<unk>``). Each sentence is parsed with ``structpos.parse(..., "conllu")`` and
every word's coordinates come from ``structpos.align.token_coords(tree, word_spans, "tree")``
(depth, sibling index) plus the tree distance between words
(:func:`structpos.encoders.tree_distance`) and the additive tree-path PE
(:func:`structpos.encoders.tree_path_pe`).

Label: each word's universal relation (``nsubj``, ``obj``, ``amod``, … — the part of DEPREL
before ``:``). **Why not readable off one token's coordinates:** words at the same depth and
sibling index carry every relation (a depth-1 dependent may be ``nsubj``, ``obj``, ``punct``,
``advcl`` …); the relation depends on the word, its head word and their order. The tree
positions come from the gold parse: this measures whether a model *uses* given structure.

Splits: the first 80 % of the sentences (document order) train, the rest ``test``. The
claim below measures no length extrapolation, so there is no extrapolation split.

Claim (SEEDS.md, tree PE from dependency parses): positions derived from the dependency tree
help sequence labelling. Controls: tree RoPE with shuffled labels (hRoPE control) and RoPE on
a shuffled word order.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import numpy as np

import structpos
from structpos.align import token_coords
from structpos.encoders import tree_distance, tree_path_pe

from ._common import Task, shuffled_rows, ud_file
from .model import Enc

VOCAB = 2000
PATH_DEPTH, PATH_WIDTH = 6, 6


def load_sentences():
    return structpos.parse(ud_file(), "conllu")


def encode_sentence(s, vocab: dict[str, int], rels: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    order = np.argsort(s.attrs["token_index"])  # nodes in word order
    offsets = np.stack([s.start[order], s.end[order]], axis=1)
    tc = token_coords(s, offsets, "tree")
    node = tc["node"]
    n = len(order)
    pos = np.arange(n, dtype=np.int64)[:, None]
    tree = np.stack([tc["depth"], tc["sibling"], pos[:, 0]], 1).astype(np.int64)
    forms = [str(f).lower() for f in s.attrs["form"][order]]
    labels = [str(x).split(":")[0] for x in s.labels[order]]
    return {
        "tok": np.array([vocab.get(f, 1) for f in forms], dtype=np.int64),
        "tgt": np.array([rels.get(x, -100) for x in labels], dtype=np.int64),
        "pos": pos,
        "pos_shuf": rng.permutation(n)[:, None],
        "tree": tree,
        "tree_shuf": np.concatenate([shuffled_rows(tree[:, :2], rng), pos], 1),
        "pair_tdist": tree_distance(s)[np.ix_(node, node)],
        "path": tree_path_pe(s, PATH_DEPTH, PATH_WIDTH, clip=True)[node],
        "node": node,
    }


class UDRelations(Task):
    name = "ud_relations"
    data = "real: UD English EWT dev sentences"
    claim = "tree PE from dependency parses improves sequence labelling (tree positions > 1-D)"
    claimed: ClassVar[list[str]] = ["tree_rope", "tree_path", "tdist_bias"]
    baselines: ClassVar[list[str]] = ["rope1d", "nope"]
    main_split = "test"
    steps: ClassVar[dict[str, int]] = {"quick": 150, "full": 400, "smoke": 30}

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none"),
            "rope1d": Enc("rope", "pos", 1),
            "rope1d_shuf": Enc("rope", "pos_shuf", 1, about="control: 1-D RoPE on a shuffled word order"),
            "tree_rope": Enc("rope", "tree", 3, about="StructuralRoPE on (depth, sibling, word index)"),
            "tree_path": Enc("linear", "path", PATH_DEPTH * PATH_WIDTH, about="additive tree-path PE"),
            "tdist_bias": Enc("bias", "pair_tdist", opts={"max_distance": 8}, about="tree-distance attention bias"),
            "tree_rope_ctrl": Enc("rope", "tree_shuf", 3, about="control: tree RoPE, depth/sibling labels shuffled"),
        }

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(3000 + seed)
        sents = [s for s in load_sentences() if 3 <= s.num_nodes <= 48]
        if size == "smoke":
            sents = sents[:120]
        cut = int(0.8 * len(sents))
        train_s, test_s = sents[:cut], sents[cut:]
        forms = Counter(str(f).lower() for s in train_s for f in s.attrs["form"])
        vocab = {"<pad>": 0, "<unk>": 1}
        for f, _ in forms.most_common(VOCAB):
            vocab[f] = len(vocab)
        rel_counts = Counter(str(x).split(":")[0] for s in train_s for x in s.labels)
        rels = {r: i for i, (r, _) in enumerate(sorted(rel_counts.items(), key=lambda t: (-t[1], t[0])))}
        self.vocab_size, self.out_dim = len(vocab), len(rels)
        self.train = [encode_sentence(s, vocab, rels, rng) for s in train_s]
        self.splits = {"test": [encode_sentence(s, vocab, rels, rng) for s in test_s]}
        self.sentences = {"train": train_s, "test": test_s}
        majority = max(rel_counts.values()) / sum(rel_counts.values())
        self.info = {
            "sentences": len(sents),
            "relations": len(rels),
            "vocab": len(vocab),
            "majority_class_acc": round(majority, 3),
        }
