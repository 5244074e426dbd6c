"""Packaging: the library's own dependencies are ranges, so installing it keeps the user's torch.

The README and CI install through ``constraints.txt`` (which pins the CPU torch build); the
package metadata itself must never pin. The dry-run test resolves an install of this checkout
into the running environment, where a newer torch may be available from the index, and checks
that pip would install structpos alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def test_no_dependency_is_pinned_exactly():
    pinned = [str(r) for r in _requirements() if any(s.operator in ("==", "===", "~=") for s in r.specifier)]
    assert not pinned, f"exact pins in pyproject.toml: {pinned}"


@pytest.mark.parametrize("version", ["2.2.0", "2.5.1", "2.8.0", "2.13.0", "2.14.1"])
def test_torch_requirement_admits_every_torch_2(version):
    (torch_req,) = [r for r in _requirements() if r.name == "torch"]
    assert Version(version) in torch_req.specifier


def test_install_keeps_the_installed_torch(tmp_path):
    """``pip install -e .`` into this environment (torch already present) installs structpos only."""
    import torch

    report = tmp_path / "report.json"
    env = {**os.environ, "PIP_CONSTRAINT": ""}  # no outside constraint may hold torch in place
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-build-isolation"]
    cmd += ["--report", str(report), "-e", str(REPO)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0 and "No matching distribution" in done.stderr:
        pytest.skip(f"no package index reachable: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    installs = {
        i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]
    }
    assert "torch" not in installs, f"pip would replace torch {torch.__version__} with {installs.get('torch')}"
    assert set(installs) == {"structpos"}, installs
