"""The one byte→character offset conversion layer.

tree-sitter reports UTF-8 *byte* offsets; structpos stores *character* offsets (what lark
and HF ``offset_mapping`` use). ``ByteToChar(text)`` builds the map once per source:
``char = cum[byte]`` where ``cum[b]`` counts the characters that start before byte ``b``.
Pure-ASCII sources take the identity fast path.
"""

from __future__ import annotations

import numpy as np


class ByteToChar:
    """Map UTF-8 byte offsets of ``text`` to character offsets, vectorized."""

    def __init__(self, text: str, data: bytes | None = None):
        self.text = text
        self.data = text.encode("utf-8") if data is None else data
        self.ascii = len(self.data) == len(text)
        self._cum: np.ndarray | None = None

    @property
    def cum(self) -> np.ndarray:
        if self._cum is None:
            b = np.frombuffer(self.data, dtype=np.uint8)
            # a byte starts a character unless it is a continuation byte 10xxxxxx
            starts = (b & 0xC0) != 0x80
            cum = np.zeros(len(b) + 1, dtype=np.int64)
            np.cumsum(starts, out=cum[1:])
            self._cum = cum
        return self._cum

    def __call__(self, offsets):
        """Convert an int array (or scalar) of byte offsets to character offsets."""
        if self.ascii:
            return np.asarray(offsets, dtype=np.int64)
        return self.cum[np.asarray(offsets, dtype=np.int64)]
