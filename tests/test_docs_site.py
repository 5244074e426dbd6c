"""The built documentation site: docstring markup rendered, every public class on a page.

One strict ``mkdocs build`` into a temporary directory (skipped without the docs extra), then:

* no page shows a Sphinx role literally (``:class:`X``` renders as ``:class:<code>X</code>`` when
  nothing converts it), a reST directive (``.. math::``), or a literal-block marker ``::`` run into
  the text (``Usage::`` followed by the block);
* every public class, that is every class named in ``__all__`` of a public module (including the
  lazily exported ones that a module-level ``__getattr__`` serves), has an entry in the site's
  ``objects.inv`` under its home module's path, i.e. a heading on some API page.

The conversion itself (``docs/sphinx_markup.py``) is tested on the docstrings it has to handle.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "docs"))
import sphinx_markup

ROLE_IN_HTML = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj|const):(?:`|<code>)")
DIRECTIVE_IN_HTML = re.compile(r"(?:^|>|\s)\.\. [a-z-]+::")
# "text::" outside code: a reST literal-block marker (``a::b`` in prose is not one: it needs an end)
LITERAL_MARKER_IN_HTML = re.compile(r"[\w)\]]::(?=\s*<|\s*$)", re.M)


def visible_text(html: str) -> str:
    """The page's prose: without scripts, ``<pre>`` blocks and ``<code>`` spans (where ``::`` is code)."""
    for tag in ("script", "style", "pre", "code"):
        html = re.sub(rf"<{tag}\b.*?</{tag}>", " ", html, flags=re.S)
    return html


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    out = tmp_path_factory.mktemp("site")
    cmd = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "--quiet",
        "-f",
        str(REPO / "mkdocs.yml"),
        "-d",
        str(out),
    ]
    # from another directory: the config's paths must not depend on the working directory
    r = subprocess.run(cmd, cwd=out.parent, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def inventory(site: Path) -> set[str]:
    """The identifiers in the site's Sphinx inventory (``objects.inv``, format version 2)."""
    raw = (site / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):  # four comment lines, then the zlib stream
        header_end = raw.index(b"\n", header_end) + 1
    lines = zlib.decompress(raw[header_end:]).decode("utf-8").splitlines()
    return {line.split(" ", 1)[0] for line in lines if line.strip()}


def test_no_page_shows_sphinx_markup(site):
    bad = []
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        text = visible_text(html)
        for pattern in (ROLE_IN_HTML, DIRECTIVE_IN_HTML, LITERAL_MARKER_IN_HTML):
            bad += [f"{page.relative_to(site)}: {m.group(0)!r}" for m in pattern.finditer(text)]
        bad += [f"{page.relative_to(site)}: {m.group(0)!r}" for m in ROLE_IN_HTML.finditer(html)]
    assert not bad, f"{len(bad)} unrendered markup on the site, first: {bad[:10]}"


def test_roles_become_links(site):
    """Resolved roles are links to the object's heading (not just code spans)."""
    html = (site / "api" / "align" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="#structpos\.align\.Alignment"', html)


def public_modules() -> list[str]:
    import structpos

    found = pkgutil.walk_packages(structpos.__path__, "structpos.")
    names = [m.name for m in found if not any(p.startswith("_") for p in m.name.split(".")[1:])]
    return ["structpos", *sorted(names)]


def public_classes() -> dict[str, str]:
    """``{exported name: home path}`` for every class in ``__all__`` of a public module."""
    classes = {}
    for module in public_modules():
        try:
            mod = importlib.import_module(module)
        except ImportError:  # an optional extra (e.g. torch_geometric) is missing: nothing to check
            continue
        for name in getattr(mod, "__all__", []):
            try:
                obj = getattr(mod, name)  # a lazy export imports its module here
            except ImportError:
                continue
            if inspect.isclass(obj) and obj.__module__.startswith("structpos"):
                classes[f"{module}.{name}"] = f"{obj.__module__}.{obj.__qualname__}"
    return classes


def test_every_public_class_has_a_docs_entry(site):
    documented = inventory(site)
    classes = public_classes()
    assert len(classes) > 20  # the walk found the package's classes
    missing = sorted(
        f"{name} ({home})" for name, home in classes.items() if home not in documented and name not in documented
    )
    assert not missing, f"public classes without a docs entry: {missing}"


def test_lazy_transform_exports_are_documented(site):
    """The PyG transforms are served by ``structpos.transforms.__getattr__``: each has its page entry."""
    import structpos.transforms as transforms

    documented = inventory(site)
    homes = {name: f"structpos.transforms.{module}.{name}" for name, module in transforms._EXPORTS.items()}
    assert len(homes) == 5
    assert all(home in documented for home in homes.values()), sorted(set(homes.values()) - documented)


# --- the conversion, on the forms the docstrings use ------------------------------------------------


def test_role_forms():
    resolve = {"Alignment": "structpos.align.Alignment"}.get
    out = sphinx_markup.rewrite_roles(
        "a :class:`Alignment`, :func:`~structpos.align.align`, :meth:`x.y() <a.b.y>`, :py:mod:`csv`", resolve
    )
    assert ":class:" not in out and ":func:" not in out and ":meth:" not in out and ":py:mod:" not in out
    assert '<autoref identifier="structpos.align.Alignment" optional><code>Alignment</code></autoref>' in out
    assert '<autoref identifier="structpos.align.align" optional><code>align()</code></autoref>' in out
    assert '<autoref identifier="a.b.y" optional><code>x.y()</code></autoref>' in out
    assert '<autoref identifier="csv" optional><code>csv</code></autoref>' in out


def test_literal_block_inside_a_section_keeps_its_indentation():
    doc = "Parameters\n----------\nx : int\n    Used as::\n\n        f(x)\n\n    then more.\n"
    out = sphinx_markup.rewrite_blocks(doc)
    assert "::" not in out
    assert "    Used as:\n\n    ```python\n    f(x)\n    ```\n\n    then more." in out


def test_lone_marker_and_text_block():
    out = sphinx_markup.rewrite_blocks("Tree:\n\n::\n\n    A\n    └── B\n")
    assert out == "Tree:\n\n```text\nA\n└── B\n```\n"


def test_doctest_lines_are_not_literal_markers():
    doc = ">>> s = 'a::'\n>>> x = [1, 2]::\n"
    assert sphinx_markup.rewrite_blocks(doc) == doc


def test_every_docstring_marker_is_converted():
    """Over the whole package: no role, ``.. math::`` or ``::`` marker survives the conversion."""
    seen = 0
    for module in public_modules():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        docs = [mod.__doc__ or ""]
        docs += [
            getattr(o, "__doc__", "") or "" for o in vars(mod).values() if getattr(o, "__module__", None) == module
        ]
        for doc in docs:
            if not doc or (":" not in doc):
                continue
            out = sphinx_markup.rewrite_roles(sphinx_markup.rewrite_blocks(inspect.cleandoc(doc)))
            seen += bool(sphinx_markup.ROLE.search(doc))
            prose = [ln for ln in out.splitlines() if not ln.lstrip().startswith((">>>", "..."))]
            prose_text = re.sub(r"```.*?```", "", "\n".join(prose), flags=re.S)
            assert not sphinx_markup.ROLE.search(out), module
            assert not re.search(r"^\s*\.\. math::", prose_text, re.M), module
            assert not re.search(r"\w::\s*$", prose_text, re.M), (module, prose_text)
    assert seen > 50  # the package does use the roles


def test_site_markup_module_is_found_relative_to_the_config():
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs/sphinx_markup.py" in text and Path(sphinx_markup.__file__).parent == REPO / "docs"
