r"""HiRoPE levels for source code: (function, statement, token) indices, each restarting inside its parent.

HiRoPE (hierarchical RoPE for code) replaces a token's flat position by a position along the
structure of the source: which function or class it is in, which statement of that function,
which token of that statement. Read off a tree-sitter tree (:func:`structpos.parsers.code.parse_code`)
in preorder, with three kinds of nodes:

* **units** ``U`` — the root (the whole file: module-level code is unit 0) and the class /
  function definitions of the language (:data:`UNIT_LABELS`; a Python ``decorated_definition``
  is the unit of the function it decorates; a C/C++ ``struct``/``class``/``union`` counts only
  with a body);
* **statements** ``S`` — the statement nodes of the language (labels ending in ``_statement``
  except blocks, plus the declarations of :data:`STATEMENT_LABELS`), nested ones included;
* **tokens** — the leaves of the tree.

With ``u(i)`` the nearest unit ancestor-or-self of node ``i`` and ``g(i)`` its nearest
ancestor-or-self in ``U ∪ S`` (its *statement*; a unit's own header — ``def f(x):`` — belongs
to the unit itself, which counts as statement 0 of its unit):

.. math::

    \mathrm{function}(i) &= \#\{\, v \in U : v < u(i) \,\} \\
    \mathrm{statement}(i) &= \#\{\, v \in U \cup S : v < g(i),\ u(v) = u(i) \,\} \\
    \mathrm{token}(i) &= \#\{\, j \text{ leaf} : j < i,\ g(j) = g(i) \,\}

(``v < w`` is preorder). ``function`` counts over the whole file; ``statement`` restarts in
every unit, ``token`` in every statement. Nested statements are counted in their unit's
sequence (an ``if`` is one statement, each statement of its body another); the tokens of an
``if`` header and of its ``else`` keyword share the ``if``'s token count. For a leaf ``token`` is
its ordinal in its statement; for an inner node (a tokenizer token straddling leaves aligns to
one) it is the ordinal the statement's next leaf gets. Language-specific lists exist for the
built-in languages; other languages use the generic rules (``*_statement``; the unit labels of
all built-in languages).

**Tokenizer tokens.** Several subword tokens of one identifier align to one leaf and share
its ``token``; :func:`hirope_token_levels` recounts that level over the tokenizer's tokens
(ordinal among the tokens with the same ``(function, statement)``).

**Training-free use on an existing model.** A RoPE model trained on ``L`` positions has seen
every rotation angle ``ω_j·n`` for ``n < L`` only. HiRoPE feeds its rotary pairs the levels
instead of the flat index, highest frequencies to the token level:
:class:`~structpos.encoders.hierarchical.HierarchicalRoPE` with
``levels=("token", "statement", "function")``, ``allocation="sectioned"``, and the model's own
``inv_freq``. Each level restarts inside its parent, so the largest index on each axis is the
longest statement (in tokens), the longest unit (in statements) and the number of units —
each far below the file's length — and a file much longer than ``L`` stays inside the trained
range of every pair. Nothing is retrained: only the position ids change (see the Examples of
:func:`hirope_token_levels`).
"""

from __future__ import annotations

import numpy as np

from ..exceptions import ShapeError, SpecError
from ..structure import Structure, StructureError
from .hierarchy import nearest_marked, rank_within
from .tree import check_parent, num_children

__all__ = [
    "UNIT_LABELS",
    "STATEMENT_LABELS",
    "code_levels",
    "statement_groups",
    "hirope_coords",
    "hirope_token_levels",
]

UNIT_LABELS: dict[str, frozenset[str]] = {
    "python": frozenset({"function_definition", "class_definition", "decorated_definition"}),
    "javascript": frozenset(
        {
            "function_declaration",
            "generator_function_declaration",
            "function_expression",
            "generator_function",
            "arrow_function",
            "method_definition",
            "class_declaration",
            "class",
        }
    ),
    "java": frozenset(
        {
            "class_declaration",
            "interface_declaration",
            "enum_declaration",
            "record_declaration",
            "annotation_type_declaration",
            "method_declaration",
            "constructor_declaration",
            "compact_constructor_declaration",
        }
    ),
    "go": frozenset({"function_declaration", "method_declaration", "func_literal", "type_declaration"}),
    "rust": frozenset(
        {"function_item", "impl_item", "trait_item", "struct_item", "enum_item", "union_item", "mod_item"}
    ),
    "c": frozenset({"function_definition", "struct_specifier", "union_specifier"}),
    "cpp": frozenset(
        {
            "function_definition",
            "class_specifier",
            "struct_specifier",
            "union_specifier",
            "namespace_definition",
            "lambda_expression",
        }
    ),
}
"""Class / function node labels per language (the ``U`` of the module docstring)."""

STATEMENT_LABELS: dict[str, frozenset[str]] = {
    "python": frozenset(),
    "javascript": frozenset({"lexical_declaration", "variable_declaration", "field_definition"}),
    "java": frozenset(
        {
            "local_variable_declaration",
            "field_declaration",
            "constant_declaration",
            "import_declaration",
            "package_declaration",
        }
    ),
    "go": frozenset(
        {
            "short_var_declaration",
            "var_declaration",
            "const_declaration",
            "import_declaration",
            "package_clause",
            "field_declaration",
        }
    ),
    "rust": frozenset(
        {
            "let_declaration",
            "use_declaration",
            "const_item",
            "static_item",
            "type_item",
            "extern_crate_declaration",
            "field_declaration",
        }
    ),
    "c": frozenset({"declaration", "field_declaration", "type_definition", "preproc_include", "preproc_def"}),
    "cpp": frozenset(
        {
            "declaration",
            "field_declaration",
            "type_definition",
            "alias_declaration",
            "using_declaration",
            "static_assert_declaration",
            "preproc_include",
            "preproc_def",
        }
    ),
}
"""Declarations that count as statements, per language, besides the ``*_statement`` labels."""

_NOT_STATEMENTS = frozenset({"compound_statement"})  # C/C++ blocks: containers, like Python's `block`
_BODY_REQUIRED = {"struct_specifier", "union_specifier", "class_specifier"}  # `struct p x;` names a type
_WRAPPERS = {"decorated_definition"}  # the unit of the definition it wraps


def _unit_and_statement_masks(labels: np.ndarray, parent: np.ndarray, language: str) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks of the units (roots included) and of the statements, by the module's rules."""
    all_units = frozenset().union(*UNIT_LABELS.values())
    units = UNIT_LABELS.get(language, all_units)
    extra = STATEMENT_LABELS.get(language, frozenset())
    uniq, inv = np.unique(labels.astype(str), return_inverse=True)
    inv = inv.reshape(-1)
    is_unit_label = np.array([u in units for u in uniq], dtype=bool)[inv]
    is_stmt_label = np.array(
        [(u.endswith("_statement") and u not in _NOT_STATEMENTS) or u in extra for u in uniq], dtype=bool
    )[inv]
    has_parent = parent >= 0
    par_label = np.where(has_parent, labels[np.maximum(parent, 0)], "")
    wrapped = has_parent & np.isin(par_label, list(_WRAPPERS))
    needs_body = np.isin(labels, list(_BODY_REQUIRED))
    has_body = np.zeros(labels.size, dtype=bool)
    body_child = has_parent & (labels == "field_declaration_list")
    has_body[parent[body_child]] = True
    unit = (is_unit_label & ~wrapped & (~needs_body | has_body)) | ~has_parent
    return unit, is_stmt_label & ~unit


def statement_groups(labels, parent, language: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each node's unit ``u(i)`` and statement ``g(i)`` (node indices), and the unit and ``U ∪ S`` masks.

    Parameters
    ----------
    labels : array_like of str
        tree-sitter node types, in preorder.
    parent : array_like of int
        ``(N,)`` preorder parent array.
    language : str
        As :func:`code_levels`.

    Returns
    -------
    unit_of, statement_of : numpy.ndarray
        ``(N,)`` int64 node indices (``u(i)``, ``g(i)`` of the module docstring).
    is_unit, is_group : numpy.ndarray
        ``(N,)`` bool: ``U`` and ``U ∪ S``.

    Raises
    ------
    StructureError
        As :func:`code_levels`.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("x = 1\\n", "code", language="python")
    >>> u, g, _, _ = statement_groups(s.labels, s.parent, "python")
    >>> list(s.labels[g])
    ['module', 'expression_statement', 'expression_statement', 'expression_statement', 'expression_statement', 'expression_statement']
    """
    parent = check_parent(parent, name="<code tree>")
    labels = np.asarray(labels, dtype=object)
    if labels.shape != parent.shape:
        raise StructureError(f"labels ({labels.size}) and parent ({parent.size}) differ in length")
    unit, stmt = _unit_and_statement_masks(labels, parent, language)
    return nearest_marked(parent, unit), nearest_marked(parent, unit | stmt), unit, unit | stmt


def code_levels(labels, parent, language: str = "") -> dict[str, np.ndarray]:
    """Per-node ``function``, ``statement`` and ``token`` levels (see the module docstring).

    Parameters
    ----------
    labels : array_like of str
        tree-sitter node types, in preorder.
    parent : array_like of int
        ``(N,)`` preorder parent array.
    language : str
        A key of :data:`UNIT_LABELS` (``"python"``, ``"cpp"``, ...); another name uses the
        generic rules.

    Returns
    -------
    dict of str to numpy.ndarray
        ``function``, ``statement``, ``token``: ``(N,)`` int64, all ``>= 0``.

    Raises
    ------
    StructureError
        ``parent`` is not a valid preorder parent array, or ``labels`` has another length.

    Examples
    --------
    ``def f(): return 1`` at module level: the module is unit 0, ``f`` unit 1 whose header is
    statement 0 and whose ``return`` is statement 1.

    >>> import structpos
    >>> s = structpos.parse("def f(): return 1\\n", "code", language="python")
    >>> lv = code_levels(s.labels, s.parent, "python")
    >>> leaves = [i for i in range(s.num_nodes) if i + 1 == s.num_nodes or s.parent[i + 1] != i]
    >>> [(s.source[s.start[i]:s.end[i]], int(lv["statement"][i]), int(lv["token"][i])) for i in leaves]
    [('def', 0, 0), ('f', 0, 1), ('(', 0, 2), (')', 0, 3), (':', 0, 4), ('return', 1, 0), ('1', 1, 1)]
    """
    parent = check_parent(parent, name="<code tree>")
    labels = np.asarray(labels, dtype=object)
    if labels.shape != parent.shape:
        raise StructureError(f"labels ({labels.size}) and parent ({parent.size}) differ in length")
    n = parent.size
    u, g, unit, group = statement_groups(labels, parent, language)
    unit_ord = rank_within(np.zeros(n, dtype=np.int64), unit)
    group_ord = rank_within(u, group)  # the unit itself is 0: first in preorder among its own
    leaf = num_children(parent) == 0
    return {
        "function": unit_ord[u],
        "statement": group_ord[g],
        "token": _leaves_before_in_group(g, leaf),
    }


def _leaves_before_in_group(group: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """``#{j leaf : j < i, group[j] = group[i]}`` for every ``i`` (one stable sort by group)."""
    order = np.argsort(group, kind="stable")
    sg, sl = group[order], leaf[order].astype(np.int64)
    before = np.cumsum(sl) - sl  # leaves before, over the sorted array
    first = np.ones(sg.size, dtype=bool)
    first[1:] = sg[1:] != sg[:-1]
    at_group_start = np.maximum.accumulate(np.where(first, np.arange(sg.size), 0))
    out = np.empty(group.size, dtype=np.int64)
    out[order] = before - before[at_group_start]
    return out


def hirope_coords(structure: Structure, arg: str | None = None) -> dict[str, np.ndarray]:
    """Coordinate family ``"hirope"``: :func:`code_levels` of a code tree.

    Parameters
    ----------
    structure : Structure
        A tree from :func:`structpos.parsers.code.parse_code` (its language picks the rules).
    arg : str, optional
        Must be empty.

    Returns
    -------
    dict of str to numpy.ndarray
        ``hirope_function``, ``hirope_statement``, ``hirope_token``: ``(N,)`` int64.

    Raises
    ------
    StructureError
        The structure is not a code tree.
    SpecError
        ``arg`` is given.

    Examples
    --------
    >>> import structpos
    >>> s = structpos.parse("x = 1\\ndef f():\\n    pass\\n", "code", language="python")
    >>> c = hirope_coords(s)
    >>> int(c["hirope_function"].max()), int(c["hirope_statement"][s.labels.tolist().index("pass_statement")])
    (1, 1)
    """
    if arg:
        raise SpecError(f"coordinate family 'hirope' takes no argument, got {arg!r}")
    if structure.parent is None or structure.code is None:
        raise StructureError("HiRoPE levels need a code tree (structpos.parse(..., 'code'))", name=structure.name)
    levels = code_levels(structure.labels, structure.parent, structure.code.language)
    return {f"hirope_{k}": v for k, v in levels.items()}


def hirope_token_levels(function, statement) -> dict[str, np.ndarray]:
    """Per-tokenizer-token HiRoPE levels: ``token`` recounted over the tokens of each statement.

    ``function`` and ``statement`` are the aligned ``hirope_function`` / ``hirope_statement``
    columns (:func:`structpos.align.token_coords`); ``token[t]`` becomes the number of earlier
    tokens with the same ``(function, statement)``. Unaligned tokens (``-1``) keep ``-1`` on
    every level.

    Parameters
    ----------
    function, statement : array_like of int
        ``(T,)`` per-token levels, ``-1`` for unaligned tokens.

    Returns
    -------
    dict of str to numpy.ndarray
        ``function``, ``statement``, ``token``: ``(T,)`` int64 — the mapping
        :class:`~structpos.encoders.hierarchical.HierarchicalRoPE` takes by level name.

    Raises
    ------
    ShapeError
        The arrays are not 1-D of one length.

    Examples
    --------
    Training-free HiRoPE on a long file: 200 small functions make 2,600 tokens, yet no level
    exceeds 200, so a model trained on far fewer positions sees only rotations it knows. The
    rotary pairs take the model's own frequencies, highest to the token level:

    >>> import re, structpos, torch
    >>> from structpos.align import token_coords
    >>> from structpos.encoders.hierarchical import HierarchicalRoPE
    >>> from structpos.encoders.rope import rope_inv_freq
    >>> src = "".join(f"def f{i}(x):\\n    y = x + {i}\\n    return y\\n" for i in range(200))
    >>> s = structpos.parse(src, "code", language="python")
    >>> offsets = [m.span() for m in re.finditer(r"\\w+|[^\\w\\s]", src)]  # any tokenizer's offsets
    >>> c = token_coords(s, offsets, "hirope")
    >>> lv = hirope_token_levels(c["hirope_function"], c["hirope_statement"])
    >>> len(offsets), {k: int(v.max()) for k, v in lv.items()}
    (2600, {'function': 200, 'statement': 2, 'token': 5})
    >>> rope = HierarchicalRoPE(64, levels=("token", "statement", "function"), sections=[16, 8, 8],
    ...                         inv_freq=rope_inv_freq(64))
    >>> q = k = torch.randn(1, len(offsets), 2, 64)
    >>> q_rot, k_rot = rope(q, k, {name: torch.as_tensor(v)[None] for name, v in lv.items()})
    >>> q_rot.shape
    torch.Size([1, 2600, 2, 64])
    """
    f = np.asarray(function, dtype=np.int64)
    st = np.asarray(statement, dtype=np.int64)
    if f.ndim != 1 or f.shape != st.shape:
        raise ShapeError(f"function and statement must be 1-D of one length, given {f.shape} and {st.shape}")
    aligned = (f >= 0) & (st >= 0)
    key = np.where(aligned, f * (int(st.max(initial=0)) + 1) + st, -1)
    token = rank_within(key, aligned)
    neg = np.int64(-1)
    return {"function": np.where(aligned, f, neg), "statement": np.where(aligned, st, neg), "token": token}
