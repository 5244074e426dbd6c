"""The Parquet schema of encoded rows, built from the registries' column declarations.

Every shard and batch of a run has the same columns, even one whose records all fail:
``id``, ``kind``, ``num_nodes``, then the node columns the input kind declares
(:attr:`ParserKind.columns <structpos.parsers.kinds.ParserKind>`: ``labels``, ``start``, ``end``,
``parent``), then the columns each coordinate family of the spec declares
(:attr:`CoordFamily.columns <structpos.coords.CoordFamily>`, in the family's order). A column
holding an ``(N, *shape)`` array of a dtype is ``1 + len(shape)`` nested Arrow lists of that dtype.

Left out of the declared schema, and written after it where rows have them: a family's
``optional`` columns, the columns of a family registered without declarations, and a
coordinate named like a node column (``tree`` declares ``parent``, equal to the tree's own
parent column and so not written again; another one is written as ``coord_parent``).
A declaration that cannot be an Arrow type is a :class:`~structpos.exceptions.SpecError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from ..coords import COORDS, parse_spec
from ..exceptions import SpecError
from ..parsers.kinds import NODE_COLUMNS, PARSERS
from ..registry import Column
from .arrow import BASE_COLUMNS
from .options import EncodeOptions

__all__ = ["arrow_type", "declared_columns", "output_schema", "conform"]

_STRINGS = ("str", "string", "object")


def arrow_type(column: Column, params: Mapping[str, Any] | None = None, owner: str = "") -> pa.DataType:
    """The Arrow type of a declared per-node column: ``1 + len(shape)`` nested lists of its dtype.

    Parameters
    ----------
    column : Column
        The declaration.
    params : mapping, optional
        The family's validated parameters (for a dtype that depends on them).
    owner : str, optional
        The family or kind declaring it, for the error message.

    Returns
    -------
    pyarrow.DataType

    Raises
    ------
    SpecError
        A dtype that is neither a NumPy dtype Arrow stores nor ``"str"``.

    Examples
    --------
    >>> arrow_type(Column("lap", "float64", ("k",)))
    ListType(list<item: list<item: double>>)
    >>> arrow_type(Column("labels", "str"))
    ListType(list<item: string>)
    >>> arrow_type(Column("x", "complex128"), owner="toy")
    Traceback (most recent call last):
    ...
    structpos.exceptions.SpecError: toy: column 'x' declares dtype 'complex128', which Arrow cannot store...
    """
    dtype = column.concrete_dtype(params or {})
    try:
        t = pa.string() if dtype in _STRINGS else pa.from_numpy_dtype(np.dtype(dtype))
    except (TypeError, pa.ArrowNotImplementedError) as e:
        raise SpecError(
            f"column {column.name!r} declares dtype {dtype!r}, which Arrow cannot store ({e})", name=owner or None
        ) from None
    for _ in range(1 + len(column.shape)):
        t = pa.list_(t)
    return t


def declared_columns(kind: str | None, coords: str, extra_parsers: Mapping[str, str] | None = None) -> list[pa.Field]:
    """The declared node and coordinate columns of ``kind`` under the spec ``coords``, as Arrow fields.

    Parameters
    ----------
    kind : str or None
        The input kind; ``None`` (each record's own) and kinds of ``extra_parsers`` have the
        default :data:`~structpos.parsers.kinds.NODE_COLUMNS`.
    coords : str
        The coordinate spec.
    extra_parsers : mapping, optional
        The run's ``{kind: "module:function"}`` (they win over a registered kind of that name).

    Returns
    -------
    list of pyarrow.Field

    Raises
    ------
    SpecError
        A bad spec, or a declaration Arrow cannot store.

    Examples
    --------
    >>> [f.name for f in declared_columns("json", "rw:3")]
    ['labels', 'start', 'end', 'parent', 'rw']
    """
    kind_entry = PARSERS.entries.get(kind) if kind is not None and kind not in (extra_parsers or {}) else None
    node_columns = kind_entry.columns if kind_entry is not None else NODE_COLUMNS
    fields = [pa.field(c.name, arrow_type(c, owner=f"input kind {kind}")) for c in node_columns]
    names = {c.name for c in node_columns} | set(BASE_COLUMNS)
    for family, arg in parse_spec(coords) if coords else []:
        entry = COORDS[family]
        params = entry.validate(arg)
        for column in entry.columns:
            if column.optional or column.name in names:
                continue
            names.add(column.name)
            fields.append(pa.field(column.name, arrow_type(column, params, owner=f"coordinate family {family}")))
    return fields


_SCHEMAS: dict[tuple[str | None, str, bool], pa.Schema] = {}


def output_schema(options: EncodeOptions, kind: str | None = None) -> pa.Schema:
    """The schema of encoded rows for ``options``, from the registries' declarations (see the module docs).

    Parameters
    ----------
    options : EncodeOptions
        The options of the run.
    kind : str, optional
        The kind to build it for (default: ``options.kind``).

    Returns
    -------
    pyarrow.Schema

    Raises
    ------
    SpecError
        A bad coordinate spec, or a declaration Arrow cannot store.

    Examples
    --------
    >>> output_schema(EncodeOptions("json", "tree")).names[:8]
    ['id', 'kind', 'num_nodes', 'labels', 'start', 'end', 'parent', 'depth']
    >>> output_schema(EncodeOptions("json", "tree:4x20000")).field("root_path").type
    ListType(list<item: list<item: int32>>)
    """
    kind = kind or options.kind
    extra = dict(options.extra_parsers)
    key = (kind, options.coords, bool(kind in extra))
    if key not in _SCHEMAS:
        head = [pa.field("id", pa.string()), pa.field("kind", pa.string()), pa.field("num_nodes", pa.int64())]
        _SCHEMAS[key] = pa.schema(head + declared_columns(kind, options.coords, extra))
    return _SCHEMAS[key]


def conform(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """``table`` with ``schema``'s columns first, in order and type (missing ones null); other
    columns (error columns, unexpected coordinates) follow unchanged.

    Parameters
    ----------
    table : pyarrow.Table
    schema : pyarrow.Schema or None
        ``None`` returns ``table`` as it is.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    pyarrow.ArrowInvalid
        A column that cannot be cast to the schema's type.

    Examples
    --------
    >>> import pyarrow as pa
    >>> schema = pa.schema([("id", pa.string()), ("n", pa.int64())])
    >>> conform(pa.table({"x": [1.5], "id": ["a"]}), schema).to_pydict()
    {'id': ['a'], 'n': [None], 'x': [1.5]}
    """
    if schema is None:
        return table
    cols, names = [], []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, type=f.type))
        names.append(f.name)
    for name in table.column_names:
        if name not in schema.names:
            cols.append(table.column(name))
            names.append(name)
    return pa.Table.from_arrays(cols, names=names)
