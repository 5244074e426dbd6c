"""The argument fuzz of ``benchmarks/fuzz.py`` (encoder options, ``structpos encode`` options).

The fuzzer's own counts are recorded in ``benchmarks/RESULTS.md``; here: its generators reach the
whole option space, and its harness tells the contract (a StructposError, argparse's usage exit)
from escapes (any other exception) and from silent wrong answers (an ignored coordinate axis).
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")

from benchmarks import fuzz
from structpos.exceptions import SpecError


def test_encoder_generator_reaches_every_encoder_and_hostile_values():
    from structpos.encoders.registry import ENCODERS

    rng = random.Random(0)
    cases = [fuzz.encoder_input(rng) for _ in range(3000)]  # 19 encoders: ~160 cases each
    assert {name for name, _, _ in cases} == set(ENCODERS)
    head_dims = {repr(o.get("head_dim")) for _, o, _ in cases if "head_dim" in o}
    assert {"8", "0", "-8", "7", "nan"} <= head_dims  # valid, zero, negative, odd, non-finite
    assert any(o.get("num_axes") == 100 for n, o, _ in cases if n == "rope")  # more axes than pairs
    assert any(o.get("sections") == [-2, 6] for _, o, _ in cases)  # negative sections
    assert any(o.get("k") == 0 for n, o, _ in cases if n == "wire")
    assert any(o.get("allocation") == "diagonal" for _, o, _ in cases)
    assert {c["values"] for _, _, c in cases} >= {"small", "nan", "inf", "huge", "negative"}  # the t / coords values


def test_encoder_generator_reaches_every_constructor_option():
    """Every parameter of every registered encoder's constructor gets values (tensors left to fuzz_encoders.py)."""
    import inspect

    from structpos.encoders.registry import ENCODERS

    rng = random.Random(0)
    seen: dict[str, set] = {}
    for _ in range(3000):
        name, options, _ = fuzz.encoder_input(rng)
        seen.setdefault(name, set()).update(options)
    for name in ENCODERS:
        params = list(inspect.signature(ENCODERS.load(name).__init__).parameters.values())[1:]
        wanted = {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        missing = wanted - fuzz._TENSOR_OPTIONS - {"check", "scaling"} - seen[name]
        assert not missing, f"{name}: {sorted(missing)}"


def test_cli_generator_reaches_every_option(tmp_path):
    rng = random.Random(0)
    argvs = [fuzz.cli_argv(rng, tmp_path, k)[0] for k in range(600)]

    def values(option: str) -> set[str]:
        return {argv[i + 1] for argv in argvs for i, a in enumerate(argv[:-1]) if a == option}

    for option in ("--coords", "--limit", "--record-timeout", "--shard-size", "--workers", "--max-records"):
        assert len(values(option)) > 5, option
    assert {"nan", "inf", "0", "-1"} <= values("--record-timeout")
    assert any(v.startswith("record_timeout=") for v in values("--limit"))
    specs = values("--coords")
    assert any(":100000000" in s for s in specs) and any(s.startswith("maglap") for s in specs)


def test_cli_case_outcomes(tmp_path):
    fuzz.cli_files(tmp_path)
    src, out = str(tmp_path / "json.jsonl"), str(tmp_path / "o")
    assert fuzz.run_cli_case(["encode", src, "--out", out, "--workers", "abc"], "json", 30) == "usage"
    assert (
        fuzz.run_cli_case(["encode", src, "--out", out, "--kind", "json", "--coords", "tree"], "json", 30) == "encoded"
    )
    with pytest.raises(SpecError):
        fuzz.run_cli_case(["encode", src, "--out", out, "--coords", "nosuch"], "json", 30)
    assert not (tmp_path / "o").exists()  # validation and the probe write nothing


def test_rotary_check_catches_an_ignored_axis():
    import torch

    from structpos.encoders import StructuralRoPE

    rope = StructuralRoPE(8, 2)

    def drops_axis_1(q, k, coords):
        return rope(q, k, torch.stack([coords[..., 0], torch.zeros_like(coords[..., 0])], -1))

    q, k = torch.randn(1, 3, 1, 8), torch.randn(1, 3, 1, 8)
    coords = torch.tensor([[[0.0, 1.0], [1.0, 2.0], [2.0, 0.0]]])
    fuzz._rotary_checks(rope, q, k, coords, rope(q, k, coords), {})  # the real encoder passes
    with pytest.raises(AssertionError, match="axis 1 of 2 is ignored"):
        fuzz._rotary_checks(drops_axis_1, q, k, coords, drops_axis_1(q, k, coords), {})


def test_child_probe_bounds_time_and_memory():
    import time

    assert fuzz._in_child(lambda: 41 + 1, 30) == ("done", 42)
    assert fuzz._in_child(lambda: time.sleep(60), 0.5) == ("timed out", None)
    with pytest.raises(fuzz._ChildError) as e:
        fuzz._in_child(lambda: bytearray(8 * 2**30), 30, memory_bytes=2 * 2**30)
    assert e.value.type_name == "MemoryError"


@pytest.mark.parametrize("target", fuzz.ARG_TARGETS)
def test_run_args_counts_every_case_once(target):
    r = fuzz.run_args(target, 40, seed=1, timeout=30)
    assert r["ok"] + r["structpos_errors"] + r["other"] == r["inputs"] == 40
    assert sum(r["by_class"].values()) == r["structpos_errors"] and sum(r["other_by_type"].values()) == r["other"]
    assert r["ok"] > 0 and r["structpos_errors"] > 0  # both sides of the contract are reached


def test_hostile_options_are_the_ones_to_refuse():
    assert fuzz.hostile_options({"head_dim": 8, "num_axes": 2, "base": 10000.0, "K": 0, "max_distance": 0}) == []
    # a huge base is legitimate where no frequency underflows (head_dim = 2: the one pair has ω = 1)
    assert fuzz.hostile_options({"head_dim": 2, "base": 1e308}) == [] and fuzz.hostile_options({"base": 1.0})
    assert fuzz.hostile_options({"scale": 1e-300, "learnable": "yes", "token_axis": -1}) == [
        "scale=1e-300",
        "learnable='yes'",
    ]
    found = fuzz.hostile_options(
        {"head_dim": "8", "num_axes": True, "k": 0, "dim": 2.5, "base": float("inf"), "scale": -1.0}
    )
    assert found == ["head_dim='8'", "num_axes=True", "k=0", "dim=2.5", "base=inf", "scale=-1.0"]


@pytest.mark.parametrize("target", fuzz.ARG_TARGETS)
def test_argument_fuzz_finds_no_escape_and_no_hostile_option_accepted(target):
    """A bounded run of ``benchmarks/fuzz.py --args`` (the full one: ``--n 2000 --seed 100``, see RESULTS.md)
    stays at 0: every case works, or fails with a StructposError / usage exit; no encoder builds with
    an option :func:`fuzz.hostile_options` lists. 200 cases per target, a per-case limit far above need."""
    r = fuzz.run_args(target, 200, seed=100, timeout=60)
    assert r["other"] == 0, r["findings"]
    assert r["accepted_hostile"] == {}
    assert r["ok"] > 0 and r["structpos_errors"] > 0
