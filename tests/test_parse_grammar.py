"""lark grammars: spans, rule/token labels, LALR vs Earley, errors with line:col."""

from __future__ import annotations

import lark
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structpos import StructureError
from structpos.parsers import parse
from structpos.parsers.grammar import parse_grammar

ARITH = r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul
?atom: NUMBER -> number | "-" atom -> neg | "(" sum ")"
%import common.INT -> NUMBER
%import common.WS
%ignore WS
"""

OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def evaluate(s, i=0) -> int:
    """Value of the expression rooted at node ``i``, computed from the Structure alone."""
    label, kids = s.labels[i], s.children(i)
    if label == "number":
        return int(s.node_text(kids[0]))
    if label == "neg":
        return -evaluate(s, kids[0])
    return OPS[label](evaluate(s, kids[0]), evaluate(s, kids[1]))


def token_hull(s, i):
    """(min start, max end) over the token nodes in the subtree of ``i`` (ancestor walk)."""
    lo, hi = None, None
    for j in np.flatnonzero(s.attrs["is_token"]):
        k = j
        while k >= 0 and k != i:
            k = s.parent[k]
        if k == i:
            lo = s.start[j] if lo is None else min(lo, s.start[j])
            hi = s.end[j] if hi is None else max(hi, s.end[j])
    return lo, hi


expressions = st.recursive(
    st.integers(0, 99).map(str),
    lambda e: (
        st.tuples(e, st.sampled_from(["+", "-", "*"]), e, st.sampled_from(["", " ", "\n  "])).map(
            lambda t: f"({t[0]}{t[3]}{t[1]} {t[2]})"
        )
        | e.map(lambda x: f"-{x}")
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(expressions)
def test_arithmetic_spans_and_values(text):
    lalr = parse_grammar(text, ARITH)
    earley = parse(text, "grammar", grammar=ARITH, parser="earley")
    for s in (lalr, earley):
        s.validate()
        assert evaluate(s) == eval(text)  # the tree means what Python reads
        for i in range(len(s)):
            if s.attrs["is_token"][i]:
                assert s.labels[i] == "NUMBER" and s.node_text(i).isdigit()
            else:
                lo, hi = token_hull(s, i)
                # rule spans start at their first token; they may extend past the last one
                # only over a closing parenthesis, never over other content
                assert s.start[i] <= lo and s.end[i] >= hi
                assert text[s.start[i] : lo].strip("(- \n") == ""
                assert text[hi : s.end[i]].strip(") \n") == ""
    assert list(lalr.labels) == list(earley.labels)
    assert np.array_equal(lalr.parent, earley.parent)
    assert np.array_equal(lalr.start, earley.start) and np.array_equal(lalr.end, earley.end)


def test_unicode_char_offsets_and_lark_instance():
    g = r"""
    start: pair+
    pair: WORD "=" WORD ";"
    WORD: /\w+/
    %ignore " "
    """
    text = "é=ü; straße=x;"
    for grammar in (g, lark.Lark(g, parser="lalr"), lark.Lark(g, parser="lalr", propagate_positions=True)):
        s = parse_grammar(text, grammar).validate()
        words = [s.node_text(i) for i in range(len(s)) if s.labels[i] == "WORD"]
        assert words == ["é", "ü", "straße", "x"]
        pairs = [s.node_text(i) for i in range(len(s)) if s.labels[i] == "pair"]
        assert [p.split("=")[0] for p in pairs] == ["é", "straße"]
        assert s.node_text(0).startswith("é=ü")


@pytest.mark.parametrize("parser", ["lalr", "earley"])
@pytest.mark.parametrize("text, where", [("1 +\n 2 * * 3", "2:6"), ("(1 + 2", "1:7"), ("1 + 2 $", "1:7")])
def test_errors_name_line_col(parser, text, where):
    with pytest.raises(StructureError, match=rf"expr\.txt at line:col {where}"):
        parse_grammar(text, ARITH, parser=parser, name="expr.txt")


def test_bad_grammar():
    with pytest.raises(StructureError, match="bad grammar"):
        parse_grammar("x", "start: undefined_rule")
    with pytest.raises(ValueError):
        parse_grammar("1", ARITH, parser="cyk")


def test_import_of_a_missing_grammar_file_is_a_parse_error_naming_the_grammar():
    with pytest.raises(StructureError, match=r"<grammar>: bad grammar: an %import cannot be read .*nosuch") as e:
        parse_grammar("x", "start: WORD\n%import nosuch.WORD\n")  # was a FileNotFoundError
    assert e.value.input_name == "<grammar>"


OPTIONAL = (
    'start: item*\nitem: NUMBER opt\nopt: BANG?\nBANG: "!"\n%import common.NUMBER\n%ignore " "'  # tokens all kept
)


@pytest.mark.parametrize("text", ["", "   ", "1", "1 2!", "1  2 3!", " 1!  2"])
@pytest.mark.parametrize("positions", [True, False])
def test_rules_that_match_nothing_span_the_empty_string_where_they_matched(text, positions):
    grammar = OPTIONAL if positions else lark.Lark(OPTIONAL, parser="lalr")  # without propagate_positions
    s = parse_grammar(text, grammar)
    start, end = s.start.tolist(), s.end.tolist()
    assert all(0 <= a <= b <= len(text) for a, b in zip(start, end))  # no (-1, -1): the empty input's root is (0, 0)
    for i in range(1, len(s)):  # spans nest
        p = int(s.parent[i])
        assert start[p] <= start[i] and end[i] <= end[p], (i, p)
    tokens = [i for i in range(len(s)) if s.attrs["is_token"][i]]
    for i in (i for i in range(len(s)) if i not in tokens):
        inside = [t for t in tokens if i in _ancestors(s, t)]
        if not inside:  # matched nothing: empty, right after the last token before it (0 when none)
            before = [end[t] for t in tokens if t < i]
            want = max(before) if before else 0
            p = int(s.parent[i])
            if p >= 0:
                want = min(max(want, start[p]), end[p])
            assert start[i] == end[i] == want, (text, i)
    if not text.strip():
        assert (start[0], end[0]) == (0, 0)


def _ancestors(s, i):
    out = []
    while s.parent[i] >= 0:
        i = int(s.parent[i])
        out.append(i)
    return out
