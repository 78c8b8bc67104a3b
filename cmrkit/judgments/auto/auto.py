"""``cmrkit judgments auto``: a judge labels every pair of a pool (or of a run's top k).

Answers come from the cache first; the judge answers the rest, each answer cached as it comes.
The reader judge is then calibrated (on judged pairs, scored through the same cache) and every
pair gets its label and probability. The labels file and its sidecar are written together, or
not at all (an interrupt or an error leaves the target as it was, the cache keeps the answers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmrkit._version import __version__
from cmrkit.errors import CmrkitError
from cmrkit.judgments.auto.cache import Entry, LabelCache
from cmrkit.judgments.auto.calibration import fit_platt
from cmrkit.judgments.auto.judges import Judge, Request, identity_sha256, pair_keys
from cmrkit.judgments.auto.labels import (
    LABELS_FORMAT,
    LABELS_VERSION,
    Label,
    judge_worker,
    labels_text,
    sidecar_path,
    sidecar_text,
)
from cmrkit.judgments.auto.options import ON_UNPARSED
from cmrkit.judgments.auto.pairs import Judged, Pair, PairTexts, Targets, load_texts

Bar = Callable[[str, int], Callable[[int], None]]  # (what, total) -> advance(n)


def _no_bar(what: str, total: int) -> Callable[[int], None]:
    return lambda n: None


@dataclass
class AutoResult:
    """The labels made and the sidecar that goes beside them."""

    labels: list[Label]
    sidecar: dict[str, Any]
    unparsed: list[tuple[Pair, str | None]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return labels_text(self.labels)


SHOWN_ANSWER = 80  # characters of an unparsed answer shown in a message


def shown_answer(answer: str | None) -> str:
    """An answer as a message quotes it: its first :data:`SHOWN_ANSWER` characters, and how
    long it is when it is longer (an endpoint may send a whole page)."""
    if answer is None or len(answer) <= SHOWN_ANSWER:
        return repr(answer)
    return f"{answer[:SHOWN_ANSWER]!r}... ({len(answer):,} characters)"


def _answers(
    judge: Judge,
    texts: PairTexts,
    pairs: Sequence[Pair],
    cache: LabelCache,
    bar: Callable[[int], None],
) -> tuple[dict[Pair, Entry], int]:
    """Every pair's answer (the cache's, else the judge's) and how many came from the cache."""
    keys = pair_keys(judge, texts, pairs)
    found = cache.get(list(keys.values()))
    missing = {p for p in pairs if keys[p] not in found}
    bar(len(pairs) - len(missing))
    judge.answer(Request(texts, pairs, missing, cache, bar, keys))
    if missing:
        found = cache.get(list(keys.values()))
    return {p: found[keys[p]] for p in pairs}, len(pairs) - len(missing)


def _calibrate(
    judge: Any, texts: PairTexts, judged: Judged, cache: LabelCache, bar: Bar
) -> dict[str, Any]:
    pairs = sorted(judged.labels)
    entries, cached = _answers(judge, texts, pairs, cache, bar("calibration pairs", len(pairs)))
    scores = judge.scores([entries[p] for p in pairs])
    judge.calibration = fit_platt(scores, [judged.labels[p] for p in pairs], judged.fitted_on)
    return {**judge.calibration.to_json(), "cached": cached}


def _warned(calibration: dict[str, Any] | None, warning: str | None) -> dict[str, Any] | None:
    if calibration is None or not warning:
        return calibration
    return {**calibration, "warning": warning}


def auto_judge(
    targets: Targets,
    judge: Judge,
    *,
    cache_path: Path | None,
    judged: Judged | None = None,
    on_unparsed: str = "skip",
    command: Sequence[str] | None = None,
    bar: Bar = _no_bar,
    warn: Callable[[str], None] = lambda text: None,
) -> AutoResult:
    """Label every pair of ``targets`` with ``judge`` (the reader judge calibrated on
    ``judged``). ``on_unparsed`` ``fail``: an answer without a label is an error (the answers
    stay in the cache); ``skip``: the pair gets no row, counted in the sidecar. ``warn`` is
    told, before any work, what the sidecar's calibration then records as its ``warning``
    (calibration pairs the reader was trained on)."""
    if on_unparsed not in ON_UNPARSED:
        raise CmrkitError(f"--on-unparsed must be one of {', '.join(ON_UNPARSED)}")
    if judge.kind == "reader" and judged is None:
        raise CmrkitError(
            "the reader judge needs judged pairs to calibrate its scores: pass --calibrate-on "
            "SPLIT (another split of the collection, with --calibrate-run RUN of it) or "
            "--calibrate-on FILE (people's labels CSV, or qrels)"
        )
    if judge.kind != "reader" and judged is not None:
        raise CmrkitError(
            "--calibrate-on is for the reader judge; an LLM's probabilities come from its logprobs"
        )
    trained_on = getattr(judge, "trained_on", None)  # the reader's: its training data
    warning = trained_on(targets.coll, judged.fitted_on) if judged and trained_on else None
    if warning:
        warn(warning)
    all_pairs = list(targets.pairs) + sorted(set(judged.labels) if judged else ())
    texts = load_texts(targets.coll, all_pairs)
    identity = identity_sha256(judge.identity)
    with LabelCache(cache_path, identity, judge.prompt_sha256, judge.kind) as cache:
        calibration = _calibrate(judge, texts, judged, cache, bar) if judged else None
        entries, cached = _answers(
            judge, texts, targets.pairs, cache, bar("pairs", len(targets.pairs))
        )
    worker = judge_worker(judge.kind)
    labels: list[Label] = []
    unparsed: list[tuple[Pair, str | None]] = []
    for pair in targets.pairs:
        made = judge.label(entries[pair])
        if made is None:
            unparsed.append((pair, entries[pair].answer))
            continue
        labels.append(Label(pair[0], pair[1], worker, made[0], made[1]))
    if unparsed and on_unparsed == "fail":
        (qid, docno), answer = unparsed[0]
        raise CmrkitError(
            f"{len(unparsed)} answer(s) gave no label 1..5 (e.g. query {qid} unit {docno}: "
            f"{shown_answer(answer)}); nothing written, the answers are kept in the cache; pass "
            "--on-unparsed skip to write the others and count these"
        )
    if unparsed and not labels:
        (qid, docno), answer = unparsed[0]
        raise CmrkitError(
            f"none of the {len(unparsed)} answers gave a label 1..5 (e.g. query {qid} unit "
            f"{docno}: {shown_answer(answer)}); nothing written (a labels file without labels "
            "is read by no command), the answers are kept in the cache; try another --prompt "
            "or model"
        )
    tokens = {
        "prompt": sum(entries[p].prompt_tokens or 0 for p in targets.pairs),
        "completion": sum(entries[p].completion_tokens or 0 for p in targets.pairs),
    }
    judge_record: dict[str, Any] = {
        "kind": judge.kind,
        "identity": identity_sha256(judge.identity),
        "prompt_sha256": judge.prompt_sha256,
        "calibration": _warned(calibration, warning),
        "parameters": judge.identity,
    }
    sidecar = {
        "format": LABELS_FORMAT,
        "version": LABELS_VERSION,
        "judge": judge_record,
        **targets.source,
        "collection": str(targets.coll),
        "pairs": len(targets.pairs),
        "labelled": len(labels),
        "unparsed": len(unparsed),
        "cached": cached,
        "tokens": tokens,
        "cache": str(cache_path) if cache_path is not None else None,
        "cmrkit": __version__,
        "command": list(command) if command is not None else None,
    }
    return AutoResult(labels, sidecar, unparsed)


def write_auto(result: AutoResult, output: Path, staged: Any) -> None:
    """Write the labels and the sidecar into ``staged`` (StagedOutputs of both paths)."""
    staged.path(output).write_text(result.text, encoding="utf-8", newline="")
    side = sidecar_path(output)
    staged.path(side).write_text(sidecar_text(result.sidecar), encoding="utf-8", newline="")
