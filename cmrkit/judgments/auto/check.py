"""How far an automatic judge can be trusted (``cmrkit judgments check``): its labels against a
reference, either qrels (the collection's gold, or people's aggregated judgments) or people's
labels (a judgments CSV as ``judgments aggregate`` reads it).

- **Labels**: Cohen's kappa of the binary labels (Likert 4-5 relevant), Cohen's *quadratic*
  weighted kappa of the 5-point labels (people's labels only: qrels hold no 5-point scale), the
  confusion matrix (the judge's Likert label x the reference's), per-query agreement, and the
  Brier score of the judge's probabilities where it gives them.
  Against qrels, a labelled pair of a query the qrels judge but whose document they do not list
  counts as not relevant (as trec_eval scores it: gold coreference qrels list every relevant
  unit); a pair the qrels mark -1 (unknown), or of a query they do not judge, is left out.
  Against people's labels, each pair's reference is the people's majority of binary votes (a
  tie leaves it out of the binary figures) and the lower median of their Likert labels;
  judges' rows (worker ``auto:...``) are left out unless the file holds nothing else.
- **System ranking**: the *judge's qrels* are the reference qrels with every labelled pair
  overwritten by the judge's binary label; pairs the judge did not label keep the reference's
  label, so the two qrels differ exactly where the judge spoke and the comparison measures the
  judge, not the pool's depth. Runs are scored under both and compared by
  :func:`cmrkit.evaluation.agreement.qrels_agreement` (tau, tau_AP, RBO, largest swap, seeded
  bootstrap intervals over queries), over the queries the labels cover (a labelled pair's
  query the reference judges): a query the judge did not touch scores the same under both
  qrels and would pull the agreement towards 1 (a pool of every 5th query checked against the
  whole reference gave tau 1.0 where its own queries gave 0.60). ``whole_reference`` scores
  every query of the reference instead, reported as such.
- **Circularity**: per run and measure, its score and rank under both qrels and the change; its
  *excess gain* is its change minus the median change of all runs (what every run gains from a
  more lenient judge is not the run's doing). A run made with the judge's own model (its
  sidecar holds the judge's model sha256, e.g. ``run rerank`` with the reader that judged) is
  flagged whenever it gains (moves up, or an excess gain above 0); any other run when it moves
  up and its excess gain exceeds ``min_gain``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.judgments.agreement import cohen_kappa, weighted_kappa
from cmrkit.judgments.auto.labels import AUTO_PREFIX, Label
from cmrkit.judgments.scale import LABELS, binarize, majority
from cmrkit.trec import Qrels, natural_key

Pair = tuple[str, str]
MIN_GAIN = 0.01  # excess gain above which a run that moves up is flagged


@dataclass
class Reference:
    """What the judge is checked against: ``binary`` (pair -> 1/0, unknown pairs absent),
    ``likert`` (pair -> 1..5; people's labels only), ``qrels`` (for scoring runs: the qrels
    themselves, or people's majorities with ties -1), and the kind (``qrels`` or ``labels``)."""

    kind: str
    path: str
    binary: dict[Pair, int]
    likert: dict[Pair, int] | None
    qrels: Qrels
    judged_queries: set[str]
    workers: int = 0


def reference_from_qrels(qrels: Qrels, path: str | os.PathLike) -> Reference:
    """A reference of qrels (rel > 0 relevant, -1 unknown)."""
    binary = {(q, d): int(r > 0) for q, docs in qrels.items() for d, r in docs.items() if r >= 0}
    return Reference("qrels", str(path), binary, None, qrels, set(qrels))


def reference_from_judgments(judgments: Sequence[Any], path: str | os.PathLike) -> Reference:
    """A reference of people's labels (``judgments.Judgment`` records): per pair the majority
    of binary votes and the lower median Likert label; judges' rows left out unless there is
    nothing else."""
    people = [j for j in judgments if not j.worker.startswith(AUTO_PREFIX)] or list(judgments)
    votes: dict[Pair, list[int]] = {}
    for j in people:
        votes.setdefault((j.qid, j.docno), []).append(j.label)
    binary: dict[Pair, int] = {}
    likert: dict[Pair, int] = {}
    qrels: Qrels = {}
    for pair, labels in votes.items():
        relevant = sum(binarize(v) for v in labels)
        decided = majority(relevant, len(labels) - relevant)
        if decided >= 0:
            binary[pair] = decided
        likert[pair] = sorted(labels)[(len(labels) - 1) // 2]
        qrels.setdefault(pair[0], {})[pair[1]] = decided
    workers = len({j.worker for j in people})
    return Reference("labels", str(path), binary, likert, qrels, set(qrels), workers)


def ranking_scope(
    labels: Sequence[Label], reference: Qrels, whole_reference: bool = False
) -> tuple[dict[str, Any], Qrels]:
    """The queries the runs are ranked on and the reference qrels of those queries: the
    queries of the reference that a label touches, or every one with ``whole_reference``."""
    touched = {lb.qid for lb in labels}
    covered = [q for q in reference if q in touched]
    if not covered:
        lb = labels[0]
        raise CmrkitError(
            f"the labels touch none of the reference's queries (e.g. {lb.qid}): are they of the "
            "same collection and split?"
        )
    scope = {
        "queries": "whole reference" if whole_reference else "labelled queries",
        "labelled_queries": len(covered),
        "reference_queries": len(reference),
    }
    if whole_reference:
        return scope, reference
    return scope, {q: reference[q] for q in covered}


def judge_qrels(labels: Sequence[Label], reference: Qrels) -> Qrels:
    """The reference qrels with every labelled pair overwritten by the judge's binary label
    (pairs the judge did not label keep the reference's), queries in natural order."""
    merged = {q: dict(docs) for q, docs in reference.items()}
    for lb in labels:
        merged.setdefault(lb.qid, {})[lb.docno] = binarize(lb.label)
    return {q: dict(sorted(merged[q].items())) for q in sorted(merged, key=natural_key)}


@dataclass
class LabelAgreement:
    """The judge's labels against the reference's, pair by pair (see the module's docstring)."""

    pairs: int  # labelled pairs compared (binary)
    unlisted: int  # of those, pairs of a judged query the qrels do not list (not relevant)
    left_out: int  # labelled pairs with no reference (query not judged, unknown, a tie)
    reference_only: int  # pairs the reference judges that the judge did not label
    agreement: float | None  # share of pairs whose binary labels agree
    kappa: float | None
    kappa_likert: float | None  # quadratic weights; people's labels only
    likert_pairs: int
    confusion: dict[int, dict[int, int]]  # judge's label -> reference's label -> pairs
    brier: float | None  # mean (probability - reference)^2 where the judge gives one
    with_probability: int
    per_query: dict[str, dict[str, Any]] = field(default_factory=dict)
    truth: dict[Pair, int] = field(default_factory=dict)  # each compared pair's reference

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "unlisted_as_not_relevant": self.unlisted,
            "left_out": self.left_out,
            "reference_only": self.reference_only,
            "agreement": self.agreement,
            "kappa": self.kappa,
            "kappa_likert": self.kappa_likert,
            "kappa_likert_weights": "quadratic",
            "likert_pairs": self.likert_pairs,
            "confusion": {
                str(j): {str(r): n for r, n in row.items()} for j, row in self.confusion.items()
            },
            "brier": self.brier,
            "with_probability": self.with_probability,
            "per_query": self.per_query,
        }


def label_agreement(labels: Sequence[Label], reference: Reference) -> LabelAgreement:
    """Kappas, confusion matrix, Brier score and per-query agreement of ``labels`` against
    ``reference`` (see the module's docstring for which pairs count)."""
    judge: list[int] = []
    ref: list[int] = []
    per_query: dict[str, tuple[list[int], list[int]]] = {}
    judge_5: list[int] = []
    ref_5: list[int] = []
    qrels_side = reference.kind == "qrels"
    ref_columns = (0, 1) if qrels_side else LABELS
    confusion = {j: dict.fromkeys(ref_columns, 0) for j in LABELS}
    unlisted = left_out = 0
    brier: list[float] = []
    truths: dict[Pair, int] = {}
    for lb in labels:
        pair = (lb.qid, lb.docno)
        truth = reference.binary.get(pair)
        if truth is None and qrels_side and lb.qid in reference.judged_queries:
            if pair not in reference.qrels.get(lb.qid, {}):
                truth, unlisted = 0, unlisted + 1
        if reference.likert is not None and pair in reference.likert:
            judge_5.append(lb.label)
            ref_5.append(reference.likert[pair])
            confusion[lb.label][reference.likert[pair]] += 1
        if truth is None:
            left_out += 1
            continue
        mine = binarize(lb.label)
        judge.append(mine)
        ref.append(truth)
        truths[pair] = truth
        if qrels_side:
            confusion[lb.label][truth] += 1
        if lb.probability is not None:
            brier.append((lb.probability - truth) ** 2)
        q = per_query.setdefault(lb.qid, ([], []))
        q[0].append(mine)
        q[1].append(truth)
    labelled = {(lb.qid, lb.docno) for lb in labels}
    return LabelAgreement(
        pairs=len(judge),
        unlisted=unlisted,
        left_out=left_out,
        reference_only=sum(1 for p in reference.binary if p not in labelled),
        agreement=_share(judge, ref),
        kappa=cohen_kappa(judge, ref),
        kappa_likert=weighted_kappa(judge_5, ref_5) if reference.likert is not None else None,
        likert_pairs=len(judge_5),
        confusion=confusion,
        brier=sum(brier) / len(brier) if brier else None,
        with_probability=len(brier),
        per_query={
            q: {
                "pairs": len(a),
                "agreement": _share(a, b),
                "kappa": cohen_kappa(a, b),
                "judge_relevant": sum(a),
                "reference_relevant": sum(b),
            }
            for q, (a, b) in sorted(per_query.items(), key=lambda kv: natural_key(kv[0]))
        },
        truth=truths,
    )


def _share(a: Sequence[int], b: Sequence[int]) -> float | None:
    return sum(1 for x, y in zip(a, b, strict=True) if x == y) / len(a) if a else None


# --- circularity ---------------------------------------------------------------------------


SHA256 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


def judge_models(sidecar: Mapping[str, Any] | None) -> list[str]:
    """What marks a run made with the judge's model, from the labels' sidecar: the judge's
    ``identity`` and every sha256 in its ``parameters.model`` (the reader judge records its
    reader as ``run rerank`` does: ``{"path", "sha256", "select"}``)."""
    judge = (sidecar or {}).get("judge")
    if not isinstance(judge, Mapping):
        return []
    found = [judge["identity"]] if isinstance(judge.get("identity"), str) else []
    params = judge.get("parameters")
    model = params.get("model") if isinstance(params, Mapping) else None
    for value in _texts(model):
        found.extend(SHA256.findall(value.lower()))
    return list(dict.fromkeys(found))


def _texts(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (mappings' values and lists, depth first)."""
    stack: list[Any] = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            yield value


def same_model(sidecar: Mapping[str, Any] | None, models: Sequence[str]) -> bool:
    """Whether a run's sidecar records the judge's model: one of its text values equals one of
    ``models`` (:func:`judge_models`), or a sha256 one of them holds."""
    if not sidecar or not models:
        return False
    wanted = {m.lower() for m in models}
    for m in models:
        wanted.update(SHA256.findall(m.lower()))
    return any(value.lower() in wanted for value in _texts(sidecar))


def _ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """1 + the number of runs scoring strictly higher (ties share the better rank)."""
    values = list(scores.values())
    return {name: 1 + sum(1 for v in values if v > s) for name, s in scores.items()}


def circularity(
    reference: Mapping[str, float],
    judged: Mapping[str, float],
    same: Sequence[str] = (),
    min_gain: float = MIN_GAIN,
) -> list[dict[str, Any]]:
    """Per run (in the order of ``reference``): its score and rank under the reference qrels
    and the judge's, the change, the excess gain (change minus the runs' median change), and
    whether it is flagged (see the module's docstring); ``same`` names the runs made with the
    judge's own model."""
    if not math.isfinite(min_gain) or min_gain < 0:
        raise CmrkitError(f"--flag-gain {min_gain} must be a number 0 or more")
    ref_rank, judge_rank = _ranks(reference), _ranks(judged)
    changes = sorted(judged[n] - reference[n] for n in reference)
    mid = len(changes) // 2
    median = changes[mid] if len(changes) % 2 else (changes[mid - 1] + changes[mid]) / 2
    rows = []
    for name in reference:
        change = judged[name] - reference[name]
        excess = change - median
        up = ref_rank[name] - judge_rank[name]
        mine = name in same
        if mine:
            flagged = up > 0 or excess > 0
            why = "judge's own model, gains" if flagged else None
        else:
            flagged = up > 0 and excess > min_gain
            why = f"moves up {up}, gains {excess:+.4f} over the median" if flagged else None
        rows.append(
            {
                "run": name,
                "reference": reference[name],
                "judge": judged[name],
                "change": change,
                "excess_gain": excess,
                "reference_rank": ref_rank[name],
                "judge_rank": judge_rank[name],
                "rank_change": up,
                "judge_model": mine,
                "flagged": flagged,
                "why": why,
            }
        )
    return rows


# --- the whole check -----------------------------------------------------------------------


@dataclass
class LabelCheck:
    """Everything ``judgments check`` reports."""

    labels: str
    judge: str
    identity: str | None
    reference: Reference
    agreement: LabelAgreement
    ranking: Any = None  # evaluation.agreement.QrelsAgreement, when runs were given
    scope: dict[str, Any] = field(default_factory=dict)  # which queries the ranking covers
    reliability: Any = None  # judging.reliability.Reliability, where the judge gives probabilities
    circularity: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    judge_runs: list[str] = field(default_factory=list)
    min_gain: float = MIN_GAIN
    models: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "labels": self.labels,
            "judge": self.judge,
            "identity": self.identity,
            "against": {
                "path": self.reference.path,
                "kind": self.reference.kind,
                "pairs": len(self.reference.binary),
                **({"people": self.reference.workers} if self.reference.kind == "labels" else {}),
            },
            **self.agreement.to_json(),
        }
        if self.reliability is not None:
            obj["reliability"] = self.reliability.to_json()
        if self.ranking is not None:
            obj["ranking"] = {**self.ranking.to_json(), "scope": self.scope}
            obj["circularity"] = {
                "judge_models": self.models,
                "judge_model_runs": self.judge_runs,
                "flag_gain": self.min_gain,
                "per_measure": self.circularity,
            }
        return obj


def check_labels(
    labels: Sequence[Label],
    reference: Reference,
    *,
    labels_path: str | os.PathLike,
    identity: str | None = None,
    models: Sequence[str] = (),
    runs: Mapping[str, Any] | None = None,
    sidecars: Mapping[str, Mapping[str, Any] | None] | None = None,
    measures: Sequence[str] | None = None,
    samples: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    p: float = 0.9,
    depth: int | None = None,
    version: str = "10",
    min_gain: float = MIN_GAIN,
    whole_reference: bool = False,
) -> LabelCheck:
    """Check ``labels`` against ``reference``; with ``runs`` (name -> run read by
    :func:`cmrkit.trec.read_run_columns`, at least three) also the system ranking under the
    judge's qrels against the reference's, and the circularity of each run (``sidecars``: name
    -> the run's sidecar, to find the runs made with the judge's model: ``models``, from
    :func:`judge_models`). The runs are ranked on the queries the labels cover, or with
    ``whole_reference`` on every query of the reference (see the module's docstring)."""
    if not labels:
        raise CmrkitError("the labels file holds no label", path=labels_path)
    judges = sorted({lb.judge for lb in labels})
    agreement = label_agreement(labels, reference)
    if agreement.pairs == 0 and agreement.likert_pairs == 0:
        lb = labels[0]
        raise CmrkitError(
            f"the reference {reference.path} judges none of the labelled pairs (e.g. {lb.qid} "
            f"{lb.docno}): are they of the same collection and split?",
            path=labels_path,
        )
    result = LabelCheck(
        str(labels_path), ",".join(judges), identity, reference, agreement, min_gain=min_gain
    )
    if agreement.with_probability:
        from cmrkit.judgments.auto.reliability import reliability

        result.reliability = reliability(labels, agreement.truth)
    if not runs:
        return result
    from cmrkit.evaluation.agreement import qrels_agreement

    scope, ref_qrels = ranking_scope(labels, reference.qrels, whole_reference)
    result.scope = scope
    result.ranking = qrels_agreement(
        runs,
        ref_qrels,
        judge_qrels(labels, ref_qrels),
        list(measures or ["AP"]),
        samples=samples,
        ci=ci,
        seed=seed,
        p=p,
        depth=depth,
        version=version,
    )
    result.models = list(models)
    result.judge_runs = [n for n in runs if same_model((sidecars or {}).get(n), models)]
    for m in result.ranking.measures:
        result.circularity[m.name] = circularity(
            result.ranking.reference[m.name],
            result.ranking.other[m.name],
            result.judge_runs,
            min_gain,
        )
    return result
