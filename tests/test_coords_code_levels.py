"""HiRoPE levels: hand-annotated files in Python and JavaScript, a recursive reference on every
built-in language, tokenizer-token recounting, and the registry/spec path."""

from __future__ import annotations

import numpy as np
import pytest

import structpos
from structpos import SpecError
from structpos.align import token_coords
from structpos.coords import compute
from structpos.coords.code_levels import STATEMENT_LABELS, UNIT_LABELS, code_levels, hirope_token_levels
from structpos.exceptions import ShapeError

PYTHON = "import os\n\nclass A:\n    def f(self, x):\n        if x:\n            return 1\n        return x\n"
# (leaf text, function, statement, token), written by hand from the rules: the module is unit 0,
# class A unit 1, method f unit 2; a unit's header is its statement 0.
PYTHON_LEVELS = [
    ("import", 0, 1, 0), ("os", 0, 1, 1),
    ("class", 1, 0, 0), ("A", 1, 0, 1), (":", 1, 0, 2),
    ("def", 2, 0, 0), ("f", 2, 0, 1), ("(", 2, 0, 2), ("self", 2, 0, 3), (",", 2, 0, 4), ("x", 2, 0, 5),
    (")", 2, 0, 6), (":", 2, 0, 7),
    ("if", 2, 1, 0), ("x", 2, 1, 1), (":", 2, 1, 2),
    ("return", 2, 2, 0), ("1", 2, 2, 1),
    ("return", 2, 3, 0), ("x", 2, 3, 1),
]  # fmt: skip

JAVASCRIPT = "const n = 1;\nfunction add(a, b) {\n  let s = a + b;\n  return s;\n}\n"
# the program is unit 0 (its const declaration: statement 1), add is unit 1; the closing brace
# belongs to add's header statement 0 and continues its token count after the body.
JAVASCRIPT_LEVELS = [
    ("const", 0, 1, 0), ("n", 0, 1, 1), ("=", 0, 1, 2), ("1", 0, 1, 3), (";", 0, 1, 4),
    ("function", 1, 0, 0), ("add", 1, 0, 1), ("(", 1, 0, 2), ("a", 1, 0, 3), (",", 1, 0, 4), ("b", 1, 0, 5),
    (")", 1, 0, 6), ("{", 1, 0, 7),
    ("let", 1, 1, 0), ("s", 1, 1, 1), ("=", 1, 1, 2), ("a", 1, 1, 3), ("+", 1, 1, 4), ("b", 1, 1, 5),
    (";", 1, 1, 6),
    ("return", 1, 2, 0), ("s", 1, 2, 1), (";", 1, 2, 2),
    ("}", 1, 0, 8),
]  # fmt: skip


def leaf_levels(s):
    c = compute(s, "hirope")
    is_leaf = np.ones(s.num_nodes, dtype=bool)
    is_leaf[s.parent[s.parent >= 0]] = False
    return [
        (s.source[s.start[i] : s.end[i]], int(c["hirope_function"][i]), int(c["hirope_statement"][i]),
         int(c["hirope_token"][i]))
        for i in np.flatnonzero(is_leaf)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "language, src, want", [("python", PYTHON, PYTHON_LEVELS), ("javascript", JAVASCRIPT, JAVASCRIPT_LEVELS)]
)
def test_levels_equal_hand_annotated_files(language, src, want):
    pytest.importorskip(f"tree_sitter_{language}")
    assert leaf_levels(structpos.parse(src, "code", language=language)) == want


def reference_levels(labels, parent, language):
    """The module docstring's definition, by recursion over an explicit child list (no numpy tricks)."""
    n = len(parent)
    children = [[] for _ in range(n)]
    for i, p in enumerate(parent):
        if p >= 0:
            children[p].append(i)
    units = UNIT_LABELS[language]
    stmts = STATEMENT_LABELS[language]

    def is_unit(i):
        lab, p = labels[i], parent[i]
        if p < 0:
            return True
        if lab not in units or labels[p] == "decorated_definition":
            return False
        if lab in ("struct_specifier", "union_specifier", "class_specifier"):
            return any(labels[c] == "field_declaration_list" for c in children[i])
        return True

    def is_stmt(i):
        lab = labels[i]
        return (lab.endswith("_statement") and lab != "compound_statement") or lab in stmts

    out = {k: [None] * n for k in ("function", "statement", "token")}
    unit_count = [0]
    stmt_count = {}  # unit node -> statements opened so far
    tok_count = {}  # statement node -> leaves so far

    def visit(i, unit, unit_ord, group, group_ord):
        if is_unit(i):
            unit, unit_ord = i, unit_count[0]
            unit_count[0] += 1
            stmt_count[i] = 1
            group, group_ord = i, 0
        elif is_stmt(i):
            group, group_ord = i, stmt_count[unit]
            stmt_count[unit] += 1
        out["function"][i], out["statement"][i] = unit_ord, group_ord
        out["token"][i] = tok_count.get(group, 0)
        if not children[i]:
            tok_count[group] = tok_count.get(group, 0) + 1
        for c in children[i]:
            visit(c, unit, unit_ord, group, group_ord)

    for r in [i for i in range(n) if parent[i] < 0]:
        visit(r, -1, -1, -1, -1)
    return out


SAMPLES = {
    "python": "@dec\ndef g(a):\n    for i in a:\n        print(i)\n    return [x for x in a]\n" + PYTHON,
    "javascript": JAVASCRIPT + "class K { m() { if (x) { y(); } else { z(); } } }\nconst h = (v) => v * 2;\n",
    "java": "package p;\nimport a.B;\nclass C {\n  int f = 1;\n  C() { f = 2; }\n  int m(int x) {\n"
    "    int y = x;\n    for (int i = 0; i < y; i++) { y += i; }\n    return y;\n  }\n}\n",
    "go": 'package main\nimport "fmt"\ntype T struct { a int }\nfunc (t T) M() int {\n  x := 1\n'
    "  if x > 0 { fmt.Println(x) }\n  return x\n}\nfunc main() { f := func() {}; f() }\n",
    "rust": "use std::io;\nstruct S { a: i32 }\nimpl S {\n  fn m(&self) -> i32 {\n    let x = self.a;\n"
    "    if x > 0 { return x; }\n    x\n  }\n}\n",
    "c": "#include <stdio.h>\nstruct p { int x; };\nstruct p g;\nint main(void) {\n  int a = 1;\n"
    "  while (a < 3) { a++; }\n  return a;\n}\n",
    "cpp": "namespace n {\nclass K {\n public:\n  int m(int x) { auto l = [](int y) { return y; }; return l(x); }\n};\n}\n"
    "struct Q q;\n",
}


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_levels_equal_a_recursive_reference_on_every_builtin_language(language):
    pytest.importorskip(f"tree_sitter_{language}")
    s = structpos.parse(SAMPLES[language], "code", language=language)
    assert not s.code.has_error
    got = code_levels(s.labels, s.parent, language)
    want = reference_levels(list(s.labels), list(s.parent), language)
    for level in ("function", "statement", "token"):
        assert got[level].tolist() == want[level], level
    assert got["function"].max() >= 2 and got["statement"].max() >= 2  # the samples have units and statements


def test_c_type_references_are_not_units_and_decorators_join_their_function():
    pytest.importorskip("tree_sitter_c")
    s = structpos.parse(SAMPLES["c"], "code", language="c")
    c = compute(s, "hirope")
    labels = s.labels.tolist()
    bodies = [i for i, lab in enumerate(labels) if lab == "struct_specifier"]
    # `struct p { int x; }` is unit 1, `struct p g;` is not a unit, main is unit 2
    assert [int(c["hirope_function"][i]) for i in bodies] == [1, 0]
    assert int(c["hirope_function"][labels.index("function_definition")]) == 2
    py = structpos.parse(SAMPLES["python"], "code", language="python")
    cp = compute(py, "hirope")
    at = py.source.index("@dec")
    dec_leaf = int(np.flatnonzero(py.start == at)[-1])
    assert cp["hirope_function"][dec_leaf] == 1 and cp["hirope_statement"][dec_leaf] == 0


def test_tokenizer_tokens_are_recounted_within_their_statement():
    pytest.importorskip("tree_sitter_python")
    s = structpos.parse(PYTHON, "code", language="python")
    i = PYTHON.index("self")
    # "se" + "lf": two subword tokens of one leaf, plus a special token
    offsets = [(0, 0), (i - 6, i - 5), (i - 5, i - 4), (i - 4, i - 3), (i, i + 2), (i + 2, i + 4), (i + 4, i + 5)]
    c = token_coords(s, offsets, "hirope")
    assert c["hirope_token"][4] == c["hirope_token"][5]  # the leaf's own count is shared
    lv = hirope_token_levels(c["hirope_function"], c["hirope_statement"])
    assert lv["function"].tolist() == [-1, 2, 2, 2, 2, 2, 2]
    assert lv["statement"].tolist() == [-1, 0, 0, 0, 0, 0, 0]
    assert lv["token"].tolist() == [-1, 0, 1, 2, 3, 4, 5]


def test_errors():
    with pytest.raises(SpecError):
        compute(structpos.parse("x = 1\n", "code", language="python"), "hirope:2")
    with pytest.raises(ValueError, match="code tree"):
        compute(structpos.parse("[1]", "json"), "hirope")
    with pytest.raises(ShapeError):
        hirope_token_levels([0, 1], [0])


def test_cli_encode_writes_the_new_families(tmp_path):
    """`structpos encode --coords hirope,bipe,grid` (code) and `tpe,bipe:cell` (tables) reach Parquet."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("tree_sitter_javascript")
    from structpos.cli import main
    from structpos.pipeline import read_output

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(PYTHON)
    (src / "b.js").write_text(JAVASCRIPT)
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    out = tmp_path / "enc"
    assert main(["encode", str(src), "--coords", "hirope,bipe,grid", "--out", str(out), "--no-progress"]) == 0
    for row in read_output(out).to_pylist():
        lang = "python" if row["id"].endswith(".py") else "javascript"
        s = structpos.parse((src / row["id"]).read_text(), "code", language=lang)
        c = compute(s, "hirope,bipe,grid")
        for col in ("hirope_function", "hirope_statement", "hirope_token", "bipe_segment", "bipe_offset", "grid_col"):
            assert row[col] == c[col].tolist(), (row["id"], col)
    out2 = tmp_path / "enc2"
    csv = str(tmp_path / "t.csv")
    assert (
        main(["encode", csv, "--kind", "table", "--coords", "tpe,bipe:cell", "--out", str(out2), "--no-progress"]) == 0
    )
    (row,) = read_output(out2).to_pylist()
    assert row["tpe_rank"] == compute(structpos.parse("a,b\n1,2\n", "table"), "tpe")["tpe_rank"].tolist()
