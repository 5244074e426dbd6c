"""A parsed spaCy ``Doc`` → one preorder dependency forest (one tree per sentence).

Duck-typed, so spaCy is not needed to import this module: any object whose iteration
yields tokens with ``.i``, ``.head.i``, ``.dep_``, ``.idx`` and ``.text`` (optionally
``.pos_``), with ``.text`` on the document, works. A token whose head is itself is a
root (spaCy's convention). Each sentence tree is laid out in preorder with dependents in
token order, sentences in document order; roots have ``parent = -1``.

Attributes: ``token_index`` (spaCy's 0-based ``token.i``), ``head`` (``token.head.i``,
equal to ``token_index`` for a root), ``sentence`` (0-based sentence number: from
``doc.sents`` when the document has sentence boundaries, otherwise the rank of the
token's root), ``upos`` (``token.pos_`` or ``""``). Spans are token spans
(``structure.nested_spans = False``). Heads outside the document or head cycles raise
:class:`StructureError`.
"""

from __future__ import annotations

import numpy as np

from ..limits import Limits, check_limit, resolve_limits
from ..node_attrs import HEAD, SENTENCE, TOKEN_INDEX, UPOS
from ..structure import Structure, StructureError
from ._dependency import dependency_structure, heads_to_preorder

__all__ = ["parse_spacy"]


def _sentence_starts(doc) -> list[int] | None:
    sents = getattr(doc, "sents", None)
    if sents is None:
        return None
    try:
        return [s[0].i if hasattr(s, "__getitem__") else s.start for s in sents]
    except (ValueError, AttributeError, TypeError, IndexError):  # spaCy: E030 sentence boundaries unset
        return None


def parse_spacy(doc, name: str | None = None, *, limits: Limits | None = None) -> Structure:
    """Turn a parsed spaCy ``Doc`` (or a Doc-like object) into a ``kind="tree"`` Structure.

    Parameters
    ----------
    doc : spacy.tokens.Doc or Doc-like
        A parsed document, or any iterable of tokens with ``.i``, ``.head``, ``.dep_``,
        ``.idx``, ``.text`` (optionally ``.pos_``) that has ``.text`` (see the module
        docstring); spaCy itself is not imported.
    name : str, optional
        The document's name in error messages (default ``"<spacy doc>"``).
    limits : Limits, optional
        ``max_nodes`` (tokens) applies.

    Returns
    -------
    Structure
        A dependency forest in preorder (one tree per sentence), labels the dependency
        relations, token spans (``nested_spans=False``) and the attributes of the module
        docstring.

    Raises
    ------
    ParseError
        An empty document, tokens not numbered consecutively, a head outside the document,
        a head cycle, a token offset that does not match ``doc.text`` (each naming the token).
    LimitError
        More tokens than ``max_nodes``.

    Examples
    --------
    spaCy need not be installed: a Doc-like list of tokens will do. The head comes first in
    preorder; ``token_index`` keeps the word order:

    >>> from types import SimpleNamespace as Token
    >>> class Doc(list):
    ...     text = "Big dog"
    >>> big = Token(i=0, dep_="amod", idx=0, text="Big")
    >>> dog = Token(i=1, dep_="ROOT", idx=4, text="dog")
    >>> big.head, dog.head = dog, dog  # a token that is its own head is a root
    >>> s = parse_spacy(Doc([big, dog]))
    >>> s.parent.tolist(), [str(l) for l in s.labels], s.attrs["token_index"].tolist(), s.node_text(1)
    ([-1, 0], ['ROOT', 'amod'], [1, 0], 'Big')
    >>> dog.head = big  # now no token is a root
    >>> parse_spacy(Doc([big, dog]))
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <spacy doc> at token 0 ('Big'): token 0 ('Big') is not connected to a root (its heads form a cycle)
    """
    name = name or "<spacy doc>"
    tokens = list(doc)
    n = len(tokens)
    if n == 0:
        raise StructureError("document has no tokens", name=name)
    check_limit(n, resolve_limits(limits).max_nodes, "max_nodes", "nodes", name=name)
    base = tokens[0].i
    idx = np.array([t.i for t in tokens], dtype=np.int64) - base
    if not np.array_equal(idx, np.arange(n)):
        raise StructureError("token.i must number the tokens consecutively", name=name)
    head_i = np.array([t.head.i for t in tokens], dtype=np.int64) - base
    heads = np.where(head_i == idx, -1, head_i)
    word = lambda w: f"token {w + base} ({tokens[w].text!r})" if 0 <= w < n else f"token {w + base}"  # noqa: E731
    order, parent = heads_to_preorder(heads, name=name, word_name=word, single_root=False)

    starts = _sentence_starts(doc)
    if starts:
        sentence = np.searchsorted(np.asarray(starts, dtype=np.int64) - base, np.arange(n), side="right") - 1
    else:  # each token belongs to the tree of its root: propagate down the preorder layout
        root_rank = np.cumsum(parent == -1) - 1
        sentence = np.empty(n, dtype=np.int64)
        sentence[order] = root_rank
    start = np.array([t.idx for t in tokens], dtype=np.int64)
    end = start + np.array([len(t.text) for t in tokens], dtype=np.int64)
    text = doc.text
    for w in range(n):
        if start[w] < 0 or end[w] > len(text) or text[start[w] : end[w]] != tokens[w].text:
            raise StructureError(
                f"{word(w)} does not match the document text at offset {start[w]}", name=name, position=word(w)
            )
    return dependency_structure(
        order,
        parent,
        [t.dep_ or "dep" for t in tokens],
        start,
        end,
        {
            TOKEN_INDEX: idx + base,
            HEAD: head_i + base,
            SENTENCE: sentence,
            UPOS: [getattr(t, "pos_", "") or "" for t in tokens],
        },
        source=text,
        name=name,
        format="spacy",
    )
