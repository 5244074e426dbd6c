"""Task 2 — masked-token prediction on real code (CPython stdlib Python + PyTorch's C++ headers).

Input: windows of 64 consecutive leaf tokens of real source files — the top-level modules of
the running interpreter's standard library (Python) and the C++ headers shipped in
``torch/include/c10/util`` (C++). 15 % of the tokens (fixed per example) are replaced by
``[MASK]``; the vocabulary is the 1,500 most frequent train leaf strings.

**No leak:** the coordinates are computed from the *masked* source — each window's file is
re-parsed with its masked tokens replaced by the identifier ``__mask__`` (what the model
sees), so a masked keyword's own depth / sibling slot cannot give it away (an earlier version
parsed the unmasked source: a (depth, sibling) lookup table alone then scored 0.29, above 1-D
RoPE's bigram). From that parse: ``structpos.align.token_coords(tree, spans, "tree")`` (depth,
sibling index), the tree-path PE (:func:`structpos.encoders.tree_path_pe`), HiRoPE-style
levels (top-level definition, statement, token; :func:`structpos.encoders.unit_indices`) and
tree distances (:func:`structpos.coords.tree.tree_distance`); the library's own HiRoPE levels (the
``hirope`` family, per-language function / statement / token rules) feed ``hirope_ast``, and learned
depth / sibling embeddings on top of 1-D RoPE (``tree_embed``) are the tree-enhanced encoders' form.

Label: the masked token's string. The coordinates-only probe is a (depth, sibling) → token
lookup table; the heuristics are the majority token and the bigram (most frequent masked
token after the previous visible token).

Splits: files are split 80 / 20 (``test`` = held-out files, windows of 64 tokens);
``long`` = held-out files, windows of 192 tokens (HiRoPE's longer-context claim).

Claim (SEEDS.md, tree-enhanced CodeBERTa / HiRoPE): tree positions help masked-token
prediction versus 1-D positions. The verdict reads accuracy (comparable with the heuristics);
the loss is reported beside it.
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
from structpos.coords.code_levels import hirope_token_levels
from structpos.coords.hierarchy import nearest_marked
from structpos.coords.tree import depth as tree_depth
from structpos.coords.tree import tree_distance as tree_distance_nodes
from structpos.encoders import tree_path_pe, unit_indices

from ._common import Task, lookup_table, shuffled_rows
from .model import Enc

WINDOW, LONG_WINDOW = 64, 192
MAX_CHARS = 80_000  # every window re-parses its file with the masks in place: bound the cost
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


MASK_TEXT = "__mask__"  # what a masked token reads as in the source the coordinates are parsed from


def leaf_spans(s) -> np.ndarray:
    """``(N, 2)`` character spans of the non-empty leaves of a parsed file, in source order."""
    parent = np.asarray(s.parent)
    has_child = np.zeros(s.num_nodes, bool)
    has_child[parent[parent >= 0]] = True
    leaves = np.flatnonzero(~has_child & (s.end > s.start))
    return np.stack([s.start[leaves], s.end[leaves]], 1)


def token_features(s, offsets: np.ndarray) -> dict[str, np.ndarray]:
    """Per-token tree coordinates of the tokens at ``offsets`` in the parsed code ``s``.

    Depth and sibling (``token_coords``), HiRoPE-style units (top-level child of the root,
    nearest statement-like ancestor), the tree-path PE, the aligned node ids, and the library's
    HiRoPE levels recounted over these tokens (``ast``: ``function``, ``statement``, ``token``).
    """
    parent = np.asarray(s.parent)
    tc = token_coords(s, offsets, "tree,hirope")  # one alignment for both families
    node = np.maximum(tc["node"], 0)  # an unaligned token reads the root's coordinates
    names, inverse = np.unique(np.asarray(s.labels).astype(str), return_inverse=True)
    stmt = np.array([any(w in x for w in STATEMENT_WORDS) for x in names], dtype=bool)[inverse]
    top = nearest_marked(parent, tree_depth(parent) <= 1)  # the root's child that holds each node
    unit = nearest_marked(parent, stmt)  # the nearest statement-like ancestor-or-self
    unit = np.where(unit < 0, top, unit)
    aligned = tc["node"] >= 0
    return {
        "node": node,
        "depth": np.where(aligned, tc["depth"], 0),
        "sibling": np.where(aligned, tc["sibling"], 0),
        "top": top[node],
        "unit": unit[node],
        "path": tree_path_pe(s, PATH_DEPTH, PATH_WIDTH, clip=True)[node],
        "ast": hirope_token_levels(tc["hirope_function"], tc["hirope_statement"]),
    }


def file_tokens(path: Path, language: str):
    """``{src, language, offsets, texts}`` of one file's leaf tokens, or ``None``."""
    try:
        src = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    if len(src) > MAX_CHARS:
        return None
    s = structpos.parse(src, "code", language=language, name=str(path))
    offsets = leaf_spans(s)
    if len(offsets) < WINDOW:
        return None
    top = np.flatnonzero(np.asarray(s.parent) == 0)
    return {
        "src": src,
        "language": language,
        "offsets": offsets,
        "texts": [src[a:b] for a, b in offsets],
        "top_spans": np.stack([s.start[top], s.end[top]], 1),
    }


def enclosing_span(f, lo: int, hi: int) -> tuple[int, int]:
    """The source span of the top-level statements that hold tokens ``lo..hi-1`` (what is re-parsed)."""
    a, b = int(f["offsets"][lo][0]), int(f["offsets"][hi - 1][1])
    tops = f["top_spans"]
    inside = (tops[:, 1] > a) & (tops[:, 0] < b)
    if not inside.any():
        return a, b
    return min(a, int(tops[inside, 0].min())), max(b, int(tops[inside, 1].max()))


def masked_parse(f, lo: int, hi: int, masked: np.ndarray):
    """Parse the window's top-level statements with its masked tokens replaced by ``MASK_TEXT``.

    Returns ``(tree, offsets of the window's tokens in the parsed text)``: coordinates are
    computed from what the model sees, so a masked token's position features cannot reveal it.
    Only the top-level statements (module children) that hold the window are parsed: depths are
    those of the whole file, and the cost no longer grows with the file.
    """
    src, offs = f["src"], f["offsets"]
    start, stop = enclosing_span(f, lo, hi)
    pieces, new = [], np.empty((hi - lo, 2), np.int64)
    cur, out_len = start, 0
    for t in range(lo, hi):
        a, b = int(offs[t][0]), int(offs[t][1])
        pieces.append(src[cur:a])
        out_len += a - cur
        text = MASK_TEXT if masked[t - lo] else src[a:b]
        pieces.append(text)
        new[t - lo] = (out_len, out_len + len(text))
        out_len += len(text)
        cur = b
    pieces.append(src[cur:stop])
    return structpos.parse("".join(pieces), "code", language=f["language"]), new


def encode_window(f, lo: int, hi: int, vocab: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = hi - lo
    ids = np.array([vocab.get(t, UNK) for t in f["texts"][lo:hi]], dtype=np.int64)
    masked = (rng.random(n) < 0.15) & (ids != UNK)
    if not masked.any():
        masked[int(rng.integers(n))] = True
    tok = np.where(masked, MASK, ids)
    tgt = np.where(masked & (ids != UNK), ids, -100)
    tree, offsets = masked_parse(f, lo, hi, masked)
    c = token_features(tree, offsets)
    ast = c["ast"]
    pos = np.arange(n, dtype=np.int64)[:, None]
    ds = np.stack([c["depth"], c["sibling"]], 1).astype(np.int64)
    units = torch.from_numpy(np.stack([c["top"], c["unit"], np.arange(n)], 1))
    zero = np.zeros_like(ds)
    return {
        "tok": tok,
        "tgt": tgt,
        "pos": pos,
        "ds": ds,
        "tree": np.concatenate([ds, pos], 1),
        "tree_zero": np.concatenate([zero, pos], 1),
        "tree_shuf": np.concatenate([shuffled_rows(ds, rng), pos], 1),
        "path": c["path"].astype(np.float32),
        "hiro": unit_indices(units, mode="within").numpy(),
        # the library's HiRoPE levels of the masked parse (an unaligned token reads level 0)
        "hiro_ast": np.maximum(np.stack([ast["function"], ast["statement"], ast["token"]], 1), 0),
        "ds_zero": zero,
        "pair_tdist": tree_distance_nodes(tree.parent, c["node"]),
        "pair_zero": np.zeros((n, n), np.int64),
        "node": c["node"],
        "prev": np.concatenate([[0], tok[:-1]]),  # the previous visible token (bigram heuristic)
    }


class CodeMLM(Task):
    name = "code_mlm"
    data = "real: CPython stdlib (Python) + torch/include/c10/util (C++)"
    claim = "tree-enhanced code models / HiRoPE: tree positions help masked-token prediction vs 1-D positions"
    main_split = "test"
    batch_size = 16
    steps: ClassVar[dict[str, int]] = {"quick": 100, "full": 300, "smoke": 30}
    probe_keys: ClassVar[list[str]] = ["ds"]
    report_loss = True

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline"),
            "tree_plane": Enc(
                "plane", "tree", 3, about="1-D RoPE on the head + (depth, sibling) on extra planes (ExtraPlaneRoPE)"
            ),
            "tree_rope": Enc("rope", "tree", 3, about="StructuralRoPE, 3 axes share the head (interleaved)"),
            "tree_bias": Enc("rope", "pos", 1, bias="pair_tdist", about="1-D RoPE + tree-distance attention bias"),
            "tree_path": Enc("linear", "path", PATH_DEPTH * PATH_WIDTH, about="additive tree-path PE"),
            "hirope": Enc("hier", "hiro", 3, {"levels": "code"}, about="HiRoPE-style (definition, statement, token)"),
            "hirope_ast": Enc(
                "hier", "hiro_ast", 3, {"levels": "code"}, about="HiRoPE levels of the `hirope` family (per language)"
            ),
            "tree_embed": Enc(
                "rope", "pos", 1, tree="ds", about="1-D RoPE + learned depth/sibling embeddings (TreePositionEmbedding)"
            ),
            "tree_embed_zero": Enc(
                "rope", "pos", 1, tree="ds_zero", role="zero", about="tree_embed, depth = sibling = 0"
            ),
            "tree_plane_zero": Enc("plane", "tree_zero", 3, role="zero", about="tree_plane, depth = sibling = 0"),
            "tree_rope_zero": Enc("rope", "tree_zero", 3, role="zero", about="tree_rope, depth = sibling = 0"),
            "tree_bias_zero": Enc("rope", "pos", 1, bias="pair_zero", role="zero", about="tree_bias, all distances 0"),
            "tree_rope_ctrl": Enc("rope", "tree_shuf", 3, role="control", about="tree RoPE, depth/sibling shuffled"),
        }

    def heuristics(self):
        """Majority token, and the most frequent masked token after the previous visible token (bigram)."""
        return super().heuristics() | {"bigram": lookup_table(self.train, ["prev"], self.mode)}

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
                out.append(
                    encode_window(files[i], lo, lo + width, vocab, rng) | {"file": np.int64(i), "lo": np.int64(lo)}
                )
            return out

        n_train, n_test = {"smoke": (48, 16), "quick": (1500, 200), "full": (3000, 300)}[size]
        self.train = windows(train_f, n_train, WINDOW)
        self.splits = {"test": windows(test_f, n_test, WINDOW), "long": windows(test_f, n_test // 2, LONG_WINDOW)}
        self.files = {"train": train_f, "test": test_f}
        self.vocab = vocab
        langs = Counter(lang for _, lang in parsed)
        self.info = {
            "files": dict(langs),
            "test_files": int(test_mask.sum()),
            "vocab": len(vocab),
            "window": WINDOW,
            "long_window": LONG_WINDOW,
        }
