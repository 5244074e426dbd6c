"""Task 7 — retrieval by document structure on real text: hRoPE / hierarchy ids vs 1-D.

Documents are real text: windows of consecutive paragraphs of UD English EWT (its ``# newpar``
marks; a window may cross a ``# newdoc`` boundary), the sentences' ``# text`` joined with
spaces, paragraphs with blank lines. Each document is parsed with
``structpos.parse(text, "document")`` (the library's own paragraph / sentence / token
segmentation) and every token's ``(paragraph, sentence, token)`` ids come
from ``structpos.align.token_coords(doc, token_spans, "hier")``.

Input: ``[Q] w [SEP]`` + the document's tokens, where ``w`` is a word that occurs exactly
once in the document. Label: pointer to the **first token of the sentence that contains w**.
**Why not readable off one token's coordinates:** which sentence is meant depends on where the
content word ``w`` occurs; the answer token's own ids (``token = 0``) are shared by every
sentence start.

Splits: documents of 2–3 paragraphs and ≤ 96 tokens train; ``test`` = held-out documents
(every 4th EWT document held out) of the same size; ``extrap`` = held-out documents of 4–8 paragraphs,
97–256 tokens (BiPE / hRoPE: longer inputs than trained).

Claim (SEEDS.md, hRoPE / BiPE): paragraph / sentence / token channels carry structure that
1-D positions do not; the shuffled-label control must do worse than the real structure.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import numpy as np

import structpos
from structpos.align import token_coords

from ._common import Task, shuffled_rows, ud_file
from .model import Enc

VOCAB = 3000
Q, SEP = 2, 3


def paragraphs() -> list[tuple[str, list[str]]]:
    """``(doc id, [paragraph text, ...])`` from the CoNLL-U comments, in file order."""
    docs: list[tuple[str, list[list[str]]]] = []
    for line in ud_file().read_text(encoding="utf-8").splitlines():
        if line.startswith("# newdoc"):
            docs.append((line.split("=", 1)[-1].strip(), []))
        elif line.startswith("# newpar"):
            if not docs:
                docs.append(("doc", []))
            docs[-1][1].append([])
        elif line.startswith("# text ="):
            if not docs:
                docs.append(("doc", [[]]))
            if not docs[-1][1]:
                docs[-1][1].append([])
            docs[-1][1][-1].append(line.split("=", 1)[1].strip())
    return [(d, [" ".join(p) for p in ps if p]) for d, ps in docs]


def doc_tokens(text: str):
    doc = structpos.parse(text, "document")
    tok_nodes = np.flatnonzero(np.isin(doc.labels, ["word", "punct"]))
    offsets = np.stack([doc.start[tok_nodes], doc.end[tok_nodes]], 1)
    tc = token_coords(doc, offsets, "hier,bipe:sentence")
    words = [text[s:e].lower() for s, e in offsets]
    return words, tc


def encode_doc(text: str, vocab: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    words, tc = doc_tokens(text)
    counts = Counter(words)
    cand = [i for i, w in enumerate(words) if counts[w] == 1 and w in vocab and w.isalpha() and tc["sentence"][i] >= 0]
    if not cand:
        return None
    i = int(rng.choice(cand))
    hier = np.stack([tc["paragraph"], tc["sentence"], tc["token"]], 1).astype(np.int64)
    first = np.flatnonzero((hier[:, 0] == hier[i, 0]) & (hier[:, 1] == hier[i, 1]))[0]
    n = len(words)
    tok = np.array([Q, vocab[words[i]], SEP] + [vocab.get(w, 1) for w in words], dtype=np.int64)
    body = hier + np.array([1, 0, 0])  # query tokens sit at paragraph 0
    hq = np.concatenate([np.array([[0, 0, 0], [0, 0, 1], [0, 0, 2]]), body]).astype(np.int64)
    pos = np.arange(n + 3, dtype=np.int64)[:, None]
    return {
        "tok": tok,
        "seg": np.array([1, 1, 3] + [0] * n, dtype=np.int64),
        "ptr": np.int64(3 + first),
        "pos": pos,
        "pos_shuf": np.concatenate([pos[:3], 3 + rng.permutation(n)[:, None]]),
        "hier": hq,
        "hier_ctrl": np.concatenate([hq[:3], shuffled_rows(body, rng)]),
        # BiPE: (sentence ordinal, offset in the sentence); the query tokens are segment 0
        "bipe": np.concatenate(
            [np.array([[0, 0], [0, 1], [0, 2]]), np.stack([tc["bipe_segment"], tc["bipe_offset"]], 1)]
        ).astype(np.int64),
        "psi": np.concatenate([hq[:, :2], pos], 1),
        "psi_zero": np.concatenate([np.zeros_like(hq[:, :2]), pos], 1),
        "doc_hier": hier,  # the library's output, for the smoke test
    }


class DocRetrieval(Task):
    name = "doc_retrieval"
    data = "real: UD English EWT paragraphs (raw text re-parsed by structpos)"
    claim = "hRoPE / BiPE: paragraph-sentence-token channels carry structure; shuffled labels do worse"
    mode = "pointer"
    probe_keys: ClassVar[list[str]] = ["hier"]
    main_split = "extrap"
    steps: ClassVar[dict[str, int]] = {"quick": 150, "full": 400, "smoke": 30}

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline"),
            "hrope": Enc(
                "hier", "hier", 3, {"levels": "document"}, about="HierarchicalRoPE (paragraph, sentence, token)"
            ),
            "doc_plane": Enc("plane", "psi", 3, about="1-D RoPE + (paragraph, sentence) on extra planes"),
            "hier_ids": Enc("ids", "hier", 3, {"max_id": 64}, about="learned paragraph/sentence/token id embeddings"),
            "bipe": Enc("bipe", "bipe", 2, about="BiPE: learned offset-in-sentence embedding + RoPE on the sentence"),
            "doc_plane_zero": Enc("plane", "psi_zero", 3, role="zero", about="doc_plane, paragraph = sentence = 0"),
            "rope1d_shuf": Enc("rope", "pos_shuf", 1, role="control", about="1-D RoPE on a shuffled token order"),
            "hrope_ctrl": Enc(
                "hier", "hier_ctrl", 3, {"levels": "document"}, role="control", about="hRoPE, labels shuffled"
            ),
        }

    def augment(self, examples, rng):
        """A fresh random code book per batch: matching ``w`` by identity is learnable, memorising is not."""
        book = np.concatenate([np.arange(4), 4 + rng.permutation(self.vocab_size - 4)])
        return [dict(e, tok=book[e["tok"]]) for e in examples]

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(7000 + seed)
        docs = paragraphs()
        if size == "smoke":
            docs = docs[:40]
        held = (np.arange(len(docs)) + seed) % 4 == 3  # the seed decides which quarter of the documents is held out
        train_docs = [d for d, h in zip(docs, held) if not h]
        test_docs = [d for d, h in zip(docs, held) if h]
        words = Counter(w for _, ps in train_docs for p in ps for w in p.lower().split())
        vocab = {"<pad>": 0, "<unk>": 1, "<q>": Q, "<sep>": SEP}
        for w, _ in words.most_common(VOCAB):
            vocab.setdefault(w.strip(".,;:!?\"'()"), len(vocab))
        self.vocab_size = len(vocab)

        def windows(pool, count, pmin, pmax, lo, hi):
            out, tries = [], 0
            ps = [p for _, d in pool for p in d]  # the paragraph stream (windows may cross documents)
            while len(out) < count and tries < 30 * count:
                tries += 1
                k = int(rng.integers(pmin, pmax + 1))
                if len(ps) < k:
                    break
                s0 = int(rng.integers(0, len(ps) - k + 1))
                text = "\n\n".join(ps[s0 : s0 + k])
                if not lo <= len(text.split()) * 1.15 <= hi * 1.3:
                    continue
                ex = encode_doc(text, vocab, rng)
                if ex is not None and lo <= len(ex["tok"]) - 3 <= hi:
                    out.append(ex)
            return out

        n_train, n_test = {"smoke": (48, 24), "quick": (1500, 300), "full": (3000, 500)}[size]
        self.train = windows(train_docs, n_train, 2, 3, 8, 96)
        self.splits = {
            "test": windows(test_docs, n_test, 2, 3, 8, 96),
            "extrap": windows(test_docs, n_test, 4, 8, 97, 256),
        }
        self.info = {"documents": len(docs), "train_tokens": "<=96", "extrap_tokens": "97-256", "vocab": len(vocab)}
