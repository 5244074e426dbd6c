"""Structure's typed fields (no free ``meta`` dict), its declared node attributes and its invariants."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

import structpos
from structpos.structure import CodeInfo, SentenceInfo, Structure, TableInfo, raise_at_first


def test_every_parser_fills_typed_fields_not_a_dict():
    code = structpos.parse("def f(:\n  pass\n", "code", language="python")
    assert code.code == CodeInfo(language="python", has_error=True) and code.nested_spans
    table = structpos.parse("a,b\n1,2\n3\n", "table")
    assert isinstance(table.table, TableInfo) and table.table.grid == [["a", "b"], ["1", "2"], ["3", None]]
    assert (table.table.n_rows, table.table.n_cols, table.table.header_rows) == (3, 2, 1)
    cells = np.flatnonzero(table.labels != "row")[1:]
    assert [table.node_texts[i] for i in cells] == ["a", "b", "1", "2", "3"]
    conllu = "# sent_id = s1\n# text = Hi there\n1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n2\tthere\tthere\tADV\t_\t_\t1\tadvmod\t_\t_\n\n"
    (sent,) = structpos.parse(conllu, "conllu")
    assert sent.sentence == SentenceInfo("s1", 0, comments={"sent_id": "s1", "text": "Hi there"})
    assert sent.nested_spans is False and sent.format == "conllu"
    assert structpos.parse('{"a": 1}', "json").format == "json"


def test_no_meta_side_channel_every_fact_is_a_declared_field():
    """What ``meta`` carried is a dataclass field of Structure or of its per-kind record; ``meta`` is gone."""
    fields = {f.name for f in dataclasses.fields(Structure)}
    assert "meta" not in fields and not hasattr(Structure, "meta")
    with pytest.raises(TypeError, match="meta"):
        Structure("tree", ["a"], meta={"language": "go"})
    assert {"nested_spans", "format", "node_texts", "node_ids", "edge_attr", "truncated_from"} <= fields
    assert {"table", "code", "sentence"} <= fields
    for record in (TableInfo, CodeInfo, SentenceInfo):  # every record field has a default: a parser fills some
        assert all(
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            for f in dataclasses.fields(record)
        ), record


def test_fields_survive_pickle_and_replace():
    t = structpos.parse("<table><tr><th>a</th></tr><tr><td>1</td></tr></table>", "table", format="html")
    u = pickle.loads(pickle.dumps(t))
    assert u.table == t.table and u.node_texts == t.node_texts and u.format == "html"
    v = dataclasses.replace(t, truncated_from=99)
    assert v.truncated_from == 99 and v.table is t.table


def test_raise_at_first_names_the_first_failing_element():
    rng = np.random.default_rng(7)
    for n in [0, 1, 5, 40]:
        for _ in range(20):
            bad = rng.random(n) < rng.choice([0.0, 0.05, 0.5])
            first = next((i for i, b in enumerate(bad.tolist()) if b), None)  # reference: a plain loop
            if first is None:
                assert raise_at_first(bad, "never", name="x") is None
                continue
            with pytest.raises(structpos.ParseError) as info:
                raise_at_first(bad, lambda i: f"value {i} fails", name="in.json", where="item")
            assert (info.value.input_name, info.value.position) == ("in.json", f"item {first}")
            assert str(info.value) == f"in.json at item {first}: value {first} fails"
            with pytest.raises(structpos.InputError, match=f"at <{first}>: fixed$"):
                raise_at_first(bad.tolist(), "fixed", name=None, where=lambda i: f"<{i}>")


def _first_broken_node(parent, start, end, source_len, nested):
    """Structure.validate's checks, one plain loop per check, in its order: (message, node) or None."""
    n = len(parent)
    for i in range(n):
        if not -1 <= parent[i] < i:
            return "breaks preorder", i
    for i in range(n):
        p = parent[i]
        if nested and p >= 0 and start[i] >= 0 and start[p] >= 0 and (start[i] < start[p] or end[i] > end[p]):
            return "not inside its parent's span", i
    for i in range(n):
        if start[i] >= 0 and end[i] < start[i]:
            return "span ends before it starts", i
    for i in range(n):
        if end[i] > source_len:
            return "span ends past the source", i
    return None


def test_validate_names_the_first_broken_node_like_a_plain_loop():
    rng = np.random.default_rng(11)
    for trial in range(300):
        n = int(rng.integers(1, 12))
        parent = [-1] + [int(rng.integers(-1, i)) for i in range(1, n)]
        if trial % 10 == 0:  # now and then a parent that breaks preorder
            parent[int(rng.integers(0, n))] = int(rng.integers(-3, n + 2))
        start = rng.integers(-1, 8, n)
        end = np.where(start >= 0, start + rng.integers(-1, 6, n), -1)
        nested = bool(trial % 3)
        s = Structure("tree", ["x"] * n, start=start, end=end, parent=parent, source="abcdefghij", nested_spans=nested)
        expected = _first_broken_node(parent, start.tolist(), end.tolist(), 10, nested)
        if expected is None:
            assert s.validate() is s
            continue
        with pytest.raises(structpos.ParseError, match=expected[0]) as info:
            s.validate()
        assert info.value.position == f"node {expected[1]}", (parent, start, end, nested)
