"""Any lark grammar → preorder parse tree with character spans.

``parse_grammar(text, grammar)`` parses ``text`` with a user grammar (grammar source text,
or a ready ``lark.Lark``). Rule nodes are labelled with the rule name (``Tree.data``);
tokens kept in the tree become leaf nodes labelled with their terminal type (``NUMBER``,
``NAME``, anonymous ones like ``PLUS``), attribute ``is_token`` marks them. Spans are
lark's character offsets: ``meta.start_pos/end_pos`` for rules (the grammar is compiled
with ``propagate_positions=True``), ``start_pos/end_pos`` for tokens; with a ``Lark``
compiled without positions, rule spans are the hull of their tokens. A rule that matched
nothing (an empty input, an empty optional rule) spans the empty string where it matched:
``(p, p)``, ``p`` the end of the last token before it (0 when none, so the root of an empty
input spans ``(0, 0)``), within its parent's span. LALR is the default (fast); use ``parser="earley"`` for
ambiguous grammars. Compiled grammars are cached per (grammar, start, parser).

Time limit: Earley is cubic in the input on ambiguous grammars (a 1 KB input of a grammar like
``s: s s | "a"`` runs for minutes), so with ``limits.record_timeout`` set (the default) an
Earley parse runs in a helper process killed at the deadline
(:func:`~structpos.parsers._guard.call_guarded`). LALR parses are linear and run here, token
by token (lark's interactive parser), checking the clock every few hundred tokens, so a large
input stops at ``record_timeout`` too (a single token whose regex runs long is not interrupted).
"""

from __future__ import annotations

import itertools
import time
import weakref
from collections import OrderedDict
from functools import lru_cache

from .._optional import require
from ..exceptions import ParseError, SpecError
from ..limits import Deadline, Limits, node_budget, resolve_limits
from ..node_attrs import IS_TOKEN
from ..structure import Structure, StructureError
from ._guard import StaleHelper, call_guarded, can_fork
from ._input import read_text
from ._tree_builder import TreeBuilder

__all__ = ["parse_grammar"]


@lru_cache(maxsize=32)
def _compile(grammar: str, start: str, parser: str):
    lark = require("lark", "text", "parse_grammar")
    return lark.Lark(grammar, start=start, parser=parser, propagate_positions=True)


def parse_grammar(
    text: str,
    grammar,
    start: str = "start",
    parser: str = "lalr",
    name: str | None = None,
    *,
    limits: Limits | None = None,
    default_encoding: str | None = None,
) -> Structure:
    """Parse ``text`` with a lark ``grammar`` into a ``kind="tree"`` Structure (see module docstring).

    Parameters
    ----------
    text : str, bytes or os.PathLike
        The input, its bytes or a file (UTF-8 unless a byte-order mark says otherwise).
    grammar : str or lark.Lark
        Grammar source text (compiled once and cached), or a compiled ``lark.Lark``.
    start : str
        The start rule (grammar text only).
    parser : {"lalr", "earley"}
        lark's parser (grammar text only); ``"earley"`` for ambiguous grammars.
    name : str, optional
        The input's name in error messages (default: the path, else ``"<grammar input>"``).
    limits : Limits, optional
        ``max_input_bytes`` and ``max_nodes`` apply; a parse stops at ``record_timeout`` (Earley:
        its helper process is killed; LALR: checked every ``CHECK_EVERY`` tokens).
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    Structure
        Rule nodes labelled by rule name, kept tokens as leaves labelled by terminal type
        (``attrs["is_token"]``), in preorder with character spans.

    Raises
    ------
    ParseError
        Input the grammar rejects (naming ``line:col`` and the expected terminals), a
        grammar that does not compile or ``%import`` s a grammar that cannot be read (named
        ``<grammar>``), bytes that do not decode.
    SpecError
        ``parser`` is neither ``"lalr"`` nor ``"earley"``.
    LimitError
        ``max_input_bytes``, ``max_nodes`` or ``record_timeout`` exceeded.

    Examples
    --------
    >>> g = 'start: NUMBER ("+" NUMBER)*\\n%import common.NUMBER\\n%ignore " "'
    >>> s = parse_grammar("1 + 22", g)
    >>> [(str(l), s.node_text(i)) for i, l in enumerate(s.labels)]
    [('start', '1 + 22'), ('NUMBER', '1'), ('NUMBER', '22')]
    >>> s.parent.tolist(), s.attrs["is_token"].tolist()
    ([-1, 0, 0], [False, True, True])
    >>> parse_grammar("1 ? 2", g)
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: <grammar input> at line:col 1:3: no terminal matches '?'; expected one of PLUS
    """
    lark = require("lark", "text", "parse_grammar")
    if parser not in ("lalr", "earley"):
        raise SpecError(f"parser must be 'lalr' or 'earley', not {parser!r}")
    text, name = read_text(text, name=name, default="<grammar input>", limits=limits, default_encoding=default_encoding)
    compiled = grammar if isinstance(grammar, lark.Lark) else _compile_checked(grammar, start, parser, lark)
    timeout = resolve_limits(limits).record_timeout
    if timeout is not None and compiled.options.parser == "earley" and can_fork():
        args = (_lark_key(compiled), text, name, node_budget(limits))
        deadline = time.monotonic() + timeout
        return call_guarded(_helper_parse, args, deadline, what="lark Earley parse", timeout=timeout, name=name)
    timed = Deadline(timeout, "lark LALR parse still running", name) if compiled.options.parser == "lalr" else None
    return _parse(compiled, text, name, node_budget(limits), timed)


def _compile_checked(grammar: str, start: str, parser: str, lark):
    """The cached compiled grammar; a grammar lark rejects as a ParseError."""
    try:
        return _compile(grammar, start, parser)
    except lark.exceptions.LarkError as e:  # GrammarError, or grammar text that does not parse
        raise StructureError(f"bad grammar: {e}", name="<grammar>") from None
    except OSError as e:  # an %import of a grammar file lark cannot find or read
        what = f"{e.strerror}: {e.filename}" if e.strerror and e.filename else str(e)
        raise StructureError(f"bad grammar: an %import cannot be read ({what})", name="<grammar>") from None


_LARKS: OrderedDict[int, object] = OrderedDict()
"""The latest compiled grammars that went to a helper, by serial number (a helper forked later finds them)."""
_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SERIALS = itertools.count()


def _lark_key(compiled) -> int:
    """A serial number for ``compiled`` (never reused, unlike ``id``), kept for the next helpers."""
    key = _KEYS.setdefault(compiled, next(_SERIALS))
    _LARKS[key] = compiled
    _LARKS.move_to_end(key)
    while len(_LARKS) > 32:
        _LARKS.popitem(last=False)
    return key


def _helper_parse(key: int, text: str, name: str, max_nodes: int) -> Structure:
    """In a helper process: the parse, from the grammar the parent registered before the fork."""
    if key not in _LARKS:  # compiled after this helper started
        raise StaleHelper(key)
    return _parse(_LARKS[key], text, name, max_nodes)


CHECK_EVERY = 256
"""Tokens between two looks at the clock in a timed LALR parse."""


def _lalr_timed(compiled, text: str, deadline: Deadline):
    """``compiled.parse(text)`` for an LALR grammar, token by token, raising ``deadline``'s
    :class:`~structpos.exceptions.LimitError` (at the token reached) once it has passed."""
    parser = compiled.parse_interactive(text)
    last = None
    for i, token in enumerate(parser.iter_parse()):
        last = token
        if i % CHECK_EVERY == 0 and deadline.passed():
            raise deadline.error(position=f"line:col {token.line}:{token.column}")
    return parser.feed_eof(last)


def _parse(compiled, text: str, name: str, max_nodes: int, deadline: Deadline | None = None) -> Structure:
    """``compiled.parse(text)`` as a Structure; lark's errors as structpos's, naming ``line:col``.

    With a ``deadline`` (an LALR grammar under ``record_timeout``) the parse checks the clock as it goes.
    """
    lark = require("lark", "text", "parse_grammar")
    try:
        tree = (
            compiled.parse(text)
            if deadline is None or deadline.timeout is None
            else _lalr_timed(compiled, text, deadline)
        )
    except RecursionError:
        raise ParseError("input nested too deeply for lark's parser", name=name) from None
    except lark.exceptions.UnexpectedInput as e:
        line, col = getattr(e, "line", -1), getattr(e, "column", -1)
        at_end = isinstance(e, lark.exceptions.UnexpectedEOF) or (
            isinstance(e, lark.exceptions.UnexpectedToken) and e.token.type == "$END"
        )
        if at_end or line is None or line < 0:  # report the end of the input itself
            lines = text.split("\n")
            line, col = len(lines), len(lines[-1]) + 1
        raise StructureError(_describe(e, lark.exceptions), name=name, position=f"line:col {line}:{col}") from None
    except lark.exceptions.LarkError as e:  # e.g. an Earley ambiguity lark cannot resolve
        raise ParseError(f"{type(e).__name__}: {e}", name=name) from None
    return _to_structure(tree, text, name, lark.Token, max_nodes)


def _describe(e, exc) -> str:
    expected = sorted(getattr(e, "expected", None) or getattr(e, "allowed", None) or [])
    want = f"; expected one of {', '.join(expected[:8])}{' ...' if len(expected) > 8 else ''}" if expected else ""
    if isinstance(e, exc.UnexpectedCharacters):
        return f"no terminal matches {e.char!r}{want}"
    if isinstance(e, exc.UnexpectedEOF):
        return f"unexpected end of input{want}"
    if isinstance(e, exc.UnexpectedToken):
        if e.token.type == "$END":
            return f"unexpected end of input{want}"
        return f"unexpected token {e.token.type} {str(e.token)!r}{want}"
    return type(e).__name__


def _to_structure(tree, text: str, name: str, Token, max_nodes: int) -> Structure:
    b = TreeBuilder({IS_TOKEN: (False, bool)}, max_nodes=max_nodes, name=name)
    stack = [(tree, -1)]
    before: dict[int, int] = {}  # rule without a span -> end of the last token before it
    last_end = 0
    while stack:
        node, parent = stack.pop()
        if isinstance(node, Token):
            b.add(str(node.type), parent, node.start_pos, node.end_pos, is_token=True)
            last_end = node.end_pos
            continue
        if not hasattr(node, "data"):  # None placeholders (maybe_placeholders) and plain values
            continue
        meta = node.meta
        if getattr(meta, "empty", True):
            s = e = -1
        else:
            s, e = meta.start_pos, meta.end_pos
        i = b.add(str(node.data), parent, s, e)
        if s < 0:
            before[i] = last_end
        stack.extend((c, i) for c in reversed(node.children))
    _fill_rule_spans(b)
    _place_empty_rules(b, before)
    return b.build("tree", text, name, format="grammar")


def _place_empty_rules(b: TreeBuilder, before: dict[int, int]) -> None:
    """A rule that matched nothing spans the empty string where it matched.

    That is ``(p, p)`` with ``p`` the end of the last token before it in the input (0 when none:
    the root of an empty input spans ``(0, 0)``), moved into its parent's span so that spans
    stay nested. Preorder: a parent is placed before its children.
    """
    for i in sorted(before):
        if b.start[i] >= 0:  # spanned by its tokens (a Lark without positions)
            continue
        p = before[i]
        parent = b.parent[i]
        if parent >= 0:
            p = min(max(p, b.start[parent]), b.end[parent])
        b.start[i] = b.end[i] = p


def _fill_rule_spans(b: TreeBuilder) -> None:
    """Rules without positions (a ``Lark`` built without ``propagate_positions``) span their tokens."""
    missing = [i for i in range(len(b)) if b.start[i] < 0]
    if not missing:
        return
    lo = {i: -1 for i in missing}
    hi = {i: -1 for i in missing}
    for i in range(len(b) - 1, -1, -1):  # children before parents
        s, e = (lo[i], hi[i]) if i in lo else (b.start[i], b.end[i])
        if i in lo:
            b.start[i], b.end[i] = s, e
        p = b.parent[i]
        if s >= 0 and p in lo:
            lo[p] = s if lo[p] < 0 else min(lo[p], s)
            hi[p] = max(hi[p], e)
