"""Text-format parsers vs the tools they build on, in one run.

* JSON: ``parse_json`` (tree with character spans) vs ``json.loads`` (C, no offsets) on a
  synthetic records file and the real JSON files of site-packages — the price of offsets; one
  row for the compiled scanner (``structpos._native_json``, when built) and one for the
  pure-Python paths (``structpos.native.pure_python``).
* lark: LALR vs Earley through ``parse_grammar`` on an arithmetic grammar (anchor: LALR is
  ~12x faster than Earley on JSON).
* CoNLL-U: ``parse_conllu`` (trees + rebuilt offsets) vs bare ``conllu.parse`` on UD EWT dev (CPU
  time, interleaved; "anchor missing" without the ``conllu`` package).
* Documents: ``parse_document`` / ``parse_markdown`` throughput on the UD dev ``# text`` lines.

    python benchmarks/bench_text_parsers.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path

try:
    import conllu
except ImportError:  # the anchor of the CoNLL-U row (structpos's "text" extra installs it)
    conllu = None

from structpos.native import native_module, pure_python
from structpos.parsers.conllu_tree import parse_conllu
from structpos.parsers.document import parse_document
from structpos.parsers.grammar import parse_grammar
from structpos.parsers.json_tree import parse_json
from structpos.parsers.markdown import parse_markdown

UD = (
    Path(os.environ.get("STRUCTPOS_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    / "data"
    / "ud_en_ewt"
    / "en_ewt-ud-dev.conllu"
)
ARITH = r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul
?atom: NUMBER -> number | "(" sum ")"
%import common.INT -> NUMBER
%import common.WS
%ignore WS
"""


def best(fn, repeat: int) -> float:
    """Best CPU time of `repeat` runs (CPU, not wall: the machine may be shared)."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def interleaved(fns, repeat: int) -> list[float]:
    """Best CPU time of each function, the functions run in turn ``repeat`` times (load drift hits all alike)."""
    best_t = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = time.process_time()
            fn()
            best_t[i] = min(best_t[i], time.process_time() - t)
    return best_t


def real_json_files() -> list[str]:
    """Every ``*.json`` of at least 20 kB in this environment's site-packages (SBOMs, schemas, test data)."""
    import sysconfig

    root = Path(sysconfig.get_paths()["purelib"])
    out = []
    for p in sorted(root.rglob("*.json")):
        if p.stat().st_size >= 20_000:
            try:
                text = p.read_text(encoding="utf-8")
                json.loads(text)
            except (UnicodeDecodeError, ValueError):
                continue
            out.append(text)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    scale = 10 if a.quick else 1

    rows = [
        {"id": i, "name": f"item {i}", "tags": ["a", "b"], "price": i * 0.25, "ok": i % 2 == 0, "note": None}
        for i in range(50_000 // scale)
    ]
    text = json.dumps(rows, indent=1)
    n_nodes = len(parse_json(text))
    real = real_json_files()
    size = sum(map(len, real)) / 1e6
    # the compiled scanner (when built) and the pure-Python paths, each against json.loads
    for path, ctx in (("native", contextlib.nullcontext), ("pure", pure_python)):
        if path == "native" and native_module("json") is None:
            print("json     native: structpos._native_json is not built (pure-Python paths only)")
            continue
        with ctx():
            t_ours, t_ref = interleaved([lambda: parse_json(text), lambda: json.loads(text)], a.repeat)
            print(
                f"json     {path:6s} {len(text) / 1e6:.2f} MB, {n_nodes} nodes: parse_json {t_ours:.3f}s "
                f"({len(text) / t_ours / 1e6:.2f} MB/s, {n_nodes / t_ours / 1e3:.0f}k nodes/s), "
                f"json.loads {t_ref:.3f}s, ratio {t_ours / t_ref:.2f}x"
            )
            if real:
                t_ours, t_ref = interleaved(
                    [lambda: [parse_json(t) for t in real], lambda: [json.loads(t) for t in real]], a.repeat
                )
                print(
                    f"json     {path:6s} {len(real)} real files >= 20 kB from site-packages ({size:.2f} MB): "
                    f"parse_json {t_ours:.3f}s, json.loads {t_ref:.3f}s, ratio {t_ours / t_ref:.2f}x"
                )
    deep = 100_000
    t_deep = best(lambda: parse_json("[" * deep + "]" * deep), 1)
    print(f"json     {deep}-deep nesting: {t_deep:.3f}s")

    expr = " + ".join(f"({i} * {i + 1} - {i})" for i in range(2000 // scale))
    t_lalr = best(lambda: parse_grammar(expr, ARITH, parser="lalr"), a.repeat)
    t_earley = best(lambda: parse_grammar(expr, ARITH, parser="earley"), 1)
    print(
        f"lark     {len(expr)} chars: lalr {t_lalr:.3f}s, earley {t_earley:.3f}s, earley/lalr {t_earley / t_lalr:.1f}x (anchor ~12x on JSON)"
    )

    raw = UD.read_text(encoding="utf-8")
    if a.quick:
        raw = raw[: len(raw) // scale].rsplit("\n\n", 1)[0] + "\n\n"
    if conllu is None:
        print("conllu   anchor missing (the conllu package is not installed)")
    else:
        parsed = parse_conllu(raw)
        n_sent, n_words = len(parsed), sum(len(s) for s in parsed)
        t_ours, t_ref = interleaved([lambda: parse_conllu(raw), lambda: conllu.parse(raw)], a.repeat)
        print(
            f"conllu   {n_sent} sentences, {n_words} words ({len(raw) / 1e6:.2f} MB): parse_conllu {t_ours:.3f}s, "
            f"conllu.parse {t_ref:.3f}s, ratio {t_ours / t_ref:.2f}x"
        )

    paras, cur = [], None
    for line in raw.splitlines():
        if line.startswith("# newdoc") or line.startswith("# newpar"):
            cur = []
            paras.append(cur)
        elif line.startswith("# text = ") and cur is not None:
            cur.append(line[9:])
    doc = "\n\n".join(" ".join(p) for p in paras if p)
    for name, fn in (("document", parse_document), ("markdown", parse_markdown)):
        t = best(lambda fn=fn: fn(doc), a.repeat)
        print(f"{name:8s} {len(doc) / 1e3:.0f}k chars, {len(fn(doc))} nodes: {t:.3f}s ({len(doc) / t / 1e6:.2f} MB/s)")


if __name__ == "__main__":
    main()
