"""Document and Markdown trees, and the "hier" coordinates, on real text (UD EWT # text lines)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from structpos import StructureError
from structpos.coords import compute
from structpos.parsers import parse
from structpos.parsers.document import parse_document, split_sentences
from structpos.parsers.markdown import parse_markdown

BLOCKS = {"paragraph", "heading", "code_block"}
TOKENS = {"word", "punct"}


@pytest.fixture(scope="module")
def ud_paragraphs(shared_data):
    """[(doc id, [paragraph = [sentence text, ...], ...]), ...] from # newdoc/# newpar/# text."""
    docs: list = []
    for line in (shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").splitlines():
        if line.startswith("# newdoc"):
            docs.append((line.split("=", 1)[1].strip(), []))
        if line.startswith("# newdoc") or line.startswith("# newpar"):
            docs[-1][1].append([])
        elif line.startswith("# text = "):
            docs[-1][1][-1].append(line[len("# text = ") :])
    return [(d, [p for p in paras if p]) for d, paras in docs]


def reference_ids(s):
    """Hierarchy ids by walking each node's ancestors (no vectorization, no shared code)."""
    n = len(s)
    labels, parent = list(s.labels), s.parent.tolist()
    block_no, sent_no, tok_no, sec_no = {}, {}, {}, {}
    counters: dict = {}
    out = {k: [-1] * n for k in ("paragraph", "sentence", "token", "section")}
    out["section_path"] = [()] * n

    def ancestors(i):
        while i >= 0:
            yield i
            i = parent[i]

    def nearest(i, pred):
        return next((a for a in ancestors(i) if pred(labels[a])), -1)

    for i in range(n):
        lab = labels[i]
        if lab in BLOCKS:
            block_no[i] = counters["b"] = counters.get("b", -1) + 1
        if lab == "sentence":
            b = nearest(parent[i], BLOCKS.__contains__)
            sent_no[i] = counters[("s", b)] = counters.get(("s", b), -1) + 1
        if lab in TOKENS:
            g = nearest(parent[i], lambda l: l == "sentence" or l in BLOCKS)
            tok_no[i] = counters[("t", g)] = counters.get(("t", g), -1) + 1
        if lab == "section":
            sec_no[i] = counters["sec"] = counters.get("sec", -1) + 1
            up = nearest(parent[i], "section".__eq__)
            k = counters[("sib", up)] = counters.get(("sib", up), -1) + 1
            out["section_path"][i] = (out["section_path"][up] if up >= 0 else ()) + (k,)
        b = nearest(i, BLOCKS.__contains__)
        out["paragraph"][i] = block_no.get(b, -1)
        sn = nearest(i, "sentence".__eq__)
        out["sentence"][i] = sent_no.get(sn, -1)
        out["token"][i] = tok_no.get(i, -1)
        sec = nearest(i, "section".__eq__)
        out["section"][i] = sec_no.get(sec, -1)
        if sec >= 0:
            out["section_path"][i] = out["section_path"][sec]
    return out


def check_ids(s):
    ref = reference_ids(s)
    coords = compute(s, "hier")
    for k in ("paragraph", "sentence", "token"):
        assert s.attrs[k].tolist() == ref[k], k
        assert coords[k].tolist() == ref[k], k
    if "section" in coords:
        assert coords["section"].tolist() == ref["section"]
        paths = [tuple(int(x) for x in row if x >= 0) for row in coords["section_path"]]
        assert paths == ref["section_path"]
        assert coords["section_depth"].tolist() == [len(p) for p in ref["section_path"]]


def test_document_on_ud_text(ud_paragraphs):
    paras = [p for _, doc in ud_paragraphs[:120] for p in doc]
    text = "\n\n".join(" ".join(p) for p in paras)
    s = parse_document(text, name="ud").validate()
    check_ids(s)
    blocks = np.flatnonzero(s.labels == "paragraph")
    assert [s.node_text(i) for i in blocks] == [" ".join(p) for p in paras]
    # tokens tile every sentence: all its non-space characters, in order, exactly once
    for i in np.flatnonzero(s.labels == "sentence"):
        kids = s.children(i)
        assert set(s.labels[kids]) <= TOKENS
        assert "".join(s.node_text(k) for k in kids) == re.sub(r"\s+", "", s.node_text(i))
    # sentence splitting: gold boundaries after . ! ? before a capital are (almost) all found,
    # and predicted boundaries are (almost) all gold boundaries
    found = eligible = predicted = correct = 0
    for p in paras:
        t = " ".join(p)
        gold = np.cumsum([len(x) + 1 for x in p])[:-1] - 1
        pred = {e for _, e in split_sentences(t)[:-1]}
        predicted += len(pred)
        correct += len(pred & set(gold.tolist()))
        for k, g in enumerate(gold.tolist()):
            if re.search(r"[.!?][\"')\]]*$", p[k]) and p[k + 1][:1].isupper():
                eligible += 1
                found += g in pred
    assert eligible > 100 and found / eligible > 0.97
    assert correct / predicted > 0.9


def test_document_edge_cases():
    s = parse_document("")
    assert len(s) == 1 and s.labels[0] == "document"
    s = parse_document("  \n\n Dr. Who arrived at 5 p.m. today. It rained!\n \n\nEnd", name="x").validate()
    check_ids(s)
    sents = [s.node_text(i) for i in np.flatnonzero(s.labels == "sentence")]
    assert sents == ["Dr. Who arrived at 5 p.m. today.", "It rained!", "End"]
    assert s.attrs["paragraph"][np.flatnonzero(s.labels == "sentence")].tolist() == [0, 0, 1]
    assert s.attrs["sentence"][np.flatnonzero(s.labels == "sentence")].tolist() == [0, 1, 0]


def test_markdown_sections_nest(ud_paragraphs):
    parts, expected = [], []
    for d, doc in ud_paragraphs[:30]:
        parts.append(f"# {d}\n")
        for k, p in enumerate(doc):
            if k == 1:
                parts.append("## Part two\n")
                parts.append("```\n# not a heading\n```\n")
            parts.append(" ".join(p) + "\n")
        expected.append((d, len(doc)))
    text = "\n".join(parts)
    s = parse_markdown(text, name="ud.md").validate()
    check_ids(s)
    sections = np.flatnonzero(s.labels == "section")
    top = [i for i in sections if s.parent[i] == 0]
    assert len(top) == len(expected)
    for i, (d, n_par) in zip(top, expected):
        heading = s.children(i)[0]
        assert s.labels[heading] == "heading" and s.node_text(heading) == d
        sub = [c for c in s.children(i) if s.labels[c] == "section"]
        assert len(sub) == (1 if n_par > 1 else 0)
        n_direct = sum(s.labels[c] == "paragraph" for c in s.children(i))
        n_sub = sum(s.labels[c] == "paragraph" for j in sub for c in s.children(j))
        assert (n_direct, n_sub) == (1, n_par - 1)
    assert (s.labels == "code_block").sum() == sum(n > 1 for _, n in expected)
    # nesting follows heading levels: a section's level exceeds its enclosing section's
    lv = s.attrs["level"]
    for i in sections:
        p = s.parent[i]
        if s.labels[p] == "section":
            assert lv[i] > lv[p]


def test_markdown_levels_and_setext():
    md = "pre\n\n# A\ntext\n\n### C (skips a level)\n\nx\n\n## B\n\nSetext\n===\n\nlast. Two!\n"
    s = parse("" + md, "markdown").validate()
    check_ids(s)
    secs = np.flatnonzero(s.labels == "section")
    heads = [s.node_text(s.children(i)[0]) for i in secs]
    assert heads == ["A", "C (skips a level)", "B", "Setext"]
    depth = compute(s, "hier")["section_depth"][secs].tolist()
    assert depth == [1, 2, 2, 1]
    assert s.labels[s.children(0)[0]] == "paragraph"  # text before the first heading
    with pytest.raises(ValueError):
        compute(s, "hier:3")
    crlf = parse_markdown(md.replace("\n", "\r\n")).validate()
    assert list(crlf.labels) == list(s.labels)
    assert [crlf.node_text(i) for i in range(len(crlf)) if crlf.labels[i] in TOKENS] == [
        s.node_text(i) for i in range(len(s)) if s.labels[i] in TOKENS
    ]


def test_hier_needs_a_tree():
    from structpos import Structure

    with pytest.raises(StructureError):
        compute(Structure(kind="graph", labels=["a"]), "hier")


CASES = [
    "a\n- b\n-\n",  # a lone "-" after a list item is an empty item, not a setext underline
    "Foo\n-\n",
    "Foo\n===  \n",
    "- b\n---\n",  # a list item, then a thematic break
    "> q\n---\n",
    "para\n2020. year\n---\n",  # "2020." cannot interrupt a paragraph: a setext heading
    "para\n1. one\n---\n",  # "1." can
    "para\n- \n---\n",
    "a\nb\n---\nc\n",
    "# #\n",
    "#\n\nx\n",
    "## a ##   \ntext\n",
    "x\n\n---\n\ny\n",
]


def _headings(text: str) -> list[tuple[int, int]]:
    s = parse_markdown(text)
    return sorted(
        (text.count("\n", 0, int(st)), int(lv))
        for st, lv, lab in zip(s.start, s.attrs["level"], s.labels)
        if lab == "section"
    )


@pytest.mark.parametrize("text", CASES)
def test_markdown_headings_match_commonmark(text):
    markdown_it = pytest.importorskip("markdown_it")
    ref = [
        (t.map[0], int(t.tag[1])) for t in markdown_it.MarkdownIt("commonmark").parse(text) if t.type == "heading_open"
    ]
    assert _headings(text) == sorted(ref)


@pytest.mark.parametrize("text", ["### a ###\u2028\n#\n~~~\nx", "### a ### a ##\u3000#\x0b\n#\n", "# a\u00a0\n"])
def test_a_heading_ending_in_unicode_space_stays_inside_its_section(text):  # found by benchmarks/fuzz.py
    s = parse_markdown(text)
    has = s.parent >= 0
    assert (s.start[has] >= s.start[s.parent[has]]).all() and (s.end[has] <= s.end[s.parent[has]]).all()


def test_an_empty_atx_heading_has_an_empty_span_and_no_tokens():
    for text in ("# #\n", "#\n", "###   ###\n", "#   \n", "# #  "):
        s = parse_markdown(text)
        h = int(np.flatnonzero(s.labels == "heading")[0])
        assert s.start[h] == s.end[h] and not (s.parent == h).any(), text
        assert s.start[1] <= s.start[h] <= s.end[1], text  # inside its section
        assert s.source[s.start[1] : s.end[1]] == text.rstrip()  # the section: its line, trimmed


def test_a_leading_byte_order_mark_in_text_is_no_content():
    for parser, text in ((parse_markdown, "# Bom\n\nSome text. More.\n"), (parse_document, "Hello. World.\n")):
        plain, with_bom = parser(text), parser("\ufeff" + text)
        assert with_bom.labels.tolist() == plain.labels.tolist()
        assert (with_bom.start[1:] - 1).tolist() == plain.start[1:].tolist()  # the same nodes, one character on
