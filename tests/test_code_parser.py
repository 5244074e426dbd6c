"""parse_code against tree-sitter's own node API, walked independently (recursion over
``node.children``), on CPython's whole standard library and on seven languages."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tree_sitter")
import tree_sitter

from structpos import StructureError
from structpos.coords.tree import tree_coords
from structpos.parsers import parse
from structpos.parsers.code import get_language, language_for_path, parse_code

SAMPLE_EVERY = 24  # full equality check on every 24th stdlib file ...
NON_ASCII_EVERY = 4  # ... and on every 4th file with non-ASCII text (char offsets)


# ------------------------------------------------------------ reference walk
def reference(tree: tree_sitter.Tree, named_only: bool = False) -> dict[str, list]:
    """Preorder records via recursion over ``node.children`` / ``node.named_children``."""
    keys = ("type", "start", "end", "parent", "depth", "sibling", "size", "named", "error", "field", "node")
    out: dict[str, list] = {k: [] for k in keys}

    def visit(node, parent: int, depth: int, sibling: int, field: str) -> int:
        me = len(out["type"])
        for key, val in (
            ("type", node.type), ("start", node.start_byte), ("end", node.end_byte), ("parent", parent),
            ("depth", depth), ("sibling", sibling), ("size", 0), ("named", node.is_named),
            ("error", node.is_error or node.is_missing), ("field", field), ("node", node),
        ):  # fmt: skip
            out[key].append(val)
        size = 1
        if named_only:
            for k, child in enumerate(node.named_children):
                size += visit(child, me, depth + 1, k, "")
        else:
            for k, child in enumerate(node.children):
                size += visit(child, me, depth + 1, k, node.field_name_for_child(k) or "")
        out["size"][me] = size
        return size

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        visit(tree.root_node, -1, 0, 0, "")
    finally:
        sys.setrecursionlimit(limit)
    return out


def byte_to_char(text: str, offsets: list[int]) -> np.ndarray:
    """Independent byte->char map: decode each prefix length (for small inputs only)."""
    data = text.encode("utf-8")
    return np.array([len(data[:b].decode("utf-8")) for b in offsets])


def assert_matches_reference(s, tree, text: str, named_only: bool = False) -> None:
    ref = reference(tree, named_only)
    coords = tree_coords(s)
    assert list(s.labels) == ref["type"], s.name
    np.testing.assert_array_equal(s.parent, ref["parent"], err_msg=s.name)
    np.testing.assert_array_equal(coords["depth"], ref["depth"], err_msg=s.name)
    np.testing.assert_array_equal(coords["sibling"], ref["sibling"], err_msg=s.name)
    np.testing.assert_array_equal(coords["subtree_size"], ref["size"], err_msg=s.name)
    np.testing.assert_array_equal(s.attrs["is_named"], ref["named"], err_msg=s.name)
    np.testing.assert_array_equal(s.attrs["is_error"], ref["error"], err_msg=s.name)
    data = text.encode("utf-8")
    if len(data) == len(text):
        np.testing.assert_array_equal(s.start, ref["start"], err_msg=s.name)
        np.testing.assert_array_equal(s.end, ref["end"], err_msg=s.name)
    else:  # non-ASCII: every node's character span holds exactly tree-sitter's text
        for i, node in enumerate(ref["node"]):
            assert text[s.start[i] : s.end[i]] == node.text.decode("utf-8"), (s.name, i, node.type)


def assert_spans_nest(s) -> None:
    """Children inside parents (validate), siblings in order and non-overlapping."""
    s.validate()
    p = s.parent
    # pair each node with its next sibling: neighbours in a stable sort by parent
    order = np.argsort(p, kind="stable")
    po = p[order]
    sib_pair = (po[1:] == po[:-1]) & (po[1:] >= 0)
    a, b = order[:-1][sib_pair], order[1:][sib_pair]
    assert np.all(a < b), s.name
    assert np.all(s.end[a] <= s.start[b]), s.name
    assert np.all(s.start <= s.end), s.name


# ------------------------------------------------------------------ stdlib
def stdlib_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)


@pytest.fixture(scope="module")
def stdlib_sources(stdlib):
    """Every stdlib .py file that is valid UTF-8 as (path, bytes), and how many are not."""
    files = stdlib_files(stdlib)
    assert len(files) > 500, f"suspiciously few stdlib files under {stdlib}"
    blobs, skipped = [], 0
    for path in files:
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            skipped += 1
            continue
        blobs.append((path, data))
    return blobs, skipped


def test_stdlib_every_file_parses_with_nested_spans(stdlib_sources):
    blobs, skipped = stdlib_sources
    assert skipped < 0.02 * (len(blobs) + skipped), f"{skipped} stdlib files are not UTF-8"
    total = 0
    for path, data in blobs:
        s = parse_code(data, "python", name=str(path))
        assert s.name == str(path) and s.code.language == "python"
        assert len(s) >= 1 and s.labels[0] == "module"
        assert_spans_nest(s)
        out = tree_coords(s)
        assert out["root_path"].shape == (len(s), 32)
        total += len(s)
    print(f"\nparsed {len(blobs)} stdlib files ({skipped} skipped: not UTF-8), {total} nodes")


def test_stdlib_sample_matches_independent_walk(stdlib_sources):
    blobs, _ = stdlib_sources
    parser = tree_sitter.Parser(get_language("python"))
    checked = non_ascii = 0
    for k, (path, data) in enumerate(blobs):
        text = data.decode("utf-8")
        if len(text) != len(data):
            non_ascii += 1
            if non_ascii % NON_ASCII_EVERY:
                continue
        elif k % SAMPLE_EVERY:
            continue
        s = parse_code(path)
        assert_matches_reference(s, parser.parse(data), text)
        checked += 1
    assert checked >= len(blobs) // SAMPLE_EVERY and non_ascii > 20


def test_named_only_and_fields_match_independent_walk(stdlib):
    parser = tree_sitter.Parser(get_language("python"))
    for path in stdlib_files(stdlib)[3::100]:
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        tree = parser.parse(data)
        named = parse_code(data, "python", name=str(path), named_only=True)
        assert named.attrs["is_named"].all()
        assert_matches_reference(named, tree, text, named_only=True)
        full = parse_code(data, "python", fields=True)
        assert list(full.attrs["field"]) == reference(tree)["field"], path


# --------------------------------------------------------------- languages
SNIPPETS = {
    "python": ("def greet(name: str) -> str:\n    return f'héllo {name}'\n", "function_definition"),
    "javascript": ("function add(a, b) {\n  return a + b; // ∑\n}\nconst x = [1, 2].map(v => v * 2);\n", "arrow_function"),
    "java": ("class Hi {\n  public static void main(String[] args) {\n    System.out.println(\"héllo\");\n  }\n}\n", "method_declaration"),
    "go": ("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"héllo\")\n}\n", "function_declaration"),
    "rust": ("fn main() {\n    let v: Vec<i32> = (0..3).collect();\n    println!(\"{:?} é\", v);\n}\n", "function_item"),
    "c": ("#include <stdio.h>\nint main(void) {\n  printf(\"%d\\n\", 1 + 2);\n  return 0;\n}\n", "function_definition"),
    "cpp": ("#include <vector>\ntemplate <typename T> class Box {\n public:\n  T value;\n};\nint main() { Box<int> b{1}; return b.value; }\n", "template_declaration"),
}  # fmt: skip

BROKEN = {
    "python": "def f(x:\n    return (x +\nclass",
    "javascript": "function f( { return 1 + ; }",
    "java": "class A { void f( { int x = ; }",
    "go": "package main\nfunc f( {\n x := \n}",
    "rust": "fn f( { let x = ; }",
    "c": "int f( { return 1 + ; }",
    "cpp": "class A { int f( { return ; } ",
}


@pytest.mark.parametrize("language", sorted(SNIPPETS))
def test_each_language_parses_a_snippet(language):
    text, expected = SNIPPETS[language]
    s = parse_code(text, language)
    assert not s.code.has_error and not s.attrs["is_error"].any()
    assert expected in set(s.labels), sorted(set(s.labels))
    assert s.start[0] <= 1 and s.end[0] >= len(text.rstrip())
    assert_spans_nest(s)
    tree = tree_sitter.Parser(get_language(language)).parse(text.encode("utf-8"))
    assert_matches_reference(s, tree, text)
    # byte->char conversion agrees with decoding each prefix independently
    ref = reference(tree)
    np.testing.assert_array_equal(s.start, byte_to_char(text, ref["start"]))


@pytest.mark.parametrize("language", sorted(BROKEN))
@pytest.mark.parametrize("named_only", [False, True])
def test_syntax_errors_are_flagged_not_raised(language, named_only):
    text = BROKEN[language]
    s = parse_code(text, language, named_only=named_only)
    assert s.code.has_error
    assert_spans_nest(s)
    flagged = set(s.labels[s.attrs["is_error"]])
    assert flagged, "no node flagged"
    tree = tree_sitter.Parser(get_language(language)).parse(text.encode())
    assert_matches_reference(s, tree, text, named_only=named_only)
    tree_coords(s)


@pytest.mark.parametrize("language,text", [("python", "def f(:\n pass\n"), ("c", "int f() { return 1 }")])
def test_missing_node_is_flagged(language, text):
    s = parse_code(text, language)
    tree = tree_sitter.Parser(get_language(language)).parse(text.encode())
    ref = reference(tree)
    missing = [i for i, n in enumerate(ref["node"]) if n.is_missing]
    assert missing, "the grammar no longer inserts a MISSING node here; pick another example"
    assert s.attrs["is_error"][missing].all()
    assert (s.start[missing] == s.end[missing]).all()


# ------------------------------------------------------------- the interface
def test_path_input_guesses_language(tmp_path):
    src = tmp_path / "m.rs"
    src.write_text("fn main() {}\n", encoding="utf-8")
    s = parse_code(src)
    assert s.name == str(src) and s.code.language == "rust" and "function_item" in set(s.labels)
    assert language_for_path("a/b.HPP") == "cpp"
    with pytest.raises(StructureError, match="suffix"):
        parse_code(tmp_path / "notes.txt")


def test_invalid_utf8_names_the_byte(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"x = 1\ny = '\xff'\n")
    with pytest.raises(StructureError, match=r"bad\.py at byte 11"):
        parse_code(bad)


def test_str_and_bytes_agree_and_registry_dispatch():
    text = "π = 3.14  # ünïcode\nprint(π)\n"
    a = parse_code(text, "python")
    b = parse_code(text.encode("utf-8"), "python")
    c = parse(text, "code", language="py")
    for other in (b, c):
        assert list(a.labels) == list(other.labels)
        np.testing.assert_array_equal(a.start, other.start)
    assert a.node_text(int(np.flatnonzero(a.labels == "comment")[0])) == "# ünïcode"


def test_user_language_and_caching():
    import tree_sitter_python

    lang = tree_sitter.Language(tree_sitter_python.language())
    s = parse_code("a = 1\n", language=lang)
    assert s.labels[0] == "module"
    assert get_language("python") is get_language("py")


def test_missing_grammar_names_the_wheel():
    with pytest.raises(ImportError, match="pip install tree-sitter-cobol"):
        parse_code("x", "cobol")


def test_bad_source_type():
    from structpos.exceptions import InputError

    with pytest.raises(InputError, match=r"<code>: the input must be str, bytes or a path \(os.PathLike\), not int"):
        parse_code(12, "python")
