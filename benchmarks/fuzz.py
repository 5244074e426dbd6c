"""Fuzz every parser: N inputs each, count structpos errors and anything else.

Two engines feed the same harness:

* ``mutate`` (default, fast): a seeded, structure-aware mutation fuzzer. Each input starts
  from a valid seed of the parser's format and gets 1-6 random edits: insert a format token
  or a hostile fragment (lone surrogates, NUL, BOMs, combining marks, RTL marks, ``\\r``),
  delete / duplicate / swap ranges, splice another seed, repeat a fragment hundreds to
  thousands of times (deep nesting, huge spans, giant rows), or replace everything by random
  bytes. A quarter of the inputs go in as bytes (some not valid UTF-8).
* ``hypothesis``: the strategies of ``tests/test_parsers_property.py`` (slower per input).

Two more families fuzz the parsers' input space rather than a format (:data:`FAMILIES`):
``decoding`` writes a seed of some kind as a file in some encoding (UTF-8/16/32 with or
without a BOM, Latin-1, ...), under a PEP 263 line or an XML declaration naming some codec
(text codecs, ``rot13``/``hex``/``zlib_codec``, unknown names), and checks that ``parse(path)``
and the command line's reader (``read_records``) read the same text or fail with the same
ParseError; ``input-types`` passes objects no parser reads as text (``None``, numbers, lists,
paths that are no regular file) and odd options (``directed="maybe"``), which must give a
Structure or a StructposError, never a TypeError.

For every input the parser either returns Structures that pass ``validate()`` with spans
inside the source and ``parent[i] < i`` (``ok``), or raises a
:class:`~structpos.exceptions.StructposError` (``structpos``: counted per class). Anything
else — another exception, an invalid Structure, an input running past ``--timeout`` seconds
— is a finding: counted under ``other``, the first few written to ``--findings`` for replay.

    nice -n 10 python benchmarks/fuzz.py --n 100000 [--parsers json,xml] [--jobs 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from structpos.exceptions import ParseError, StructposError
from structpos.limits import Limits

# small limits keep hostile inputs cheap; the limits' own paths get exercised too
LIMITS = Limits(max_input_bytes=2**20, max_nodes=200_000, max_table_cells=200_000, record_timeout=5.0)

HOSTILE = [
    "\ud800",
    "\udfff",
    "\x00",
    "\ufeff",
    "\u202e",
    "\u0301" * 5,
    "\r",
    "\r\n",
    "\t",
    "\x0b",
    "\x1f",
    "\u2028",
    "\U0001f600",
    "é",
    "ß",
    "\u00a0",
    "\uffff",
    "\\",
    "\\u",
    "\\ud800",
    '"',
    "'",
    "<",
    ">",
    "&",
    ";",
    "#",
    "\n\n",
    " " * 8,
    "\u3000",
    "𝔘",
]

ARITH = r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul
?atom: NUMBER -> number | "(" sum ")" | NAME -> var
%import common.INT -> NUMBER
%import common.CNAME -> NAME
%import common.WS
%ignore WS
"""

SEEDS = {
    "json": [
        '{"a": [1, 2.5e3, true, null], "b": {"c": "x\\u00e9\\ud83d\\ude00"}}',
        "[[], {}, [[[-0.0]]]]",
        '"s"',
        '{"k\\ud800": "\\udfff", "": [NaN, Infinity]}',
    ],
    "xml": [
        '<?xml version="1.0"?><a x="1"><b/>t&amp;u<![CDATA[<z>]]><!-- c --><?pi d?></a>',
        "<!DOCTYPE r [<!ENTITY e \"v\">]><r><s>&e;</s><s k='&e;'/></r>",
        "<a><b><c>deep</c></b></a>",
    ],
    "yaml": [
        "a: [1, 2]\nb:\n  c: &x {d: e}\n  f: *x\n",
        "- 1\n- - 2\n  - 3\n---\nk: v\n",
        '"q\\ud800": 2001-01-01\n? [a]\n: b\n',
    ],
    "code": [
        "def f(x):\n    return [y for y in x if y]\n",
        "class A:\n  @d\n  def g(self): ...\n",
        "# -*- coding: latin-1 -*-\ns = 'x'\n",
        "int main() { return 0; }\n",
    ],
    "csv": ['a,b,"c ""q"""\n1,2,3\r\n"x\ny",,\n', "h1\th2\nv1\tv2\n", 'a,<table>,"<td rowspan=9>"\n'],
    "html": [
        "<table><thead><tr><th>a<th colspan=2>b</thead><tr><td rowspan=2>1<td>2<td>3<tr><td>4</table>",
        "<table><tr><td><table><tr><td>in</table></td><td style='display:none'>h</td></tr></table>",
        "<p>x</p><table><caption>c</caption><tbody><tr><td rowspan=0>z</td></tr></tbody></table>",
    ],
    "document": [
        "Dr. Smith went to Washington. He said: \u201chi!\u201d\n\nNew para... e.g. this one? Yes.",
        "3.14 isn't 1,000 — ok.",
    ],
    "markdown": ["# Title\n\nText here.\n\n## Sub\n\n```py\ncode\n```\n\nSetext\n===\n\n---\n", "### a ###\n#\n~~~\nx"],
    "conllu": [
        "# sent_id = 1\n# text = Don't go.\n1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tDo\tdo\tAUX\t_\t_\t3\taux\t_\t_\n"
        "2\tn't\tnot\tPART\t_\t_\t3\tadvmod\t_\t_\n3\tgo\tgo\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No\n"
        "4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_\n\n",
        "1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n1.1\tb\tb\tX\t_\t_\t_\t_\t0:root\t_\n2\tc\tc\tX\t_\t_\t1\tdep\t_\t_\n\n",
    ],
    "grammar": ["1 + 2 * (3 - x)", "((((4))))", "a*b+c"],
}
TOKENS = {
    "json": list('{}[],:"') + ["true", "false", "null", "-", "1e999", "0.", '"\\', "NaN", "\\ud800", '"\\uZZ"'],
    "xml": [
        "<a>",
        "</a>",
        "<b/>",
        "<![CDATA[",
        "]]>",
        "<!--",
        "-->",
        "<?p ",
        "?>",
        "&amp;",
        "&e;",
        "&#0;",
        "&#x10FFFF;",
        '="',
        "<!DOCTYPE a [",
        "]>",
        "<!ENTITY e '<b/>'>",
        "xmlns:p='u'",
        "<p:x>",
    ],
    "yaml": [
        ": ",
        "- ",
        "&a ",
        "*a",
        "!!int ",
        "!!binary ",
        "? ",
        "{",
        "}",
        "[",
        "]",
        "'",
        "|\n",
        ">-\n",
        "---\n",
        "...\n",
        "%YAML 1.1\n",
        "<<: *a\n",
        "!!python/object ",
        "\t",
        "0x",
        "2001-13-45",
    ],
    "code": [
        "(",
        ")",
        ":",
        "\n    ",
        "def ",
        "class ",
        "'''",
        '"',
        "\\\n",
        "lambda",
        "@",
        "async ",
        "{",
        "}",
        ";",
        "/*",
        "#",
        "# coding: bogus\n",
        "\x0c",
    ],
    "csv": [",", '"', '""', "\n", "\r", "\t", "<table", "<td rowspan=9>", "\\"],
    "html": [
        "<table>",
        "</table>",
        "<tr>",
        "</tr>",
        "<td>",
        "<th>",
        "</td>",
        "<thead>",
        "<tbody>",
        "<tfoot>",
        "<td rowspan=65534>",
        "<td colspan=1000>",
        "<td rowspan=0>",
        "<td colspan=-1>",
        "<td rowspan='x'>",
        "<br>",
        "<script>",
        "</script>",
        "<style>",
        "<!--",
        "-->",
        "&nbsp;",
        "<![CDATA[",
        "<td style='display:none'>",
    ],
    "document": [". ", "? ", "! ", "Mr. ", "e.g. ", "U.S. ", "\n\n", "...", "\u2026", "don't", "3.14", "'", "\u201d"],
    "markdown": ["# ", "###### ", "\n===\n", "\n---\n", "```", "~~~", "\n\n", "    ", "***", "> ", "- ", "1. "],
    "conllu": ["\t", "\n", "\n\n", "# text = ", "# sent_id = ", "1-2", "0", "_", "1.1", "SpaceAfter=No", "-1", "99"],
    "grammar": ["(", ")", "+", "*", "-", "1", "x", " ", "\n"],
}
# slowest first, so parallel jobs finish together
PARSERS = ["code", "html", "yaml", "document", "markdown", "csv", "conllu", "grammar", "xml", "json", "graph", "spacy"]
PARSERS += ["decoding", "input-types"]  # the input space: encodings, declared codecs, odd objects (FAMILIES)


# ------------------------------------------------------------------ text inputs
def _mutate(rng: random.Random, seeds: list[str], tokens: list[str]) -> str:
    s = rng.choice(seeds)
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4, 6])):
        op = rng.random()
        i = rng.randint(0, len(s))
        j = rng.randint(i, min(len(s), i + 40))
        if op < 0.30:
            s = s[:i] + rng.choice(tokens) + s[i:]
        elif op < 0.42:
            s = s[:i] + rng.choice(HOSTILE) + s[i:]
        elif op < 0.55:
            s = s[:i] + s[j:]
        elif op < 0.65:
            s = s[:i] + s[i:j] * rng.randint(2, 5) + s[i:]
        elif op < 0.72:
            other = rng.choice(seeds)
            k = rng.randint(0, len(other))
            s = s[:i] + other[k : k + rng.randint(0, 60)] + s[j:]
        elif op < 0.80:  # deep nesting / huge rows / huge spans
            frag = rng.choice(tokens)
            s = s[:i] + frag * rng.choice([100, 1000, 5000]) + s[i:]
        elif op < 0.88:
            s = (
                s[:i]
                + "".join(
                    chr(rng.choice([rng.randint(0, 127), rng.randint(0, 0x2FFF), rng.randint(0, 0x10FFFF)]))
                    for _ in range(rng.randint(1, 8))
                )
                + s[i:]
            )
        elif op < 0.94:
            s = s[:i] + s[j:] + s[i:j]  # move a range
        else:
            s = s[: rng.randint(0, len(s))]  # truncate
    return s[:200_000]


def _as_input(rng: random.Random, text: str):
    r = rng.random()
    if r < 0.18:
        return text.encode("utf-8", "surrogatepass")  # lone surrogates become invalid UTF-8 bytes
    if r < 0.22:
        b = bytearray(text.encode("utf-8", "replace"))
        for _ in range(rng.randint(1, 4)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if r < 0.24:
        return text.encode("utf-16", "surrogatepass")
    return text


# ------------------------------------------------------------------ object inputs
def _graph_input(rng: random.Random):
    e = rng.choice([0, 1, 2, 5, 20])
    pool = [0, 1, 2, 3, -1, 10, 2**31, 10_000_000, 2**63 - 1, 1.5, float("nan"), 1e300]

    def node():
        return rng.choice(pool) if rng.random() < 0.2 else rng.randint(0, 8)

    shape = rng.random()
    if shape < 0.8:
        ei = [[node() for _ in range(e)], [node() for _ in range(e)]]
    elif shape < 0.9:
        ei = [[node() for _ in range(e)], [node() for _ in range(max(0, e - 1))]]  # ragged
    else:
        ei = [[node() for _ in range(e)]]
    kw = {}
    if rng.random() < 0.3:
        kw["num_nodes"] = rng.choice([0, 1, 9, 100, -1, 10_000_000, 2**40])
    if rng.random() < 0.3:
        kw["edge_weight"] = [
            rng.choice([1.0, 0.0, -1.0, float("nan"), float("inf"), 2.5]) for _ in range(rng.choice([e, e + 1]))
        ]
    if rng.random() < 0.2:
        kw["directed"] = rng.random() < 0.5
    if rng.random() < 0.1:
        import networkx as nx

        G = nx.gnm_random_graph(rng.randint(0, 12), rng.randint(0, 20), seed=rng.randint(0, 10**6))
        for u, v in G.edges:
            G[u][v]["weight"] = rng.choice([1, 2.5, -1, "x", None, float("nan")])
        return G, {}
    return ei, kw


class _Doc(list):
    text = ""


def _spacy_input(rng: random.Random):
    words = [rng.choice(["a", "bb", "ç", "d.", "\U0001f600", ""]) for _ in range(rng.randint(0, 8))]
    text = " ".join(words)
    toks, idx = [], 0
    for i, w in enumerate(words):
        toks.append(
            SimpleNamespace(i=i, text=w, idx=idx if rng.random() < 0.9 else rng.randint(-2, 40), dep_="dep", pos_="X")
        )
        idx += len(w) + 1
    for t in toks:
        r = rng.random()
        t.head = (
            t if r < 0.2 else (toks[rng.randrange(len(toks))] if r < 0.9 else SimpleNamespace(i=rng.randint(-3, 50)))
        )
    doc = _Doc(toks)
    doc.text = text if rng.random() < 0.9 else text[:-1]
    return doc


# ------------------------------------------------------------------ decoding and input types (the parsers' input space)
# Codecs a coding line or an XML declaration may name: text codecs, codecs that are not text
# encodings (rot13, hex, zlib_codec: a ParseError naming the line), unknown names, and codecs
# that fail their own way ("undefined" raises UnicodeError on any use).
DECLARED_CODECS = [
    "utf-8", "latin-1", "cp1252", "shift_jis", "koi8-r", "utf-16", "utf-32", "utf-7", "ascii",
    "rot13", "hex", "zlib_codec", "base64", "uu", "bz2_codec", "quopri", "undefined",
    "unicode_escape", "raw_unicode_escape", "idna", "punycode", "nosuch", "uft-8", "",
]  # fmt: skip
# How the bytes are written: codec, and whether a byte-order mark goes first.
BYTE_FORMS = [
    ("utf-8", False), ("utf-8", True), ("utf-16-le", False), ("utf-16-be", False), ("utf-16-le", True),
    ("utf-16-be", True), ("utf-32-le", False), ("utf-32-be", True), ("latin-1", False), ("cp1252", False),
]  # fmt: skip
DECODING_KINDS = {
    "code": ".py",
    "xml": ".xml",
    "json": ".json",
    "yaml": ".yaml",
    "markdown": ".md",
    "conllu": ".conllu",
}


def _decoding_input(rng: random.Random):
    """Bytes of a seed of some kind, in some encoding, maybe under a declaration naming some codec: ``(bytes, kw)``."""
    kind = rng.choice(sorted(DECODING_KINDS))
    text = _mutate(rng, SEEDS[kind], TOKENS[kind]) if rng.random() < 0.3 else rng.choice(SEEDS[kind])
    declared = rng.choice(DECLARED_CODECS)
    if kind == "code" and rng.random() < 0.7:
        line = rng.choice(
            [f"# -*- coding: {declared} -*-\n", f"# coding={declared}\n", f"#!/bin/py\n# coding: {declared}\n"]
        )
        text = line + text.split("\n", 1)[-1] if text.startswith("# -*- coding") else line + text
    elif kind == "xml" and rng.random() < 0.7:
        body = text.split("?>", 1)[-1] if text.startswith("<?xml") else text
        text = f'<?xml version="1.0" encoding="{declared}"?>' + body
    codec, bom = rng.choice(BYTE_FORMS)
    data = (("\ufeff" if bom else "") + text).encode(codec, "replace")
    if rng.random() < 0.1:
        data = data[: rng.randint(0, len(data))]  # cut mid-character
    return data, {"kind": kind}


def _call_decoding(data: bytes, kw: dict):
    """Parse ``data`` as a file, through the API and through the command line's reader; they must agree.

    Either both read the same text (and the API's Structure is returned for the usual checks) or
    both fail with the same ParseError; anything else is an AssertionError (a finding).
    """
    import tempfile

    from structpos.parsers import parse
    from structpos.pipeline.records import read_records

    kind = kw["kind"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"in{DECODING_KINDS[kind]}"
        path.write_bytes(data)
        records = list(read_records(d, kind=kind))
        try:
            out = parse(path, kind, name=path.name, limits=LIMITS)
        except StructposError as e:
            if isinstance(e, ParseError) and e.input_name == path.name and e.position is not None:
                if str(e.position).startswith(("byte", "line ")):  # a decoding error: the reader must fail alike
                    assert records and records[0].read_error == ("ParseError", str(e)), (records[:1], str(e))
            raise
    texts = [s.source for s in (out if isinstance(out, list) else [out])]
    if kind == "conllu":
        assert all(r.read_error is None for r in records), records[:1]
        by_record = [t.source for r in records for t in parse(r.payload, "conllu", limits=LIMITS)]
        assert by_record == texts, "the CLI reader's sentences and the API's differ"
    else:
        assert len(records) == 1 and records[0].read_error is None, records[:1]
        assert records[0].payload == texts[0], "the CLI reader and the API decoded the file differently"
    return out


ODD_KINDS = ["code", "json", "xml", "yaml", "conllu", "document", "markdown", "grammar", "table", "graph"]


def _odd_value(rng: random.Random):
    """A Python object no parser reads as text, or a path that is no regular file."""
    return rng.choice(
        [
            None, 0, -1, 1.5, float("nan"), True, [], [[0, 1]], {}, {"a": 1}, (), object(), b"", bytearray(b"[1]"),
            memoryview(b"[1]"), Path("/nonexistent/x.json"), Path("/"), Path("/dev/null"), Path(""), "", "\x00",
        ]
    )  # fmt: skip


def _input_type_input(rng: random.Random):
    """An odd object for some kind, sometimes with an odd option (``directed="maybe"``): ``(obj, kw)``."""
    kind = rng.choice(ODD_KINDS)
    kw: dict = {"kind": kind}
    if kind == "graph" and rng.random() < 0.5:
        kw["directed"] = rng.choice(["maybe", "false", 1, 0, None, True, [True], float("nan")])
        return rng.choice([[[0, 1], [1, 2]], _odd_value(rng)]), kw
    if kind == "json" and rng.random() < 0.2:
        kw["from_object"] = rng.choice([True, False])
    if kind == "table" and rng.random() < 0.5:
        kw["format"] = rng.choice(["csv", "tsv", "html", "rows", "dataframe"])
    return _odd_value(rng), kw


def _call_input_type(obj, kw: dict):
    """``parse(obj, kind)`` for an odd object: a Structure, or a StructposError (never TypeError / AttributeError)."""
    from structpos.parsers import parse

    kw = dict(kw)
    kind = kw.pop("kind")
    opts = {"code": {"language": "python"}, "grammar": {"grammar": ARITH}}.get(kind, {})
    return parse(obj, kind, limits=LIMITS, **opts, **kw)


# family -> (input maker, caller): fuzzed like the parsers, with the same harness and checks
FAMILIES = {"decoding": (_decoding_input, _call_decoding), "input-types": (_input_type_input, _call_input_type)}


# ------------------------------------------------------------------ harness
def _call(kind: str, obj, kw: dict):
    from structpos.parsers import parse

    if kind in FAMILIES:
        return FAMILIES[kind][1](obj, kw)
    if kind == "csv":
        return parse(obj, "table", format=rng_choice_format(kw), limits=LIMITS)
    if kind == "html":
        return parse(obj, "table", format="html", limits=LIMITS)
    if kind == "code":
        return parse(obj, "code", language=kw.pop("language", "python"), limits=LIMITS, **kw)
    if kind == "grammar":
        return parse(obj, "grammar", grammar=ARITH, parser=kw.get("parser", "lalr"), limits=LIMITS)
    if kind in ("graph", "spacy"):
        return parse(obj, kind, limits=LIMITS, **kw)
    return parse(obj, kind, limits=LIMITS)


def rng_choice_format(kw: dict) -> str:
    return kw.get("format", "csv")


def make_input(kind: str, rng: random.Random):
    """One fuzz input for ``kind``: ``(object, keyword options)``."""
    if kind in FAMILIES:
        return FAMILIES[kind][0](rng)
    if kind == "graph":
        return _graph_input(rng)
    if kind == "spacy":
        return _spacy_input(rng), {}
    text = _mutate(rng, SEEDS[kind], TOKENS[kind])
    kw: dict = {}
    if kind == "code":
        kw = {
            "language": rng.choice(["python", "python", "javascript", "c", "rust"]),
            "named_only": rng.random() < 0.3,
            "fields": rng.random() < 0.3,
        }
    elif kind == "csv":
        kw = {"format": rng.choice(["csv", "csv", "tsv"])}
    elif kind == "grammar":
        kw = {"parser": "earley" if rng.random() < 0.1 else "lalr"}
    return _as_input(rng, text), kw


def check_structure(s) -> None:
    """The invariants every returned Structure must hold (AssertionError otherwise)."""
    s.validate()
    n = s.num_nodes
    if s.parent is not None:
        assert np.all(s.parent < np.arange(n)), "parent[i] < i (preorder)"
    has = s.start >= 0
    if s.source is not None:
        assert np.all(s.end[has] <= len(s.source)) and np.all(s.start[has] <= s.end[has]), "spans inside the source"
    for label in s.labels:
        str(label).encode("utf-8")  # labels must encode (Arrow, tokenizers)


class _Timeout(Exception):
    pass


class _Invalid(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def run_parser(kind: str, n: int, seed: int, timeout: float, findings_max: int = 20) -> dict:
    """Fuzz one parser ``n`` times; return its counts and the first findings."""
    rng = random.Random(f"{seed}:{kind}")
    counts: Counter = Counter()
    structpos_errors: Counter = Counter()
    other: Counter = Counter()
    findings = []
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    for k in range(n):
        obj, kw = make_input(kind, rng)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            out = _call(kind, obj, dict(kw))
            try:
                for s in out if isinstance(out, list) else [out]:
                    check_structure(s)
            except Exception as e:
                raise _Invalid(f"{type(e).__name__}: {e}") from e
            counts["ok"] += 1
        except _Invalid as e:
            other["InvalidStructure"] += 1
            if len(findings) < findings_max:
                findings.append(
                    {
                        "kind": kind,
                        "i": k,
                        "error": f"invalid structure: {e}"[:500],
                        "input": repr(obj)[:5000],
                        "kw": repr(kw),
                    }
                )
        except StructposError as e:
            structpos_errors[type(e).__name__] += 1
        except _Timeout:
            other["Timeout"] += 1
            if len(findings) < findings_max:
                findings.append(
                    {"kind": kind, "i": k, "error": f"timeout > {timeout}s", "input": repr(obj)[:5000], "kw": repr(kw)}
                )
        except Exception as e:
            key = f"{type(e).__name__}"
            other[key] += 1
            if len(findings) < findings_max:
                findings.append(
                    {
                        "kind": kind,
                        "i": k,
                        "error": f"{type(e).__name__}: {e}"[:500],
                        "input": repr(obj)[:5000],
                        "kw": repr(kw),
                        "traceback": traceback.format_exc()[-3000:],
                    }
                )
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if (k + 1) % 10_000 == 0:  # a heartbeat with the counts so far (stderr)
            print(
                f"[{kind}] {k + 1}/{n}: ok {counts['ok']}, structpos {sum(structpos_errors.values())}, "
                f"other {sum(other.values())}, {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    return {
        "parser": kind,
        "inputs": n,
        "ok": counts["ok"],
        "structpos_errors": sum(structpos_errors.values()),
        "by_class": dict(structpos_errors),
        "other": sum(other.values()),
        "other_by_type": dict(other),
        "seconds": round(time.perf_counter() - t0, 1),
        "findings": findings,
    }


def _run_job(args):
    return run_parser(*args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="inputs per parser")
    ap.add_argument("--parsers", default=",".join(PARSERS), help=f"comma-separated subset of {','.join(PARSERS)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="parsers fuzzed in parallel processes")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per input before it counts as a finding")
    ap.add_argument("--findings", default="fuzz_findings.jsonl", help="where to write the first findings per parser")
    ap.add_argument("--json", default=None, help="also write the counts as JSON here")
    args = ap.parse_args(argv)
    kinds = [k for k in args.parsers.split(",") if k]
    unknown = set(kinds) - set(PARSERS)
    if unknown:
        ap.error(f"unknown parsers: {', '.join(sorted(unknown))}")
    jobs = [(k, args.n, args.seed, args.timeout) for k in kinds]
    header = f"{'parser':10s} {'inputs':>8s} {'ok':>8s} {'structpos':>10s} {'other':>6s}  seconds  structpos classes / other types"
    print(header, flush=True)
    results = []
    with open(args.findings, "w") as fh:

        def report(r: dict) -> None:  # each parser's line as soon as it is done
            results.append(r)
            print(
                f"{r['parser']:10s} {r['inputs']:8d} {r['ok']:8d} {r['structpos_errors']:10d} {r['other']:6d} "
                f"{r['seconds']:8.1f}  {r['by_class']} {r['other_by_type'] or ''}",
                flush=True,
            )
            for f in r["findings"]:
                fh.write(json.dumps(f) + "\n")
            fh.flush()

        if args.jobs > 1:
            with mp.get_context("fork").Pool(args.jobs, maxtasksperchild=1) as pool:
                for r in pool.imap_unordered(_run_job, jobs, chunksize=1):
                    report(r)
        else:
            for j in jobs:
                report(_run_job(j))
    total_other = sum(r["other"] for r in results)
    print(f"total: {sum(r['inputs'] for r in results)} inputs, {total_other} exceptions other than structpos's own")
    if args.json:
        Path(args.json).write_text(
            json.dumps([{k: v for k, v in r.items() if k != "findings"} for r in results], indent=1)
        )
    return 1 if total_other else 0


if __name__ == "__main__":
    sys.exit(main())
