"""eval-coref, cluster and eval-spans on the command line: a tiny collection built here, hand
computed answers, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmrkit.evaluation.spans import exact_match, normalize_answer, token_f1

MENTIONS = [
    # (mention_id, cluster, context, mention)
    ("m1", "quake", "The earthquake struck on Tuesday.", "earthquake"),
    ("m2", "quake", "A strong quake hit the city.", "strong quake"),
    ("m3", "quake", "The quake killed ten people.", "quake"),
    ("m4", "vote", "The election was held in May.", "election"),
    ("m5", "vote", "Voters went to the polls in the election.", "polls"),
    ("m6", "fire", "The fire spread quickly.", "fire"),
    ("m7", "vote", "After the vote, the tremor returned.", "vote"),
    ("m8", "quake", "After the vote, the tremor returned.", "tremor"),
]


@pytest.fixture
def tiny(cli, tmp_path):
    """collections/tiny with its qrels and gold clusters, in the working folder."""
    lines = []
    for mid, cluster, context, mention in MENTIONS:
        start = context.index(mention)
        lines.append(
            json.dumps(
                {
                    "mention_id": mid,
                    "cluster": cluster,
                    "doc_id": f"doc-{mid}",
                    "context": context,
                    "start": start,
                    "end": start + len(mention),
                }
            )
        )
    (tmp_path / "mentions.jsonl").write_text("\n".join(lines) + "\n")
    r = cli("build-collection", "--source", "jsonl", "-i", "test=mentions.jsonl", "--name", "tiny")
    assert r.exit_code == 0, r.output
    return tmp_path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_build_collection_writes_the_gold_clusters(tiny):
    records = _records(tiny / "qrels" / "tiny.test.clusters.jsonl")
    assert [(r["mention_id"], r["cluster"]) for r in records] == [(m, c) for m, c, *_ in MENTIONS]
    units = {r["mention_id"]: r["unit"] for r in records}
    assert units["m7"] == units["m8"] == "P:m7"  # one passage, two mentions
    manifest = json.loads((tiny / "collections" / "tiny" / "manifest.json").read_text())
    assert manifest["files"]["clusters"] == {"test": "qrels/tiny.test.clusters.jsonl"}


def _run(path: Path, rows: list[tuple[str, str, float]]) -> Path:
    ranked: dict[str, list[tuple[str, float]]] = {}
    for q, d, s in rows:
        ranked.setdefault(q, []).append((d, s))
    with open(path, "w") as f:
        for q, docs in ranked.items():
            for rank, (d, s) in enumerate(sorted(docs, key=lambda x: -x[1]), 1):
                f.write(f"{q} Q0 {d} {rank} {s} test\n")
    return path


RUN = [
    ("m1", "P:m2", 10.0),
    ("m1", "P:m3", 8.0),
    ("m1", "P:m4", 2.0),
    ("m2", "P:m1", 9.0),
    ("m2", "P:m6", 5.0),
    ("m4", "P:m5", 7.0),
    ("m4", "P:m1", 1.0),
    ("m5", "P:m7", 6.0),
]


def _clusters(path: Path) -> list[list[str]]:
    by: dict[int, list[str]] = {}
    for r in _records(path):
        by.setdefault(r["cluster"], []).append(r["mention_id"])
    return list(by.values())


def test_cluster_by_closure_then_score(tiny, cli):
    run = _run(tiny / "run.trec", RUN)
    r = cli("cluster", run, "--collection", "collections/tiny", "--threshold", "5")
    assert r.exit_code == 0, r.output
    out = tiny / "run.clusters.jsonl"
    # m5 retrieves the unit holding m7 and m8: linked to both
    assert _clusters(out) == [["m1", "m2", "m3", "m6"], ["m4", "m5", "m7", "m8"]]
    first = out.read_bytes()
    args = ("cluster", run, "--collection", "collections/tiny", "--threshold", "5", "--force")
    assert cli(*args).exit_code == 0
    assert out.read_bytes() == first  # deterministic
    r = cli("eval-coref", "qrels/tiny.test.clusters.jsonl", "qrels/tiny.test.clusters.jsonl")
    assert r.exit_code == 0 and r.stdout.count("100.00") == 3 * 7 + 1  # R, P, F1; CoNLL
    r = cli("eval-coref", "qrels/tiny.test.clusters.jsonl", out, "-m", "muc,bcub", "-f", "json")
    assert r.exit_code == 0, r.output
    scores = json.loads(r.stdout)["measures"]
    # key {m1 m2 m3 m8} {m4 m5 m7} {m6}; response {m1 m2 m3 m6} {m4 m5 m7 m8}
    assert scores["muc"]["recall_num"] == 4  # 2 of 3 quake links, 2 of 2 vote links
    assert scores["muc"]["recall_den"] == 5
    assert scores["muc"]["precision_den"] == 6
    assert scores["bcub"]["recall"] == pytest.approx((3 * 3 / 4 + 1 / 4 + 3 * 3 / 3 + 1) / 8)


def test_cluster_top_k_and_average_link(tiny, cli):
    run = _run(tiny / "run.trec", RUN)
    r = cli("cluster", run, "--collection", "collections/tiny", "--top", "1", "-o", "top1.jsonl")
    assert r.exit_code == 0, r.output
    # best result per query: m1-m2, m2-m1, m4-m5, m5-(m7, m8)
    assert _clusters(tiny / "top1.jsonl") == [
        ["m1", "m2"],
        ["m3"],
        ["m4", "m5", "m7", "m8"],
        ["m6"],
    ]
    r = cli(
        "cluster", run, "--collection", "collections/tiny", "--threshold", "5",
        "--method", "average", "--missing-score", "0", "-o", "avg.jsonl",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    # m1-m2 (10) merge; {m1 m2} to m3 averages (8 + 0) / 2 = 4 < 5: m3 and m6 stay alone;
    # m4-m5 (7) merge; m7 and m8 would join them at (6 + 0) / 2 = 3 < 5: each stays alone
    assert _clusters(tiny / "avg.jsonl") == [
        ["m1", "m2"],
        ["m3"],
        ["m4", "m5"],
        ["m6"],
        ["m7"],
        ["m8"],
    ]
    r = cli(
        "cluster", run, "--collection", "collections/tiny", "--threshold", "5",
        "--method", "average", "-o", "avg5.jsonl",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    # unlinked pairs count as the lowest link score (5 here, links >= 5 kept)
    assert _clusters(tiny / "avg5.jsonl")[0] == ["m1", "m2", "m3", "m6"]


def test_cluster_refuses_unknown_queries_and_existing_output(tiny, cli):
    run = _run(tiny / "run.trec", RUN + [("nope", "P:m1", 3.0)])
    r = cli("cluster", run, "--collection", "collections/tiny", "--top", "3")
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1
    assert "run.trec: line 9: query 'nope' is no annotated mention" in r.stderr
    run = _run(tiny / "run.trec", RUN)
    assert cli("cluster", run, "--collection", "collections/tiny", "--top", "3").exit_code == 0
    out = tiny / "run.clusters.jsonl"
    first = out.read_bytes()
    # run again: the step is done, it says so and exits 0 (it used to say "already exists")
    r = cli("cluster", run, "--collection", "collections/tiny", "--top", "3")
    assert r.exit_code == 0, r.output
    assert f"{out} is up to date" in r.stderr and out.read_bytes() == first
    # other options would write other clusters there: refused without --force, kept whole
    r = cli("cluster", run, "--collection", "collections/tiny", "--top", "1")
    assert r.exit_code == 2 and "--force" in r.stderr and out.read_bytes() == first
    r = cli("cluster", run, "--collection", "collections/tiny", "--top", "1", "--force")
    assert r.exit_code == 0 and f"wrote {out}" in r.stderr and out.read_bytes() != first
    r = cli("cluster", run, "--collection", "collections/tiny")
    assert r.exit_code == 2 and "--threshold, --top" in r.stderr


def test_eval_coref_refuses_key_and_response_swapped(tiny, cli):
    """`eval-coref RUN.clusters.jsonl GOLD` exited 0 with recall and precision exchanged; the
    gold file's 'unit' and 'doc_id' give the order away."""
    from cmrkit.collection.clusters import read_clustering

    gold = "qrels/tiny.test.clusters.jsonl"
    run = _run(tiny / "run.trec", RUN)
    assert cli("cluster", run, "--collection", "collections/tiny", "--top", "1").exit_code == 0
    response = "run.clusters.jsonl"
    assert read_clustering(gold).records == "gold"
    assert read_clustering(response).records == "plain"
    right = cli("eval-coref", gold, response, "-m", "muc", "-f", "json")
    assert right.exit_code == 0 and "swapped" not in right.stderr
    muc = json.loads(right.stdout)["measures"]["muc"]
    assert muc["recall"] != muc["precision"]  # a swap would show, were it allowed
    # certain: the response is the gold file, the key a `cmrkit cluster` output of its mentions
    r = cli("eval-coref", response, gold)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert "key and response are swapped" in r.stderr
    assert f"cmrkit eval-coref {gold} {response}" in r.stderr
    # likely: a key of another shape (a JSON list of clusters) against the gold file: warned
    key = tiny / "list.json"
    key.write_text(json.dumps(_clusters(tiny / response)))
    r = cli("eval-coref", key, gold, "-m", "muc", "-f", "json")
    assert r.exit_code == 0 and "may be swapped" in r.stderr
    swapped = json.loads(r.stdout)["measures"]["muc"]
    assert (swapped["recall"], swapped["precision"]) == (muc["precision"], muc["recall"])
    # gold against gold, and a system against a system: no word
    for a, b in ((gold, gold), (response, key)):
        r = cli("eval-coref", a, b, "-m", "muc")
        assert r.exit_code == 0 and "swapped" not in r.stderr


def test_normalisation_em_and_f1_by_hand():
    assert normalize_answer("The  Strong, quake!") == "strong quake"
    assert exact_match("the strong quake", "strong quake") == 1.0
    assert exact_match("quake", "strong quake") == 0.0
    assert token_f1("quake hit", "strong quake") == pytest.approx(0.5)
    assert token_f1("a quake quake", "quake") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert token_f1("the", "an") == 1.0  # both normalise to nothing
    assert token_f1("the", "quake") == 0.0


def test_eval_spans_top1_and_best_of_k(tiny, cli):
    answers = [
        # m1: best answer in a relevant unit, exact after normalisation
        {"qid": "m1", "docno": "P:m2", "text": "the strong quake", "score": 3},
        {"qid": "m1", "docno": "P:m3", "start": 4, "end": 9, "score": 2},
        # m4: first answer in a non-relevant unit, then a partial one, then an exact one
        {"qid": "m4", "docno": "P:m1", "text": "election", "score": 9},
        {"qid": "m4", "docno": "P:m5", "text": "the polls in", "score": 8},
        {"qid": "m4", "docno": "P:m7", "text": "vote", "score": 7},
        # m5: the unit holds m7 (vote) and m8 (quake): only the cluster's mention counts
        {"qid": "m5", "docno": "P:m7", "text": "tremor", "score": 1},
    ]
    spans = tiny / "answers.jsonl"
    spans.write_text("".join(json.dumps(a) + "\n" for a in answers))
    r = cli(
        "eval-spans", spans, "qrels/tiny.test.txt", "--collection", "collections/tiny",
        "-k", "1", "-k", "3", "-f", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    q = res["per_query"]
    assert q["m1"] == {"EM@1": 1.0, "F1@1": 1.0, "EM@3": 1.0, "F1@3": 1.0}
    assert q["m4"]["EM@1"] == 0.0 and q["m4"]["F1@1"] == 0.0
    assert q["m4"]["F1@3"] == 1.0 and q["m4"]["EM@3"] == 1.0
    assert q["m5"] == {"EM@1": 0.0, "F1@1": 0.0, "EM@3": 0.0, "F1@3": 0.0}
    assert res["measures"]["EM@1"] == pytest.approx(1 / 3)
    assert res["queries"] == 3
    r = cli(
        "eval-spans", spans, "qrels/tiny.test.txt", "--collection", "collections/tiny",
        "--all-queries", "-f", "json",
    )  # fmt: skip
    assert json.loads(r.stdout)["queries"] == 7  # every query with a relevant unit
    r = cli("eval-spans", spans, "qrels/tiny.test.txt", "--collection", "collections/tiny")
    assert r.exit_code == 0 and "EM@1" in r.stdout and "F1@10" in r.stdout


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        ('{"qid": "zz", "docno": "P:m1", "text": "x", "score": 1}', "line 1: query 'zz' is no"),
        ('{"qid": "m1", "docno": "P:m2", "start": 3, "end": 99}', "line 1: span [3, 99)"),
        ('{"qid": "m1", "docno": "P:m2", "score": 1}', "line 1: an answer needs 'text'"),
        ('{"qid": "m1", "docno": "P:m2", "text": "a", "score": "x"}', "'score' must be a number"),
        ("not json", "line 1: malformed JSON"),
        ('{"qid": "m1", "docno": "P:nosuch", "text": "x", "score": 1}',
         "line 1: unit 'P:nosuch' is no unit of the collection"),
        ('{"qid": "m1", "docno": "P:m2", "text": "x"}\n{"qid": "m4", "docno": "P:m1", "text": "y"}'
         '\n{"qid": "m1", "docno": "P:m2", "text": "x"}', "line 3: the same answer as on line 1"),
    ],
)  # fmt: skip
def test_eval_spans_bad_input(tiny, cli, answers, words):
    (tiny / "a.jsonl").write_text(answers + "\n")
    r = cli("eval-spans", "a.jsonl", "qrels/tiny.test.txt", "--collection", "collections/tiny")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: a.jsonl: ") and words in r.stderr
    assert r.stderr.count("\n") == 1


def test_eval_spans_swapped_arguments_give_the_usage(tiny, cli):
    (tiny / "a.jsonl").write_text('{"qid": "m1", "docno": "P:m2", "text": "x"}\n')
    r = cli("eval-spans", "qrels/tiny.test.txt", "a.jsonl", "--collection", "collections/tiny")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "swapped" in r.stderr and "usage: cmrkit eval-spans SPANS QRELS" in r.stderr


def test_eval_coref_formats_and_per_document(cli, tmp_path):
    key = tmp_path / "key.conll"
    key.write_text(
        "#begin document d1\nd1 0 0 a (1)\nd1 0 1 b (1\nd1 0 2 c 1)\n#end document\n"
        "#begin document d2\nd2 0 0 a (7)\nd2 0 1 b (8)\n#end document\n"
    )
    response = tmp_path / "response.conll"
    response.write_text(
        "#begin document d1\nd1 0 0 a (1)\nd1 0 1 b -\nd1 0 2 c -\n#end document\n"
        "#begin document d2\nd2 0 0 a (7)\nd2 0 1 b (7)\n#end document\n"
    )
    r = cli("eval-coref", key, response)
    assert r.exit_code == 0
    assert "MUC" in r.stdout and "CoNLL" in r.stdout and "ARI" in r.stdout
    r = cli("eval-coref", key, response, "--per-document", "-m", "muc,bcub,conll")
    assert "d1" in r.stdout and "d2" in r.stdout and "all" in r.stdout
    r = cli("eval-coref", key, response, "-f", "csv", "--per-document", "-m", "muc")
    assert r.stdout.splitlines() == [
        "document,measure,field,value",
        "d1,muc,recall,0.0",
        "d1,muc,precision,0.0",
        "d1,muc,f1,0.0",
        "d2,muc,recall,0.0",
        "d2,muc,precision,0.0",
        "d2,muc,f1,0.0",
        "all,muc,recall,0.0",
        "all,muc,precision,0.0",
        "all,muc,f1,0.0",
    ]
    r = cli("eval-coref", key, response, "-f", "json", "-m", "muc", "--scope", "corpus")
    muc = json.loads(r.stdout)["measures"]["muc"]
    assert (muc["recall_num"], muc["recall_den"], muc["precision_den"]) == (0, 1, 1)
    r1 = cli("eval-coref", key, response, "-f", "json")
    r2 = cli("eval-coref", key, response, "-f", "json")
    assert r1.stdout == r2.stdout


BAD_CONLL = [
    (
        "#begin document d\nd 0 0 a (1\n#end document\n",
        "line 3: mention of chain 1 opened on line 2",
    ),
    ("#begin document d\nd 0 0 a 1)\n#end document\n", "line 2: '1)' closes a mention of chain 1"),
    ("#begin document d\nd 0 0 a (1)x\n#end document\n", "line 2: coreference column '(1)x'"),
    ("#begin document d\nd 0 0 a (1)\n", "document 'd' (begun on line 1) has no '#end document'"),
    ("# a comment\nd 0 0 a (1)\n", "line 2: token line outside a document"),
    (
        "#begin document d\nd 0 0 a (1)\n#begin document e\n",
        "line 3: '#begin document' inside document 'd'",
    ),
    (
        "#begin document d\n#end document\n#begin document d\n#end document\n",
        "line 3: document 'd' begins again",
    ),
    ("#begin document d\nd 0 0 a (1)(2)\n#end document\n", "line 2: the key holds this mention"),
    ("[[1, 2], 3]", "cluster 2: a cluster must be a list"),
    ('{"cluster": 1}\n', "line 1: a mention record needs 'mention_id'"),
    ('{"mention_id": "m"}\n', "line 1: missing field 'cluster'"),
    ("hello\n", "neither CoNLL-2012"),
]


@pytest.mark.parametrize(("text", "words"), BAD_CONLL)
def test_eval_coref_bad_input_is_one_line(cli, tmp_path, text, words):
    (tmp_path / "bad.txt").write_text(text)
    (tmp_path / "ok.conll").write_text("#begin document d\nd 0 0 a (1)\n#end document\n")
    r = cli("eval-coref", "bad.txt", "ok.conll")
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: bad.txt: ") and words in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


def test_eval_coref_refuses_more_than_ten_repeats(cli, tmp_path):
    (tmp_path / "key.conll").write_text("#begin document d\nd 0 0 a (1)\n#end document\n")
    (tmp_path / "r.conll").write_text(
        "#begin document d\nd 0 0 a " + "|".join(f"({i})" for i in range(12)) + "\n#end document\n"
    )
    r = cli("eval-coref", "key.conll", "r.conll")
    assert r.exit_code == 2
    assert "error: r.conll: the response repeats 11 mentions (e.g. line 2 repeats line 2)" in (
        r.stderr
    )
    assert r.stderr.count("\n") == 1


def test_eval_coref_unknown_measure(cli, tmp_path):
    (tmp_path / "k.conll").write_text("#begin document d\nd 0 0 a (1)\n#end document\n")
    r = cli("eval-coref", "k.conll", "k.conll", "-m", "muc,bleu")
    assert r.exit_code == 2 and "unknown coreference measure 'bleu'" in r.stderr
