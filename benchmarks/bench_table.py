"""Table parsing throughput against the usual readers (plain script, not a test).

CSV: ``structpos`` (offset-tracking scanner + Structure build) vs ``csv.reader`` (values only,
no offsets). HTML: ``structpos`` (the compiled table scanner, else the HTMLParser pass, + grid) vs a bare ``lxml.html`` parse
of the same pages (issue 24's anchor; "anchor missing" without lxml) and vs ``pandas.read_html``'s
lxml table reader (grid of texts only). Prints CPU seconds (best of 5, the contenders interleaved)
and the ratio (structpos / reference).

    python benchmarks/bench_table.py [--quick] [--wtq DIR]
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import time
from pathlib import Path

from structpos.parsers.table import parse_table
from structpos.parsers.table_html import parse_html_tables


def best_of(fn, repeat: int) -> float:
    """Best CPU time of ``repeat`` runs (CPU, not wall: the machine may be shared)."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def html_vs_lxml(pages: list[str], repeat: int) -> None:
    """Every page's tables → table Structures vs a bare ``lxml.html`` parse of the page (CPU time, interleaved)."""
    try:
        import lxml.html
    except ImportError:
        print("HTML vs lxml.html: anchor missing (lxml is not installed)")
        return
    ours = ref = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        n_cells = sum(len(s) for t in pages for s in parse_html_tables(t))
        ours = min(ours, time.process_time() - t0)
        t0 = time.process_time()
        for t in pages:
            lxml.html.fromstring(t)
        ref = min(ref, time.process_time() - t0)
    size = sum(map(len, pages)) / 1e6
    spans = sum(("rowspan" in t or "colspan" in t) for t in pages)
    print(
        f"HTML {len(pages)} WTQ pages ({spans} with row/colspans), {size:.2f} MB, {n_cells} nodes: structpos "
        f"{ours:.4f}s  lxml.html.fromstring {ref:.4f}s  ratio {ours / ref:.2f}x (CPU time)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--wtq", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "wtq" / "200-csv"))
    args = ap.parse_args()
    rows = 20_000 if args.quick else 200_000
    repeat = 1 if args.quick else 5
    text = "".join(f'{i},"text, with comma {i}","a""b",plain\r\n' for i in range(rows))
    ours = ref = float("inf")
    for _ in range(repeat):  # interleaved: load drift hits both alike
        ours = min(ours, best_of(lambda: parse_table(text, format="csv"), 1))
        ref = min(ref, best_of(lambda: list(csv.reader(io.StringIO(text, newline=""))), 1))
    print(
        f"CSV {len(text) / 1e6:.1f} MB, {rows * 4} cells: structpos {ours:.3f}s  csv.reader {ref:.3f}s  ratio {ours / ref:.2f}x"
    )

    wtq = Path(args.wtq)
    small = [p.read_text(encoding="utf-8") for p in sorted(wtq.glob("*.csv"))]
    if small:
        ours = ref = float("inf")
        passes = 5 if args.quick else 50  # the tables are small: time many passes over them
        for _ in range(repeat):
            ours = min(ours, best_of(lambda: [parse_table(t, format="csv") for _ in range(passes) for t in small], 1))
            ref = min(
                ref,
                best_of(
                    lambda: [list(csv.reader(io.StringIO(t, newline=""))) for _ in range(passes) for t in small], 1
                ),
            )
        size = sum(map(len, small)) / 1e6
        per_table = 1e6 / (passes * len(small))
        print(
            f"CSV {len(small)} WTQ tables, {size:.2f} MB: structpos {ours * per_table:.1f} µs/table  "
            f"csv.reader {ref * per_table:.1f} µs/table  ratio {ours / ref:.2f}x (per-table fixed costs)"
        )
    pages = [p.read_text(encoding="utf-8") for p in sorted(wtq.glob("*.html"))]
    if not pages:
        print(f"no HTML tables under {wtq}")
        return
    html_vs_lxml(pages, repeat=max(repeat, 3))
    from pandas.io.html import _LxmlFrameParser

    def pandas_all():
        for t in pages:
            list(_LxmlFrameParser(io.StringIO(t), re.compile(".+"), None, None, True, None).parse_tables())

    ours = ref = float("inf")
    for _ in range(repeat):
        ours = min(ours, best_of(lambda: [parse_table(t, format="html") for t in pages], 1))
        ref = min(ref, best_of(pandas_all, 1))
    size = sum(map(len, pages)) / 1e6
    print(
        f"HTML {len(pages)} WTQ tables, {size:.2f} MB: structpos {ours:.3f}s  pandas/lxml {ref:.3f}s  ratio {ours / ref:.2f}x"
    )


if __name__ == "__main__":
    main()
