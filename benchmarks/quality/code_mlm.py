"""Task 2 — masked-token prediction on real code (CPython stdlib Python + PyTorch's C++ headers).

Input: windows of 64 consecutive leaf tokens of real source files — the top-level modules of
the running interpreter's standard library (Python) and the C++ headers shipped in
``torch/include/c10/util`` (C++). Each file is parsed with ``structpos.parse(src, "code",
language=...)``; tokens are the AST leaves, and their coordinates come from
``structpos.align.token_coords(tree, leaf_spans, "tree")`` (depth, sibling index), the
tree-path PE (:func:`structpos.encoders.tree_path_pe`), HiRoPE-style levels (top-level
definition, statement, token; :func:`structpos.encoders.unit_indices`), the library's HiRoPE
levels (coordinate family ``hirope``: innermost class/function, statement, token, each
restarting inside its parent), learned depth + sibling embeddings
(:class:`~structpos.encoders.tree_embedding.TreePositionEmbedding`) and tree distances
(:func:`structpos.coords.tree.tree_distance`). 15 % of the tokens (fixed per example) are
replaced by ``[MASK]``; the vocabulary is the 1,500 most frequent train leaf strings.

Label: the masked token's string. **Why not readable off one token's coordinates:** a leaf at
a given depth / sibling slot can be any identifier, literal or keyword; the answer needs the
surrounding code (content) — structure only narrows it.

Splits: files are split 80 / 20 (``test`` = held-out files, windows of 64 tokens);
``long`` = held-out files, windows of 192 tokens (HiRoPE's longer-context claim).

Claim (SEEDS.md, tree-enhanced CodeBERTa / HiRoPE): tree positions lower the MLM loss versus
1-D positions. Both accuracy and loss are reported.
"""

from __future__ import annotations

import sysconfig
from collections import Counter
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

import structpos
from structpos.align import token_coords
from structpos.coords.tree import tree_distance as tree_distance_nodes
from structpos.encoders import tree_path_pe, unit_indices

from ._common import Task, shuffled_rows
from .model import Enc

WINDOW, LONG_WINDOW = 64, 192
VOCAB = 1500
MASK, UNK = 2, 1
PATH_DEPTH, PATH_WIDTH = 6, 6
STATEMENT_WORDS = ("statement", "definition", "declaration", "clause")


def source_files(limit: int | None = None) -> list[tuple[Path, str]]:
    py = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    cpp: list[Path] = []
    try:
        cpp = sorted((Path(torch.__file__).parent / "include" / "c10" / "util").glob("*.h"))
    except (OSError, TypeError):  # pragma: no cover - torch without headers
        pass
    half = None if limit is None else limit // 2
    return [(p, "python") for p in py[:half]] + [(p, "cpp") for p in cpp[:half]]


def file_tokens(path: Path, language: str):
    """``(tree, leaf node ids, leaf texts, per-leaf coordinates)`` of one file, or ``None``."""
    try:
        src = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    if len(src) > 200_000:
        return None
    s = structpos.parse(src, "code", language=language, name=str(path))
    parent = np.asarray(s.parent)
    has_child = np.zeros(s.num_nodes, bool)
    has_child[parent[parent >= 0]] = True
    leaves = np.flatnonzero(~has_child & (s.end > s.start))
    if len(leaves) < WINDOW:
        return None
    offsets = np.stack([s.start[leaves], s.end[leaves]], 1)
    tc = token_coords(s, offsets, "tree,hirope")
    texts = [src[a:b] for a, b in offsets]
    # HiRoPE-style units: top-level child of the root, nearest statement-like ancestor, token
    labels = np.asarray(s.labels).astype(str)
    stmt = np.array([any(w in x for w in STATEMENT_WORDS) for x in labels])
    top = np.arange(s.num_nodes)
    unit = np.where(stmt, np.arange(s.num_nodes), -1)
    for i in range(s.num_nodes):  # preorder: parents first
        p = parent[i]
        if p > 0:
            top[i] = top[p]
            if unit[i] < 0:
                unit[i] = unit[p]
    unit = np.where(unit < 0, top, unit)
    path = tree_path_pe(s, PATH_DEPTH, PATH_WIDTH, clip=True)
    return {
        "tree": s,
        "leaves": tc["node"],
        "texts": texts,
        "depth": tc["depth"],
        "sibling": tc["sibling"],
        "top": top[tc["node"]],
        "unit": unit[tc["node"]],
        "path": path[tc["node"]],
        "hiro_ast": np.stack([tc["hirope_function"], tc["hirope_statement"], tc["hirope_token"]], 1),
    }


def encode_window(f, lo: int, hi: int, vocab: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = hi - lo
    ids = np.array([vocab.get(t, UNK) for t in f["texts"][lo:hi]], dtype=np.int64)
    masked = (rng.random(n) < 0.15) & (ids != UNK)
    if not masked.any():
        masked[int(rng.integers(n))] = True
    tok = np.where(masked, MASK, ids)
    tgt = np.where(masked & (ids != UNK), ids, -100)
    pos = np.arange(n, dtype=np.int64)[:, None]
    tree = np.stack([f["depth"][lo:hi], f["sibling"][lo:hi], pos[:, 0]], 1).astype(np.int64)
    units = torch.from_numpy(np.stack([f["top"][lo:hi], f["unit"][lo:hi], np.arange(n)], 1))
    nodes = f["leaves"][lo:hi]
    return {
        "tok": tok,
        "tgt": tgt,
        "pos": pos,
        "tree": tree,
        "tree_shuf": np.concatenate([shuffled_rows(tree[:, :2], rng), pos], 1),
        "path": f["path"][lo:hi].astype(np.float32),
        "hiro": unit_indices(units, mode="within").numpy(),
        "hiro_ast": f["hiro_ast"][lo:hi].astype(np.int64),
        "pair_tdist": tree_distance_nodes(f["tree"].parent, nodes),
        "node": nodes,
    }


class CodeMLM(Task):
    name = "code_mlm"
    data = "real: CPython stdlib (Python) + torch/include/c10/util (C++)"
    claim = "tree-enhanced code models / HiRoPE: tree positions lower the MLM loss vs 1-D positions"
    claimed: ClassVar[list[str]] = ["tree_rope", "tree_path", "hirope", "tdist_bias", "tree_embed", "hirope_ast"]
    baselines: ClassVar[list[str]] = ["rope1d", "nope"]
    main_split = "test"
    batch_size = 16
    steps: ClassVar[dict[str, int]] = {"quick": 100, "full": 300, "smoke": 30}

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none"),
            "rope1d": Enc("rope", "pos", 1),
            "tree_rope": Enc("rope", "tree", 3, about="StructuralRoPE on (depth, sibling, token index)"),
            "tree_path": Enc("linear", "path", PATH_DEPTH * PATH_WIDTH, about="additive tree-path PE"),
            "hirope": Enc("hier", "hiro", 3, {"levels": "code"}, about="HiRoPE-style (definition, statement, token)"),
            "tdist_bias": Enc("bias", "pair_tdist", opts={"max_distance": 12}, about="tree-distance attention bias"),
            "tree_embed": Enc(
                "tree_embed",
                "tree",
                2,
                {"max_depth": 32, "max_sibling": 32},
                about="learned depth + sibling embeddings",
            ),
            "hirope_ast": Enc(
                "hier",
                "hiro_ast",
                3,
                {"levels": "code"},
                about="HiRoPE on the `hirope` family (unit, statement, token)",
            ),
            "tree_rope_ctrl": Enc("rope", "tree_shuf", 3, about="control: tree RoPE, depth/sibling shuffled"),
        }

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(2000 + seed)
        limit = {"smoke": 10, "quick": 80, "full": 160}[size]
        files = [(p, lang) for p, lang in source_files(limit)]
        parsed = [(file_tokens(p, lang), lang) for p, lang in files]
        parsed = [(f, lang) for f, lang in parsed if f is not None]
        test_mask = rng.random(len(parsed)) < 0.2
        if not test_mask.any():
            test_mask[-1] = True
        train_f = [f for (f, _), t in zip(parsed, test_mask) if not t]
        test_f = [f for (f, _), t in zip(parsed, test_mask) if t]
        counts = Counter(t for f in train_f for t in f["texts"])
        vocab = {"<pad>": 0, "<unk>": UNK, "<mask>": MASK}
        for t, _ in counts.most_common(VOCAB):
            vocab[t] = len(vocab)
        self.vocab_size = self.out_dim = len(vocab)

        def windows(files, count, width):
            pool = [i for i, f in enumerate(files) if len(f["texts"]) >= width]
            out = []
            for _ in range(count if pool else 0):
                i = pool[rng.integers(len(pool))]
                lo = int(rng.integers(0, len(files[i]["texts"]) - width + 1))
                out.append(encode_window(files[i], lo, lo + width, vocab, rng) | {"file": np.int64(i)})
            return out

        n_train, n_test = {"smoke": (48, 16), "quick": (1500, 200), "full": (3000, 300)}[size]
        self.train = windows(train_f, n_train, WINDOW)
        self.splits = {"test": windows(test_f, n_test, WINDOW), "long": windows(test_f, n_test // 2, LONG_WINDOW)}
        self.files = {"train": train_f, "test": test_f}
        langs = Counter(lang for _, lang in parsed)
        self.info = {
            "files": dict(langs),
            "test_files": int(test_mask.sum()),
            "vocab": len(vocab),
            "window": WINDOW,
            "long_window": LONG_WINDOW,
        }
