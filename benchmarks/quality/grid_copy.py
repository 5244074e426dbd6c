"""Task 9 — copy from the row above on a (row, column) text grid, tested on far larger grids.

Data (generated): an ``H × W`` grid of random symbols written as text, row by row, each row
ended by a newline token. Every cell below the first row must output the symbol of the cell
directly above it; the newlines and the first row are not scored.

**Why 1-D positions struggle and grid positions should not:** in the flattened text the cell
above lies ``W + 1`` tokens back, a distance that changes with the grid's width; in (row,
column) coordinates it is always ``(−1, 0)``. Training grids have at most 7 columns; the
``extrap`` grids have 10–16, offsets 1-D RoPE never saw. The (row, column) of every token
(the newline ends its row) are the text-grid coordinates of the token's line and column.

Heuristics: the majority symbol and copying the left neighbour; the coordinates-only probe is
a (row, column) → symbol lookup (chance, by construction).

Claim (SEEDS.md, 2-D RoPE / long copy on a text grid): 2-D grid positions copy on grids far
larger than trained, where 1-D positions fail.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._common import Task, _tag_accuracy, shuffled_rows
from .model import Enc

SYMBOLS = 16
NEWLINE, SYM0 = 1, 2


def encode_grid(h: int, w: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    grid = rng.integers(0, SYMBOLS, size=(h, w))
    tok = np.concatenate([np.concatenate([SYM0 + grid, np.full((h, 1), NEWLINE)], 1)], 0).reshape(-1)
    rows, cols = np.divmod(np.arange(h * (w + 1)), w + 1)
    tgt = np.full((h, w + 1), -100, np.int64)
    tgt[1:, :w] = grid[:-1]
    n = len(tok)
    pos = np.arange(n, dtype=np.int64)[:, None]
    rc = np.stack([rows, cols], 1).astype(np.int64)
    return {
        "tok": tok.astype(np.int64),
        "tgt": tgt.reshape(-1),
        "pos": pos,
        "rc": rc,
        "rci": np.concatenate([rc, pos], 1),
        "rci_zero": np.concatenate([np.zeros_like(rc), pos], 1),
        "rc_shuf": shuffled_rows(rc, rng),
    }


class GridCopy(Task):
    name = "grid_copy"
    data = "generated: random symbol grids written as text"
    claim = "2-D RoPE: (row, column) positions copy on grids far wider than trained; 1-D positions do not"
    main_split = "extrap"
    steps: ClassVar[dict[str, int]] = {"quick": 200, "full": 600, "smoke": 30}
    vocab_size = SYM0 + SYMBOLS
    out_dim = SYMBOLS
    probe_keys: ClassVar[list[str]] = ["rc"]

    def __init__(self):
        super().__init__()
        self.encodings = {
            "nope": Enc("none", role="baseline"),
            "rope1d": Enc("rope", "pos", 1, role="baseline"),
            "grid_rope": Enc("rope", "rc", 2, about="StructuralRoPE on (row, column)"),
            "grid_plane": Enc("plane", "rci", 3, about="1-D RoPE + (row, column) on extra planes"),
            "grid_string": Enc(
                "learned", "rc", 2, {"encoder": "string"}, about="STRING (learned basis) on (row, column)"
            ),
            "grid_comrope": Enc(
                "learned", "rc", 2, {"encoder": "comrope"}, about="ComRoPE (trainable commuting angles)"
            ),
            "grid_plane_zero": Enc("plane", "rci_zero", 3, role="zero", about="grid_plane, row = column = 0"),
            "grid_rope_ctrl": Enc("rope", "rc_shuf", 2, role="control", about="grid RoPE, (row, column) shuffled"),
        }

    def heuristics(self):
        out = super().heuristics()

        def left(e):
            return np.concatenate([[0], e["tok"][:-1] - SYM0])

        out["copy_left"] = lambda exs: _tag_accuracy(exs, left)
        return out

    def sample(self, count: int, lo: int, hi: int, rng) -> list[dict[str, np.ndarray]]:
        return [encode_grid(int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1)), rng) for _ in range(count)]

    def build(self, size: str = "full", seed: int = 0) -> None:
        rng = np.random.default_rng(9000 + seed)
        n_train, n_test = {"smoke": (64, 32), "quick": (2000, 200), "full": (4000, 300)}[size]
        self.train = self.sample(n_train, 3, 7, rng)
        self.splits = {"test": self.sample(n_test, 3, 7, rng), "extrap": self.sample(n_test, 10, 16, rng)}
        self.info = {"train_side": "3-7", "extrap_side": "10-16", "symbols": SYMBOLS}
