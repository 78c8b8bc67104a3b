"""Answer spans of a reader scored with SQuAD's exact match and token F1.

A span run holds JSON lines ``{"qid", "docno", "start", "end", "score"}`` (character offsets in
the unit's text, end exclusive) or ``{"qid", "docno", "text", "score"}``. A prediction is scored
against the mentions of the query's cluster inside its unit when the qrels call that unit
relevant (the best of them, as SQuAD takes the best gold answer), else 0. Per query: the
top-scoring prediction (``EM@1``, ``F1@1``) and the best of the top k (``EM@k``, ``F1@k``);
averaged over queries like `cmrkit eval`.
"""

from __future__ import annotations

import math
import os
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.ranking import Result
from cmrkit.evaluation.units import AnnotatedUnits
from cmrkit.fileio import iter_jsonl

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD 2.0's token F1 (1 when both normalise to nothing, 0 when only one does)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(ref)
    return 2 * p * r / (p + r)


@dataclass(frozen=True)
class SpanMeasure:
    """``EM@k`` or ``F1@k``: the best exact match / token F1 among a query's top k answers."""

    kind: str  # "EM" or "F1"
    cutoff: int

    @property
    def name(self) -> str:
        return f"{self.kind}@{self.cutoff}"

    trec_name = name
    summed = False
    integer = False

    def format(self, value: float) -> str:
        return f"{value:.4f}"

    def __str__(self) -> str:
        return self.name


def span_measures(cutoffs: Sequence[int]) -> list[SpanMeasure]:
    from cmrkit.evaluation.measures import MAX_CUTOFF

    ks = sorted(set(cutoffs)) or [1]
    if not 1 <= ks[0] <= ks[-1] <= MAX_CUTOFF:
        bad = ks[0] if ks[0] < 1 else ks[-1]
        raise CmrkitError(f"-k must be an integer from 1 to {MAX_CUTOFF:,}, got {bad}")
    return [SpanMeasure(kind, k) for k in ks for kind in ("EM", "F1")]


@dataclass(frozen=True)
class Answer:
    docno: str
    text: str | None  # None: a unit cmrkit did not read (a distractor), never relevant
    score: float
    line: int


@dataclass
class SpanRun:
    path: str
    answers: dict[str, list[Answer]] = field(default_factory=dict)  # best first


def read_span_run(path: str | os.PathLike, units: AnnotatedUnits) -> SpanRun:
    """Read a span run; offsets are checked against the annotated units' text."""
    run = SpanRun(str(path))
    scored: bool | None = None
    seen: dict[tuple, int] = {}
    for n, obj in iter_jsonl(path, what="an answer object per line"):
        where = f"line {n}"
        for name in ("qid", "docno"):
            if not isinstance(obj.get(name), (str, int)) or isinstance(obj.get(name), bool):
                raise CmrkitError(f"missing or non-string field {name!r}", path=path, where=where)
        qid, docno = str(obj["qid"]), str(obj["docno"])
        has_score = "score" in obj
        if scored is None:
            scored = has_score
        elif scored != has_score:
            raise CmrkitError(
                "some answers carry a 'score' and some do not; give every answer a score, or "
                "none (file order then ranks them)",
                path=path,
                where=where,
            )
        score = 0.0
        if has_score:
            value = obj["score"]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CmrkitError("'score' must be a number", path=path, where=where)
            score = float(value)
            if not math.isfinite(score):
                raise CmrkitError("'score' must be finite", path=path, where=where)
        contents = units.contents.get(docno)
        if "text" in obj:
            if not isinstance(obj["text"], str):
                raise CmrkitError("'text' must be a string", path=path, where=where)
            text: str | None = obj["text"]
        elif "start" in obj and "end" in obj:
            start, end = obj["start"], obj["end"]
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
                raise CmrkitError("'start' and 'end' must be integers", path=path, where=where)
            if contents is None:
                text = None
            elif not 0 <= start <= end <= len(contents):
                raise CmrkitError(
                    f"span [{start}, {end}) lies outside unit {docno} ({len(contents)} "
                    "characters); offsets count characters of the unit's contents, end exclusive",
                    path=path,
                    where=where,
                )
            else:
                text = contents[start:end]
        else:
            raise CmrkitError(
                "an answer needs 'text', or 'start' and 'end' (characters, end exclusive)",
                path=path,
                where=where,
            )
        key = (qid, docno, obj.get("start"), obj.get("end"), text)
        if key in seen:
            raise CmrkitError(
                f"the same answer as on line {seen[key]} (query {qid}, unit {docno}); give "
                "each answer once",
                path=path,
                where=where,
            )
        seen[key] = n
        run.answers.setdefault(qid, []).append(Answer(docno, text, score, n))
    if not run.answers:
        raise CmrkitError("no answers in the span run", path=path)
    _check_units(run, units, path)
    if scored:
        for answers in run.answers.values():
            answers.sort(key=lambda a: -a.score)  # stable: file order breaks ties
    return run


def _check_units(run: SpanRun, units: AnnotatedUnits, path) -> None:
    """Every answer's docno is a unit of the collection (a typo, or spans of another
    collection, would score 0 silently)."""
    docnos = {a.docno for answers in run.answers.values() for a in answers}
    missing = units.no_units(docnos)
    if missing:
        first = min(
            (a for answers in run.answers.values() for a in answers if a.docno in missing),
            key=lambda a: a.line,
        )
        raise CmrkitError(
            f"unit {first.docno!r} is no unit of the collection ({len(missing)} such docnos); "
            "are the spans from another collection? name it with --collection",
            path=path,
            where=f"line {first.line}",
        )


def evaluate_spans(
    run: SpanRun,
    qrels: Mapping[str, Mapping[str, int]],
    units: AnnotatedUnits,
    measures: Sequence[SpanMeasure],
    *,
    all_queries: bool = False,
) -> Result:
    """Per-query and mean EM/F1 of the answers against the qrels' relevant units' mentions."""
    mention_of = units.mention_of_qid()
    cluster_of = {m.mention_id: m.cluster for ms in units.mentions.values() for m in ms}
    for qid, answers in run.answers.items():
        if qid not in mention_of:
            raise CmrkitError(
                f"query {qid!r} is no annotated mention of the collection; span runs answer "
                "the collection's queries",
                path=run.path,
                where=f"line {answers[0].line}",
            )
    scored_queries = [q for q in qrels if any(rel > 0 for rel in qrels[q].values())]
    missing_from_run = [q for q in scored_queries if q not in run.answers]
    missing_from_qrels = sorted(q for q in run.answers if q not in qrels)
    queries = scored_queries if all_queries else [q for q in scored_queries if q in run.answers]
    cutoffs = sorted({m.cutoff for m in measures})
    per_query: dict[str, dict[str, float]] = {}
    for qid in sorted(queries):
        mention = mention_of.get(qid)
        cluster = cluster_of.get(mention) if mention is not None else None
        relevant = qrels[qid]
        em: list[float] = []
        f1: list[float] = []
        for answer in run.answers.get(qid, [])[: cutoffs[-1]]:
            golds = []
            if answer.text is not None and relevant.get(answer.docno, 0) > 0:
                contents = units.contents[answer.docno]
                golds = [
                    contents[m.start : m.end]
                    for m in units.mentions.get(answer.docno, [])
                    if m.cluster == cluster and m.mention_id != mention
                ]
            em.append(max((exact_match(answer.text or "", g) for g in golds), default=0.0))
            f1.append(max((token_f1(answer.text or "", g) for g in golds), default=0.0))
        row = {}
        for m in measures:
            values = em if m.kind == "EM" else f1
            row[m.name] = max(values[: m.cutoff], default=0.0)
        per_query[qid] = row
    aggregate = {
        m.name: math.fsum(r[m.name] for r in per_query.values()) / len(per_query)
        if per_query
        else 0.0
        for m in measures
    }
    return Result(
        list(measures),  # type: ignore[arg-type]
        per_query,
        aggregate,
        missing_from_run,
        missing_from_qrels,
        all_queries=all_queries,
    )
