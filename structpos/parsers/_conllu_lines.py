"""A reader for plain CoNLL-U that gives the token columns ``conllu.parse`` gives, or declines.

:func:`parse_conllu <structpos.parsers.conllu_tree.parse_conllu>` reads six columns of each
token (ID, FORM, UPOS, HEAD, DEPREL and, for sentences without ``# text``, MISC) and each
sentence's comments. ``conllu.parse`` parses all ten columns of every line (regular
expressions, FEATS/MISC/DEPS dictionaries); this reader parses what is read, with
``conllu``'s own rules:

* sentences are separated by lines that are blank after ``str.strip()``;
* a comment ``# key = value`` (stripped, split at the first ``=``) sets ``metadata[key]``;
  one without a key or a value is dropped, except ``newdoc`` / ``newpar``, kept with the
  value ``None``;
* ID: ``0`` or a number without a leading zero is an ``int``; ranges ``a-b`` and decimals ``a.b``
  are ``conllu``'s tuples (through its own ``parse_id_value``);
* FORM, UPOS and DEPREL are the column strings as written (``_`` included); HEAD ``_`` is
  ``None``, a number is an ``int``; MISC is ``conllu``'s dictionary.

It declines (returns ``None``, and the caller runs ``conllu.parse``) on anything else: a token
line that is not exactly ten tab-separated columns or that contains two spaces in a row
(``conllu`` also splits at those), a non-blank line starting with whitespace, a ``#
global.columns`` header, an ID or HEAD outside the forms above, a DEPS column ``conllu``
would refuse, a sentence of comments only. So on every input it returns either what
``conllu.parse`` returns for the columns read, or ``None``.

Examples
--------
>>> text = "# sent_id = s1\\n# text = Hi!\\n1\\tHi\\thi\\tINTJ\\t_\\t_\\t0\\troot\\t_\\tSpaceAfter=No\\n2\\t!\\t!\\tPUNCT\\t_\\t_\\t1\\tpunct\\t_\\t_\\n"
>>> [s] = read_sentences(text)
>>> s.metadata, [(t["id"], t["form"], t["head"], t["deprel"]) for t in s]
({'sent_id': 's1', 'text': 'Hi!'}, [(1, 'Hi', 0, 'root'), (2, '!', 1, 'punct')])
>>> read_sentences("1  Hi  hi  INTJ  _  _  0  root  _  _\\n") is None  # columns split by spaces
True
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["read_sentences", "TokenRows", "conllu_sentences"]

_NULLABLE_METADATA = ("newdoc", "newpar")


class TokenRows(list):
    """One sentence: a list of token dicts (the keys :func:`read_sentences` fills) with ``metadata``."""

    def __init__(self, tokens: list[dict[str, Any]], metadata: dict[str, str | None]):
        super().__init__(tokens)
        self.metadata = metadata


def _plain_int(s: str) -> bool:
    """``s`` is ``0`` or an ASCII number without a leading zero (``conllu``'s ``int`` IDs and HEADs), of at
    most 18 digits (longer ones are left to ``conllu``, whose ``int()`` may refuse them past 4,300 digits)."""
    return len(s) <= 18 and s.isascii() and s.isdigit() and (s[0] != "0" or s == "0")


def _comment(line: str, metadata: dict[str, str | None]) -> None:
    """Add the comment ``line`` (stripped, starting with ``#``) to ``metadata`` as ``conllu`` does."""
    key, eq, value = line[1:].partition("=")
    key = key.strip()
    val = value.strip() if eq else None
    if key in _NULLABLE_METADATA or (key and val):
        metadata[key] = val


def _token(line: str, parse_id, parse_deps) -> dict[str, Any] | None:
    """The columns of the token line ``line`` (stripped), or ``None`` to decline."""
    cols = line.split("\t")
    if len(cols) != 10 or "  " in line:
        return None
    tid: Any = cols[0]
    if _plain_int(tid):
        tid = int(tid)
    else:
        try:
            tid = parse_id(tid)
        except Exception:  # conllu's ParseException: left to conllu.parse for its message
            return None
        if tid is None:
            return None
    head: Any = cols[6]
    if _plain_int(head):
        head = int(head)
    elif head == "_":
        head = None
    else:
        return None
    if "-" in cols[8]:  # a range id inside DEPS can be refused by conllu
        try:
            parse_deps(cols[8])
        except Exception:
            return None
    return {"id": tid, "form": cols[1], "upos": cols[3], "head": head, "deprel": cols[7], "misc": cols[9]}


def read_sentences(text: str) -> list[TokenRows] | None:
    """The sentences of ``text`` as ``conllu.parse`` reads them (for the columns read), or ``None``.

    Parameters
    ----------
    text : str
        CoNLL-U text.

    Returns
    -------
    list of TokenRows or None
        One list of token dicts (keys ``id``, ``form``, ``upos``, ``head``, ``deprel``,
        ``misc``) per sentence, its comments in ``metadata``; ``None`` where this reader declines
        (the module docstring lists when).

    Examples
    --------
    >>> rows = read_sentences("1-2\\tdon't\\t_\\t_\\t_\\t_\\t_\\t_\\t_\\t_\\n1\\tdo\\tdo\\tAUX\\t_\\t_\\t0\\troot\\t_\\t_\\n")
    >>> [t["id"] for t in rows[0]], rows[0][0]["head"], rows[0].metadata
    ([(1, '-', 2), 1], None, {})
    """
    if "global.columns" in text:
        return None
    from conllu.parser import parse_dict_value, parse_id_value, parse_paired_list_value

    out: list[TokenRows] = []
    tokens: list[dict[str, Any]] = []
    metadata: dict[str, str | None] = {}
    block = False  # inside a sentence block (a non-blank line seen since the last blank one)
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            if block:
                if not tokens:
                    return None
                out.append(_finish(tokens, metadata, parse_dict_value))
                tokens, metadata, block = [], {}, False
            continue
        if raw[0] != line[0]:  # leading whitespace: conllu reads such lines by other rules
            return None
        block = True
        if line[0] == "#":
            _comment(line, metadata)
            continue
        tok = _token(line, parse_id_value, parse_paired_list_value)
        if tok is None:
            return None
        tokens.append(tok)
    if block:
        if not tokens:
            return None
        out.append(_finish(tokens, metadata, parse_dict_value))
    return out


def _finish(tokens: list[dict[str, Any]], metadata: dict[str, str | None], parse_misc) -> TokenRows:
    """The sentence; MISC becomes ``conllu``'s dictionary where it is read (no ``# text``)."""
    if "text" in metadata:
        for t in tokens:
            del t["misc"]
    else:
        for t in tokens:
            t["misc"] = parse_misc(t["misc"])
    return TokenRows(tokens, metadata)


def conllu_sentences(text: str) -> Iterator[tuple[str, int, str]]:
    """Split CoNLL-U text into sentences: ``(sent_id, first line number, block text)``.

    A sentence is a maximal run of non-blank lines; its id is the ``# sent_id = ...`` comment
    or, lacking one, ``s<k>`` with ``k`` its 1-based ordinal in the file.

    Parameters
    ----------
    text : str
        CoNLL-U text.

    Yields
    ------
    tuple of (str, int, str)
        The sentence id, the 1-based line number of its first line, and its lines.

    Examples
    --------
    >>> text = "# sent_id = a\\n1\\tHi\\n\\n\\n1\\tYo\\n"
    >>> [(sid, line) for sid, line, _ in conllu_sentences(text)]
    [('a', 1), ('s2', 5)]
    """
    lines = text.splitlines(keepends=True)
    k = 0
    i = 0
    n = len(lines)
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        j = i
        sent_id = None
        while j < n and lines[j].strip():
            if sent_id is None and lines[j].startswith("#"):
                key, sep, val = lines[j][1:].partition("=")
                if sep and key.strip() == "sent_id":
                    sent_id = val.strip()
            j += 1
        k += 1
        yield (sent_id or f"s{k}"), i + 1, "".join(lines[i:j])
        i = j
