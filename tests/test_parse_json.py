"""JSON / XML / YAML tree parsers against independent references (json, ElementTree, PyYAML)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from structpos import StructureError
from structpos.parsers import parse
from structpos.parsers.json_tree import dumps_iterative, json_path, parse_json
from structpos.parsers.xml_tree import parse_xml
from structpos.parsers.yaml_tree import parse_yaml

SCALAR_LABEL = {bool: "boolean", int: "number", float: "number", str: "string", type(None): "null"}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=25,
)


def follow(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def same(a, b) -> bool:
    """Equality that also tells True from 1 and 1 from 1.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def count_nodes(obj) -> int:
    """Independent node count: one per value, plus one per object member."""
    if isinstance(obj, dict):
        return 1 + sum(1 + count_nodes(v) for v in obj.values())
    if isinstance(obj, list):
        return 1 + sum(count_nodes(v) for v in obj)
    return 1


def check_against(s, obj):
    s.validate()
    assert len(s) == count_nodes(obj)
    assert np.all(s.parent < np.arange(len(s)))
    for i in range(len(s)):
        label = s.labels[i]
        path = json_path(s, i)
        value = follow(obj, path)
        text = s.node_text(i)
        if label.startswith("member:"):
            key = s.attrs["key"][i]
            assert label == f"member:{key}" and path[-1] == key
            assert same(json.loads("{" + text + "}"), {key: value})
            continue
        assert same(json.loads(text), value), (i, text, value)
        if label == "object":
            assert isinstance(value, dict)
        elif label == "array":
            assert isinstance(value, list)
        else:
            assert SCALAR_LABEL[type(value)] == label


@settings(max_examples=150, deadline=None)
@given(json_values, st.sampled_from([None, 0, 2]), st.booleans())
def test_json_paths_and_spans_from_text(obj, indent, ensure_ascii):
    text = json.dumps(obj, indent=indent, ensure_ascii=ensure_ascii)
    check_against(parse_json(text), obj)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_json_paths_and_spans_from_object(obj):
    assert dumps_iterative(obj) == json.dumps(obj)
    # a bare str would be read as JSON text, so wrap the value in a list
    check_against(parse([obj], "json"), [obj])
    if isinstance(obj, (dict, list)):
        check_against(parse_json(obj), obj)


def test_deep_nesting_is_iterative():
    depth = 100_000
    for s in (parse_json("[" * depth + "]" * depth), parse_json(_nested_list(depth))):
        assert len(s) == depth
        assert np.array_equal(s.parent, np.arange(-1, depth - 1))
        assert s.end[-1] - s.start[-1] == 2 and s.start[-1] == depth - 1
    obj = {}
    cur = obj
    for _ in range(20_000):
        cur["k"] = {}
        cur = cur["k"]
    s = parse_json(obj)
    assert len(s) == 40_001
    assert json_path(s, len(s) - 1) == ["k"] * 20_000
    with pytest.raises(StructureError, match=r"line:col 1:200001: extra data"):
        parse_json("[" * depth + "]" * (depth + 1))


def _nested_list(depth):
    x: list = []
    for _ in range(depth - 1):
        x = [x]
    return x


def test_bad_json_errors_match_json_loads():
    """Mutated documents: we reject exactly what json.loads rejects, at the same line:col."""
    rng = np.random.default_rng(0)
    base = json.dumps({"a": [1, 2.5, {"b": None, "c": "x\u00e9y"}], "d": True, "e": [], "f": {"g": "h"}}, indent=2)
    alphabet = list('{}[],:"x1 \n-.e\\')
    rejected = 0
    for _ in range(600):
        chars = list(base)
        k = int(rng.integers(len(chars)))
        op = rng.random()
        if op < 0.4:
            del chars[k]
        elif op < 0.7:
            chars.insert(k, str(rng.choice(alphabet)))
        else:
            chars[k] = str(rng.choice(alphabet))
        text = "".join(chars)
        try:
            expected = json.loads(text)
        except json.JSONDecodeError as e:
            with pytest.raises(StructureError) as info:
                parse_json(text, name="doc.json")
            assert "doc.json" in str(info.value)
            assert f"line:col {e.lineno}:{e.colno}" in str(info.value)
            rejected += 1
        else:
            check_against(parse_json(text), expected)
    assert rejected > 100


def test_bad_json_examples():
    with pytest.raises(StructureError, match=r"cfg\.json at line:col 3:10: expected ',' or '\}'"):
        parse_json('{\n  "a": 1,\n  "b": 2 "c": 3}', name="cfg.json")
    with pytest.raises(StructureError, match="1:1"):
        parse_json("")
    with pytest.raises(StructureError, match="circular"):
        a: list = []
        a.append(a)
        parse_json(a)


@pytest.mark.parametrize("char", ["\x00", "\x01", "\t", "\n", "\x1f"])
@pytest.mark.parametrize("where", ["value", "key"])
def test_control_character_in_a_string_is_named_without_a_dangling_at(char, where):
    text = f'{{"k": "a{char}b"}}' if where == "value" else f'{{"a{char}b": 1}}'
    with pytest.raises(json.JSONDecodeError) as ref:
        json.loads(text)
    with pytest.raises(StructureError) as e:
        parse_json(text, name="r.json")
    message = str(e.value)
    assert message.startswith(f"r.json at line:col {ref.value.lineno}:{ref.value.colno}: ")  # json's own position
    assert not message.endswith(" at") and repr(char) in message and f"\\u{ord(char):04x}" in message


# --------------------------------------------------------------------------- XML
XML = """<?xml version="1.0"?>
<catalog lang="en">
  <!-- a comment -->
  <book id="b1" note="x &gt; y"><title>Caf\u00e9 &amp; Co</title><author>A</author><author>B</author></book>
  <book id="b2"/>
  <misc>tail <b>bold</b> more<![CDATA[<raw>]]></misc>
</catalog>
"""


def test_xml_matches_elementtree():
    s = parse_xml(XML, name="cat.xml").validate()
    elements = [i for i in range(len(s)) if s.labels[i] != "#text"]
    ref = list(ET.fromstring(XML).iter())
    assert [s.labels[i] for i in elements] == [e.tag for e in ref]
    for i, e in zip(elements, ref):
        text = s.node_text(i)
        assert text.startswith("<" + e.tag)
        assert text.endswith(f"</{e.tag}>") or text.endswith("/>")
        # re-parsing the span alone gives the same element
        assert ET.fromstring(text).attrib == e.attrib
        assert [c.tag for c in ET.fromstring(text)] == [c.tag for c in e]
        # MarkupLM subscript: 1-based rank among same-tag siblings
        p = s.parent[i]
        same_tag_before = [j for j in range(p + 1 if p >= 0 else 0, i) if s.parent[j] == p and s.labels[j] == e.tag]
        assert s.attrs["tag_index"][i] == len(same_tag_before) + 1
    texts = [s.node_text(i) for i in range(len(s)) if s.labels[i] == "#text"]
    assert texts == ["Caf\u00e9 &amp; Co", "A", "B", "tail", "bold", "more<![CDATA[<raw>]]>"]


def test_xml_error_position():
    with pytest.raises(StructureError, match=r"bad\.xml at line:col 2:\d+: mismatched tag"):
        parse_xml("<a>\n  <b></a>", name="bad.xml")


# --------------------------------------------------------------------------- YAML
yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(alphabet="abc xyz:-#'\"", max_size=6),
    lambda kids: (
        st.lists(kids, min_size=1, max_size=3)
        | st.dictionaries(
            st.text(alphabet="abkey", min_size=1, max_size=4) | st.integers(0, 9), kids, min_size=1, max_size=3
        )
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(yaml_values, st.booleans())
def test_yaml_paths_and_spans(obj, flow):
    text = yaml.safe_dump(obj, default_flow_style=flow, sort_keys=False)
    s = parse_yaml(text).validate()
    for i in range(len(s)):
        label = s.labels[i]
        if label.startswith("member:") or label in ("object", "array"):
            continue
        value = follow(obj, json_path(s, i))
        assert same(yaml.safe_load(s.node_text(i)), value), (text, s.node_text(i))


def test_yaml_aliases_and_errors():
    s = parse_yaml("a: &A [1, 2]\nb: *A\nc: &S [*S]\n").validate()
    assert list(s.labels).count("alias") == 2
    assert s.node_text(int(np.flatnonzero(s.labels == "member:b")[0])) == "b"
    with pytest.raises(StructureError, match=r"y\.yaml at line:col 2:2"):
        parse_yaml("a: [1, 2\nb: 3", name="y.yaml")
    docs = parse_yaml("---\na: 1\n---\n- 2\n")
    assert docs.labels[0] == "stream" and list(docs.labels[docs.parent == 0]) == ["object", "array"]


def test_yaml_alias_to_a_node_anchored_in_a_complex_key_is_a_leaf():
    # found by benchmarks/fuzz.py: the anchored node lies inside a key, which gets no nodes, so
    # the alias must not copy it (its marks lie outside the member's span)
    for text in ("a: 1\nb:\n  ? c: &x {d: e}\n  f: *x\n", "? &x [1]\n: a\nl: [*x, *x]\n"):
        s = parse_yaml(text).validate()
        composed = yaml.compose(text)
        assert composed is not None
        aliases = [i for i in range(len(s)) if s.labels[i] == "alias"]
        assert aliases and all(s.start[i] == -1 for i in aliases)
        spans = s.start >= 0
        assert (s.end[spans] >= s.start[spans]).all()
