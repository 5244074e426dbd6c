"""The Parquet schema comes from the registries' declarations: parsers and coordinate families
registered from outside the package run through ``encode`` with their declared column types."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from structpos import Structure
from structpos.coords import COORDS, CoordFamily, compute
from structpos.exceptions import ParseError, SpecError
from structpos.parsers import PARSERS, ParserKind
from structpos.parsers.kinds import NODE_COLUMNS
from structpos.pipeline import EncodeOptions, encode_to_parquet, output_schema, read_errors
from structpos.pipeline.arrow import rows_to_table
from structpos.pipeline.encode import encode_payload
from structpos.pipeline.records import kind_for_path
from structpos.registry import Column


# ---------------------------------------------------------------- a toy kind and family, from outside
def parse_path(text: str, name: str = "<input>") -> Structure:
    """``"a>b>c"``: a chain a -> b -> c (each node the parent of the next), spans into the text."""
    parts = text.split(">")
    if not text or not all(parts):
        raise ParseError("empty step in a path", name=name)
    starts = np.cumsum([0] + [len(p) + 1 for p in parts[:-1]])
    return Structure(
        "tree",
        parts,
        start=starts,
        end=starts + [len(p) for p in parts],
        parent=np.arange(len(parts)) - 1,
        source=text,
        name=name,
    )


def parity_coords(s: Structure, arg: str | None) -> dict[str, np.ndarray]:
    """Twice each node's depth (int32) and a one-hot of its parity (float32, two per node)."""
    depth = np.zeros(s.num_nodes, dtype=np.int64)
    for i in range(s.num_nodes):
        depth[i] = 0 if s.parent[i] < 0 else depth[s.parent[i]] + 1
    onehot = np.zeros((s.num_nodes, 2), dtype=np.float32)
    onehot[np.arange(s.num_nodes), depth % 2] = 1
    return {"twice_depth": (2 * depth).astype(np.int32), "parity": onehot}


TOY_NODE_COLUMNS = tuple(Column(c.name, "int32" if c.name in ("start", "end") else c.dtype) for c in NODE_COLUMNS)


@pytest.fixture
def toy_registered():
    PARSERS.add(
        ParserKind(
            "path", parse_path, summary="a>b>c chains", suffixes={".path": {}}, sample="a>b", columns=TOY_NODE_COLUMNS
        )
    )
    COORDS.add(
        CoordFamily(
            "parity",
            parity_coords,
            columns=(Column("twice_depth", "int32", ()), Column("parity", "float32", (2,))),
        )
    )
    try:
        yield
    finally:
        PARSERS.remove("path")
        COORDS.remove("parity")


def test_a_kind_and_a_family_registered_from_outside_encode_to_parquet_with_their_declared_schema(
    toy_registered, tmp_path
):
    src = tmp_path / "paths.jsonl"
    texts = ["a>b>c", "x", "p>q>r>s", ""]  # the last one fails, alone in its shard
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    summary = encode_to_parquet(src, tmp_path / "out", kind="path", coords="tree,parity", shard_size=3, workers=0)
    assert (summary.records, summary.errors) == (4, 1)
    assert [e["error_type"] for e in read_errors(tmp_path / "out")] == ["ParseError"]
    want = {
        "start": pa.list_(pa.int32()),
        "end": pa.list_(pa.int32()),
        "parent": pa.list_(pa.int64()),
        "twice_depth": pa.list_(pa.int32()),
        "parity": pa.list_(pa.list_(pa.float32())),
        "root_path": pa.list_(pa.list_(pa.int16())),
    }
    parts = sorted((tmp_path / "out").glob("part-*.parquet"))
    assert len(parts) == 2
    schemas = [pq.read_schema(p) for p in parts]
    for schema in schemas:  # the shard with only the failed record has the same columns
        assert {k: schema.field(k).type for k in want} == want
    assert schemas[0].names == schemas[1].names
    table = pq.read_table(parts[0])
    for text, row in zip(texts, table.to_pylist()):
        n = len(text.split(">"))
        assert row["twice_depth"] == [2 * d for d in range(n)]  # a chain: depth = position
        assert row["parity"] == [[1.0, 0.0] if d % 2 == 0 else [0.0, 1.0] for d in range(n)]
        assert row["depth"] == list(range(n))  # the built-in family beside the toy one
        assert [text[s:e] for s, e in zip(row["start"], row["end"])] == text.split(">")
    assert kind_for_path("dir/x.path") == ("path", None)


def test_a_kind_from_extra_parsers_gets_a_schema_with_the_default_node_columns():
    opts = EncodeOptions("mine", "tree", extra_parsers={"mine": "test_encode_schema:parse_path"}).validate()
    schema = output_schema(opts)
    assert schema.field("start").type == pa.list_(pa.int64())
    assert schema.field("depth").type == pa.list_(pa.int64())
    assert schema.names[:7] == ["id", "kind", "num_nodes", "labels", "start", "end", "parent"]


def test_an_undeclarable_column_fails_loudly(toy_registered):
    COORDS.add(CoordFamily("bad", parity_coords, columns=(Column("twice_depth", "complex128", ()),)))
    try:
        with pytest.raises(SpecError, match="coordinate family bad.*complex128"):
            output_schema(EncodeOptions("path", "bad"))
    finally:
        COORDS.remove("bad")


def test_an_extra_parsers_override_does_not_reuse_the_built_in_parsers_signature():
    """The built-in ``json`` parser takes ``name``; an override that does not must not be given it."""
    encode_payload("r", "[1]", "json", "tree")  # the built-in's answer is looked up first
    rows = encode_payload(
        "r", "a>b", "json", "tree", extra_parsers={"json": "test_encode_schema:parse_path_positional"}
    )
    assert rows[0]["labels"].tolist() == ["a", "b"]


def parse_path_positional(text):
    return parse_path(text)


# ------------------------------------------------- the declarations agree with what the families compute
@pytest.mark.parametrize("kind", [k for k in PARSERS if PARSERS[k].sample is not None])
def test_declared_types_are_the_types_of_the_encoded_rows(kind):
    """Each registered family's declared columns, against the arrays it computes on the kind's sample."""
    entry = PARSERS[kind]
    checked = 0
    for family in COORDS:
        try:
            rows = encode_payload("s", entry.sample, kind, family, parser_options=dict(entry.sample_options))
        except Exception:  # a family that does not apply to this kind (tree coordinates of a graph)
            continue
        table = rows_to_table(rows)
        schema = output_schema(EncodeOptions(kind, family))
        for field in schema:  # every declared (non-optional) column is computed, of the declared type
            assert field.name in table.column_names, (kind, family, field.name)
            assert table.schema.field(field.name).type == field.type, (kind, family, field.name)
        checked += 1
    assert checked >= 3


def test_the_tree_root_path_type_follows_the_width():
    s = parse_path("a>b")
    for spec, dtype in (("tree:4x64", np.int16), ("tree:4x20000", np.int32)):
        assert compute(s, spec)["root_path"].dtype == dtype
        assert output_schema(EncodeOptions("json", spec)).field("root_path").type == pa.list_(
            pa.list_(pa.from_numpy_dtype(dtype))
        )


@pytest.mark.parametrize("kind", list(PARSERS))
def test_every_kind_entry_is_self_consistent(kind):
    """Its sample parses through its adapter into structures of its declared node count; its sniffer
    (if any) recognizes its sample; each of its suffixes leads back to it."""
    from structpos.parsers.kinds import sniff_kind
    from structpos.pipeline.dispatch import parse_payload

    entry = PARSERS[kind]
    for suffix, hints in entry.suffixes.items():
        assert kind_for_path(f"d/x{suffix.upper()}") == (kind, hints.get("language"))
    if entry.sample is None:
        return
    out = parse_payload(entry.sample, kind, "sample", options=dict(entry.sample_options))
    structures = out if isinstance(out, list) else [out]
    assert structures and all(s.num_nodes == len(s.labels) > 0 for s in structures)
    if entry.sniff is not None:
        assert entry.sniff(entry.sample)
        assert sniff_kind(entry.sample) == kind
