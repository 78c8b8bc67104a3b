"""`build-collection --source ecbplus` on the real ECB+ 1.0 release (../shared/data/ecbplus/):
the field's counts, the WEC-Eng-shaped copy as a cross-check, the collection's CDCR files, and
bad inputs (one line, exit 2, nothing written)."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from cmrkit.sources.common import join_tokens
from cmrkit.sources.ecbplus import read_ecbplus

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RELEASE = DATA / "ecbplus" / "ECB+.zip"
CSV = DATA / "ecbplus" / "ECBplus_coreference_sentences.csv"
WEC = DATA / "ecbplus-wec"


@pytest.fixture(scope="module")
def events():
    if not RELEASE.is_file():
        pytest.skip(f"the ECB+ release is not at {RELEASE}")
    return read_ecbplus(RELEASE)


def _split(mentions, split):
    return [m for m in mentions if m.split == split]


def test_test_events_are_the_fields_1780_mentions_in_805_chains(events):
    test = _split(events.mentions, "test")
    chains = Counter(m.cluster for m in test)
    assert (len(test), len(chains), sum(1 for n in chains.values() if n == 1)) == (1780, 805, 623)
    assert sum(1 for m in test if m.cdcr.singleton) == 623
    assert {m.cdcr.topic for m in test} == {str(t) for t in range(36, 46)}
    assert len({m.cdcr.subtopic for m in test}) == 20
    assert len(_split(events.mentions, "dev")) == 1245
    assert {m.cdcr.topic for m in _split(events.mentions, "dev")} == {
        "2", "5", "12", "18", "21", "23", "34", "35"
    }  # fmt: skip
    assert events.validated == str(CSV)  # found beside the zip


@pytest.mark.parametrize("split", ["dev", "test"])
def test_the_wec_eng_shaped_copy_holds_the_same_mentions_and_chains(events, split):
    """Mention by mention (document, text, order in the document) and chain by chain."""
    copy = json.loads(gzip.decompress((WEC / f"{split}.json.gz").read_bytes()))

    def keyed(items):
        seen: Counter = Counter()
        out = {}
        for doc, text, chain in items:
            seen[(doc, text)] += 1
            out[(doc, text, seen[(doc, text)])] = chain
        return out

    # a mention on non-contiguous tokens is its covering span in both; the copy spells one
    # token 'Oscars' where the release has 'Oscars®'; whitespace inside tokens is one space
    ours = keyed(
        (m.doc_id, m.text.replace("Oscars®", "Oscars"), m.cluster)
        for m in sorted(
            _split(events.mentions, split), key=lambda m: (m.doc_id, m.context_offset + m.start)
        )
    )
    theirs = keyed(
        (r["doc_id"].removesuffix(".xml"), " ".join(r["tokens_str"].split()), str(r["coref_chain"]))
        for r in sorted(copy, key=lambda r: (r["doc_id"], r["sent_id"], r["tokens_number"][0]))
    )
    assert len(ours) == len(copy)
    assert set(ours) == set(theirs)
    partition = {frozenset(k for k, c in ours.items() if c == chain) for chain in ours.values()}
    assert partition == {
        frozenset(k for k, c in theirs.items() if c == chain) for chain in theirs.values()
    }


def test_entities_and_all_and_every_sentence(events):
    entities = read_ecbplus(RELEASE, kind="entities")
    both = read_ecbplus(RELEASE, kind="all")
    assert len(both.mentions) == len(entities.mentions) + len(events.mentions)
    assert not {m.mention_id for m in entities.mentions} & {m.mention_id for m in events.mentions}
    every = read_ecbplus(RELEASE, validated="none")
    assert every.validated is None and len(every.mentions) > len(events.mentions)
    # a mention on non-contiguous tokens keeps its tokens; its span covers them
    gapped = [
        m for m in every.mentions if len(m.cdcr.tokens) <= m.cdcr.tokens[-1] - m.cdcr.tokens[0]
    ]
    assert gapped and all(len(m.cdcr.tokens) >= 2 for m in gapped)


def test_the_build_writes_the_coreference_files_and_a_zip_equals_its_folder(cli, tmp_path):
    if not RELEASE.is_file():
        pytest.skip("no release")
    r = cli("build-collection", "--source", "ecbplus", "-i", RELEASE)
    assert r.exit_code == 0, r.output
    cdir = tmp_path / "collections" / "ecbplus"
    mentions = [json.loads(x) for x in gzip.open(cdir / "mentions.jsonl.gz", "rt")]
    assert len([m for m in mentions if m["split"] == "test"]) == 1780
    docs = [json.loads(x) for x in gzip.open(cdir / "documents.jsonl.gz", "rt")]
    by_doc = {d["doc_id"]: dict((n, w) for n, w in d["sentences"]) for d in docs}
    corpus = {u["id"]: u for u in map(json.loads, gzip.open(cdir / "corpus.jsonl.gz", "rt"))}
    for m in mentions:
        words = by_doc[m["doc_id"]][m["sentence"]]
        unit = corpus[m["unit"]]
        assert unit["contents"] == join_tokens(words)[0]  # a unit is the corpus's sentence
        s, e = m["span"]
        assert unit["contents"][s:e] == m["text"]
    key = [json.loads(x) for x in (tmp_path / "qrels/ecbplus.test.clusters.jsonl").open()]
    assert len(key) == 1780 and all(k["subtopic"].startswith(k["topic"]) for k in key)
    # the unzipped folder is the same input: the same collection
    folder = tmp_path / "unzipped"
    with zipfile.ZipFile(RELEASE) as z:
        z.extractall(folder)
    r = cli("build-collection", "--source", "ecbplus", "-i", folder / "ECB+", "-n", "f",
            "--validated", CSV)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (tmp_path / "collections/f/corpus.jsonl.gz").read_bytes() == (
        cdir / "corpus.jsonl.gz"
    ).read_bytes()
    assert (tmp_path / "collections/f/mentions.jsonl.gz").read_bytes() == (
        cdir / "mentions.jsonl.gz"
    ).read_bytes()


def _small_release(path: Path, broken: str | None = None) -> Path:
    """Topic 36's files of the release (and its CSV copy), one of them replaced by
    ``broken``."""
    with zipfile.ZipFile(RELEASE) as z, zipfile.ZipFile(path, "w") as out:
        for name in z.namelist():
            if name.startswith("ECB+/36/") or name.endswith(".csv"):
                data = z.read(name)
                if broken is not None and name == "ECB+/36/36_1ecb.xml":
                    data = broken.encode()
                out.writestr(name, data)
    return path


def _refused(r, *words: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_bad_inputs_are_one_line_and_write_nothing(cli, tmp_path):
    if not RELEASE.is_file():
        pytest.skip("no release")
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("data/readme.txt", "not ECB+")
    _refused(cli("build-collection", "--source", "ecbplus", "-i", other), "not the ECB+ release")
    text = "<Document doc_name='36_1ecb.xml'>\n<token t_id='1' sentence='0'>A</token>\n<Mark"
    bad = _small_release(tmp_path / "bad.zip", broken=text)
    _refused(
        cli("build-collection", "--source", "ecbplus", "-i", bad),
        "bad.zip::ECB+/36/36_1ecb.xml",
        "line 3",
        "does not parse",
    )
    small = _small_release(tmp_path / "small.zip")
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("Topic,File,Sentence Number\n99,1ecb,1\n")
    _refused(
        cli("build-collection", "--source", "ecbplus", "-i", small, "--validated", foreign),
        "foreign.csv",
        "no row names a document",
    )
    _refused(
        cli("build-collection", "--source", "ecbplus", "-i", small, "--mentions", "verbs"),
        "events, entities or all",
    )
    assert not (tmp_path / "collections").exists() and not (tmp_path / "qrels").exists()
    # the topic-36 release builds (its copy of the CSV read inside the zip)
    r = cli("build-collection", "--source", "ecbplus", "-i", small)
    assert r.exit_code == 0 and "the release's copy" in r.stderr


def test_a_csv_beside_a_copy_is_used(tmp_path):
    if not RELEASE.is_file():
        pytest.skip("no release")
    small = _small_release(tmp_path / "small.zip")
    rows = io.StringIO("Topic,File,Sentence Number\n36,1ecb,1\n")
    (tmp_path / "ECBplus_coreference_sentences.csv").write_text(rows.getvalue())
    read = read_ecbplus(small)
    assert read.validated == str(tmp_path / "ECBplus_coreference_sentences.csv")
    assert {(m.doc_id, m.cdcr.sentence) for m in read.mentions} == {("36_1ecb", 1)}
