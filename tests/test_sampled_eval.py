"""xinfAP and infNDCG: against TREC's sample_eval.pl, by hand, and on complete judgments."""

from __future__ import annotations

import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from trec_eval_fixtures import extract_trec_eval, parse_trec_eval, run_trec_eval

from cmrkit.evaluation import evaluate, evaluate_files
from cmrkit.evaluation.measures.sampled import estimate, sample_ranking
from cmrkit.evaluation.rescore import Judgments, RankedRun
from cmrkit.trec import read_qrels_with_strata, read_run

SAMPLE_EVAL = Path(__file__).resolve().parent / "reference" / "trec-sample-eval" / "sample_eval.pl"


def sample_eval(qrels: Path, run: Path) -> dict[tuple[str, str], float]:
    """{(measure, topic): value} printed by ``perl sample_eval.pl -q``."""
    if shutil.which("perl") is None:
        pytest.skip("perl runs sample_eval.pl, the reference")
    out = subprocess.run(
        ["perl", str(SAMPLE_EVAL), "-q", str(qrels), str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    values = {}
    for line in out.splitlines():
        measure, topic, value = line.split()
        if measure in ("infAP", "infNDCG"):
            values[("xinfAP" if measure == "infAP" else "infNDCG", topic)] = float(value)
    return values


def write_case(tmp: Path, seed: int, *, complete: bool = False) -> tuple[Path, Path]:
    """Five-column qrels over random strata (judged, unjudged, graded, a stratum named "10"
    that sorts before "2" as text, a stratum nobody sampled) and a run with tied scores and
    documents outside the qrels."""
    rng = random.Random(seed)
    qrels, run = tmp / f"q{seed}.txt", tmp / f"r{seed}.txt"
    with open(qrels, "w") as q, open(run, "w") as r:
        for topic in range(1, 9):
            docs = [f"d{i:03d}" for i in range(80)]
            for d in rng.sample(docs, rng.randint(4, 60)):
                stratum = rng.choice(["1", "2", "10", "deep"])
                if complete:
                    rel, stratum = rng.choice([0, 0, 0, 1, 2]), "all"
                elif stratum == "deep":
                    rel = -1
                else:
                    rel = rng.choice([-1, -1, 0, 0, 1, 2, 3])
                q.write(f"{topic} 0 {d} {stratum} {rel}\n")
            for rank, d in enumerate(rng.sample(docs, rng.randint(1, 80)), 1):
                r.write(f"{topic} Q0 {d} {rank} {round(rng.random() * 4, 1)} t\n")
    return qrels, run


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_equals_sample_eval_per_topic_and_mean(tmp_path, seed):
    qrels, run = write_case(tmp_path, seed)
    expected = sample_eval(qrels, run)
    result = evaluate_files(run, qrels, ["xinfAP", "infNDCG"])
    topics = {t for _, t in expected if t != "all"}
    assert topics == set(result.per_query)
    for (measure, topic), value in expected.items():
        mine = result.aggregate[measure] if topic == "all" else result.per_query[topic][measure]
        assert f"{mine:.4f}" == f"{value:.4f}", (measure, topic)


def test_cli_reads_the_five_column_qrels(tmp_path, cli):
    qrels, run = write_case(tmp_path, 9)
    expected = sample_eval(qrels, run)
    r = cli("eval", run, qrels, "-m", "xinfAP,infNDCG", "-f", "trec")
    assert r.exit_code == 0, r.output
    got = {(m, t): v for m, t, v in (line.split() for line in r.stdout.splitlines())}
    assert got[("xinfAP", "all")] == f"{expected[('xinfAP', 'all')]:.4f}"
    assert got[("infNDCG", "all")] == f"{expected[('infNDCG', 'all')]:.4f}"


def test_hand_computed_case(tmp_path):
    # stratum a: a1 relevant, a2 not (both judged); stratum b: b1 relevant, b3 not, b2 and b4
    # pooled but not sampled. Ranking: a1, b2, b1, x (not pooled), a2, b3.
    judged = {"a1": 1, "a2": 0, "b1": 1, "b2": -1, "b3": 0, "b4": -1}
    strata = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "b3": "b", "b4": "b"}
    ap, ndcg = estimate(["a1", "b2", "b1", "x", "a2", "b3"], judged, strata)
    # R = 1 * 2/2 (a) + 1 * 4/2 (b) = 3.
    # At a1 (rank 1): nothing pooled above, precision 1.
    # At b1 (rank 3): 2 pooled above, a1 (a: 1 judged, 1 relevant) and b2 (b: none judged);
    # each stratum weighs 1/2, b's smoothed precision is 0.00001 / 0.00003.
    above = 0.5 * (1.00001 / 1.00003) + 0.5 * (0.00001 / 0.00003)
    prec_b1 = 1 / 3 + (2 / 3) * above
    # xinfAP = P(rel in a) * mean precision in a + P(rel in b) * mean precision in b
    assert ap == pytest.approx(1 / 3 * 1.0 + 2 / 3 * prec_b1, abs=1e-12)
    # DCG within strata: a: 1/log2(2) over 2 judged of 2 retrieved; b: 1/log2(4) over 2 judged
    # of 3 retrieved; 5 pooled retrieved. Ideal: round(3) relevant of grade 1.
    dcg = 2 / 5 * (1.0 / 2) + 3 / 5 * (0.5 / 2)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg == pytest.approx(5 * dcg / ideal, abs=1e-12)
    assert (round(ap, 4), round(ndcg, 4)) == (0.8518, 0.8212)
    # and sample_eval.pl agrees
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("".join(f"7 0 {d} {strata[d]} {judged[d]}\n" for d in judged))
    ranking = ["a1", "b2", "b1", "x", "a2", "b3"]
    run.write_text("".join(f"7 Q0 {d} {i} {10 - i} t\n" for i, d in enumerate(ranking, 1)))
    expected = sample_eval(qrels, run)
    assert expected[("xinfAP", "7")] == 0.8518 and expected[("infNDCG", "7")] == 0.8212


def test_ties_break_by_docno_descending_on_double_scores():
    # 1.00000001 and 1.00000002 differ as doubles (sample_eval.pl) but tie as floats (trec_eval)
    docs = [("a", 1.00000001), ("b", 1.00000002), ("c", 2.0), ("e", 0.5), ("d", 0.5)]
    assert sample_ranking(docs) == ["c", "b", "a", "e", "d"]


def test_complete_judgments_give_ap_and_ndcg(tmp_path):
    for seed in (11, 12, 13):
        qrels, run = write_case(tmp_path, seed, complete=True)
        result = evaluate_files(run, qrels, ["xinfAP", "infNDCG", "AP", "nDCG"])
        for row in result.per_query.values():
            # the precision above each relevant document is smoothed by 1e-5 / 3e-5
            assert row["xinfAP"] == pytest.approx(row["AP"], abs=1e-4)
            assert row["infNDCG"] == pytest.approx(row["nDCG"], abs=1e-12)
        values = sample_eval(qrels, run)
        assert values[("xinfAP", "all")] == pytest.approx(result.aggregate["AP"], abs=1e-4)


def test_single_stratum_with_unjudged_is_trec_eval_infap(tmp_path):
    # One stratum, some pooled documents unjudged (-1): xinfAP and trec_eval's infAP are the
    # same estimator up to their smoothing terms (precision above of (r + 1e-5) / (j + 3e-5)
    # against (r + 1e-5) / (j + 2e-5)), which only matter before the first judged document:
    # every ranking here starts with a judged one.
    binary = extract_trec_eval(tmp_path)
    rng = random.Random(5)
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    with open(qrels, "w") as q, open(run, "w") as r:
        for topic in range(1, 21):
            docs = [f"d{i:03d}" for i in range(60)]
            pooled = rng.sample(docs, 40)
            for i, d in enumerate(pooled):
                rel = rng.choice([0, 1]) if i == 0 else rng.choice([-1, 0, 0, 1])
                q.write(f"{topic} 0 {d} {rel}\n")
            rest = [d for d in docs if d != pooled[0]]
            for rank, d in enumerate([pooled[0], *rng.sample(rest, 49)], 1):
                r.write(f"{topic} Q0 {d} {rank} {100 - rank} t\n")
    trec = parse_trec_eval(run_trec_eval(binary, qrels, run, "-m", "infAP"))
    result = evaluate_files(run, qrels, ["xinfAP"])
    for topic, row in result.per_query.items():
        assert row["xinfAP"] == pytest.approx(float(trec[("infAP", topic)]), abs=1e-4)


def test_rescoring_equals_evaluate(tmp_path):
    qrels_path, run_path = write_case(tmp_path, 21)
    qrels, strata = read_qrels_with_strata(qrels_path)
    run = read_run(run_path)
    ranked_run = RankedRun(run)
    queries = sorted(qrels) + ["absent"]
    for measure in ("AP", "nDCG", "xinfAP", "infNDCG"):
        full = {q: qrels.get(q, {}) for q in queries}
        expected = evaluate(run, full, [measure], all_queries=True, strata=strata)
        got = ranked_run.mean(measure, Judgments(qrels, strata), queries)
        tolerance = 1e-12 if measure == "nDCG" else 0.0
        assert got == pytest.approx(expected.aggregate[measure], abs=tolerance), measure


def test_five_column_qrels_errors(tmp_path, cli):
    run = tmp_path / "r.txt"
    run.write_text("1 Q0 a 1 1.0 t\n")
    bad = tmp_path / "q.txt"
    bad.write_text("1 0 a s1 1\n1 0 b 0\n")
    r = cli("eval", run, bad, "-m", "xinfAP")
    assert r.exit_code == 2 and "line 2" in r.stderr and "5 fields" in r.stderr
    bad.write_text("1 0 a s1 1\n1 0 a s2 1\n")
    r = cli("eval", run, bad, "-m", "xinfAP")
    assert r.exit_code == 2 and "line 2" in r.stderr and "stratum" in r.stderr
