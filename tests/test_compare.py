"""`cmrkit compare` and the significance tests, checked against scipy and trec_eval."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from trec_eval_fixtures import extract_trec_eval, parse_trec_eval, run_trec_eval, write_collection
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.errors import CmrkitError
from cmrkit.evaluation import correct_pvalues, paired_t_test, permutation_test
from cmrkit.trec import read_qrels

# per-query scores of two systems (known data: 12 queries)
A = [0.31, 0.52, 0.12, 0.77, 0.40, 0.05, 0.66, 0.29, 0.91, 0.48, 0.35, 0.60]
B = [0.25, 0.50, 0.20, 0.61, 0.33, 0.05, 0.58, 0.30, 0.80, 0.41, 0.36, 0.49]


def _mean_diff(x, y, axis=0):
    return np.mean(x - y, axis=axis)


def test_t_test_is_scipys_paired_t_test():
    assert paired_t_test(A, B) == pytest.approx(stats.ttest_rel(A, B).pvalue, rel=1e-12)
    # by hand: t = mean(d) / (sd(d) / sqrt(n)), two-sided
    d = np.subtract(A, B)
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    assert paired_t_test(A, B) == pytest.approx(2 * stats.t.sf(abs(t), len(d) - 1), rel=1e-9)
    assert paired_t_test(A, A) == 1.0
    assert math.isnan(paired_t_test([0.1], [0.2]))


def test_t_test_is_scipys_to_the_last_bit():
    """paired_t_test computes ttest_rel's operations without loading scipy.stats: the same
    doubles on samples of every size, continuous, rounded and tied."""
    rng = np.random.default_rng(4)
    checked = 0
    for trial in range(2000):
        n = int(rng.choice([2, 3, 5, 12, 50, 1000]))
        a = rng.random(n)
        b = (a + rng.normal(0.01, 0.05, n), np.round(rng.random(n), 1), rng.random(n))[trial % 3]
        if np.ptp(a - b) == 0:
            continue
        assert paired_t_test(a, b) == float(stats.ttest_rel(a, b).pvalue)
        checked += 1
    assert checked > 1900


def test_exact_permutation_test_is_scipys():
    expected = stats.permutation_test(
        (np.array(A), np.array(B)),
        _mean_diff,
        permutation_type="samples",
        n_resamples=np.inf,
        alternative="two-sided",
        vectorized=True,
    ).pvalue
    # 2**12 = 4096 sign patterns <= 10000: every one is enumerated
    assert permutation_test(A, B, permutations=10000) == pytest.approx(expected, rel=1e-12)


def test_random_permutation_test_is_close_to_exact_and_seeded():
    rng = np.random.default_rng(11)
    a = rng.random(18)
    b = a - 0.04 + rng.normal(0, 0.12, 18)
    exact = stats.permutation_test(
        (a, b), _mean_diff, permutation_type="samples", n_resamples=np.inf, vectorized=True
    ).pvalue
    p = permutation_test(a, b, permutations=20000, seed=1)
    # Monte Carlo error of a p-value near 0.1 with 20,000 samples is about 0.002
    assert abs(p - exact) < 0.01
    assert permutation_test(a, b, permutations=20000, seed=1) == p
    assert permutation_test(a, b, permutations=20000, seed=2) != p


def test_corrections_by_their_definitions():
    p = [0.01, 0.04, 0.03, math.nan]
    # Holm: sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, max(0.06, 0.04) = 0.06
    holm = correct_pvalues(p, "holm")
    assert holm[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(holm[3])
    assert correct_pvalues(p, "bonferroni")[:3] == pytest.approx([0.03, 0.12, 0.09])
    assert correct_pvalues([0.6, 0.5], "bonferroni") == [1.0, 1.0]
    assert correct_pvalues(p, "none")[:3] == p[:3]
    with pytest.raises(CmrkitError):
        correct_pvalues(p, "sidak")


def _variant(run: Path, qrels: Path, out: Path, seed: int, boost: float) -> Path:
    """The run with noisy scores, relevant documents pushed up by ``boost`` on average."""
    r = random.Random(seed)
    judged = read_qrels(qrels)
    lines = []
    for line in run.read_text().splitlines():
        qid, q0, docno, rank, score, _ = line.split()
        relevant = judged.get(qid, {}).get(docno, 0) >= 1
        new = float(score) + r.gauss(0, 2) + (r.random() * 2 * boost if relevant else 0)
        lines.append(f"{qid} {q0} {docno} {rank} {new!r} {out.stem}\n")
    out.write_text("".join(lines))
    return out


@pytest.fixture(scope="module")
def systems(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    binary = extract_trec_eval(folder)
    qrels, base, _ = write_collection(folder, seed=7, name="base")
    better = _variant(base, qrels, folder / "better.trec", seed=1, boost=4.0)
    other = _variant(base, qrels, folder / "other.trec", seed=2, boost=0.0)
    return binary, qrels, [base, better, other]


def _per_query(binary, qrels, run, measure):
    printed = parse_trec_eval(run_trec_eval(binary, qrels, run, "-m", measure))
    return {q: float(v) for (_, q), v in printed.items() if q != "all"}


def test_compare_json_against_trec_eval_and_scipy(systems):
    binary, qrels, runs = systems
    result = CliRunner().invoke(
        app,
        ["compare", str(qrels), *map(str, runs), "-m", "AP", "-m", "P@10", "-f", "json",
         "--trec-eval", "9"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    assert obj["baseline"] == "base" and obj["test"] == "t" and obj["correction"] == "holm"
    assert list(obj["systems"]) == ["base", "better", "other"]
    base = _per_query(binary, qrels, runs[0], "map")
    raw = {}
    for run in runs[1:]:
        name = run.stem
        mine = _per_query(binary, qrels, run, "map")
        paired = sorted(set(base) & set(mine))
        entry = obj["systems"][name]["against_baseline"]["AP"]
        assert entry["paired_queries"] == len(paired)
        assert entry["improved"] == sum(mine[q] > base[q] for q in paired)
        assert entry["hurt"] == sum(mine[q] < base[q] for q in paired)
        # trec_eval's values are rounded to 4 decimals: the p-value agrees closely
        raw[name] = stats.ttest_rel([mine[q] for q in paired], [base[q] for q in paired]).pvalue
        assert entry["p"] == pytest.approx(raw[name], abs=2e-3)
        printed_all = run_trec_eval(binary, qrels, run, "-m", "map").splitlines()[-1].split()[-1]
        assert f"{obj['systems'][name]['measures']['AP']:.4f}" == printed_all
    # Holm over the two systems
    expected = correct_pvalues([raw["better"], raw["other"]], "holm")
    got = [obj["systems"][n]["against_baseline"]["AP"]["p_adjusted"] for n in ("better", "other")]
    assert got == pytest.approx(expected, abs=4e-3)


def test_compare_table_baseline_and_formats(systems):
    _, qrels, runs = systems
    args = ["compare", str(qrels), *map(str, runs), "-m", "RR@10"]
    table = CliRunner().invoke(app, [*args, "--baseline", "other"])
    assert table.exit_code == 0, table.stderr
    assert "other (baseline)" in table.stdout and "comparison" in table.stdout
    csv_out = CliRunner().invoke(app, [*args, "-f", "csv", "--correction", "none"])
    rows = csv_out.stdout.splitlines()
    assert rows[0].startswith("system,measure,value,delta")
    assert len(rows) == 1 + 3 and rows[1].startswith("base,RR@10,")
    trec = CliRunner().invoke(app, [*args, "-f", "trec"])
    names = [line.split("\t")[0].strip() for line in trec.stdout.splitlines()]
    assert names == ["RR@10", "RR@10", "RR@10_p", "RR@10", "RR@10_p"]


def test_permutation_compare_is_deterministic(systems):
    _, qrels, runs = systems
    args = ["compare", str(qrels), *map(str, runs), "-m", "AP", "--test", "permutation",
            "--permutations", "2000", "-f", "json"]  # fmt: skip
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.stderr
    assert first.stdout == CliRunner().invoke(app, args).stdout
    assert json.loads(first.stdout)["test"] == "permutation"


def test_plot_rerun_is_up_to_date_and_another_plot_needs_force(systems, tmp_path):
    """Run twice, `compare --plot diff.png` said "already exists" (exit 2) and printed no
    table; a step already done says so and exits 0, only a different plot is refused."""
    _, qrels, runs = systems
    png = tmp_path / "diff.png"
    args = ["compare", str(qrels), *map(str, runs), "-m", "AP", "--plot", str(png)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert f"wrote {png}" in result.stderr
    first = png.read_bytes()
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.stderr
    assert again.stdout == result.stdout  # the table again
    assert f"{png} is up to date" in again.stderr
    assert png.read_bytes() == first
    other = [*args, "-m", "RR@10", "--plot-measure", "RR@10"]  # another figure, same file
    refused = CliRunner().invoke(app, other)
    assert refused.exit_code == 2 and "--force" in refused.stderr
    assert refused.stderr.count("\n") == 1 and png.read_bytes() == first
    assert CliRunner().invoke(app, [*other, "--force"]).exit_code == 0
    assert png.read_bytes() != first


def test_plot_as_pdf_svg_and_300_dpi_png(systems, tmp_path):
    """Plots for papers: `--plot x.pdf` was refused and PNGs were 100 dpi."""
    from PIL import Image

    _, qrels, runs = systems
    base = ["compare", str(qrels), *map(str, runs), "-m", "AP"]
    for name, magic in (("d.pdf", b"%PDF-"), ("d.svg", b"<?xml"), ("d.png", b"\x89PNG")):
        path = tmp_path / name
        r = CliRunner().invoke(app, [*base, "--plot", str(path)])
        assert r.exit_code == 0, r.stderr
        data = path.read_bytes()
        assert data.startswith(magic)
        # no date or version inside: the same comparison gives the same bytes
        r = CliRunner().invoke(app, [*base, "--plot", str(path)])
        assert r.exit_code == 0 and "up to date" in r.stderr and path.read_bytes() == data
    assert b"<svg" in (tmp_path / "d.svg").read_bytes()
    assert b"CreationDate" not in (tmp_path / "d.pdf").read_bytes()
    with Image.open(tmp_path / "d.png") as png:
        assert [round(v) for v in png.info["dpi"]] == [300, 300]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--baseline", "nope"], "--baseline 'nope' is none of the runs"),
        (["--plot", "x.jpg"], "FILE.png, FILE.pdf or FILE.svg"),
        (["-m", "AP@ten"], "cutoff"),
    ],
)
def test_compare_bad_options(systems, extra, words):
    _, qrels, runs = systems
    result = CliRunner().invoke(app, ["compare", str(qrels), *map(str, runs), *extra])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and words in result.stderr
    assert result.stderr.count("\n") == 1


def test_swapped_qrels_and_run_give_the_usage(tmp_path):
    """`compare RUN QRELS RUN` (eval's order) names the swap, as `eval` does (trip 6); a run
    where the qrels go says so."""
    qrels, run, other = tmp_path / "q.txt", tmp_path / "a.trec", tmp_path / "b.trec"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    run.write_text("q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\n")
    other.write_text("q1 Q0 d2 1 2.0 b\nq1 Q0 d1 2 1.0 b\n")
    for args, words in (
        ([run, qrels, other], "the arguments are swapped"),
        ([run, other], "looks like a run, not qrels"),
    ):
        result = CliRunner().invoke(app, ["compare", *map(str, args)])
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
        assert words in result.stderr and "usage: cmrkit compare QRELS RUN RUN" in result.stderr


def test_compare_needs_two_runs(systems):
    _, qrels, runs = systems
    result = CliRunner().invoke(app, ["compare", str(qrels), str(runs[0])])
    assert result.exit_code == 2 and "at least two runs" in result.stderr


# --- the printed means and the paired statistics use the same queries ----------------------


@pytest.fixture(scope="module")
def uneven(systems, tmp_path_factory):
    """The base run, and a better run that lacks three of the queries the base run has."""
    _, qrels, runs = systems
    folder = tmp_path_factory.mktemp("uneven")
    lines = runs[1].read_text().splitlines()
    judged = read_qrels(qrels)
    qids = sorted({line.split()[0] for line in lines} & set(judged))
    dropped = set(qids[:3])
    short = folder / "short.trec"
    short.write_text("".join(f"{x}\n" for x in lines if x.split()[0] not in dropped))
    return qrels, runs[0], short, dropped


def test_runs_of_different_queries_are_refused_naming_them(uneven):
    qrels, base, short, dropped = uneven
    result = CliRunner().invoke(app, ["compare", str(qrels), str(base), str(short), "-m", "AP"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: the runs score different queries: short lacks 3 of")
    assert all(q in result.stderr for q in dropped)
    assert (
        f"add -c to the command (--all-queries) to score a query a run lacks as 0 and "
        f"average every run over all {len(read_qrels(qrels)):,} qrels queries" in result.stderr
    )
    assert result.stdout == ""


def test_means_and_delta_over_every_qrels_query_with_c(uneven):
    qrels, base, short, dropped = uneven
    result = CliRunner().invoke(
        app,
        ["compare", str(qrels), str(base), str(short), "-m", "AP", "-f", "json", "-c",
         "--trec-eval", "9"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    judged = read_qrels(qrels)
    mine = {q: float(v) for q, v in _ap_per_query(qrels, short).items()}
    theirs = {q: float(v) for q, v in _ap_per_query(qrels, base).items()}
    assert set(theirs) - set(mine) == dropped
    assert obj["queries"] == len(judged)
    s, b = obj["systems"]["short"], obj["systems"]["base"]
    assert s["queries"] == b["queries"] == len(judged)
    assert s["scored_queries"] == b["scored_queries"] == len(judged)
    entry = s["against_baseline"]["AP"]
    # the delta is exactly the difference of the two printed means
    assert entry["delta"] == s["measures"]["AP"] - b["measures"]["AP"]
    assert entry["paired_queries"] == len(judged)
    # the short run's mean counts its missing queries as 0, as trec_eval -c does
    assert s["measures"]["AP"] == pytest.approx(sum(mine.values()) / len(judged), abs=5e-5)
    assert obj["query_set"] == (
        f"means and tests over all {len(judged)} qrels queries (0 where a run lacks one)"
    )


def _ap_per_query(qrels, run):
    binary = extract_trec_eval(Path(run).parent)
    printed = parse_trec_eval(run_trec_eval(binary, qrels, run, "-m", "map"))
    return {q: v for (_, q), v in printed.items() if q != "all"}


def test_table_says_which_queries_and_how_many(systems):
    _, qrels, runs = systems
    judged = read_qrels(qrels)
    in_base = {line.split()[0] for line in runs[0].read_text().splitlines()} & set(judged)
    result = CliRunner().invoke(app, ["compare", str(qrels), *map(str, runs[:2]), "-m", "AP"])
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "paired t-test p (Holm correction)" in text
    assert f"means and tests over the {len(in_base)} queries in the qrels and in every run" in text
    assert f"base alone: averaged over {len(in_base)} queries" in result.stderr


def test_plot_one_y_axis_named_test_and_safe_colours(uneven):
    from matplotlib.colors import to_hex

    from cmrkit.evaluation import compare
    from cmrkit.evaluation.plot import HURT, IMPROVED, TIED, difference_figure
    from cmrkit.trec import read_run

    qrels, base, short, _ = uneven
    comp = compare(
        {"base": read_run(base), "short": read_run(short), "again": read_run(short)},
        read_qrels(qrels),
        ["AP"],
        test="permutation",
        correction="bonferroni",
        all_queries=True,
    )
    fig = difference_figure(comp, comp.measures[0])
    axes = fig.axes
    assert len(axes) == 2
    assert axes[0].get_ylim() == axes[1].get_ylim()
    assert axes[0].get_shared_y_axes().joined(axes[0], axes[1])
    for ax in axes:
        title = ax.get_title()
        assert "paired permutation test" in title and "bonferroni-corrected p=" in title
        assert f"of {len(comp.queries)})" in title
        colours = {to_hex(bar.get_facecolor()) for bar in ax.patches}
        assert colours <= {IMPROVED.lower(), HURT.lower(), TIED.lower()}
        assert not colours & {"#ff0000", "#008000", "#2ca02c", "#d62728"}  # no red/green
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["improved", "hurt", "tied"]


# --- the tests, corrections, effect sizes and intervals of issue 31 -------------------------


def _values(qrels, runs, measure="AP"):
    """Per-query values of each run over the same queries, as compare pairs them."""
    from cmrkit.evaluation import evaluate
    from cmrkit.trec import read_run

    judged = read_qrels(qrels)
    results = [evaluate(read_run(r), judged, [measure]) for r in runs]
    queries = list(results[0].per_query)
    return [np.array(r.values(measure, queries)) for r in results]


@pytest.mark.parametrize("test", ["t", "wilcoxon", "sign", "permutation", "bootstrap"])
@pytest.mark.parametrize(("correction", "method"), [("bh", "fdr_bh"), ("by", "fdr_by")])
def test_every_test_and_correction_through_the_command(systems, test, correction, method):
    from statsmodels.stats.multitest import multipletests

    _, qrels, runs = systems
    args = ["compare", str(qrels), *map(str, runs), "-m", "AP", "--test", test, "--correction",
            correction, "--bootstrap", "3000", "--seed", "3", "-f", "json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    base, *others = _values(qrels, runs)
    want = []
    for values in others:
        d = values - base
        if test == "t":
            want.append(stats.ttest_rel(values, base).pvalue)
        elif test == "wilcoxon":
            want.append(stats.wilcoxon(values, base).pvalue)
        elif test == "sign":
            wins, losses = int((d > 0).sum()), int((d < 0).sum())
            want.append(stats.binomtest(wins, wins + losses).pvalue)
        elif test == "permutation":
            want.append(permutation_test(values, base, permutations=10000, seed=3))
        else:
            dist = stats.bootstrap(
                (d,), np.mean, n_resamples=3000, method="percentile",
                rng=np.random.default_rng(3),
            ).bootstrap_distribution  # fmt: skip
            far = np.count_nonzero(np.abs(dist - d.mean()) >= abs(d.mean()) * (1 - 1e-12))
            want.append((far + 1) / 3001)
    got = [obj["systems"][r.stem]["against_baseline"]["AP"] for r in runs[1:]]
    assert [g["p"] for g in got] == pytest.approx(want, abs=1e-9)
    adjusted = multipletests(want, method=method)[1]
    assert [g["p_adjusted"] for g in got] == pytest.approx(list(adjusted), abs=1e-9)
    assert obj["test"] == test and obj["correction"] == correction


def test_effect_sizes_and_intervals_are_scipys_bootstrap(systems):
    _, qrels, runs = systems
    args = ["compare", str(qrels), *map(str, runs), "-m", "AP", "--ci", "0.9",
            "--bootstrap", "4000", "--seed", "12", "-f", "json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    assert (obj["ci"], obj["bootstrap"], obj["seed"]) == (0.9, 4000, 12)
    values = _values(qrels, runs)

    def scipy_interval(sample):
        got = stats.bootstrap(
            (sample,), np.mean, n_resamples=4000, method="percentile", confidence_level=0.9,
            rng=np.random.default_rng(12),
        ).confidence_interval  # fmt: skip
        return [got.low, got.high]

    for run, v in zip(runs, values, strict=True):
        entry = obj["systems"][run.stem]
        assert entry["intervals"]["AP"] == pytest.approx(scipy_interval(v), abs=1e-12)
        if run == runs[0]:
            assert "against_baseline" not in entry
            continue
        cell = entry["against_baseline"]["AP"]
        d = v - values[0]
        assert cell["delta_ci"] == pytest.approx(scipy_interval(d), abs=1e-12)
        assert cell["d_z"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
        assert cell["delta_ci"][0] <= cell["delta"] <= cell["delta_ci"][1]
    again = CliRunner().invoke(app, args)
    assert again.stdout == result.stdout  # seeded: the same bytes
    other = CliRunner().invoke(app, [*args[:-4], "--seed", "13", "-f", "json"])
    assert (
        json.loads(other.stdout)["systems"]["better"]["intervals"]
        != (obj["systems"]["better"]["intervals"])
    )


def test_an_undefined_test_is_said_per_system_not_printed_as_nan(systems, tmp_path):
    """One more document per query: NumRet differs by exactly +1 on every query, so the t-test
    has no variance; the sign test is defined."""
    _, qrels, runs = systems
    lines = runs[0].read_text().splitlines()
    extra = []
    for qid in dict.fromkeys(line.split()[0] for line in lines):
        extra.append(f"{qid} Q0 EXTRA-{qid} 999 -1000.0 plus")
    plus = tmp_path / "plus.trec"
    plus.write_text("\n".join(lines + extra) + "\n")
    args = ["compare", str(qrels), str(runs[0]), str(plus), str(runs[1]), "-m", "NumRet",
            "--bootstrap", "200"]  # fmt: skip
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.stderr
    assert "p undefined" in table.stdout and "nan" not in table.stdout.lower()
    assert "note: plus vs base on NumRet: every query differs by +1: without variance the " \
        "t-test is undefined" in " ".join(table.stderr.split())  # fmt: skip
    obj = json.loads(CliRunner().invoke(app, [*args, "-f", "json"]).stdout)
    cell = obj["systems"]["plus"]["against_baseline"]["NumRet"]
    assert cell["p"] is None and cell["p_adjusted"] is None and not cell["significant"]
    assert cell["note"].startswith("every query differs by +1") and cell["d_z"] is None
    assert obj["notes"] == [f"plus vs base on NumRet: {cell['note']}"]
    # the other system's test is corrected as a family of one
    better = obj["systems"]["better"]["against_baseline"]["NumRet"]
    assert better["p_adjusted"] == better["p"] or better["p"] is None
    sign = json.loads(CliRunner().invoke(app, [*args, "--test", "sign", "-f", "json"]).stdout)
    count = len(_values(qrels, runs[:1])[0])
    assert sign["systems"]["plus"]["against_baseline"]["NumRet"]["p"] == pytest.approx(
        stats.binomtest(count, count).pvalue
    )


def test_all_pairs_is_tukeys_hsd_as_statsmodels_computes_it(systems):
    from statsmodels.stats.multicomp import pairwise_tukeyhsd

    _, qrels, runs = systems
    args = ["compare", str(qrels), *map(str, runs), "-m", "AP", "--all-pairs", "--bootstrap",
            "500"]  # fmt: skip
    obj = json.loads(CliRunner().invoke(app, [*args, "-f", "json"]).stdout)
    values = _values(qrels, runs)
    names = [r.stem for r in runs]
    ref = pairwise_tukeyhsd(np.concatenate(values), np.repeat(names, len(values[0])))
    pairs = obj["tukey_hsd"]["AP"]
    expected = {}
    for (a, b), diff, p, (low, high) in zip(
        [(ref.groupsunique[i], ref.groupsunique[j]) for i, j in zip(*ref._multicomp.pairindices,
                                                                     strict=True)],
        ref.meandiffs, ref.pvalues, ref.confint, strict=True,
    ):  # fmt: skip
        expected[a, b] = (diff, p, low, high)
    assert len(pairs) == 3
    for pair in pairs:
        a, b = pair["first"], pair["second"]
        diff, p, low, high = expected.get((a, b)) or (lambda e: (-e[0], e[1], -e[3], -e[2]))(
            expected[b, a]
        )
        # statsmodels reports second - first
        assert pair["delta"] == pytest.approx(-diff, abs=1e-12)
        assert pair["p"] == pytest.approx(p, abs=1e-6)
        assert pair["ci"] == pytest.approx([-high, -low], abs=1e-6)
    rows = CliRunner().invoke(app, [*args, "-f", "csv"]).stdout.splitlines()
    tukey = [r for r in rows if r.split(",")[16] == "tukey"]
    assert len(tukey) == 3 and tukey[0].startswith("base,AP,")
    table = CliRunner().invoke(app, args)
    assert "every pair" in table.stdout and "base - better" in table.stdout


def test_latex_table_and_means_plot_for_a_paper(systems, tmp_path):
    _, qrels, runs = systems
    tex, pdf = tmp_path / "t.tex", tmp_path / "means.pdf"
    args = ["compare", str(qrels), *map(str, runs), "-m", "AP", "-m", "P@10", "--bootstrap",
            "1000", "--latex", str(tex), "--plot-means", str(pdf)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert f"wrote {tex}" in result.stderr and f"wrote {pdf}" in result.stderr
    text = tex.read_text()
    obj = json.loads(CliRunner().invoke(app, [*args, "-f", "json"]).stdout)
    assert r"\begin{tabular}{lrr}" in text and r"\toprule" in text and "95\\%" in text
    better = next(line for line in text.splitlines() if line.startswith("better &"))
    mark = obj["systems"]["better"]["against_baseline"]["AP"]["significant"]
    assert better.split("&")[1].strip() == (
        f"{obj['systems']['better']['measures']['AP']:.4f}" + (r"$^\dagger$" if mark else "")
    )
    low, high = obj["systems"]["better"]["intervals"]["AP"]
    assert f"[{low:.4f}, {high:.4f}]" in text
    assert pdf.read_bytes().startswith(b"%PDF-")
    again = CliRunner().invoke(app, args)
    assert f"{tex} is up to date" in again.stderr and f"{pdf} is up to date" in again.stderr
    refused = CliRunner().invoke(app, [*args[:-4], "--plot-means", str(pdf), "--bootstrap", "0"])
    assert refused.exit_code == 2 and "--plot-means draws bootstrap intervals" in refused.stderr


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--ci", "1.5"], "--ci 1.5 must lie between 0 and 1"),
        (["--test", "bootstrap", "--bootstrap", "0"], "--test bootstrap needs --bootstrap"),
        (["--plot-means", "x.jpg"], "FILE.png, FILE.pdf or FILE.svg"),
    ],
)
def test_compare_bad_statistics_options(systems, extra, words):
    _, qrels, runs = systems
    result = CliRunner().invoke(app, ["compare", str(qrels), *map(str, runs), *extra])
    assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1


def test_the_options_choices_are_the_librarys():
    from cmrkit.commands.evaluate import Correction, Test
    from cmrkit.evaluation import CORRECTIONS, TESTS

    assert tuple(Test) == TESTS and tuple(Correction) == CORRECTIONS


def _precision_runs(tmp_path: Path, hits: dict[str, list[int]]) -> tuple[Path, list[Path]]:
    """Qrels of ten relevant documents per query, and a run per name retrieving ``hits[name][i]``
    of them in its top 10 for query i (P@10 = hits / 10)."""
    n = len(next(iter(hits.values())))
    qrels = tmp_path / "p.qrels"
    qrels.write_text("".join(f"q{i} 0 r{i}.{j} 1\n" for i in range(n) for j in range(10)))
    runs = []
    for name, counts in hits.items():
        lines = []
        for i, k in enumerate(counts):
            docs = [f"r{i}.{j}" for j in range(k)] + [f"x{i}.{j}" for j in range(10 - k)]
            lines += [f"q{i} Q0 {d} {r + 1} {10 - r} {name}\n" for r, d in enumerate(docs)]
        runs.append(tmp_path / f"{name}.trec")
        runs[-1].write_text("".join(lines))
    return qrels, runs


def test_no_negative_zero_and_tiny_p_values_are_said_so(tmp_path):
    """Issue 42's cosmetics: a bootstrap interval printed as [-0.0000, ...] (a difference a
    rounding below 0: (0.3 + 0.0) / 2 - (0.1 + 0.2) / 2 is -2.8e-17), Tukey's p printed as
    p=0.0e+00 (the studentized range's integral underflows: p < 1e-4, not 0); the LaTeX table
    ends with a newline."""
    qrels, (a, b) = _precision_runs(tmp_path, {"a": [1, 2], "b": [3, 0]})
    res = CliRunner().invoke(app, ["compare", str(qrels), str(a), str(b), "-m", "P@10",
                                   "--all-pairs", "--bootstrap", "200"])  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "-0.0000" not in res.stdout and "+0.0000" in res.stdout, res.stdout
    obj = json.loads(CliRunner().invoke(app, ["compare", str(qrels), str(a), str(b), "-m",
                                              "P@10", "-f", "json"]).stdout)  # fmt: skip
    assert obj["systems"]["b"]["against_baseline"]["P@10"]["delta"] < 0  # the double is kept
    rng = random.Random(5)
    far = {"good": [rng.randint(7, 10) for _ in range(60)],
           "bad": [rng.randint(0, 3) for _ in range(60)]}  # fmt: skip
    qrels, runs = _precision_runs(tmp_path, far)
    tex = tmp_path / "compare.tex"
    args = ["compare", str(qrels), *map(str, runs), "-m", "P@10", "--all-pairs", "--bootstrap",
            "200", "--latex", str(tex)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.stderr
    assert "e+00" not in res.stdout and "p=" not in res.stdout.replace("p=1.0000", ""), res.stdout
    assert res.stdout.count("p < 1e-4") == 2, res.stdout  # the t-test's and Tukey's
    tukey = json.loads(CliRunner().invoke(app, [*args[:-2], "-f", "json"]).stdout)["tukey_hsd"]
    assert tukey["P@10"][0]["p"] == 0.0  # JSON keeps the double
    assert tex.read_text().endswith("\\end{table}\n")


def test_plot_scatter_is_a_point_per_query_for_each_run_against_the_baseline(systems, tmp_path):
    """From the new user's walk: `compare` drew no per-query scatter of two runs. Each panel
    holds a point per compared query at (baseline's value, the run's value), coloured by
    whether the run improved, hurt or tied it (Okabe-Ito), with the diagonal; PNG (300 dpi),
    PDF or SVG by the extension, the same bytes for the same comparison."""
    from matplotlib.colors import to_hex
    from PIL import Image

    from cmrkit.evaluation import compare
    from cmrkit.evaluation.plot import HURT, IMPROVED, TIED, scatter_figure
    from cmrkit.trec import read_run

    _, qrels, runs = systems
    names = [r.stem for r in runs]
    comp = compare({n: read_run(r) for n, r in zip(names, runs, strict=True)},
                   read_qrels(qrels), ["AP"], test="wilcoxon")  # fmt: skip
    fig = scatter_figure(comp, comp.measures[0])
    assert len(fig.axes) == 2
    base = comp.results[names[0]].values(comp.measures[0], comp.queries)
    for ax, name in zip(fig.axes, names[1:], strict=True):
        points = ax.collections[0]
        xy = points.get_offsets()
        ys = comp.results[name].values(comp.measures[0], comp.queries)
        assert [tuple(p) for p in xy.tolist()] == list(zip(base, ys, strict=True))
        want = [IMPROVED if y > x else HURT if y < x else TIED for x, y in xy.tolist()]
        got = [to_hex(c[:3]) for c in points.get_facecolors()]
        assert got == [w.lower() for w in want]
        assert ax.get_xlim() == ax.get_ylim()
        assert "Wilcoxon signed-rank test" in ax.get_title() and f"vs {names[0]}" in ax.get_title()
    args = ["compare", str(qrels), *map(str, runs), "-m", "AP", "-m", "P@10", "--plot-measure",
            "P@10", "--bootstrap", "100"]  # fmt: skip
    for name, magic in (("s.pdf", b"%PDF-"), ("s.svg", b"<?xml"), ("s.png", b"\x89PNG")):
        path = tmp_path / name
        r = CliRunner().invoke(app, [*args, "--plot-scatter", str(path)])
        assert r.exit_code == 0 and f"wrote {path}" in r.stderr, r.stderr
        data = path.read_bytes()
        assert data.startswith(magic)
        r = CliRunner().invoke(app, [*args, "--plot-scatter", str(path)])
        assert "up to date" in r.stderr and path.read_bytes() == data
    with Image.open(tmp_path / "s.png") as png:
        assert [round(v) for v in png.info["dpi"]] == [300, 300]
    r = CliRunner().invoke(app, [*args, "--plot-scatter", str(tmp_path / "s.jpg")])
    assert r.exit_code == 2 and "--plot-scatter writes PNG (300 dpi), PDF or SVG" in r.stderr
