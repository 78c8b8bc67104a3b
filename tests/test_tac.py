"""TAC EDL readers: mention layouts, source documents, offsets, dates, sentence units."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from cmrkit.errors import CmrkitError
from cmrkit.sources import tac

NEWS_1 = """<DOC id="AFP_ENG_20091001.0009" type="story" >
<HEADLINE>
AT&amp;T buys a phone maker
</HEADLINE>
<DATELINE>NEW YORK, Oct 1</DATELINE>
<TEXT>
<P>
Bobby Hall of AT&amp;T said on Monday that the deal with Nokia is done. Hall was happy.
</P>
<P>
The United Nations did not comment.
</P>
</TEXT>
</DOC>
"""

NEWS_2 = """<DOC id="NYT_ENG_20091003.0001" type="story" >
<TEXT>
<P>
Nokia &lt;NOK&gt; shares rose after Bobby Hall spoke.
</P>
</TEXT>
</DOC>
"""

FORUM = """<?xml version="1.0" encoding="utf-8"?>
<doc id="ENG_DF_001503_20091002_G00A0KZZY">
<headline>
Who runs AT&amp;T now?
</headline>
<post author="tinydancer" datetime="2009-10-02T10:00:00" id="p1">
<quote orig_author="bluebird">
Hall runs AT&amp;T.
</quote>
No, Bobby Hall left in May. I read it yesterday.
</post>
</doc>
"""


def write_docs(root: Path) -> Path:
    """Two news documents in one SGML file, one forum document in a file of its own."""
    (root / "news").mkdir(parents=True)
    (root / "news" / "afp_nyt.sgm").write_text(NEWS_1 + NEWS_2, encoding="utf-8")
    (root / "df").mkdir()
    (root / "df" / "ENG_DF_001503_20091002_G00A0KZZY.xml").write_text(FORUM, encoding="utf-8")
    return root


def span(raw: str, text: str, nth: int = 0) -> tuple[int, int]:
    """TAC offsets (end inclusive) of the nth occurrence of text in raw."""
    pos = -1
    for _ in range(nth + 1):
        pos = raw.index(text, pos + 1)
    return pos, pos + len(text) - 1


def tab_line(mid: str, text: str, doc: str, s: int, e: int, kb: str, etype: str) -> str:
    return f"LDC\t{mid}\t{text}\t{doc}:{s}-{e}\t{kb}\t{etype}\tNAM\t1.0\n"


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, tac.TacDocument]:
    root = write_docs(tmp_path_factory.mktemp("tacdocs"))
    return {d.doc_id: d for d in tac.iter_documents(root)}


def test_documents_split_and_offsets(docs):
    assert sorted(docs) == [
        "AFP_ENG_20091001.0009",
        "ENG_DF_001503_20091002_G00A0KZZY",
        "NYT_ENG_20091003.0001",
    ]
    # the second document of a file starts at its own <DOC
    assert docs["NYT_ENG_20091003.0001"].raw == NEWS_2.rstrip("\n")
    assert docs["AFP_ENG_20091001.0009"].raw == NEWS_1.rstrip("\n")
    # a file holding one document: offsets count from the start of the file
    assert docs["ENG_DF_001503_20091002_G00A0KZZY"].raw == FORUM.rstrip("\n")
    assert docs["NYT_ENG_20091003.0001"].line == NEWS_1.count("\n") + 1


def test_escaped_text_offsets_and_masked_text(docs):
    doc = docs["AFP_ENG_20091001.0009"]
    s, e = span(doc.raw, "AT&amp;T", 1)
    mention = tac.TacMention("m1", "AT&T", doc.doc_id, s, e, "NIL1", "ORG", "NAM", "f", 1)
    assert e - s + 1 == len("AT&amp;T")
    assert tac.check_mention(mention, doc) is None
    masked = doc.masked()
    assert len(masked) == len(doc.raw)
    assert masked[s] == "A" and masked[s + 2] == "&" and masked[e] == "T"
    assert "<" not in masked.replace("&lt;", "")
    # a name after the escape keeps its raw offsets in the masked text
    ns, ne = span(doc.raw, "Nokia")
    assert masked[ns : ne + 1] == "Nokia"


def test_entities_unescaped_in_visible_text(docs):
    doc = docs["NYT_ENG_20091003.0001"]
    s, _ = span(doc.raw, "Nokia")
    e = doc.raw.index("spoke.") + len("spoke.")
    text, index = doc.visible(s, e)
    assert text == "Nokia <NOK> shares rose after Bobby Hall spoke."
    bs, be = span(doc.raw, "Bobby Hall")
    assert text[index[bs - s] : index[be - s] + 1] == "Bobby Hall"


def test_mismatch_and_outside_offsets_are_reported(docs):
    doc = docs["AFP_ENG_20091001.0009"]
    s, e = span(doc.raw, "Bobby Hall")
    shifted = tac.TacMention("m", "Bobby Hall", doc.doc_id, s + 1, e + 1, "N", "PER", None, "f", 3)
    message = tac.check_mention(shifted, doc)
    assert message is not None and "does not match" in message and "'obby Hall" in message
    outside = tac.TacMention(
        "m", "X", doc.doc_id, len(doc.raw), len(doc.raw), "N", "PER", None, "f", 3
    )
    assert "outside" in tac.check_mention(outside, doc)
    # unescaped offsets (as if &amp; counted 1) do not match
    s2, e2 = span(doc.raw, "AT&amp;T", 1)
    wrong = tac.TacMention("m", "AT&T", doc.doc_id, s2, s2 + 3, "N", "ORG", None, "f", 3)
    assert tac.check_mention(wrong, doc) is not None


def test_forum_author_attribute_and_quote_blocks(docs):
    doc = docs["ENG_DF_001503_20091002_G00A0KZZY"]
    s, e = span(doc.raw, "tinydancer")
    mention = tac.TacMention("a", "tinydancer", doc.doc_id, s, e, "NIL9", "PER", "NAM", "f", 1)
    assert tac.check_mention(mention, doc) is None
    assert doc.masked()[s : e + 1] == "tinydancer"
    blocks = [b.text.strip() for b in doc.blocks]
    assert "Hall runs AT&T." in blocks
    assert "bluebird" in blocks and "tinydancer" in blocks
    # the post date attribute is markup, not text
    assert not any("2009-10-02" in b for b in blocks)


def test_doc_dates():
    assert tac.doc_date("AFP_ENG_20091001.0009") == date(2009, 10, 1)
    assert tac.doc_date("ENG_DF_001503_20100404_G00A0KZZY") == date(2010, 4, 4)
    assert tac.doc_date("bolt-eng-DF-170-181103-8882762") is None
    assert tac.doc_date("XIN_ENG_20091399.0001") is None


def test_mention_tab_layout(tmp_path, docs):
    doc = docs["AFP_ENG_20091001.0009"]
    s, e = span(doc.raw, "Bobby Hall")
    ls, le = span(doc.raw, "NEW YORK")
    path = tmp_path / "gold.tab"
    path.write_text(
        tab_line("TEDL15_0001", "Bobby Hall", doc.doc_id, s, e, "NIL00017", "PER")
        + tab_line("TEDL15_0002", "NEW YORK", doc.doc_id, ls, le, "m.02_286", "LOC"),
        encoding="utf-8",
    )
    mentions = tac.read_mention_tab(path)
    assert [(m.mention_id, m.start, m.end, m.entity, m.type) for m in mentions] == [
        ("TEDL15_0001", s, e, "NIL00017", "PER")
    ]
    assert mentions[0].line == 1
    with_loc = tac.read_mention_tab(path, types=["PER", "LOC"])
    assert [m.type for m in with_loc] == ["PER", "LOC"]


def test_mention_tab_bad_lines(tmp_path):
    path = tmp_path / "bad.tab"
    path.write_text(
        tab_line("ok", "Bobby", "D1", 1, 5, "NIL1", "PER")
        + tab_line("t", "Bobby", "D1", 1, 5, "NIL1", "ANIMAL")
        + "LDC\tx\tBobby\tD1:9-x\tNIL1\tPER\tNAM\n"
        + "LDC\tshort\n",
        encoding="utf-8",
    )
    with pytest.raises(CmrkitError, match=r"bad\.tab: line 2: unknown entity type 'ANIMAL'"):
        tac.read_mention_tab(path)
    problems = tac.Problems(skip_bad=True)
    mentions = tac.read_mention_tab(path, problems=problems)
    assert [m.mention_id for m in mentions] == ["ok"]
    assert len(problems) == 3
    assert "line 3" in problems.messages[1] and "line 4" in problems.messages[2]


def test_queries_xml_and_links(tmp_path, docs):
    doc = docs["NYT_ENG_20091003.0001"]
    s, e = span(doc.raw, "Bobby Hall")
    ns, ne = span(doc.raw, "Nokia")
    xml = tmp_path / "q.xml"
    xml.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<kbpentlink>\n'
        f'  <query id="EDL14_ENG_TRAINING_0001">\n    <name>Bobby Hall</name>\n'
        f"    <docid>{doc.doc_id}</docid>\n    <beg>{s}</beg>\n    <end>{e}</end>\n  </query>\n"
        f'  <query id="EDL14_ENG_TRAINING_0002">\n    <name>Nokia</name>\n'
        f"    <docid>{doc.doc_id}</docid>\n    <beg>{ns}</beg>\n    <end>{ne}</end>\n  </query>\n"
        "</kbpentlink>\n",
        encoding="utf-8",
    )
    links = tmp_path / "links.tab"
    links.write_text(
        "query_id\tkb_id\tentity_type\tgenre\n"
        "EDL14_ENG_TRAINING_0001\tNIL0017\tPER\tNW\n"
        "EDL14_ENG_TRAINING_0002\tE0123456\tORG\tNW\n",
        encoding="utf-8",
    )
    mentions = tac.read_queries_xml(xml, links)
    assert [(m.mention_id, m.text, m.start, m.end, m.entity, m.type, m.line) for m in mentions] == [
        ("EDL14_ENG_TRAINING_0001", "Bobby Hall", s, e, "NIL0017", "PER", 3),
        ("EDL14_ENG_TRAINING_0002", "Nokia", ns, ne, "E0123456", "ORG", 9),
    ]
    assert all(tac.check_mention(m, doc) is None for m in mentions)
    assert [m.mention_id for m in tac.read_queries_xml(xml, links, types=["ORG"])] == [
        "EDL14_ENG_TRAINING_0002"
    ]
    links.write_text("EDL14_ENG_TRAINING_0002\tE0123456\tORG\n", encoding="utf-8")
    with pytest.raises(CmrkitError, match=r"q\.xml: line 3: query EDL14_ENG_TRAINING_0001 has no"):
        tac.read_queries_xml(xml, links)


def test_malformed_queries_xml(tmp_path):
    xml = tmp_path / "q.xml"
    xml.write_text("<kbpentlink>\n<query id='a'>\n<name>X</nam>\n</query>\n", encoding="utf-8")
    links = tmp_path / "l.tab"
    links.write_text("a\tNIL1\tPER\n", encoding="utf-8")
    with pytest.raises(CmrkitError, match=r"q\.xml: line 3: malformed XML: mismatched tag"):
        tac.read_queries_xml(xml, links)


def test_documents_bad_input(tmp_path):
    (tmp_path / "a.sgm").write_text(NEWS_1, encoding="utf-8")
    (tmp_path / "b.sgm").write_text(NEWS_2 + NEWS_1, encoding="utf-8")
    with pytest.raises(
        CmrkitError, match=r"b\.sgm: line \d+: document AFP_ENG_20091001\.0009 also"
    ):
        list(tac.iter_documents(tmp_path))
    (tmp_path / "b.sgm").write_text("<DOC>\n<TEXT>no id</TEXT>\n</DOC>\n", encoding="utf-8")
    with pytest.raises(CmrkitError, match=r"b\.sgm: line 1: <DOC> without an id"):
        list(tac.iter_documents(tmp_path))
    with pytest.raises(CmrkitError, match="documents folder not found"):
        list(tac.iter_documents(tmp_path / "missing"))


def test_crlf_is_counted(tmp_path):
    raw = NEWS_2.replace("\n", "\r\n")
    (tmp_path / "crlf.sgm").write_bytes(raw.encode("utf-8"))
    (doc,) = tac.iter_documents(tmp_path)
    s, e = span(raw, "Bobby Hall")
    assert doc.raw == raw.rstrip("\r\n")
    m = tac.TacMention("m", "Bobby Hall", doc.doc_id, s, e, "N", "PER", None, "f", 1)
    assert tac.check_mention(m, doc) is None


@pytest.fixture(scope="module")
def analyser():
    return tac.Analyser()


def test_sentences_in_raw_offsets(docs, analyser):
    doc = docs["AFP_ENG_20091001.0009"]
    sents, ents = analyser.analyse(doc)
    texts = [doc.visible(s, e)[0] for s, e in sents]
    assert "Bobby Hall of AT&T said on Monday that the deal with Nokia is done." in texts
    assert "Hall was happy." in texts
    assert "The United Nations did not comment." in texts
    # sentences never include markup or the document id
    for s, e in sents:
        assert "<" not in doc.raw[s:e] or "<" in doc.visible(s, e)[0]
        assert doc.raw[s:e].strip() == doc.raw[s:e]
    assert not any("AFP_ENG" in t for t in texts)
    # entities in raw offsets, markup and escapes counted
    found = {(doc.raw[s:e], etype) for s, e, _, etype in ents}
    assert ("Bobby Hall", "PER") in found
    assert all(text == doc.visible(s, e)[0] for s, e, text, _ in ents if "&" not in text)
    # blocks split by markup: the post text and the quote are separate sentences
    forum = docs["ENG_DF_001503_20091002_G00A0KZZY"]
    ftexts = [forum.visible(s, e)[0] for s, e in analyser.analyse(forum)[0]]
    assert "Hall runs AT&T." in ftexts
    assert "No, Bobby Hall left in May." in ftexts


def test_merge_spans_for_crossing_mentions():
    spans = [(0, 10), (11, 20), (21, 30)]
    assert tac.merge_spans(spans, [(8, 13)]) == [(0, 20), (21, 30)]
    assert tac.merge_spans(spans, [(2, 5), (22, 24)]) == spans
    assert tac.merge_spans(spans, [(40, 45)]) == [(0, 10), (11, 20), (21, 30), (40, 45)]


def test_sentence_offsets_file(tmp_path):
    path = tmp_path / "sents.txt"
    path.write_text("D1:10:20\nD1:0:9\nD2\t5\t8\nD1:0:9\n", encoding="utf-8")
    # docno layout (last character included) -> end-exclusive spans
    assert tac.read_sentence_offsets(path) == {"D1": [(0, 10), (10, 21)], "D2": [(5, 9)]}
    path.write_text("D1:10:5\n", encoding="utf-8")
    with pytest.raises(CmrkitError, match="line 1: sentence 10:5 ends before it starts"):
        tac.read_sentence_offsets(path)


def test_gzipped_documents(tmp_path):
    import gzip

    (tmp_path / "nyt.sgm.gz").write_bytes(gzip.compress(NEWS_2.encode("utf-8"), mtime=0))
    (doc,) = tac.iter_documents(tmp_path)
    assert doc.doc_id == "NYT_ENG_20091003.0001" and doc.raw == NEWS_2.rstrip("\n")
    (tmp_path / "nyt.sgm.gz").write_bytes(gzip.compress(NEWS_2.encode("utf-8"))[:40])
    with pytest.raises(CmrkitError, match=r"nyt\.sgm\.gz: corrupt or truncated gzip"):
        list(tac.iter_documents(tmp_path))


def test_analyses_come_from_the_cache_the_second_time(docs, tmp_path, monkeypatch):
    monkeypatch.setenv("CMRKIT_CACHE_DIR", str(tmp_path / "cache"))
    doc = docs["AFP_ENG_20091001.0009"]
    first = tac.Analyser()
    assert first.analyse(doc) == first.analyse(doc)
    second = tac.Analyser()
    calls = []
    real = second.nlp.pipe

    def spy(texts, **kw):
        texts = list(texts)
        calls.append(texts)
        return real(texts, **kw)

    monkeypatch.setattr(second.nlp, "pipe", spy)
    assert second.analyse(doc) == first.analyse(doc)
    assert calls == [[]]  # every block answered by the cache
    assert (tmp_path / "cache" / "tac").is_dir()
