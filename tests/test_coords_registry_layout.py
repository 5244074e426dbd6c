"""The coordinate registry's layout: no package-level import hidden in a function, one validator per family.

``coords/__init__.py`` and ``coords/tree.py`` used to import each other inside functions (the
tree family's argument parser lived in the package, the tree defaults in the module). The
family module now owns its validator; the registry imports it at the top.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import structpos
from structpos.coords import COORDS, MAX_TREE_DEPTH, compute, parse_spec
from structpos.coords.tree import tree_arg, tree_coords
from structpos.exceptions import SpecError

COORDS_DIR = pathlib.Path(structpos.__file__).parent / "coords"


def _function_level_imports(path: pathlib.Path) -> list[tuple[str, str]]:
    """``(function, module)`` of every relative import inside a function body."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.level > 0:
                    found.append((node.name, "." * inner.level + (inner.module or "")))
    return found


@pytest.mark.parametrize("path", sorted(COORDS_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_coords_module_imports_the_package_inside_a_function(path):
    """A function-level ``from . import …`` is an import cycle in disguise."""
    hidden = [(fn, mod) for fn, mod in _function_level_imports(path) if mod in (".", "..coords")]
    assert not hidden, f"{path.name}: {hidden}"


ARGS = ["", "4", "x8", "4x8", "4X8", "0x1", "4x0", "abc", "4xq", f"{MAX_TREE_DEPTH + 1}x1", "2x3x4"]


@pytest.mark.parametrize("arg", ARGS)
def test_tree_family_reads_its_argument_one_way(arg):
    """The spec check, the registry entry and the family function accept and refuse the same arguments."""
    s = structpos.parse("[1, [2, [3]]]", "json")
    spec = f"tree:{arg}" if arg else "tree"
    try:
        expected = tree_arg(arg or None)
    except SpecError as err:
        for call in (lambda: parse_spec(spec), lambda: tree_coords(s, arg or None), lambda: compute(s, spec)):
            with pytest.raises(SpecError) as again:
                call()
            assert str(again.value) == str(err)
        return
    assert COORDS["tree"].validate(arg or None) == expected
    depth_cap = tree_coords(s, arg or None)["root_path"].shape[1]
    assert depth_cap == expected["D"]


def test_bipe_unit_is_checked_by_the_family_and_the_registry_alike():
    s = structpos.parse("One two. Three.", "document")
    with pytest.raises(SpecError) as by_registry:
        parse_spec("bipe:word")
    with pytest.raises(SpecError) as by_family:
        compute(s, "bipe:word")
    assert str(by_registry.value) == str(by_family.value)
    assert set(compute(s, "bipe:sentence")) == {"bipe_segment", "bipe_offset"}
