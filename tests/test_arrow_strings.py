"""Arrow string columns: the compiled buffers (``native/text.c``'s ``utf8_column``) against the Python loop.

``string_array`` builds the column the shards store (labels, ids, texts); both paths must give the same
buffers, hence the same Arrow array and the same shard bytes, for every kind of value: ASCII and wider
text, empty strings, ``None``, non-str values (stored as ``str(value)``), str subclasses, and a lone
surrogate, which neither path can encode.
"""

import random

import numpy as np
import pyarrow as pa
import pytest

from structpos import native
from structpos.pipeline.arrow import _utf8_buffers, string_array, string_list_column

TEXT = native.native_module("text")
needs_text = pytest.mark.skipif(TEXT is None, reason="structpos._native_text is not built")


class Shouting(str):
    def __str__(self) -> str:
        return self.upper()


def _values(rng: random.Random, n: int) -> list:
    pool = ["", "a", "module", "identifier", "é", "日本語", "🙂 emoji", "x" * 300, "tab\tand\nnewline", "\x00nul"]
    out: list = []
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            out.append(None)
        elif r < 0.15:
            out.append(rng.choice([0, -7, 3.5, True, 10**30]))
        elif r < 0.17:
            out.append(Shouting(rng.choice(pool)))
        else:
            out.append("".join(rng.choice(pool) for _ in range(rng.randint(0, 3))))
    return out


def _buffers(values, pure: bool):
    if pure:
        with native.pure_python():
            offsets, data, validity = _utf8_buffers(values)
    else:
        offsets, data, validity = _utf8_buffers(values)
    return offsets.tolist(), data.to_pybytes(), None if validity is None else validity.to_pybytes()


@needs_text
@pytest.mark.parametrize("seed", range(5))
def test_compiled_buffers_equal_the_python_loop(seed):
    rng = random.Random(seed)
    for n in (0, 1, 7, 100, 5000):
        values = _values(rng, n)
        assert _buffers(values, pure=False) == _buffers(values, pure=True)


@needs_text
def test_a_column_without_nulls_has_no_validity_bitmap_and_one_with_nulls_has_one():
    assert _buffers(["a", "b"], pure=False)[2] is None
    offsets, data, validity = _buffers(["ab", None, "c"], pure=False)
    assert (offsets, data) == ([0, 2, 2, 3], b"abc")
    assert validity is not None and np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[
        :3
    ].tolist() == [
        1,
        0,
        1,
    ]


@pytest.mark.parametrize("pure", [False, True])
def test_string_array_reads_back_as_str_of_each_value(pure):
    values = _values(random.Random(9), 2000)
    if pure:
        with native.pure_python():
            arr = string_array(values)
    else:
        arr = string_array(values)
    assert arr.type == pa.string()
    assert arr.to_pylist() == [None if v is None else str(v) for v in values]


@pytest.mark.parametrize("pure", [False, True])
def test_a_lone_surrogate_raises_the_codec_error_on_both_paths(pure):
    values = ["ok", "bad \ud800 here"]
    if pure:
        with native.pure_python(), pytest.raises(UnicodeEncodeError):
            string_array(values)
    else:
        with pytest.raises(UnicodeEncodeError):
            string_array(values)


@needs_text
def test_a_str_that_empties_the_list_is_an_error_not_a_crash():
    values: list = []

    class Draining:
        def __str__(self) -> str:
            values.clear()
            return "gone"

    values.extend([Draining(), "a", "b"])
    with pytest.raises(RuntimeError, match="changed size"):
        TEXT.utf8_column(values)


def test_label_columns_of_object_arrays_equal_on_both_paths():
    labels = [np.array(["module", "identifier", "é"], dtype=object), None, np.array([], dtype=object)]
    with native.pure_python():
        pure = string_list_column(labels)
    assert string_list_column(labels).equals(pure)
    assert pure.to_pylist() == [["module", "identifier", "é"], None, []]
