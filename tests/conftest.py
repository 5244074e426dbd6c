"""Shared test fixtures: where the real data lies.

The full data sits at ``../shared/data`` beside the checkout (also in CI, which clones into another
folder with a copy of ``shared/`` beside it); ``STRUCTPOS_SHARED`` overrides the location. A clone
anywhere else falls back to the small real samples committed in ``tests/data/sample`` (same layout,
see its README for sources and licenses), so the suite passes everywhere; assertions about the size
of the full data apply only when it is present (:func:`full_data`).
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STRUCTPOS_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data"
TEST_DATA = REPO / "tests" / "data"
SAMPLE_DATA = TEST_DATA / "sample"


def assert_same_structure(a, b, *fields: str) -> None:
    """Two Structures hold the same nodes: labels, spans, parents and every attribute, dtypes included,
    attributes in the same order; and equal values of each further field named (``"node_texts"``, ``"code"`` ...)."""
    assert a.labels.tolist() == b.labels.tolist()
    for f in ("start", "end", "parent"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.tolist() == y.tolist(), f
    assert list(a.attrs) == list(b.attrs)
    for k in a.attrs:
        assert a.attrs[k].dtype == b.attrs[k].dtype and a.attrs[k].tolist() == b.attrs[k].tolist(), k
    for f in fields:
        assert getattr(a, f) == getattr(b, f), f


def full_data() -> bool:
    """Whether the tests run on the full shared data (else on the committed samples)."""
    return DATA.is_dir()


def at_least(full: int, sample: int) -> int:
    """A count threshold: ``full`` on the full shared data, ``sample`` on the committed samples."""
    return full if full_data() else sample


def long_conllu(shared_data: Path, tmp_path: Path) -> Path:
    """About 6,000 sentences: the UD EWT dev treebank repeated (new sentence ids) three times, or
    the committed sample thirty times.

    For tests that must interrupt a run mid-way: 2,000 sentences encoded with 2 workers in 0.6 s
    after the first shard was written, and a loaded CI machine once finished them before a signal
    sent 50 ms after it landed.
    """
    src = shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"
    text = src.read_text(encoding="utf-8")
    long = tmp_path / src.name
    copies = 3 if full_data() else 30
    long.write_text(
        "".join(text.replace("# sent_id = ", f"# sent_id = r{k}-") for k in range(copies)), encoding="utf-8"
    )
    return long


def stdlib_dir() -> Path:
    """CPython's own standard library: real code on every machine."""
    return Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Root of the real data: ``ud_en_ewt/`` and ``wtq/200-csv/`` (full when present, else samples)."""
    return DATA if full_data() else SAMPLE_DATA


@pytest.fixture(scope="session")
def stdlib() -> Path:
    return stdlib_dir()


def pytest_configure(config):
    """Register :mod:`doctest_extras`: doctests of a missing optional extra skip instead of failing."""
    import doctest_extras

    if not config.pluginmanager.is_registered(doctest_extras):  # (also given as -p doctest_extras)
        config.pluginmanager.register(doctest_extras, "structpos-doctest-extras")


TINY_DECODER = {
    "vocab_size": 97,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "pad_token_id": 0,
    "initializer_range": 0.3,
}
"""Config fields of the tiny random decoders the HF integration tests build: 4 query heads sharing 2
key/value heads, head_dim 8; weights large enough that positions visibly change the logits."""


def random_graphs(rng, count: int = 80, max_nodes: int = 40, weighted: bool = False) -> list[tuple]:
    """``(edge_index, num_nodes[, edge_weight])`` graphs of ``0 .. max_nodes - 1`` nodes with random edges:
    every second one stored PyG style (both directions), with duplicate edges and self-loops; with
    ``weighted``, every third one carries weights in ``[0.1, 2)``. The graph batch tests' input."""
    import numpy as np

    out = []
    for i in range(count):
        n = int(rng.integers(0, max_nodes))
        m = int(rng.integers(0, 2 * n + 1))
        ei = rng.integers(0, max(n, 1), (2, m)) if n else np.zeros((2, 0), np.int64)
        if i % 2:
            ei = np.concatenate([ei, ei[::-1]], 1)
        w = rng.uniform(0.1, 2.0, ei.shape[1]) if weighted and i % 3 == 0 else None
        out.append((ei.astype(np.int64), n) if w is None else (ei.astype(np.int64), n, w))
    return out


def perturbed(enc, std: float = 0.3, seed: int = 1):
    """``enc`` with every parameter moved by N(0, std²) (identity inits would make the encoder tests weak)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return enc
