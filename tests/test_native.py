"""The optional native build and its switch (structpos.native)."""

import shutil
import subprocess
import sys

import pytest

from structpos import native


def test_probe_is_built_where_a_compiler_exists():
    # the README's install compiles native/*.c when a C compiler is on PATH; a silent build failure
    # would leave every fast path on its pure-Python fallback
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the optional extensions are skipped by design")
    assert "probe" in native.native_available()
    assert native.native_module("probe").abi() == 1


def test_pure_python_switch_hides_every_module_and_restores():
    built = native.native_available()
    with native.pure_python():
        assert all(native.native_module(s) is None for s in built + ["no_such_module"])
    for s in built:
        assert native.native_module(s) is not None
    assert native.native_module("no_such_module") is None


def test_environment_switch_read_at_import():
    code = "import structpos.native as n; print(n.native_module('probe') is None)"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"STRUCTPOS_PURE_PYTHON": "1", "PATH": ""}, capture_output=True, text=True
    )
    assert out.stdout.strip() == "True", out.stderr
