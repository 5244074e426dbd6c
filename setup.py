"""Optional compiled fast paths: each ``native/<name>.c`` builds ``structpos._native_<name>``.

Every extension is ``optional``: without a C compiler the install still succeeds and
:mod:`structpos.native` falls back to the pure-Python paths, which give the same output.
All other metadata is in ``pyproject.toml``.
"""

import os
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
GCC_LIKE = os.name != "nt"  # MSVC takes none of the gcc/clang flags below
# native/code.c is compiled with the vendored tree-sitter runtime (native/vendor/tree_sitter/README.md)
TREE_SITTER = "native/vendor/tree_sitter"
EXTRA: dict[str, dict] = {
    "code": {
        "include_dirs": [f"{TREE_SITTER}/include", f"{TREE_SITTER}/src"],
        "define_macros": [
            ("_POSIX_C_SOURCE", "200809L"),
            ("_DEFAULT_SOURCE", None),
            ("TREE_SITTER_HIDE_SYMBOLS", None),
        ],
        "extra_compile_args": ["-O3", "-std=c11", "-fvisibility=hidden"] if GCC_LIKE else [],
    },
}


def extension(src: Path) -> Extension:
    """The optional extension ``structpos._native_<stem>`` built from ``native/<stem>.c``."""
    extra = EXTRA.get(src.stem, {})
    return Extension(
        f"structpos._native_{src.stem}",
        sources=[str(src.relative_to(HERE))],
        depends=["native/buffers.h", "native/arena.h", "native/ints.h"],
        include_dirs=extra.get("include_dirs", []),
        define_macros=extra.get("define_macros", []),
        optional=True,
        extra_compile_args=(["-O2"] if GCC_LIKE else []) + extra.get("extra_compile_args", []),
    )


setup(ext_modules=[extension(src) for src in sorted((HERE / "native").glob("*.c"))])
