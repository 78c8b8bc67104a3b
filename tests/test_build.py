"""build-collection on the embedded ECB+ sample and on small fixtures written here."""

from __future__ import annotations

import gzip
import json
import zipfile
from pathlib import Path

import pytest
from conftest import wec_record, write_json

from cmrkit.trec import read_qrels, read_topics_tsv


def read_corpus(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_topics(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for d in ("collections", "qrels")
        for p in sorted((root / d).rglob("*"))
        if p.is_file()
    }


# --- the embedded sample (real ECB+ records) -------------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    from typer.testing import CliRunner

    from cmrkit.cli import app

    root = tmp_path_factory.mktemp("sample")
    import os

    cwd = os.getcwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(app, ["build-collection"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return root, result


def test_sample_layout_and_consistency(sample):
    root, result = sample
    cdir = root / "collections" / "sample"
    assert {p.name for p in cdir.iterdir()} == {
        "corpus.jsonl.gz",
        "topics.jsonl",
        "topics.dev.tsv",
        "topics.test.tsv",
        "manifest.json",
        ".cmrkit",
    }
    corpus = read_corpus(cdir / "corpus.jsonl.gz")
    ids = [d["id"] for d in corpus]
    assert len(ids) == len(set(ids))
    by_id = {d["id"]: d for d in corpus}
    assert {d["kind"] for d in corpus} == {"annotated", "distractor"}
    # every annotated mention span points at its text
    for d in corpus:
        for m in d.get("mentions", []):
            assert 0 <= m["start"] < m["end"] <= len(d["contents"])
    topics = read_topics(cdir / "topics.jsonl")
    manifest = json.loads((cdir / "manifest.json").read_text())
    assert manifest["counts"]["queries"] == len(topics)
    assert manifest["counts"]["corpus_units"] == len(corpus)
    assert manifest["inputs"][0]["path"] == "cmrkit:data/sample/ecbplus.dev.json.gz"
    for split in ("dev", "test"):
        qrels = read_qrels(root / "qrels" / f"sample.{split}.txt")
        tsv = read_topics_tsv(cdir / f"topics.{split}.tsv")
        split_topics = [t for t in topics if t["split"] == split]
        assert set(tsv) == {t["qid"] for t in split_topics} == set(qrels)
        for t in split_topics:
            unit = by_id[t["unit"]]
            s, e = t["span"]
            assert unit["contents"][s:e] == t["mention"] == tsv[t["qid"]]
            assert t["unit"] not in qrels[t["qid"]], "a query's own unit is never relevant"
            assert len(qrels[t["qid"]]) == t["n_relevant"] >= 1
            for docno in qrels[t["qid"]]:
                clusters = {m["cluster"] for m in by_id[docno]["mentions"]}
                assert t["cluster"] in clusters
    # the statistics table was printed
    assert "collection sample" in result.output and "dev" in result.output


def test_sample_distractors_are_not_annotated_texts(sample):
    root, _ = sample
    corpus = read_corpus(root / "collections" / "sample" / "corpus.jsonl.gz")
    annotated = {d["contents"] for d in corpus if d["kind"] == "annotated"}
    distractors = [d for d in corpus if d["kind"] == "distractor"]
    assert distractors and all(d["id"].startswith("D:") for d in distractors)
    assert not annotated & {d["contents"] for d in distractors}
    assert len({d["contents"] for d in distractors}) == len(distractors)


def test_rebuild_is_byte_identical(sample, cli, tmp_path):
    root, _ = sample
    assert cli("build-collection").exit_code == 0
    assert snapshot(tmp_path) == snapshot(root)


def test_existing_collection_is_kept_without_force(sample, cli, tmp_path):
    assert cli("build-collection").exit_code == 0
    before = snapshot(tmp_path)
    again = cli("build-collection")  # the same inputs and parameters: up to date, success
    assert again.exit_code == 0
    assert again.stdout.strip() == (
        "collections/sample is up to date (same inputs and parameters); --force rebuilds it"
    )
    assert snapshot(tmp_path) == before
    # the same files given by path are the same inputs (by sha256)
    cli("sample-data", "data")
    args = ["-i", "data/ecbplus.dev.json.gz", "-i", "data/ecbplus.test.json.gz"]
    same = cli(
        "build-collection", *args, "-d", "data/ecbplus.train-documents.txt.gz", "-n", "sample"
    )
    assert same.exit_code == 0 and "up to date" in same.stdout
    result = cli("build-collection", "--queries", "longest")
    assert result.exit_code == 2
    assert "already exists" in result.output and "--force" in result.output
    assert snapshot(tmp_path) == before
    result = cli("build-collection", "--queries", "longest", "--force")
    assert result.exit_code == 0
    assert snapshot(tmp_path) != before
    assert not list((tmp_path / "collections").glob(".cmrkit-tmp-*"))


# --- WEC-Eng fixtures (int coref_chain, as in WEC-Eng itself) ---------------------------------

CTX = [
    "Rescuers dug through rubble after the 2010 Haiti earthquake struck Port-au-Prince .".split(),
    "The quake killed thousands and the earthquake left millions homeless .".split(),
    "Aid arrived days after the Haiti earthquake devastated the capital .".split(),
    "The summit in Geneva ended without an agreement on trade .".split(),
    "Leaders left the Geneva summit early , officials said .".split(),
]


def wec_fixture(tmp_path: Path, name: str = "Test_Event_gold_mentions_validated.json", **kw):
    recs = [
        wec_record("101", 7, "Haiti", CTX[0], [7, 8], link="2010 Haiti earthquake"),
        wec_record("102", 7, "Quake", CTX[1], [1], link="2010 Haiti earthquake"),
        wec_record("103", 7, "Quake", CTX[1], [4], link="2010 Haiti earthquake"),
        wec_record("104", 7, "Aid", CTX[2], [5, 6], link="2010 Haiti earthquake"),
        wec_record("201", 9, "Geneva", CTX[3], [1], link="Geneva summit"),
        wec_record("202", 9, "Leaders", CTX[4], [4], link="Geneva summit"),
        wec_record("301", 11, "Solo", ["A", "lone", "event", "happened", "."], [2]),
    ]
    return write_json(tmp_path / name, recs, **kw)


def test_wec_queries_all_self_exclusion(cli, tmp_path):
    path = wec_fixture(tmp_path)
    result = cli("build-collection", "-i", path, "--name", "w")
    assert result.exit_code == 0, result.output
    topics = {t["qid"]: t for t in read_topics(tmp_path / "collections/w/topics.jsonl")}
    qrels = read_qrels(tmp_path / "qrels/w.test.txt")
    # singleton cluster 11 gives no query; int chains become strings
    assert set(topics) == {"101", "102", "103", "104", "201", "202"}
    assert topics["101"]["cluster"] == "7" and topics["101"]["split"] == "test"
    assert topics["101"]["cluster_title"] == "2010 Haiti earthquake"
    # 102 and 103 share a passage: each other's unit is the query's own, never relevant
    assert set(qrels["102"]) == {"P:101", "P:104"}
    assert set(qrels["101"]) == {"P:102", "P:104"}
    assert topics["102"]["unit"] == topics["103"]["unit"] == "P:102"
    assert topics["101"]["mention"] == "Haiti earthquake"


def test_wec_queries_longest_ties_broken_by_seed(cli, tmp_path):
    recs = [
        wec_record("a1", 1, "d1", ["x", "alpha", "y"], [1]),
        wec_record("a2", 1, "d2", ["x", "gamma", "z"], [1]),
        wec_record("a3", 1, "d3", ["x", "delta", "w"], [1]),
        wec_record("a4", 1, "d4", ["x", "beta", "v"], [1]),
    ]
    path = write_json(tmp_path / "m.json", recs)
    chosen = set()
    for seed in range(12):
        name = f"s{seed}"
        r = cli(
            "build-collection",
            "-i",
            f"test={path}",
            "--queries",
            "longest",
            "--seed",
            seed,
            "--name",
            name,
        )
        assert r.exit_code == 0, r.output
        (t,) = read_topics(tmp_path / f"collections/{name}/topics.jsonl")
        assert t["mention"] in {"alpha", "gamma", "delta"}  # longest strings only, never "beta"
        assert len(read_qrels(tmp_path / f"qrels/{name}.test.txt")[t["qid"]]) == 3
        again = cli(
            "build-collection",
            "-i",
            f"test={path}",
            "--queries",
            "longest",
            "--seed",
            seed,
            "--name",
            name + "b",
        )
        assert again.exit_code == 0
        assert read_topics(tmp_path / f"collections/{name}b/topics.jsonl")[0]["qid"] == t["qid"]
        chosen.add(t["qid"])
    assert len(chosen) > 1, "different seeds break the tie differently"


def test_min_relevant_drops_queries(cli, tmp_path):
    path = wec_fixture(tmp_path)
    r = cli("build-collection", "-i", path, "--name", "w", "--min-relevant", "2")
    assert r.exit_code == 0, r.output
    topics = {t["qid"] for t in read_topics(tmp_path / "collections/w/topics.jsonl")}
    assert topics == {"101", "102", "103", "104"}  # the Geneva pair has 1 relevant each
    manifest = json.loads((tmp_path / "collections/w/manifest.json").read_text())
    assert manifest["dropped"]["queries_below_min_relevant"] == 2


def test_gz_and_zip_inputs_give_the_same_collection(cli, tmp_path):
    plain = wec_fixture(tmp_path, "test.json")
    gz = wec_fixture(tmp_path, "test.json.gz", gz=True)
    with zipfile.ZipFile(tmp_path / "one.zip", "w") as z:
        z.write(plain, "inner/test.json")
    with zipfile.ZipFile(tmp_path / "many.zip", "w") as z:
        z.write(plain, "a/test.json")
        z.write(plain, "b/other.json")
    for name, spec in [
        ("p", plain),
        ("g", gz),
        ("z", tmp_path / "one.zip"),
        ("m", f"{tmp_path / 'many.zip'}::a/test.json"),
    ]:
        r = cli("build-collection", "-i", f"test={spec}", "--name", name)
        assert r.exit_code == 0, r.output
    corpora = {n: (tmp_path / f"collections/{n}/corpus.jsonl.gz").read_bytes() for n in "pgzm"}
    assert len(set(corpora.values())) == 1
    r = cli("build-collection", "-i", f"test={tmp_path / 'many.zip'}", "--name", "x")
    assert r.exit_code == 2 and "ARCHIVE.zip::MEMBER" in r.output


def test_resplit_by_cluster_is_deterministic(cli, tmp_path):
    recs = []
    for c in range(40):
        for k in range(3):
            recs.append(
                wec_record(
                    f"{c}-{k}", c, f"doc{c}-{k}", ["the", f"event{c}", "in", f"place{k}", "."], [1]
                )
            )
    path = write_json(tmp_path / "all.json", recs)
    splits = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        r = cli(
            "build-collection",
            "-i",
            path,
            "--resplit",
            "train=0.5,dev=0.25,test=0.25",
            "--seed",
            seed,
            "--name",
            name,
        )
        assert r.exit_code == 0, r.output
        topics = read_topics(tmp_path / f"collections/{name}/topics.jsonl")
        by_cluster = {}
        for t in topics:
            by_cluster.setdefault(t["cluster"], set()).add(t["split"])
        assert all(len(s) == 1 for s in by_cluster.values()), "a cluster is never split"
        splits[name] = {c: s.pop() for c, s in by_cluster.items()}
    assert splits["a"] == splits["b"] and splits["a"] != splits["c"]
    counts = {s: list(splits["a"].values()).count(s) for s in ("train", "dev", "test")}
    assert counts == {"train": 20, "dev": 10, "test": 10}


# --- distractors ------------------------------------------------------------------------------


def test_distractors_dedupe_filter_and_query_clusters(cli, tmp_path):
    path = wec_fixture(tmp_path)
    text = tmp_path / "paras.txt"
    text.write_text(
        "A quiet day in the mountains with no news at all .\n"
        "\n"
        "A quiet day in the mountains with no news at all .\n"  # duplicate
        + " ".join(CTX[3])
        + "\n"  # equal to an annotated passage
        + "Officials discussed the 2010 Haiti earthquake response .\n"  # names a cluster title
        "Markets rose on Tuesday .\n"
    )
    wec_distractors = write_json(
        tmp_path / "Train.json",
        [
            wec_record("901", 7, "Other", ["Another", "report", "on", "the", "quake", "."], [4]),
            wec_record("902", 55, "Else", ["An", "unrelated", "flood", "story", "."], [2]),
        ],
    )
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text(
        json.dumps({"id": "wiki 1", "contents": "Rivers flood in spring .", "title": "Rivers"})
        + "\n"
    )
    r = cli(
        "build-collection",
        "-i",
        f"test={path}",
        "--name",
        "w",
        "-d",
        text,
        "-d",
        wec_distractors,
        "-d",
        jsonl,
        "--filter-distractors",
        "titles",
    )
    assert r.exit_code == 0, r.output
    corpus = read_corpus(tmp_path / "collections/w/corpus.jsonl.gz")
    distractors = {d["id"]: d["contents"] for d in corpus if d["kind"] == "distractor"}
    assert distractors == {
        "D:paras:1": "A quiet day in the mountains with no news at all .",
        "D:paras:6": "Markets rose on Tuesday .",
        "D:902": "An unrelated flood story .",
        "D:wiki_1": "Rivers flood in spring .",
    }
    dropped = json.loads((tmp_path / "collections/w/manifest.json").read_text())["dropped"]
    assert dropped["distractor_duplicates"] == 1
    assert dropped["distractor_equal_to_annotated_unit"] == 1
    assert dropped["distractor_filtered"] == 1
    assert dropped["distractor_of_query_cluster"] == 1
    assert "dropped:" in r.output and "distractor filtered: 1" in r.output


def test_mentions_filter_drops_multiword_mention_strings(cli, tmp_path):
    path = wec_fixture(tmp_path)
    text = tmp_path / "p.txt"
    text.write_text("Donors pledged help after the haiti EARTHQUAKE .\nThe earthquake was big .\n")
    r = cli(
        "build-collection",
        "-i",
        f"test={path}",
        "--name",
        "w",
        "-d",
        text,
        "--filter-distractors",
        "mentions",
    )
    assert r.exit_code == 0, r.output
    corpus = read_corpus(tmp_path / "collections/w/corpus.jsonl.gz")
    kept = [d["contents"] for d in corpus if d["kind"] == "distractor"]
    assert kept == ["The earthquake was big ."]  # single-word mentions do not filter


# --- CoreSearch and generic JSONL -------------------------------------------------------------


def test_coresearch_files(cli, tmp_path):
    clusters = [
        {"clusterId": 5, "clusterTitle": "2004 Summer Olympics", "mentionIds": ["p1", "p2", "p3"]},
        {"clusterId": 6, "clusterTitle": "Lone", "mentionIds": ["p4"]},
    ]

    def passage(pid, chain, ctx, s, e):
        return {
            "id": pid,
            "goldChain": chain,
            "mention": ctx[s : e + 1],
            "startIndex": s,
            "endIndex": e,
            "context": ctx,
        }

    passages = [
        passage("p1", 5, "He won gold at the Athens Games in 2004 .".split(), 5, 6),
        passage("p2", 5, "The 2004 Olympics opened in August .".split(), 1, 2),
        passage("p3", 5, "She competed at the Games .".split(), 4, 4),
        passage("p4", 6, "A lone event .".split(), 2, 2),
        {
            "id": "x9",
            "goldChain": -1,
            "mention": [],
            "startIndex": -1,
            "endIndex": -1,
            "context": "An unrelated paragraph about rivers .".split(),
        },
    ]
    c = write_json(tmp_path / "Test_gold_clusters.json", clusters)
    p = write_json(tmp_path / "Test_all_passages.json", passages)
    r = cli("build-collection", "--source", "coresearch", "-i", c, "-i", p, "--name", "cs")
    assert r.exit_code == 0, r.output
    topics = {t["qid"]: t for t in read_topics(tmp_path / "collections/cs/topics.jsonl")}
    assert set(topics) == {"p1", "p2", "p3"}
    assert topics["p1"]["mention"] == "Athens Games" and topics["p1"]["split"] == "test"
    assert topics["p2"]["cluster_title"] == "2004 Summer Olympics"
    qrels = read_qrels(tmp_path / "qrels/cs.test.txt")
    assert set(qrels["p1"]) == {"P:p2", "P:p3"}
    corpus = {d["id"]: d for d in read_corpus(tmp_path / "collections/cs/corpus.jsonl.gz")}
    assert corpus["D:x9"]["kind"] == "distractor" and corpus["P:p4"]["kind"] == "annotated"


def test_generic_jsonl(cli, tmp_path):
    lines = [
        {
            "mention_id": "m1",
            "cluster": "E1",
            "doc_id": "d1",
            "context": "Obama visited Paris .",
            "start": 0,
            "end": 5,
            "mention": "Obama",
            "type": "PER",
        },
        {
            "mention_id": "m2",
            "cluster": "E1",
            "doc_id": "d2",
            "tokens": ["The", "president", "spoke", "."],
            "token_start": 1,
            "token_end": 2,
        },
        {
            "mention_id": "m3",
            "cluster": "E1",
            "doc_id": "d3",
            "context": "Barack Obama smiled .",
            "start": 7,
            "end": 12,
            "split": "dev",
        },
    ]
    path = tmp_path / "mentions.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = cli("build-collection", "--source", "jsonl", "-i", f"test={path}", "--name", "j")
    assert r.exit_code == 0, r.output
    topics = {t["qid"]: t for t in read_topics(tmp_path / "collections/j/topics.jsonl")}
    assert topics["m1"]["type"] == "PER" and topics["m3"]["split"] == "dev"
    assert topics["m2"]["mention"] == "president"
    assert set(read_qrels(tmp_path / "qrels/j.dev.txt")["m3"]) == {"P:m1", "P:m2"}


# --- sentence units (real spaCy model) --------------------------------------------------------


def test_sentence_units(cli, tmp_path):
    tokens = (
        "The storm hit the coast on Monday . Officials said the hurricane killed ten "
        "people . Schools stayed closed ."
    ).split()
    other = "Weather experts tracked the hurricane for days .".split()
    path = write_json(
        tmp_path / "s.json",
        [
            wec_record("h1", 3, "d1", tokens, [1]),
            wec_record("h2", 3, "d1", tokens, [11]),
            wec_record("h3", 3, "d2", other, [4]),
        ],
    )
    r = cli("build-collection", "-i", f"test={path}", "--unit", "sentence", "--name", "s")
    assert r.exit_code == 0, r.output
    corpus = {d["id"]: d for d in read_corpus(tmp_path / "collections/s/corpus.jsonl.gz")}
    text = " ".join(tokens)
    assert len([i for i in corpus if i.startswith("P:h1:")]) == 3
    for uid, d in corpus.items():
        if uid.startswith("P:h1:"):
            _, _, s, e = uid.split(":")
            assert text[int(s) : int(e)] == d["contents"] and d["passage"] == "P:h1"
    topics = {t["qid"]: t for t in read_topics(tmp_path / "collections/s/topics.jsonl")}
    assert corpus[topics["h1"]["unit"]]["contents"] == "The storm hit the coast on Monday ."
    assert corpus[topics["h2"]["unit"]]["contents"].startswith("Officials said the hurricane")
    s, e = topics["h2"]["span"]
    assert topics["h2"]["context"][s:e] == "hurricane"
    # two mentions of one passage in different sentences are relevant to each other
    assert topics["h2"]["unit"] in read_qrels(tmp_path / "qrels/s.test.txt")["h1"]
    kinds = {d["kind"] for d in corpus.values()}
    assert kinds == {"annotated", "context"}


def test_sentence_splitting_reports_progress_with_totals(tmp_path):
    import cmrkit.collection.build as col
    from cmrkit.commands.loaders import load_inputs

    distractors = tmp_path / "d.txt"
    distractors.write_text(
        "".join(f"Paragraph {i} says one thing . It says another .\n" for i in range(600))
    )
    loaded = load_inputs("wec-eng", [f"test={wec_fixture(tmp_path)}"], [str(distractors)])
    seen: dict[str, list] = {}

    def progress(description: str, total: int | None):
        seen[description] = [total, 0]
        return lambda n: seen[description].__setitem__(1, seen[description][1] + n)

    opts = col.BuildOptions(name="s", unit="sentence", sentences="rule")
    col.build_collection(
        loaded.mentions,
        loaded.distractors,
        opts,
        inputs=loaded.inputs,
        source="wec-eng",
        collections_dir=tmp_path / "collections",
        qrels_dir=tmp_path / "qrels",
        progress=progress,
    )
    # every step has a total, and the steps count up to it
    assert seen["splitting annotated passages into sentences"] == [6, 6]  # distinct contexts
    assert seen["distractors: splitting into sentences"] == [600, 600]
    assert all(total is not None and done == total for total, done in seen.values()), seen


# --- bad input: one line naming file, record and field; exit 2; nothing written -----------------


def _bad(cli, tmp_path, *args):
    r = cli("build-collection", *args, "--name", "bad")
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert not (tmp_path / "collections" / "bad").exists()
    assert not list((tmp_path / "qrels").glob("bad.*")) if (tmp_path / "qrels").exists() else True
    return lines[0]


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda r: r.pop("coref_chain"), "missing field 'coref_chain'"),
        (lambda r: r.update(coref_chain=[1]), "field 'coref_chain' is list"),
        (lambda r: r.update(tokens_number=[99]), "field 'tokens_number' holds index 99 outside"),
        (lambda r: r.update(mention_context="not a list"), "field 'mention_context' is str"),
        (lambda r: r.update(tokens_number=["1"]), "field 'tokens_number'[0] is str"),
    ],
)
def test_bad_wec_records(cli, tmp_path, mutate, expected):
    recs = json.loads(wec_fixture(tmp_path).read_text())
    mutate(recs[2])
    path = write_json(tmp_path / "bad.json", recs)
    line = _bad(cli, tmp_path, "-i", f"test={path}")
    assert str(path) in line and "record 2" in line and expected in line


def test_malformed_json_names_line_and_column(cli, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"mention_id": "1",\n  "coref_chain": }\n]')
    line = _bad(cli, tmp_path, "-i", f"test={path}")
    assert "broken.json: line 3 column" in line and "malformed JSON" in line


def test_duplicate_ids_empty_input_unknown_source_truncated_gzip(cli, tmp_path):
    recs = json.loads(wec_fixture(tmp_path).read_text())
    recs[3]["mention_id"] = "101"
    dup = write_json(tmp_path / "dup.json", recs)
    assert "duplicate mention_id '101'" in _bad(cli, tmp_path, "-i", f"test={dup}")
    empty = write_json(tmp_path / "empty.json", [])
    assert "no mentions" in _bad(cli, tmp_path, "-i", f"test={empty}")
    (tmp_path / "blank.json").write_text("")
    assert "empty" in _bad(cli, tmp_path, "-i", f"test={tmp_path / 'blank.json'}")
    r = cli("build-collection", "--source", "conll", "-i", dup, "--name", "bad")
    assert r.exit_code == 2 and "'conll' is not one of 'wec-eng', 'coresearch'" in r.stderr
    assert not (tmp_path / "collections" / "bad").exists()
    whole = gzip.compress(wec_fixture(tmp_path).read_bytes())
    trunc = tmp_path / "trunc.json.gz"
    trunc.write_bytes(whole[: len(whole) // 2])
    assert "truncated" in _bad(cli, tmp_path, "-i", f"test={trunc}")
    assert "file not found" in _bad(cli, tmp_path, "-i", f"test={tmp_path / 'nope.json'}")


def test_bad_jsonl_and_bad_distractors(cli, tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(
        json.dumps(
            {
                "mention_id": "m1",
                "cluster": "E",
                "doc_id": "d",
                "context": "Obama spoke .",
                "start": 0,
                "end": 5,
                "mention": "Obam",
            }
        )
        + "\n"
    )
    line = _bad(cli, tmp_path, "--source", "jsonl", "-i", path)
    assert "line 1" in line and "field 'mention'" in line
    good = wec_fixture(tmp_path)
    d = tmp_path / "d.jsonl"
    d.write_text('{"id": "a", "contents": "fine"}\n{"id": "b"}\n')
    line = _bad(cli, tmp_path, "-i", f"test={good}", "-d", d)
    assert "d.jsonl: line 2" in line and "missing field 'contents'" in line


def test_hub_offline_is_a_clear_error(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    line = _bad(cli, tmp_path, "--source", "hf", "--hf-dataset", "wec-eng", "--hf-splits", "test")
    assert "cannot download Intel/WEC-Eng" in line and "--input" in line


@pytest.mark.parametrize(
    "name, split",
    [
        ("Dev_Event_gold_mentions_validated.json", "dev"),
        ("Test_Event_gold_mentions_validated.json", "test"),
        ("Train_Event_gold_mentions.json", "train"),
        ("clean/Test_all_passages.json", "test"),
        ("ecbplus.dev.json.gz", "dev"),
        ("mentions.json", None),
    ],
)
def test_split_from_file_name(name, split):
    from cmrkit.sources.common import split_from_name

    assert split_from_name(name) == split


def test_hub_source_uses_the_cache_offline(cli, tmp_path, monkeypatch):
    """The real huggingface_hub client resolves a cached snapshot without the network; the
    commit it came from is recorded in the manifest."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "cache" / "datasets--Intel--WEC-Eng"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    wec_fixture(snapshot, "Test_Event_gold_mentions_validated.json")
    r = cli(
        "build-collection",
        "--source",
        "hf",
        "--hf-splits",
        "test",
        "--name",
        "hub",
        "--hf-cache-dir",
        tmp_path / "cache",
    )
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "collections/hub/manifest.json").read_text())
    assert manifest["source"] == "wec-eng"
    assert manifest["inputs"][0]["format"] == f"hf:wec-eng@{commit}"
    assert manifest["inputs"][0]["split"] == "test"
    assert len(read_topics(tmp_path / "collections/hub/topics.jsonl")) == 6
