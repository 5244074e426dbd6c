"""Per-kind node attributes are declared (names, dtypes) and held to; ``Structure.kind`` is a closed Literal."""

from __future__ import annotations

import ast
import dataclasses
import pathlib
from typing import get_args

import numpy as np
import pytest

import structpos
from structpos import node_attrs as na
from structpos.coords.table import table_coords
from structpos.exceptions import ParseError, ShapeError, SpecError
from structpos.parsers import PARSERS, ParserKind
from structpos.registry import Column
from structpos.structure import STRUCTURE_KINDS, Structure, StructureKind

# inputs per built-in kind, together reaching every optional attribute (spaCy is not installed here)
INPUTS: dict[str, list[tuple[object, dict]]] = {
    "code": [("def f(a):\n    return a\n", {"language": "python"}), ("x = (", {"language": "python", "fields": True})],
    "json": [('{"a": [1, {"b": null}]}', {}), ({"a": [1]}, {"from_object": True})],
    "xml": [("<a><b>t</b><b/></a>", {})],
    "yaml": [("a:\n  - 1\n  - b: 2\n", {})],
    "conllu": [(PARSERS["conllu"].sample, {})],
    "table": [
        ("a,b\n1,2\n", {}),
        ("<table><tr><th>a</th><th>b</th></tr><tr><td colspan=2>1</td></tr></table>", {"format": "html"}),
    ],
    "document": [("First one. Second.\n\nNew paragraph.\n", {}), ("", {})],
    "markdown": [("# A\n\ntext\n\n## B\n\nmore\n", {}), ("no heading\n", {})],
    "grammar": [("ab", {"grammar": 'start: "a" "b"'})],
    "graph": [(np.array([[0, 1], [1, 2]]), {})],
}


def _structures(kind: str) -> list[Structure]:
    out: list[Structure] = []
    for obj, options in INPUTS[kind]:
        parsed = structpos.parse(obj, kind, **options)
        out.extend(parsed if isinstance(parsed, list) else [parsed])
    return out


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_each_built_in_kind_declares_exactly_the_attributes_its_parser_writes(kind):
    declared = {c.name: c for c in PARSERS[kind].node_attrs}
    structures = _structures(kind)  # parse() itself checks each one against the declaration
    seen = set().union(*(s.attrs for s in structures))
    assert seen == set(declared), kind  # nothing declared that no parser writes, nothing written undeclared
    for s in structures:
        present = set(s.attrs)
        assert {n for n, c in declared.items() if not c.optional} <= present
        for name, values in s.attrs.items():
            c = declared[name]
            assert values.shape[0] == s.num_nodes and values.ndim == 1 + len(c.shape)
            if c.dtype == "str":  # a string (or None) per node
                assert all(v is None or isinstance(v, str) for v in values.tolist()), name
            else:
                assert values.dtype == np.dtype(c.dtype), name


def test_every_built_in_kind_declares_its_attributes_and_kinds_produce_the_literal():
    assert all(PARSERS[k].node_attrs is not None for k in PARSERS)
    produced = {s.kind for k in INPUTS for s in _structures(k)}
    assert produced == set(get_args(StructureKind)) == set(STRUCTURE_KINDS)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.update(colour=a["row"]), "attribute 'colour' is not declared for input kind 'broken_table'"),
        (lambda a: a.update(row=a["row"].astype(np.float64)), "'row' has dtype float64 .* declares int64"),
        (lambda a: a.update(row=np.stack([a["row"]] * 2, axis=1)), "'row' has dtype int64 and 2 dimension"),
        (lambda a: a.pop("header"), "declared attribute\\(s\\) header missing for input kind 'broken_table'"),
    ],
)
def test_a_parser_that_breaks_its_declaration_fails_through_parse(change, message):
    def broken_table(text, name="<t>"):
        s = structpos.parse(text, "table", name=name)
        change(s.attrs)
        return s

    PARSERS.add(
        dataclasses.replace(PARSERS["table"], name="broken_table", target=broken_table, suffixes={}, sniff=None)
    )
    try:
        with pytest.raises(ParseError, match=message) as info:
            structpos.parse("a,b\n1,2\n", "broken_table", name="t.csv")
        assert info.value.input_name == "t.csv"
    finally:
        PARSERS.remove("broken_table")


def test_an_outside_kind_that_declares_nothing_keeps_free_form_attributes_and_one_that_declares_is_held():
    def tagged(text: str, name: str = "<in>") -> Structure:
        return Structure("tree", list(text), parent=np.arange(len(text)) - 1, attrs={"ord": [ord(c) for c in text]})

    PARSERS.add(ParserKind("tagged", tagged, summary="one node per character"))
    try:
        assert structpos.parse("ab", "tagged").attrs["ord"].tolist() == [97, 98]
        PARSERS.remove("tagged")
        PARSERS.add(ParserKind("tagged", tagged, node_attrs=(Column("ord", "int32"),)))
        with pytest.raises(ParseError, match="'ord' has dtype int64 and 1 dimension\\(s\\); input kind 'tagged'"):
            structpos.parse("ab", "tagged")
    finally:
        PARSERS.remove("tagged")


def test_table_cells_defaults_are_what_a_table_without_spans_has():
    """Dropping the span arrays of a table with no merged cells changes no table coordinate."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        rows, cols = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        text = "\n".join(",".join(str(rng.integers(100)) for _ in range(cols)) for _ in range(rows)) + "\n"
        s = structpos.parse(text, "table")
        full = table_coords(s)
        cells = na.table_cells(s)
        assert all(np.array_equal(getattr(cells, c.name), s.attrs[c.name]) for c in na.TABLE_ATTRS)
        bare = dataclasses.replace(s, attrs={k: v for k, v in s.attrs.items() if k in (na.ROW, na.COL, na.HEADER)})
        assert np.array_equal(na.table_cells(bare).rowspan, s.attrs[na.ROWSPAN])
        assert all(np.array_equal(full[k], v) for k, v in table_coords(bare).items())
    with pytest.raises(ParseError, match="grid layout needs 'row' and 'col' attributes"):
        na.table_cells(structpos.parse("[1]", "json"), needed_by="grid layout")


def test_structure_kind_is_one_of_the_literal_and_shapes_fail_with_shape_error():
    with pytest.raises(SpecError, match="Structure kind 'molecule' is not one of tree, table, document, graph"):
        Structure("molecule", ["a"], name="m.sdf")  # type: ignore[arg-type]
    for kind in STRUCTURE_KINDS:
        assert Structure(kind, ["a"]).kind == kind
    with pytest.raises(ShapeError, match="attribute 'x' has shape \\(3,\\), expected leading dimension 2"):
        Structure("tree", ["a", "b"], attrs={"x": [1, 2, 3]})
    with pytest.raises(ShapeError, match="parent must have one entry per node"):
        Structure("tree", ["a", "b"], parent=[-1])


def _attr_literal_reads(path: pathlib.Path) -> list[str]:
    """``x.attrs["name"]`` / ``x.attrs.get("name")`` / ``"name" in x.attrs`` with a literal name."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = None
        if isinstance(node, ast.Subscript):
            target, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            target, key = node.func.value, (node.args[0] if node.args else None)
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            target, key = node.comparators[0], node.left
        if isinstance(target, ast.Attribute) and target.attr == "attrs" and isinstance(key, ast.Constant):
            hits.append(f"{path.name}:{node.lineno}")
    return hits


def test_no_module_reads_a_node_attribute_by_a_string_literal(tmp_path):
    root = pathlib.Path(structpos.__file__).parent
    hits = [h for p in sorted(root.rglob("*.py")) for h in _attr_literal_reads(p)]
    assert hits == []
    probe = tmp_path / "probe.py"  # the scan does find each form
    probe.write_text('def f(s):\n    return s.attrs["row"], s.attrs.get("col"), "x" in s.attrs, s.attrs[ROW]\n')
    assert _attr_literal_reads(probe) == ["probe.py:2"] * 3


def test_the_encode_dispatch_holds_registered_kinds_to_their_declaration_but_not_an_override():
    from structpos.pipeline.dispatch import parse_payload

    entry = dataclasses.replace(
        PARSERS["table"], name="extra_table", target=_table_with_colour, suffixes={}, sniff=None
    )
    PARSERS.add(entry)
    try:
        with pytest.raises(ParseError, match="r1: attribute 'colour' is not declared for input kind 'extra_table'"):
            parse_payload("a,b\n1,2\n", "extra_table", "r1")
        # an extra_parsers override of a built-in kind is the run's own parser: not held to the entry
        s = parse_payload("a,b\n1,2\n", "table", "r1", extra_parsers={"table": f"{__name__}:_table_with_colour"})
        assert "colour" in s.attrs
    finally:
        PARSERS.remove("extra_table")


def _table_with_colour(text: str, name: str = "<t>") -> Structure:
    s = structpos.parse(text, "table", name=name)
    s.attrs["colour"] = s.attrs[na.ROW]
    return s
