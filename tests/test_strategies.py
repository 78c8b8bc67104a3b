"""Pooling strategies on hand-worked cases: which pairs each picks, in which order; rounds
against judgments; stratified samples and their inclusion probabilities; bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pool_fixtures import write_collection, write_qrels, write_run

from cmrkit.errors import CmrkitError
from cmrkit.pooling import parse_strata, read_pool

# Three runs over the same two queries (q2 a copy of q1). Ranks of each candidate:
#   d1 A1 B3 C2 | d2 A2 C4 | d3 A3 B1 | d4 A4 | d5 B2 | d6 B4 | d7 C1 | d8 C3
LISTS = {
    "A": ["d1", "d2", "d3", "d4"],
    "B": ["d3", "d5", "d1", "d6"],
    "C": ["d7", "d1", "d8", "d2"],
}
RELEVANT = {"d3", "d7", "d8"}


@pytest.fixture
def three(tmp_path):
    coll = write_collection(tmp_path / "collections", ["q1", "q2"], [f"d{i}" for i in range(1, 9)])
    runs = []
    for name, docs in LISTS.items():
        rows = {q: [(d, 10.0 - i) for i, d in enumerate(docs)] for q in ("q1", "q2")}
        runs.append(write_run(tmp_path / f"{name}.trec", rows))
    truth = write_qrels(
        tmp_path / "truth.txt", {q: dict.fromkeys(RELEVANT, 1) for q in ("q1", "q2")}
    )
    return tmp_path, coll, runs, truth


def chosen(path: Path, qid: str = "q1") -> list[str]:
    """Docnos of a query's chosen pairs, in the order of selection."""
    pairs = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    picked = [p for p in pairs if p["qid"] == qid and p.get("order") is not None]
    return [p["docno"] for p in sorted(picked, key=lambda p: p["order"])]


def create(cli, three, *args):
    tmp, coll, runs, _ = three
    out = tmp / "p.jsonl"
    r = cli("pool", "create", *runs, "--collection", coll, "-o", out, "--force", *args)
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize(
    ("args", "order"),
    [
        # best rank, then the run given first: d1 (A1) d3 (B1) d7 (C1) d2 (A2) d5 (B2) d8 (C3)
        (["--strategy", "depth"], ["d1", "d3", "d7", "d2", "d5", "d8", "d4", "d6"]),
        # RBP p=0.8: d1 .488, d3 .328, d2 .2624, d7 .2, d5 .16, d8 .128, d4 = d6 .1024
        (["--strategy", "rbp"], ["d1", "d3", "d2", "d7", "d5", "d8", "d4", "d6"]),
        # RBP p=0.5: d1 .875, d3 .625, d7 .5, d2 .3125, d5 .25, d8 .125, d4 = d6 .0625
        (["--strategy", "rbp", "--rbp-p", "0.5"], ["d1", "d3", "d7", "d2", "d5", "d8", "d4", "d6"]),
        # RRF k=60: d1 3 runs, then d3 1/61+1/63 > d2 1/62+1/64 > d7 1/61 > d5 > d8 > d4 = d6
        (["--strategy", "rrf"], ["d1", "d3", "d2", "d7", "d5", "d8", "d4", "d6"]),
    ],
)
def test_priority_orders(three, cli, args, order):
    out = create(cli, three, *args, "--budget", "8", "--per-query")
    assert chosen(out) == order == chosen(out, "q2")
    out = create(cli, three, *args, "--budget", "3", "--per-query")
    assert chosen(out) == order[:3]
    pool = read_pool(out)
    assert sum(p.sampled for p in pool.pairs) == 6 and len(pool.pairs) == 16
    assert pool.header["strategy"]["name"] == args[1]


def test_total_budget_fills_depth_levels_across_queries(three, cli):
    # rank-1 candidates of both queries first (A's, then B's, then C's), then A's rank 2
    out = create(cli, three, "--strategy", "depth", "--budget", "7")
    assert chosen(out, "q1") == ["d1", "d3", "d7", "d2"]
    assert chosen(out, "q2") == ["d1", "d3", "d7"]
    orders = [json.loads(x).get("order") for x in out.read_text().splitlines()[1:]]
    assert sorted(o for o in orders if o) == list(range(1, 8))


def test_total_budget_order_is_the_strategys_over_all_queries(tmp_path, cli):
    # RBP p=0.8, two runs: q1 a .4, b .32, c .256 (both runs agree); q2 x = z .2, y = w .16
    coll = write_collection(tmp_path / "collections", ["q1", "q2"], list("abcxyzw"))
    a = write_run(
        tmp_path / "A.trec",
        {"q1": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "q2": [("x", 2.0), ("y", 1.0)]},
    )
    b = write_run(tmp_path / "B.trec", {"q1": [("a", 3.0), ("b", 2.0), ("c", 1.0)],
                                        "q2": [("z", 2.0), ("w", 1.0)]})  # fmt: skip
    out = tmp_path / "p.jsonl"
    r = cli(
        "pool",
        "create",
        a,
        b,
        "--collection",
        coll,
        "--strategy",
        "rbp",
        "--budget",
        "4",
        "-o",
        out,
    )
    assert r.exit_code == 0, r.output
    order = {(p.qid, p.docno): p.order for p in read_pool(out).pairs if p.order}
    assert order == {("q1", "a"): 1, ("q1", "b"): 2, ("q1", "c"): 3, ("q2", "x"): 4}


# Move-to-Front with d3, d7, d8 relevant (queue A B C):
#   A d1 no -> back | B d3 yes | B d5 no -> back | C d7 yes | C d8 (d1 taken) yes
#   | C d2 no -> back | A d4 (d2, d3 taken) no | B d6 (d1 taken) no
MTF = ["d1", "d3", "d5", "d7", "d8", "d2", "d4", "d6"]
MTF_ARMS = ["A", "B", "B", "C", "C", "C", "A", "B"]
# MaxMean, means (rel + 1) / (judged + 2), ties to the run given first:
#   A d1 no (A 1/3) | B d3 yes (2/3) | B d5 no (1/2) | B = C = 1/2 -> B d6 no (2/5)
#   | C d7 yes (2/3) | C d8 yes (3/4) | C d2 no | A d4 no
MAXMEAN = ["d1", "d3", "d5", "d6", "d7", "d8", "d2", "d4"]


@pytest.mark.parametrize(("strategy", "order"), [("mtf", MTF), ("maxmean", MAXMEAN)])
def test_adaptive_against_simulated_assessors(three, cli, strategy, order):
    _, _, _, truth = three
    out = create(
        cli,
        three,
        *("--strategy", strategy, "--budget", "8", "--per-query"),
        *("--simulate", truth, "--noise", "0", "--assessors", "1"),
    )
    assert chosen(out) == order
    pairs = {(p.qid, p.docno): p for p in read_pool(out).pairs}
    assert [pairs[("q1", d)].label for d in order] == [int(d in RELEVANT) for d in order]
    assert [pairs[("q1", d)].round for d in order] == list(range(1, 9))
    if strategy == "mtf":
        assert [pairs[("q1", d)].arm for d in order] == MTF_ARMS
    header = read_pool(out).header["strategy"]
    assert header["simulated"]["noise"] == 0.0 and header["rounds"] == 8


def test_rounds_against_judgment_files_replay_the_simulation(three, cli):
    tmp, _, _, _ = three
    pool = create(cli, three, "--strategy", "mtf", "--budget", "5", "--per-query")
    assert chosen(pool) == ["d1"]
    files = []
    for k in range(2, 6):
        judged = tmp / f"j{k}.csv"
        rows = ["query_id,doc_id,worker_id,label"]
        for p in read_pool(pool).pairs:
            if p.sampled:
                rows.append(f"{p.qid},{p.docno},w1,{5 if p.docno in RELEVANT else 1}")
        judged.write_text("\n".join(rows) + "\n")
        files += ["-j", judged]
        nxt = tmp / f"p{k}.jsonl"
        r = cli("pool", "next", pool, *files, "-o", nxt)
        assert r.exit_code == 0, r.output
        pool = nxt
    assert chosen(pool) == MTF[:5] and chosen(pool, "q2") == MTF[:5]
    r = cli("pool", "next", pool, *files, "-o", tmp / "spent.jsonl")
    assert r.exit_code == 2 and "budget is spent" in r.stderr


def test_a_round_of_several_pairs_per_query_takes_them_from_one_state(three, cli):
    # without feedback in between, MTF keeps drawing from the front run
    pool = create(cli, three, "--strategy", "mtf", "--budget", "8", "--per-query", "--batch", "6")
    assert chosen(pool) == ["d1", "d2", "d3"] and chosen(pool, "q2") == ["d1", "d2", "d3"]


def test_judgments_outside_the_pool_or_not_chosen_are_refused(three, cli):
    tmp, _, _, _ = three
    pool = create(cli, three, "--strategy", "maxmean", "--budget", "4", "--per-query")
    outside = tmp / "outside.csv"
    outside.write_text("query_id,doc_id,worker_id,label\nq1,d1,w,4\nq1,zz,w,4\n")
    r = cli("pool", "next", pool, "-j", outside, "-o", tmp / "n.jsonl")
    assert r.exit_code == 2
    assert "outside.csv: line 3" in r.stderr and "zz, which is not in the pool" in r.stderr
    early = write_qrels(tmp / "early.txt", {"q1": {"d1": 0, "d5": 1}})
    r = cli("pool", "next", pool, "-j", early, "-o", tmp / "n.jsonl")
    assert r.exit_code == 2 and "d5, which has not been chosen" in r.stderr
    assert not (tmp / "n.jsonl").exists()
    gold = write_qrels(tmp / "gold.txt", {"q1": {"zz": 1}})
    r = cli("pool", "next", pool, "-j", outside, "--gold", gold, "-o", tmp / "n.jsonl")
    assert r.exit_code == 0, r.output


def test_strata_inclusion_probabilities(three, cli):
    # best ranks: 1 {d1, d3, d7}, 2-3 {d2, d5, d8}, 4 {d4, d6}
    out = create(cli, three, "--strategy", "strata", "--strata", "1-1:1.0,2-3:0.5,4-4:0.5")
    pairs = [p for p in read_pool(out).pairs if p.qid == "q1"]
    by = {p.docno: p for p in pairs}
    assert {d: by[d].stratum for d in ("d1", "d2", "d8", "d4")} == {
        "d1": "1-1",
        "d2": "2-3",
        "d8": "2-3",
        "d4": "4-4",
    }
    # round(0.5 * 3) = 2 of 3 and round(0.5 * 2) = 1 of 2
    assert {p.stratum: p.inclusion for p in pairs} == {"1-1": 1.0, "2-3": 2 / 3, "4-4": 0.5}
    assert sum(p.sampled for p in pairs if p.stratum == "2-3") == 2
    assert sum(p.sampled for p in pairs if p.stratum == "4-4") == 1
    # a budget of 5 per query scales every rate: the steps are at 0.5 and 0.83 (rank 1 takes
    # its 2nd and 3rd), then 1.0 (2-3 its 2nd) would be a 6th pair
    out = create(
        cli,
        three,
        "--strategy",
        "strata",
        "--strata",
        "1-1:1.0,2-3:0.5,4-4:0.5",
        "--budget",
        "5",
        "--per-query",
    )
    pairs = [p for p in read_pool(out).pairs if p.qid == "q1"]
    assert {p.stratum: p.inclusion for p in pairs} == {"1-1": 1.0, "2-3": 1 / 3, "4-4": 0.5}
    assert sum(p.sampled for p in pairs) == 5


def test_strata_draws_are_seeded(tmp_path, cli):
    docs = [f"d{i:02d}" for i in range(60)]
    coll = write_collection(tmp_path / "collections", ["q1"], docs)
    run = write_run(tmp_path / "r.trec", {"q1": [(d, 100.0 - i) for i, d in enumerate(docs)]})
    outs = {}
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        outs[name] = tmp_path / f"{name}.jsonl"
        r = cli(
            "pool",
            "create",
            run,
            "--collection",
            coll,
            "--strategy",
            "strata",
            "--strata",
            "1-10:1.0,11-60:0.2",
            "--seed",
            seed,
            "-o",
            outs[name],
        )
        assert r.exit_code == 0, r.output
    assert outs["a"].read_bytes() == outs["b"].read_bytes()
    assert chosen(outs["a"]) != chosen(outs["c"])
    assert len(chosen(outs["a"])) == 10 + 10


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("1-10:1.0,12-30:0.5", "leave ranks 11-11 out"),
        ("1-10:1.0,5-30:0.5", "overlap"),
        ("2-10:1.0", "must start at rank 1"),
        ("1-10:0", "rate must lie in (0, 1]"),
        ("1-10", "is not LO-HI:RATE"),
    ],
)
def test_bad_strata(spec, words):
    with pytest.raises(CmrkitError, match=words.replace("(", r"\(").replace("]", r"\]")):
        parse_strata(spec)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--strategy", "depth", "--budget", "1"], "below the number of queries (2)"),
        (["--strategy", "mtf"], "needs a --budget"),
        (["--strategy", "depth", "--strata", "1-5:1"], "--strata goes with --strategy strata"),
        (["--strategy", "rbp", "--budget", "4", "--rbp-p", "1"], "--rbp-p"),
        (["--strategy", "strata", "--strata", "1-4:1", "--depth", "9"], "the strata set the"),
        (
            ["--strategy", "strata", "--strata", "1-1:1,2-4:1", "--budget", "1", "--per-query"],
            "below the 2 strata",
        ),
        (["--strategy", "rrf", "--budget", "4", "--sample", "1-3:1"], "--sample goes with"),
        (["--strategy", "rbp", "--budget", "4", "--simulate", "truth.txt"], "--simulate feeds"),
    ],
)
def test_bad_options_are_one_line(three, cli, args, words):
    tmp, coll, runs, _ = three
    r = cli("pool", "create", *runs, "--collection", coll, "-o", tmp / "bad.jsonl", *args)
    assert r.exit_code == 2, r.output
    assert words in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp / "bad.jsonl").exists()


def test_next_refuses_a_pool_that_is_not_adaptive(three, cli):
    tmp, _, _, truth = three
    pool = create(cli, three, "--strategy", "rbp", "--budget", "4")
    r = cli("pool", "next", pool, "-j", truth, "-o", tmp / "n.jsonl")
    assert r.exit_code == 2 and "continues an mtf or maxmean pool" in r.stderr


def test_sample_qrels_from_a_strata_pool(three, cli):
    tmp, _, _, _ = three
    pool = create(cli, three, "--strategy", "strata", "--strata", "1-1:1.0,2-4:0.5")
    sampled = {(p.qid, p.docno) for p in read_pool(pool).pairs if p.sampled}
    judged = {q: {d: int(d in RELEVANT) for (qq, d) in sampled if qq == q} for q in ("q1", "q2")}
    judged["q1"]["known9"] = 1  # an annotated pair the pool left out
    qrels = write_qrels(tmp / "judged.txt", judged)
    r = cli("pool", "sample-qrels", pool, qrels, "-o", tmp / "s.txt")
    assert r.exit_code == 0, r.output
    lines = [line.split() for line in (tmp / "s.txt").read_text().splitlines()]
    assert len(lines) == 8 + 8 + 1
    for qid, _, docno, stratum, rel in lines:
        if docno == "known9":
            assert (stratum, rel) == ("known", "1")
        elif (qid, docno) in sampled:
            assert rel == str(int(docno in RELEVANT))
        else:
            assert rel == "-1" and stratum == "2-4"
    depth = create(cli, three, "--strategy", "mtf", "--budget", "2")
    r = cli("pool", "sample-qrels", depth, qrels, "-o", tmp / "s2.txt")
    assert r.exit_code == 2 and "stratified random sample" in r.stderr


# --- pool plan -------------------------------------------------------------------------------


def plan(cli, three, out: Path, *args) -> dict:
    tmp, coll, runs, truth = three
    r = cli("pool", "plan", *runs, "--collection", coll, "--qrels", truth, "--json", out, *args)
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def test_plan_by_hand(three, cli):
    tmp = three[0]
    got = plan(
        cli,
        three,
        tmp / "plan.json",
        *("--budgets", "1,8", "--per-query", "--noise", "0", "--strategies", "depth,mtf"),
    )
    # AP on the complete qrels (d3, d7, d8 relevant): A finds d3 at 3, B at 1, C d7 at 1 and d8
    # at 3
    assert got["reference"] == pytest.approx({"A": 1 / 9, "B": 1 / 3, "C": 5 / 9})
    rows = {(r["strategy"], r["budget"]): r for r in got["rows"]}
    full = rows[("depth", 8)]
    assert full["judged"] == 16 and full["found"] == 1.0
    assert full["tau"] == 1.0 and full["swap"] == 0.0 and full["max_abs_bias"] == 0.0
    # left out, C loses d7 and d8 (only C pooled them): its AP drops to 0; A and B lose nothing
    assert full["loo"] == pytest.approx({"A": 0.0, "B": 0.0, "C": -5 / 9})
    # one pair per query: d1, not relevant: every run scores 0, the ranking is all ties
    one = rows[("depth", 1)]
    assert one["judged"] == 2 and one["found"] == 0.0 and one["tau"] is None
    assert one["bias"] == pytest.approx({"A": -1 / 9, "B": -1 / 3, "C": -5 / 9})
    # MTF's first pick is d1 too; at 8 per query it has judged everything
    assert rows[("mtf", 1)]["found"] == 0.0 and rows[("mtf", 8)]["found"] == 1.0
    got = plan(
        cli,
        three,
        tmp / "ndcg.json",
        *("--budgets", "8", "--per-query", "--noise", "0", "--measure", "nDCG"),
    )
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert got["reference"]["A"] == pytest.approx((1 / math.log2(4)) / ideal)
    assert got["reference"]["C"] == pytest.approx((1 + 1 / math.log2(4)) / ideal)
    strata = [r for r in got["rows"] if r["strategy"] == "strata"][0]
    assert strata["measure"] == "infNDCG" and strata["max_abs_bias"] == pytest.approx(0.0)


def test_plan_is_reproducible_from_its_seed(three, cli):
    tmp = three[0]
    args = ("--budgets", "2,4", "--per-query", "--noise", "0.3", "--assessors", "1")
    first = plan(cli, three, tmp / "a.json", *args, "--seed", "3")
    again = plan(cli, three, tmp / "b.json", *args, "--seed", "3")
    assert (tmp / "a.json").read_bytes() == (tmp / "b.json").read_bytes()
    other = plan(cli, three, tmp / "c.json", *args, "--seed", "4")
    assert first == again and first["rows"] != other["rows"]
    assert [r["strategy"] for r in first["rows"]][::2] == [
        "depth",
        "rbp",
        "rrf",
        "mtf",
        "maxmean",
        "strata",
    ]


def test_plan_warns_of_unjudged_lines_in_the_qrels(three, cli):
    """Seen (issue 42): qrels holding -1 (unjudged) lines were taken as complete without a word.
    Now a warning says how many, on how many queries and candidates, and what the simulation
    makes of them (not relevant); the JSON counts them. Complete qrels: no warning."""
    tmp, coll, runs, _ = three
    truth = {q: dict.fromkeys(RELEVANT, 1) for q in ("q1", "q2")}
    truth["q1"].update({"d1": -1, "d2": -1, "zz": -1})  # d1, d2 are candidates, zz is not
    holey = write_qrels(tmp / "holey.txt", truth)
    args = ("--collection", coll, "--budgets", "2", "--per-query", "--json")
    r = cli("pool", "plan", *runs, "--qrels", holey, *args, tmp / "h.json")
    assert r.exit_code == 0, r.output
    said = " ".join(r.stderr.split())
    assert (
        f"warning: {holey} is not complete: it holds 3 unjudged line(s) (-1) on 1 of the 2 "
        "queries, 2 of them among the candidates. The simulation takes them as not relevant"
    ) in said
    assert json.loads((tmp / "h.json").read_text())["unjudged"] == {
        "lines": 3, "queries": 1, "candidates": 2,
    }  # fmt: skip
    r = cli("pool", "plan", *runs, "--qrels", three[3], *args, tmp / "c.json")
    assert r.exit_code == 0 and "warning" not in r.output, r.output


def test_plan_table_plot_and_errors(three, cli):
    tmp, coll, runs, truth = three
    r = cli(
        "pool",
        "plan",
        *runs,
        "--collection",
        coll,
        "--qrels",
        truth,
        "--budgets",
        "2,4",
        "--per-query",
        "--plot",
        tmp / "plan.png",
        "--per-run",
    )
    assert r.exit_code == 0, r.output
    assert (tmp / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "strategies x budgets" in r.stdout and "maxmean" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    r = cli("pool", "plan", *runs, "--collection", coll, "--qrels", truth, "--budgets", "1")
    assert r.exit_code == 2 and "below the number of queries (2)" in r.stderr
    r = cli("pool", "plan", runs[0], "--collection", coll, "--qrels", truth, "--budgets", "2")
    assert r.exit_code == 2 and "at least two runs" in r.stderr
    r = cli("pool", "plan", *runs, "--collection", coll, "--qrels", truth, "--budgets", "2,x")
    assert r.exit_code == 2 and "--budgets" in r.stderr


def test_plan_plot_for_papers(three, cli):
    """pool plan's plot was a 100 dpi PNG whose tau panel hid every tied line under the last,
    with fractional budget ticks, tab10 colours and one marker, and "AP" for strata rows."""
    from matplotlib.colors import to_hex
    from PIL import Image

    from cmrkit.figures import PALETTE
    from cmrkit.pooling.plan import PlanOptions, plan_figure, plan_pool

    tmp, coll, runs, truth = three
    plan = plan_pool(runs, coll, truth, PlanOptions(budgets=(2, 3, 5), per_query=True))
    fig = plan_figure(plan)
    tau, found, bias = fig.axes[:3]
    lines = tau.get_lines()
    assert len(lines) == 6
    ys = [tuple(line.get_ydata()) for line in lines]
    assert len(set(ys)) < len(ys)  # some strategies tie here: the case the plot must show
    looks = {(line.get_marker(), str(line.get_linestyle()), line.get_color()) for line in lines}
    assert len(looks) == len(lines)
    assert len({line.get_marker() for line in lines}) == len(lines)
    assert len({tuple(line.get_xdata()) for line in lines}) == len(lines)  # offset sideways
    assert {to_hex(line.get_color()) for line in lines} <= {c.lower() for c in PALETTE}
    for ax in (tau, found, bias):
        assert list(ax.get_xticks()) == [2, 3, 5]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "3", "5"]
    labels = [line.get_label() for line in found.get_lines()]
    assert "strata (xinfAP)" in labels and "depth" in labels
    assert "xinfAP" in bias.get_ylabel()
    notes = [t.get_text() for t in tau.texts]
    tied = {r["tau"] for r in plan.rows}
    assert notes == (
        [f"tau {tied.pop():.2f} for every strategy\nat every budget"] if len(tied) == 1 else []
    )
    # PDF and SVG by extension, PNG at 300 dpi; each rerun finds its plot up to date (the
    # collection named bare, as `status tiny` takes it: collections/tiny)
    args = ["pool", "plan", *runs, "--collection", "tiny", "--qrels", truth, "--budgets", "2,3"]
    for name, magic in (("plan.pdf", b"%PDF"), ("plan.svg", b"<?xml"), ("plan.png", b"\x89PNG")):
        r = cli(*args, "--plot", tmp / name)
        assert r.exit_code == 0, r.output
        first = (tmp / name).read_bytes()
        assert first.startswith(magic)
        r = cli(*args, "--plot", tmp / name)
        assert r.exit_code == 0 and "up to date" in r.stdout, r.output
        assert (tmp / name).read_bytes() == first
    assert b"<svg" in (tmp / "plan.svg").read_bytes()
    with Image.open(tmp / "plan.png") as png:
        assert [round(v) for v in png.info["dpi"]] == [300, 300]
        assert png.size[0] >= 13 * 300 * 0.9  # 13 inches wide
    r = cli(*args, "--plot", tmp / "plan.jpg")
    assert r.exit_code == 2 and "FILE.pdf or FILE.svg" in r.stderr
    assert not (tmp / "plan.jpg").exists()
    r = cli("pool", "create", *runs, "--collection", "tiny", "-o", tmp / "bare.jsonl")
    assert r.exit_code == 0, r.output
    assert read_pool(tmp / "bare.jsonl").header["collection"]["name"] == "tiny"


def test_next_reads_blind_answers_through_the_export_key(three, cli):
    tmp = three[0]
    pool = create(cli, three, "--strategy", "mtf", "--budget", "3", "--per-query")
    r = cli("pool", "export", pool, "--format", "jsonl", "-o", tmp / "r1.jsonl")
    assert r.exit_code == 0, r.output
    key = tmp / "r1.key.tsv"
    rows = [line.split("\t") for line in key.read_text().splitlines()[1:]]
    answers = ["pair_id,worker_id,label"]
    answers += [f"{pid},w1,{5 if doc in RELEVANT else 1}" for pid, _, doc, *_ in rows]
    (tmp / "r1.csv").write_text("\n".join(answers) + "\n")
    r = cli("pool", "next", pool, "-j", tmp / "r1.csv", "-o", tmp / "p2.jsonl")
    assert r.exit_code == 2 and "--key" in r.stderr
    r = cli("pool", "next", pool, "-j", tmp / "r1.csv", "--key", key, "-o", tmp / "p2.jsonl")
    assert r.exit_code == 0, r.output
    assert chosen(tmp / "p2.jsonl") == MTF[:2]
    assert {p.label for p in read_pool(tmp / "p2.jsonl").pairs if p.docno == "d1"} == {0}


def test_sample_qrels_say_why_none_apply(three, cli):
    """A complete depth pool whose qrels judge none of its queries is no strata pool (the
    issue's `export --sample-qrels`: it said 'are they from another pool?'); empty qrels (an
    aggregation that kept no query) say so; a strata pool's foreign qrels are another pool's."""
    from cmrkit.pooling import sample_qrels

    tmp, _, _, _ = three
    foreign = write_qrels(tmp / "foreign.txt", {"q9": {"d1": 1}})
    depth = create(cli, three, "--strategy", "depth", "--depth", "4")
    r = cli("pool", "sample-qrels", depth, foreign, "-o", tmp / "s.txt")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "this is a depth pool, not a strata pool" in r.stderr
    with pytest.raises(CmrkitError, match="hold no judgment"):
        sample_qrels(read_pool(depth), {})
    strata = create(cli, three, "--strategy", "strata", "--strata", "1-1:1.0,2-4:0.5")
    r = cli("pool", "sample-qrels", strata, foreign, "-o", tmp / "s2.txt")
    assert r.exit_code == 2 and "are they from another pool?" in r.stderr
