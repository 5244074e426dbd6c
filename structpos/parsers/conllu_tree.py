"""CoNLL-U → one preorder dependency tree per sentence, with rebuilt character offsets.

Each syntactic word (integer id) is a node; the tree follows HEAD (the word with head 0 is
the root, ``parent = -1``) laid out in preorder with dependents in word order. Labels are
DEPREL; attributes ``token_index`` (the original 1-based word id), ``head`` (the original
1-based head id, 0 for the root), ``upos`` and ``form``.

Character offsets (CoNLL-U has none) are rebuilt by matching the *surface* tokens — words
outside multiword tokens and the multiword tokens themselves (``1-2 don't``) — left to
right against ``# text``, skipping whitespace; a form that does not match the text there is
an error. Words inside a multiword token get consecutive sub-spans when their forms
concatenate to the surface form (``do`` + ``n't`` = ``don't``), otherwise each gets the
whole multiword span. Empty nodes (``8.1``) are enhanced-graph only and are skipped. With
no ``# text``, the text is synthesized from the surface forms, a space after each one unless
MISC has ``SpaceAfter=No``.

Spans are word spans, so a head's span does *not* contain its dependents' spans
(``structure.nested_spans = False``). Several roots, no root, a head cycle or a head out of
range raise :class:`StructureError` naming the sentence id and the word — no root is
invented (unlike ``conllu``'s ``to_tree()``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .._optional import require
from ..limits import Limits, check_limit, node_budget
from ..node_attrs import FORM, HEAD, TOKEN_INDEX, UPOS
from ..structure import SentenceInfo, Structure, StructureError, raise_at_first
from ._conllu_lines import read_sentences
from ._dependency import dependency_structure, heads_to_preorder
from ._input import read_text

__all__ = ["parse_conllu"]


def _looks_like_path(obj) -> bool:
    return isinstance(obj, str) and "\n" not in obj and len(obj) < 4096 and "\x00" not in obj and os.path.isfile(obj)


def _read(text_or_path, name: str | None, limits: Limits | None, default_encoding: str | None) -> tuple[str, str]:
    if _looks_like_path(text_or_path):
        text_or_path = Path(text_or_path)
    return read_text(text_or_path, name=name, default="<conllu>", limits=limits, default_encoding=default_encoding)


def _space_after(tok) -> bool:
    misc = tok.get("misc") or {}
    return misc.get("SpaceAfter") != "No"


def _sentence_text(tokens) -> str:
    """The sentence text synthesized from surface forms and ``SpaceAfter=No``."""
    parts = []
    for form, _, tok in _surface(tokens):
        parts.append(form)
        if _space_after(tok):
            parts.append(" ")
    return "".join(parts).rstrip(" ")


def _surface(tokens):
    """Yield ``(form, word ids covered, token)`` for each surface token in order."""
    covered_until = 0
    for tok in tokens:
        tid = tok["id"]
        if isinstance(tid, tuple):
            if len(tid) == 3 and tid[1] == "-":
                covered_until = tid[2]
                yield tok["form"], list(range(tid[0], tid[2] + 1)), tok
            continue  # empty node (8.1) or a multiword range already handled
        if tid > covered_until:
            yield tok["form"], [tid], tok


def parse_conllu(
    text_or_path, name: str | None = None, *, limits: Limits | None = None, default_encoding: str | None = None
) -> list[Structure]:
    """Parse CoNLL-U text or a file into one ``kind="tree"`` Structure per sentence.

    Parameters
    ----------
    text_or_path : str, bytes or os.PathLike
        CoNLL-U text, its bytes, a ``pathlib.Path``, or a string naming an existing file.
    name : str, optional
        The input's name in error messages and in each sentence's ``name`` (``name#sent_id``;
        default: the path, else ``"<conllu>"``).
    limits : Limits, optional
        ``max_input_bytes``, and ``max_nodes`` over all sentences together.
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    list of Structure
        One preorder dependency tree per sentence (layout in the module docstring), with
        ``structure.sentence`` holding the sentence id, its index and its comments.

    Raises
    ------
    ParseError
        Text the ``conllu`` library cannot read; a sentence without words, with several roots
        or none, a head cycle, a head out of range, or a form that does not match ``# text``
        (each naming the sentence id and the word).
    LimitError
        ``max_input_bytes`` or ``max_nodes`` exceeded.

    Examples
    --------
    >>> rows = ["1\\tHi\\thi\\tINTJ\\t_\\t_\\t0\\troot\\t_\\t_", "2\\t!\\t!\\tPUNCT\\t_\\t_\\t1\\tpunct\\t_\\t_"]
    >>> [s] = parse_conllu("# text = Hi!\\n" + "\\n".join(rows) + "\\n\\n")
    >>> [str(l) for l in s.labels], s.start.tolist(), s.end.tolist(), s.node_text(1)
    (['root', 'punct'], [0, 2], [2, 3], '!')

    Without ``# text`` the text is rebuilt from the forms (``SpaceAfter=No`` glues them); a
    head out of range is reported with the word:

    >>> parse_conllu("\\n".join(rows) + "\\n\\n")[0].source
    'Hi !'
    >>> rows[0] = rows[0][:-1] + "SpaceAfter=No"  # MISC, the last column
    >>> parse_conllu("\\n".join(rows) + "\\n\\n")[0].source
    'Hi!'
    >>> parse_conllu("1\\tHi\\thi\\tINTJ\\t_\\t_\\t3\\troot\\t_\\t_\\n\\n")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <conllu>#1 at word 1 ('Hi'): the head of word 1 ('Hi'), word 3, is out of range (the sentence has 1 words)
    """
    conllu = require("conllu", "text", "parse_conllu")
    text, name = _read(text_or_path, name, limits, default_encoding)
    sentences = read_sentences(text)
    if sentences is None:  # not plain CoNLL-U: conllu's own reading (and its error)
        try:
            sentences = conllu.parse(text)
        except Exception as e:
            raise StructureError(f"not valid CoNLL-U: {e}", name=name) from None
    out, budget = [], node_budget(limits)
    for k, s in enumerate(sentences):
        out.append(_checked_sentence(s, k, name))
        budget -= out[-1].num_nodes
        if budget < 0:
            check_limit(node_budget(limits) - budget, node_budget(limits), "max_nodes", "nodes", name=name)
    return out


def _checked_sentence(tokens, k: int, name: str) -> Structure:
    """:func:`_sentence`, with column values of the wrong type reported as a ParseError."""
    try:
        return _sentence(tokens, k, name)
    except (TypeError, KeyError, AttributeError) as e:  # a column the conllu library left as an odd type
        sent_id = tokens.metadata.get("sent_id", str(k + 1)) if hasattr(tokens, "metadata") else str(k + 1)
        raise StructureError(f"malformed token columns ({type(e).__name__}: {e})", name=f"{name}#{sent_id}") from None


def _sentence(tokens, k: int, name: str) -> Structure:
    sent_id = tokens.metadata.get("sent_id", str(k + 1))
    sname = f"{name}#{sent_id}"
    words = [t for t in tokens if isinstance(t["id"], int)]
    n = len(words)
    if n == 0:
        raise StructureError("sentence has no words", name=sname)
    _check_ids(tokens, n, sname)
    ids = np.array([t["id"] for t in words], dtype=np.int64)
    raise_at_first(
        ids != np.arange(1, n + 1),
        lambda w: f"word ids must run 1..{n}, found {ids[w]} at position {w + 1}",
        name=sname,
        where=lambda w: f"word {ids[w]}",
    )
    for t in tokens:
        missing = [f for f in ("form", "upos", "head", "deprel") if f not in t]
        if missing:
            raise StructureError(
                f"token {t['id']} lacks the column(s) {', '.join(missing)}", name=sname, position=f"token {t['id']}"
            )
    raw_heads = []
    for t in words:
        h = t["head"]
        if not isinstance(h, int):
            raise StructureError(
                f"word {t['id']} ({t['form']!r}) has no integer HEAD ({h!r})", name=sname, position=f"word {t['id']}"
            )
        if not 0 <= h <= n:
            raise StructureError(
                f"the head of word {t['id']} ({t['form']!r}), word {h}, is out of range (the sentence has {n} words)",
                name=sname,
                position=f"word {t['id']} ({t['form']!r})",
            )
        raw_heads.append(h)
    heads = np.array(raw_heads, dtype=np.int64)
    order, parent = heads_to_preorder(
        heads - 1,
        name=sname,
        word_name=lambda w: f"word {w + 1} ({words[w]['form']!r})" if 0 <= w < n else f"word {w + 1}",
    )
    source = tokens.metadata.get("text")
    synthesized = source is None
    if synthesized:
        source = _sentence_text(tokens)
    start, end = _word_spans(tokens, source, n, sname)
    return dependency_structure(
        order,
        parent,
        [t["deprel"] or "_" for t in words],
        start,
        end,
        {
            TOKEN_INDEX: ids,
            HEAD: heads,
            UPOS: [t["upos"] for t in words],
            FORM: [t["form"] for t in words],
        },
        source=source,
        name=sname,
        format="conllu",
        sentence=SentenceInfo(sent_id, k, text_synthesized=synthesized, comments=dict(tokens.metadata)),
    )


def _check_ids(tokens, n: int, sname: str) -> None:
    """Word ids within ``1..n`` and multiword ranges ``a-b`` with ``1 <= a <= b <= n``."""
    for t in tokens:
        tid = t["id"]
        if isinstance(tid, int):
            bad = not 1 <= tid <= n
        elif isinstance(tid, tuple) and len(tid) == 3 and tid[1] == "-":
            bad = not (isinstance(tid[0], int) and isinstance(tid[2], int) and 1 <= tid[0] <= tid[2] <= n)
        else:
            continue  # an empty node (8.1): skipped
        if bad:
            shown = "".join(map(str, tid)) if isinstance(tid, tuple) else tid
            raise StructureError(
                f"token id {shown} is outside the sentence's words 1..{n}", name=sname, position=f"token {shown}"
            )


def _word_spans(tokens, text: str, n: int, sname: str) -> tuple[np.ndarray, np.ndarray]:
    """Character span of every word (indexed by word id - 1), matched against ``text``."""
    start = np.full(n, -1, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    by_id = {t["id"]: t for t in tokens if isinstance(t["id"], int)}
    pos = 0
    for form, wids, tok in _surface(tokens):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if not text.startswith(form, pos):
            tid = tok["id"]
            tid = f"{tid[0]}-{tid[2]}" if isinstance(tid, tuple) else tid
            raise StructureError(
                f"token {tid} {form!r} does not match the sentence text at offset {pos} ({text[pos : pos + len(form) + 5]!r})",
                name=sname,
                position=f"token {tid}",
            )
        s, e = pos, pos + len(form)
        pos = e
        if len(wids) == 1:
            start[wids[0] - 1], end[wids[0] - 1] = s, e
            continue
        parts = [by_id[w]["form"] for w in wids if w in by_id]
        if "".join(parts) == form and len(parts) == len(wids):
            for w, part in zip(wids, parts):
                start[w - 1], end[w - 1] = s, s + len(part)
                s += len(part)
        else:
            for w in wids:
                start[w - 1], end[w - 1] = s, e
    if text[pos:].strip():
        raise StructureError(
            f"sentence text continues after the last token: {text[pos : pos + 20]!r}",
            name=sname,
            position=f"offset {pos}",
        )
    return start, end
