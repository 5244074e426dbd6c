"""The compiled JSON scanner (native/json.c) against the pure-Python scanner: same Structures, same errors."""

import json
import random
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_structure

from structpos import native
from structpos.exceptions import StructposError
from structpos.limits import Limits
from structpos.parsers.json_tree import parse_json

NATIVE = native.native_module("json")
needs_native = pytest.mark.skipif(NATIVE is None, reason="structpos._native_json is not built")


def test_built_where_a_compiler_exists():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the optional extensions are skipped by design")
    assert "json" in native.native_available()


def _pure(text, **kw):
    with native.pure_python():
        return parse_json(text, **kw)


def assert_same(text, **kw):
    """Both paths give identical Structures, or the same exception type and message."""
    try:
        fast = parse_json(text, **kw)
    except StructposError as e:
        with pytest.raises(type(e)) as info:
            _pure(text, **kw)
        assert str(info.value) == str(e), text
        return None
    slow = _pure(text, **kw)
    assert_same_structure(fast, slow)
    for k in fast.attrs:
        assert [type(x) for x in fast.attrs[k].tolist()] == [type(x) for x in slow.attrs[k].tolist()], (k, text)
    assert (fast.kind, fast.format, fast.name, fast.source) == (slow.kind, slow.format, slow.name, slow.source)
    return fast


# ---------------------------------------------------------------- valid texts

EXAMPLES = [
    '{"a": [1, true]}',
    "[]",
    "{}",
    " [ {} , [ ] ] ",
    '"x"',
    "0",
    "-0.5e-3",
    "1E+10",
    "NaN",
    "[NaN, Infinity, -Infinity, -0, 0.0, 1e5, 2E-2]",
    '{"a": {"a": {"a": []}}, "a": 1}',
    '{"\\ud800": 1, "\\udc00x": 2, "\\ud83d\\ude00": 3, "\\ud83dx\\ude00": 4, "\\ud800\\u0041": 5}',
    '{"é\\n\\t\\"\\\\\\/\\b\\f\\r": {"é\\n": 3}, "\\u00e9": "é"}',
    '["\\u00e9\U0001f600", "\ud7ff\ue000\uffff"]',
    '{"\U0001f600": "ü", "ü": "\U0001f600"}',
    '{"Ā": ["Ā"]}',  # UCS-2 text
    '\t\n\r {"k" \n:\r 1 \t}\n',
    "1\u0663",  # a non-ASCII digit: the pure scanner's NUMBER_RE takes it, json.loads does not
]


@needs_native
@pytest.mark.parametrize("text", EXAMPLES)
def test_examples_match_the_pure_path(text):
    assert_same(text)


def _real_texts():
    out = [Path(__file__).parent.joinpath("data", "shard_digests.json").read_text(encoding="utf-8")]
    root = Path(sysconfig.get_paths()["purelib"])
    for p in sorted(root.rglob("*.json"))[:400]:
        if 2_000 <= p.stat().st_size <= 300_000 and len(out) < 12:
            try:
                out.append(p.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, OSError):
                continue
    return out


@needs_native
def test_real_files_match_the_pure_path():
    texts = _real_texts()
    assert texts
    for text in texts:
        assert_same(text)
        assert NATIVE.scan(text, 10**9) is not None


_ALPHABET = ["a", "é", "Ā", "\U0001f600", " ", '"', "\\", "/", "\n", "\x7f", "\u2028", "\ud800"]


def _rand_str(rng):
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(6)))


def _rand_value(rng, depth=0):
    r = rng.random()
    if depth > 6 or r < 0.4:
        return rng.choice(
            [
                None,
                True,
                False,
                rng.randrange(-(10**20), 10**20),
                rng.uniform(-1e6, 1e6),
                rng.choice([1e300, -1e-300, 5e-324, float("inf"), float("-inf"), float("nan")]),
                _rand_str(rng),
            ]
        )
    if r < 0.7:
        return [_rand_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {_rand_str(rng): _rand_value(rng, depth + 1) for _ in range(rng.randrange(5))}


@needs_native
def test_random_documents_match_the_pure_path():
    rng = random.Random(24)
    for i in range(300):
        value = _rand_value(rng)
        text = json.dumps(value, ensure_ascii=bool(i % 2), indent=rng.choice([None, 0, 1, "\t"]))
        assert_same(text)
        if "\ud800" not in text:  # (a lone surrogate character: read_text refuses it first)
            assert NATIVE.scan(text, 10**9) is not None, text  # the native path did the work
        assert_same(value)  # a Python value goes through dumps_iterative, then the same scanners


@needs_native
def test_deep_nesting():
    depth = 100_000
    s = assert_same("[" * depth + "]" * depth)
    assert len(s) == depth and s.parent[-1] == depth - 2
    assert_same('{"k":' * depth + "1" + "}" * depth)
    assert_same("[" * depth + "]" * (depth + 1))
    assert_same("[" * depth + "]" * (depth - 1))


# ---------------------------------------------------------------- invalid texts


@needs_native
def test_every_truncation_fails_alike():
    for text in (
        EXAMPLES[0],
        '{"a": [1, -2.5e+3, "x\\u00e9\\ud83d\\ude00", {"b": null}], "c": [true, false, NaN, -Infinity]}',
        '["é\U0001f600", {"Ā": "\\n"}]',
    ):
        for cut in range(len(text) + 1):
            assert_same(text[:cut])
            assert_same(text[cut:])


BAD = [
    "",
    " ",
    "[1,]",
    '{"a":1,}',
    "[1 2]",
    '{"a" 1}',
    '{"a":}',
    "{1: 2}",
    "{'a': 1}",
    '["\\x"]',
    '["\\u12"]',
    '["\\u12g4"]',
    '{"\\ud800\\u": 1}',
    '{"\\ud800\\uzzzz": 1}',
    '["\\',
    '["a\x01"]',
    '{"a\x1f": 1}',
    '["\t"]',
    "[01]",
    "[-]",
    "[1.]",
    "[.5]",
    "[1e]",
    "[1e+]",
    "[+1]",
    "[0x10]",
    "[nul]",
    "[True]",
    "[-NaN]",
    "[infinity]",
    "[1] x",
    "[1]]",
    "{}{}",
    "\ufeff[]",
    "[\u00a0]",
    "[1\u0663]",
    "[\ud800]",  # a lone surrogate character in str input
    '"\ud800"',
    "\x00",
]


@needs_native
@pytest.mark.parametrize("text", BAD)
def test_bad_input_fails_alike(text):
    assert_same(text, name="bad.json")
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        assert_same(text.encode("utf-8"), name="bad.json")


@needs_native
def test_max_nodes_limit_fails_alike():
    text = '{"a": [1, 2, {"b": [3, 4]}], "c": "x"}'
    n = len(parse_json(text))
    for m in range(1, n + 2):
        assert_same(text, limits=Limits(max_nodes=m))
    assert_same("[" * 50 + "]" * 50, limits=Limits(max_nodes=10))
    assert_same("[1, 2, 3, x", limits=Limits(max_nodes=2))  # the limit comes before the error
    assert_same("[1, 2]", limits=Limits(max_nodes=10**20))  # beyond Py_ssize_t: clipped, not an OverflowError


# ---------------------------------------------------------------- the entry point itself


@needs_native
def test_scan_accepts_exactly_what_json_loads_accepts():
    """Random mutations of valid text, all three string kinds, lone surrogates included:
    scan returns columns exactly when json.loads accepts the text, and never crashes."""
    rng = random.Random(7)
    seeds = [
        '{"a": [1, -2.5e+3, "x\\u00e9", {"b": null}], "c": [true, false, NaN, -Infinity]}',
        '["é", {"Ā": "\\ud83d\\ude00"}, 1e5]',
        '{"\U0001f600": [0, 0.5, "\\\\"]}',
    ]
    frags = list('{}[]:,"\\ -+.eE0123456789tfnaNIu') + ["\x00", "\x1f", "\ud800", "é", "\U0001f600", "\\u", "null"]
    for _ in range(3000):
        t = list(rng.choice(seeds))
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(t) + 1)
            op = rng.random()
            if op < 0.4:
                t.insert(i, rng.choice(frags))
            elif op < 0.7 and i < len(t):
                del t[i]
            elif i < len(t):
                t[i] = rng.choice(frags)
        text = "".join(t)
        try:
            json.loads(text)
            ok = True
        except ValueError:
            ok = False
        out = NATIVE.scan(text, 10**9)
        assert (out is not None) == ok, text


@needs_native
def test_scan_on_random_bytes_never_crashes():
    rng = random.Random(3)
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        for text in (raw.decode("latin-1"), raw.decode("utf-16-le", "surrogatepass") if len(raw) % 2 == 0 else ""):
            out = NATIVE.scan(text, 1000)
            assert out is None or len(out[0]) <= len(text)


@needs_native
def test_scan_columns_and_bounds():
    kind, parent, start, end, index, members, member_key, keys = NATIVE.scan('{"a": [1, "x"], "a": {}}', 100)
    assert list(kind) == [0, 2, 1, 6, 3, 2, 0] and keys == ["a"]
    assert np.frombuffer(members, np.int64).tolist() == [1, 5]
    assert np.frombuffer(member_key, np.int64).tolist() == [0, 0]
    assert np.frombuffer(index, np.int64).tolist() == [-1, -1, -1, 0, 1, -1, -1]
    assert np.frombuffer(end, np.int64).tolist() == [24, 14, 14, 8, 13, 23, 23]
    assert NATIVE.scan("[1, 2]", 3) is not None
    assert NATIVE.scan("[1, 2]", 2) is None and NATIVE.scan("[1, 2]", 0) is None and NATIVE.scan("1", -5) is None
    assert NATIVE.scan("[1]", 10**30) is not None and NATIVE.scan("[1]", -(10**30)) is None
    with pytest.raises(TypeError):
        NATIVE.scan(b"[]", 10)
    with pytest.raises(TypeError):
        NATIVE.scan("[]", 1.5)
