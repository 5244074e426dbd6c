"""CoNLL-U and spaCy dependency trees against the raw token lists (UD English EWT dev)."""

from __future__ import annotations

from types import SimpleNamespace

import conllu
import numpy as np
import pytest
from conftest import at_least, full_data

from structpos import StructureError
from structpos.parsers.conllu_tree import parse_conllu
from structpos.parsers.spacy_doc import parse_spacy


@pytest.fixture(scope="module")
def ud_path(shared_data):
    return shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu"


@pytest.fixture(scope="module")
def parsed(ud_path):
    return parse_conllu(ud_path)


@pytest.fixture(scope="module")
def raw(ud_path):
    return conllu.parse(ud_path.read_text(encoding="utf-8"))


def ref_depth(parent: np.ndarray) -> np.ndarray:
    """Depth from a preorder parent array, by a plain loop (parents come first)."""
    d = np.zeros(parent.size, dtype=np.int64)
    for i in range(parent.size):
        if parent[i] >= 0:
            d[i] = d[parent[i]] + 1
    return d


def test_every_sentence_parses(parsed, ud_path):
    n_ids = sum(1 for line in ud_path.read_text(encoding="utf-8").splitlines() if line.startswith("# sent_id"))
    assert len(parsed) == n_ids == (2001 if full_data() else 201)
    for s in parsed:
        assert np.all(s.parent < np.arange(len(s)))
        assert (s.parent == -1).sum() == 1 and s.parent[0] == -1
        assert s.attrs["head"][0] == 0


def test_tree_matches_raw_heads(parsed, raw):
    from structpos.coords.tree import depth as tree_depth

    for s, sent in zip(parsed, raw):
        words = [t for t in sent if isinstance(t["id"], int)]
        by_id = {t["id"]: t for t in words}
        assert sorted(s.attrs["token_index"].tolist()) == list(range(1, len(words) + 1))
        # depth = number of head hops to the root, walked on the raw token list
        hops = []
        for tid in s.attrs["token_index"].tolist():
            k, h = 0, by_id[tid]["head"]
            while h != 0:
                h, k = by_id[h]["head"], k + 1
            hops.append(k)
        assert ref_depth(s.parent).tolist() == hops
        assert tree_depth(s.parent).tolist() == hops
        # the parent of each word is its raw head, labels are the raw deprels
        tid = s.attrs["token_index"]
        parent_ids = np.where(s.parent >= 0, tid[np.maximum(s.parent, 0)], 0)
        assert parent_ids.tolist() == [by_id[t]["head"] for t in tid.tolist()]
        assert list(s.labels) == [by_id[t]["deprel"] for t in tid.tolist()]
        # preorder with dependents in word order: siblings' token ids increase
        for p in range(len(s)):
            kids = tid[s.parent == p]
            assert np.all(np.diff(kids) > 0)


def test_spans_slice_to_forms(parsed, raw):
    mwt_words = whole_span = 0
    for s, sent in zip(parsed, raw):
        assert s.source == sent.metadata["text"]
        mwt = {}
        for t in sent:
            if isinstance(t["id"], tuple) and t["id"][1] == "-":
                for w in range(t["id"][0], t["id"][2] + 1):
                    mwt[w] = t["form"]
        for i in range(len(s)):
            tid = int(s.attrs["token_index"][i])
            text = s.node_text(i)
            if tid in mwt:
                mwt_words += 1
                if text == mwt[tid]:
                    whole_span += 1
                    continue
            assert text == s.attrs["form"][i], (s.name, tid, text)
        # surface tokens tile the text up to whitespace
        starts = np.sort(s.start)
        assert np.all(np.diff(starts) >= 0)
    assert mwt_words > at_least(600, 100) and whole_span < mwt_words // 10


def _sentence(rows, text=None, sent_id="t1"):
    head = [f"# sent_id = {sent_id}"] + ([f"# text = {text}"] if text is not None else [])
    return "\n".join(head + ["\t".join(r) for r in rows]) + "\n\n"


def _row(i, form, head, deprel, misc="_"):
    return [str(i), form, form.lower(), "X", "_", "_", str(head), deprel, "_", misc]


def test_multiword_and_empty_nodes():
    rows = [
        ["1-2", "Don't", "_", "_", "_", "_", "_", "_", "_", "_"],
        _row(1, "Do", 3, "aux"),
        _row(2, "n't", 3, "advmod"),
        _row(3, "go", 0, "root", "SpaceAfter=No"),
        ["3.1", "went", "go", "VERB", "_", "_", "_", "_", "3:conj", "_"],
        _row(4, "!", 3, "punct"),
    ]
    (s,) = parse_conllu(_sentence(rows, "Don't go!"))
    assert [s.node_text(i) for i in range(len(s))] == ["go", "Do", "n't", "!"]
    assert s.attrs["token_index"].tolist() == [3, 1, 2, 4]
    # no "# text": synthesized from surface forms and SpaceAfter=No
    (s,) = parse_conllu(_sentence(rows))
    assert s.source == "Don't go!" and s.sentence.text_synthesized
    # forms that do not concatenate to the surface token: each word gets the whole span
    rows2 = [["1-2", "du", "_", "_", "_", "_", "_", "_", "_", "_"], _row(1, "de", 2, "case"), _row(2, "le", 0, "root")]
    (s,) = parse_conllu(_sentence(rows2, "du"))
    assert [s.node_text(i) for i in range(len(s))] == ["du", "du"]


@pytest.mark.parametrize(
    "rows, text, pattern",
    [
        ([_row(1, "a", 0, "root"), _row(2, "b", 0, "root")], "a b", r"bad#t1 .*2 root words"),
        (
            [_row(1, "a", 2, "dep"), _row(2, "b", 1, "dep"), _row(3, "c", 0, "root")],
            "a b c",
            r"bad#t1 at word 1 \('a'\).*cycle",
        ),
        (
            [_row(1, "a", 0, "root"), _row(2, "b", 7, "dep")],
            "a b",
            r"bad#t1 at word 2 \('b'\).*word 7, is out of range",
        ),
        ([_row(1, "a", 2, "dep"), _row(2, "b", 1, "dep")], "a b", r"bad#t1.*no root"),
        ([_row(1, "a", 0, "root"), _row(2, "b", 1, "dep")], "a c", r"bad#t1 at token 2.*'b' does not match"),
    ],
)
def test_bad_trees_raise(rows, text, pattern):
    with pytest.raises(StructureError, match=pattern):
        parse_conllu(_sentence(rows, text), name="bad")


# --------------------------------------------------------------------------- spaCy
class FakeToken(SimpleNamespace):
    pass


class FakeDoc:
    """The duck-typed surface of a spaCy Doc: iteration, .text, optional .sents."""

    def __init__(self, text, tokens, sents=None):
        self.text, self._tokens = text, tokens
        if sents is not None:
            self.sents = sents

    def __iter__(self):
        return iter(self._tokens)


def _fake_doc(sentences, with_sents):
    """Concatenate UD sentences into one Doc-like object (heads as document token indices)."""
    text, tokens, sents, base = "", [], [], 0
    for s in sentences:
        if text:
            text += " "
        offset = len(text)
        text += s.source
        order = np.argsort(s.attrs["token_index"])
        start = base
        for i in order.tolist():
            tokens.append(
                FakeToken(
                    i=base + int(s.attrs["token_index"][i]) - 1,
                    idx=offset + int(s.start[i]),
                    text=s.node_text(i),
                    dep_=s.labels[i],
                    pos_=s.attrs["upos"][i],
                    _head=int(s.attrs["head"][i]),
                )
            )
        for t in tokens[start:]:
            t.head = tokens[base + t._head - 1] if t._head else t
        sents.append([tokens[start]])
        base += len(s)
    return FakeDoc(text, tokens, sents if with_sents else None)


@pytest.mark.parametrize("with_sents", [True, False])
def test_spacy_forest_matches_conllu(parsed, with_sents):
    chosen = [
        s
        for s in parsed[:40]
        if np.all(s.attrs["form"] == np.array([s.node_text(i) for i in range(len(s))], dtype=object))
    ][:6]
    doc = _fake_doc(chosen, with_sents)
    f = parse_spacy(doc, name="fake")
    roots = np.flatnonzero(f.parent == -1)
    assert len(roots) == len(chosen)
    bounds = list(roots) + [len(f)]
    for k, s in enumerate(chosen):
        a, b = bounds[k], bounds[k + 1]
        assert (f.parent[a:b] - a).tolist()[1:] == s.parent.tolist()[1:]
        assert list(f.labels[a:b]) == list(s.labels)
        assert [f.node_text(i) for i in range(a, b)] == [s.node_text(i) for i in range(len(s))]
        assert np.all(f.attrs["sentence"][a:b] == k)


def test_spacy_cycle_raises():
    t0, t1 = FakeToken(i=0, idx=0, text="a", dep_="x"), FakeToken(i=1, idx=2, text="b", dep_="y")
    t0.head, t1.head = t1, t0
    with pytest.raises(StructureError, match="cycle"):
        parse_spacy(FakeDoc("a b", [t0, t1]))
