"""The fast paths of issue 24 against the paths they replace or an independent reference.

Graph PE: the row-layout sign fix equals the column convention (and the formula it replaced); the
batched LapPE of graphs with unequal component counts (the gather branch) equals each graph
decomposed alone (the common branch); RWSE equals explicit matrix powers for every walk length
around the baby-step/giant-step boundaries, symmetric and not.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from structpos.coords._graph_utils import canonical_phase, canonical_sign_rows
from structpos.coords.laplacian import laplacian_pe, laplacian_pe_batch
from structpos.coords.random_walk import random_walk_pe_batch


def _vectors(rng, shape):
    U = rng.standard_normal(shape)
    U[..., 0, :] = U[..., 1, :] * -1  # exact magnitude ties: the lower index must win
    U[..., 2, :3] = 0.0
    U[0, :, 4] = 0.0  # an all-zero column stays as it is
    return U


def _phase_formula(U):
    """The general formula ``u · conj(u_j)/|u_j|`` (the code the real fast path replaced)."""
    mag = np.abs(U)
    j = np.argmax(mag >= mag.max(axis=-2, keepdims=True) * (1 - 1e-6), axis=-2)[..., None, :]
    pivot = np.take_along_axis(U, j, axis=-2)
    pmag = np.abs(pivot)
    return U * np.where(pmag > 0, np.conj(pivot) / np.where(pmag > 0, pmag, 1), 1)


def test_sign_rows_equal_column_convention_and_complex_formula():
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        U = _vectors(rng, (5, 9, 6)).astype(dtype)
        cols = canonical_phase(U)
        assert cols.dtype == dtype
        rows = canonical_sign_rows(np.ascontiguousarray(U.swapaxes(-1, -2)))
        np.testing.assert_array_equal(rows.swapaxes(-1, -2), cols)
        np.testing.assert_array_equal(cols, _phase_formula(U))
        top = np.take_along_axis(cols, np.abs(cols).argmax(axis=-2)[:, None, :], axis=-2)
        assert (top >= 0).all()


def _graph(rng, n, comps):
    """``comps`` random connected pieces (plus isolated nodes when they do not use every node)."""
    cuts = np.sort(rng.choice(np.arange(2, n - 1), comps - 1, replace=False)) if comps > 1 else []
    edges = []
    for lo, hi in zip([0, *cuts], [*cuts, n - 1]):
        for i in range(lo + 1, hi):
            edges.append((int(rng.integers(lo, i)), i))
    e = np.array(edges, dtype=np.int64).T.reshape(2, -1)
    return np.concatenate([e, e[::-1]], axis=1), n


def test_batch_with_mixed_components_equals_graphs_alone():
    # float64 (numpy's eigh decomposes matrix by matrix); torch's float32 stacks may depend on the stack
    dtype = np.float64
    rng = np.random.default_rng(1)
    graphs = [_graph(rng, n, c) for n, c in [(14, 1), (14, 2), (14, 3), (9, 1), (9, 2), (30, 1), (30, 4)]]
    out = laplacian_pe_batch(graphs, 5, dtype=dtype, workers=1)
    for g, (ei, n) in enumerate(graphs):
        one = laplacian_pe_batch([(ei, n)], 5, dtype=dtype, workers=1)
        np.testing.assert_array_equal(out.pe[out.ptr[g] : out.ptr[g + 1]], one.pe)
        for name in ("eigvals", "mask", "ambiguous"):
            np.testing.assert_array_equal(getattr(out, name)[g], getattr(one, name)[0])
    r = laplacian_pe(*graphs[2], k=5)  # the single-graph API agrees as well
    np.testing.assert_allclose(np.abs(r.pe), np.abs(out.pe[out.ptr[2] : out.ptr[3]]), atol=1e-5)


@pytest.mark.parametrize("symmetrize", [True, False])
def test_rwse_equals_matrix_powers_for_every_length(symmetrize):
    rng = np.random.default_rng(2)
    graphs = []
    for n in (5, 8, 8, 13):
        e = rng.integers(0, n, (2, 2 * n))
        graphs.append((e, n))
    for K in (1, 2, 3, 4, 5, 9, 10, 16, 17):
        pe, ptr = random_walk_pe_batch(graphs, K, symmetrize=symmetrize, dtype=np.float64, workers=1)
        for g, (e, n) in enumerate(graphs):
            A = np.zeros((n, n))
            np.add.at(A, (e[0], e[1]), 1.0)
            if symmetrize:
                A = np.maximum(A, A.T)
            deg = A.sum(1)
            P = A / np.where(deg > 0, deg, 1)[:, None]
            Pk, ref = np.eye(n), []
            for _ in range(K):
                Pk = Pk @ P
                ref.append(np.diag(Pk))
            np.testing.assert_allclose(pe[ptr[g] : ptr[g + 1]], np.stack(ref, 1), atol=1e-12)


# ---------------------------------------------------------------- JSON: array scanner == scanner
def _json_value(rng, depth=0):
    r = rng.random()
    if depth > 5 or r < 0.4:
        pool = [0, -1, 1.5e-7, 12345678901234567890, True, False, None, "", 'a"b\\c', "é\u2028x", "\ud800", "t\tq"]
        return (
            pool[int(rng.integers(len(pool)))] if rng.random() < 0.9 else float(rng.choice([np.nan, np.inf, -np.inf]))
        )
    if r < 0.7:
        return [_json_value(rng, depth + 1) for _ in range(int(rng.integers(0, 5)))]
    keys = ["a", "b", 'k"q', "é", "\\", "", "x y", "\ud834"]
    return {keys[int(rng.integers(len(keys)))]: _json_value(rng, depth + 1) for _ in range(int(rng.integers(0, 5)))}


def _same_structure(a, b):
    for f in ("start", "end", "parent"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert list(a.labels) == list(b.labels)
    assert list(a.attrs["key"]) == list(b.attrs["key"])
    np.testing.assert_array_equal(a.attrs["index"], b.attrs["index"])


def test_json_array_scanner_equals_scanner_on_generated_and_shipped_json():
    import json
    from pathlib import Path

    from structpos.parsers.json_tree import _scan_arrays, _Scanner

    rng = np.random.default_rng(3)
    texts = ['{"a":1,"a":[2,{"a":{}}],"b":[[],[[]],{}]}', "  -Infinity ", "[NaN, Infinity, -0.0e+5]", '"s"', "7"]
    for _ in range(400):
        v = _json_value(rng)
        for kw in ({}, {"indent": 1}, {"ensure_ascii": False}, {"separators": (",", ":")}):
            texts.append(" \n" + json.dumps(v, **kw) + "\r\n ")
    texts += [p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("data/**/*.json")]
    for text in texts:
        fast = _scan_arrays(text, "t", 10**9, "json")
        if fast is None:  # only a lone surrogate *character* (not an escape) sends valid JSON to the scanner
            assert any(0xD800 <= ord(ch) <= 0xDFFF for ch in text), text[:80]
            continue
        _same_structure(fast, _Scanner(text, "t", 10**9).scan("json"))
    for bad in ["[1,", "[1\u0661]", "[" * 3000 + "]" * 3000, '{"a" 1}', "[1] x", '{"a": 1'.ljust(600)]:
        assert _scan_arrays(bad, "t", 10**9, "json") is None  # left to the scanner (its error, or its depth)


def test_parse_json_fast_path_keeps_errors_and_limits():
    import json

    from structpos import LimitError, ParseError
    from structpos.limits import Limits
    from structpos.parsers.json_tree import FAST_MIN_CHARS, _Scanner, parse_json

    text = json.dumps([{"id": i, "v": [i, "x", None]} for i in range(200)], indent=1)
    assert len(text) >= FAST_MIN_CHARS
    _same_structure(parse_json(text), _Scanner(text, "<json>", 10**9).scan("json"))
    with pytest.raises(LimitError, match="max_nodes"):
        parse_json(text, limits=Limits(max_nodes=100))
    bad = text[:-1] + "\n,"
    with pytest.raises(ParseError) as slow:
        _Scanner(bad, "<json>", 10**9).scan("json")
    with pytest.raises(ParseError) as fast:
        parse_json(bad)
    assert str(fast.value) == str(slow.value)


# ---------------------------------------------------------------- CSV: array columns and row-sliced grid
def _csv_texts():
    from pathlib import Path

    rng = np.random.default_rng(4)
    alphabet = ["a", "b", ",", '"', '""', "\r\n", "\n", "\r", " ", "é", "\t"]
    texts = ["".join(rng.choice(alphabet, int(rng.integers(0, 40)))) for _ in range(1500)]
    texts += [p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("data/**/*.csv")]
    texts.append("".join(f'{i},"t, {i}","a""b",plain\r\n' for i in range(500)))
    return texts


@pytest.mark.parametrize("pure", [True, False], ids=["vectorized", "native"])
def test_csv_array_columns_equal_regex_scanner(pure):
    from structpos import ParseError
    from structpos.native import pure_python
    from structpos.parsers.table_csv import _scan, _scan_regex

    for text in _csv_texts():
        try:
            ref = _scan_regex(text, ",", '"', None, "t")
        except ParseError:
            continue
        with pure_python() if pure else contextlib.nullcontext():
            got = _scan(text, ",", '"', None, "t", as_lists=False)
        for f in ("row_start", "row_end", "row_count", "cell_start", "cell_end", "cell_text"):
            assert list(getattr(got, f)) == list(getattr(ref, f)), (f, text)


def test_csv_joined_cell_texts_equal_slices(monkeypatch):
    """The one-split cell values equal a slice per cell, on ASCII and non-ASCII text; a NUL in the text
    sends it to the slices (it is the split character), with the same answer."""
    from structpos import ParseError
    from structpos.native import pure_python
    from structpos.parsers import table_csv

    joined_texts = table_csv._joined_cell_texts
    answered = []

    def counting(*args):
        out = joined_texts(*args)
        answered.append(out is not None)
        return out

    for text in [*_csv_texts(), 'a,"x\x00""y"\r\n\x00,b\n', '"é""""",""\n']:
        monkeypatch.setattr(table_csv, "_joined_cell_texts", counting)
        try:
            with pure_python():  # the vectorized scanner, which the compiled one otherwise replaces
                got = table_csv._scan(text, ",", '"', None, "t", as_lists=False)
        except ParseError:
            continue
        monkeypatch.setattr(table_csv, "_joined_cell_texts", lambda *args: None)
        with pure_python():
            sliced = table_csv._scan(text, ",", '"', None, "t", as_lists=False)
        assert got.cell_text == sliced.cell_text, text
        if "\x00" in text and answered:
            assert not answered[-1]
    assert sum(answered) > 200  # 269 of the generated texts reach it


def test_row_sliced_grid_equals_cell_by_cell_grid():
    from structpos.parsers.table_csv import parse_csv_table

    for text in _csv_texts():
        try:
            s = parse_csv_table(text, header=False)
        except Exception:
            continue
        cells = np.flatnonzero(s.attrs["row"] >= 0)
        grid = [[None] * s.table.n_cols for _ in range(s.table.n_rows)]  # the construction it replaces
        for i in cells.tolist():
            grid[s.attrs["row"][i]][s.attrs["col"][i]] = s.node_texts[i]
        assert s.table.grid == grid, text


def test_parse_json_equals_scanner_on_mutated_documents():
    """Byte-level mutations of a document past ``FAST_MIN_CHARS``: the same Structure or the same error."""
    import json

    from structpos import StructposError
    from structpos.parsers.json_tree import FAST_MIN_CHARS, _Scanner, parse_json

    rng = np.random.default_rng(5)
    base = json.dumps([_json_value(rng) for _ in range(40)], ensure_ascii=True, indent=1)
    assert len(base) >= FAST_MIN_CHARS
    pieces = list('{}[]:,"\\ 0-1eE.tfn\n') + ["true", "null", '"k":', "\\u00e9", "\\ud800", "é"]
    for _ in range(300):
        chars = list(base)
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(len(chars)))
            op = rng.integers(3)
            if op == 0:
                del chars[i]
            elif op == 1:
                chars.insert(i, pieces[int(rng.integers(len(pieces)))])
            else:
                chars[i] = pieces[int(rng.integers(len(pieces)))]
        text = "".join(chars)
        try:
            want = _Scanner(text, "<json>", 10**9).scan("json")
        except StructposError as e:
            with pytest.raises(type(e)) as got:
                parse_json(text)
            assert str(got.value) == str(e)
            continue
        _same_structure(parse_json(text), want)
