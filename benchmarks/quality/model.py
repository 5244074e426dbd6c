"""The one small transformer every quality task trains, with a pluggable position encoding.

A pre-LN transformer (default 2 layers, ``d = 64``, 4 heads) over token ids. The position
encoding enters in exactly one of three places, and nothing else differs between encodings:

* **rotary** — ``q, k`` of every layer are rotated from per-token coordinates
  (:class:`~structpos.encoders.StructuralRoPE`, :class:`~structpos.encoders.HierarchicalRoPE`,
  :class:`~structpos.encoders.WIRE`) or transported along graph edges
  (:class:`~structpos.encoders.AWRoPE`);
* **additive** — features added to the token embeddings once (learned id embeddings such as
  TAPAS row/column ids, a linear map of LapPE / RWSE / magnetic-Laplacian / tree-path features,
  :class:`~structpos.encoders.LapPEEmbedding`);
* **bias** — a learned bias per head and distance added to every attention logit
  (:class:`~structpos.encoders.SPDBias` on shortest-path or tree distances).

Fairness: :func:`build_model` seeds torch, builds the shared core (embeddings, blocks, head)
first and the encoding's own parameters after it from a second seed, so for one seed every
encoding starts from the same shared weights.

Batches are dicts of padded tensors: ``tok`` ``(B, L)``, ``mask`` ``(B, L)`` (True = real
token) and whatever keys the encodings read: per-token arrays ``(B, L, A)``, pairwise arrays
``(B, L, L)`` (names starting with ``pair_``) and ``edges`` ``(2, E)`` over the flattened
``B·L`` tokens (see :func:`collate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from structpos.encoders import (
    WIRE,
    AWRoPE,
    ExtraPlaneRoPE,
    HierarchicalRoPE,
    LapPEEmbedding,
    SPDBias,
    StructuralRoPE,
)
from structpos.encoders.bipe import BiPE
from structpos.encoders.cope import CoPE
from structpos.encoders.peg import PEGBias
from structpos.encoders.registry import build as build_encoder
from structpos.encoders.spe import SPE
from structpos.encoders.tpe import TraversalOrderAttention
from structpos.encoders.tree_embedding import TreePositionEmbedding

__all__ = ["ROLES", "Enc", "Encoding", "Transformer", "build_model", "collate", "count_parameters"]

ROLES = ("claimed", "baseline", "zero", "control", "ceiling", "oracle")
"""What an encoding is in a task's table: ``claimed`` (the paper's claim says it wins), ``baseline``
(1-D RoPE, NoPE, symmetric encodings), ``zero`` (a claimed encoding fed zero structure: must equal
1-D RoPE), ``control`` (shuffled labels / order), ``ceiling`` (fed the label or an oracle: never a win),
``oracle`` (fed gold structure the model could not see at test time: reported apart)."""


# ---------------------------------------------------------------------- encodings
@dataclass(frozen=True)
class Enc:
    """Declarative description of one position encoding.

    ``kind`` is ``"none"``, ``"rope"``, ``"hier"``, ``"wire"``, ``"awrope"``, ``"ids"``
    (learned embeddings of integer ids, one table per axis, ids clipped to ``max_id``),
    ``"linear"`` (linear map of real features), ``"lappe"`` (LapPEEmbedding; ``key`` and
    ``key + "_eigvals"``), ``"bias"`` (SPDBias on ``key``, a ``pair_`` array) or ``"plane"``
    (:class:`~structpos.encoders.ExtraPlaneRoPE`: full 1-D RoPE on the head from the last axis of
    ``key``, the other axes on ``opts["extra_dim"]`` extra q/k dimensions), ``"learned"`` (a
    rotary encoder of the registry by name, ``opts["encoder"]``: STRING, ComRoPE, LieRE, GRAPE,
    on ``key``'s axes), ``"bipe"`` (BiPE: ``key`` = (segment, offset); learned offset table added
    to the embeddings, RoPE on the segment), ``"tpe"`` (2D-TPE: TraversalOrderAttention over the
    ``dim`` orders of ``key`` replaces the attention) or ``"cope"`` (CoPE logit bias; with
    ``key`` the per-token gates are given — 1 at structural-unit boundaries — instead of learned),
    ``"spe"`` (SPE on the eigenvectors ``key`` and eigenvalues ``key + "_eigvals"``, additive) or
    ``"peg"`` (PEGBias, a learned per-head function of the ``pair_`` distances ``key``).
    ``bias`` names a
    ``pair_`` array for an SPDBias added on top of any kind (e.g. 1-D RoPE + a tree-distance bias);
    ``tree`` names a per-token ``(depth, sibling)`` array whose learned embeddings
    (:class:`~structpos.encoders.TreePositionEmbedding`, depth clipped at ``opts["max_depth"]``,
    sibling at ``opts["max_sibling"]``) are added to the token embeddings on top of any kind
    (tree-enhanced code encoders: 1-D positions + tree position embeddings);
    ``attend`` names a ``pair_`` array of 0/1 that restricts attention on top of any kind: token ``i``
    reads token ``j`` only where it is 1 (a block mask such as Graph-KV's; padding reads nothing).
    ``role`` is one of :data:`ROLES`.
    """

    kind: str
    key: str = ""
    dim: int = 1  # axes / feature width
    opts: dict[str, Any] = field(default_factory=dict)
    about: str = ""
    role: str = "claimed"
    bias: str = ""
    tree: str = ""
    attend: str = ""

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r} is not one of {ROLES}")

    def __hash__(self):  # opts is a dict
        return hash(
            (self.kind, self.key, self.dim, self.bias, self.tree, self.attend, tuple(sorted(self.opts.items())))
        )


class Encoding(nn.Module):
    """The runtime module of an :class:`Enc`: ``features``, ``rotate`` and ``bias`` hooks."""

    def __init__(self, spec: Enc, d: int, heads: int, layers: int):
        super().__init__()
        self.spec, self.heads = spec, heads
        hd = d // heads
        o = dict(spec.opts)
        self.rope = self.embed = self.lin = self.lappe = self.spd = self.extra_qk = self.tpe = self.cope = None
        self.spe = self.peg = self.tree_pos = None
        self.extra_dim = 0
        if spec.bias or spec.kind == "bias":  # a distance bias alone, or on top of another kind
            self.spd = SPDBias(heads, max_distance=int(o.get("max_distance", 12)))
        if spec.kind == "plane":
            self.extra_dim = int(o.get("extra_dim", 8))
            self.rope = ExtraPlaneRoPE(hd, self.extra_dim, spec.dim, base=o.get("base", 1000.0))
            # the encoding's own q/k projections for the extra planes, one per layer
            self.extra_qk = nn.ModuleList(nn.Linear(d, 2 * heads * self.extra_dim) for _ in range(layers))
        elif spec.kind == "learned":
            self.rope = build_encoder(o["encoder"], head_dim=hd, num_axes=spec.dim, **o.get("options", {}))
        elif spec.kind == "bipe":
            self.rope = BiPE(hd, d, max_offset=int(o.get("max_offset", 64)), base=o.get("base", 1000.0))
            nn.init.normal_(self.rope.offset_table.weight[:-1], std=1.0)  # the token embeddings' scale
        elif spec.kind == "tpe":
            self.tpe = TraversalOrderAttention(hd, heads, num_orders=spec.dim, base=o.get("base", 1000.0))
        elif spec.kind == "cope":
            self.cope = CoPE(hd, int(o.get("max_positions", 32)))
        elif spec.kind == "spe":
            self.spe = SPE(out_dim=d)
        elif spec.kind == "peg":
            self.peg = PEGBias(heads)
        elif spec.kind == "rope":
            # interleaved: every axis gets high and low frequencies (sectioned would leave the last axis of a
            # 16-dim head only the slowest pairs, near-constant over short inputs)
            alloc = o.get("allocation", "interleaved")
            self.rope = StructuralRoPE(
                hd,
                spec.dim,
                allocation=alloc,
                base=o.get("base", 1000.0),
                num_heads=heads if alloc == "per_head" else None,
            )
        elif spec.kind == "hier":
            self.rope = HierarchicalRoPE(
                hd, o["levels"], allocation=o.get("allocation", "interleaved"), base=o.get("base", 1000.0)
            )
        elif spec.kind == "wire":
            self.rope = WIRE(hd, spec.dim, base=o.get("base", 1000.0), scale=o.get("scale", 16.0), learnable=True)
        elif spec.kind == "awrope":
            self.rope = AWRoPE(
                hd,
                z=o.get("z", 0.8),
                K=o.get("K", 6),
                phase="coords",
                num_axes=spec.dim,
                learnable=True,
                base=o.get("base", 1000.0),
                check=False,
            )
        elif spec.kind == "ids":
            self.max_id = int(o.get("max_id", 64))
            self.embed = nn.ModuleList(nn.Embedding(self.max_id + 2, d) for _ in range(spec.dim))
            for e in self.embed:  # the sum of the axes' embeddings has the token embeddings' scale, N(0, 1)
                nn.init.normal_(e.weight, std=spec.dim**-0.5)
        elif spec.kind == "linear":
            self.lin = nn.Linear(spec.dim, d)
        elif spec.kind == "lappe":
            self.lappe = LapPEEmbedding(spec.dim, d, use_eigvals=True, sign_flip=True)
        elif spec.kind not in ("none", "bias"):
            raise ValueError(f"unknown encoding kind {spec.kind!r}")
        if spec.kind in ("linear", "lappe", "spe"):  # projected features at unit RMS, like the token embeddings
            self.feat_norm = nn.LayerNorm(d)
        if spec.tree:  # last, so the parameters of the kind it sits on start as they do without it
            # depth + sibling rows at N(0, 1/2) each: their sum has the token embeddings' scale
            max_depth, max_sibling = int(o.get("max_depth", 16)), int(o.get("max_sibling", 32))
            self.tree_pos = TreePositionEmbedding(d, max_depth, max_sibling, init_std=2**-0.5)

    def features(self, batch) -> torch.Tensor | None:
        """What the encoding adds to the token embeddings, ``(B, L, d)``, or ``None``."""
        out = self.kind_features(batch)
        if self.tree_pos is None:
            return out
        ds = batch[self.spec.tree].long()
        tree = self.tree_pos.position(ds[..., 0], ds[..., 1])
        return tree if out is None else out + tree

    def kind_features(self, batch) -> torch.Tensor | None:
        k = self.spec.key
        if self.embed is not None:
            ids = batch[k].long().clamp(-1, self.max_id) + 1  # -1 (no id) -> row 0
            return sum(e(ids[..., a]) for a, e in enumerate(self.embed))
        if isinstance(self.rope, BiPE):
            return self.rope.absolute_encoding(batch[k][..., 1].long())
        if self.lin is not None:
            return self.feat_norm(self.lin(batch[k].float()))
        if self.lappe is not None:
            return self.feat_norm(self.lappe(batch[k].float(), batch[k + "_eigvals"].float()))
        if self.spe is not None:  # every node of a graph carries its eigenvalues: take the first node's
            out = self.spe(batch[k].float(), batch[k + "_eigvals"][:, 0].float(), node_mask=batch["mask"])
            return self.feat_norm(out)
        return None

    def extra_planes(self, h: torch.Tensor, layer: int, q, k):
        """``q, k`` with this encoding's extra planes appended (``"plane"`` kind), else unchanged."""
        if self.extra_qk is None:
            return q, k
        B, L = h.shape[:2]
        qe, ke = self.extra_qk[layer](h).view(B, L, 2, self.heads, self.extra_dim).unbind(2)
        return torch.cat([q, qe], -1), torch.cat([k, ke], -1)

    def rotate(self, q, k, batch):
        if self.rope is None:
            return q, k
        key, mask = self.spec.key, batch["mask"]
        if isinstance(self.rope, AWRoPE):  # transport over the flattened batch graph, node axis first
            B, L, H, D = q.shape
            pos = batch[key].reshape(B * L, -1).float()
            q2, k2 = self.rope(q.reshape(B * L, H, D), k.reshape(B * L, H, D), batch["edges"], pos=pos)
            return q2.reshape(B, L, H, D), k2.reshape(B, L, H, D)
        if isinstance(self.rope, WIRE):
            return self.rope(q, k, batch[key].float(), mask=mask)
        if isinstance(self.rope, BiPE):
            return self.rope(q, k, batch[key][..., 0], mask=mask)
        if self.spec.kind == "learned":
            return self.rope(q, k, batch[key].float(), mask=mask)
        return self.rope(q, k, batch[key], mask=mask)

    def bias(self, batch, q=None, k=None) -> torch.Tensor | None:
        """The additive logit bias ``(B, H, L, L)``: SPD/tree-distance bias, or CoPE's ``q·e(p)``."""
        if self.cope is not None:
            gates = batch[self.spec.key][..., 0].float() if self.spec.key else None
            return self.cope(q, k, gates)
        if self.peg is not None:
            return self.peg(batch[self.spec.key].float())
        if self.spd is None:
            return None
        return self.spd(batch[self.spec.bias or self.spec.key].long())


# ---------------------------------------------------------------------- transformer
class Block(nn.Module):
    def __init__(self, d: int, heads: int, index: int = 0):
        super().__init__()
        self.heads, self.index = heads, index
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, attn_mask, enc: Encoding, batch):
        B, L, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).view(B, L, 3, self.heads, d // self.heads).unbind(2)
        q, k = enc.extra_planes(h, self.index, q, k)
        q, k = enc.rotate(q, k, batch)
        bias = enc.bias(batch, q, k)
        m = attn_mask if bias is None else attn_mask + bias
        if enc.tpe is not None:  # 2D-TPE computes its own attention, (B, L, H, D)
            att = enc.tpe(q, k, v, batch[enc.spec.key], mask=m[:, 0]).transpose(1, 2)
        else:
            att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=m)
        x = x + self.out(att.transpose(1, 2).reshape(B, L, d))
        return x + self.ff(self.ln2(x))


class Transformer(nn.Module):
    """Token embedding (+ additive PE) → blocks (rotary / bias PE inside attention) → per-token logits."""

    def __init__(self, vocab: int, out_dim: int, d: int = 64, heads: int = 4, layers: int = 2, causal: bool = False):
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(vocab, d)
        self.seg = nn.Embedding(4, d)  # token role (content, same for every encoding): query / sep / body
        self.blocks = nn.ModuleList(Block(d, heads, i) for i in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, out_dim)
        self.enc: Encoding | None = None

    def forward(self, batch) -> torch.Tensor:
        tok, mask = batch["tok"], batch["mask"]
        x = self.embed(tok)
        if "seg" in batch:
            x = x + self.seg(batch["seg"])
        extra = self.enc.features(batch)
        if extra is not None:
            x = x + extra
        L = tok.shape[1]
        allowed = mask[:, None, None, :]
        if self.enc.spec.attend:  # a per-example block mask (``pair_`` array, -1 on padding)
            allowed = allowed & (batch[self.enc.spec.attend] > 0)[:, None]
        if self.causal:
            allowed = allowed & torch.ones(L, L, dtype=torch.bool, device=tok.device).tril()
        attn_mask = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device).masked_fill(~allowed, -1e9)
        for blk in self.blocks:
            x = blk(x, attn_mask, self.enc, batch)
        return self.head(self.norm(x))


def build_model(spec: Enc, vocab: int, out_dim: int, seed: int, **kw) -> Transformer:
    """The shared core from ``seed``, then the encoding's parameters from ``seed + 7919``."""
    torch.manual_seed(seed)
    model = Transformer(vocab, out_dim, **kw)
    torch.manual_seed(seed + 7919)
    model.enc = Encoding(spec, model.embed.embedding_dim, model.blocks[0].heads, len(model.blocks))
    return model


def count_parameters(model: Transformer) -> tuple[int, int]:
    """``(all trainable parameters, those of the position encoding alone)``."""
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    enc = sum(p.numel() for p in model.enc.parameters() if p.requires_grad) if model.enc is not None else 0
    return total, enc


# ---------------------------------------------------------------------- batching
def collate(
    examples: list[dict[str, np.ndarray]], keys: list[str], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Pad ``tok`` and the given keys; ``tgt`` padded with ``-100``; ``edges`` offset per example."""
    B = len(examples)
    L = max(len(e["tok"]) for e in examples)
    out: dict[str, torch.Tensor] = {}
    tok = np.zeros((B, L), np.int64)
    mask = np.zeros((B, L), bool)
    for b, e in enumerate(examples):
        n = len(e["tok"])
        tok[b, :n] = e["tok"]
        mask[b, :n] = True
    out["tok"], out["mask"] = torch.from_numpy(tok), torch.from_numpy(mask)
    for key in set(keys) | {k for k in ("seg", "tgt", "ptr") if k in examples[0]}:
        if key == "edges":
            ei = [e["edges"] + b * L for b, e in enumerate(examples)]
            out["edges"] = torch.from_numpy(np.concatenate(ei, axis=1).astype(np.int64))
            continue
        first = np.asarray(examples[0][key])
        if key == "ptr":
            out[key] = torch.tensor([int(e[key]) for e in examples])
            continue
        if key.startswith("pair_"):
            arr = np.full((B, L, L), -1, first.dtype)
            for b, e in enumerate(examples):
                n = len(e["tok"])
                arr[b, :n, :n] = e[key]
        else:
            fill = -100 if key == "tgt" else 0
            arr = np.full((B, L) + first.shape[1:], fill, first.dtype)
            for b, e in enumerate(examples):
                arr[b, : len(e[key])] = e[key]
        out[key] = torch.from_numpy(arr)
    if str(device) != "cpu":
        out = {k: v.to(device, non_blocking=True) for k, v in out.items()}
    return out


# ---------------------------------------------------------------------- training
def cosine_schedule(steps: int, warmup: int = 30) -> Callable[[int], float]:
    return lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
