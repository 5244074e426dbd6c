"""Name → implementation registries, in the spirit of HF's ``ROPE_INIT_FUNCTIONS``.

A :class:`Registry` maps a short name (``"tree"``, ``"lap"``, ``"rope"``) to an :class:`Entry`:
the implementation (an object, or a ``"module:attribute"`` string imported on first use so that
optional dependencies stay optional), a validator that turns the user's argument into checked
parameters *before any work is done*, and the documentation shown by the CLI and the docs site.
The coordinate families (:data:`structpos.coords.COORDS`) and the encoders
(:data:`structpos.encoders.registry.ENCODERS`) are registries of this kind; adding a family or an
encoder means adding one entry.

Examples
--------
>>> reg = Registry("greeting")
>>> _ = reg.add(Entry("hello", target=str.upper, summary="Shout it."))
>>> reg.load("hello")("hi")
'HI'
>>> "hello" in reg, list(reg)
(True, ['hello'])
>>> reg.get("bye")
Traceback (most recent call last):
...
structpos.exceptions.SpecError: unknown greeting 'bye'; known: hello
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .exceptions import SpecError

__all__ = ["Column", "Entry", "Registry", "no_argument"]

T = TypeVar("T")
E = TypeVar("E", bound="Entry")


def no_argument(name: str) -> Callable[[str | None], dict[str, Any]]:
    """A validator for an entry that takes no argument.

    Parameters
    ----------
    name : str
        The entry's name, used in the error message.

    Returns
    -------
    callable
        ``validate(arg) -> {}``; raises :class:`~structpos.exceptions.SpecError` for a non-empty ``arg``.

    Examples
    --------
    >>> no_argument("table")(None)
    {}
    >>> no_argument("table")("3")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: 'table' takes no argument (got '3')
    """

    def validate(arg: str | None) -> dict[str, Any]:
        if arg:
            raise SpecError(f"{name!r} takes no argument (got {arg!r})")
        return {}

    return validate


def _accept_anything(arg: Any) -> dict[str, Any]:
    return {"arg": arg}


@dataclass(frozen=True)
class Column:
    """One declared per-node output array: of a coordinate family, or a node column of an input kind.

    The declarations are what the Parquet schema of ``structpos encode`` is built from
    (:func:`structpos.pipeline.schema.output_schema`): a row's column holds an ``(N, *shape)``
    array of ``dtype`` for a structure of ``N`` nodes, i.e. ``1 + len(shape)`` nested lists.

    Parameters
    ----------
    name : str
        Key in the returned dict (and Parquet column name).
    dtype : str
        NumPy dtype name.
    shape : tuple
        Per-node shape: ints, or names of the family's parameters (``"k"``), ``"N"`` for the
        node count, or another upper-case letter for a size that depends on the data.
    doc : str
        What the values mean.
    optional : bool
        Present only for some structures (said in ``doc``); left out of the declared schema
        (such a column follows the declared ones where it appears).
    dtype_of : callable, optional
        ``dtype_of(params) -> str`` when the dtype depends on the validated parameters
        (``root_path`` is int32 for wide trees); ``dtype`` is then the default's.

    Examples
    --------
    >>> Column("lap", "float64", ("k",)).concrete_shape({"k": 8}, num_nodes=5)
    (8,)
    >>> Column("spd", "int64", ("N",)).concrete_shape({}, num_nodes=5)
    (5,)
    >>> wide = Column("path", "int16", ("D",), dtype_of=lambda p: "int16" if p["W"] < 9 else "int32")
    >>> wide.concrete_dtype({"W": 4}), wide.concrete_dtype({"W": 99})
    ('int16', 'int32')
    """

    name: str
    dtype: str
    shape: tuple[int | str, ...] = ()
    doc: str = ""
    optional: bool = False
    dtype_of: Callable[[Mapping[str, Any]], str] | None = None

    def concrete_shape(self, params: Mapping[str, Any], num_nodes: int) -> tuple[int | None, ...]:
        """The per-node shape for these parameters (``None`` where it depends on the data).

        Parameters
        ----------
        params : mapping
            The family's validated parameters.
        num_nodes : int
            The structure's node count (for ``"N"``).

        Returns
        -------
        tuple of int or None

        Examples
        --------
        >>> Column("x", "int64", (2, "k", "N", "L")).concrete_shape({"k": 3}, num_nodes=7)
        (2, 3, 7, None)
        """
        dims: list[int | None] = []
        for d in self.shape:
            if isinstance(d, int):
                dims.append(d)
            elif d == "N":
                dims.append(num_nodes)
            else:
                dims.append(params.get(d))
        return tuple(dims)

    def concrete_dtype(self, params: Mapping[str, Any]) -> str:
        """The dtype name for these validated parameters (``dtype`` unless ``dtype_of`` says otherwise).

        Parameters
        ----------
        params : mapping
            The family's validated parameters.

        Returns
        -------
        str

        Examples
        --------
        >>> Column("depth", "int64").concrete_dtype({})
        'int64'
        """
        return self.dtype if self.dtype_of is None else self.dtype_of(params)


@dataclass(frozen=True)
class Entry:
    """One registered implementation with its validator and documentation.

    Parameters
    ----------
    name : str
        The registry key (what a user types).
    target : object or str
        The implementation, or ``"package.module:attribute"`` imported on first :meth:`load`.
    validate : callable, optional
        ``validate(arg) -> dict`` of checked parameters; raises
        :class:`~structpos.exceptions.SpecError` on a bad argument. Defaults to accepting anything.
    summary : str
        One line for tables and ``--help``.
    reference : str
        The formula or the paper the implementation follows (markdown).
    syntax : str
        How a user writes it (``"tree[:DxW]"``); defaults to ``name``.

    Examples
    --------
    >>> e = Entry("upper", target="builtins:str", summary="Strings.")
    >>> e.load()("x"), e.syntax
    ('x', 'upper')
    """

    name: str
    target: Any
    validate: Callable[..., dict[str, Any]] = _accept_anything
    summary: str = ""
    reference: str = ""
    syntax: str = ""

    def __post_init__(self) -> None:
        if not self.syntax:
            object.__setattr__(self, "syntax", self.name)

    def load(self) -> Any:
        """The implementation, importing its module on first use.

        Returns
        -------
        object
            ``target`` itself, or the attribute a ``"module:attribute"`` string names.

        Examples
        --------
        >>> Entry("join", target="os.path:join").load()("a", "b")
        'a/b'
        """
        if not isinstance(self.target, str):
            return self.target
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


@dataclass
class Registry(Generic[E]):
    """A named collection of :class:`Entry` objects (a mapping name → entry, in insertion order).

    Parameters
    ----------
    kind : str
        What the entries are (``"coordinate family"``, ``"encoder"``), used in error messages.

    Examples
    --------
    >>> reg = Registry("colour")
    >>> _ = reg.add(Entry("red", target=1))
    >>> reg.names(), len(reg)
    (['red'], 1)
    """

    kind: str
    entries: dict[str, E] = field(default_factory=dict)

    def add(self, entry: E) -> E:
        """Add (or replace) ``entry``; returns it.

        Parameters
        ----------
        entry : Entry
            The entry; its ``name`` is the key.

        Returns
        -------
        Entry
            ``entry`` unchanged.

        Examples
        --------
        >>> Registry("x").add(Entry("a", target=0)).name
        'a'
        """
        self.entries[entry.name] = entry
        return entry

    def get(self, name: str) -> E:
        """The entry called ``name``.

        Parameters
        ----------
        name : str
            A registered name.

        Returns
        -------
        Entry

        Raises
        ------
        SpecError
            If no entry has that name (the message lists the known names).

        Examples
        --------
        >>> reg = Registry("x"); _ = reg.add(Entry("a", target=0))
        >>> reg.get("a").target
        0
        """
        try:
            return self.entries[name]
        except KeyError:
            raise SpecError(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self.entries))}") from None

    def load(self, name: str) -> Any:
        """The implementation registered as ``name`` (see :meth:`Entry.load`).

        Parameters
        ----------
        name : str
            A registered name.

        Returns
        -------
        object

        Raises
        ------
        SpecError
            If no entry has that name.

        Examples
        --------
        >>> reg = Registry("x"); _ = reg.add(Entry("a", target=len))
        >>> reg.load("a")("abc")
        3
        """
        return self.get(name).load()

    def remove(self, name: str) -> E:
        """Unregister ``name`` and return its entry (:class:`SpecError` as :meth:`get` if unknown).

        Examples
        --------
        >>> reg = Registry("x"); _ = reg.add(Entry("a", target=0))
        >>> reg.remove("a").name, "a" in reg
        ('a', False)
        """
        entry = self.get(name)
        del self.entries[name]
        return entry

    def names(self) -> list[str]:
        """Registered names in registration order.

        Returns
        -------
        list of str

        Examples
        --------
        >>> Registry("x").names()
        []
        """
        return list(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, name: str) -> E:
        return self.get(name)
