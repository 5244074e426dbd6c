"""Property tests for every parser: any input gives a valid Structure or a structpos exception.

Inputs mix each format's own tokens with hostile unicode (lone surrogates, NUL, BOMs, RTL
marks, combining marks, astral characters), deep nesting, huge rowspan/colspan values and
random bytes, as ``str`` and as ``bytes``. A returned Structure must pass ``validate()``,
keep ``parent[i] < i``, have every span inside its source, and labels that encode as UTF-8;
anything raised must be a :class:`~structpos.exceptions.StructposError`. The longer campaign
is ``benchmarks/fuzz.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structpos.exceptions import StructposError
from structpos.limits import Limits
from structpos.parsers import parse

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
LIMITS = Limits(max_nodes=100_000, max_table_cells=100_000)
ARITH = r"""
?start: sum
?sum: product | sum "+" product
?product: atom | product "*" atom
?atom: NUMBER | "(" sum ")"
%import common.INT -> NUMBER
%ignore " "
"""

HOSTILE = [
    "\ud800",
    "\udc00",
    "\x00",
    "\ufeff",
    "\u202e",
    "\u0301",
    "\r",
    "\r\n",
    "\u2028",
    "\U0001f600",
    "\t",
    "é",
    "\\",
]
TOKENS = {
    "json": list('{}[],:"') + ["true", "null", "-1.5e3", "NaN", '"\\ud800"', '"\\u00', "1e999", "\\"],
    "xml": [
        "<a>",
        "</a>",
        "<b/>",
        "<![CDATA[",
        "]]>",
        "<!--",
        "-->",
        "<?p x?>",
        "&amp;",
        "&e;",
        "&#65;",
        "'",
        '"',
        "<!DOCTYPE a [<!ENTITY e 'x'>]>",
        " k='v'",
        ">",
    ],
    "yaml": [
        ": ",
        "- ",
        "&a ",
        "*a",
        "!!int ",
        "? ",
        "{",
        "}",
        "[",
        "]",
        "'",
        '"\\ud800"',
        "|\n",
        "---\n",
        "\n  ",
        "~",
        "<<: ",
    ],
    "code": [
        "(",
        ")",
        ":",
        "\n    ",
        "def ",
        "class ",
        "'",
        '"""',
        "\\\n",
        "lambda",
        "@",
        "{",
        "}",
        ";",
        "#",
        "x",
        "1",
    ],
    "csv": [",", '"', '""', "\n", "\r", "\t", "<table", "a", " "],
    "html": [
        "<table>",
        "</table>",
        "<tr>",
        "<td>",
        "<th>",
        "</td>",
        "<thead>",
        "<tbody>",
        "<br>",
        "<![C",
        "<!--",
        "<script>",
        "<td style='display:none'>",
        "x",
        "&nbsp;",
    ],
    "document": [". ", "? ", "!", "Mr. ", "e.g. ", "\n\n", "...", "don't", "3.14", "A", "a", " "],
    "markdown": ["# ", "### ", "\n===\n", "\n---\n", "```", "~~~", "\n\n", "    ", "***", "x", " #"],
    "conllu": ["\t", "\n", "\n\n", "# text = ", "1", "2", "0", "_", "1-2", "1.1", "SpaceAfter=No", "root", "a"],
    "grammar": ["(", ")", "+", "*", "1", "22", " ", "x"],
}


def hostile_text(kind: str):
    piece = st.one_of(
        st.sampled_from(TOKENS[kind]),
        st.sampled_from(HOSTILE),
        st.text(st.characters(blacklist_categories=()), max_size=4),  # surrogates included
    )
    return st.lists(piece, max_size=40).map("".join)


def nested(kind: str):
    """Deep nesting / long runs: one opening token repeated up to 3,000 times around a core."""
    opens = {
        "json": ("[", "]"),
        "xml": ("<a>", "</a>"),
        "yaml": ("[", "]"),
        "code": ("(", ")"),
        "csv": (",", "\n"),
        "html": ("<table><tr><td>", "</table>"),
        "document": ("(", "."),
        "markdown": ("#", "\n"),
        "conllu": ("\t", "\n"),
        "grammar": ("(", ")"),
    }[kind]
    deepest = 400 if kind == "yaml" else 3000  # PyYAML's recursive composer is slow (and stops at ~1000)
    return st.tuples(st.integers(1, deepest), st.integers(0, deepest), hostile_text(kind)).map(
        lambda t: opens[0] * t[0] + t[2] + opens[1] * t[1]
    )


def as_input(text_strategy):
    """The text as ``str``, as UTF-8 bytes (lone surrogates become invalid bytes), or random bytes."""
    return st.one_of(
        text_strategy,
        text_strategy.map(lambda s: s.encode("utf-8", "surrogatepass")),
        st.binary(max_size=200),
    )


def check(call) -> None:
    """``call()`` returns valid Structures or raises a StructposError; nothing else."""
    try:
        out = call()
    except StructposError:
        return
    for s in out if isinstance(out, list) else [out]:
        s.validate()
        n = s.num_nodes
        if s.parent is not None:
            assert np.all(s.parent < np.arange(n))
        has = s.start >= 0
        if s.source is not None:
            assert np.all(s.end[has] <= len(s.source)) and np.all(s.start[has] <= s.end[has])
        for label in s.labels:
            str(label).encode("utf-8")


CALLS = {
    "json": lambda x: parse(x, "json", limits=LIMITS),
    "xml": lambda x: parse(x, "xml", limits=LIMITS),
    "yaml": lambda x: parse(x, "yaml", limits=LIMITS),
    "code": lambda x: parse(x, "code", language="python", limits=LIMITS),
    "csv": lambda x: parse(x, "table", format="csv", limits=LIMITS),
    "html": lambda x: parse(x, "table", format="html", limits=LIMITS),
    "document": lambda x: parse(x, "document", limits=LIMITS),
    "markdown": lambda x: parse(x, "markdown", limits=LIMITS),
    "conllu": lambda x: parse(x, "conllu", limits=LIMITS),
    "grammar": lambda x: parse(x, "grammar", grammar=ARITH, limits=LIMITS),
}


@pytest.mark.parametrize("kind", sorted(CALLS))
def test_hostile_text(kind):
    if kind in ("yaml", "conllu", "grammar"):
        pytest.importorskip({"yaml": "yaml", "conllu": "conllu", "grammar": "lark"}[kind])
    if kind == "code":
        pytest.importorskip("tree_sitter_python")

    @SETTINGS
    @given(as_input(st.one_of(hostile_text(kind), nested(kind))))
    def run(x):
        check(lambda: CALLS[kind](x))

    run()


@SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from(["td", "th"]), st.integers(0, 10**6), st.integers(0, 10**6)), max_size=30),
    st.integers(1, 6),
)
def test_html_huge_spans(cells, per_row):
    rows = [
        "<tr>" + "".join(f"<{t} rowspan={r} colspan={c}>x" for t, r, c in cells[k : k + per_row])
        for k in range(0, len(cells), per_row)
    ]
    check(lambda: parse("<table>" + "".join(rows) + "</table>", "table", format="html", limits=LIMITS))


@SETTINGS
@given(
    st.lists(st.lists(st.integers(-2, 2**40), max_size=6), min_size=0, max_size=3),
    st.one_of(st.none(), st.integers(-1, 10**7)),
    st.one_of(st.none(), st.lists(st.floats(allow_nan=True), max_size=6)),
)
def test_graph_edge_lists(rows, num_nodes, weights):
    pytest.importorskip("networkx")
    check(lambda: parse(rows, "graph", num_nodes=num_nodes, edge_weight=weights, limits=LIMITS))


class _Doc(list):
    text = ""


@SETTINGS
@given(st.lists(st.tuples(st.text(max_size=3), st.integers(-3, 12), st.integers(-2, 40)), max_size=10), st.booleans())
def test_spacy_like_docs(tokens, truncate):
    toks, idx = [], 0
    for i, (word, _, off) in enumerate(tokens):
        toks.append(SimpleNamespace(i=i, text=word, idx=idx if off >= 0 else off, dep_="dep", pos_="X"))
        idx += len(word) + 1
    for t, (_, head, _) in zip(toks, tokens):
        t.head = toks[head] if 0 <= head < len(toks) else SimpleNamespace(i=head)
    doc = _Doc(toks)
    doc.text = " ".join(w for w, _, _ in tokens)[: -1 if truncate else None]
    check(lambda: parse(doc, "spacy", limits=LIMITS))
