"""`cmrkit repro` (evaluation/repro.py) against repro_eval itself, on runs cmrkit made on the
shipped sample (real Lucene): every measure, every number, equal to the last bit."""

from __future__ import annotations

import json
import math
import os
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.evaluation.rbo import RankingPairs, rbo_normalised, rbo_normalised_pairs
from cmrkit.evaluation.repro import REPRO_EVAL_MEASURES, _ktus, ktu, reproduce
from cmrkit.trec import read_qrels, read_run

QUERIES = 400  # of each split: repro_eval's pure-Python RBO takes ~10 ms per query


def _repro_eval():
    try:
        from repro_eval.Evaluator import RpdEvaluator, RplEvaluator
        from repro_eval.measure import document_order
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but repro_eval is not installed: pip install -e '.[test]'")
        pytest.skip("repro_eval is not installed (pip install -e '.[test]')")
    return RpdEvaluator, RplEvaluator, document_order


def invoke(*args: str):
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output + (res.stderr or "")
    return res


def _subset(src: Path, dst: Path, keep: set[str]) -> Path:
    lines = src.read_text().splitlines(keepends=True)
    dst.write_text("".join(line for line in lines if line.split()[0] in keep))
    return dst


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The sample built and indexed; bm25, bm25 with other k1 and b, fields (doc preset), RM3
    over each bm25 (test split), bm25 and RM3 on the dev split; each run and qrels kept to
    the first QUERIES queries of its split."""
    root = tmp_path_factory.mktemp("repro")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    invoke("build-collection")
    invoke("index", "--no-entities", "--quiet")
    common = ("--query", "mention", "-k", "100", "--quiet")
    other = ("--k1", "1.2", "--b", "0.75")
    made = {
        "bm25": ("bm25",),
        "bm25-other": ("bm25", *other),
        "fields": ("fields", "--preset", "doc"),
        "rm3": ("qe", "--method", "rm3"),
        "rm3-other": ("qe", "--method", "rm3", *other),
        "bm25-dev": ("bm25", "--split", "dev"),
        "rm3-dev": ("qe", "--method", "rm3", "--split", "dev"),
    }
    files = {}
    for name, args in made.items():
        invoke("run", *args, *common, "--name", name)
        split = "dev" if name.endswith("-dev") else "test"
        qrels = root / "qrels" / f"sample.{split}.txt"
        keep = set(sorted(read_qrels(qrels))[:QUERIES])
        files[name] = _subset(root / "runs" / "sample" / f"{name}.{split}.trec",
                              root / f"{name}.trec", keep)  # fmt: skip
        files[f"qrels-{split}"] = _subset(qrels, root / f"{split}.qrels", keep)
    yield files
    mp.undo()


REFERENCE_NAMES = {"set_relative_P": "SetP(relative=True)"}


def _pairs(result):
    """cmrkit's name -> repro_eval's, for every measure repro_eval scores."""
    return [(m.name, REFERENCE_NAMES.get(t, t)) for m, t in
            zip(result.measures, REPRO_EVAL_MEASURES, strict=True)]  # fmt: skip


def _same_p(ours, theirs, original, reproduced) -> bool:
    """repro_eval's p is nan where scipy's is: for values equal on every query (cmrkit says
    p = 1, as repro_eval does when every measure is equal) and for a constant difference
    (cmrkit: undefined, None)."""
    if not math.isnan(theirs):
        return ours == theirs
    if original == reproduced:
        return ours == 1.0
    return ours is None


def _values(scores, name):
    return [scores[q][name] for q in scores]


def _check_document_order(pair, reference_ktu, reference_rbo):
    assert pair.rbo_per_query == reference_rbo and pair.rbo == np.mean(list(reference_rbo.values()))
    for q, value in reference_ktu.items():
        # repro_eval: nan for a query of one document; cmrkit: undefined, left out of the mean
        ours = pair.ktu_per_query[q]
        assert ours == value or (math.isnan(value) and ours is None)
    assert pair.ktu == np.mean([v for v in reference_ktu.values() if not math.isnan(v)])


def _cut_to_shorter(original, reproduced):
    """Both runs with each query's rankings cut to the shorter one (cmrkit's KTU rule where
    repro_eval's scipy call raises)."""
    a, b = {}, {}
    for q in reproduced:
        n = min(len(original[q]), len(reproduced[q]))
        a[q] = dict(list(original[q].items())[:n])
        b[q] = dict(list(reproduced[q].items())[:n])
    return a, b


def test_reproduction_with_baselines_equals_repro_eval(sample):
    """bm25 -> bm25 with k1 1.2, b 0.75 (the baselines); RM3 over each (the runs): KTU, RBO,
    RMSE, p of both pairs, ER and DeltaRI, on all 58 measures repro_eval scores."""
    RpdEvaluator, _, document_order = _repro_eval()
    q = sample["qrels-test"]
    ev = RpdEvaluator(qrels_orig_path=str(q), run_b_orig_path=str(sample["bm25"]),
                      run_a_orig_path=str(sample["rm3"]), run_b_rep_path=str(sample["bm25-other"]),
                      run_a_rep_path=str(sample["rm3-other"]))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev.trim()
        ev.evaluate()
        ref = {k: getattr(ev, k)() for k in ("rmse", "er", "dri", "ttest")}
        rbo_ref = ev.rbo(per_topic=True)
        # bm25's rankings are as long in both runs: repro_eval's KTU; RM3's differ in length
        ktu_base = document_order.KTU(ev.run_b_orig, ev.run_b_rep, per_topic=True)
        with pytest.raises(ValueError):  # which repro_eval refuses (scipy raises)
            ev.ktu(per_topic=True)
        ktu_run = document_order.KTU(*_cut_to_shorter(ev.run_a_orig, ev.run_a_rep), per_topic=True)
    result = reproduce(
        read_run(sample["rm3"]),
        read_run(sample["rm3-other"]),
        read_qrels(q),
        list(REPRO_EVAL_MEASURES),
        baseline_original=read_run(sample["bm25"]),
        baseline_reproduced=read_run(sample["bm25-other"]),
    )
    assert result.paired and result.queries == QUERIES
    scores = {
        "baseline": (ev.run_b_orig_score, ev.run_b_rep_score),
        "advanced": (ev.run_a_orig_score, ev.run_a_rep_score),
    }
    for role, pair in (("baseline", result.baseline), ("advanced", result.run)):
        for ours, theirs in _pairs(result):
            assert pair.rmse[ours] == ref["rmse"][role][theirs], (role, ours)
            o, r = (_values(s, theirs) for s in scores[role])
            assert _same_p(pair.p[ours], ref["ttest"][role][theirs], o, r), (role, ours)
            assert pair.original[ours] == np.array(o).mean()
        assert any(n.startswith("KTU is undefined") for n in result.baseline.notes)
    _check_document_order(result.baseline, ktu_base, rbo_ref["baseline"])
    _check_document_order(result.run, ktu_run, rbo_ref["advanced"])
    assert any("rank more documents in one run" in n for n in result.run.notes)
    defined = 0
    for ours, theirs in _pairs(result):
        for mine, reference in ((result.er, ref["er"]), (result.dri, ref["dri"])):
            if mine[ours] is None:  # the original improvement (or a baseline's mean) is 0
                assert not math.isfinite(reference[theirs])
            else:
                defined += 1
                assert mine[ours] == reference[theirs], ours
    assert defined > 80  # most of the 2 x 58


@pytest.mark.parametrize("original,reproduced", [("bm25", "fields"), ("rm3", "bm25")])
def test_two_runs_equal_repro_eval(sample, original, reproduced):
    """Two runs alone (repro_eval's 'baseline' pair): KTU, RBO, RMSE and p on all measures.
    bm25 and fields (doc preset) score alike on every measure here: p = 1 (so does repro_eval
    when every measure is equal); RM3 ranks more documents than bm25."""
    RpdEvaluator, _, document_order = _repro_eval()
    q = sample["qrels-test"]
    ev = RpdEvaluator(qrels_orig_path=str(q), run_b_orig_path=str(sample[original]),
                      run_b_rep_path=str(sample[reproduced]))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev.trim()
        ev.evaluate()
        rmse, p = ev.rmse()["baseline"], ev.ttest()["baseline"]
        rbo_ref = ev.rbo(per_topic=True)["baseline"]
        ktu_ref = document_order.KTU(*_cut_to_shorter(ev.run_b_orig, ev.run_b_rep), per_topic=True)
    result = reproduce(read_run(sample[original]), read_run(sample[reproduced]), read_qrels(q),
                       list(REPRO_EVAL_MEASURES))  # fmt: skip
    assert result.baseline is None and result.er is None
    for ours, theirs in _pairs(result):
        assert result.run.rmse[ours] == rmse[theirs], ours
        o, r = _values(ev.run_b_orig_score, theirs), _values(ev.run_b_rep_score, theirs)
        assert _same_p(result.run.p[ours], p[theirs], o, r), ours
    _check_document_order(result.run, ktu_ref, rbo_ref)
    if original == "rm3":
        assert any("rank more documents in one run" in n for n in result.run.notes)


def test_replication_on_other_queries_equals_repro_eval(sample):
    """The reproductions on the dev split's queries and qrels: unpaired t-test, ER, DeltaRI."""
    _, RplEvaluator, _ = _repro_eval()
    ev = RplEvaluator(qrels_orig_path=str(sample["qrels-test"]),
                      qrels_rpl_path=str(sample["qrels-dev"]),
                      run_b_orig_path=str(sample["bm25"]), run_a_orig_path=str(sample["rm3"]),
                      run_b_rep_path=str(sample["bm25-dev"]),
                      run_a_rep_path=str(sample["rm3-dev"]))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev.trim()
        ev.evaluate()
        er, dri, p = ev.er(), ev.dri(), ev.ttest()
    result = reproduce(
        read_run(sample["rm3"]),
        read_run(sample["rm3-dev"]),
        read_qrels(sample["qrels-test"]),
        list(REPRO_EVAL_MEASURES),
        baseline_original=read_run(sample["bm25"]),
        baseline_reproduced=read_run(sample["bm25-dev"]),
        qrels_reproduced=read_qrels(sample["qrels-dev"]),
    )
    assert not result.paired and result.run.rmse is None and result.run.ktu is None
    for ours, theirs in _pairs(result):
        assert result.run.p[ours] == p["advanced"][theirs], ours
        assert result.baseline.p[ours] == p["baseline"][theirs], ours
        if result.er[ours] is not None:
            assert result.er[ours] == er[theirs], ours
        else:
            assert not math.isfinite(er[theirs])
        assert result.dri[ours] == dri[theirs], ours


def _long_run(path: Path, seed: int, queries: int = 6, docs: int = 1300) -> Path:
    """Runs longer than repro_eval's cut (1,000), with scores rounded so that many tie."""
    r = random.Random(seed)
    lines = []
    for q in range(queries):
        scored = [(f"d{r.randrange(5000)}", round(r.uniform(0, 30), 1)) for _ in range(docs)]
        ranked = sorted(dict(scored).items(), key=lambda x: (x[1], x[0]), reverse=True)
        lines += [f"q{q} Q0 {d} {i} {s} t\n" for i, (d, s) in enumerate(ranked, 1)]
    path.write_text("".join(lines))
    return path


def test_long_runs_with_ties_are_cut_as_repro_eval_cuts_them(tmp_path):
    RpdEvaluator, _, _ = _repro_eval()
    r = random.Random(1)
    qrels = tmp_path / "q.txt"
    qrels.write_text("".join(f"q{q} 0 d{d} {r.choice((0, 1, 1, 2))}\n"
                             for q in range(6) for d in r.sample(range(5000), 900)))  # fmt: skip
    a, b = _long_run(tmp_path / "a.trec", 1), _long_run(tmp_path / "b.trec", 2)
    assert max(len(docs) for docs in read_run(a).values()) > 1000
    ev = RpdEvaluator(qrels_orig_path=str(qrels), run_b_orig_path=str(a), run_b_rep_path=str(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev.trim()
        ev.evaluate()
        ktu_ref, rbo_ref = ev.ktu(per_topic=True)["baseline"], ev.rbo(per_topic=True)["baseline"]
        rmse, p = ev.rmse()["baseline"], ev.ttest()["baseline"]
    result = reproduce(read_run(a), read_run(b), read_qrels(qrels), ["AP", "P@1000", "nDCG"])
    assert result.run.ktu_per_query == ktu_ref and result.run.rbo_per_query == rbo_ref
    for name in ("AP", "P@1000", "nDCG"):
        assert result.run.rmse[name] == rmse[name] and result.run.p[name] == p[name]


def test_ktu_and_rbo_of_random_rankings_equal_repro_evals():
    """Lengths 0 to 1,000, equal or not, overlapping or not: every query's KTU and RBO computed
    at once equal repro_eval's, query by query (KTU on rankings cut to the shorter one)."""
    _, _, document_order = _repro_eval()
    r = random.Random(0)
    originals, reproduceds = [], []
    for _ in range(150):
        n = r.choice([0, 1, 2, 3, 50, 100, 1000])
        m = n if r.random() < 0.7 else r.choice([1, 2, 60, 1000])
        originals.append(list(dict.fromkeys(f"d{r.randrange(3000)}" for _ in range(n))))
        reproduceds.append(list(dict.fromkeys(f"d{r.randrange(3000)}" for _ in range(m))))
    numbered = RankingPairs.of(originals, reproduceds)
    ktus, rbos = _ktus(numbered), rbo_normalised_pairs(numbered, 0.95, 1000)
    for a, b, k, value in zip(originals, reproduceds, ktus, rbos, strict=True):
        assert value == document_order._rbo(b, a, 0.95, 1000)
        n = min(len(a), len(b))
        if n < 2:
            assert k is None
            continue
        ranked = [{"q": dict(zip(x[:n], range(n, 0, -1), strict=True))} for x in (a, b)]
        assert k == document_order.KTU(*ranked, per_topic=True)["q"]


def test_ktu_and_rbo_by_hand():
    # union sorted: a b c d -> positions 0 1 2 3; original a b c, reproduced b a d
    # pairs (0,1) vs (1,0) discordant, (0,2) vs (1,3) concordant, (1,2) vs (0,3) concordant
    assert ktu(["a", "b", "c"], ["b", "a", "d"]) == pytest.approx(1 / 3, abs=1e-14)
    assert ktu(["a"], ["a"]) is None
    assert ktu(["a", "b", "c"], ["a", "b"]) == 1.0  # cut to the shorter: a b against a b
    # depth 2, p 0.5: ranks 1 and 2 weigh 1 and 0.5; overlaps 0/1 and 2/2 -> (0 + 0.5) / 1.5
    assert rbo_normalised(["a", "b"], ["b", "a"], p=0.5, depth=2) == pytest.approx(1 / 3, abs=1e-15)
    assert rbo_normalised(["a", "b"], ["a", "b"], p=0.9, depth=2) == 1.0


def test_cli_table_json_and_refusals(sample):
    q = str(sample["qrels-test"])
    run, other = str(sample["rm3"]), str(sample["rm3-other"])
    res = invoke("repro", run, other, "--qrels", q, "--baseline-original", str(sample["bm25"]),
                 "--baseline-repro", str(sample["bm25-other"]))  # fmt: skip
    for word in ("KTU", "RBO", "RMSE", "ER", "DeltaRI", "nDCG@10"):
        assert word in res.stdout
    assert "rank more documents in one run" in res.stderr
    obj = json.loads(invoke("repro", run, other, "--qrels", q, "-m", "AP", "-f", "json").stdout)
    lib = reproduce(read_run(run), read_run(other), read_qrels(q), ["AP"])
    assert obj["run"]["ktu"] == lib.run.ktu and obj["run"]["rbo"] == lib.run.rbo
    assert obj["run"]["measures"]["AP"]["rmse"] == lib.run.rmse["AP"]
    assert obj["baseline"] is None and obj["kind"] == "reproducibility"
    refusals = [
        (["--baseline-original", run], "--baseline-original alone"),
        (["-f", "trec"], "-f table|json|csv"),
        (["--rbo-p", "1.5"], "--rbo-p 1.5 must lie between 0 and 1"),
    ]
    for extra, message in refusals:
        res = CliRunner().invoke(app, ["repro", run, other, "--qrels", q, *extra])
        assert res.exit_code == 2 and message in res.stderr, res.output
        assert len(res.stderr.strip().splitlines()) == 1
    res = CliRunner().invoke(app, ["repro", run, other, "--qrels", str(sample["qrels-dev"])])
    assert res.exit_code == 2 and "judges none of" in res.stderr
