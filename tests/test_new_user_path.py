"""What a new user meets first: bare ``structpos`` prints the help, the demo says what it left out,
``show`` reports its stages, the ``--tokenizer`` how-to is reachable from the README and its
recipe works offline."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from structpos.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_python_m_structpos_without_arguments_prints_the_help():
    r = subprocess.run([sys.executable, "-m", "structpos"], env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == build_parser().format_help()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert all(name in r.stdout for name in sub.choices)  # every command is listed


def test_main_without_arguments_is_not_an_error(capsys):
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: structpos") and "error" not in captured.err


def test_demo_counts_every_row_it_leaves_out(capsys):
    """Each table prints ``max_rows`` rows and then ``... N more`` with N = all rows - shown."""
    from structpos.commands import demo

    everything_rows = 10_000
    assert main(["demo", "--max-rows", str(everything_rows)]) == 0
    full = capsys.readouterr().out
    assert "more" not in full
    sections = re.split(r"^== ", full, flags=re.M)[1:]
    totals = [
        sum(1 for line in sec.splitlines()[1:] if line.strip()) - (0 if sec.startswith("Tokens") else 1)
        for sec in sections
    ]
    tokens = len(re.findall(r"\w+|[^\w\s]", demo.CODE))
    assert totals[-1] == tokens  # the token table of the full run has one line per token

    assert main(["demo", "--max-rows", "3"]) == 0
    short = capsys.readouterr().out
    sections = re.split(r"^== ", short, flags=re.M)[1:]
    for section, total in zip(sections, totals):
        more = re.findall(r"^\.\.\. (\d+) more (nodes|tokens)$", section, flags=re.M)
        assert more and int(more[0][0]) == total - 3, (section, total)
    assert short.rstrip().endswith(f"... {tokens - 3} more tokens")


def test_demo_rejects_a_negative_row_count(capsys):
    assert main(["demo", "--max-rows", "-1"]) == 2
    assert capsys.readouterr().err.startswith("structpos: error: --max-rows")


def test_show_reports_its_stages_after_the_input_parsed(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    src = tmp_path / "a.json"
    src.write_text(json.dumps({"a": [1, 2, {"b": None}], "c": "d"}))
    out = tmp_path / "a.svg"
    assert main(["show", str(src), "-o", str(out), "--no-similarity"]) == 0
    captured = capsys.readouterr()
    stages = captured.err.splitlines()
    assert stages[0].startswith(f"structpos show: parsed {src}:") and "computing coordinates 'tree'" in stages[0]
    assert stages[1].startswith("structpos show: drawing ") and str(out) in stages[1]
    assert captured.out.strip() == f"wrote {out}" and out.stat().st_size > 0
    # a bad input still gets exactly one line: nothing is announced before it parsed
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["show", str(bad), "-o", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_readme_links_the_tokenizer_how_to():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    link = re.search(r"\]\((docs/[\w/-]+\.md)\)", readme[readme.find("--tokenizer") :])
    assert link, "README names --tokenizer without linking the how-to"
    page = (REPO / link.group(1)).read_text(encoding="utf-8")
    assert "save_pretrained" in page and "structpos.integrations.collate" in page
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert link.group(1).removeprefix("docs/") in nav


def test_tokenizer_how_to_recipe_works_offline(tmp_path):
    """The how-to's recipe (a tokenizer trained locally, saved as tokenizer.json) feeds --tokenizer."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("pyarrow")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from structpos.pipeline import read_output

    texts = ['{"name": "tiny", "layers": [1, 2]}', '{"heads": 4, "name": "small"}']
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["[UNK]"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tok.save(str(tmp_path / "tokenizer.json"))
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)))
    rc = main(
        [
            "encode",
            str(data),
            "--kind",
            "json",
            "--out",
            str(tmp_path / "out"),
            "--tokenizer",
            str(tmp_path / "tokenizer.json"),
        ]
    )
    assert rc == 0
    table = read_output(tmp_path / "out")
    rows = table.to_pylist() if hasattr(table, "to_pylist") else table
    assert len(rows) == 2
    for row, text in zip(rows, texts):
        assert row["input_ids"] == tok.encode(text).ids  # the file's own ids, one per token
