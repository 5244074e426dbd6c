"""Integrations with other libraries; each submodule imports its library only when used.

* :mod:`.hf` — Hugging Face ``datasets``: ``encode_dataset`` (and Ray Data through ``EncodeBatch``);
* :mod:`.transformers` — structural RoPE inside HF decoders (``install_structural_rope``), the
  ``structpos_*`` attention functions, Qwen-VL position ids;
* :mod:`.flex` — FlexAttention score_mods and masks from per-token structure (no L×L tensors);
* :mod:`.collate` — padded / packed batches of tokens and coordinates (``StructuralCollator``).
"""
