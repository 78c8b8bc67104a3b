"""cmrkit's own measures that trec_eval lacks, the papers of issue 40 report, and the ranking
engine (``evaluation/ranking.py``) computes through :func:`own_values`:

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

The queries AUC cannot be defined for are refused in one line, never scored 0.5 or 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cmrkit.errors import CmrkitError

AUC_KINDS = frozenset({"AUC", "AUC_micro"})
POOLED = frozenset({"AUC_micro"})  # one value for the whole run
OWN_KINDS = AUC_KINDS | {"MentionRecall"}


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


def _pairs(ranking: Any, judged: tuple, k: int) -> tuple[Any, Any]:
    """Query ``k``'s judged units as (scores, relevant): the retrieved ones with their run
    scores, the others at minus infinity."""
    import numpy as np

    a, b = int(ranking.starts[k]), int(ranking.starts[k + 1])
    grades = ranking.grades[a:b]
    scores = np.asarray(ranking.scores, dtype=np.float64)[ranking.order[a:b]]
    keep = grades >= 0
    grades, scores = grades[keep], scores[keep]
    all_grades, starts, sizes = judged
    mine = all_grades[starts[k] : starts[k] + sizes[k]]
    missing_rel = int((mine >= 1).sum()) - int((grades >= 1).sum())
    missing_non = int((mine == 0).sum()) - int((grades == 0).sum())
    relevant = np.concatenate(
        (grades >= 1, np.ones(missing_rel, dtype=bool), np.zeros(missing_non, dtype=bool))
    )
    scores = np.concatenate((scores, np.full(missing_rel + missing_non, -np.inf)))
    return scores, relevant


def _auc(ranking: Any, judged: tuple, qids: Sequence[str], rows: dict[str, int | None],
         qrels: Any, pooled: bool) -> dict[str, float]:  # fmt: skip
    """Per scored query, its AUC (or, ``pooled``, the run's AUC_micro repeated)."""
    import numpy as np

    name = "AUC_micro" if pooled else "AUC"
    parts = []
    for qid in qids:
        k = rows[qid]
        if k is not None:
            parts.append(_pairs(ranking, judged, k))
        else:  # in the qrels, not in the run: nothing retrieved
            grades = np.asarray([g for g in qrels[qid].values() if g >= 0], dtype=np.int64)
            parts.append((np.full(len(grades), -np.inf), grades >= 1))
    n_non = sum(int((~rel).sum()) for _, rel in parts)
    n_rel = sum(int(rel.sum()) for _, rel in parts)
    if n_non == 0 or n_rel == 0:
        what = "non-relevant (grade 0)" if n_non == 0 else "relevant (grade 1 or more)"
        raise CmrkitError(
            f"{name} needs judged {what} units, and the qrels judge none for any of the "
            f"{len(qids):,} queries scored (cmrkit's collections judge relevant units only): "
            "score it against judgments that hold both (e.g. `judgments aggregate`'s qrels); "
            f"{name} is undefined there, not 0.5 or 1"
        )
    if pooled:
        value = _mann_whitney(
            np.concatenate([s for s, _ in parts]), np.concatenate([r for _, r in parts])
        )
        return dict.fromkeys(qids, value)
    lacking = [q for q, (_, rel) in zip(qids, parts, strict=True) if rel.all() or not rel.any()]
    if lacking:
        raise CmrkitError(
            f"AUC is undefined for {len(lacking):,} of the {len(qids):,} queries scored, whose "
            f"qrels judge no non-relevant or no relevant unit (e.g. {lacking[0]!r}): judge "
            "both for each, leave those queries out of the qrels, or use AUC_micro, which pools "
            "every query's pairs"
        )
    return {q: _mann_whitney(s, r) for q, (s, r) in zip(qids, parts, strict=True)}


def _mention_recall(
    ranking: Any, judged: tuple, qids: Sequence[str], rows: dict[str, int | None], cutoff: int
) -> dict[str, float]:

    grades, starts, sizes = judged
    out = {}
    for qid in qids:
        k = rows[qid]
        if k is None:
            out[qid] = 0.0
            continue
        n_rel = int((grades[starts[k] : starts[k] + sizes[k]] >= 1).sum())
        a = int(ranking.starts[k])
        top = ranking.grades[a : a + min(cutoff, int(ranking.lens[k]))]
        hits = int((top >= 1).sum())
        out[qid] = hits / min(n_rel, cutoff) if n_rel else 0.0
    return out


def own_values(measures: Sequence[Any], ranking: Any, judged: tuple, ranked_qids: Sequence[str],
           scored: Sequence[str], qrels: Any) -> dict[str, dict[str, float]]:  # fmt: skip
    """Each of cmrkit's own ``measures``' value per scored query (``scored``: the queries
    averaged, ``ranked_qids`` those with a ranking, in ``ranking``'s and ``judged``'s order,
    ``judged`` as ``trec_bulk.judged_grades`` gives it)."""
    where = {q: k for k, q in enumerate(ranked_qids)}
    rows = {q: where.get(q) for q in scored}
    out = {}
    for m in measures:
        if m.kind in AUC_KINDS:
            out[m.name] = _auc(ranking, judged, scored, rows, qrels, m.kind in POOLED)
        else:
            out[m.name] = _mention_recall(ranking, judged, scored, rows, m.cutoff)
    return out


def pooled_value(measure: Any, per_query: dict[str, dict[str, float]]) -> float:
    """The run's value of a pooled measure (every row holds it); 0 with no query."""
    return next((row[measure.name] for row in per_query.values()), 0.0)


def refuse_aggregate(measure: Any) -> None:
    """A pooled measure has no mean over a subset of queries (a group, a comparison)."""
    if measure.kind in POOLED:
        raise CmrkitError(
            f"{measure.name} pools every query's pairs into one value for the run: it has none "
            "per group or per comparison of queries; use AUC (the mean of each query's)"
        )
