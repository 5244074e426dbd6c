"""``structpos`` command line: one subcommand per module in :mod:`structpos.commands`.

Each command module exposes ``add_parser(subparsers)`` (registering its arguments, with
``set_defaults(func=run)``) and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ["demo", "encode", "show"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="structpos", description="Structured-position compiler for trees, tables, documents and graphs.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"structpos.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"structpos.commands.{name}":
                continue
            raise
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
