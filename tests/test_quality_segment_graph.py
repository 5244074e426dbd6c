"""The Graph-KV quality task (``benchmarks/quality/segment_graph.py``): data, graph positions and mask.

Every property is checked against a reading of the token sequence written apart from the task
(segments split at their id tokens) or a brute-force construction from the segment graph.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.quality import __main__ as quality_main
from benchmarks.quality.segment_graph import ID0, IDS, K0, P0, PAIRS, VALUES, Q, SegmentGraph
from structpos.coords.graph_kv import graph_kv_reads


@pytest.fixture(scope="module")
def task():
    torch.set_num_threads(1)
    t = SegmentGraph()
    t.build("smoke", seed=3)
    return t


def read_example(tok: np.ndarray):
    """``(fact segments as {key: value}, their id tokens, cited id tokens, query key)`` from the tokens alone."""
    q_at = int(np.flatnonzero(tok == Q)[0])
    segs, ids = [], []
    for i, t in enumerate(tok[:q_at].tolist()):
        if ID0 <= t < ID0 + IDS:
            segs.append({})
            ids.append(t)
        else:
            segs[-1][(t - P0) // VALUES] = (t - P0) % VALUES
    return segs, ids, tok[q_at + 1 : -1].tolist(), int(tok[-1] - K0)


def all_examples(task):
    return task.train + [e for split in task.splits.values() for e in split]


def test_the_answer_is_the_value_in_the_one_cited_source_holding_the_key(task):
    for e in all_examples(task):
        segs, ids, cited, q = read_example(e["tok"])
        assert all(len(s) == PAIRS for s in segs)  # keys distinct inside a segment
        sources = [ids.index(c) for c in cited]
        assert sorted(sources) == e["sources"].tolist() and 2 <= len(sources) <= 3
        holding = [s for s in sources if q in segs[s]]
        assert holding == [int(e["answer_segment"])]
        assert e["tgt"][-1] == segs[holding[0]][q] and (e["tgt"][:-1] == -100).all()
        # distractors: at least two segments outside the graph hold the same key, never with the answer
        others = [segs[j][q] for j in range(len(segs)) if j not in sources and q in segs[j]]
        assert len(others) >= 2 and int(e["tgt"][-1]) not in others


def test_no_test_answer_pair_is_drawn_in_training(task):
    def pairs(exs):
        return {(int(e["tok"][-1]), int(e["tgt"][-1])) for e in exs}

    train = pairs(task.train + task.val)
    for split in task.splits.values():
        assert split and not pairs(split) & train
    assert max(len(read_example(e["tok"])[0]) for e in task.train) < min(
        len(read_example(e["tok"])[0]) for e in task.splits["extrap"]
    )


def brute_force_mask(segment: np.ndarray, sources: list[int]) -> np.ndarray:
    """Token ``i`` reads token ``j``: same segment, or ``i`` in the target (the last segment) and ``j`` in a source."""
    target = segment.max()
    L = len(segment)
    out = np.zeros((L, L), dtype=bool)
    for i in range(L):
        for j in range(L):
            out[i, j] = segment[i] == segment[j] or (segment[i] == target and segment[j] in sources)
    return out


@pytest.mark.parametrize("suffix", ["", "_shuf"])
def test_block_mask_equals_brute_force_and_graph_kv_reads(task, suffix):
    shuffled_differs = 0
    for e in all_examples(task):
        seg, mask = e["segment"], e["pair_gkv" + suffix].astype(bool)
        target = int(seg.max())
        cited = np.flatnonzero(mask[-1] & (seg != target))
        sources = sorted({int(seg[j]) for j in cited})
        if not suffix:
            assert sources == e["sources"].tolist()
        else:
            assert len(sources) == len(e["sources"])
            shuffled_differs += sources != e["sources"].tolist()
        assert np.array_equal(mask, brute_force_mask(seg, sources))
        reads = graph_kv_reads([sources, [target] * len(sources)], target + 1)
        assert np.array_equal(mask, reads[seg[:, None], seg[None, :]])
    if suffix:
        assert shuffled_differs > len(all_examples(task)) // 2


def test_graph_kv_positions_share_one_range_for_the_facts(task):
    for e in all_examples(task):
        seg, pos = e["segment"], e["gkv_pos"][:, 0]
        target = seg.max()
        for s in np.unique(seg):
            # the facts all start at 0; the target right after the longest fact segment (1 + PAIRS tokens)
            start = 1 + PAIRS if s == target else 0
            assert pos[seg == s].tolist() == list(range(start, start + int((seg == s).sum())))
        assert np.array_equal(e["pos"][:, 0], np.arange(len(seg)))


def test_heuristics_read_the_first_and_last_occurrence(task):
    e = task.splits["extrap"][0]
    segs, _, _, q = read_example(e["tok"])
    values = [s[q] for s in segs if q in s]
    h = task.heuristics()
    for name, v in (("first_occurrence", values[0]), ("last_occurrence", values[-1])):
        assert h[name]([e]) == float(v == e["tgt"][-1])


def test_augmentation_relabels_consistently(task):
    rng = np.random.default_rng(0)
    for e, a in zip(task.train[:20], task.augment(task.train[:20], rng)):
        segs, ids, cited, q = read_example(a["tok"])
        src = [ids.index(c) for c in cited]
        assert [s for s in src if q in segs[s]] == [int(e["answer_segment"])]
        assert a["tgt"][-1] == segs[int(e["answer_segment"])][q]


def test_the_task_runs_quick(tmp_path):
    args = ["--quick", "--tasks", "segment_graph", "--steps", "0.05", "--out", str(tmp_path), "--no-progress"]
    assert quality_main.main(args) == 0
    import json

    res = json.loads((tmp_path / "results" / "segment_graph.s0.json").read_text())
    names = {r["encoding"] for r in res["runs"]}
    assert set(SegmentGraph().encodings) | {"probe", "h_majority", "h_first_occurrence"} <= names
