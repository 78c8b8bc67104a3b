"""People's judgments: read assessors' answers, aggregate them to qrels.

Inputs are the MTurk batch results CSV of a batch made by ``cmrkit pool export --format mturk``
(columns ``HITId``, ``WorkerId``, ``AssignmentStatus``, ``Input.p{i}_pair_id`` (or, from older
batches, ``Input.p{i}_query_id`` and ``Input.p{i}_doc_id``) and ``Answer.p{i}_label``; a radio
answer flattened into ``Answer.p{i}_label.{v}`` true/false columns is read too), the simple CSV
``pair_id,worker_id,label`` of the HTML page, and the simple CSV
``query_id,doc_id,worker_id,label``. Blind pair ids are mapped back to pairs with the key that
``pool export`` wrote (:mod:`cmrkit.assess.key`). Cells written spreadsheet-safe with a leading
apostrophe (:mod:`cmrkit.escaping`) are read back without it. Labels are Likert 1..5 (very
unlikely .. very likely); 4-5 count as relevant, 1-3 as not relevant.

A pair's final label is the majority when at least ``min_agree`` assessors agree, or when at
least ``min_unanimous`` agree and none disagrees; a tie or a weaker majority is ``-1`` (unknown).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cmrkit.errors import CmrkitError
from cmrkit.escaping import csv_writer
from cmrkit.fileio import iter_lines, read_csv_rows
from cmrkit.judgments.agreement import agreement_rows, fleiss_kappa
from cmrkit.judgments.pooled import Pooled
from cmrkit.judgments.scale import LABELS, LABELS_TEXT, MAX_ASSESSORS, binarize, majority
from cmrkit.trec import Qrels, natural_key, read_qrels

SIMPLE_COLUMNS = ("query_id", "doc_id", "worker_id", "label")
BLIND_COLUMNS = ("pair_id", "worker_id", "label")
MTURK_COLUMNS = ("HITId", "WorkerId", "AssignmentStatus")
_TRUE = {"true", "1", "on", "yes", "y"}


class KeyEntry(Protocol):
    """What an answer key says of a blind pair id (a :class:`cmrkit.assess.key.KeyEntry`, read
    by the caller: ``assess`` stands above the judgments)."""

    @property
    def qid(self) -> str: ...

    @property
    def docno(self) -> str: ...


@dataclass(frozen=True)
class Judgment:
    """One assessor's label for one query/candidate pair, with where it was read."""

    qid: str
    docno: str
    worker: str
    label: int
    path: str
    line: int


def _label(text: str, path: object, line: int, column: str) -> int:
    # ASCII digits only: int() also reads other scripts' digits ("\u0665" is 5)
    value = int(text.strip()) if text.strip().isascii() and text.strip().isdigit() else 0
    if value not in LABELS:
        raise CmrkitError(
            f"label {text.strip()!r} in column {column} is not one of {LABELS_TEXT} in ASCII "
            "digits",
            path=path,
            where=f"line {line}",
        )
    return value


def _mturk_answer(row: dict[str, str], i: int, columns: list[str], path: object, line: int) -> int:
    name = f"Answer.p{i}_label"
    if row.get(name, "").strip():
        return _label(row[name], path, line, name)
    chosen = []
    for c in columns:
        m = re.fullmatch(re.escape(name) + r"\.([0-9])(?:\.on)?", c)
        if m and row.get(c, "").strip().lower() in _TRUE:
            chosen.append(int(m[1]))
    if len(chosen) != 1:
        what = "no answer" if not chosen else f"{len(chosen)} answers"
        raise CmrkitError(
            f"{what} for pair {i} ({name}); every shown pair needs one label 1..5",
            path=path,
            where=f"line {line}",
        )
    return _label(str(chosen[0]), path, line, name)


class _Unblind:
    """Maps blind pair ids to (qid, docno) with the key, naming the file and line of an id the
    key does not hold."""

    def __init__(self, key: Mapping[str, KeyEntry] | None, path: object):
        self.key, self.path = key, path

    def __call__(self, pid: str, line: int) -> tuple[str, str]:
        if self.key is None:
            raise CmrkitError(
                f"the judgments name blind pair ids (e.g. {pid}); pass --key with the key file "
                "that `pool export` wrote beside the tasks (e.g. pools/sample.key.tsv)",
                path=self.path,
                where=f"line {line}",
            )
        entry = self.key.get(pid)
        if entry is None:
            raise CmrkitError(
                f"pair id {pid} is in none of the --key files; give the key of the export "
                "these answers are for",
                path=self.path,
                where=f"line {line}",
            )
        return entry.qid, entry.docno


def read_judgments(
    path: str | os.PathLike,
    counts: dict[str, int] | None = None,
    key: Mapping[str, KeyEntry] | None = None,
) -> list[Judgment]:
    """Judgments of an MTurk batch results CSV or a simple CSV (told apart by their header).
    Blind pair ids are mapped back with ``key``. Rejected assignments are skipped (counted in
    ``counts``)."""
    counts = counts if counts is not None else {}
    header, rows = read_csv_rows(
        path, empty="empty judgments file; expected a header line, then judgments", what="judgments"
    )
    out: list[Judgment] = []
    p = str(path)
    unblind = _Unblind(key, path)
    simple = all(c in header for c in SIMPLE_COLUMNS)
    if simple or all(c in header for c in BLIND_COLUMNS):
        for line, row in rows:
            worker = row["worker_id"].strip()
            if simple:
                qid, docno = row["query_id"].strip(), row["doc_id"].strip()
                named = (("query_id", qid), ("doc_id", docno), ("worker_id", worker))
            else:
                pid = row["pair_id"].strip()
                named = (("pair_id", pid), ("worker_id", worker))
            for col, value in named:
                if not value:
                    raise CmrkitError(f"empty {col}", path=path, where=f"line {line}")
            if not simple:
                qid, docno = unblind(pid, line)
            out.append(
                Judgment(qid, docno, worker, _label(row["label"], path, line, "label"), p, line)
            )
        return out
    if any(c.startswith(("Answer.", "Input.")) for c in header) or "WorkerId" in header:
        missing = [c for c in MTURK_COLUMNS if c not in header]
        slots = sorted(
            int(m[1])
            for c in header
            if (m := re.fullmatch(r"Input\.p([0-9]+)_(?:pair|query)_id", c))
        )
        if not slots:
            missing.append("Input.p1_pair_id")
        if missing:
            raise CmrkitError(
                f"MTurk results lack column(s) {', '.join(missing)}; export the "
                "batch results from a batch made by `cmrkit pool export --format "
                "mturk`",
                path=path,
                where="line 1",
            )
        for line, row in rows:
            if row["AssignmentStatus"].strip().lower() == "rejected":
                counts["rejected_assignments"] = counts.get("rejected_assignments", 0) + 1
                continue
            worker = row["WorkerId"].strip()
            if not worker:
                raise CmrkitError("empty WorkerId", path=path, where=f"line {line}")
            for i in slots:
                pid = row.get(f"Input.p{i}_pair_id", "").strip()
                if pid:
                    qid, docno = unblind(pid, line)
                else:
                    qid = row.get(f"Input.p{i}_query_id", "").strip()
                    if not qid:
                        continue
                    docno = row.get(f"Input.p{i}_doc_id", "").strip()
                    if not docno:
                        raise CmrkitError(
                            f"pair {i} has a query id but no Input.p{i}_doc_id",
                            path=path,
                            where=f"line {line}",
                        )
                out.append(
                    Judgment(qid, docno, worker, _mturk_answer(row, i, header, path, line), p, line)
                )
        return out
    raise CmrkitError(
        f"unknown judgments layout: the header needs the columns {','.join(BLIND_COLUMNS)} or "
        f"{','.join(SIMPLE_COLUMNS)} (simple CSV) or {', '.join(MTURK_COLUMNS)} with "
        "Input./Answer. columns (MTurk results)",
        path=path,
        where="line 1",
    )


def read_feedback(
    paths: Sequence[str | os.PathLike],
    gold: Mapping[tuple[str, str], int] | None = None,
    key: Mapping[str, KeyEntry] | None = None,
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], str]]:
    """One label per judged pair, for strategies that choose as they go: from judgment CSVs
    (simple or MTurk, blind pair ids mapped back with ``key``; the majority of the binarized
    labels, -1 for a tie) or from qrels (a file whose first line has no comma; rel > 0
    relevant, 0 not, < 0 unknown). Pairs in ``gold`` (known answers shown for quality control)
    are skipped. Also says where each pair was first read."""
    votes: dict[tuple[str, str], list[int]] = {}
    where: dict[tuple[str, str], str] = {}
    labels: dict[tuple[str, str], int] = {}
    gold = gold or {}
    for path in paths:
        first = next((line for _, line in iter_lines(path) if line.strip()), "")
        if "," in first:
            for j in read_judgments(path, None, key):
                pair = (j.qid, j.docno)
                if pair in gold:
                    continue
                votes.setdefault(pair, []).append(binarize(j.label))
                where.setdefault(pair, f"{j.path}: line {j.line}")
        else:
            for qid, docs in read_qrels(path).items():
                for docno, rel in docs.items():
                    pair = (qid, docno)
                    if pair not in gold:
                        labels[pair] = 1 if rel > 0 else (0 if rel == 0 else -1)
                        where.setdefault(pair, f"{path}: query {qid} document {docno}")
    for pair, vs in votes.items():
        labels[pair] = majority(sum(vs), len(vs) - sum(vs))
    return labels, where


# --- agreement -----------------------------------------------------------------------------


def decide(n_rel: int, n_non: int, min_agree: int, min_unanimous: int) -> int:
    """Final label of a pair from its binary votes: 1, 0, or -1 (unknown)."""
    if n_rel == n_non:
        return -1
    major, minor = max(n_rel, n_non), min(n_rel, n_non)
    if major >= min_agree or (minor == 0 and major >= min_unanimous):
        return 1 if n_rel > n_non else 0
    return -1


def needed_more(
    n_rel: int, n_non: int, min_agree: int, min_unanimous: int, max_assessors: int
) -> int | None:
    """Fewest further assessments that could decide an unknown pair, or None if none can."""
    for k in range(1, max_assessors - (n_rel + n_non) + 1):
        if (
            decide(n_rel + k, n_non, min_agree, min_unanimous) >= 0
            or decide(n_rel, n_non + k, min_agree, min_unanimous) >= 0
        ):
            return k
    return None


@dataclass
class Aggregate:
    """Final qrels, hard queries set aside, pairs needing more assessments, and the report."""

    qrels: dict[str, dict[str, int]]
    hard: dict[str, dict[str, int]]
    needs_more: dict[tuple[str, str], int]
    report: dict[str, Any] = field(default_factory=dict)


def undecidable(
    most: int,
    min_agree: int,
    min_unanimous: int,
    *,
    dropped: int = 0,
    can_get: int | None = None,
    what: str = "the judgments give",
) -> str | None:
    """Why no pair can get a label from its votes when each has at most ``most`` assessors
    (``can_get``: the most it can still get, from later rounds), naming the option no pair can
    meet and the setting that fits; None when a label can be reached."""
    needed = min(min_agree, min_unanimous)
    if most == 0 or max(most, can_get or 0) >= needed:
        return None
    if min_unanimous <= min_agree:
        rule = f"--min-unanimous {min_unanimous} assessors, all agreeing (--min-agree {min_agree})"
    else:
        rule = f"--min-agree {min_agree} agreeing assessors (--min-unanimous {min_unanimous})"
    after = " after dropping the workers below --min-worker-accuracy" if dropped else ""
    later = f", and at most {can_get} with more rounds (--max-assessors)" if can_get else ""
    fits = (
        "for one assessor per pair pass --min-unanimous 1 (each pair takes its assessor's label)"
        if most == 1
        else f"pass --min-unanimous {most} for the pairs whose {most} assessors all agree"
    )
    return (
        f"no pair can get a label: {what} each pair at most {most} assessor(s){after}{later}, "
        f"and a label needs {rule}; {fits}, or gather more assessors per pair"
    )


def nothing_kept(result: Aggregate, min_relevant: int, hard_threshold: float | None) -> str | None:
    """The warning for an aggregation that keeps no query, naming the rule that set each one
    aside (None when a query is kept)."""
    if result.qrels:
        return None
    rep = result.report
    dropped, hard = len(rep["dropped_queries"]), len(rep["hard_queries"])
    parts = []
    votes = rep.get("assessors_per_pair") or {}
    if votes.get("most") and votes["most"] < votes["label_needs"]:
        parts.append(
            f"no pair has enough assessors for a label yet (at most {votes['most']}; "
            f"{votes['rule']}): more assessments can still decide them"
        )
    if dropped:
        parts.append(
            f"{dropped} dropped by --min-relevant {min_relevant} (fewer relevant; the judgments "
            "known before pooling count only when given, e.g. `judgments aggregate --qrels`)"
        )
    if hard:
        parts.append(
            f"{hard} set aside as hard by --hard-threshold {hard_threshold} (too much "
            "disagreement; they are in the hard qrels)"
        )
    why = "; ".join(parts) or "no query of the pool has a judgment"
    return f"no query kept, the qrels written are empty: {why}"


def aggregate(
    judgments: Iterable[Judgment],
    pool: Pooled,
    *,
    known: Qrels | None = None,
    gold: Mapping[tuple[str, str], int] | None = None,
    min_agree: int = 4,
    min_unanimous: int = 3,
    max_assessors: int = 5,
    min_worker_accuracy: float = 0.0,
    hard_threshold: float | None = 0.5,
    min_relevant: int = 5,
    counts: Mapping[str, int] | None = None,
    can_get: int | None = None,
) -> Aggregate:
    """Aggregate judgments of a pool's pairs into qrels (1, 0, -1) with the protocol's rules.

    ``known`` relevance (from the annotations) is merged in for the pool's queries; ``gold``
    pairs (known answers shown to assessors) score the workers, and workers whose accuracy is
    below ``min_worker_accuracy`` are dropped. Queries whose share of pairs with disagreement
    exceeds ``hard_threshold`` go to ``hard``; queries with fewer than ``min_relevant`` relevant
    are dropped. Unsampled and unjudged pool pairs are ``-1``.

    Settings that no pair can meet are refused before anything is decided: when every pair has
    fewer assessors than a label needs (``min_agree`` agreeing, or ``min_unanimous`` with no
    dissent), unless later rounds can give a pair ``can_get`` assessors, enough for one (the
    caller writes the pairs that need more, or a server hands each pair to that many people).
    """
    _check_rules(min_agree, min_unanimous, max_assessors, min_worker_accuracy, hard_threshold)
    if min_relevant < 0:
        raise CmrkitError(f"--min-relevant must be 0 or more, not {min_relevant}")
    gold = gold or {}
    index = pool.pair_index()
    judgments = list(judgments)
    workers = _score_workers(judgments, gold, index, min_worker_accuracy)
    votes = _Votes.count(judgments, gold, index, workers)
    most = max((len(v) for v in votes.by_pair.values()), default=0)
    why = undecidable(most, min_agree, min_unanimous, dropped=votes.dropped, can_get=can_get)
    if why is not None:
        raise CmrkitError(why)
    labels, needs, items = _label_pairs(
        pool, votes.by_pair, min_agree, min_unanimous, max_assessors
    )
    per_query_agreement = {q: _agreement(items.get(q, [])) for q in pool.queries}
    overall = _agreement([r for q in pool.queries for r in items.get(q, [])])
    merged, conflicts = _merge_known(pool, labels, known)
    split = _split_queries(merged, per_query_agreement, hard_threshold, min_relevant)
    set_aside = set(split.hard_queries)  # too few relevant so far: more votes may add some
    for key in list(needs):
        if key[0] in set_aside:
            del needs[key]
    qrels = split.qrels
    report = {
        "judgments": len(judgments),
        "rejected_assignments": (counts or {}).get("rejected_assignments", 0),
        "ignored_not_in_pool": len(votes.ignored),
        "ignored_examples": [f"{j.path}:{j.line}: {j.qid} {j.docno}" for j in votes.ignored[:5]],
        "duplicate_votes": votes.duplicates,
        "dropped_worker_judgments": votes.dropped,
        "known_conflicts": conflicts,
        "workers": dict(sorted(workers.items())),
        "agreement": overall,
        "queries": split.per_query,
        "hard_queries": split.hard_queries,
        "dropped_queries": split.dropped_queries,
        "needs_more": len(needs),
        "assessors_per_pair": {
            "most": most,
            "label_needs": min(min_agree, min_unanimous),
            "rule": f"--min-agree {min_agree}, --min-unanimous {min_unanimous}",
        },
        **_judge_report(pool, votes.by_pair),
        "labels": {
            "relevant": sum(1 for d in qrels.values() for r in d.values() if r > 0),
            "non_relevant": sum(1 for d in qrels.values() for r in d.values() if r == 0),
            "unknown": sum(1 for d in qrels.values() for r in d.values() if r < 0),
        },
    }
    return Aggregate(qrels, split.hard, needs, report)


def _judge_report(pool: Pooled, votes: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
    """Hybrid pools: the judge (as the pool records it) and how many pairs took its label."""
    judge = pool.header.get("judge")
    if not isinstance(judge, dict):
        return {}
    taken = sum(1 for p in pool.pairs if p.labelled_by == "judge" and (p.qid, p.docno) not in votes)
    return {"judge": judge, "judge_labelled": taken}


def _check_rules(
    min_agree: int,
    min_unanimous: int,
    max_assessors: int,
    min_worker_accuracy: float,
    hard_threshold: float | None,
) -> None:
    if min_agree < 1 or min_unanimous < 1:
        raise CmrkitError("--min-agree and --min-unanimous must be at least 1")
    if not 1 <= max_assessors <= MAX_ASSESSORS:
        raise CmrkitError(f"--max-assessors must lie in 1..{MAX_ASSESSORS}, not {max_assessors}")
    if not 0.0 <= min_worker_accuracy <= 1.0:  # also refuses nan
        raise CmrkitError(f"--min-worker-accuracy must lie in 0..1, not {min_worker_accuracy}")
    if hard_threshold is not None and not 0.0 <= hard_threshold <= 1.0:
        raise CmrkitError(f"--hard-threshold must lie in 0..1, not {hard_threshold}")


def _score_workers(
    judgments: list[Judgment],
    gold: Mapping[tuple[str, str], int],
    index: Mapping[tuple[str, str], Any],
    min_worker_accuracy: float,
) -> dict[str, dict[str, Any]]:
    """Each worker's judgments, accuracy on the gold pairs outside the pool, and whether that
    accuracy drops them."""
    gold_seen: dict[str, list[int]] = {}
    for j in judgments:
        if (j.qid, j.docno) in gold and (j.qid, j.docno) not in index:
            gold_seen.setdefault(j.worker, []).append(
                int(binarize(j.label) == gold[(j.qid, j.docno)])
            )
    workers: dict[str, dict[str, Any]] = {}
    for j in judgments:
        w = workers.setdefault(
            j.worker, {"judgments": 0, "gold": 0, "accuracy": None, "dropped": False}
        )
        w["judgments"] += 1
    for worker, hits in gold_seen.items():
        acc = sum(hits) / len(hits)
        workers[worker].update(gold=len(hits), accuracy=acc, dropped=acc < min_worker_accuracy)
    return workers


@dataclass
class _Votes:
    """The Likert votes on each pool pair (one per worker), and what was left out."""

    by_pair: dict[tuple[str, str], dict[str, int]]
    ignored: list[Judgment]
    duplicates: int
    dropped: int

    @classmethod
    def count(
        cls,
        judgments: list[Judgment],
        gold: Mapping[tuple[str, str], int],
        index: Mapping[tuple[str, str], Any],
        workers: Mapping[str, Mapping[str, Any]],
    ) -> _Votes:
        votes = cls({}, [], 0, 0)
        for j in judgments:
            key = (j.qid, j.docno)
            if key not in index:
                if key not in gold:
                    votes.ignored.append(j)
                continue
            if workers[j.worker]["dropped"]:
                votes.dropped += 1
                continue
            pair_votes = votes.by_pair.setdefault(key, {})
            if j.worker in pair_votes:
                votes.duplicates += 1
                continue
            pair_votes[j.worker] = j.label
        if judgments and len(votes.ignored) == len(judgments):
            j = judgments[0]
            raise CmrkitError(
                f"none of the {len(judgments)} judgments is for a pair of the pool (e.g. {j.qid} "
                f"{j.docno}); are they for another pool?",
                path=j.path,
                where=f"line {j.line}",
            )
        return votes


_AgreementRows = list[tuple[list[int], list[int]]]


def _label_pairs(
    pool: Pooled,
    votes: Mapping[tuple[str, str], Mapping[str, int]],
    min_agree: int,
    min_unanimous: int,
    max_assessors: int,
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int], dict[str, _AgreementRows]]:
    """Each pool pair's label, the further assessments an undecided pair needs, and per query
    the binary and Likert vote counts of the pairs with two votes or more."""
    labels: dict[tuple[str, str], int] = {}
    needs: dict[tuple[str, str], int] = {}
    items: dict[str, _AgreementRows] = {}
    for p in pool.pairs:
        key = (p.qid, p.docno)
        likert = list(votes.get(key, {}).values())
        n_rel = sum(binarize(v) for v in likert)
        n_non = len(likert) - n_rel
        labels[key] = decide(n_rel, n_non, min_agree, min_unanimous)
        if not likert and p.labelled_by == "judge" and p.judge_label is not None:
            labels[key] = binarize(p.judge_label)  # hybrid judging: the judge's, people skip it
        if labels[key] < 0 and (p.sampled or likert):
            k = needed_more(n_rel, n_non, min_agree, min_unanimous, max_assessors)
            if k is not None:
                needs[key] = k
        if len(likert) >= 2:
            items.setdefault(p.qid, []).append(agreement_rows(likert))
    return labels, needs, items


def _agreement(rows: _AgreementRows) -> dict[str, Any]:
    unanimous = sum(1 for b, _ in rows if min(b) == 0)
    return {
        "pairs": len(rows),
        "unanimous": unanimous / len(rows) if rows else None,
        "kappa": fleiss_kappa([b for b, _ in rows]),
        "kappa_likert": fleiss_kappa([lk for _, lk in rows]),
    }


def _merge_known(
    pool: Pooled, labels: Mapping[tuple[str, str], int], known: Qrels | None
) -> tuple[dict[str, dict[str, int]], int]:
    """The labels by query with the known relevance of the pool's queries over them, and how
    many known labels contradict a decided one."""
    merged: dict[str, dict[str, int]] = {q: {} for q in pool.queries}
    for (qid, docno), label in labels.items():
        merged.setdefault(qid, {})[docno] = label
    conflicts = 0
    for qid, docs in (known or {}).items():
        if qid not in merged:
            continue
        for docno, rel in docs.items():
            if docno in merged[qid] and merged[qid][docno] >= 0 and merged[qid][docno] != rel:
                conflicts += 1
            merged[qid][docno] = rel
    return merged, conflicts


@dataclass
class _QuerySplit:
    qrels: dict[str, dict[str, int]]
    hard: dict[str, dict[str, int]]
    per_query: dict[str, dict[str, Any]]
    hard_queries: list[str]
    dropped_queries: list[str]


def _split_queries(
    merged: Mapping[str, Mapping[str, int]],
    agreement: Mapping[str, dict[str, Any]],
    hard_threshold: float | None,
    min_relevant: int,
) -> _QuerySplit:
    """Each query kept, set aside as hard (too much disagreement) or dropped (too few
    relevant), in natural order, with its figures for the report."""
    out = _QuerySplit({}, {}, {}, [], [])
    for qid in sorted(merged, key=natural_key):
        docs = dict(sorted(merged[qid].items()))
        relevant = sum(1 for r in docs.values() if r > 0)
        unknown = sum(1 for r in docs.values() if r < 0)
        a = agreement.get(qid, _agreement([]))
        disagreement = 1.0 - a["unanimous"] if a["unanimous"] is not None else 0.0
        if hard_threshold is not None and a["pairs"] and disagreement > hard_threshold:
            status = "hard"
            out.hard_queries.append(qid)
            out.hard[qid] = docs
        elif relevant < min_relevant:
            status = "too few relevant"
            out.dropped_queries.append(qid)
        else:
            status = "kept"
            out.qrels[qid] = docs
        out.per_query[qid] = {
            "status": status,
            "judged": len(docs),
            "relevant": relevant,
            "unknown": unknown,
            "incompleteness": unknown / len(docs) if docs else 0.0,
            "disagreement": disagreement,
            **{k: a[k] for k in ("pairs", "unanimous", "kappa")},
        }
    return out


def write_simple_csv(rows: Iterable[tuple[str, str, str, int]], path: str | os.PathLike) -> None:
    """Write judgments as the simple CSV ``query_id,doc_id,worker_id,label``."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv_writer(f)
        w.writerow(SIMPLE_COLUMNS)
        w.writerows(rows)
