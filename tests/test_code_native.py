"""The compiled code parse (structpos._native_code) gives the pure path's columns and Structures exactly."""

from __future__ import annotations

import pkgutil
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_structure

from structpos.exceptions import LimitError
from structpos.limits import Limits
from structpos.native import native_module, pure_python
from structpos.parsers import code
from structpos.parsers.code import parse_code

pytestmark = pytest.mark.skipif(native_module("code") is None, reason="structpos._native_code not built")

WHEELS = sorted(m.name[len("tree_sitter_") :] for m in pkgutil.iter_modules() if m.name.startswith("tree_sitter_"))
SUFFIX = {"python": "py", "c": "h", "cpp": "hpp", "javascript": "js", "go": "go", "rust": "rs", "java": "java"}
SNIPPETS = {
    "python": b"def f(x):\n    return [y for y in x if y]\n\nclass A(B):\n    z: int = 1\n",
    "c": b'#include <stdio.h>\nint main(int argc, char **argv) { printf("%d\\n", argc); return 0; }\n',
    "cpp": b"template <class T> struct V { T x; auto f() const -> T { return x; } };\n",
    "javascript": b"const f = (a, b) => { return a + b; };\nclass C extends D { m() { return `t${1}`; } }\n",
    "go": b'package main\nimport "fmt"\nfunc main() { x := []int{1, 2}; fmt.Println(x) }\n',
    "rust": b'fn main() { let v: Vec<i32> = vec![1, 2]; for x in &v { println!("{}", x); } }\n',
    "java": b"class A { public static void main(String[] a) { int[] v = {1, 2}; System.out.println(v[0]); } }\n",
    "markdown": b"# Title\n\nSome *text* and a [link](x).\n\n- a\n- b\n\n```py\nx = 1\n```\n",
}


def _real_sources(lang: str, limit: int = 3) -> list[bytes]:
    """A few real files of ``lang`` from this Python's installation (stdlib, headers, site-packages)."""
    suffix = SUFFIX.get(lang)
    if suffix is None:
        return []
    roots = [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["include"]), Path(sys.prefix)]
    found: list[bytes] = []
    for root in roots:
        for p in sorted(root.rglob(f"*.{suffix}"))[::37]:
            if p.is_file() and p.stat().st_size < 150_000:
                found.append(p.read_bytes())
                if len(found) >= limit:
                    return found
    return found


def _inputs(lang: str) -> list[bytes]:
    """Real sources, a snippet, their broken variants (ERROR / MISSING nodes), empty and non-UTF-8 input."""
    base = _real_sources(lang) + [SNIPPETS.get(lang, b"x")]
    broken = []
    for src in base:
        half = len(src) // 2
        broken.append(src[:half])  # cut mid-construct: MISSING tokens / ERROR at the end
        broken.append(src[:half] + b"}{)(@#$ ]] \xff\xfe" + src[half:])  # garbage and invalid UTF-8 inside
    return base + broken + [b"", b"\xff\xfe\x00 \x80abc", b"\n\n\t "]


def _pure_columns(lang, data: bytes, named_only: bool, fields: bool, max_nodes=None):
    keep = code._kind_tables(lang).keep_named if named_only else None
    tree = code._tree_sitter().Parser(lang).parse(data)
    return code._tree_columns(tree, keep, fields, max_nodes, "<t>")


def _same_columns(a, b) -> None:
    assert (a.has_error, a.nodes) == (b.has_error, b.nodes)
    for f in ("kinds", "starts", "ends", "parents", "field_ids", "missing"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f


def _same_structure(a, b) -> None:
    assert_same_structure(a, b, "code", "source", "name")


@pytest.mark.parametrize("lang_name", WHEELS)
def test_native_columns_equal_pure_for_every_wheel(lang_name):
    lang = code.get_language(lang_name)
    native = code._native_capsule(lang)
    assert native is not None, f"{lang_name}: ABI {lang.abi_version} not taken by the native runtime"
    errors = 0
    for data in _inputs(lang_name):
        for named_only in (False, True):
            for fields in (False, True):
                got = code._native_columns(native, data, named_only, fields, None, None, "<t>")
                _same_columns(got, _pure_columns(lang, data, named_only, fields))
                errors += got.has_error
    assert errors, "the broken inputs must exercise ERROR/MISSING nodes"


@pytest.mark.parametrize("lang_name", ["python", "c", "javascript"])
@pytest.mark.parametrize("timeout", [None, 60.0])
def test_native_structures_equal_pure(lang_name, timeout):
    limits = Limits(record_timeout=timeout)
    for data in _inputs(lang_name):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # parse_code refuses undecodable bytes on both paths
        for named_only in (False, True):
            for fields in (False, True):
                got = parse_code(data, lang_name, named_only=named_only, fields=fields, limits=limits)
                with pure_python():
                    want = parse_code(data, lang_name, named_only=named_only, fields=fields, limits=limits)
                _same_structure(got, want)


def test_native_has_error_and_missing_flags():
    s = parse_code(b"def f(:\n  return (1\n", "python")
    assert s.code.has_error and s.attrs["is_error"].any()
    with pure_python():
        _same_structure(s, parse_code(b"def f(:\n  return (1\n", "python"))


@pytest.mark.parametrize("named_only", [False, True])
def test_native_node_limit_is_the_pure_error(named_only):
    data = b"x = [1, 2, 3]\n" * 50
    limits = Limits(max_nodes=100, record_timeout=None)
    with pytest.raises(LimitError) as got:
        parse_code(data, "python", named_only=named_only, limits=limits)
    with pure_python(), pytest.raises(LimitError) as want:
        parse_code(data, "python", named_only=named_only, limits=limits)
    assert str(got.value) == str(want.value) and got.value.limit == "max_nodes"
    native = code._native_capsule(code.get_language("python"))
    cols = code._native_columns(native, data, False, False, 10**9, None, "<t>")  # a limit above: walked
    assert cols.kinds.size == cols.nodes


def test_native_in_process_timeout(monkeypatch):
    # without a helper process the parse is cancelled by tree-sitter's progress callback, as in _parse_timed
    monkeypatch.setattr(code, "can_fork", lambda: False)
    data = b"class A:\n  @d\n  def" + b"# c\n" * 30000
    with pytest.raises(LimitError) as e:
        parse_code(data, "python", limits=Limits(record_timeout=1e-6))  # past before the first progress check
    assert e.value.limit == "record_timeout"
    small = b"x = 1\n" * 2000  # the next parse is complete and correct
    s = parse_code(small, "python", limits=Limits(record_timeout=60.0))
    with pure_python():
        _same_structure(s, parse_code(small, "python", limits=Limits(record_timeout=60.0)))


def test_native_columns_are_writable_int64():
    native = code._native_capsule(code.get_language("python"))
    cols = code._native_columns(native, b"x = 1\n", False, True, None, None, "<t>")
    assert cols.kinds.flags.writeable and cols.kinds.dtype == np.int64 and cols.missing.dtype == np.bool_


def test_native_rejects_a_foreign_object():
    mod = native_module("code")
    with pytest.raises(TypeError):
        mod.parse_walk(object(), b"x", False, False, -1, -1)
    with pytest.raises(TypeError):
        mod.language_info(42)


def test_user_language_objects_take_a_path_with_the_same_output():
    import tree_sitter
    import tree_sitter_python

    mine = tree_sitter.Language(tree_sitter_python.language())  # not registered: the pure path
    assert code._native_capsule(mine) is None
    s = parse_code(b"x = (1,\n", mine)
    _same_structure(s, parse_code(b"x = (1,\n", "python"))


def _malloc_in_use() -> int | None:
    """Bytes glibc's malloc has handed out and not had back (``mallinfo2``), or ``None`` off glibc."""
    import ctypes

    class Info(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
        ]

    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = Info
    info = fn()
    return info.uordblks + info.hblkhd


def test_every_call_releases_all_it_allocated_in_its_arena():
    # the runtime's blocks live in a per-call arena released whole at the end of the call (the tree is not
    # freed block by block): malloc's bytes in use stay flat over many calls, whatever the input, large
    # blocks (a module of 3,000 statements has a children array of 24 KB) and cancelled parses included
    if _malloc_in_use() is None:
        pytest.skip("needs glibc's mallinfo2")
    native = code._native_capsule(code.get_language("python"))
    mod, capsule = native
    inputs = [d for lang_name in ("python", "c", "javascript") for d in _inputs(lang_name)]
    big = b"x = 1\n" * 3000
    bomb = b"class A:\n  @d\n  def" + b"# c\n" * 30000

    def one_round() -> None:
        for lang_name in ("python", "c", "javascript"):
            mod_l, cap_l = code._native_capsule(code.get_language(lang_name))
            for data in _inputs(lang_name):
                for named_only, fields in ((False, False), (True, True)):
                    assert mod_l.parse_walk(cap_l, data, named_only, fields, -1, 60_000_000)[2] is not None
                assert mod_l.parse_walk(cap_l, data, False, False, 0, -1)[2] is None  # parsed, not walked
        for _ in range(20):
            assert mod.parse_walk(capsule, big, False, False, -1, -1)[1] > 9000
        with pytest.raises(LimitError):  # cancelled mid-parse
            code._native_columns(native, bomb, False, False, None, 1e-6, "<t>")

    assert inputs
    for _ in range(3):  # warm up: the thread's spare chunks, malloc's own caches
        one_round()
    before = _malloc_in_use()
    for _ in range(10):
        one_round()
    grown = _malloc_in_use() - before
    mod.parse_walk(capsule, big, False, False, -1, -1)
    assert mod.arena_left() > 9000  # that call's tree (its subtrees) went with its arena
    assert grown < 256 * 1024, grown  # a leaked tree of `big` alone is ~300 KB a call, 200 calls here


def test_the_arena_releases_blocks_left_in_a_call_small_and_large():
    # what arena_end relies on, with the runtime's allocator directly: blocks made in a call and not freed
    # (small ones from the chunks, large ones from malloc, grown by realloc) are all released at its end
    if _malloc_in_use() is None:
        pytest.skip("needs glibc's mallinfo2")
    mod = native_module("code")
    small, large = 5000, 50
    left = small - len(range(0, small, 3)) + large - len(range(0, large, 3))  # every third is freed in the call
    for _ in range(3):
        assert mod.arena_exercise(small, large, 4096) == left
    before = _malloc_in_use()
    for _ in range(100):
        mod.arena_exercise(small, large, 4096)
    grown = _malloc_in_use() - before
    assert grown < 64 * 1024, grown  # 33 large blocks of 8 KB left a call: 27 MB if they leaked


def test_concurrent_parses_on_threads_equal_sequential_ones():
    # each thread parses in its own arena (the parse runs without the GIL)
    from concurrent.futures import ThreadPoolExecutor

    lang = code.get_language("python")
    native = code._native_capsule(lang)
    inputs = _inputs("python") * 4
    want = [code._native_columns(native, d, False, True, None, None, "<t>") for d in inputs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda d: code._native_columns(native, d, False, True, None, None, "<t>"), inputs))
    for a, b in zip(got, want):
        _same_columns(a, b)
