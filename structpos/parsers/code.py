"""Source code -> :class:`~structpos.Structure` through tree-sitter (kind ``"tree"``).

Every node the tree-sitter cursor visits (named and anonymous) becomes one IR node, in
preorder (``parent[i] < i``; siblings in source order). Labels are node types
(``"function_definition"``, ``"("``, ``"ERROR"``...). Spans are **character** offsets into
the decoded source: tree-sitter's UTF-8 byte offsets go through
:class:`~structpos.parsers._offsets.ByteToChar`. A node's span excludes leading whitespace
but may include hidden tokens (e.g. Python's newline / dedent).

Per-node attrs: ``is_named`` (bool), ``is_error`` (bool: an ``ERROR`` node or a zero-width
``MISSING`` node inserted by error recovery) and, with ``fields=True``, ``field`` (the
field name under which the node hangs from its tree-sitter parent, ``""`` if none). Syntax
errors never raise: ``structure.code.has_error`` says whether any occurred. With ``named_only`` a
dropped anonymous ``MISSING`` token takes its flag with it (``has_error`` still says so).

There is no default language: ``language=`` names it, or the suffix of a path (or of
``name``) does (:data:`SUFFIXES`). Bytes and files are decoded by their byte-order mark, else
for Python by a PEP 263 coding line (one naming an unknown codec is ignored; one naming a codec
that is not a text encoding, ``rot13`` or ``hex``, is a ParseError naming its line), else as
UTF-8 (spans index the decoded text), by :func:`~structpos.parsers._input.decode_input`, which
``structpos encode`` uses too.

Grammars come from per-language wheels (``tree-sitter-python``, ...): languages
``python, javascript, java, go, rust, c, cpp`` are known by name (plus any installed
``tree_sitter_<name>`` module exposing ``language()``), or pass a ``tree_sitter.Language``.
Language and Parser objects are cached (parsers per thread).

Speed: where ``structpos._native_code`` was built (``native/code.c``, with the tree-sitter 0.26.1
runtime vendored under ``native/vendor/tree_sitter``), the parse and the preorder walk run in C
without the GIL on the grammar wheel's ``language()`` capsule (:func:`_native_columns`; its ABI
version is checked, and a Language not made by :func:`get_language` takes the pure path); the
runtime allocates from a per-call arena (``native/arena.h``), so the parse costs ~1.05x
py-tree-sitter's (which allocates through pymalloc, holding the GIL), and the walk adds ~0.1x.
Otherwise (or under :func:`structpos.native.pure_python`) one ``TreeCursor`` walk (:func:`_walk`,
shared by full and ``named_only`` trees, with fields and ``MISSING`` flags in the same pass)
collects kind ids and byte offsets into Python lists, then ``np.fromiter``; that walk costs ~0.7x
the bare parse (six binding calls per node). Both give the same columns; kind ids map to labels
and named-ness through per-language tables. ``benchmarks/bench_parse.py`` measures the whole
path, both ways.

Time limit: with ``limits.record_timeout`` set (the default), the parse and the walk run in a
helper process (:mod:`structpos.parsers._guard`, a ``fork`` kept for the next parses) that is
killed at the deadline, because tree-sitter can spend unbounded time without calling its
progress callback (error recovery at the end of the input, see :func:`_parse_timed`); the
input and the columns cross through a memory area shared with the helper, the pipe carries only
a small message each way. With ``record_timeout=None``, or without ``fork``, everything runs in
this process.
"""

from __future__ import annotations

import contextlib
import math
import struct
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..exceptions import ParseError, SpecError
from ..limits import Deadline, Limits, check_limit, resolve_limits
from ..native import native_module, pure_python
from ..node_attrs import FIELD, IS_ERROR, IS_NAMED
from ..structure import CodeInfo, Structure, StructureError
from ._guard import StaleHelper, call_guarded, call_guarded_raw, can_fork
from ._input import check_text, decode_as_utf8, is_pathlike, read_bytes, wrong_type
from ._offsets import ByteToChar

__all__ = ["parse_code", "get_language", "language_for_path", "LANGUAGES", "SUFFIXES"]

# canonical name -> importable wheel module (tree_sitter_<name>.language())
LANGUAGES: dict[str, str] = {
    "python": "tree_sitter_python",
    "javascript": "tree_sitter_javascript",
    "java": "tree_sitter_java",
    "go": "tree_sitter_go",
    "rust": "tree_sitter_rust",
    "c": "tree_sitter_c",
    "cpp": "tree_sitter_cpp",
}
ALIASES: dict[str, str] = {"py": "python", "js": "javascript", "rs": "rust", "c++": "cpp", "cxx": "cpp", "golang": "go"}
SUFFIXES: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".java": "java", ".go": "go", ".rs": "rust",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".h++": "cpp",
}  # fmt: skip


def _canonical(name: str) -> str:
    name = name.strip().lower().replace("-", "_")
    return ALIASES.get(name, name)


def get_language(name: str):
    """The cached ``tree_sitter.Language`` for a language name (``"python"``, ``"cpp"``, ...).

    Parameters
    ----------
    name : str
        A name of :data:`LANGUAGES`, an alias (``"py"``, ``"js"``, ``"c++"``; any case), or
        ``<name>`` of an installed ``tree_sitter_<name>`` wheel.

    Returns
    -------
    tree_sitter.Language
        The same object for every spelling of a language.

    Raises
    ------
    SpecError
        ``name`` cannot name a module (``"c#"``).
    ImportError
        The language's grammar wheel is not installed (the message names the pip package).

    Examples
    --------
    >>> lang = get_language("Py")
    >>> lang is get_language("python"), lang.name
    (True, 'python')
    >>> get_language("c#")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: bad language name 'c#'
    """
    canon = _canonical(name)
    if not canon.isidentifier():
        raise SpecError(f"bad language name {name!r}")
    return _language(canon)


@lru_cache(maxsize=None)
def _language(canon: str):
    ts = _tree_sitter()
    module = LANGUAGES.get(canon, f"tree_sitter_{canon}")
    pip_name = module.replace("_", "-")
    try:
        mod = __import__(module)
    except ImportError as e:
        raise ImportError(
            f"parsing {canon!r} code needs the grammar wheel {module!r}: pip install {pip_name} "
            f"(the seven built-in languages come with pip install 'structpos[code]')"
        ) from e
    fn = getattr(mod, "language", None)
    if fn is None:
        raise ImportError(f"{module} has no language() function; pass a tree_sitter.Language instead")
    capsule = fn()
    lang = ts.Language(capsule)
    _capsules[id(lang)] = (lang, capsule, None)  # the native path parses with the wheel's capsule
    return lang


def _tree_sitter():
    from .._optional import require

    return require("tree_sitter", "code", "parsing code")


def language_for_path(path: str | Path) -> str:
    """The language a file suffix names (``.py`` -> ``"python"``), by :data:`SUFFIXES`.

    Parameters
    ----------
    path : str or pathlib.Path
        A file name; only its suffix (any case) is read.

    Returns
    -------
    str
        A canonical language name (a key of :data:`LANGUAGES`).

    Raises
    ------
    ParseError
        The suffix names no known language (the message lists the known suffixes).

    Examples
    --------
    >>> language_for_path("src/vec.HPP"), language_for_path("main.rs")
    ('cpp', 'rust')
    >>> language_for_path("notes.txt")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: notes.txt: cannot guess the language from suffix '.txt'; pass language=... (known: ...)
    """
    suffix = Path(path).suffix.lower()
    try:
        return SUFFIXES[suffix]
    except KeyError:
        raise StructureError(
            f"cannot guess the language from suffix {suffix!r}; pass language=... (known: {', '.join(sorted(SUFFIXES))})",
            name=str(path),
        ) from None


class _KindTables:
    """Per-language lookup tables indexed by kind id: labels and named-ness."""

    def __init__(self, language):
        count = language.node_kind_count
        labels = [language.node_kind_for_id(i) or "" for i in range(count)]
        named = [bool(language.node_kind_is_named(i)) for i in range(count)]
        # the ERROR symbol's id (0xFFFF, ts_builtin_sym_error) lies past the table: one extra slot
        self.error_slot = count
        self.labels = np.array(labels + ["ERROR"], dtype=object)
        self.named = np.array(named + [True], dtype=bool)
        self.keep_named = _keep_table(named)


_tables: dict[int, tuple[Any, _KindTables]] = {}
_local = threading.local()
# id(Language) -> (Language, its wheel's language() capsule, whether the native runtime can parse it: None = unchecked)
_capsules: dict[int, tuple[Any, Any, bool | None]] = {}


def _kind_tables(language) -> _KindTables:
    key = id(language)
    hit = _tables.get(key)
    if hit is None or hit[0] is not language:
        hit = (language, _KindTables(language))
        _tables[key] = hit
    return hit[1]


def _parser_for(language):
    """A per-thread cached ``tree_sitter.Parser`` for ``language`` (parsers are not thread-safe)."""
    cache = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    hit = cache.get(id(language))
    if hit is None or hit[0] is not language:
        hit = (language, _tree_sitter().Parser(language))
        cache[id(language)] = hit
    return hit[1]


# ------------------------------------------------------------------ the walk
def _keep_table(named: list[bool]) -> list[bool]:
    """``keep[kind id]``: True for named kinds (and ERROR, id 0xFFFF, past the language's table)."""
    return named + [True] * (65536 - len(named))


def _walk(tree, keep: list[bool] | None, fields: bool, missing: bool):
    """The one preorder cursor walk: columns of the kept nodes.

    Returns ``(kind ids, start bytes, end bytes, parents, field ids, is_missing)`` over the
    nodes whose ``keep[kind_id]`` is set (every node when ``keep`` is None), in preorder; a dropped
    node's children hang from
    its nearest kept ancestor. ``field ids`` (0: none) and ``is_missing`` are filled only
    when asked (else empty). ``top`` is the parent of the node under the cursor: descending
    pushes it, ascending pops it. The cursor methods are bound once (six binding calls per
    node is the whole cost; see the module docstring).
    """
    cur = tree.walk()
    kinds: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    parents: list[int] = []
    field_ids: list[int] = []
    flags: list[bool] = []
    add_kind, add_start, add_end, add_parent = kinds.append, starts.append, ends.append, parents.append
    first_child, next_sibling, go_up = cur.goto_first_child, cur.goto_next_sibling, cur.goto_parent
    stack: list[int] = []
    push, pop = stack.append, stack.pop
    extra = fields or missing
    i = 0
    top = -1
    while True:
        node = cur.node
        kid = node.kind_id
        if keep is None or keep[kid]:
            add_kind(kid)
            add_start(node.start_byte)
            add_end(node.end_byte)
            add_parent(top)
            if extra:
                if fields:
                    field_ids.append(cur.field_id or 0)
                if missing:
                    flags.append(node.is_missing)
            if first_child():
                push(top)
                top = i
                i += 1
                continue
            i += 1
        elif first_child():  # a dropped node: its children hang from its kept ancestor
            push(top)
            continue
        while not next_sibling():
            if not go_up():
                return kinds, starts, ends, parents, field_ids, flags
            top = pop()


# ------------------------------------------------------------------ entry
def _language_of(language, source, name: str | None):
    """The language argument, else the one the path's (or the name's) suffix names; never a silent default."""
    if language is not None:
        return language
    for where in (source if is_pathlike(source) else None, name):
        if where is not None and Path(where).suffix.lower() in SUFFIXES:
            return SUFFIXES[Path(where).suffix.lower()]
    if is_pathlike(source):
        return language_for_path(source)  # raises, naming the suffix
    raise SpecError(
        f"no language given: pass language=... ({', '.join(LANGUAGES)}, or a tree_sitter.Language), "
        "or a path / name whose suffix names one",
        name=name or "<code>",
    )


def _read_source(
    source, name: str | None, lang_name: str, limits: Limits | None, default_encoding: str | None = None
) -> tuple[str, bytes, str]:
    """Normalise ``source`` to (text, UTF-8 bytes, name)."""
    if is_pathlike(source):
        name = name or str(source)
        source = read_bytes(source, name, limits)
    name = name or "<code>"
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        check_limit(len(data), resolve_limits(limits).max_input_bytes, "max_input_bytes", "bytes of input", name=name)
        text, data = decode_as_utf8(data, name, "code", lang_name, default_encoding)  # tree-sitter reads UTF-8
        return text, data, name
    if isinstance(source, str):
        text = check_text(source, name, limits)
        return text, text.encode("utf-8"), name
    raise wrong_type(source, name)


def _ints(values: list[int]) -> np.ndarray:
    """A list of Python ints as int64 (``fromiter`` skips ``np.array``'s type discovery)."""
    return np.fromiter(values, dtype=np.int64, count=len(values))


def _resolve_language(language) -> tuple[Any, str]:
    """(tree_sitter.Language, canonical name) for a name or a user Language."""
    if isinstance(language, str):
        lang_name = _canonical(language)
        return get_language(lang_name), lang_name
    ts = _tree_sitter()
    if not isinstance(language, ts.Language):
        raise TypeError(f"language must be a name or a tree_sitter.Language, not {type(language).__name__}")
    return language, getattr(language, "name", None) or "custom"


class _Columns(NamedTuple):
    """What a parse leaves for :func:`_build`: the walk's columns as arrays, and the tree's error flag and size."""

    has_error: bool
    nodes: int  # every node of the tree (named_only keeps fewer)
    kinds: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    parents: np.ndarray
    field_ids: np.ndarray
    missing: np.ndarray


def _native_capsule(lang):
    """``(structpos._native_code, capsule)`` when the compiled parse can take ``lang``, else ``None``.

    It can for a Language made by :func:`get_language` whose capsule's ABI version the vendored
    runtime supports and whose pointer is the Language's own (``hash(Language)`` is its pointer
    in py-tree-sitter); other Languages take the pure path.
    """
    mod = native_module("code")
    if mod is None:
        return None
    hit = _capsules.get(id(lang))
    if hit is None or hit[0] is not lang:
        return None
    ok = hit[2]
    if ok is None:
        try:
            pointer, _abi, supported = mod.language_info(hit[1])
        except (TypeError, ValueError):
            pointer, supported = None, False
        ok = bool(supported) and pointer == hash(lang)
        _capsules[id(lang)] = (lang, hit[1], ok)
    return (mod, hit[1]) if ok else None


def _native_columns(native, data: bytes, named_only: bool, fields: bool, max_nodes, timeout, name: str) -> _Columns:
    """:func:`_parse_timed` + :func:`_tree_columns` in C (``native = (module, capsule)``): the same columns.

    With ``timeout``, tree-sitter's progress callback cancels the parse at the deadline as in
    :func:`_parse_timed` (LimitError ``record_timeout``).
    """
    mod, capsule = native
    deadline = Deadline(timeout, "tree-sitter parse still running", name) if timeout is not None else None
    micros = -1 if timeout is None else math.ceil(timeout * 1e6)  # ends at or after ``deadline``
    out = mod.parse_walk(capsule, data, named_only, fields, _node_limit(max_nodes), micros)
    if out is None:  # cancelled at the deadline
        if deadline is not None:
            deadline.check()
        raise ParseError("tree-sitter returned no tree", name=name)
    has_error, count, *walk = out
    return _walk_columns(has_error, count, None if walk[0] is None else walk, max_nodes, name)


def _node_limit(max_nodes: int | None) -> int:
    """``max_nodes`` as the compiled walk takes it (``-1``: none)."""
    return -1 if max_nodes is None else min(int(max_nodes), 1 << 62)


def _walk_columns(has_error, count: int, walk, max_nodes: int | None, name: str) -> _Columns:
    """:class:`_Columns` on the compiled walk's buffers (five of int64, the MISSING flags as bytes), or
    the ``max_nodes`` LimitError when the tree was too large to walk (``walk`` is ``None``)."""
    if walk is None:
        check_limit(count, max_nodes, "max_nodes", "nodes", name=name)
    kinds, starts, ends, parents, field_ids, missing = walk
    i8 = np.int64
    return _Columns(
        bool(has_error),
        count,
        np.frombuffer(kinds, dtype=i8),
        np.frombuffer(starts, dtype=i8),
        np.frombuffer(ends, dtype=i8),
        np.frombuffer(parents, dtype=i8),
        np.frombuffer(field_ids, dtype=i8),
        np.frombuffer(missing, dtype=np.bool_),
    )


_WALK_CALL = struct.Struct("<qq??")  # the Language's key in _capsules, max_nodes (-1: none), named_only, fields
_WALK_REPLY = struct.Struct("<?q?")  # has_error, nodes, walked


def _guarded_native_columns(
    lang, data: bytes, named_only: bool, fields: bool, max_nodes: int | None, timeout: float, name: str
) -> _Columns:
    """:func:`_native_columns` in a helper process killed at the deadline (:func:`_serve_walk`); the
    input and the walk's buffers cross the helper's shared arena, nothing is pickled."""
    request = _WALK_CALL.pack(id(lang), _node_limit(max_nodes), named_only, fields)
    deadline = time.monotonic() + timeout
    reply, walk = call_guarded_raw(
        _serve_walk, request, data, deadline, what="tree-sitter parse", timeout=timeout, name=name
    )
    has_error, count, walked = _WALK_REPLY.unpack(reply)
    return _walk_columns(has_error, count, walk if walked else None, max_nodes, name)


def _serve_walk(request: bytes, data: memoryview) -> tuple[bytes, list]:
    """In a helper process (:func:`~structpos.parsers._guard.call_guarded_raw`): the compiled parse and
    walk of ``data`` without a timeout (the parent kills at the deadline)."""
    key, max_nodes, named_only, fields = _WALK_CALL.unpack(request)
    hit = _capsules.get(key)
    native = None if hit is None else _native_capsule(hit[0])
    if native is None:  # a Language created after this helper started
        raise StaleHelper(key)
    mod, capsule = native
    has_error, count, *walk = mod.parse_walk(capsule, data, named_only, fields, max_nodes, -1)
    walked = walk[0] is not None
    return _WALK_REPLY.pack(has_error, count, walked), walk if walked else []


def _tree_columns(tree, keep: list[bool] | None, fields: bool, max_nodes: int | None, name: str) -> _Columns:
    """Walk ``tree`` into :class:`_Columns` (LimitError ``max_nodes`` before a full walk of too many nodes)."""
    count = tree.root_node.descendant_count
    if keep is None:  # the walk visits every node: refuse before building the columns
        check_limit(count, max_nodes, "max_nodes", "nodes", name=name)
    has_error = tree.root_node.has_error
    kinds, starts, ends, parents, field_ids, missing = _walk(tree, keep, fields, has_error)
    flags = np.array(missing, dtype=bool)
    return _Columns(has_error, count, _ints(kinds), _ints(starts), _ints(ends), _ints(parents), _ints(field_ids), flags)


def _parse_timed(parser, data: bytes, timeout: float | None, name: str):
    """``parser.parse(data)``, cancelled after ``timeout`` seconds if tree-sitter lets it be (LimitError ``record_timeout``).

    tree-sitter checks a deadline only through the progress callback, which it calls every 100
    parse operations while it advances, and a C parse cannot be interrupted by a signal. The input
    goes through a read callback (the bare bytes path ignores progress callbacks; the callbacks
    cost no measurable time on the stdlib). A cancelled parser is reset, or its next parse would
    resume the cancelled one. This is the fallback where :func:`_parse_columns` has no helper
    process: at the end of an input in error, tree-sitter's recovery accepts every path through its
    merged parse stack (``ts_parser__accept`` over ``ts_stack_pop_all``) without calling the
    callback, and the paths can be many: ``def f(x):`` + ``/*`` x 100 + ``"`` + ``/*`` x 4500 +
    ``    return [y for y in`` (10 KB) spends 25 s there.
    """
    if timeout is None:
        tree = parser.parse(data)
    else:
        deadline = Deadline(timeout, "tree-sitter parse still running", name)
        try:
            tree = parser.parse(
                lambda off, _point: data[off : off + (1 << 20)],
                progress_callback=lambda *_state: deadline.passed(),
            )
        except ValueError:  # py-tree-sitter reports a cancelled parse as "Parsing failed"
            tree = None
        except BaseException:  # interrupted (an alarm, Ctrl-C): the cached parser must not resume it later
            parser.reset()
            raise
        if tree is None:
            parser.reset()  # else the next parse would resume the cancelled one
            deadline.check()
    if tree is None:
        raise ParseError("tree-sitter returned no tree", name=name)
    return tree


def _language_key(lang, lang_name: str) -> str | int:
    """How a helper process finds ``lang``: its name if it is the cached one of that name, else its id."""
    try:
        if get_language(lang_name) is lang:
            return lang_name
    except (ImportError, SpecError):
        pass
    _kind_tables(lang)  # registers it by id: a helper forked from now on finds it
    return id(lang)


def _helper_columns(
    key: str | int, data: bytes, named_only: bool, fields: bool, max_nodes: int | None, name: str, compiled: bool
):
    """In a helper process: :func:`_local_columns` without a timeout (the parent kills at the deadline).

    ``compiled``: whether the caller runs the compiled paths; ``False`` keeps the helper on the pure
    path even when it was forked before the caller entered :func:`~structpos.native.pure_python`.
    """
    if isinstance(key, str):
        lang = get_language(key)
    elif key in _tables:
        lang = _tables[key][0]
    else:  # a Language created after this helper started
        raise StaleHelper(key)
    with contextlib.nullcontext() if compiled else pure_python():
        return _local_columns(lang, data, named_only, fields, max_nodes, None, name)


def _local_columns(
    lang, data: bytes, named_only: bool, fields: bool, max_nodes: int | None, timeout: float | None, name: str
) -> _Columns:
    """Parse and walk ``data`` in this process: compiled where :func:`_native_capsule` allows, else
    :func:`_parse_timed` + :func:`_tree_columns` (``timeout``: tree-sitter's progress callback)."""
    native = _native_capsule(lang)
    if native is not None:
        return _native_columns(native, data, named_only, fields, max_nodes, timeout, name)
    keep = _kind_tables(lang).keep_named if named_only else None
    return _tree_columns(_parse_timed(_parser_for(lang), data, timeout, name), keep, fields, max_nodes, name)


def _parse_columns(
    lang, lang_name: str, data: bytes, limits: Limits, name: str, named_only: bool, fields: bool
) -> _Columns:
    """Parse and walk ``data``, stopped at ``limits.record_timeout`` seconds whatever the input.

    With a timeout, the parse runs in a helper process killed at the deadline (a round trip per
    parse: :func:`_guarded_native_columns` on the compiled path, else
    :func:`~structpos.parsers._guard.call_guarded`), since
    tree-sitter may spend unbounded time without a progress callback (see :func:`_parse_timed`).
    Without a timeout, or without ``fork``, it runs here.
    """
    timeout = limits.record_timeout
    if timeout is not None and can_fork():
        if _native_capsule(lang) is not None:  # compiled: a raw call, nothing pickled
            return _guarded_native_columns(lang, data, named_only, fields, limits.max_nodes, timeout, name)
        compiled = native_module("code") is not None
        args = (_language_key(lang, lang_name), data, named_only, fields, limits.max_nodes, name, compiled)
        deadline = time.monotonic() + timeout
        return call_guarded(_helper_columns, args, deadline, what="tree-sitter parse", timeout=timeout, name=name)
    return _local_columns(lang, data, named_only, fields, limits.max_nodes, timeout, name)


def _build(
    cols: _Columns, text: str, data: bytes, name: str, lang, lang_name: str, named_only: bool, fields: bool
) -> Structure:
    """The Structure of a parse's columns."""
    tables = _kind_tables(lang)
    kind = cols.kinds
    kind[kind >= tables.error_slot] = tables.error_slot
    is_error = kind == tables.error_slot
    if cols.has_error:
        is_error |= cols.missing
    to_char = ByteToChar(text, data)
    attrs: dict[str, np.ndarray] = {IS_NAMED: tables.named[kind], IS_ERROR: is_error}
    if fields:
        names = np.array([""] + [lang.field_name_for_id(i) or "" for i in range(1, lang.field_count + 1)], dtype=object)
        attrs[FIELD] = names[cols.field_ids]
    return Structure(
        kind="tree",
        labels=tables.labels[kind],
        start=to_char(cols.starts),
        end=to_char(cols.ends),
        parent=cols.parents,
        source=text,
        name=name,
        attrs=attrs,
        format="code",
        code=CodeInfo(language=lang_name, has_error=bool(cols.has_error), named_only=named_only),
    )


def parse_code(
    source: str | bytes | Path,
    language: Any = None,
    name: str | None = None,
    named_only: bool = False,
    fields: bool = False,
    *,
    limits: Limits | None = None,
    default_encoding: str | None = None,
) -> Structure:
    """Parse source code with tree-sitter into a preorder tree Structure.

    Parameters
    ----------
    source : str, bytes or os.PathLike
        Text, bytes or a file. Bytes and files are decoded by their byte-order mark, else
        (Python) by a PEP 263 coding line (``# -*- coding: latin-1 -*-``, as
        :func:`tokenize.detect_encoding` reads it), else as UTF-8.
    language : str or tree_sitter.Language, optional
        ``"python"``, ``"javascript"``, ``"java"``, ``"go"``, ``"rust"``, ``"c"``, ``"cpp"``
        (aliases ``py``, ``js``, ``c++``...), any installed ``tree_sitter_<name>`` wheel, or a
        ``tree_sitter.Language``. When omitted it comes from the suffix of the path, or of
        ``name``; there is no default language (a :class:`~structpos.exceptions.SpecError`
        says so).
    name : str, optional
        The input's name in error messages (default: the path, else ``"<code>"``).
    named_only : bool
        Drop anonymous nodes (punctuation, keywords); each kept node hangs from its nearest
        kept ancestor.
    fields : bool
        Add ``attrs["field"]``.
    limits : Limits, optional
        ``max_input_bytes`` and ``max_nodes`` apply; the parse stops at ``record_timeout``
        seconds (in a helper process killed at the deadline; see the module docstring).
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    Structure
        ``kind="tree"`` (node layout in the module docstring). Syntax errors do not raise:
        they are ``ERROR``/``MISSING`` nodes flagged in ``attrs["is_error"]``.

    Raises
    ------
    ParseError
        Bytes that do not decode (naming the byte offset), a PEP 263 line naming a codec that
        is not a text encoding (naming the line), a lone surrogate in ``str`` input, a helper
        process that died while parsing.
    InputError
        ``source`` is not text, bytes or a path (``None``, a number).
    SpecError
        No language given and none to guess.
    LimitError
        ``max_input_bytes`` or ``max_nodes`` exceeded, or the tree-sitter parse ran past
        ``record_timeout`` seconds.

    Examples
    --------
    >>> s = parse_code("x = 1\\n", "python")
    >>> list(s.labels[:4])
    ['module', 'expression_statement', 'assignment', 'identifier']
    >>> parse_code("# -*- coding: latin-1 -*-\\ns = 'é'\\n".encode("latin-1"), "python").source[-4:]
    "'é'\\n"
    """
    language = _language_of(language, source, name)
    lang, lang_name = _resolve_language(language)
    text, data, name = _read_source(source, name, lang_name, limits, default_encoding)
    cols = _parse_columns(lang, lang_name, data, resolve_limits(limits), name, named_only, fields)
    s = _build(cols, text, data, name, lang, lang_name, named_only, fields)
    check_limit(s.num_nodes, resolve_limits(limits).max_nodes, "max_nodes", "nodes", name=name)
    return s
