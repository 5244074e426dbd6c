"""The options of an encode run (:class:`EncodeOptions`) and the checks made before any record is read."""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

from ..exceptions import SpecError
from ..limits import DEFAULT_LIMITS, Limits
from ..parsers._input import check_encoding
from ..parsers.kinds import PARSERS
from ..parsers.payloads import option_names
from .dispatch import load_parser, parser_for

__all__ = ["EncodeOptions", "validate_languages", "validate_spec"]


@dataclass(frozen=True)
class EncodeOptions:
    """What to do with each record: the parser kind/options, the coordinate spec and the limits.

    Parameters
    ----------
    kind : str or None
        The input kind; ``None`` takes each record's own kind.
    coords : str
        The coordinate spec (``"tree,lap:8"``).
    language : str, optional
        The code language(s).
    parser_options : tuple of (str, object) pairs, or a mapping
        More parser keyword arguments (a mapping is stored as sorted pairs).
    limits : Limits, optional
        Per-record limits.
    extra_parsers : tuple of (str, str) pairs, or a mapping
        More input kinds, ``(kind, "module:function")``.
    timeout_in_process : bool, optional
        Enforce ``limits.record_timeout`` with ``SIGALRM`` in the encoding thread.
    killed_past_timeout : bool, optional
        The encoding process is killed from outside when a record runs past ``record_timeout``
        (a worker of the local engine, a Ray task), so parsers need no helper process of their
        own to stop C code at the deadline (see :meth:`parser_limits`).
    tokenizer : str, optional
        A tokenizer path (a directory or ``tokenizer.json``): rows gain the token columns of
        :func:`~structpos.pipeline.tokens.add_token_columns`.

    Examples
    --------
    >>> from structpos.limits import Limits
    >>> opts = EncodeOptions("json", "tree", limits=Limits(max_nodes=100)).validate()
    >>> opts.as_dict()["limits"]["max_nodes"]
    100
    >>> EncodeOptions("nosuch", "tree").validate()
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --kind: unknown input kind 'nosuch'; known kinds: ...
    """

    kind: str | None
    coords: str
    language: str | None = None
    parser_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    limits: Limits = DEFAULT_LIMITS
    """Per-record limits, passed to the parsers that take ``limits=``."""
    extra_parsers: tuple[tuple[str, str], ...] = ()
    """More input kinds, ``(kind, "module:function")``: imported by name in each worker process."""
    timeout_in_process: bool = False
    """Enforce ``limits.record_timeout`` with ``SIGALRM`` in the encoding thread (main thread only)."""
    tokenizer: str | None = None
    """A tokenizer path (``--tokenizer``): rows gain ``input_ids`` and per-token coordinates."""
    killed_past_timeout: bool = False
    """The encoding process is killed from outside past ``record_timeout`` (an isolated worker)."""

    def __post_init__(self) -> None:
        if isinstance(self.parser_options, Mapping):
            object.__setattr__(self, "parser_options", tuple(sorted(self.parser_options.items())))
        if isinstance(self.extra_parsers, Mapping):
            object.__setattr__(self, "extra_parsers", tuple(sorted(self.extra_parsers.items())))

    def validate(self) -> "EncodeOptions":
        """Fail fast on an unknown kind or coordinate family (before any record is read).

        Returns
        -------
        EncodeOptions
            ``self``.

        Raises
        ------
        SpecError
            An unknown kind, an ``extra_parsers`` target that does not import, or a bad coordinate spec.

        Examples
        --------
        >>> EncodeOptions("json", "tree").validate().kind
        'json'
        >>> EncodeOptions("json", "nosuch").validate()
        Traceback (most recent call last):
        ...
        structpos.exceptions.SpecError: ...unknown coordinate family 'nosuch'...
        """
        known = set(PARSERS) | {k for k, _ in self.extra_parsers}
        if self.kind is not None and self.kind not in known:
            raise SpecError(f"unknown input kind {self.kind!r}; known kinds: {', '.join(sorted(known))}", name="--kind")
        for _kind, target in self.extra_parsers:
            load_parser(target)
        validate_spec(self.coords)
        if self.tokenizer:
            from .tokens import load_tokenizer

            load_tokenizer(self.tokenizer)  # fail fast, before any record is read
        if self.language is not None:
            validate_languages(self.language)
        self._validate_parser_options(dict(self.extra_parsers))
        return self

    def _validate_parser_options(self, extra: dict[str, str]) -> None:
        """``--parser-opt`` keys the parser of ``kind`` takes, a ``default_encoding`` Python knows, and a
        ``grammar`` that compiles."""
        options = dict(self.parser_options)
        if options.get("default_encoding") is not None:  # read before any parser runs: fail fast
            check_encoding(options["default_encoding"], "--parser-opt default_encoding")
        if self.kind is None:
            return
        fn = parser_for(self.kind, extra)
        known = option_names(fn)
        if known is not None:
            for key in options:
                if key not in known:
                    raise SpecError(
                        f"{self.kind} parser has no option {key!r} (options: {', '.join(sorted(known))})",
                        name="--parser-opt",
                    )
            params = list(inspect.signature(fn).parameters.values())[1:]
            missing = [p.name for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL]
            missing = [m for m in missing if m not in options and m not in ("name", "limits")]
            if missing:
                raise SpecError(f"--kind {self.kind} needs {missing[0]}=...", name="--parser-opt")
        if self.kind == "grammar" and self.kind not in extra:
            _validate_grammar(options)

    def parser_limits(self) -> Limits:
        """The limits handed to the parsers: ``limits``, without ``record_timeout`` in a process killed past it.

        With ``record_timeout`` a parser whose C code cannot be interrupted (tree-sitter, an
        Earley parse) runs each parse in a forked helper process killed at the deadline, which
        costs a pipe round trip per record and pickles the parse's arrays back. A worker of the
        local engine or a Ray task is itself killed past the deadline by its driver (and Python
        code in it is stopped by ``SIGALRM``, ``timeout_in_process``), so there the parsers run
        in the worker itself: the same output, one process per worker. The record's error entry
        still has stage ``timeout``.

        Returns
        -------
        Limits
            ``limits``, or a copy with ``record_timeout=None`` when ``killed_past_timeout``.

        Examples
        --------
        >>> opts = EncodeOptions("code", "tree", "python")
        >>> opts.parser_limits() is opts.limits
        True
        >>> isolated = replace(opts, killed_past_timeout=True).parser_limits()
        >>> isolated.record_timeout, isolated.max_nodes == opts.limits.max_nodes
        (None, True)
        """
        if not self.killed_past_timeout or self.limits.record_timeout is None:
            return self.limits
        return replace(self.limits, record_timeout=None)

    def as_dict(self) -> dict:
        """What determines the output (kept in the manifest; a resume with other values is refused).

        Returns
        -------
        dict
            JSON-serializable: ``kind``, ``coords``, ``language``, ``parser_options``, ``limits``
            (and ``extra_parsers``, ``tokenizer`` when set).

        Examples
        --------
        >>> d = EncodeOptions("json", "tree", parser_options={"max_depth": 3}).as_dict()
        >>> d["coords"], d["parser_options"]
        ('tree', [['max_depth', 3]])
        """
        return {
            "kind": self.kind,
            "coords": self.coords,
            "language": self.language,
            "parser_options": [list(kv) for kv in self.parser_options],
            "limits": _limits_dict(self.limits),
            **({"extra_parsers": [list(kv) for kv in self.extra_parsers]} if self.extra_parsers else {}),
            **({"tokenizer": self.tokenizer} if self.tokenizer else {}),
        }


def validate_languages(language: str) -> list[str]:
    """Check ``--language`` (comma separated) before any record: each a known language or an installed grammar wheel.

    Parameters
    ----------
    language : str
        ``"python"``, ``"python,go"``, an alias (``"py"``) or ``<name>`` of a ``tree_sitter_<name>`` wheel.

    Returns
    -------
    list of str
        The names as given.

    Raises
    ------
    SpecError
        A name that is no language (naming ``--language`` and the known ones).

    Examples
    --------
    >>> validate_languages("python,go")
    ['python', 'go']
    >>> validate_languages("cobol")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --language: unknown language 'cobol'; known: python, javascript, java, go, rust, c, cpp (or <name> of an installed tree_sitter_<name> wheel)
    """
    import importlib.util

    from ..parsers.code import ALIASES, LANGUAGES

    names = [x.strip() for x in language.split(",") if x.strip()]
    if not names:
        raise SpecError(f"no language in {language!r}", name="--language")
    for name in names:
        canon = name.lower().replace("-", "_")
        canon = ALIASES.get(canon, canon)
        if canon in LANGUAGES:
            continue
        if canon.isidentifier() and importlib.util.find_spec(f"tree_sitter_{canon}") is not None:
            continue
        raise SpecError(
            f"unknown language {name!r}; known: {', '.join(LANGUAGES)} "
            "(or <name> of an installed tree_sitter_<name> wheel)",
            name="--language",
        )
    return names


def _validate_grammar(options: Mapping[str, Any]) -> None:
    """``--parser-opt grammar=...`` (with ``start``, ``parser``) compiles: checked once, up front."""
    from ..exceptions import StructposError
    from ..parsers.grammar import parse_grammar

    grammar = options.get("grammar")
    if not isinstance(grammar, str):
        raise SpecError(f"grammar must be lark grammar text, got {type(grammar).__name__}", name="--parser-opt grammar")
    try:
        # compiles (and caches) the grammar; the empty input itself may well be rejected
        start, parser = options.get("start", "start"), options.get("parser", "lalr")
        parse_grammar("", grammar, start=start, parser=parser, limits=Limits(record_timeout=None))
    except StructposError as e:
        if "bad grammar" in str(e) or isinstance(e, SpecError):
            raise SpecError(e.message, name="--parser-opt grammar") from None
    except Exception as e:  # e.g. a lark %import of a missing file, a bad type for start
        raise SpecError(f"bad grammar: {type(e).__name__}: {e}", name="--parser-opt grammar") from None


def _limits_dict(limits: Limits) -> dict:
    # time and memory limits only decide which records fail, not what a row holds: not part of the options hash
    return {k: v for k, v in asdict(limits).items() if k not in ("record_timeout", "max_memory_bytes")}


def validate_spec(spec: str) -> list[tuple[str, str | None]]:
    """Check a ``--coords`` spec before any work starts (the coordinate registry's validators).

    Parameters
    ----------
    spec : str
        Comma-separated ``family[:argument]`` items.

    Returns
    -------
    list of tuple of (str, str or None)
        ``(family, argument)`` per item.

    Raises
    ------
    SpecError
        Naming ``--coords``, the spec item and the reason.

    Examples
    --------
    >>> validate_spec("tree,lap:2")
    [('tree', None), ('lap', '2')]
    >>> validate_spec("lap:abc")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: --coords lap:abc: k must be an integer >= 1 (got 'abc')
    """
    from ..coords import parse_spec

    try:
        return parse_spec(spec)
    except SpecError as e:
        raise SpecError(f"--coords {e}") from None
