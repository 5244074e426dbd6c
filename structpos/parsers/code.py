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

Grammars come from per-language wheels (``tree-sitter-python``, ...): languages
``python, javascript, java, go, rust, c, cpp`` are known by name (plus any installed
``tree_sitter_<name>`` module exposing ``language()``), or pass a ``tree_sitter.Language``.
Language and Parser objects are cached (parsers per thread).

Speed: one ``TreeCursor`` walk collecting kind ids and byte offsets into Python lists
(``goto_first_child``/``goto_next_sibling``/``goto_parent`` and a parent stack), then
``np.fromiter``; kind ids map to labels and named-ness through per-language tables. The
walk costs ~0.7x the bare parse (six binding calls per node); ``node.children`` recursion,
a breadth-first ``children`` walk and ``QueryCursor`` captures all measured slower, and
``Parser.parse`` holds the GIL (checked with py-tree-sitter 0.26), so a parsing thread cannot
overlap the walk. ``benchmarks/bench_parse.py`` measures the whole path.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..structure import CodeInfo, Structure, StructureError
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
    """The cached ``tree_sitter.Language`` for a language name (``"python"``, ``"cpp"``, ...)."""
    canon = _canonical(name)
    if not canon.isidentifier():
        raise ValueError(f"bad language name {name!r}")
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
    return ts.Language(fn())


def _tree_sitter():
    from . import require

    return require("tree_sitter", "code", "parsing code")


def language_for_path(path: str | Path) -> str:
    """Guess the language name from a file suffix (``.py`` -> ``"python"``)."""
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
        self.named_list = named + [True]


_tables: dict[int, tuple[Any, _KindTables]] = {}
_local = threading.local()


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


# ------------------------------------------------------------------ walks
def _walk_all(tree, fields: bool):
    """Preorder over every visible node: (kind ids, start bytes, end bytes, parents, field ids).

    ``top`` is the parent of the node under the cursor; descending pushes it, ascending pops.
    """
    if fields:
        return _walk_all_fields(tree)
    cur = tree.walk()
    kinds: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    parents: list[int] = []
    add_kind, add_start, add_end, add_parent = kinds.append, starts.append, ends.append, parents.append
    first_child, next_sibling, go_up = cur.goto_first_child, cur.goto_next_sibling, cur.goto_parent
    stack: list[int] = []
    push, pop = stack.append, stack.pop
    i = 0
    top = -1
    while True:
        node = cur.node
        add_kind(node.kind_id)
        add_start(node.start_byte)
        add_end(node.end_byte)
        add_parent(top)
        if first_child():
            push(top)
            top = i
            i += 1
            continue
        i += 1
        while not next_sibling():
            if not go_up():
                return kinds, starts, ends, parents, []
            top = pop()


def _walk_all_fields(tree):
    """:func:`_walk_all` that also records each node's field id (0: none)."""
    cur = tree.walk()
    kinds: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    parents: list[int] = []
    field_ids: list[int] = []
    stack: list[int] = []
    i = 0
    top = -1
    while True:
        node = cur.node
        kinds.append(node.kind_id)
        starts.append(node.start_byte)
        ends.append(node.end_byte)
        parents.append(top)
        field_ids.append(cur.field_id or 0)
        if cur.goto_first_child():
            stack.append(top)
            top = i
            i += 1
            continue
        i += 1
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                return kinds, starts, ends, parents, field_ids
            top = stack.pop()


def _walk_named(tree, named: list[bool], error_slot: int, fields: bool):
    """Like :func:`_walk_all` but keeps named nodes only; parent = nearest kept ancestor."""
    cur = tree.walk()
    kinds: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    parents: list[int] = []
    field_ids: list[int] = []
    first_child, next_sibling, go_up = cur.goto_first_child, cur.goto_next_sibling, cur.goto_parent
    stack: list[int] = []
    push, pop = stack.append, stack.pop
    i = 0
    top = -1
    while True:
        node = cur.node
        kid = node.kind_id
        if kid >= error_slot or named[kid]:
            me = i
            i += 1
            kinds.append(kid)
            starts.append(node.start_byte)
            ends.append(node.end_byte)
            parents.append(top)
            if fields:
                field_ids.append(cur.field_id or 0)
        else:
            me = top  # children of a dropped node hang from its kept ancestor
        if first_child():
            push(top)
            top = me
            continue
        while not next_sibling():
            if not go_up():
                return kinds, starts, ends, parents, field_ids
            top = pop()


def _missing_flags(tree, n_expected: int, named_only: bool, named: list[bool], error_slot: int) -> np.ndarray:
    """``is_missing`` per kept node, by a second cursor walk (only run when the tree has errors)."""
    cur = tree.walk()
    flags: list[bool] = []
    while True:
        node = cur.node
        kid = node.kind_id
        if not named_only or kid >= error_slot or named[kid]:
            flags.append(node.is_missing)
        if cur.goto_first_child():
            continue
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                if len(flags) != n_expected:  # both walks visit the same nodes; never expected
                    raise RuntimeError(f"tree walk mismatch: {len(flags)} != {n_expected} nodes")
                return np.array(flags, dtype=bool)


# ------------------------------------------------------------------ entry
def _read_source(source, name: str | None, language) -> tuple[str, bytes, str, Any]:
    """Normalise ``source`` to (text, utf-8 bytes, name, language)."""
    if isinstance(source, Path):
        name = name or str(source)
        if language is None:
            language = language_for_path(source)
        try:
            source = source.read_bytes()
        except OSError as e:
            raise StructureError(f"cannot read source: {e}", name=name) from e
    name = name or "<code>"
    if language is None:
        language = "python"
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise StructureError(f"source is not valid UTF-8 ({e.reason})", name=name, position=f"byte {e.start}") from None
    elif isinstance(source, str):
        text = source
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise StructureError(f"source cannot be encoded as UTF-8 ({e.reason})", name=name, position=f"char {e.start}") from None
    else:
        raise TypeError(f"{name}: source must be str, bytes or pathlib.Path, not {type(source).__name__}")
    return text, data, name, language


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


def _build(tree, text: str, data: bytes, name: str, lang, lang_name: str, named_only: bool, fields: bool) -> Structure:
    """Walk a parsed tree into a Structure."""
    tables = _kind_tables(lang)
    if named_only:
        kinds, starts, ends, parents, field_ids = _walk_named(tree, tables.named_list, tables.error_slot, fields)
    else:
        kinds, starts, ends, parents, field_ids = _walk_all(tree, fields)
    kind = _ints(kinds)
    kind[kind >= tables.error_slot] = tables.error_slot
    is_error = kind == tables.error_slot
    has_error = tree.root_node.has_error
    if has_error:
        is_error |= _missing_flags(tree, kind.size, named_only, tables.named_list, tables.error_slot)
    to_char = ByteToChar(text, data)
    attrs: dict[str, np.ndarray] = {"is_named": tables.named[kind], "is_error": is_error}
    if fields:
        names = np.array([""] + [lang.field_name_for_id(i) or "" for i in range(1, lang.field_count + 1)], dtype=object)
        attrs["field"] = names[_ints(field_ids)]
    return Structure(
        kind="tree",
        labels=tables.labels[kind],
        start=to_char(_ints(starts)),
        end=to_char(_ints(ends)),
        parent=_ints(parents),
        source=text,
        name=name,
        attrs=attrs,
        format="code",
        code=CodeInfo(language=lang_name, has_error=bool(has_error), named_only=named_only),
    )


def parse_code(
    source: str | bytes | Path,
    language: Any = None,
    name: str | None = None,
    named_only: bool = False,
    fields: bool = False,
) -> Structure:
    """Parse source code with tree-sitter into a preorder tree Structure.

    ``source``: text, UTF-8 bytes, or a ``pathlib.Path`` (read as bytes; the language is
    guessed from its suffix unless given). ``language``: a name (``"python"`` default,
    ``"javascript"``, ``"java"``, ``"go"``, ``"rust"``, ``"c"``, ``"cpp"``, aliases ``js``,
    ``c++``...) or a ``tree_sitter.Language``. ``named_only`` drops anonymous nodes
    (punctuation, keywords); each kept node hangs from its nearest kept ancestor.
    ``fields`` adds ``attrs["field"]``. See the module docstring for the node layout.
    Invalid UTF-8 raises :class:`StructureError` naming the byte; syntax errors do not raise.
    """
    text, data, name, language = _read_source(source, name, language)
    lang, lang_name = _resolve_language(language)
    tree = _parser_for(lang).parse(data)
    if tree is None:  # only with a parser timeout or no language; neither is set here
        raise StructureError("tree-sitter returned no tree", name=name)
    return _build(tree, text, data, name, lang, lang_name, named_only, fields)
