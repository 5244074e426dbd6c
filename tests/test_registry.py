"""The coordinate-family and encoder registries: declared schemas against real outputs, validators
against the implementations' own argument handling, and early failure on bad specs."""

from __future__ import annotations

from typing import Literal

import networkx as nx
import numpy as np
import pytest

import structpos
from structpos import SpecError
from structpos.coords import COORDS, Column, compute, families_markdown, get, parse_spec, register, validate_spec
from structpos.parsers.graph import parse_graph

CODE = "def area(w, h):\n    if w:\n        return w * h\n    return 0\n"
MARKDOWN = "# Title\n\nOne sentence. Two here.\n\n## Sub\n\nMore text.\n"


def structures():
    """One real structure per kind a family applies to."""
    g = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (4, 5)])
    return {
        "code": structpos.parse(CODE, "code", language="python"),
        "table": structpos.parse("name,age\nann,31\nbob,4\n", "table"),
        "markdown": structpos.parse(MARKDOWN, "markdown"),
        "graph": parse_graph(g),
    }


APPLIES = {
    "tree": ["code", "markdown"],
    "table": ["table"],
    "hier": ["markdown"],
    "lap": ["code", "graph", "table"],
    "rw": ["code", "graph"],
    "maglap": ["code", "graph"],
    "spd": ["code", "graph"],
    "resistance": ["graph", "code"],
    "rwdir": ["code", "graph"],
    "rwdir_pair": ["code", "graph"],
    "anchor": ["code", "graph"],
    "peg": ["code", "graph"],
    "graphkv": ["graph"],
    "grid": ["code", "markdown", "table"],
    "hirope": ["code"],
    "bipe": ["code", "markdown", "table"],
    "tpe": ["table"],
}
ARGS = {
    "tree": [None, "3x2", "5"],
    "lap": [None, "2", "20"],
    "rw": ["1", "7"],
    "maglap": ["3", "2:0.1"],
    "spd": [None, "0", "2"],
    "rwdir": [None, "3"],
    "rwdir_pair": ["1", "3"],
    "anchor": [None, "2", "50"],
    "peg": [None, "3", "2:inv_sqrt"],
    "bipe": [None, "line"],
}


def test_every_builtin_family_is_tested():
    assert set(APPLIES) == set(COORDS.names())


@pytest.mark.parametrize("name", sorted(APPLIES))
def test_declared_columns_match_the_computed_arrays(name):
    """Names, dtypes and per-node shapes that the registry declares are what the function returns."""
    fam = COORDS[name]
    all_structures = structures()
    for kind in APPLIES[name]:
        s = all_structures[kind]
        for arg in ARGS.get(name, [None]):
            params = fam.validate(arg)
            out = get(name)(s, arg)
            required = {c.name for c in fam.columns if not c.optional}
            assert required <= set(out) <= {c.name for c in fam.columns}, (name, kind)
            for col in fam.columns:
                if col.name not in out:
                    continue
                a = out[col.name]
                assert a.dtype == np.dtype(col.dtype), (name, col.name, a.dtype)
                assert a.shape[0] == s.num_nodes
                want = col.concrete_shape(params, s.num_nodes)
                assert len(want) == a.ndim - 1
                assert all(w is None or w == got for w, got in zip(want, a.shape[1:])), (name, col.name, a.shape)


BAD = {
    "tree": ["abc", "0", "4x0", "x-1", "4xx"],
    "table": ["1"],
    "hier": ["x"],
    "lap": ["abc", "0", "-2", "1.5"],
    "rw": ["zero", "0"],
    "maglap": ["a", "0", "4:b", "4:-0.1", "4:nan", "4:inf"],
    "spd": ["far", "-1"],
    "resistance": ["3"],
    "rwdir": ["zero", "0"],
    "rwdir_pair": ["-1", "0"],
    "anchor": ["a", "0"],
    "peg": ["0", "x", "2:cube", "2:none:3"],
    "graphkv": ["1"],
    "grid": ["1"],
    "hirope": ["1"],
    "bipe": ["word", "1"],
    "tpe": ["1"],
}


IGNORES_ARGUMENT = {"resistance", "graphkv"}


@pytest.mark.parametrize("name", sorted(BAD))
def test_validator_rejects_what_the_function_rejects(name):
    """Every argument the validator refuses, the compute function itself refuses too (the validator
    only moves the failure before any work), and every accepted argument runs."""
    s = structures()[APPLIES[name][0]]
    fn = get(name)
    for arg in BAD[name]:
        with pytest.raises(SpecError):
            COORDS[name].validate(arg)
        with pytest.raises(SpecError):
            compute(s, f"{name}:{arg}")
        if name in IGNORES_ARGUMENT:  # the bare function ignores any argument; only the registry checks
            fn(s, arg)
            continue
        with pytest.raises(ValueError):
            fn(s, arg)
    for arg in ARGS.get(name, [None]):
        fn(s, arg)


def test_bad_spec_fails_before_any_family_runs():
    calls = []
    register("spy", lambda s, arg: calls.append(arg) or {})
    try:
        s = structpos.parse("[1, 2]", "json")
        with pytest.raises(SpecError, match="lap:abc"):
            compute(s, "spy,lap:abc")
        with pytest.raises(SpecError, match="unknown coordinate family 'nope'"):
            compute(s, "spy,nope")
        assert calls == []
        compute(s, "spy:1")
        assert calls == ["1"]
    finally:
        del COORDS.entries["spy"]
    assert "spy" not in COORDS


def test_spec_parsing_and_errors_are_value_errors():
    assert parse_spec(" tree:4x8 , rw ") == [("tree", "4x8"), ("rw", None)]
    assert parse_spec(["lap:3", "spd"]) == [("lap", "3"), ("spd", None)]
    assert validate_spec("maglap::0.5")[0][2] == {"k": 8, "q": 0.5}
    for bad in ["", " , ", "lap:abc"]:
        with pytest.raises(ValueError):  # SpecError is a ValueError, as before the registry
            parse_spec(bad)


def test_register_replaces_and_docs_list_every_family():
    table = families_markdown()
    for fam in COORDS.entries.values():
        assert f"`{fam.syntax}`" in table
        assert fam.summary and all(f"`{c.name}`" in table for c in fam.columns)
    col = Column("x", "float64", ("k", "N", 3))
    assert col.concrete_shape({"k": 2}, num_nodes=7) == (2, 7, 3)


# ------------------------------------------------------------------------------ encoders
MINIMAL = {
    "rope": {"head_dim": 16, "num_axes": 3},
    "extra_plane_rope": {"head_dim": 16, "extra_dim": 4, "num_axes": 3},
    "hier_rope": {"head_dim": 16},
    "wire": {"head_dim": 16, "k": 4},
    "aw_rope": {"head_dim": 16},
    "lap_pe": {"k": 4, "dim": 8},
    "spd_bias": {"num_heads": 2},
    "peg_bias": {"num_heads": 2},
    "spe": {"out_dim": 4},
    "string": {"head_dim": 16, "num_axes": 2},
    "comrope": {"head_dim": 16, "num_axes": 2},
    "liere": {"head_dim": 16, "num_axes": 2},
    "grape": {"head_dim": 16, "num_axes": 2},
    "grape_additive": {"head_dim": 16, "num_axes": 2, "num_heads": 2},
    "cope": {"head_dim": 16, "max_positions": 8},
    "fire": {"num_heads": 2},
    "tree_embedding": {"dim": 8},
    "bipe": {"head_dim": 8, "dim": 4},
    "tpe_attention": {"head_dim": 8, "num_heads": 2},
}


def test_every_encoder_builds_from_minimal_options():
    from structpos.encoders.registry import ENCODERS, build

    assert set(MINIMAL) == set(ENCODERS.names())
    for name, opts in MINIMAL.items():
        enc = build(name, **opts)
        assert isinstance(enc, ENCODERS[name].load())


def test_encoder_choices_are_what_the_constructors_accept():
    """Every declared choice builds; a value outside the choices is refused by the validator and by
    the constructor itself (so the declared choices are neither too wide nor too narrow)."""
    from structpos.encoders.registry import ENCODERS, _literal_choices, build, validate_options

    for name, opts in MINIMAL.items():
        entry = ENCODERS[name]
        choices = {**_literal_choices(entry.load()), **entry.choices}
        for option, allowed in choices.items():
            for value in allowed:
                extra = {"num_heads": 4} if (option, value) == ("allocation", "per_head") else {}
                extra |= {"feature_dim": 3} if (option, value) == ("phase", "learned") else {}
                build(name, **opts, **extra, **{option: value})
            with pytest.raises(SpecError, match=option):
                validate_options(name, **opts, **{option: "no-such-choice"})
            with pytest.raises(ValueError):
                entry.load()(**opts, **{option: "no-such-choice"})


def test_encoder_option_errors_name_the_option():
    from structpos.encoders.registry import encoders_markdown, validate_options

    with pytest.raises(SpecError, match="missing required option 'num_axes'"):
        validate_options("rope", head_dim=8)
    with pytest.raises(SpecError, match="unknown option 'dims'"):
        validate_options("wire", head_dim=8, k=2, dims=3)
    with pytest.raises(SpecError, match="unknown encoder 'alibi'"):
        validate_options("alibi")
    assert "`StructuralRoPE`" in encoders_markdown()


def test_an_encoder_registered_in_one_place_is_built_validated_and_documented_by_name():
    """Adding an encoder touches one file: one ENCODERS entry makes it reachable by name."""
    import torch

    from structpos.encoders.registry import ENCODERS, EncoderEntry, build, encoders_markdown, validate_options

    class ToyEncoder(torch.nn.Module):
        """Adds ``scale * coordinate`` to every channel."""

        def __init__(self, dim: int, scale: float = 1.0, mode: Literal["add", "sub"] = "add"):
            super().__init__()
            self.dim, self.scale, self.mode = dim, scale, mode

        def forward(self, x, coords):
            shift = self.scale * coords[..., None].to(x.dtype)
            return x + shift if self.mode == "add" else x - shift

    assert "toy" not in ENCODERS
    ENCODERS.add(EncoderEntry("toy", ToyEncoder, coords="tree", summary="A toy.", reference="This test."))
    try:
        enc = build("toy", dim=3, scale=2.0)
        assert isinstance(enc, ToyEncoder) and enc.dim == 3
        out = enc(torch.zeros(1, 2, 3), torch.tensor([[1, 4]]))
        assert out[0, :, 0].tolist() == [2.0, 8.0]
        with pytest.raises(SpecError, match="mode='mul' is not one of 'add', 'sub'"):
            validate_options("toy", dim=3, mode="mul")  # the Literal hint is the declared choice
        with pytest.raises(SpecError, match="missing required option 'dim'"):
            build("toy")
        assert "| `toy` | `ToyEncoder` | `tree` | A toy. | This test. |" in encoders_markdown()
    finally:
        ENCODERS.remove("toy")
    assert "toy" not in encoders_markdown()
    with pytest.raises(SpecError, match="unknown encoder 'toy'"):
        build("toy", dim=3)


def test_show_picks_its_encoder_through_the_registry(monkeypatch):
    """``structpos show`` builds its rotary encoder by name through the registry, so replacing the
    ``rope`` entry changes what it draws with."""
    pytest.importorskip("matplotlib")
    import torch

    from structpos.commands.show import _encoder
    from structpos.encoders.registry import ENCODERS, EncoderEntry

    class Marked(torch.nn.Module):
        def __init__(self, head_dim: int, num_axes: int):
            super().__init__()
            self.head_dim, self.num_axes = head_dim, num_axes

    coords = {"depth": np.arange(4), "sibling": np.zeros(4, int)}
    assert type(_encoder(coords, ["depth", "sibling"], 8)).__name__ == "StructuralRoPE"
    assert type(_encoder({"lap": np.ones((4, 2))}, ["lap"], 8)).__name__ == "WIRE"
    monkeypatch.setitem(ENCODERS.entries, "rope", EncoderEntry("rope", Marked))
    enc = _encoder(coords, ["depth", "sibling"], 8)
    assert isinstance(enc, Marked) and (enc.head_dim, enc.num_axes) == (8, 2)
