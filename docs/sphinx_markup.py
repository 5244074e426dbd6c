"""Griffe extension: render the Sphinx markup of structpos docstrings in the mkdocs site.

The docstrings follow numpydoc/Sphinx conventions (they read well in ``help()`` and IDEs), but
mkdocstrings renders Markdown. Before mkdocstrings parses a docstring, this extension rewrites:

* the cross-reference roles ``:class:`` / ``:func:`` / ``:meth:`` / ``:data:`` / ``:attr:`` /
  ``:mod:`` / ``:exc:`` / ``:obj:`` (also ``:py:class:`` …, ``~`` and ``title <target>`` forms)
  into mkdocs-autorefs links: a link where the target is rendered on some page, a plain code span
  otherwise (an *optional* autoref, so an external target such as ``pandas.DataFrame`` never fails
  the strict build). Names are resolved as Sphinx does: absolute, else relative to the object,
  its parents and its module;
* a paragraph ending in ``::`` (a reST literal block follows) into ``:`` and a fenced code block,
  a lone ``::`` line into nothing;
* a ``.. math::`` directive into a ``$$ … $$`` display block (pymdownx.arithmatex).

Loaded from ``mkdocs.yml`` (``handlers.python.options.extensions``, a path relative to the config
file, so the build works from any directory). The docstrings themselves are not changed.
"""

from __future__ import annotations

import ast
import re
import textwrap
from typing import Any

try:  # the docs extra; without it this file is only imported by pytest's doctest collection
    from griffe import Extension
except ImportError:  # pragma: no cover - mkdocs/mkdocstrings not installed
    Extension = object  # type: ignore[assignment,misc]

ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|data|attr|mod|exc|obj|const):`(?P<body>[^`]+)`")
CALLABLE_ROLES = {"func", "meth"}


def split_role(body: str) -> tuple[str, str]:
    """The ``(title, target)`` of a role body: ``~a.b`` → ``("b", "a.b")``, ``t <a.b>`` → ``("t", "a.b")``.

    Examples
    --------
    >>> split_role("~structpos.align.align")
    ('align', 'structpos.align.align')
    >>> split_role("the IR <structpos.Structure>")
    ('the IR', 'structpos.Structure')
    >>> split_role(".Alignment")
    ('Alignment', 'Alignment')
    """
    explicit = re.fullmatch(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", body.strip())
    if explicit:
        return explicit["title"], explicit["target"].lstrip(".~")
    target = body.strip().lstrip("!")
    short = target.startswith("~")
    target = target.lstrip("~").lstrip(".")
    return (target.rsplit(".", 1)[-1] if short else target), target


def role_html(role: str, title: str, identifier: str, explicit_title: bool = False) -> str:
    """The optional autoref for one role: a link when ``identifier`` is rendered, else a code span.

    Examples
    --------
    >>> role_html("func", "align", "structpos.align.align")
    '<autoref identifier="structpos.align.align" optional><code>align()</code></autoref>'
    >>> role_html("class", "Structure", "structpos.structure.Structure")
    '<autoref identifier="structpos.structure.Structure" optional><code>Structure</code></autoref>'
    """
    if role in CALLABLE_ROLES and not explicit_title and not title.endswith(")"):
        title += "()"
    title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'


def rewrite_roles(text: str, resolve: Any = None) -> str:
    """Replace every cross-reference role in ``text``; ``resolve(target)`` gives the identifier.

    Examples
    --------
    >>> rewrite_roles("see :class:`~a.B` and :mod:`a`")
    'see <autoref identifier="a.B" optional><code>B</code></autoref> and <autoref identifier="a" optional><code>a</code></autoref>'
    """

    def replace(match: re.Match) -> str:
        title, target = split_role(match["body"])
        identifier = (resolve(target) if resolve else None) or target
        return role_html(match["role"], title, identifier, explicit_title="<" in match["body"])

    return ROLE.sub(replace, text)


def _is_python(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return code.lstrip().startswith(">>>")
    return True


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index after the indented block starting at ``start`` (blank lines inside it belong to it)."""
    end = start
    i = start
    while i < len(lines):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        if line.strip():
            end = i + 1
        i += 1
    return end


def rewrite_blocks(text: str) -> str:
    """Turn reST literal blocks (``text::``) and ``.. math::`` directives into Markdown blocks.

    Examples
    --------
    >>> print(rewrite_blocks("Usage::\\n\\n    f(x)\\n    g(y)\\n\\nMore text."))
    Usage:
    <BLANKLINE>
    ```python
    f(x)
    g(y)
    ```
    <BLANKLINE>
    More text.
    >>> print(rewrite_blocks(".. math::  L = I - A\\n\\nafter"))
    $$
    L = I - A
    $$
    <BLANKLINE>
    after
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        math = re.fullmatch(r"\.\.\s+math::\s*(?P<inline>.*)", stripped)
        literal = stripped.endswith("::") and not stripped.startswith(("..", ">>>", "..."))
        if not (math or literal):
            out.append(line)
            i += 1
            continue
        start = i + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        end = _block_end(lines, start, indent)
        body = textwrap.dedent("\n".join(lines[start:end])).strip("\n")
        pad = " " * indent
        if math:
            content = "\n".join(p for p in (math["inline"], body) if p)
            out += [f"{pad}$$", *(pad + row for row in content.split("\n")), f"{pad}$$"]
        else:
            head = stripped[:-2].rstrip()
            if head:  # "text::" reads "text:"; a lone "::" disappears
                out += [pad + head + ("" if head.endswith(":") else ":"), ""]
            if body:
                fence = "python" if _is_python(body) else "text"
                out += [f"{pad}```{fence}", *(pad + row if row else "" for row in body.split("\n")), f"{pad}```"]
        if end < len(lines):
            out.append("")
        i = end
        while i < len(lines) and not lines[i].strip():
            i += 1
    return "\n".join(out)


class SphinxMarkup(Extension):  # type: ignore[misc,valid-type]
    """Rewrite every docstring of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: Any, loader: Any, **kwargs: Any) -> None:
        collection = loader.modules_collection
        for obj in _walk(pkg):
            if obj.docstring is not None:
                resolve = _resolver(obj, collection)
                obj.docstring.value = rewrite_roles(rewrite_blocks(obj.docstring.value), resolve)


def _walk(obj: Any):
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)


def _exists(collection: Any, path: str) -> str | None:
    """The identifier mkdocstrings registers for ``path``: the object's own path, not an alias's."""
    try:
        found = collection.get_member(path)
    except Exception:  # KeyError, or an alias griffe cannot resolve: not a known target
        return None
    if found.is_alias:
        return found.target_path
    return found.path


def _resolver(obj: Any, collection: Any):
    scopes = []
    scope = obj
    while scope is not None:
        scopes.append(scope.path)
        scope = scope.parent

    def resolve(target: str) -> str | None:
        for candidate in (target, *(f"{s}.{target}" for s in scopes)):
            found = _exists(collection, candidate)
            if found:
                return found
        return None

    return resolve
