"""Optional compiled fast paths: each ``native/<name>.c`` builds ``structpos._native_<name>``.

Every extension is ``optional``: without a C compiler the install still succeeds and
:mod:`structpos.native` falls back to the pure-Python paths, which give the same output.
All other metadata is in ``pyproject.toml``.
"""

from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
EXTENSIONS = [
    Extension(
        f"structpos._native_{src.stem}",
        sources=[str(src.relative_to(HERE))],
        optional=True,
        extra_compile_args=["-O2"] if not src.name.startswith("win") else [],
    )
    for src in sorted((HERE / "native").glob("*.c"))
]

setup(ext_modules=EXTENSIONS)
