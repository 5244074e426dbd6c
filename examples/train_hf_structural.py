"""Train a tiny Llama (random init from a config, no download) on Python code with tree positions vs 1-D positions.

Data: CPython's standard library, split by file. A byte-level BPE tokenizer is trained here on
the training files (``tokenizers``, offline); every file is tokenized, its tokens are aligned to
the tree-sitter AST (:func:`structpos.align.token_coords`), and windows of ``--length`` tokens get
three position axes: (token index in the window, AST depth, sibling index). The same
:class:`~structpos.integrations.collate.StructuralCollator` batches both variants:

* ``1-D RoPE`` — the stock model with ``position_ids = token index``;
* ``tree RoPE`` — the same model and seed after
  :func:`~structpos.integrations.transformers.install_structural_rope` (3 axes, sectioned),
  fed ``position_ids = (index, depth, sibling)``.

Both train for the same steps with the same batches; the held-out next-token loss is printed.

    python examples/train_hf_structural.py --quick     # ~1 min on 2 CPU cores
    python examples/train_hf_structural.py             # larger run
"""

from __future__ import annotations

import argparse
import math
import random
import sysconfig
import time
from pathlib import Path

import numpy as np
import torch

import structpos
from structpos.align import token_coords
from structpos.integrations.collate import StructuralCollator
from structpos.integrations.transformers import install_structural_rope

SKIP = ("test", "idlelib", "tkinter", "site-packages", "lib2to3", "pydoc_data", "encodings", "turtledemo")


def stdlib_files(n: int, seed: int = 0) -> list[Path]:
    """``n`` stdlib ``.py`` files of 2–60 kB, in a fixed random order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not any(s in p.parts for s in SKIP) and 2_000 < p.stat().st_size < 60_000)
    random.Random(seed).shuffle(files)
    return files[:n]


def train_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def windows(text: str, tok, length: int) -> list[dict]:
    """Token windows of one file with per-token depth and sibling index (−1 → 0 for unaligned tokens)."""
    enc = tok.encode(text)
    tree = structpos.parse(text, "code", language="python")
    tc = token_coords(tree, enc.offsets, "tree")
    ids = np.asarray(enc.ids)
    depth, sib = np.maximum(tc["depth"], 0), np.maximum(tc["sibling"], 0)
    return [{"input_ids": ids[s:s + length].tolist(), "tok_depth": depth[s:s + length].tolist(),
             "tok_sibling": sib[s:s + length].tolist()} for s in range(0, len(ids) - length + 1, length)]


def say(message: str) -> None:
    """One progress line, printed at once (the run takes minutes)."""
    print(message, flush=True)


def build(num_files: int, length: int, vocab: int, seed: int):
    files = stdlib_files(num_files, seed)
    n_test = max(1, num_files // 5)
    texts = [p.read_text(encoding="utf-8") for p in files]
    say(f"data: {len(files)} stdlib files ({n_test} held out); training a byte-level BPE tokenizer (vocab {vocab})")
    tok = train_tokenizer(texts[n_test:], vocab)
    say("tokenizing the files and aligning their tokens to the tree-sitter AST")
    test = [w for t in texts[:n_test] for w in windows(t, tok, length)]
    train = [w for t in texts[n_test:] for w in windows(t, tok, length)]
    return train, test, tok.get_vocab_size()


def make_model(vocab: int, seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=4096,
                      rope_theta=1000.0, pad_token_id=0)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg)


def evaluate(model, batches, structural: bool) -> float:
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for b in batches:
            pos = b["position_ids"] if structural else b["position_ids"][..., 0]
            out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], position_ids=pos,
                        labels=b["labels"], use_cache=False)
            n = int((b["labels"][:, 1:] != -100).sum())
            total, count = total + float(out.loss) * n, count + n
    model.train()
    return total / max(count, 1)


def train_variant(name: str, train, test, vocab: int, args) -> dict:
    model = make_model(vocab, args.seed)
    structural = name == "tree RoPE"
    if structural:
        install_structural_rope(model, num_axes=3, allocation="sectioned")
    collate = StructuralCollator(["tok_depth", "tok_sibling"], pad_token_id=0)
    rng = random.Random(args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    test_batches = [collate(test[i:i + args.batch]) for i in range(0, len(test), args.batch)]
    t0 = time.perf_counter()
    say(f"training {name}: {args.steps} steps")
    every = max(1, args.steps // 5)
    for step in range(args.steps):
        batch = collate(rng.sample(train, args.batch))
        pos = batch["position_ids"] if structural else batch["position_ids"][..., 0]
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=pos,
                     labels=batch["labels"], use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        if (step + 1) % every == 0 or step + 1 == args.steps:
            say(f"  {name} step {step + 1}/{args.steps}: train loss {float(loss):.3f} ({time.perf_counter() - t0:.0f} s)")
    say(f"  {name}: evaluating on {len(test)} held-out windows")
    test_loss = evaluate(model, test_batches, structural)
    return {"name": name, "test_loss": test_loss, "ppl": math.exp(test_loss), "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = ap.parse_args(argv)
    if args.quick:
        args.files, args.length, args.steps, args.batch, args.vocab = 10, 64, 40, 8, 600
    if args.threads:
        torch.set_num_threads(args.threads)
    train, test, vocab = build(args.files, args.length, args.vocab, args.seed)
    print(f"{len(train)} train / {len(test)} test windows of {args.length} tokens, vocab {vocab}, {args.steps} steps")
    rows = [train_variant(name, train, test, vocab, args) for name in ("1-D RoPE", "tree RoPE")]
    print("| positions | test loss | perplexity | seconds |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['test_loss']:.4f} | {r['ppl']:.2f} | {r['seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
