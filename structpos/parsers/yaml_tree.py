"""YAML → preorder tree with character spans (PyYAML's composer and its node marks).

Same node kinds and ``key``/``index`` attributes as :mod:`structpos.parsers.json_tree`
(so :func:`~structpos.parsers.json_tree.json_path` works; scalar keys keep their YAML type,
``1: x`` has the int key ``1``): ``object`` (mapping),
``array`` (sequence), ``member:<key>`` (span from the key to the end of the value),
and scalars labelled by their resolved tag (``str``, ``int``, ``float``, ``bool``,
``null``, ``timestamp``, ...). A stream of several documents gets a ``stream`` root.
An alias of an already emitted node becomes a leaf ``alias`` with no span (the anchor's
subtree is not copied, so a self-referencing alias cannot loop; PyYAML keeps no marks for
aliases, so a member whose value is an alias spans its key only). So does an alias to a node
anchored inside a complex mapping key (``? {a: &x 1}``): keys get no nodes, only the
``member:<key text>`` label.
"""

from __future__ import annotations

from .._optional import require
from ..limits import Deadline, Limits, node_budget, resolve_limits
from ..node_attrs import INDEX, KEY
from ..structure import Structure, StructureError
from ._input import clean_label, read_text
from ._tree_builder import TreeBuilder

__all__ = ["parse_yaml"]


def _tag_label(node) -> str:
    tag = node.tag or ""
    return tag.rsplit(":", 1)[-1] if tag.startswith("tag:yaml.org,2002:") else tag


def _key(node, text: str, constructor, yaml):
    """A mapping key as Python reads it (``1`` stays an int); non-scalar keys as their source text."""
    if isinstance(node, yaml.ScalarNode):
        try:
            key = constructor.construct_object(node)
        except Exception:
            return node.value
        return key if isinstance(key, (str, int, float, bool)) or key is None else node.value
    return text[node.start_mark.index : node.end_mark.index]


def _inside(node, b: TreeBuilder, parent: int) -> bool:
    """Whether ``node``'s marks lie inside ``parent``'s span (not so for an alias to a node
    anchored elsewhere, e.g. inside a complex mapping key, which has no nodes of its own)."""
    if parent < 0 or b.start[parent] < 0:
        return True
    return b.start[parent] <= node.start_mark.index and node.end_mark.index <= b.end[parent]


def _compose_all(yaml, text: str, timeout: float | None, name: str) -> list:
    """``yaml.compose_all(text, SafeLoader)``, stopped after ``timeout`` seconds (LimitError ``record_timeout``).

    PyYAML's scanner rechecks every open flow level's possible simple key at each token, so a
    few KB of nested ``[[[[`` take seconds (quadratic); the deadline is checked once per token
    fetch, which costs nothing measurable.
    """
    deadline = Deadline(timeout, "PyYAML still scanning", name)

    class Loader(yaml.SafeLoader):
        def fetch_more_tokens(self):
            if deadline.passed():
                raise deadline.error(position=f"line:col {self.line + 1}:{self.column + 1}")
            return super().fetch_more_tokens()

    loader = Loader(text)
    try:
        docs = []
        while loader.check_node():
            docs.append(loader.get_node())
        return docs
    finally:
        loader.dispose()


def parse_yaml(
    text: str, name: str | None = None, *, limits: Limits | None = None, default_encoding: str | None = None
) -> Structure:
    """Parse YAML text into a ``kind="tree"`` Structure (see the module docstring).

    Parameters
    ----------
    text : str, bytes or os.PathLike
        The YAML, its bytes or a file (UTF-8 unless a byte-order mark says otherwise).
    name : str, optional
        The input's name in error messages (default: the path, else ``"<yaml>"``).
    limits : Limits, optional
        ``max_input_bytes`` and ``max_nodes`` apply, and PyYAML's scan stops at
        ``record_timeout`` seconds (its scanner is quadratic in the depth of nested flow
        collections).
    default_encoding : str, optional
        The codec of bytes and files with neither a byte-order mark nor a declared encoding
        (default UTF-8; :func:`~structpos.parsers._input.decode_input`), e.g. ``"cp1252"``.

    Returns
    -------
    Structure
        ``kind="tree"`` with the ``key``/``index`` attributes of
        :mod:`structpos.parsers.json_tree`. Member labels have lone surrogates (from
        ``"\\ud800"`` escapes) replaced by U+FFFD; the ``key`` attribute keeps the key as
        PyYAML reads it.

    Raises
    ------
    ParseError
        YAML that PyYAML rejects (naming ``line:col``), nesting too deep for its composer,
        undecodable bytes.
    LimitError
        ``max_input_bytes``, ``max_nodes`` or ``record_timeout`` exceeded.

    Examples
    --------
    >>> s = parse_yaml("a: [1, x]\\n")
    >>> [str(l) for l in s.labels]
    ['object', 'member:a', 'array', 'int', 'str']

    An alias is a leaf without a span; scalar keys keep their YAML type:

    >>> from structpos.parsers.json_tree import json_path
    >>> s = parse_yaml("a: &x [1, x]\\nb: *x\\n1: 2021-01-02\\n")
    >>> [(str(l), s.node_text(i), json_path(s, i)) for i, l in enumerate(s.labels)][5:]
    [('member:b', 'b', ['b']), ('alias', None, ['b']), ('member:1', '1: 2021-01-02', [1]), ('timestamp', '2021-01-02', [1])]
    >>> parse_yaml("a: [1, 2\\n", name="c.yaml")
    Traceback (most recent call last):
    ...
    structpos.exceptions.ParseError: c.yaml at line:col 2:1: while parsing a flow sequence expected ',' or ']', but got '<stream end>'
    """
    yaml = require("yaml", "text", "parse_yaml")
    text, name = read_text(text, name=name, default="<yaml>", limits=limits, default_encoding=default_encoding)
    try:
        docs = _compose_all(yaml, text, resolve_limits(limits).record_timeout, name)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        pos = f"line:col {mark.line + 1}:{mark.column + 1}" if mark else None
        raise StructureError(f"{e.context or ''} {e.problem or ''}".strip(), name=name, position=pos) from None
    except yaml.YAMLError as e:
        raise StructureError(str(e), name=name) from None
    except RecursionError:
        raise StructureError("YAML nesting too deep for PyYAML's recursive composer", name=name) from None
    b = TreeBuilder({KEY: (None, object), INDEX: (-1, "int64")}, max_nodes=node_budget(limits), name=name)
    constructor = yaml.constructor.SafeConstructor()
    seen: set[int] = set()
    root = -1
    if len(docs) != 1:
        root = b.add("stream", -1, 0, len(text))
    # explicit stack of (node, parent, member key, index, is a member); children pushed in reverse order
    stack = [(d, root, None, i if root >= 0 else -1, False) for i, d in enumerate(docs)][::-1]
    while stack:
        node, parent, key, index, is_member = stack.pop()
        if is_member:  # node is a (key node, value node) pair; the key may be None ("~: x")
            key_node, value = node
            # an alias value lies elsewhere (its anchor's marks, maybe inside a complex key that
            # got no nodes): the member then spans the key only and its value is an alias leaf
            here = id(value) not in seen and value.start_mark.index >= key_node.end_mark.index
            end = value.end_mark.index if here else key_node.end_mark.index
            label = f"member:{clean_label(str(key))}"
            member = b.add(label, parent, key_node.start_mark.index, end, key=key, index=index)
            stack.append((value if here else None, member, None, -1, False))
            continue
        if node is None or id(node) in seen or not _inside(node, b, parent):
            b.add("alias", parent, index=index)  # a node already emitted, or anchored elsewhere
            continue
        seen.add(id(node))
        span = node.start_mark.index, node.end_mark.index
        if isinstance(node, yaml.MappingNode):
            i = b.add("object", parent, *span, index=index)
            for k, v in reversed(node.value):
                stack.append(((k, v), i, _key(k, text, constructor, yaml), -1, True))
        elif isinstance(node, yaml.SequenceNode):
            i = b.add("array", parent, *span, index=index)
            for j in range(len(node.value) - 1, -1, -1):
                stack.append((node.value[j], i, None, j, False))
        else:
            b.add(_tag_label(node), parent, *span, index=index)
    return b.build("tree", text, name, format="yaml")
