"""The README's two set-up commands exist, and .ci/run runs the README's test command verbatim."""

from __future__ import annotations

import re

from conftest import REPO


def bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    blocks = bash_blocks(setup)
    assert len(blocks) == 2, "the README's set-up section has exactly two commands"
    demo, tests = blocks
    assert "structpos demo" in demo and "pytest" in tests
    ci_lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    assert tests in ci_lines
