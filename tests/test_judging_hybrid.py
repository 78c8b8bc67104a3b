"""Hybrid judging: `pool create --auto LABELS --confident P` and `assess serve POOL --auto
LABELS --confident P` (the judge takes the pairs it is sure of, people judge the rest, the
export and the qrels record it; the organizer's page shows the judge's kappa with people, live,
from a real server process), and `pool plan --auto LABELS` (the judge as a strategy)."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from assess_server_fixtures import (  # noqa: E402
    HttpClient,
    Server,
    add_users,
    db_url,  # noqa: F401 - the fixture
    free_port,
    small_pool,
)
from judging_sample import invoke, noisy_labels, run_paths, sample_root  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from cmrkit.cli import app  # noqa: E402
from cmrkit.judgments.agreement import cohen_kappa, weighted_kappa  # noqa: E402
from cmrkit.judgments.auto.hybrid import is_confident  # noqa: E402
from cmrkit.judgments.auto.labels import Label, sidecar_path, write_labels  # noqa: E402
from cmrkit.pooling import read_pool  # noqa: E402
from cmrkit.trec import read_qrels  # noqa: E402


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory):
    return sample_root(tmp_path_factory)


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line(res, code: int = 2) -> str:
    assert res.exit_code == code, res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    return res.stderr


def test_pool_create_auto_takes_the_sure_pairs_and_aggregate_gives_them_its_label(
    sample_runs, tmp_path
):
    root = sample_runs
    labels = noisy_labels(root, tmp_path / "labels.csv", flip=0.1, seed=2)
    runs = run_paths(root)
    out = tmp_path / "hybrid.pool.jsonl"
    coll = root / "collections" / "sample"
    res = run("pool", "create", *runs, "--depth", "5", "--collection", coll, "--auto",
              tmp_path / "labels.csv", "--confident", "0.8", "-o", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    pool = read_pool(out)
    by_pair = {lb.key: lb for lb in labels}
    sure = {k for k, lb in by_pair.items() if is_confident(lb.probability, 0.8)}
    assert 0 < len(sure) < len(by_pair)
    for p in pool.pairs:
        lb = by_pair[(p.qid, p.docno)]
        assert (p.judge_label, p.judge_probability) == (lb.label, lb.probability)
        assert (p.labelled_by == "judge") == ((p.qid, p.docno) in sure) == (not p.sampled)
    head = pool.header["judge"]
    assert head["judge_labelled"] == len(sure) and head["people"] == len(by_pair) - len(sure)
    assert head["identity"] and head["confident"] == 0.8 and head["worker"] == "auto:reader"
    assert f"taken by the judge {len(sure)}" in res.stdout
    # people (simulated from the gold) answer only the pairs left to them
    invoke("judgments", "simulate", "--qrels", root / "qrels" / "sample.test.txt", "--pool", out,
           "--assessors", "3", "-o", tmp_path / "people.csv")  # fmt: skip
    answered = {tuple(r.split(",")[:2]) for r in (tmp_path / "people.csv").read_text().split()[1:]}
    assert answered == {k for k in by_pair if k not in sure}
    said = invoke("judgments", "aggregate", tmp_path / "people.csv", "--pool", out,
                  "--min-agree", "2", "--min-relevant", "0", "--hard-threshold", "1",
                  "--report", tmp_path / "rep.json", "-o", tmp_path / "q.txt")  # fmt: skip
    assert f"the judge's labels taken for {len(sure)} pairs" in said
    qrels = read_qrels(tmp_path / "q.txt")
    for k in sure:
        assert qrels[k[0]][k[1]] == int(by_pair[k].label >= 4)
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["judge_labelled"] == len(sure) and rep["judge"]["labels_sha256"]


def test_confident_and_labels_of_another_pool_are_refused(sample_runs, tmp_path):
    root = sample_runs
    noisy_labels(root, tmp_path / "labels.csv")
    base = ["pool", "create", *run_paths(root), "--depth", "5", "--collection",
            root / "collections" / "sample", "-o", tmp_path / "p.jsonl"]  # fmt: skip
    for bad in ("0.5", "1.01", "0", "nan"):
        said = one_line(run(*base, "--auto", tmp_path / "labels.csv", "--confident", bad))
        assert f"--confident {bad}" in said and "(0.5, 1]" in said
    assert "needs --auto" in one_line(run(*base, "--confident", "0.9"))
    # a deeper pool is another pool: the sidecar's sha256 says so
    said = one_line(run(*base[:-4], "--depth", "6", "-o", tmp_path / "p.jsonl", "--auto",
                        tmp_path / "labels.csv"))  # fmt: skip
    assert "labels from another pool" in said and "was made for the pool with sha256" in said
    assert "pairs of" in said and "to judge have no label" in said
    # without a sidecar: a labelled pair the pool lacks
    sidecar_path(tmp_path / "labels.csv").unlink()
    write_labels([Label("nope", "P:x", "auto:llm", 5, 0.99)], tmp_path / "labels.csv")
    said = one_line(run(*base, "--auto", tmp_path / "labels.csv"))
    assert "labels from another pool: pair nope P:x is not a pair of" in said
    assert not (tmp_path / "p.jsonl").exists()


def test_pool_plan_with_the_judge_as_a_strategy(sample_runs, tmp_path):
    root = sample_runs
    labels = noisy_labels(root, tmp_path / "labels.csv", flip=0.2, seed=3)
    n = len(labels)
    budgets = f"0,{n // 4},{n}"
    common = [*run_paths(root), "--qrels", root / "qrels" / "sample.test.txt", "--depth", "5",
              "--assessors", "1", "--noise", "0", "--json"]  # fmt: skip
    res = run("pool", "plan", *common, tmp_path / "j.json", "--budgets", budgets,
              "--strategies", "judge", "--auto", tmp_path / "labels.csv")  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "j.json").read_text())["rows"]
    assert [(r["strategy"], r["budget"], r["judged"]) for r in rows] == [
        ("judge", 0, 0), ("judge", n // 4, n // 4), ("judge", n, n)]  # fmt: skip
    assert rows[1]["people_share"] == pytest.approx((n // 4) / n)
    assert rows[0]["tau"] <= rows[2]["tau"] == 1.0  # noiseless people at the full budget
    # every pair to people is the depth strategy judging every candidate: the same scores
    res = run("pool", "plan", *common, tmp_path / "d.json", "--budgets", str(n), "--strategies",
              "depth")  # fmt: skip
    assert res.exit_code == 0, res.output
    depth = json.loads((tmp_path / "d.json").read_text())["rows"][0]
    assert rows[2]["scores"] == depth["scores"]
    said = one_line(run("pool", "plan", *common, tmp_path / "x.json", "--budgets", "5",
                        "--strategies", "judge"))  # fmt: skip
    assert "--strategies judge needs the judge's labels" in said


def _small_labels(d, path, seed=0) -> dict:
    """Labels of the small pool's pairs from its truth, probabilities spread over 0..1."""
    rng = random.Random(seed)
    labels = {}
    for p in read_pool(d["pool"]).pairs:
        relevant = d["truth"][p.qid][p.docno] > 0
        prob = round(rng.uniform(0.5, 1.0) if relevant else rng.uniform(0.0, 0.5), 6)
        if rng.random() < 0.2:
            prob = round(1 - prob, 6)
        likert = 5 if prob >= 0.8 else 4 if prob >= 0.5 else 2 if prob >= 0.2 else 1
        labels[(p.qid, p.docno)] = Label(p.qid, p.docno, "auto:llm", likert, prob)
    write_labels(labels.values(), path)
    return labels


def test_assess_serve_auto_serves_people_the_unsure_pairs_and_shows_the_live_kappa(
    tmp_path,
    cli,
    db_url,  # noqa: F811
):
    import sqlalchemy as sa

    from cmrkit.assess.server import db as dbm

    d = small_pool(tmp_path, cli, queries=4, docs=8)
    labels = _small_labels(d, tmp_path / "labels.csv")
    sure = {k for k, lb in labels.items() if is_confident(lb.probability, 0.7)}
    assert 0 < len(sure) < len(labels)
    people = add_users(db_url, ["ann", "bob"])
    people.update(add_users(db_url, ["olga"], role="organizer"))
    log = tmp_path / "s.log"
    args = ("--assessors", "2", "--auto", tmp_path / "labels.csv", "--confident", "0.7")
    server = Server(d["pool"], db_url, *args, log=log).start()
    try:
        engine = dbm.make_engine(db_url)
        with engine.connect() as conn:
            served = {r.pair_id: (r.qid, r.docno) for r in conn.execute(sa.select(dbm.pairs))}
        engine.dispose()
        assert set(served.values()) == set(labels) - sure
        votes: dict = {}
        for name in ("ann", "bob"):
            c = HttpClient(server.url)
            assert c.login(name, people[name]).status_code == 200
            while (r := c.get("/api/next")).status_code == 200:
                key = served[r.json()["pair_id"]]
                truth = d["truth"][key[0]][key[1]]
                label = (5 if truth else 1) if name == "ann" else (4 if truth else 3)
                if name == "bob" and key[1] in ("d2", "d3"):
                    label = 5  # bob errs now and then
                assert c.judge(r.json()["pair_id"], label).status_code == 201
                votes.setdefault(key, []).append(label)
            c.close()
        org = HttpClient(server.url)
        assert org.login("olga", people["olga"]).status_code == 200
        judge = org.get("/api/progress").json()["judge"]
        keys = sorted(votes)
        mine = [labels[k].label for k in keys]
        median = [sorted(votes[k])[0] for k in keys]  # two votes: the lower is the median
        decided = [k for k in keys if (votes[k][0] >= 4) == (votes[k][1] >= 4)]
        assert judge["pairs_both"] == len(keys) and judge["pairs_binary"] == len(decided)
        assert judge["kappa"] == pytest.approx(
            cohen_kappa(
                [int(labels[k].label >= 4) for k in decided],
                [int(votes[k][0] >= 4) for k in decided],
            )  # fmt: skip
        )
        assert judge["kappa_likert"] == pytest.approx(weighted_kappa(mine, median))
        assert judge["judge_labelled"] == len(sure) and judge["confident"] == 0.7
        page = org.get("/progress").text
        assert "The judge and people" in page and f"{judge['kappa']:.2f}" in page
        org.close()
    finally:
        server.stop()
    assert f"took {len(sure)} pairs" in log.read_text()
    again = cli("assess", "serve", d["pool"], "--db", db_url, "--port", free_port(),
                "--assessors", "2")  # fmt: skip
    assert again.exit_code == 2 and "(judge differ)" in again.stderr  # the same labels, or none
    res = cli("assess", "export", "--db", db_url, "-o", tmp_path / "out.csv", "--qrels",
              tmp_path / "q.txt", "--min-agree", "2", "--min-relevant", "0")  # fmt: skip
    assert res.exit_code == 0, res.output
    exported = read_pool(tmp_path / "out.pool.jsonl")
    assert {(p.qid, p.docno) for p in exported.pairs if p.labelled_by == "judge"} == sure
    qrels = read_qrels(tmp_path / "q.txt")
    for k in sure:
        assert qrels[k[0]][k[1]] == int(labels[k].label >= 4)
    # judgments check against the export (blind ids, its key) gives the page's kappas
    res = cli("judgments", "check", tmp_path / "labels.csv", "--against", tmp_path / "out.csv",
              "--key", tmp_path / "out.key.tsv", "-f", "json")  # fmt: skip
    assert res.exit_code == 0, res.output
    checked = json.loads(res.stdout)
    assert checked["likert_pairs"] == judge["pairs_both"] and checked["against"]["people"] == 2
    assert checked["kappa"] == pytest.approx(judge["kappa"])
    assert checked["kappa_likert"] == pytest.approx(judge["kappa_likert"])


def test_assess_serve_refuses_bad_confident_and_another_pools_labels(tmp_path, cli):
    d = small_pool(tmp_path, cli, queries=2, docs=3)
    _small_labels(d, tmp_path / "labels.csv")
    url = f"sqlite:///{tmp_path / 'a.sqlite'}"
    said = one_line(cli("assess", "serve", d["pool"], "--db", url, "--auto",
                        tmp_path / "labels.csv", "--confident", "0.3"))  # fmt: skip
    assert "--confident 0.3 must lie in (0.5, 1]" in said
    write_labels([Label("q9", "d1", "auto:llm", 5, 0.99)], tmp_path / "other.csv")
    said = one_line(cli("assess", "serve", d["pool"], "--db", url, "--auto",
                        tmp_path / "other.csv"))  # fmt: skip
    assert "labels from another pool: pair q9 d1" in said
