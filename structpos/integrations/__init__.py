"""Integrations with other libraries; each submodule imports its library only when used.

* :mod:`.hf` — Hugging Face ``datasets``: ``encode_dataset`` (and Ray Data through ``EncodeBatch``);
* :mod:`.transformers` — structural RoPE inside HF decoders (``install_structural_rope``), the
  ``structpos_*`` attention functions, Qwen-VL position ids;
* :mod:`.flex` — FlexAttention score_mods and masks from per-token structure (no L×L tensors);
* :mod:`.collate` — padded / packed batches of tokens and coordinates (``StructuralCollator``).

Examples
--------
A packed batch from the collator and the FlexAttention mask that keeps attention inside each
document (evaluated here on the index grid, as FlexAttention would):

>>> import torch
>>> from structpos.integrations.collate import StructuralCollator
>>> from structpos.integrations.flex import document_mask_mod
>>> examples = [{"input_ids": [5, 6], "depth": [0, 1]}, {"input_ids": [7], "depth": [0]}]
>>> batch = StructuralCollator(["depth"], mode="pack")(examples)
>>> batch["position_ids"][0].tolist(), batch["cu_seqlens"].tolist()
([[0, 0], [1, 1], [0, 0]], [0, 2, 3])
>>> mask = document_mask_mod(batch["cu_seqlens"])
>>> i = torch.arange(3)
>>> mask(0, 0, i[:, None], i[None, :]).int().tolist()
[[1, 1, 0], [1, 1, 0], [0, 0, 1]]
"""
