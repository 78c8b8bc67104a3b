"""A small synthetic TAC EDL dataset in the official layouts, written by the tests themselves.

Documents (SGML news with several <DOC> per file, a discussion-forum file with <post>/<quote>):

- A ``AFP_ENG_20091001.0001``: Bobby Hall (PER), the United Nations (ORG), New York (GPE);
- B ``AFP_ENG_20091002.0002``: Hall's U.N. speech (same file as A);
- C ``NYT_ENG_20091005.0003``: Bobby Hall again, New York City;
- D ``ENG_DF_001503_20091003_G00A0KZZY``: forum thread quoting a UN post, AT&amp;T;
- E ``NYT_ENG_20091004.0004``: unannotated, in the date range, about Bobby Hall;
- F ``NYT_ENG_20080101.0005``: unannotated, outside the query date range, about Bobby Hall;
- G ``bolt-eng-DF-170-181103-8882762``: unannotated, undated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def news(doc_id: str, headline: str, paragraphs: list[str]) -> str:
    body = "".join(f"<P>\n{p}\n</P>\n" for p in paragraphs)
    return (
        f'<DOC id="{doc_id}" type="story" >\n<HEADLINE>\n{headline}\n</HEADLINE>\n'
        f"<DATELINE>NEW YORK, Oct 1</DATELINE>\n<TEXT>\n{body}</TEXT>\n</DOC>\n"
    )


DOC_A = news(
    "AFP_ENG_20091001.0001",
    "Diplomat speaks at UN",
    [
        "Bobby Hall addressed the United Nations on Monday about food aid.",
        "The speech in New York drew praise from delegates. Hall thanked them.",
    ],
)
DOC_B = news(
    "AFP_ENG_20091002.0002",
    "Reaction to the speech",
    [
        "Delegates said Hall spoke well about food aid programs.",
        "The United Nations, or U.N., plans a vote on the aid next week.",
    ],
)
DOC_C = news(
    "NYT_ENG_20091005.0003",
    "Envoy returns home",
    [
        "Bobby Hall flew back from New York City on Friday.",
        "Farmers in Ohio welcomed the news about wheat prices.",
    ],
)
DOC_D = """<doc id="ENG_DF_001503_20091003_G00A0KZZY">
<headline>
Aid vote at the UN
</headline>
<post author="tinydancer" datetime="2009-10-03T10:00:00" id="p1">
<quote orig_author="bluebird">
The UN should fund it, says AT&amp;T.
</quote>
I agree that the UN must vote soon.
</post>
</doc>
"""
DOC_E = news(
    "NYT_ENG_20091004.0004",
    "Hall praised",
    ["Bobby Hall won praise for the food aid speech.", "Markets were quiet on Thursday."],
)
DOC_F = news(
    "NYT_ENG_20080101.0005",
    "Old news",
    ["Bobby Hall was appointed envoy last year.", "Snow fell across the region."],
)
DOC_G = """<doc id="bolt-eng-DF-170-181103-8882762">
<post author="someone" datetime="2011-01-01T00:00:00" id="p1">
Bobby Hall is a great speaker and food aid matters.
</post>
</doc>
"""

DOCS = {
    "AFP_ENG_20091001.0001": DOC_A,
    "AFP_ENG_20091002.0002": DOC_B,
    "NYT_ENG_20091005.0003": DOC_C,
    "ENG_DF_001503_20091003_G00A0KZZY": DOC_D,
    "NYT_ENG_20091004.0004": DOC_E,
    "NYT_ENG_20080101.0005": DOC_F,
    "bolt-eng-DF-170-181103-8882762": DOC_G,
}

# (mention id, doc, text as in the raw document, nth occurrence, unescaped text, entity, type)
GOLD = [
    ("TEDL15_0001", "AFP_ENG_20091001.0001", "Bobby Hall", 0, "Bobby Hall", "NIL0001", "PER"),
    ("TEDL15_0002", "AFP_ENG_20091001.0001", "United Nations", 0, "United Nations", "E01", "ORG"),
    ("TEDL15_0003", "AFP_ENG_20091001.0001", "New York", 0, "New York", "E02", "GPE"),
    ("TEDL15_0004", "AFP_ENG_20091002.0002", "Hall", 0, "Hall", "NIL0001", "PER"),
    ("TEDL15_0005", "AFP_ENG_20091002.0002", "U.N.", 0, "U.N.", "E01", "ORG"),
    ("TEDL15_0006", "NYT_ENG_20091005.0003", "Bobby Hall", 0, "Bobby Hall", "NIL0001", "PER"),
    ("TEDL15_0007", "NYT_ENG_20091005.0003", "New York City", 0, "New York City", "E02", "GPE"),
    ("TEDL15_0008", "NYT_ENG_20091005.0003", "Ohio", 0, "Ohio", "E03", "LOC"),
    ("TEDL15_0009", "ENG_DF_001503_20091003_G00A0KZZY", "UN", 2, "UN", "E01", "ORG"),
    ("TEDL15_0010", "ENG_DF_001503_20091003_G00A0KZZY", "AT&amp;T", 0, "AT&T", "E04", "ORG"),
    (
        "TEDL15_0011",
        "ENG_DF_001503_20091003_G00A0KZZY",
        "tinydancer",
        0,
        "tinydancer",
        "NIL0002",
        "PER",
    ),
]


@dataclass
class Dataset:
    docs: Path
    mentions: Path
    queries_xml: Path
    links: Path
    offsets: dict[str, tuple[int, int]]  # mention id -> TAC (start, end inclusive)


def offset(raw: str, needle: str, nth: int) -> tuple[int, int]:
    pos = -1
    for _ in range(nth + 1):
        pos = raw.index(needle, pos + 1)
    return pos, pos + len(needle) - 1


def write_dataset(root: Path) -> Dataset:
    docs = root / "docs"
    (docs / "nw").mkdir(parents=True)
    (docs / "df").mkdir()
    (docs / "nw" / "afp.sgm").write_text(DOC_A + DOC_B, encoding="utf-8")
    (docs / "nw" / "nyt.sgm").write_text(DOC_C + DOC_E + DOC_F, encoding="utf-8")
    (docs / "df" / "ENG_DF_001503_20091003_G00A0KZZY.xml").write_text(DOC_D, encoding="utf-8")
    (docs / "df" / "bolt-eng-DF-170-181103-8882762.xml").write_text(DOC_G, encoding="utf-8")
    offsets = {}
    tab, xml, links = [], ['<?xml version="1.0" encoding="UTF-8"?>', "<kbpentlink>"], []
    for mid, doc, raw_text, nth, text, entity, etype in GOLD:
        s, e = offset(DOCS[doc], raw_text, nth)
        offsets[mid] = (s, e)
        tab.append(f"LDC\t{mid}\t{text}\t{doc}:{s}-{e}\t{entity}\t{etype}\tNAM\t1.0\n")
        name = text.replace("&", "&amp;")
        xml += [
            f'  <query id="{mid}">',
            f"    <name>{name}</name>",
            f"    <docid>{doc}</docid>",
            f"    <beg>{s}</beg>",
            f"    <end>{e}</end>",
            "  </query>",
        ]
        links.append(f"{mid}\t{entity}\t{etype}\tNW\tNO\tNO\n")
    xml.append("</kbpentlink>")
    mentions = root / "gold.tab"
    mentions.write_text("".join(tab), encoding="utf-8")
    queries_xml = root / "queries.xml"
    queries_xml.write_text("\n".join(xml) + "\n", encoding="utf-8")
    links_path = root / "links.tab"
    links_path.write_text("".join(links), encoding="utf-8")
    return Dataset(docs, mentions, queries_xml, links_path, offsets)
