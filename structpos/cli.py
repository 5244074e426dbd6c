"""``structpos`` command line: one subcommand per module in :mod:`structpos.commands`.

Each command module exposes ``add_parser(subparsers)`` (registering its arguments, with
``set_defaults(func=run)``) and ``run(args) -> int``.

Error contract: a failure the user can cause (bad arguments, bad input, a limit, an output
directory that cannot be written or resumed) prints one line,
``structpos: error: <input> at <position>: <message>``, and exits non-zero (2; 130 when
interrupted); a line break or other control character in a name or message is printed as its
escape (``\\n``), so the line keeps all of it (:func:`one_line`). ``--debug`` prints the
traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

COMMANDS = ["demo", "encode", "show"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_INTERNAL = 3


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, like every other structpos error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(
            EXIT_USAGE,
            f"structpos: error: {self.prog.removeprefix('structpos').strip() or 'arguments'}: "
            f"{message} (see {self.prog} --help)\n",
        )


def build_parser() -> argparse.ArgumentParser:
    """The ``structpos`` argument parser with every available subcommand.

    Returns
    -------
    argparse.ArgumentParser
        Its usage errors exit with status 2 after one line on stderr.

    Examples
    --------
    >>> build_parser().parse_args(["encode", "in.jsonl", "--out", "o"]).coords
    'tree'
    """
    from . import __version__

    parser = _Parser(
        prog="structpos", description="Structured-position compiler for trees, tables, documents and graphs."
    )
    parser.add_argument("--version", action="version", version=f"structpos {__version__}")
    parser.add_argument("--debug", action="store_true", help="on an error, print the traceback instead of one line")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"structpos.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"structpos.commands.{name}":
                continue
            raise
        mod.add_parser(sub)
    for p in sub.choices.values():
        p.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="on an error, print the traceback instead of one line",
        )
    return parser


def error_line(exc: BaseException) -> str:
    """The one line printed for ``exc``: ``structpos: error: <input> at <position>: <message>``.

    Parameters
    ----------
    exc : BaseException
        The error; one the user cannot cause is called an internal error.

    Returns
    -------
    str

    Examples
    --------
    >>> from structpos.exceptions import ParseError
    >>> error_line(ParseError("unexpected '}'", name="a.json", position="3:7"))
    "structpos: error: a.json at 3:7: unexpected '}'"
    >>> error_line(FileNotFoundError(2, "No such file or directory", "out/x.png"))
    'structpos: error: out/x.png: No such file or directory'
    """
    from .exceptions import StructposError

    if isinstance(exc, StructposError):
        text = str(exc)
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    elif isinstance(exc, MemoryError):
        text = "out of memory (lower the limits: --limit max_nodes=..., or --workers)"
    elif isinstance(exc, (ImportError, ValueError)):
        text = str(exc) or type(exc).__name__
    else:
        text = f"internal error: {type(exc).__name__}: {exc} (please report it; rerun with --debug for the traceback)"
    return "structpos: error: " + one_line(text) if text.strip() else "structpos: error"


def one_line(text: str) -> str:
    """``text`` on one line, nothing dropped: line breaks and other control characters as escapes.

    A path or a message with a newline in it would otherwise print as two lines (and the
    one-line contract kept only the first): each line break becomes its escape, as ``repr``
    writes it, and so does every other control character (a tab too, so that a name with one
    stays recognisable). Surrounding whitespace is stripped.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        No character ``str.splitlines`` breaks at.

    Examples
    --------
    >>> one_line("in\\nput.json: bad\\tname")
    'in\\\\nput.json: bad\\\\tname'
    >>> print(one_line("first line\\nsecond line\\n"))
    first line\\nsecond line
    """
    text = text.strip()
    if text.isprintable():
        return text
    return "".join(repr(c)[1:-1] if not c.isprintable() and c != " " else c for c in text)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (errors print one line, see the module docstring).

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success (no arguments at all print the help); 1 when ``encode`` could encode no
        record; 2 for an error the user can
        fix (arguments, input, limits, output directory); 3 for an internal error; 130 when
        interrupted. Nothing is raised: every error is printed as one line on stderr.

    Examples
    --------
    >>> main(["--version"])
    structpos ...
    0
    >>> main([])
    usage: structpos [-h] ...
    0
    >>> main(["encode", "no-such-file.jsonl", "--out", "out"])  # prints the error line on stderr
    2
    """
    if not (sys.argv[1:] if argv is None else argv):  # bare `structpos` / `python -m structpos`: the help
        build_parser().print_help()
        return 0
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error already printed on one line
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if getattr(args, "debug", False):
            traceback.print_exc()
        hint = "; rerun with --resume to continue" if getattr(args, "command", None) == "encode" else ""
        print(f"structpos: interrupted{hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # the contract: one line, a non-zero status
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(error_line(e), file=sys.stderr)
        from .exceptions import StructposError

        known = isinstance(e, (StructposError, OSError, ImportError, ValueError, MemoryError))
        return EXIT_USAGE if known else EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
