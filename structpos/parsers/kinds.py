"""The input kinds: one registry, :data:`PARSERS`, of :class:`ParserKind` entries.

An entry says everything the rest of structpos needs to know about a kind: its parse function
(a ``"module:attribute"`` string, imported on first use), the file suffixes it reads (with the
language or format a suffix fixes), a sniffing function, a tiny sample input (for docs and
checks), the payload adapter the encode pipeline calls it through, the node columns its
structures fill (for the Parquet schema), and the per-node attributes (``Structure.attrs``) they
carry, by name and dtype (:mod:`structpos.node_attrs`). Adding a kind is one parser module plus one
:meth:`~structpos.registry.Registry.add` of a :class:`ParserKind`; ``structpos encode`` reads
directories by :func:`kind_for_suffix`, and builds its schema from :attr:`ParserKind.columns`.

Examples
--------
>>> PARSERS["json"].load().__name__, PARSERS["json"].suffixes
('parse_json', {'.json': {}})
>>> kind_for_suffix(".PY"), format_for_suffix(".tsv")
(('code', 'python'), 'tsv')
>>> sniff_kind("<a><b/></a>"), sniff_kind("hello")
('xml', None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import node_attrs as na
from ..exceptions import SpecError
from ..registry import Column, Entry, Registry
from ..structure import Structure

__all__ = [
    "NODE_COLUMNS",
    "ParserKind",
    "PARSERS",
    "get_parser",
    "kind_for_suffix",
    "format_for_suffix",
    "sniff_kind",
    "suffix_hints",
]

NODE_COLUMNS = (
    Column("labels", "str", (), "node label"),
    Column("start", "int64", (), "first character of the node's span (-1 without one)"),
    Column("end", "int64", (), "end of the node's span (exclusive; -1 without one)"),
    Column("parent", "int64", (), "parent node, -1 for roots (a null list unless a tree)"),
)
"""The per-node columns every kind fills, in the order of the encode output (after ``id``,
``kind``, ``num_nodes``); an entry may declare other dtypes for them."""


@dataclass(frozen=True)
class ParserKind(Entry):
    """A registered input kind (an :class:`~structpos.registry.Entry` whose target is the parse function).

    Parameters
    ----------
    suffixes : mapping of str to mapping
        File suffix (lower case, with the dot) -> the parser options it fixes (``{"language":
        "python"}``, ``{"format": "csv"}``; ``{}`` for none).
    sniff : callable, optional
        ``sniff(text) -> bool``: whether the text looks like this kind (a guess only; a suffix
        or an explicit kind always wins).
    sample : object
        A tiny valid input (what the parse function takes), for docs and checks.
    adapt : str or callable
        ``adapt(fn, payload, options, name)``: calls the parser on a record's payload (see
        :mod:`structpos.parsers.payloads`); a ``"module:attribute"`` string is imported on use.
    columns : tuple of Column
        The node columns its structures fill (default :data:`NODE_COLUMNS`).
    sample_options : mapping
        Parser options the sample needs (``{"language": "python"}``).
    node_attrs : tuple of Column or None
        The per-node attributes (``Structure.attrs``) its structures carry, by name, dtype and
        per-node shape (``optional`` for those only some structures have); :meth:`check` holds
        a structure to them. ``None`` (the default, for a kind registered from outside that
        declares nothing): free-form attributes, not checked. ``()``: no attributes.

    Examples
    --------
    >>> toy = ParserKind("toy", "json:loads", summary="JSON via the standard library.", sample="[1]")
    >>> toy.load()(toy.sample), toy.adapter().__name__
    ([1], 'call_plain')
    """

    suffixes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    sniff: Callable[[str], bool] | None = None
    sample: Any = None
    adapt: Any = "structpos.parsers.payloads:call_plain"
    columns: tuple[Column, ...] = NODE_COLUMNS
    sample_options: Mapping[str, Any] = field(default_factory=dict)
    node_attrs: tuple[Column, ...] | None = None

    def check(self, parsed: Structure | list[Structure]) -> Structure | list[Structure]:
        """Hold what the parse function returned to :attr:`node_attrs` (nothing to hold when ``None``).

        Parameters
        ----------
        parsed : Structure or list of Structure
            The parse function's result.

        Returns
        -------
        Structure or list of Structure
            ``parsed``, unchanged.

        Raises
        ------
        ParseError
            An attribute not declared, of another dtype, or a declared one missing
            (:func:`~structpos.node_attrs.check_node_attrs`).

        Examples
        --------
        >>> PARSERS["graph"].check(Structure("graph", ["a"], attrs={"x": [1]}))
        Traceback (most recent call last):
        ...
        structpos.exceptions.ParseError: <input>: attribute 'x' is not declared for input kind 'graph' (declared: none)
        """
        if self.node_attrs is not None:
            for s in parsed if isinstance(parsed, list) else [parsed]:
                if isinstance(s, Structure):
                    na.check_node_attrs(s, self.node_attrs, kind=self.name)
        return parsed

    def adapter(self) -> Callable[..., Any]:
        """The payload adapter, imported on first use.

        Returns
        -------
        callable
            ``adapt(fn, payload, options, name)``.

        Examples
        --------
        >>> PARSERS["graph"].adapter().__name__
        'graph_payload'
        """
        if not isinstance(self.adapt, str):
            return self.adapt
        return Entry("adapt", self.adapt).load()


# ---------------------------------------------------------------------------- sniffers
def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "").strip()


def _looks_json(text: str) -> bool:
    return _first_line(text)[:1] in ("{", "[")


def _looks_xml(text: str) -> bool:
    head = _first_line(text).lower()
    return head.startswith("<") and not head.startswith(("<table", "<!doctype html", "<html"))


def _looks_table(text: str) -> bool:
    """An HTML ``<table``, or 2+ lines with the same (non-zero) number of commas, or of tabs."""
    if "<table" in text[:4096].lower():
        return True
    lines = [x for x in text.splitlines()[:20] if x.strip()]
    return len(lines) >= 2 and any(len({x.count(d) for x in lines}) == 1 and lines[0].count(d) > 0 for d in ",\t")


def _looks_conllu(text: str) -> bool:
    lines = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    return bool(lines) and lines[0].count("\t") == 9


def _looks_markdown(text: str) -> bool:
    return _first_line(text).startswith("#")


# ----------------------------------------------------------------------------- registry
PARSERS: Registry[ParserKind] = Registry("input kind")
"""Every input kind by name (see :class:`ParserKind`)."""

_CODE_SUFFIXES = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".java": "java",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
}

for _kind in (
    ParserKind(
        "code",
        "structpos.parsers.code:parse_code",
        node_attrs=na.CODE_ATTRS,
        summary="Source code through tree-sitter (the language from the argument or the suffix).",
        suffixes={s: {"language": lang} for s, lang in _CODE_SUFFIXES.items()},
        sample="def f(x):\n    return x\n",
        sample_options={"language": "python"},
    ),
    ParserKind(
        "json",
        "structpos.parsers.json_tree:parse_json",
        node_attrs=na.TREE_KEY_ATTRS,
        summary="JSON text: objects, members, arrays and scalars as a tree.",
        suffixes={".json": {}},
        sniff=_looks_json,
        sample='{"a": [1, {"b": null}]}',
        adapt="structpos.parsers.payloads:json_payload",
    ),
    ParserKind(
        "xml",
        "structpos.parsers.xml_tree:parse_xml",
        node_attrs=na.XML_ATTRS,
        summary="XML elements, attributes and text as a tree.",
        suffixes={".xml": {}},
        sniff=_looks_xml,
        sample="<a><b>t</b><c/></a>",
    ),
    ParserKind(
        "yaml",
        "structpos.parsers.yaml_tree:parse_yaml",
        node_attrs=na.TREE_KEY_ATTRS,
        summary="YAML mappings, sequences and scalars as a tree.",
        suffixes={".yaml": {}, ".yml": {}},
        sample="a:\n  - 1\n  - b: 2\n",
    ),
    ParserKind(
        "conllu",
        "structpos.parsers.conllu_tree:parse_conllu",
        node_attrs=na.CONLLU_ATTRS,
        summary="CoNLL-U dependency trees, one structure per sentence.",
        suffixes={".conllu": {}},
        sniff=_looks_conllu,
        sample="# text = Hi there\n1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n2\tthere\tthere\tADV\t_\t_\t1\tadvmod\t_\t_\n\n",
    ),
    ParserKind(
        "spacy",
        "structpos.parsers.spacy_doc:parse_spacy",
        node_attrs=na.SPACY_ATTRS,
        summary="A spaCy Doc's dependency trees.",
    ),
    ParserKind(
        "table",
        "structpos.parsers.table:parse_table",
        node_attrs=na.TABLE_ATTRS,
        summary="CSV, TSV or HTML tables (the format from the argument, the suffix, else sniffed).",
        suffixes={
            ".csv": {"format": "csv"},
            ".tsv": {"format": "tsv"},
            ".html": {"format": "html"},
            ".htm": {"format": "html"},
        },
        sniff=_looks_table,
        sample="a,b\n1,2\n3,4\n",
    ),
    ParserKind(
        "document",
        "structpos.parsers.document:parse_document",
        node_attrs=na.DOCUMENT_ATTRS,
        summary="Plain text as paragraphs, sentences and tokens.",
        suffixes={".txt": {}},
        sample="First sentence. Second one.\n\nA new paragraph.\n",
    ),
    ParserKind(
        "markdown",
        "structpos.parsers.markdown:parse_markdown",
        node_attrs=na.MARKDOWN_ATTRS,
        summary="Markdown sections, blocks, sentences and tokens.",
        suffixes={".md": {}},
        sniff=_looks_markdown,
        sample="# Title\n\nSome text.\n\n## Part\n\nMore.\n",
    ),
    ParserKind(
        "grammar",
        "structpos.parsers.grammar:parse_grammar",
        node_attrs=na.GRAMMAR_ATTRS,
        summary="Text by a lark grammar (--parser-opt grammar=...).",
    ),
    ParserKind(
        "graph",
        "structpos.parsers.graph:parse_graph",
        node_attrs=(),
        summary="Graphs: networkx, a 2 x E edge_index, a PyG Data, or a JSON graph object.",
        sample={"edge_index": [[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]},
        adapt="structpos.parsers.payloads:graph_payload",
    ),
):
    PARSERS.add(_kind)


def get_parser(kind: str) -> Callable[..., Any]:
    """The parse function registered for ``kind`` in :data:`PARSERS`, imported on first use.

    Parameters
    ----------
    kind : str
        An input kind: a name in :data:`PARSERS` (``"code"``, ``"json"``, ``"table"``, ...).

    Returns
    -------
    callable
        The kind's parse function (e.g. :func:`~structpos.parsers.json_tree.parse_json`).

    Raises
    ------
    SpecError
        ``kind`` is not a known input kind (the message lists the known ones).

    Examples
    --------
    >>> get_parser("json").__name__
    'parse_json'
    >>> get_parser("jsn")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: unknown input kind 'jsn'; known kinds: code, conllu, document, grammar, graph, json, markdown, spacy, table, xml, yaml
    """
    if kind not in PARSERS:
        raise SpecError(f"unknown input kind {kind!r}; known kinds: {', '.join(sorted(PARSERS))}")
    return PARSERS.load(kind)


def suffix_hints(suffix: str) -> tuple[str, Mapping[str, str]] | None:
    """The kind that reads files of ``suffix`` (case-insensitive) and the options the suffix fixes, or ``None``.

    Parameters
    ----------
    suffix : str
        ``".py"``, ``".CSV"``, ...

    Returns
    -------
    tuple of (str, mapping) or None
        The first registered kind listing the suffix, and its hints (``{"language": "rust"}``).

    Examples
    --------
    >>> suffix_hints(".RS"), suffix_hints(".bin")
    (('code', {'language': 'rust'}), None)
    """
    suffix = suffix.lower()
    return next(((e.name, e.suffixes[suffix]) for e in PARSERS.entries.values() if suffix in e.suffixes), None)


def kind_for_suffix(suffix: str) -> tuple[str, str | None] | None:
    """``(kind, language)`` of a file suffix (see :func:`suffix_hints`), or ``None`` when no kind reads it.

    Examples
    --------
    >>> kind_for_suffix(".rs"), kind_for_suffix(".yml"), kind_for_suffix(".bin")
    (('code', 'rust'), ('yaml', None), None)
    """
    hints = suffix_hints(suffix)
    return None if hints is None else (hints[0], hints[1].get("language"))


def format_for_suffix(suffix: str) -> str | None:
    """The ``format`` option a file suffix fixes (``".tsv"`` -> ``"tsv"``; see :func:`suffix_hints`), or ``None``.

    Examples
    --------
    >>> format_for_suffix(".HTM"), format_for_suffix(".json")
    ('html', None)
    """
    hints = suffix_hints(suffix)
    return None if hints is None else hints[1].get("format")


def sniff_kind(text: str) -> str | None:
    """The first kind (in registration order) whose sniffer accepts ``text``, or ``None``: a guess only.

    Parameters
    ----------
    text : str

    Returns
    -------
    str or None

    Examples
    --------
    >>> sniff_kind('{"a": 1}'), sniff_kind("1\\tHi\\thi\\tINTJ\\t_\\t_\\t0\\troot\\t_\\t_\\n")
    ('json', 'conllu')
    """
    for entry in PARSERS.entries.values():
        if entry.sniff is not None and entry.sniff(text):
            return entry.name
    return None
