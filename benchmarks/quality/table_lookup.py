"""Task 1 — table cell lookup on real WikiTableQuestions tables, with row extrapolation.

Input: the cells of a real WTQ sub-table in row-major order (header row first), one token per
cell; the query is given by marking two cells (a token-role embedding shared by every
encoding): the row key (a first-column cell whose string is unique in that column) and a
column header. The sub-table (first column + 3
random other columns, a window of consecutive rows) is written back to CSV and parsed with
``structpos.parse(..., "table")``; each token's coordinates come from
``structpos.align.token_coords(table, cell_spans, "table")``. Cell strings are mapped to ids
by a random per-example code book, so only equality of strings is informative.

Label: pointer to the cell in the marked key's row and the marked header's column (counted
correct when the picked cell holds the same string). **Why not readable off one token's
coordinates:** the answer's (row, col) is the row of one marked token and the column of
another, different in every example; no coordinate value marks the answer cell.

A first version named the key and header as query *tokens* (matched by string equality
against the cells). No encoding learned it within this budget (table RoPE 0.18, 1-D RoPE
0.18, TAPAS 0.12 held-out accuracy after 600 steps, seed 0), so the query is now marked in
place and the task isolates the 2-D lookup the claim is about.

Splits: train on sub-tables with 3–8 data rows from 75 % of the tables; ``test`` = held-out
tables, 3–8 rows; ``extrap`` = held-out tables with 12–16 rows (more rows than any training
table, the 2D-TPE / TAPAS setting).

Claim (SEEDS.md, 2D-TPE; TAPAS/TUTA baselines): flattening a table loses its 2-D layout, so
row/column positions beat 1-D positions. Controls: RoPE on a shuffled 1-D order and table
RoPE with shuffled row/column labels (hRoPE control).
"""

from __future__ import annotations

import csv
import io
from typing import ClassVar

import numpy as np

import structpos
from structpos.align import token_coords
from structpos.coords.traversal import traversal_positions

from ._common import Task, data_dir, shuffled_rows
from .model import Enc

V = 96  # code-book size: more than the distinct strings of any sub-table (≤ 17 × 4 cells)
NCOLS = 4


def load_tables(limit: int | None = None) -> list[list[list[str]]]:
    """Grids of the real WTQ CSV tables (parsed by structpos), header row first."""
    files = sorted((data_dir() / "wtq").rglob("*.csv"), key=lambda p: (len(p.stem), p.stem))
    grids = []
    for f in files[:limit]:
        s = structpos.parse(f, "table")
        grid = [list(r) for r in s.table.grid]
        if len(grid) >= 4 and min(len(r) for r in grid) >= NCOLS:
            grids.append(grid)
    return grids


def encode_window(grid, rows: list[int], cols: list[int], rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    """One example from rows ``rows`` (data rows, header added) and columns ``cols`` of ``grid``."""
    sub = [[((grid[r][c] or "").strip() or "–") for c in cols] for r in [0] + rows]
    keys = [row[0] for row in sub[1:]]
    heads = sub[0]
    cand_rows = [i for i, k in enumerate(keys) if keys.count(k) == 1 and k not in heads]
    cand_cols = [j for j in range(1, len(cols)) if heads.count(heads[j]) == 1]
    if not cand_rows or not cand_cols:
        return None
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(sub)
    table = structpos.parse(buf.getvalue(), "table", format="csv")
    cells = np.flatnonzero(np.asarray(table.attrs["row"]) >= 0)
    offsets = np.stack([table.start[cells], table.end[cells]], axis=1)
    tc = token_coords(table, offsets, "table,tpe")
    text = [table.source[s:e] for s, e in offsets]
    book = {t: 4 + i for i, t in enumerate(rng.permutation(sorted(set(text))))}
    if len(book) > V - 4:
        return None
    r = int(rng.choice(cand_rows)) + 1  # grid row of the answer (header is row 0)
    c = int(rng.choice(cand_cols))
    n_cols = len(cols)
    tok = np.array([book[t] for t in text], dtype=np.int64)
    seg = np.zeros(len(tok), np.int64)
    seg[r * n_cols] = 1  # the queried row key (first column of the answer's row)
    seg[c] = 2  # the queried column header
    rc = (np.stack([tc["row"], tc["col"]], 1) + 1).astype(np.int64)
    idx = np.arange(len(text), dtype=np.int64)[:, None]
    tapas = np.stack([tc["tapas_row"], tc["tapas_col"]], 1).astype(np.int64)
    n = len(tok)
    pos = np.arange(n, dtype=np.int64)[:, None]
    return {
        "tok": tok,
        "ptr": np.int64(r * n_cols + c),
        "seg": seg,
        "pos": pos,
        "pos_shuf": rng.permutation(n)[:, None],
        "rc": rc,
        "rc_shuf": shuffled_rows(rc, rng),
        "rci": np.concatenate([rc, idx], 1),
        "rci_zero": np.concatenate([np.zeros_like(rc), idx], 1),
        "header_col": np.int64(c),
        "tpe_pos": traversal_positions(tc["tpe_rank"]),  # row / column / snake / anti-diagonal flattenings
        "tapas": tapas,
        "table_rc": np.stack([tc["row"], tc["col"]], 1),  # the library's own output, for the smoke test
    }


class TableLookup(Task):
    name = "table_lookup"
    data = "real: WikiTableQuestions CSV tables"
    claim = "2D-TPE / TAPAS: flattening a table loses its 2-D structure (row/column positions > 1-D)"
    mode = "pointer"
    probe_keys: ClassVar[list[str]] = ["rc"]
    main_split = "extrap"
    steps: ClassVar[dict[str, int]] = {"quick": 150, "full": 400, "smoke": 30}
    vocab_size = V

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline"),
            "table_rope": Enc("rope", "rc", 2, about="StructuralRoPE on (row, column)"),
            "table_plane": Enc("plane", "rci", 3, about="1-D RoPE + (row, column) on extra planes"),
            "tapas": Enc("ids", "tapas", 2, {"max_id": 32}, about="learned row/column id embeddings (TAPAS)"),
            "tpe": Enc(
                "tpe", "tpe_pos", 4, about="2D-TPE: per-head gated mix of row/column/snake/anti-diagonal orders"
            ),
            "table_plane_zero": Enc("plane", "rci_zero", 3, role="zero", about="table_plane, row = column = 0"),
            "rope1d_shuf": Enc("rope", "pos_shuf", 1, role="control", about="1-D RoPE on a shuffled cell order"),
            "table_rope_ctrl": Enc("rope", "rc_shuf", 2, role="control", about="table RoPE, row/col labels shuffled"),
        }

    def heuristics(self):
        """The cell under the marked header in the first data row; a random cell of the marked column."""
        rng = np.random.default_rng(0)

        def column(e):
            return np.flatnonzero(e["rc"][:, 1] == e["rc"][int(e["header_col"]), 1])[1:]  # data rows only

        def first_row(exs):
            return float(np.mean([int(column(e)[0]) == int(e["ptr"]) for e in exs]))

        def random_row(exs):
            return float(np.mean([int(rng.choice(column(e))) == int(e["ptr"]) for e in exs]))

        return {"column_first_row": first_row, "column_random_row": random_row}

    def augment(self, examples, rng):
        """A fresh random code book per batch: no id can be memorised."""
        book = np.concatenate([np.arange(4), 4 + rng.permutation(V - 4)])
        return [dict(e, tok=book[e["tok"]]) for e in examples]

    def pointer_hits(self, batch, pred):
        tok = batch["tok"]
        return tok.gather(1, pred[:, None])[:, 0] == tok.gather(1, batch["ptr"][:, None])[:, 0]

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(1000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (1500, 300), "full": (3000, 500)}[size]
        grids = load_tables(12 if size == "smoke" else None)
        perm = rng.permutation(len(grids))
        n_test_tables = max(2, len(grids) // 4)
        big = [i for i in perm if len(grids[i]) - 1 >= 16]  # held-out tables must reach 16 rows
        test_ids = set(big[:n_test_tables]) if len(big) >= 2 else set(perm[:n_test_tables])
        train_g = [grids[i] for i in perm if i not in test_ids]
        test_g = [grids[i] for i in perm if i in test_ids]

        def sample(pool, n, lo, hi):
            out, tries = [], 0
            pool = [g for g in pool if len(g) - 1 >= lo]
            while len(out) < n and tries < 20 * n and pool:
                tries += 1
                g = pool[rng.integers(len(pool))]
                k = int(rng.integers(lo, min(hi, len(g) - 1) + 1))
                r0 = int(rng.integers(1, len(g) - k + 1))
                others = sorted(rng.choice(np.arange(1, len(g[0])), size=NCOLS - 1, replace=False).tolist())
                ex = encode_window(g, list(range(r0, r0 + k)), [0] + others, rng)
                if ex is not None:
                    out.append(ex)
            return out

        self.train = sample(train_g, n_train, 3, 8)
        self.splits = {"test": sample(test_g, n_test, 3, 8), "extrap": sample(test_g, n_test, 12, 16)}
        self.info = {"tables": len(grids), "test_tables": len(test_g), "train_rows": "3-8", "extrap_rows": "12-16"}
