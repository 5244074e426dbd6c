"""The command line's contract: one-line errors with a non-zero status, validation before work, clean help."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import structpos
from structpos.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture()
def files(tmp_path) -> dict[str, Path]:
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2, {"b": null}]}')
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": [1,\n  }')
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    (tmp_path / "in.jsonl").write_text('{"text": "[1]"}\n')
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    return {"good": good, "bad": bad, "plain": plain, "fifo": fifo, "dir": tmp_path}


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2, argv
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("structpos: error: ") and err.count("\n") == 1, (argv, err)
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["show", "{good}", "-o", "{dir}/x.png", "--dpi", "0"], "--dpi: must be positive, got 0"),
        (["show", "{good}", "-o", "{dir}/missing/x.png"], "does not exist"),
        (["show", "{good}", "-o", "{dir}/x.png", "--coords", "lap:abc"], "lap:abc"),
        (["show", "{dir}/nope.json", "-o", "{dir}/x.png"], "nope.json: no such file"),
        (["show", "{bad}", "-o", "{dir}/x.png"], "bad.json at "),
        (["encode", "{good}", "--out", "{dir}/o", "--coords", "lap:abc"], "--coords lap:abc: k must be an integer"),
        (["encode", "{good}", "--out", "{dir}/o", "--coords", "nosuch"], "nosuch"),
        (
            ["encode", "{good}", "--out", "{dir}/o", "--limit", "bogus=3"],
            "--limit 'bogus': unknown; known: max_input_bytes",
        ),
        (
            ["encode", "{good}", "--out", "{dir}/o", "--limit", "max_nodes=1.5"],
            "--limit max_nodes: '1.5' is not an integer",
        ),
        (["encode", "{good}", "--out", "{dir}/o", "--limit", "max_nodes=abc"], "max_nodes"),
        (["encode", "{good}", "--out", "{dir}/o", "--record-timeout", "0"], "--record-timeout"),
        (["encode", "{good}", "--out", "{dir}/o", "--workers", "-1"], "--workers"),
        (["encode", "{good}", "--out", "{dir}/o", "--kind", "nosuch"], "--kind"),
        (["encode", "{good}", "--out", "{dir}/o", "--retry-errors"], "--retry-errors"),
        (["encode", "{dir}/nope.jsonl", "--out", "{dir}/o"], "nope.jsonl: input does not exist"),
        (["encode", "{fifo}", "--kind", "json", "--out", "{dir}/o"], "not a regular file or directory (fifo)"),
        (["encode", "{good}", "--kind", "json", "--out", "{plain}/o"], "plain.txt"),
        (["encode", "{good}", "--kind", "json", "--out", "{plain}"], "plain.txt: --out must be a directory"),
        (["encode", "{dir}/in.jsonl", "--out", "{dir}/o"], "--kind: in.jsonl: the records of a JSONL or Parquet file"),
        (["show", "{good}", "-o", "{dir}/x.svg", "--index", "3"], "--index: 3 is out of range"),
        (["encode"], "required"),
        (["nosuch"], "invalid choice"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(files, capsys, argv, expected):
    argv = [a.format(**files) for a in argv]
    err = _one_line_error(capsys, argv)
    assert expected in err
    assert not (files["dir"] / "o").exists()  # rejected before any work (no output directory made)


def test_error_line_names_input_and_position(files, capsys):
    err = _one_line_error(capsys, ["show", str(files["bad"]), "-o", str(files["dir"] / "x.png")])
    assert err.startswith(f"structpos: error: {files['bad']} at ") and "2:3" in err  # line 2, column 3: the '}'


@pytest.mark.parametrize("sep", ["\n", "\r", "\r\n", "\u2028", "\x0b"])
def test_a_line_break_in_a_path_is_escaped_not_cut(tmp_path, capsys, sep):
    bad = tmp_path / f"first{sep}second.json"
    bad.write_text('{"a": [1,\n  }')
    err = _one_line_error(capsys, ["show", str(bad), "-o", str(tmp_path / "x.png")])  # one line: the escape
    escaped = str(bad).replace(sep, repr(sep)[1:-1])
    assert err == f"structpos: error: {escaped} at line:col 2:3: expected a JSON value, found '}}'\n"


def test_error_line_keeps_every_line_of_a_message():
    from structpos.cli import error_line
    from structpos.exceptions import InputError

    line = error_line(InputError("first\nsecond\tthird", name="a\nb"))
    assert line == "structpos: error: a\\nb: first\\nsecond\\tthird" and "\n" not in line
    assert error_line(ValueError("x\n\n")) == "structpos: error: x"  # trailing breaks are trimmed, not escaped


def test_debug_shows_the_traceback(files, capsys):
    assert main(["encode", str(files["good"]), "--out", str(files["dir"] / "o"), "--coords", "lap:abc", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "SpecError" in err and err.rstrip().splitlines()[-1].startswith("structpos: error:")


def test_version_and_python_m(capsys):
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == f"structpos {structpos.__version__}"
    r = subprocess.run(
        [sys.executable, "-m", "structpos", "--version"], env=ENV, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.strip() == f"structpos {structpos.__version__}"
    r = subprocess.run(
        [sys.executable, "-m", "structpos", "encode", "nope.jsonl", "--out", "o"],
        env=ENV,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr == "structpos: error: nope.jsonl: input does not exist\n"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_help_is_plain_text_and_documents_every_encode_flag_and_input_format():
    parser = build_parser()
    subs = _subparsers(parser)
    for name, sub in {"": parser, **subs}.items():
        text = sub.format_help()
        for markup in ("``", ":func:", ":class:", ":mod:", ".. "):
            assert markup not in text, (name, markup)
        for action in sub._actions:
            if action.option_strings and action.help != argparse.SUPPRESS:
                assert action.help and len(action.help) > 8, (name, action.option_strings)
    encode = subs["encode"]
    text = encode.format_help()
    flags = [s for a in encode._actions for s in a.option_strings if s.startswith("--")]
    assert {
        "--id-field",
        "--glob",
        "--follow-symlinks",
        "--limit",
        "--record-timeout",
        "--retry-errors",
        "--resume",
        "--max-records",
    } <= set(flags)
    for flag in flags:
        assert flag in text
    for fmt in ("JSONL", "graph JSONL", '"edge_index"', "Parquet", "a directory", "errors.jsonl", "manifest.json"):
        assert fmt in text, fmt


def test_limit_overrides_reach_the_records(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": json.dumps(list(range(50)))}) + "\n" + json.dumps({"text": "[1]"}) + "\n")
    out = tmp_path / "o"
    assert (
        main(
            [
                "encode",
                str(src),
                "--kind",
                "json",
                "--out",
                str(out),
                "--limit",
                "max_nodes=10",
                "--workers",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    (err,) = [json.loads(x) for x in (out / "errors.jsonl").read_text().splitlines()]
    assert (
        err["id"] == "1"
        and err["error_type"] == "LimitError"
        and "(max_nodes: " in err["message"]
        and " > 10;" in err["message"]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["limits"]["max_nodes"] == 10
    out2 = tmp_path / "o2"
    assert main(["encode", str(src), "--kind", "json", "--out", str(out2), "--limit", "1", "--no-progress"]) == 0
    assert "1 records: 1 encoded" in capsys.readouterr().out  # --limit N: the old spelling of --max-records N


def test_show_reads_a_file_as_parse_and_encode_do(tmp_path):
    from structpos.commands.show import load_structure
    from structpos.exceptions import ParseError
    from structpos.parsers import parse

    legacy = tmp_path / "legacy.py"
    legacy.write_bytes("# -*- coding: latin-1 -*-\ns = 'café'\n".encode("latin-1"))  # "not UTF-8" before
    shown = load_structure(legacy, None, None, {}, 0)
    assert (
        shown.source == parse(legacy, "code").source and shown.labels.tolist() == parse(legacy, "code").labels.tolist()
    )
    rot = tmp_path / "rot.py"
    rot.write_bytes(b"# coding: rot13\nk = 1\n")
    with pytest.raises(ParseError, match=r"rot\.py at line 1: the declared encoding 'rot13' is not a text encoding"):
        load_structure(rot, None, None, {}, 0)
