"""Plain text → document tree: document → paragraph → sentence → token.

* Paragraphs are blocks separated by blank lines (a line holding only whitespace counts as
  blank); spans are trimmed of surrounding whitespace.
* Sentences come from an offline rule-based splitter (:func:`split_sentences`): a sentence
  ends after ``.``, ``!``, ``?`` or ``…`` (runs allowed, closing quotes/brackets included)
  followed by whitespace, unless the next text starts with a lowercase letter, or the period
  closes a known abbreviation (``Mr.``, ``e.g.``, month names, ...; ``No.``/``Fig.``/``p.``
  only before a number) or a capital initial (``J. Smith``). Abbreviations that often end
  sentences (``etc.``, ``Inc.``, ``U.S.``) split only before an uppercase word.
* Tokens (:func:`tokenize`): numbers with internal ``.``/``,``/``:`` (``3.14``, ``1,000``,
  ``10:30``) and words joined by internal apostrophes or hyphens (``don't``, ``e-mail``) are
  ``word`` tokens; every other non-space character is its own ``punct`` token.

Attributes ``paragraph``, ``sentence``, ``token`` are the hierarchical ids of
:mod:`structpos.coords.hierarchy` (paragraph ordinal in the document, sentence ordinal in
its paragraph, token ordinal in its sentence; ``-1`` where not applicable).
"""

from __future__ import annotations

import re

from ..limits import Limits, node_budget
from ..structure import Structure, StructureKind
from ._input import read_text
from ._tree_builder import TreeBuilder

__all__ = ["parse_document", "split_paragraphs", "split_sentences", "tokenize"]

_PARA_SEP = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)+|\w+(?:['’\-]\w+)*|[^\w\s]")
# possessive runs, and no match starting inside a run: linear on "....." runs of any length
_TERMINATOR = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’)\]»]*+(?=\s|$)")
_WORD_BEFORE = re.compile(r"([\w.\-]+)$")

# never end a sentence after these (lowercased, without the final period)
_ABBREV_STRONG = frozenset(
    """mr mrs ms dr prof sr jr st mt gen col lt capt sgt rev hon gov sen rep pres messrs mme mlle
    e.g i.e cf vs v al approx ca dept est
    jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
# abbreviations only before a number ("No. 5", "Fig. 2"; but "Hell no. Thats ...")
_ABBREV_NUMERIC = frozenset("no nos fig figs eq eqs vol pp p ch sec art".split())
# end a sentence after these only when the next word is capitalized
_ABBREV_WEAK = frozenset("etc inc ltd corp co bros u.s u.k u.n a.m p.m ph.d b.a m.a jr.".split())


def split_paragraphs(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Spans of the blank-line-separated blocks (paragraphs) of ``text[start:end]``, trimmed.

    Parameters
    ----------
    text : str
        The whole text; spans index it.
    start, end : int, optional
        The part of ``text`` to work on (default: all of it).

    Returns
    -------
    list of (int, int)
        ``(start, end)`` character spans in order, without surrounding whitespace; a line
        holding only whitespace separates blocks too; empty blocks are dropped.

    Examples
    --------
    >>> text = "Hi there.\\n  \\nSecond block\\nstill second.\\n"
    >>> [text[a:b] for a, b in split_paragraphs(text)]
    ['Hi there.', 'Second block\\nstill second.']
    """
    end = len(text) if end is None else end
    spans = []
    pos = start
    for m in _PARA_SEP.finditer(text, start, end):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, end))
    return [t for t in (_trim(text, s, e) for s, e in spans) if t[1] > t[0]]


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _is_boundary(text: str, term_start: int, term_end: int, limit: int) -> bool:
    nxt = term_end
    while nxt < limit and text[nxt].isspace():
        nxt += 1
    if nxt >= limit:
        return True
    following = text[nxt]
    if following.islower():
        return False
    if text[term_start] != "." or text.startswith("..", term_start):
        return True
    m = _WORD_BEFORE.search(text, max(0, term_start - 64), term_start)  # bounded look-behind window
    if m is None:
        return True
    word = m.group(1).lower().lstrip(".-")
    if word in _ABBREV_STRONG:
        return False
    if word in _ABBREV_NUMERIC:
        return not following.isdigit()
    before = text[m.start() - 1] if m.start() > 0 else " "
    if len(word) == 1 and m.group(1).isupper() and before not in "'’":  # an initial: "J. Smith" (not "didn't.")
        return False
    if word in _ABBREV_WEAK or re.fullmatch(r"(?:\w\.)+\w", word):  # etc. / U.S.
        return following.isupper()
    return True


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Spans of the sentences of ``text[start:end]`` by the rules in the module docstring, trimmed.

    Parameters
    ----------
    text, start, end
        As for :func:`split_paragraphs`.

    Returns
    -------
    list of (int, int)
        ``(start, end)`` character spans in order, without surrounding whitespace.

    Examples
    --------
    Abbreviations (``Mr.``, ``a.m.`` before a lowercase word), initials and ``Fig.`` before
    a number do not end a sentence:

    >>> text = "Mr. Smith met J. Doe at 10 a.m. today. It rained! Fig. 2 shows it."
    >>> [text[a:b] for a, b in split_sentences(text)]
    ['Mr. Smith met J. Doe at 10 a.m. today.', 'It rained!', 'Fig. 2 shows it.']
    """
    end = len(text) if end is None else end
    spans = []
    pos = start
    for m in _TERMINATOR.finditer(text, start, end):
        if _is_boundary(text, m.start(), m.end(), end):
            spans.append((pos, m.end()))
            pos = m.end()
    spans.append((pos, end))
    return [t for t in (_trim(text, s, e) for s, e in spans) if t[1] > t[0]]


def tokenize(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int, str]]:
    """The tokens of ``text[start:end]`` by the rules in the module docstring.

    Parameters
    ----------
    text, start, end
        As for :func:`split_paragraphs`.

    Returns
    -------
    list of (int, int, str)
        ``(start, end, kind)`` per token in order; ``kind`` is ``"word"`` (words, numbers)
        or ``"punct"`` (any other non-space character, one per token).

    Examples
    --------
    >>> text = "Don't pay $1,000.50 by e-mail!"
    >>> [(text[a:b], kind) for a, b, kind in tokenize(text)]
    [("Don't", 'word'), ('pay', 'word'), ('$', 'punct'), ('1,000.50', 'word'), ('by', 'word'), ('e-mail', 'word'), ('!', 'punct')]
    >>> tokenize(text, 6, 9)
    [(6, 9, 'word')]
    """
    end = len(text) if end is None else end
    return [
        (m.start(), m.end(), "word" if (m.group()[0].isalnum() or m.group()[0] == "_") else "punct")
        for m in _TOKEN.finditer(text, start, end)
    ]


def _add_blocks(
    b: TreeBuilder, text: str, parent: int, start: int, end: int, label: str = "paragraph", split: bool = True
) -> None:
    """Append one block node (paragraph/heading) with its sentences and tokens under ``parent``."""
    block = b.add(label, parent, start, end)
    for s, e in split_sentences(text, start, end) if split else [(start, end)]:
        sent = b.add("sentence", block, s, e)
        for ts, te, kind in tokenize(text, s, e):
            b.add(kind, sent, ts, te)


def _finish(b: TreeBuilder, kind: StructureKind, text: str, name: str, format: str) -> Structure:
    """Build the Structure and attach the hierarchy ids as attributes."""
    from ..coords.hierarchy import hierarchy_ids

    s = b.build(kind, text, name, format=format)
    s.attrs.update(hierarchy_ids(s.labels, s.parent))
    return s


def parse_document(
    text: str, name: str | None = None, *, limits: Limits | None = None, default_encoding: str | None = None
) -> Structure:
    """Parse plain text into a ``kind="document"`` tree: document → paragraph → sentence → token.

    Parameters
    ----------
    text : str, bytes or os.PathLike
        The text, its bytes or a file (UTF-8 unless a byte-order mark says otherwise).
    name : str, optional
        The input's name in error messages (default: the path, else ``"<document>"``).
    limits : Limits, optional
        ``max_input_bytes`` and ``max_nodes`` apply.
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    Structure
        Labels ``document``, ``paragraph``, ``sentence``, ``word``/``punct`` in preorder, each
        node spanning its text; attributes ``paragraph``, ``sentence``, ``token`` (hierarchy
        ids, ``-1`` where not applicable).

    Raises
    ------
    ParseError
        Bytes that do not decode (naming the byte offset), a lone surrogate in ``str`` input.
    LimitError
        ``max_input_bytes`` or ``max_nodes`` exceeded.

    Examples
    --------
    >>> s = parse_document("Hi there. Bye.\\n\\nNew one.")
    >>> [s.node_text(i) for i in range(len(s)) if s.labels[i] == "sentence"]
    ['Hi there.', 'Bye.', 'New one.']
    >>> s.num_nodes, s.attrs["paragraph"].tolist()[-5:], s.attrs["token"].tolist()[-5:]
    (14, [1, 1, 1, 1, 1], [-1, -1, 0, 1, 2])
    """
    text, name = read_text(text, name=name, default="<document>", limits=limits, default_encoding=default_encoding)
    b = TreeBuilder(max_nodes=node_budget(limits), name=name)
    root = b.add("document", -1, 0, len(text))
    for ps, pe in split_paragraphs(text, content_start(text)):
        _add_blocks(b, text, root, ps, pe)
    return _finish(b, "document", text, name, "text")


def content_start(text: str) -> int:
    """Where the content of ``text`` starts: after a leading byte-order mark (U+FEFF), which is no token.

    Examples
    --------
    >>> content_start("\ufeffHi."), content_start("Hi.")
    (1, 0)
    """
    return 1 if text.startswith("\ufeff") else 0
