"""cmrkit's own measures that trec_eval lacks and the papers of issue 40 report, each defined
beside its kernel:

- ``AUC``: the ROC AUC of a query's judged relevant units (grade >= 1) against its judged
  non-relevant ones (grade 0) by the run's scores: the share of (relevant, non-relevant) pairs
  that the run scores in the right order, a tie counting half (the Mann-Whitney statistic, as
  ``sklearn.metrics.roc_auc_score``). A judged unit the run does not retrieve (or retrieves
  below ``-M``) scores below every unit it does, and those tie among themselves. Grades below 0
  (pooled, not judged) take no part. Its value is the mean over the queries; a query needs
  both a relevant and a non-relevant judgment.
- ``AUC_micro``: the same over every judged (query, unit) pair of every query at once, one
  ranking of all their scores, as a classifier's AUC is reported (EER's released inference
  writes one score per labelled pair of its test file; the AUC of such a file is this pooled
  one). It needs only one relevant and one non-relevant judgment in all, and has one value for
  the run: its per-query lines repeat it, and it has none per group or per comparison.
- ``MentionRecall@k``: arboEL's recall at k for mention retrieval, the relevant units in the
  top k over ``min(|cluster| - 1, k)``, where ``|cluster| - 1`` (the query's coreferent
  mentions) is the number of units the qrels judge relevant to it; the mean over the queries
  (0 for a query with none). trec_eval's ``recall_k`` (``R@k``) divides by all of them.

The queries AUC cannot be defined for are refused in one line, never scored 0.5 or 1. The AUC
kernels read the ranking engine's layout with the run's scores (``base.SCORED``: every query
scored, those missing from the run as empty rankings); MentionRecall's runs on any ranking
layout.
"""

from __future__ import annotations

from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures.base import CUTOFF_REQUIRED, RANKED, SCORED, Kind, define


def _mann_whitney(scores: Any, positive: Any) -> float:
    """The AUC of ``positive`` rows against the others by ``scores`` (ties count half): the
    rank-sum statistic over midranks."""
    import numpy as np

    order = np.argsort(scores, kind="stable")
    ranked = scores[order]
    starts = np.concatenate(([True], ranked[1:] != ranked[:-1]))
    first = np.flatnonzero(starts)  # each run of tied scores: [first, last)
    last = np.concatenate((first[1:], [len(scores)]))
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = ((first + last + 1) / 2.0)[np.cumsum(starts) - 1]  # mean of ranks first+1..last
    n_pos = int(positive.sum())
    n_neg = len(scores) - n_pos
    u = float(ranks[positive].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def _pairs(layout: Any, k: int) -> tuple[Any, Any]:
    """Query ``k``'s judged units as (scores, relevant): the retrieved ones with their run
    scores, the others at minus infinity."""
    import numpy as np

    a, b = int(layout.starts[k]), int(layout.starts[k + 1])
    grades = layout.grades[a:b]
    scores = layout.scores(a, b)
    keep = grades >= 0
    grades, scores = grades[keep], scores[keep]
    all_grades, starts, sizes = layout.judged
    mine = all_grades[starts[k] : starts[k] + sizes[k]]
    missing_rel = int((mine >= 1).sum()) - int((grades >= 1).sum())
    missing_non = int((mine == 0).sum()) - int((grades == 0).sum())
    relevant = np.concatenate(
        (grades >= 1, np.ones(missing_rel, dtype=bool), np.zeros(missing_non, dtype=bool))
    )
    scores = np.concatenate((scores, np.full(missing_rel + missing_non, -np.inf)))
    return scores, relevant


def _auc_parts(layout: Any, name: str) -> tuple[list[str], list[tuple[Any, Any]]]:
    """Every scored query (in qid order) and its judged units' (scores, relevant); refused
    when the qrels judge no relevant or no non-relevant unit at all."""
    rows = sorted(range(layout.nq), key=layout.qids.__getitem__)
    parts = [_pairs(layout, k) for k in rows]
    n_non = sum(int((~rel).sum()) for _, rel in parts)
    n_rel = sum(int(rel.sum()) for _, rel in parts)
    if n_non == 0 or n_rel == 0:
        what = "non-relevant (grade 0)" if n_non == 0 else "relevant (grade 1 or more)"
        raise CmrkitError(
            f"{name} needs judged {what} units, and the qrels judge none for any of the "
            f"{layout.nq:,} queries scored (cmrkit's collections judge relevant units only): "
            "score it against judgments that hold both (e.g. `judgments aggregate`'s qrels); "
            f"{name} is undefined there, not 0.5 or 1"
        )
    return [layout.qids[k] for k in rows], parts


def auc(layout: Any, cutoffs: Any) -> list:
    """Each query's AUC (see the module's docstring)."""
    import numpy as np

    qids, parts = _auc_parts(layout, "AUC")
    lacking = [q for q, (_, rel) in zip(qids, parts, strict=True) if rel.all() or not rel.any()]
    if lacking:
        raise CmrkitError(
            f"AUC is undefined for {len(lacking):,} of the {len(qids):,} queries scored, whose "
            f"qrels judge no non-relevant or no relevant unit (e.g. {lacking[0]!r}): judge "
            "both for each, leave those queries out of the qrels, or use AUC_micro, which pools "
            "every query's pairs"
        )
    by_qid = {q: _mann_whitney(s, r) for q, (s, r) in zip(qids, parts, strict=True)}
    return [np.asarray([by_qid[q] for q in layout.qids], dtype=np.float64)]


def auc_micro(layout: Any, cutoffs: Any) -> list:
    """The run's AUC_micro, repeated for every query (see the module's docstring)."""
    import numpy as np

    _, parts = _auc_parts(layout, "AUC_micro")
    value = _mann_whitney(
        np.concatenate([s for s, _ in parts]), np.concatenate([r for _, r in parts])
    )
    return [np.full(layout.nq, value)]


def mention_recall(layout: Any, cutoffs: Any) -> list:
    """arboEL's recall at k: relevant units in the top k over min(relevant units, k), 0 for a
    query with none."""
    import numpy as np

    R = layout.R
    return [np.where(R > 0, layout.count("rel", k) / np.minimum(R, k), 0.0) for k in cutoffs]


def pooled_value(measure: Any, per_query: dict[str, dict[str, float]]) -> float:
    """The run's value of a pooled measure (every row holds it); 0 with no query."""
    return next((row[measure.name] for row in per_query.values()), 0.0)


def refuse_aggregate(measure: Any) -> None:
    """A pooled measure has no mean over a subset of queries (a group, a comparison)."""
    raise CmrkitError(
        f"{measure.name} pools every query's pairs into one value for the run: it has none "
        "per group or per comparison of queries; use AUC (the mean of each query's)"
    )


define(
    Kind("AUC", "cmrkit's own: ROC AUC of each query's judged relevant against its judged "
         "non-relevant units by the run's scores (unretrieved ones below, ties half); the mean",
         kernel=auc, layout=SCORED),
    Kind("AUC_micro", "cmrkit's own: ROC AUC of every judged (query, unit) pair at once, as "
         "classification papers report it", kernel=auc_micro, layout=SCORED, pooled=True),
    Kind("MentionRecall", "cmrkit's own: arboEL's mention recall@k, relevant units in the top "
         "k over min(relevant units, k)", (CUTOFF_REQUIRED,), kernel=mention_recall,
         layout=RANKED),
)  # fmt: skip
