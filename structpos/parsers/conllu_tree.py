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

from ..structure import SentenceInfo, Structure, StructureError
from . import require
from ._dependency import heads_to_preorder

__all__ = ["parse_conllu", "sentence_text"]


def _read(text_or_path) -> tuple[str, str]:
    if isinstance(text_or_path, Path) or (
        isinstance(text_or_path, str) and "\n" not in text_or_path and len(text_or_path) < 4096 and os.path.isfile(text_or_path)
    ):
        p = Path(text_or_path)
        return p.read_text(encoding="utf-8"), str(p)
    if isinstance(text_or_path, (bytes, bytearray)):
        return bytes(text_or_path).decode("utf-8"), "<conllu>"
    return text_or_path, "<conllu>"


def _space_after(tok) -> bool:
    misc = tok.get("misc") or {}
    return misc.get("SpaceAfter") != "No"


def sentence_text(tokens) -> str:
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


def parse_conllu(text_or_path, name: str | None = None) -> list[Structure]:
    """Parse CoNLL-U text or a file path into one ``kind="tree"`` Structure per sentence."""
    conllu = require("conllu", "text", "parse_conllu")
    text, default_name = _read(text_or_path)
    name = name or default_name
    try:
        sentences = conllu.parse(text)
    except Exception as e:  # conllu raises ParseException and plain ValueErrors
        raise StructureError(f"not valid CoNLL-U: {e}", name=name) from None
    return [_sentence(s, k, name) for k, s in enumerate(sentences)]


def _sentence(tokens, k: int, name: str) -> Structure:
    sent_id = tokens.metadata.get("sent_id", str(k + 1))
    sname = f"{name}#{sent_id}"
    words = [t for t in tokens if isinstance(t["id"], int)]
    n = len(words)
    if n == 0:
        raise StructureError("sentence has no words", name=sname)
    ids = np.array([t["id"] for t in words], dtype=np.int64)
    if not np.array_equal(ids, np.arange(1, n + 1)):
        w = int(np.flatnonzero(ids != np.arange(1, n + 1))[0])
        raise StructureError(f"word ids must run 1..{n}, found {ids[w]} at position {w + 1}", name=sname, position=f"word {ids[w]}")
    for t in tokens:
        missing = [f for f in ("form", "upos", "head", "deprel") if f not in t]
        if missing:
            raise StructureError(f"token {t['id']} lacks the column(s) {', '.join(missing)}", name=sname, position=f"token {t['id']}")
    raw_heads = []
    for t in words:
        h = t["head"]
        if not isinstance(h, int):
            raise StructureError(f"word {t['id']} ({t['form']!r}) has no integer HEAD ({h!r})", name=sname, position=f"word {t['id']}")
        raw_heads.append(h)
    heads = np.array(raw_heads, dtype=np.int64)
    order, parent = heads_to_preorder(
        heads - 1, name=sname, word_name=lambda w: f"word {w + 1} ({words[w]['form']!r})" if 0 <= w < n else f"word {w + 1}"
    )
    source = tokens.metadata.get("text")
    synthesized = source is None
    if synthesized:
        source = sentence_text(tokens)
    start, end = _word_spans(tokens, source, n, sname)
    labels = [words[w]["deprel"] or "_" for w in order]
    obj = lambda xs: np.array(xs + [None], dtype=object)[:-1]  # noqa: E731 - 1-D object array
    return Structure(
        kind="tree",
        labels=labels,
        start=start[order],
        end=end[order],
        parent=parent,
        source=source,
        name=sname,
        attrs={
            "token_index": ids[order],
            "head": heads[order],
            "upos": obj([words[w]["upos"] for w in order]),
            "form": obj([words[w]["form"] for w in order]),
        },
        format="conllu",
        nested_spans=False,
        sentence=SentenceInfo(sent_id, k, text_synthesized=synthesized, comments=dict(tokens.metadata)),
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
                f"token {tid} {form!r} does not match the sentence text at offset {pos} ({text[pos:pos + len(form) + 5]!r})",
                name=sname, position=f"token {tid}",
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
        raise StructureError(f"sentence text continues after the last token: {text[pos:pos + 20]!r}", name=sname, position=f"offset {pos}")
    return start, end
