"""Shared test fixtures: where the real data lies.

``../shared/data`` sits beside the checkout (also in CI, which clones into another folder
with a copy of ``shared/`` beside it). ``STRUCTPOS_SHARED`` overrides the location.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STRUCTPOS_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data"
TEST_DATA = REPO / "tests" / "data"


def stdlib_dir() -> Path:
    """CPython's own standard library: real code on every machine."""
    return Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"shared data not found at {DATA} (set STRUCTPOS_SHARED)")
    return DATA


@pytest.fixture(scope="session")
def stdlib() -> Path:
    return stdlib_dir()
