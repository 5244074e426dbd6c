"""``default_encoding``: legacy bytes (a cp1252 CSV, Latin-1 C) read as text, the same way by every parser and by ``encode``."""

from __future__ import annotations

import pytest

import structpos
from structpos.exceptions import ParseError, SpecError

GRAMMAR = 'start: WORD+\nWORD: /\\w+/\n%ignore " "'

# kind, options, a text with characters outside ASCII (cp1252 and Latin-1 both hold them)
TEXTS = [
    ("code", {"language": "python"}, "def café(x):\n    return 'naïve'\n"),
    ("code", {"language": "c"}, "/* Größe */\nint f(void) { return 1; }\n"),
    ("json", {}, '{"städte": ["München", "Zürich"]}'),
    ("xml", {}, "<stadt name='Köln'><fluss>Rhein</fluss></stadt>"),
    ("yaml", {}, "städte:\n  - München\n  - Zürich\n"),
    ("conllu", {}, "1\tCafé\tcafé\tNOUN\t_\t_\t0\troot\t_\t_\n\n"),
    ("table", {}, "name,city\nJosé,München\n"),
    ("table", {"format": "html"}, "<table><tr><td>José</td><td>München</td></tr></table>"),
    ("document", {}, "Ein schöner Satz. Noch einer.\n"),
    ("markdown", {}, "# Über\n\nText mit Umlaut: ä.\n"),
    ("grammar", {"grammar": GRAMMAR}, "äb cé"),
]


def summary(parsed):
    items = parsed if isinstance(parsed, list) else [parsed]
    return [(s.labels.tolist(), s.start.tolist(), s.end.tolist(), s.source) for s in items]


@pytest.mark.parametrize("codec", ["cp1252", "latin-1"])
@pytest.mark.parametrize("kind, options, text", TEXTS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(TEXTS)])
def test_every_parser_reads_legacy_bytes_as_the_text_they_encode(tmp_path, kind, options, text, codec):
    data = text.encode(codec)
    with pytest.raises(ParseError, match=r"at byte \d+: not valid utf-8"):
        structpos.parse(data, kind, name="in", **options)  # UTF-8 by default: the error names the byte
    expected = summary(structpos.parse(text, kind, **options))
    assert summary(structpos.parse(data, kind, default_encoding=codec, **options)) == expected
    path = tmp_path / "legacy.in"
    path.write_bytes(data)
    assert summary(structpos.parse(path, kind, default_encoding=codec, **options)) == expected


@pytest.mark.parametrize(
    "kind, options, data, text",
    [
        (  # an XML declaration wins over the default
            "xml",
            {},
            "<?xml version='1.0' encoding='koi8-r'?><a>мир</a>".encode("koi8-r"),
            "<?xml version='1.0' encoding='koi8-r'?><a>мир</a>",
        ),
        (  # a PEP 263 line
            "code",
            {"language": "python"},
            "# -*- coding: koi8-r -*-\ns = 'мир'\n".encode("koi8-r"),
            "# -*- coding: koi8-r -*-\ns = 'мир'\n",
        ),
        (  # an HTML <meta> charset
            "table",
            {},
            "<meta charset='koi8-r'><table><tr><td>мир</td></tr></table>".encode("koi8-r"),
            "<meta charset='koi8-r'><table><tr><td>мир</td></tr></table>",
        ),
        ("json", {}, '["мир"]'.encode("utf-16"), '["мир"]'),  # a byte-order mark
    ],
)
def test_what_the_input_declares_wins_over_the_default(kind, options, data, text):
    assert structpos.parse(data, kind, default_encoding="cp1252", **options).source == text


@pytest.mark.parametrize("codec", ["no-such-codec", "rot13", "utf-8\x00"])
def test_a_codec_that_is_no_text_encoding_is_a_spec_error(codec):
    with pytest.raises(SpecError, match="default_encoding"):
        structpos.parse(b"[1]", "json", default_encoding=codec)


def test_encode_reads_a_directory_as_the_api_does(tmp_path):
    from structpos.pipeline import encode_to_parquet
    from structpos.pipeline.records import read_records
    from structpos.pipeline.run import EncodeConfig

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.csv").write_bytes("name,city\nJosé,München\n".encode("cp1252"))
    (src / "b.py").write_bytes("x = 'naïve'\n".encode("cp1252"))
    plain = {r.id: r.read_error for r in read_records(src)}
    assert all(err is not None and err[0] == "ParseError" for err in plain.values())  # UTF-8 by default
    records = {r.id: r for r in read_records(src, default_encoding="cp1252")}
    assert records["a.csv"].payload == structpos.parse(src / "a.csv", "table", default_encoding="cp1252").source
    assert records["b.py"].payload == "x = 'naïve'\n"

    out = tmp_path / "out"
    s = encode_to_parquet(src, out, parser_options={"default_encoding": "cp1252"}, progress=False)
    assert (s.records, s.errors) == (2, 0)
    with pytest.raises(SpecError, match="--parser-opt default_encoding: unknown text encoding"):
        EncodeConfig(parser_options={"default_encoding": "nope"}).validate()
