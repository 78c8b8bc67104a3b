"""The published CMR queries and qrels layouts: reading, writing, and trec_eval on them."""

from __future__ import annotations

import io

import pytest

from cmrkit.errors import CmrkitError
from cmrkit.tac import cmr
from cmrkit.trec import read_qrels

# shaped exactly like the published CMR_queries.txt: every offset inclusive, trailing spaces
QUERIES = (
    "TAC14:NIL0945:EDL14_ENG_TRAINING_4376\tPER\tNYT_ENG_20091001.0009:1549:1633:1589:1602"
    "\tJim Cracchiolo \n"
    "TAC14:E0123456:EDL14_ENG_TRAINING_0007\tGPE\tAFP_ENG_20091002.0001:10:80:22:29\tNew York  \n"
)
QRELS = (
    "TAC14:NIL0945:EDL14_ENG_TRAINING_4376\tPER\tAPW_ENG_20091003.0001:0:40\t1.0\n"
    "TAC14:NIL0945:EDL14_ENG_TRAINING_4376\tPER\tAPW_ENG_20091003.0001:41:90\t0.0\n"
    "TAC14:NIL0945:EDL14_ENG_TRAINING_4376\tPER\tAPW_ENG_20091004.0002:0:30\t-1.0\n"
    "TAC14:E0123456:EDL14_ENG_TRAINING_0007\tGPE\tAPW_ENG_20091003.0001:0:40\t1.0\n"
)


def test_read_queries_with_trailing_spaces(tmp_path):
    path = tmp_path / "CMR_queries.txt"
    path.write_text(QUERIES, encoding="utf-8")
    queries = cmr.read_cmr_queries(path)
    q = queries["TAC14:NIL0945:EDL14_ENG_TRAINING_4376"]
    assert (q.type, q.doc_id, q.sent_start, q.sent_end, q.start, q.end, q.text) == (
        "PER",
        "NYT_ENG_20091001.0009",
        1549,
        1633,
        1589,
        1602,
        "Jim Cracchiolo",
    )
    assert q.unit == "NYT_ENG_20091001.0009:1549:1633"
    assert q.span == (1589, 1603)
    assert queries["TAC14:E0123456:EDL14_ENG_TRAINING_0007"].text == "New York"
    assert cmr.is_cmr_queries_file(path)
    assert cmr.query_types(path) == {
        "TAC14:NIL0945:EDL14_ENG_TRAINING_4376": "PER",
        "TAC14:E0123456:EDL14_ENG_TRAINING_0007": "GPE",
    }


def test_parsed_inclusive_span_holds_the_mention_text(tmp_path):
    """A document whose characters 1589..1602 (inclusive) are the published mention."""
    doc = list("x" * 1700)
    doc[1589:1603] = "Jim Cracchiolo"
    raw = "".join(doc)
    path = tmp_path / "CMR_queries.txt"
    path.write_text(QUERIES, encoding="utf-8")
    q = cmr.read_cmr_queries(path)["TAC14:NIL0945:EDL14_ENG_TRAINING_4376"]
    start, end = q.span
    assert raw[start:end] == q.text
    assert raw[q.start : q.end + 1] == q.text
    # written back, the id is the published one
    assert cmr.cmr_mention_id(q.doc_id, (q.sent_start, q.sent_end + 1), q.span) == q.mention_id


def test_exclusive_ends_of_cmrkit_0_1_are_refused(tmp_path):
    old = (
        "tac:NIL1:m1\tPER\tD1:0:40:5:15\tBobby Hall\n"
        "tac:E2:m2\tGPE\tD2:0:30:22:30\tNew York\n"
        "tac:E3:m3\tORG\tD3:0:30:2:8\tAT&amp;T\n"  # escaped: matches neither way
    )
    path = tmp_path / "queries.test.txt"
    path.write_text(old, encoding="utf-8")
    with pytest.raises(CmrkitError) as e:
        cmr.read_cmr_queries(path)
    message = str(e.value)
    assert "queries.test.txt" in message and "exclusive" in message
    assert "on 2 of 3 lines" in message and "line 1: D1:0:40:5:15" in message
    assert "rebuild the collection" in message and "\n" not in message
    # the types alone (eval --by type) do not depend on the ends
    assert cmr.query_types(path) == {"tac:NIL1:m1": "PER", "tac:E2:m2": "GPE", "tac:E3:m3": "ORG"}


def test_read_qrels_with_types_and_float_rels(tmp_path):
    path = tmp_path / "CMR_char_offset_qrels.txt"
    path.write_text(QRELS, encoding="utf-8")
    qrels, types = cmr.read_cmr_qrels(path)
    assert qrels["TAC14:NIL0945:EDL14_ENG_TRAINING_4376"] == {
        "APW_ENG_20091003.0001:0:40": 1,
        "APW_ENG_20091003.0001:41:90": 0,
        "APW_ENG_20091004.0002:0:30": -1,
    }
    assert types["TAC14:E0123456:EDL14_ENG_TRAINING_0007"] == "GPE"
    assert not cmr.is_cmr_queries_file(path)
    assert cmr.query_types(path) == types


def test_round_trip_writes_published_layout(tmp_path):
    src = tmp_path / "q.txt"
    src.write_text(QUERIES, encoding="utf-8")
    queries = cmr.read_cmr_queries(src)
    buf = io.StringIO()
    cmr.write_cmr_queries(buf, (q.row for q in queries.values()))
    assert buf.getvalue().splitlines() == [line.rstrip() for line in QUERIES.splitlines()]
    qpath = tmp_path / "qrels.txt"
    qpath.write_text(QRELS, encoding="utf-8")
    qrels, types = cmr.read_cmr_qrels(qpath)
    out = io.StringIO()
    cmr.write_cmr_qrels(out, qrels, types)
    assert out.getvalue() == QRELS
    assert read_qrels(qpath) == qrels


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q1\tPER\tDOC:1:2\tX\n", "column 3"),
        ("q1\tPER\tDOC:10:20:30:35\tXXXXXX\n", "inside the sentence"),
        ("q1\tPER\tDOC:10:20:15:21\tXXXXXXX\n", "inside the sentence"),
        ("q1\tPER\tDOC:a:20:3:5\tX\n", "non-integer"),
        ("q1\tPER\n", "expected 4 tab-separated columns"),
    ],
)
def test_bad_query_lines(tmp_path, line, message):
    path = tmp_path / "q.txt"
    path.write_text("q0\tORG\tD:0:9:1:3\tABC\n" + line, encoding="utf-8")
    with pytest.raises(CmrkitError, match=rf"q\.txt: line 2: .*{message}"):
        cmr.read_cmr_queries(path)


def test_conflicting_types_in_qrels(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1\tPER\tD:0:5\t1.0\nq1\tORG\tD:6:9\t0.0\n", encoding="utf-8")
    with pytest.raises(CmrkitError, match="line 2: query q1 has type PER"):
        cmr.read_cmr_qrels(path)


def test_ids():
    # every end is written inclusive, the mention's too (published file)
    assert cmr.cmr_docno("D", 3, 9) == "D:3:8"
    assert cmr.cmr_mention_id("D", (3, 9), (4, 9)) == "D:3:8:4:8"
    assert cmr.cmr_qid("TAC15", "NIL1", "m7") == "TAC15:NIL1:m7"
    assert cmr.parse_mention_id("A:B:0:9:2:4") == ("A:B", 0, 9, 2, 4)
    assert cmr.parse_mention_id("D:3:8:8:8") == ("D", 3, 8, 8, 8)
    with pytest.raises(ValueError, match="inside the sentence"):
        cmr.parse_mention_id("D:3:8:4:9")


def _trec_eval(tmp_path):
    """The native trec_eval shipped in the Anserini jar, extracted."""
    import glob
    import importlib.resources
    import os
    import zipfile

    jars = glob.glob(
        os.path.join(str(importlib.resources.files("pyserini.resources.jars")), "*.jar")
    )
    binary = tmp_path / "trec_eval"
    with zipfile.ZipFile(jars[0]) as jar:
        binary.write_bytes(jar.read("trec_eval/trec_eval-linux-amd64"))
    binary.chmod(0o755)
    return binary


def test_trec_eval_reads_published_qrels(tmp_path):
    """The native trec_eval accepts the type column and float rels, and scores what cmrkit reads."""
    import subprocess

    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS, encoding="utf-8")
    run = tmp_path / "run.trec"
    run.write_text(
        "TAC14:NIL0945:EDL14_ENG_TRAINING_4376 Q0 APW_ENG_20091003.0001:41:90 1 3.0 r\n"
        "TAC14:NIL0945:EDL14_ENG_TRAINING_4376 Q0 APW_ENG_20091003.0001:0:40 2 2.0 r\n"
        "TAC14:E0123456:EDL14_ENG_TRAINING_0007 Q0 APW_ENG_20091003.0001:0:40 1 1.0 r\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            str(_trec_eval(tmp_path)),
            "-q",
            "-m",
            "num_rel",
            "-m",
            "num_rel_ret",
            str(qrels),
            str(run),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    values = {(m, q): float(v) for m, q, v in (line.split() for line in done.stdout.splitlines())}
    parsed, _ = cmr.read_cmr_qrels(qrels)
    for qid, docs in parsed.items():
        assert values[("num_rel", qid)] == sum(1 for r in docs.values() if r > 0)
    assert values[("num_rel_ret", "all")] == 2
