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
import math
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
    if kind == "conllu" and not texts:  # no sentence: the reader's one error record, so that the file is not lost
        assert [r.read_error[0] if r.read_error else None for r in records] == ["InputError"], records[:1]
    elif kind == "conllu":
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


# ------------------------------------------------------------------ argument fuzz: encoders and CLI options
# Not inputs to parse but the options users type: encoder constructor arguments (and the tensors they
# then meet) and `structpos encode` options. Every registered encoder is covered: six with hand-written
# option pools and checks of the output (rope, hier_rope, wire, aw_rope, lap_pe, spd_bias), the others with
# options drawn from their constructor's signature (`_signature_options`) and one forward call. A case ends in one of: accepted and working (``ok``), a
# StructposError or argparse's usage exit (``structpos``), or a finding (``other``): any other exception
# (an *escape*), or a silent wrong answer the checks below catch.

ARG_TARGETS = ["cli", "encoders"]  # cli first: its probe forks, best before torch starts threads

_ODD = [None, True, "8", 2.5, float("nan")]  # wrong types, for every numeric option now and then


def _pick(rng: random.Random, good: list, bad: list, p_bad: float = 0.35):
    return rng.choice(bad if rng.random() < p_bad else good)


def encoder_options(rng: random.Random, name: str) -> dict:
    """Random constructor options for the registered encoder ``name`` (each present with some chance).

    Values are drawn from what the encoder accepts and from what it should refuse: zero, negative,
    odd, huge, non-finite, wrong types, unknown choices, sections that do not add up.
    """
    dims = [2, 4, 8, 16, 32, 64]
    bad_dims = [0, -8, 7, 1, 3, 2**40, *_ODD]
    counts = [1, 2, 3, 4, 8]
    bad_counts = [0, -1, 5, 100, 2**40, *_ODD]
    reals = [10000.0, 100.0, 2.0, 0.5]
    bad_reals = [0.0, -1.0, 1.0, float("inf"), float("-inf"), float("nan"), 1e-300, 1e308, "x"]
    layouts, bad_layouts = ["half", "interleaved"], ["bogus", "", None]
    allocations, bad_allocations = ["sectioned", "interleaved", "per_head", "mixed"], ["diagonal", "", None]
    sections = [[2, 2], [1, 1, 2], [4], [2, 2, 0], [-2, 6], [], [1, 1, 1], [100], [2**40, 1], [2.5, 1.5], "22"]
    opts: dict = {}

    def maybe(key: str, make, p: float = 0.6) -> None:
        if rng.random() < p:
            opts[key] = make()

    def dim():
        return _pick(rng, dims, bad_dims)

    def flag():
        return _pick(rng, [True, False], ["yes", 2, None], 0.2)

    if name in ("rope", "hier_rope"):
        maybe("head_dim", dim, 0.95)
        if name == "rope":
            maybe("num_axes", lambda: _pick(rng, counts, bad_counts), 0.95)
            maybe("max_table_extent", lambda: _pick(rng, [64, 262144], [0, -1, 2**62, 1.5]), 0.1)
        else:
            presets = ["document", "code", "table", ("a", "b"), ["x", "y", "z", "w"]]
            maybe("levels", lambda: _pick(rng, presets, ["bogus", [], "", ("a", "a"), 3]))
        maybe("allocation", lambda: _pick(rng, allocations, bad_allocations))
        maybe("sections", lambda: rng.choice(sections), 0.3)
        maybe("base", lambda: _pick(rng, reals, bad_reals))
        maybe("layout", lambda: _pick(rng, layouts, bad_layouts), 0.3)
        maybe("num_heads", lambda: _pick(rng, [1, 2, 4], [0, -1, 3, 2**40]), 0.3)
        maybe("learnable", flag, 0.2)
        maybe("qk_layout", lambda: _pick(rng, ["blhd", "bhld"], ["hbld", None]), 0.2)
    elif name == "wire":
        maybe("head_dim", dim, 0.95)
        maybe("k", lambda: _pick(rng, counts, bad_counts), 0.95)
        maybe("base", lambda: _pick(rng, reals, bad_reals))
        maybe("scale", lambda: _pick(rng, [1.0, 64.0, 0.01], bad_reals))
        maybe("layout", lambda: _pick(rng, layouts, bad_layouts), 0.3)
        maybe("learnable", flag, 0.2)
        maybe("qk_layout", lambda: _pick(rng, ["blhd", "bhld"], ["hbld", None]), 0.2)
    elif name == "aw_rope":
        maybe("head_dim", dim, 0.95)
        maybe("z", lambda: _pick(rng, [0.0, 0.5, 0.8], [1.0, 1.5, -0.5, float("nan"), float("inf")]))
        maybe("K", lambda: _pick(rng, [0, 1, 4, 8], [-1, 2**40, 2.5, None]))
        maybe("mode", lambda: _pick(rng, ["sparse", "exact"], ["dense", None]))
        maybe("phase", lambda: _pick(rng, ["given", "coords", "learned"], ["random", None]))
        maybe("num_axes", lambda: _pick(rng, counts, bad_counts))
        maybe("feature_dim", lambda: _pick(rng, [None, 4, 8], [0, -3, 2.5]))
        maybe("hidden", lambda: _pick(rng, [8, 32], [0, -1]), 0.3)
        maybe("base", lambda: _pick(rng, reals, bad_reals), 0.3)
        maybe("layout", lambda: _pick(rng, layouts, bad_layouts), 0.3)
        maybe("learnable", flag, 0.2)
    elif name == "lap_pe":
        maybe("k", lambda: _pick(rng, counts, bad_counts), 0.95)
        maybe("dim", lambda: _pick(rng, dims, [0, -4, 2**40, *_ODD]), 0.95)
        maybe("use_eigvals", flag, 0.3)
        maybe("sign_flip", flag, 0.3)
    elif name == "spd_bias":
        maybe("num_heads", lambda: _pick(rng, [1, 2, 4], [0, -1, 2**40, *_ODD]), 0.95)
        maybe("max_distance", lambda: _pick(rng, [0, 1, 16], [-1, -2, 2**40, 2.5, None]))
    else:  # the other registered encoders: values drawn by each constructor parameter's type and name
        opts.update(_signature_options(rng, name))
    if rng.random() < 0.03:
        opts["no_such_option"] = 1
    return opts


_TENSOR_OPTIONS = {"inv_freq", "mixing", "axis_inv_freq", "omega", "slopes"}  # left to fuzz_encoders.py
_DIM_NAMES = {"head_dim", "dim", "out_dim", "extra_dim"}  # rotated / embedding widths


def _signature_options(rng: random.Random, name: str) -> dict:
    """Options for encoder ``name`` from its constructor's signature: ``Literal`` choices (and unknown
    ones), integer sizes (zero, negative, odd, 2⁴⁰, wrong types), reals (NaN/inf, huge, tiny, strings),
    flags (a string, an integer 2), ``sections`` lists. Required parameters are nearly always given."""
    import inspect

    from structpos.encoders.registry import ENCODERS, _literal_choices

    cls = ENCODERS.load(name)
    choices = _literal_choices(cls)
    dims, bad_dims = [2, 4, 8, 16, 32], [0, -8, 7, 1, 2**40, *_ODD]
    counts, bad_counts = [1, 2, 3, 4, 8], [0, -1, 100, 2**40, *_ODD]
    reals = [10000.0, 100.0, 2.0, 0.5, 0.02, 1.0]
    bad_reals = [0.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-300, 1e308, "x", True]
    opts: dict = {}
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name in _TENSOR_OPTIONS:
            continue
        required = p.default is p.empty
        if rng.random() > (0.95 if required else 0.5):
            continue
        ann = str(p.annotation)
        if p.name in choices:
            value = _pick(rng, list(choices[p.name]), ["bogus", "", None, 1])
        elif p.name == "sections":
            value = rng.choice([[2, 2], [1, 1, 2], [4], [-2, 6], [], [1, 1, 1], [2**40, 1], [2.5, 1.5], "22"])
        elif ann.startswith("bool"):
            value = _pick(rng, [True, False], ["yes", 2, None], 0.2)
        elif ann.startswith("int") and p.name in _DIM_NAMES:
            value = _pick(rng, dims, bad_dims)
        elif ann.startswith("int"):
            good = [-1, 0, 1] if p.name == "token_axis" else counts
            value = _pick(rng, good, bad_counts + ([5, -5] if p.name == "token_axis" else []))
        elif ann.startswith("float"):
            value = _pick(rng, reals + ([None] if "None" in ann else []), bad_reals)
        else:
            continue
        opts[p.name] = value
    return opts


def encoder_input(rng: random.Random) -> tuple[str, dict, dict]:
    """One encoder case: ``(encoder name, constructor options, forward-call knobs)``."""
    from structpos.encoders.registry import ENCODERS

    name = rng.choice(sorted(ENCODERS))
    call = {
        "length": rng.choice([1, 3, 5]),
        "heads": rng.choice([1, 2, 4]),
        "axes_delta": 0 if rng.random() < 0.8 else rng.choice([-1, 1, 3]),  # coords with the wrong axis count
        "values": rng.choice(["small", "small", "small", "negative", "huge", "nan", "inf", "float"]),
        "seed": rng.randrange(2**31),
    }
    return name, encoder_options(rng, name), call


def _coord_values(gen, shape: tuple, values: str):
    import torch

    x = torch.randint(0, 6, shape, generator=gen).float()
    if values == "negative":
        x = x - 10
    elif values == "huge":
        x = x * 1e12
    elif values == "nan" and x.numel():
        x.view(-1)[0] = float("nan")
    elif values == "inf" and x.numel():
        x.view(-1)[0] = float("inf")
    elif values == "float":
        x = x + torch.rand(shape, generator=gen)
    return x


def _rotary_checks(enc, q, k, coords, out, options: dict) -> None:
    """Silent wrong answers of a rotary encoder (AssertionError): a norm not kept, an axis ignored."""
    import torch

    qo, ko = out
    base, scale = float(options.get("base", 10000.0)), float(options.get("scale", 1.0))
    sane = 1.5 <= base <= 1e6 and 0.5 <= scale <= 1e3  # angles of order 1 rad per unit: a change is visible
    if sane and torch.isfinite(coords).all() and coords.abs().max() < 1e6 and torch.isfinite(qo).all():
        assert torch.allclose(qo.norm(dim=-1), q.norm(dim=-1), rtol=1e-3, atol=1e-4), "rotation changed a norm"
        # every coordinate axis must move q (a +1 shift of one axis rotates some pair by a non-zero angle),
        # except one given 0 pairs in explicit ``sections`` (allowed by design: an ablation, GQA head groups)
        sections = options.get("sections")
        unused = {a for a, n in enumerate(sections) if n == 0} if isinstance(sections, (list, tuple)) else set()
        for a in range(coords.shape[-1]):
            if a in unused:
                continue
            shifted = coords.clone()
            shifted[..., a] += 1
            qa, _ = enc(q, k, shifted)
            assert not torch.equal(qa, qo), f"axis {a} of {coords.shape[-1]} is ignored"


def run_encoder_case(name: str, options: dict, call: dict) -> None:
    """Build the encoder through the registry and apply it to small random tensors shaped by its options.

    Raises whatever the encoder raises; ``AssertionError`` (→ ``_Invalid``) for a silent wrong answer.
    """
    import torch

    from structpos.encoders.registry import build

    enc = build(name, **options)
    accepted = hostile_options(options)
    if accepted:
        raise _AcceptedHostile(f"{name}: {accepted[0]}")
    gen = torch.Generator().manual_seed(call["seed"])
    L, H = call["length"], call["heads"]
    hd = options.get("head_dim")
    D = hd if isinstance(hd, int) and not isinstance(hd, bool) and 0 < hd <= 256 else 8
    if name in ("rope", "hier_rope", "wire"):
        blhd = getattr(enc, "qk_layout", "blhd") != "bhld"
        shape = (1, L, H, D) if blhd else (1, H, L, D)
        q, k = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
        axes = {"rope": getattr(enc, "num_axes", 1), "wire": getattr(enc, "k", 1)}.get(name)
        if axes is None:
            axes = getattr(enc, "num_axes", None) or len(getattr(enc, "levels", ()) or (0, 0, 0))
        axes = max(0, int(axes) + call["axes_delta"]) if isinstance(axes, int) else 1
        coords = _coord_values(gen, (1, L, axes), call["values"])
        out = enc(q, k, coords)
        _check(lambda: _rotary_checks(enc, q, k, coords, out, options))
    elif name == "aw_rope":
        q, k = torch.randn(L, H, D, generator=gen), torch.randn(L, H, D, generator=gen)
        src = torch.arange(max(L - 1, 0))
        edge_index = torch.stack([torch.cat([src, src + 1]), torch.cat([src + 1, src])])
        E = edge_index.shape[1]
        axes = max(1, int(getattr(enc, "num_axes", 1) or 1) + call["axes_delta"])
        feat = getattr(enc, "feature_dim", None) or 4
        a = _coord_values(gen, (E,), call["values"])
        if call["seed"] % 5:  # mostly the antisymmetric phases AW-RoPE needs (a[v->u] = -a[u->v])
            a[E // 2 :] = -a[: E // 2]
        qo, ko = enc(
            q,
            k,
            edge_index,
            a=a,
            pos=_coord_values(gen, (L, axes), call["values"]),
            h=torch.randn(L, feat, generator=gen),
        )
        assert qo.shape[:2] == q.shape[:2], f"output shape {tuple(qo.shape)} for q {tuple(q.shape)}"
    elif name == "lap_pe":
        kk = options.get("k") if isinstance(options.get("k"), int) and 0 < options["k"] <= 64 else 4
        vecs = _coord_values(gen, (L, kk + call["axes_delta"]), call["values"])
        enc(vecs, _coord_values(gen, (kk,), call["values"]))
    elif name == "spd_bias":
        dist = torch.randint(-1, 40, (L, L), generator=gen)
        if call["values"] == "huge":
            dist = dist * 2**40
        enc(dist)
    else:
        _apply_other(name, enc, gen, call, L, H, D)


_QK_COORDS = {"bipe", "comrope", "extra_plane_rope", "grape", "grape_additive", "liere", "string"}


def _apply_other(name: str, enc, gen, call: dict, L: int, H: int, D: int) -> None:
    """Apply an encoder built from :func:`_signature_options` once to small tensors of the shapes it
    declares (an escape check: what it returns is not judged here; ``fuzz_encoders.py`` and the unit
    tests check the values)."""
    import torch

    D = getattr(enc, "head_dim", D)
    if name in _QK_COORDS:
        blhd = getattr(enc, "qk_layout", "blhd") != "bhld"
        shape = (1, L, H, D) if blhd else (1, H, L, D)
        q, k = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
        axes = 1 if name == "bipe" else int(getattr(enc, "num_axes", 1))
        coords = _coord_values(gen, (1, L, max(0, axes + call["axes_delta"])), call["values"])
        enc(q, k, coords)
    elif name == "cope":
        blhd = getattr(enc, "qk_layout", "blhd") != "bhld"
        shape = (1, L, H, D) if blhd else (1, H, L, D)
        enc(torch.randn(shape, generator=gen), torch.randn(shape, generator=gen))
    elif name in ("fire", "peg_bias"):
        enc(_coord_values(gen, (L, L), call["values"]))
    elif name == "spe":
        kk = max(1, 2 + call["axes_delta"])
        enc(_coord_values(gen, (L, kk), call["values"]), _coord_values(gen, (2,), call["values"]))
    elif name == "tree_embedding":
        dim = getattr(enc, "dim", 8)
        depth = torch.randint(-1, 40, (L,), generator=gen)
        enc(torch.randn(L, dim + call["axes_delta"], generator=gen), depth, depth.flip(0))
    elif name == "tpe_attention":
        q = torch.randn(1, L, int(getattr(enc, "num_heads", H)), D, generator=gen)
        positions = torch.randint(0, 6, (1, L, int(getattr(enc, "num_orders", 1))), generator=gen)
        enc(q, q, q, positions)


_INT_OPTIONS = {
    *("head_dim", "num_axes", "k", "K", "dim", "num_heads", "max_distance", "hidden", "feature_dim"),
    *("out_dim", "extra_dim", "max_positions", "max_offset", "block_size", "rank", "num_orders", "num_filters"),
    *("max_depth", "max_sibling", "token_axis", "max_table_extent"),
}
# K = 0, max_distance = 0 and max_offset = 0 (BiPE: every offset shares one row) are meaningful; token_axis
# counts from the end when negative
_POSITIVE_OPTIONS = _INT_OPTIONS - {"K", "max_distance", "max_offset", "token_axis"}
_FLAG_OPTIONS = {"learnable", "use_eigvals", "sign_flip", "gate", "learn_basis", "learnable_freqs", "check"}
# finite, > 0, neither tiny nor huge (a base may be huge: with head_dim = 2 it is unused; the library refuses
# a base only where a frequency underflows, so a huge base is judged by the rotary checks, not here)
_POSITIVE_REALS = {"scale", "c", "threshold"}


def hostile_options(options: dict) -> list[str]:
    """The options an encoder should refuse: non-integers for integer options, non-positive sizes,
    non-finite or extreme reals (``base`` must be a finite number > 1; ``scale``, ``c``, ``threshold``
    in ``[1e-100, 1e100]``; ``init_std``, ``unreachable``, ``z`` finite numbers), flags that are not booleans.

    An encoder that *builds* with one of them has accepted it silently (counted apart from escapes).
    """
    out = []
    for key, v in options.items():
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if key in _INT_OPTIONS and v is not None and not (number and float(v).is_integer()):
            out.append(f"{key}={v!r}")
        elif key in _POSITIVE_OPTIONS and number and v <= 0:
            out.append(f"{key}={v!r}")
        elif key in _POSITIVE_REALS and number and (not math.isfinite(v) or v <= 0 or v > 1e100 or v < 1e-100):
            out.append(f"{key}={v!r}")
        elif key in ("base", "extra_base") and number and (not math.isfinite(v) or v <= 1):
            out.append(f"{key}={v!r}")
        elif key in _POSITIVE_REALS and v is not None and not number:
            out.append(f"{key}={v!r}")
        elif key in ("init_std", "unreachable", "z") and (not number or not math.isfinite(v) or v > 1e100):
            out.append(f"{key}={v!r}")
        elif key in _FLAG_OPTIONS and v is not None and not (isinstance(v, bool) or v in (0, 1)):
            out.append(f"{key}={v!r}")
    return out


def _check(fn) -> None:
    try:
        fn()
    except AssertionError as e:
        raise _Invalid(str(e)) from e


# --- CLI options: `structpos encode` validated, then (when accepted) one tiny record encoded

CLI_PAYLOADS = {
    "json": '{"a": [1, {"b": 2}], "c": "d"}',
    "code": "def f(x):\n    return [x, x + 1]\n",
    "table": "a,b\n1,2\n3,4\n",
    "graph": {"edge_index": [[0, 1, 2], [1, 2, 0]], "num_nodes": 3},
}


def coords_spec(rng: random.Random) -> str:
    """A random ``--coords`` spec: known and unknown families, good and hostile parameters."""
    from structpos.coords import COORDS

    families = sorted(COORDS)
    params = [
        "",
        "",
        ":8",
        ":2",
        ":1",
        ":0",
        ":-1",
        ":abc",
        ":",
        "::",
        ":8:0.25",
        ":2:1e308",
        ":2:-1",
        ":2:nan",
        ":4x8",
        ":0x0",
        ":100000000",
        ":100000000x100000000",
        ":99999999999999999999",
        ":1e3",
        ":nan",
        ":inf",
        ":8x",
        ":x8",
        ":8:8:8",
    ]
    good = ["", ":8", ":2", ":4x8", ":8:0.25", ":1"]
    parts = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        fam = rng.choice(families) if rng.random() < 0.9 else rng.choice(["nosuch", "", "TREE", "lap8", " "])
        parts.append(fam + _pick(rng, good, params, 0.5))
    spec = rng.choice([",", ", ", ",,"]).join(parts)
    if rng.random() < 0.05:
        spec = rng.choice(["", ",", " ", "\x00", "tree\n", "ünïcode", "tree" * 1000])
    return spec


def cli_argv(rng: random.Random, tmp: Path, k: int) -> tuple[list[str], str]:
    """A random ``structpos encode`` command line over one tiny record: ``(argv, kind)``."""
    kind = rng.choice(["json", "json", "code", "table", "graph"])
    argv = ["encode", str(tmp / f"{kind}.jsonl"), "--out", str(tmp / f"out{k}")]
    if rng.random() < 0.9:
        argv += ["--kind", kind if rng.random() < 0.95 else rng.choice(["nosuch", "JSON", ""])]
    if kind == "code" and rng.random() < 0.9:
        argv += ["--language", rng.choice(["python", "python", "cobol", "", "python,go", "python,"])]
    if rng.random() < 0.9:
        argv += ["--coords", coords_spec(rng)]
    elif rng.random() < 0.5:
        argv += ["--coords", rng.choice(["tree", "table", "lap:4", "rw:8", "spd:4", "tree,lap:2"])]
    bad = ["0", "-1", "nan", "inf", "-inf", "1e-300", "1e308", "abc", "", "1.5", "99999999999999999999", "0x10"]

    def number(*good: str) -> str:
        return _pick(rng, list(good), bad, 0.4)

    if rng.random() < 0.4:
        argv += ["--record-timeout", number("0.5", "5", "30", "1e3")]
    if rng.random() < 0.4:
        from dataclasses import fields

        from structpos.limits import Limits

        for _ in range(rng.choice([1, 1, 2])):
            name = _pick(rng, [f.name for f in fields(Limits)], ["nosuch", "max-nodes", ""], 0.1)
            value = number("none", "10", "100000", "1000000", "30")
            argv += ["--limit", f"{name}={value}"]
    if rng.random() < 0.1:
        argv += ["--limit", number("1", "5")]  # the old spelling of --max-records
    if rng.random() < 0.3:
        argv += ["--shard-size", number("1", "2", "1000")]
    if rng.random() < 0.3:
        argv += ["--workers", number("0", "1", "2", "1000000")]
    if rng.random() < 0.2:
        argv += ["--max-records", number("0", "1", "10")]
    if rng.random() < 0.1:
        argv += ["--engine", rng.choice(["local", "ray", "spark"])]
    if rng.random() < 0.15:
        argv += ["--parser-opt", rng.choice(["max_depth=2", "max_depth=-1", "nosuch=1", "=1", "x", "max_depth=nan"])]
    if rng.random() < 0.1:
        argv += ["--tokenizer", str(rng.choice([tmp / "missing.json", tmp / "junk.json", tmp, tmp / "json.jsonl"]))]
    if rng.random() < 0.1:
        argv += [rng.choice(["--resume", "--overwrite", "--retry-errors", "--follow-symlinks", "--no-progress"])]
    return argv, kind


def cli_files(tmp: Path) -> None:
    """The tiny inputs and the junk tokenizer file the CLI cases point at."""
    for kind, payload in CLI_PAYLOADS.items():
        (tmp / f"{kind}.jsonl").write_text(json.dumps({"text": payload}) + "\n")
    (tmp / "junk.json").write_text('{"not": "a tokenizer"}')


def run_cli_case(argv: list[str], kind: str, timeout: float) -> str:
    """Parse and validate ``argv`` as ``structpos main`` does, then encode one tiny record with the result.

    Returns the outcome: ``"usage"`` (argparse's exit 2), ``"encoded"``, or ``"record error"`` (the
    accepted options made the record fail with a StructposError, e.g. a limit it set). Raises the
    StructposError of the validation (the contract), ``_Invalid`` when the record's encoding hung or
    died, and an escape (any other exception; also one that the record's encoding raised and the
    pipeline caught, named ``"<type> in the record"``).
    """
    import contextlib
    import dataclasses
    import io

    from structpos.cli import build_parser
    from structpos.commands.encode import config_from_args
    from structpos.pipeline.encode import encode_one
    from structpos.pipeline.records import Record

    with contextlib.redirect_stderr(io.StringIO()):
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as e:
            if e.code == 2:
                return "usage"
            raise
    config = config_from_args(args)  # a StructposError here is the contract
    options = dataclasses.replace(config.encode_options(), timeout_in_process=True)
    payload = CLI_PAYLOADS[kind] if config.kind in (None, kind) else CLI_PAYLOADS.get(config.kind, CLI_PAYLOADS[kind])
    rec = Record("probe", payload, "probe", kind=None)
    status, result = _in_child(lambda: encode_one(rec, options), timeout)
    if status != "done":
        raise _Invalid(f"accepted, then the tiny record {status}")
    rows, error = result
    if error is None:
        return "encoded"
    if not _is_structpos_error(error["error_type"]):  # the pipeline caught it, but the API raised it raw
        raise _ChildError(f"{error['error_type']} in the record", error["message"][:300])
    return "record error"


def _is_structpos_error(type_name: str) -> bool:
    from structpos import exceptions

    cls = getattr(exceptions, type_name, None)
    return isinstance(cls, type) and issubclass(cls, exceptions.StructposError)


def _in_child(fn, timeout: float, memory_bytes: int = 3 * 2**30):
    """Run ``fn`` in a forked child under an address-space cap: ``("done", result)``, ``("timed out", None)``
    or ``("died: …", None)``. Keeps a hostile accepted option from taking the fuzzer (and the machine) down."""
    import os
    import pickle
    import resource

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, hard))
            out = ("done", fn())
        except BaseException as e:  # the parent classifies it
            out = ("raised", (type(e).__name__, str(e)[:500]))
        try:
            data = pickle.dumps(out)
        except Exception as e:  # an unpicklable result
            data = pickle.dumps(("raised", (type(e).__name__, str(e)[:500])))
        with os.fdopen(w, "wb") as fh:
            fh.write(data)
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    chunks = []
    os.set_blocking(r, False)
    while True:
        try:
            chunk = os.read(r, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk:
            chunks.append(chunk)
            continue
        done, status = os.waitpid(pid, os.WNOHANG)
        if chunk == b"" or done:
            if done == 0:
                os.waitpid(pid, 0)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return "timed out", None
        time.sleep(0.005)
    try:
        while chunk := os.read(r, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    os.close(r)
    if not chunks:
        return "died without a result", None
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "raised":
        raise _ChildError(*value)
    return kind, value


class _AcceptedHostile(Exception):
    """An encoder built with an option it should have refused (see :func:`hostile_options`)."""


class _ChildError(Exception):
    """An exception raised in the probe child (type name kept for the counts)."""

    def __init__(self, type_name: str, message: str):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


def run_args(target: str, n: int, seed: int, timeout: float, findings_max: int = 3) -> dict:
    """Fuzz the encoders' or the CLI's options ``n`` times; the same counts as :func:`run_parser`.

    ``findings_max`` findings are kept per kind of finding (encoder and exception type).
    """
    import tempfile

    from structpos.exceptions import StructposError as _SE

    rng = random.Random(f"{seed}:{target}")
    counts: Counter = Counter()
    structpos_errors: Counter = Counter()
    other: Counter = Counter()
    accepted: Counter = Counter()  # hostile options an encoder built with (reported, not escapes)
    findings = []
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="structpos-fuzz-") as d:
        tmp = Path(d)
        cli_files(tmp)
        for k in range(n):
            if target == "encoders":
                name, options, call = encoder_input(rng)
                case = {"encoder": name, "options": repr(options), "call": call}
            else:
                argv, kind = cli_argv(rng, tmp, k)
                name, case = "encode", {"argv": argv}
            if target == "encoders":
                signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                if target == "encoders":
                    run_encoder_case(name, options, call)
                    counts["ok"] += 1
                else:
                    outcome = run_cli_case(argv, kind, timeout)
                    if outcome == "usage":
                        structpos_errors["usage (exit 2)"] += 1
                    elif outcome == "record error":
                        structpos_errors["accepted; the record failed with a StructposError"] += 1
                    else:
                        counts["ok"] += 1
            except _AcceptedHostile as e:
                accepted[str(e).split("=")[0]] += 1
                counts["ok"] += 1  # no exception and no wrong output: counted with ok, listed apart
            except _Invalid as e:
                key = f"{name}: {str(e).split(':')[0][:60]}"
                other[key] += 1
                if other[key] <= findings_max:
                    findings.append({"target": target, "i": k, "error": f"silent: {e}"[:500], **case})
            except _SE as e:
                structpos_errors[type(e).__name__] += 1
            except _Timeout:
                key = f"{name}: timeout"
                other[key] += 1
                if other[key] <= findings_max:
                    findings.append({"target": target, "i": k, "error": f"timeout > {timeout}s", **case})
            except Exception as e:  # an escape
                type_name = e.type_name if isinstance(e, _ChildError) else type(e).__name__
                key = f"{name}: {type_name}"
                other[key] += 1
                if other[key] <= findings_max:
                    findings.append(
                        {
                            "target": target,
                            "i": k,
                            "error": f"{type_name}: {e}"[:500],
                            **case,
                            "traceback": traceback.format_exc()[-2000:],
                        }
                    )
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    return {
        "parser": target,
        "inputs": n,
        "ok": counts["ok"],
        "structpos_errors": sum(structpos_errors.values()),
        "by_class": dict(structpos_errors),
        "other": sum(other.values()),
        "other_by_type": dict(other),
        "accepted_hostile": dict(accepted),
        "seconds": round(time.perf_counter() - t0, 1),
        "findings": findings,
    }


def _run_job(args):
    if args[0] in ARG_TARGETS:
        return run_args(*args)
    return run_parser(*args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="inputs per parser")
    ap.add_argument("--parsers", default=",".join(PARSERS), help=f"comma-separated subset of {','.join(PARSERS)}")
    ap.add_argument(
        "--args",
        default=",".join(ARG_TARGETS),
        help=f"argument fuzz targets, comma-separated subset of {','.join(ARG_TARGETS)} ('' for none)",
    )
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
    arg_targets = [t for t in args.args.split(",") if t]
    if set(arg_targets) - set(ARG_TARGETS):
        ap.error(f"unknown argument targets: {', '.join(sorted(set(arg_targets) - set(ARG_TARGETS)))}")
    jobs = [(k, args.n, args.seed, args.timeout) for k in kinds + arg_targets]
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
            if r.get("accepted_hostile"):
                print(f"{'':10s} accepted silently (built, no error): {r['accepted_hostile']}", flush=True)
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
