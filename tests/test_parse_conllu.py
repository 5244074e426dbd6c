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


# --------------------------------------------------------------------------- the plain-CoNLL-U reader
_READ_KEYS = ("id", "form", "upos", "head", "deprel")


def _columns(sentences, with_misc):
    """What parse_conllu reads of each sentence: its comments and the six columns."""
    out = []
    for s in sentences:
        keys = _READ_KEYS + (("misc",) if with_misc(s) else ())
        out.append((dict(s.metadata), [tuple(t[k] for k in keys) for t in s]))
    return out


def _mutants(text, rng, n):
    """``n`` copies of ``text`` with one edit each: a character inserted, deleted or replaced by one
    that matters to CoNLL-U readers (tab, spaces, newline, '#', '=', '-', '.', '_', digits, CR, and
    characters str.splitlines or str.strip treat as breaks or space)."""
    pool = [
        "\t",
        " ",
        "  ",
        "\n",
        "\n\n",
        "#",
        "=",
        "-",
        ".",
        "_",
        "0",
        "7",
        "\r",
        "x",
        "\u00a0",
        "global.columns",
        "|2-1:x",
        "1-2\t",
    ]
    for _ in range(n):
        i = int(rng.integers(len(text)))
        op = rng.integers(3)
        piece = pool[int(rng.integers(len(pool)))]
        yield text[:i] + (piece if op < 2 else "") + text[i + (op > 0) :]


def test_reader_gives_conllus_columns_or_declines(ud_path):
    """Wherever the reader answers, conllu.parse accepts the text and has the same comments and columns."""
    from structpos.parsers._conllu_lines import read_sentences

    text = ud_path.read_text(encoding="utf-8")
    ours = read_sentences(text)
    assert ours is not None  # UD EWT is plain CoNLL-U
    has_text = lambda s: "text" not in s.metadata  # noqa: E731 - MISC is read where there is no # text
    assert _columns(ours, has_text) == _columns(conllu.parse(text), has_text)
    rows = [
        ["1-2", "Don't", "_", "_", "_", "_", "_", "_", "_", "_"],
        _row(1, "Do", 3, "aux"),
        _row(2, "n't", 3, "advmod"),
        _row(3, "go", 0, "root", "SpaceAfter=No|X=1"),
        ["3.1", "went", "go", "VERB", "_", "_", "_", "_", "3:conj", "_"],
        _row(4, "!", 3, "punct"),
    ]
    small = "# newpar\n# x =\n" + _sentence(rows, "Don't go!") + _sentence(rows[1:4]) + "\r\n" + _sentence(rows[1:4])
    rng = np.random.default_rng(0)
    answered = declined = 0
    for t in [small, small.replace("\n", "\r\n"), *_mutants(small, rng, 1500)]:
        got = read_sentences(t)
        if got is None:
            declined += 1
            continue
        answered += 1
        assert _columns(got, has_text) == _columns(conllu.parse(t), has_text), repr(t)
    assert answered > 300 and declined > 100  # both branches exercised by the mutants


def _same_sentences(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.source, x.name, x.format, x.sentence) == (y.source, y.name, y.format, y.sentence)
        assert list(x.labels) == list(y.labels)
        for f in ("start", "end", "parent"):
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
        assert x.attrs.keys() == y.attrs.keys()
        for k in x.attrs:
            assert list(x.attrs[k]) == list(y.attrs[k]), k


def test_parse_conllu_same_through_reader_and_conllu(ud_path, monkeypatch):
    """Structures and errors are those of the conllu.parse path (the reader switched off)."""
    import structpos.parsers.conllu_tree as ct

    text = ud_path.read_text(encoding="utf-8")
    rows = [_row(1, "Do", 2, "aux"), _row(2, "go", 0, "root", "SpaceAfter=No"), _row(3, "!", 2, "punct")]
    bad = [_row(1, "a", 2, "dep"), _row(2, "b", 1, "dep")]
    huge = [_row(1, "a", 0, "root"), _row(2, "b", "9" * 5000, "dep")]  # past int()'s 4,300 digits (fuzzer)
    cases = [text, _sentence(rows, "Do go!") + _sentence(rows), _sentence(bad, "a b"), _sentence(rows, "Do stop!")]
    cases += [_sentence(huge, "a b"), _sentence([_row("9" * 5000, "a", 0, "root")], "a")]
    for t in cases:
        results = []
        for reader in (ct.read_sentences, lambda _text: None):
            monkeypatch.setattr(ct, "read_sentences", reader)
            try:
                results.append(ct.parse_conllu(t, name="c"))
            except StructureError as e:
                results.append(str(e))
        if isinstance(results[0], str):
            assert results[0] == results[1]
        else:
            _same_sentences(*results)
