"""One kernel per measure family, registered beside its definition (issue 41): every family has
its kernel and says what it reads; the layouts that feed the kernels (the ranking engine's flat
arrays, trec_eval's padded matrices, rescoring's judged hits) give the same doubles, to the
bit; and a measure is added by one definition."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cmrkit.evaluation.measures import Measure, parse_measure, parse_measures, register
from cmrkit.evaluation.measures import trec as defs
from cmrkit.evaluation.measures.base import (
    CUTOFF,
    CUTOFF_REQUIRED,
    KINDS,
    PREFS,
    RANKED,
    ROWS,
    SAMPLED,
    SCORED,
    Kind,
)


def test_every_family_has_its_kernel_and_says_what_it_reads():
    layouts = {RANKED, ROWS, SCORED, SAMPLED, PREFS}
    for fam in defs.FAMILIES:
        if fam.name == "runid" or fam.averages is not None:  # nothing, or a mean of another's
            assert fam.kernel is None, fam.name
            assert fam.averages is None or defs.BY_NAME[fam.averages].kernel is not None
            continue
        assert callable(fam.kernel), fam.name
        assert fam.layout in layouts, fam.name
        assert (fam.layout == PREFS) == (fam.rel_format == "prefs"), fam.name
    for kind in KINDS.values():
        cutoff = 5 if kind.cutoff is not None and kind.cutoff.required else None
        comp = Measure(kind.name, cutoff).computation
        assert callable(comp.kernel) and comp.layout in layouts, kind.name
        # a kind that trec_eval has is computed by its family's kernel, never a copy
        if comp.family is not None:
            assert comp.kernel is comp.family.kernel, kind.name


def test_which_layout_computes_each_measure():
    """The ranking engine computes the measures of a ranking's relevant documents on its flat
    arrays and the rest on trec_eval's matrices of the same rankings (as before issue 41), from
    the definitions alone."""
    on = {
        m: parse_measure(m).computation.layout
        for m in ["AP", "AP@10", "infAP", "RR", "RR@10", "P@10", "R@100", "Success@5",
                  "nDCG@10", "NumRel", "NumRet", "NumRelRet", "NumQ", "Judged@10",
                  "MentionRecall@64", "yaap", "AUC", "AUC_micro", "xinfAP", "infNDCG", "nDCG",
                  "Bpref", "Rprec", "set_F", "relative_P.5", "utility", "IPrec@0.5"]
    }  # fmt: skip
    assert {m for m, layout in on.items() if layout == RANKED} == {
        "AP", "AP@10", "infAP", "RR", "RR@10", "P@10", "R@100", "Success@5", "nDCG@10",
        "NumRel", "NumRet", "NumRelRet", "NumQ", "Judged@10", "MentionRecall@64", "yaap",
    }  # fmt: skip
    assert {m for m, layout in on.items() if layout == SCORED} == {"AUC", "AUC_micro"}
    assert {m for m, layout in on.items() if layout == SAMPLED} == {"xinfAP", "infNDCG"}
    assert {m for m, layout in on.items() if layout == ROWS} == {
        "nDCG", "Bpref", "Rprec", "set_F", "relative_P.5", "utility", "IPrec@0.5",
    }  # fmt: skip
    # AP and AP@k are one kernel (map's and map_cut's), RR and RR@k too
    assert parse_measure("AP").computation.kernel is parse_measure("AP@10").computation.kernel
    assert parse_measure("RR").computation.kernel is parse_measure("RR@5").computation.kernel


def _case(seed: int):
    """Runs and qrels with ties, negative, zero and graded judgments, queries without
    relevant documents or with negative grades only, rankings of very unequal lengths."""
    r = random.Random(seed)
    run, qrels = {}, {}
    for q in range(r.randint(8, 25)):
        qid = f"q{q:02d}"
        pool = list(dict.fromkeys(f"d{r.randint(0, 2000)}" for _ in range(r.choice([3, 50, 900]))))
        grades = [[-1, 0, 0, 1, 2, 3], [-1, 0], [-1, -2]][q % 3]
        qrels[qid] = {d: r.choice(grades) for d in r.sample(pool, r.randint(1, len(pool)))}
        n = r.choice([1, 2, 10, 60, len(pool)])
        run[qid] = {d: r.choice([round(r.random(), 1), r.random() * 9])
                    for d in r.sample(pool, min(n, len(pool)))}  # fmt: skip
    return run, qrels


def _layouts(run, qrels, version: str):
    """The same rankings as the ranking engine's flat layout and as trec_eval's matrix."""
    import cmrkit.evaluation.trec_eval as te
    from cmrkit.evaluation.order import MISSING, rank_all
    from cmrkit.evaluation.ranking import Flat
    from cmrkit.evaluation.trec_bulk import NONPOOL, UNJUDGED, _block, judged_grades, levels_all
    from cmrkit.trec import run_columns

    cols = run_columns(run)
    blocks = [i for i, q in enumerate(cols.qids) if q in qrels]
    qids = [cols.qids[i] for i in blocks]
    ranked = rank_all(cols, blocks, qrels, None, version)
    judged = judged_grades(qrels, qids)
    flat = Flat(ranked, qids, [], judged)
    g = ranked.grades
    marks = np.where(g == MISSING, NONPOOL, np.where(g < 0, UNJUDGED, g))
    opts = te.Options(version=version)
    per = levels_all(judged[0], judged[2], opts.level, opts.state)
    block = _block(marks, ranked.lens, ranked.starts[:-1], None, per, opts)
    return flat, block


KERNEL_CASES = [("map", [None]), ("map_cut", [1, 5, 50, 2000]), ("infAP", [None]),
                ("recip_rank", [None, 3]), ("P", [1, 7, 100]), ("recall", [3, 100]),
                ("success", [1, 2]), ("ndcg_cut", [4, 30, 5000]), ("num_rel", [None]),
                ("num_ret", [None]), ("num_rel_ret", [None]), ("num_q", [None]),
                ("yaap", [None]), ("gm_map", [None])]  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("version", ["9", "10"])
def test_each_kernel_gives_the_same_doubles_on_the_flat_arrays_and_the_matrix(seed, version):
    """The constraint of issue 41 behind 'the two engines agree': one kernel, two layouts
    (ranking.Flat and trec_bulk.Block), the same bytes of every double (0.0 and -0.0, NaN)."""
    flat, block = _layouts(*_case(seed), version)
    checked = 0
    for name, cutoffs in KERNEL_CASES:
        kernel = defs.BY_NAME[name].kernel
        with np.errstate(all="ignore"):
            a, b = kernel(flat, cutoffs), kernel(block, cutoffs)
        for x, y in zip(a, b, strict=True):
            assert (
                np.asarray(x, dtype=np.float64).tobytes()
                == np.asarray(y, dtype=np.float64).tobytes()
            ), (name, cutoffs)
            checked += 1
    assert checked >= 20
    for kind in ("Judged", "MentionRecall", "RR"):  # cmrkit's own, on both layouts too
        kernel = KINDS[kind.lower()].kernel
        with np.errstate(all="ignore"):
            a, b = kernel(flat, [1, 10]), kernel(block, [1, 10])
        assert [x.tobytes() for x in a] == [y.tobytes() for y in b], kind


def test_rescoring_feeds_the_same_kernels_as_the_ranking_engine():
    """rescore.py's judged hits give AP and nDCG the ranking engine's doubles, query by query
    (nDCG on the whole ranking: the ndcg_cut kernel without a cutoff, trec_eval's ndcg)."""
    from cmrkit.evaluation.ranking import evaluate
    from cmrkit.evaluation.rescore import Judgments, RankedRun

    for seed in range(4):
        run, qrels = _case(seed)
        queries = sorted(qrels)
        ranked, judgments = RankedRun(run), Judgments(qrels)
        result = evaluate(run, qrels, ["AP", "nDCG"], all_queries=True)
        for measure in ("AP", "nDCG"):
            got = ranked.values(measure, judgments, queries)
            assert got == result.values(measure, queries), (seed, measure)


def test_a_measure_is_added_by_one_definition(tmp_path):
    """A kind defined with its kernel is a measure every command reads (its cutoff typed):
    here relevant documents in the top k, which is NumRelRet of the run cut at k."""
    from cmrkit.evaluation.measures import _refresh
    from cmrkit.evaluation.ranking import evaluate

    def relevant_in_top(layout, cutoffs):
        return [layout.count("rel", k).astype(float) for k in cutoffs]

    register(Kind("RelIn", "relevant documents in the top k", (CUTOFF_REQUIRED,),
                  kernel=relevant_in_top))  # fmt: skip
    try:
        run, qrels = _case(3)
        got = evaluate(run, qrels, ["RelIn@5", "AP"])
        want = evaluate(run, qrels, ["NumRelRet"], depth=5)
        assert [got.per_query[q]["RelIn@5"] for q in got.per_query] == [
            want.per_query[q]["NumRelRet"] for q in got.per_query
        ]
        with pytest.raises(Exception, match="needs a cutoff, e.g. RelIn@10"):
            parse_measures(["RelIn"])
    finally:
        del KINDS["relin"]
        _refresh()
    with pytest.raises(Exception, match="unknown measure 'RelIn@5'"):
        parse_measures(["RelIn@5"])


def test_the_cutoff_is_a_typed_parameter_and_the_old_strings_still_read():
    ap, p, bpref = KINDS["ap"], KINDS["p"], KINDS["bpref"]
    assert ap.cutoff == CUTOFF and not ap.cutoff.required and ap.cutoff.dtype is int
    assert p.cutoff.required and (p.cutoff.low, p.cutoff.high) == (1, defs.MAX_CUTOFF)
    assert bpref.cutoff is None
    with pytest.warns(DeprecationWarning, match="the cutoff strings go in the next release"):
        old = Kind("Old", "a kind written as before", "required")
    assert old.params == (CUTOFF_REQUIRED,)
