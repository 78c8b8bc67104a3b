"""Hybrid judging (``pool create --auto``, ``assess serve --auto``): the judge's label is taken
for the pairs it is sure of, people judge the rest.

A pair is the judge's when its probability of relevance is at least ``P`` or at most ``1 - P``
(``--confident P``, 0.5 < P <= 1); a label without a probability is never sure. In the pool
file every labelled pair records the judge's label and probability (``judge_label``,
``judge_probability``); a pair the judge takes is marked ``labelled_by: "judge"`` and no longer
``sampled``, so no export or server hands it to people, and ``judgments aggregate`` gives it the
judge's label (people's votes, where there are some anyway, decide). The pool's header records
the labels (path, sha256), the judge (kind, identity), ``P`` and the counts under ``judge``.

Labels of another pool are refused: the labels' sidecar records the sha256 of the pool they
were made for; when it is not this pool's (or there is none), the labelled pairs must be
exactly the pool's pairs to judge (the same pool made again elsewhere: paths in its header
differ).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.judgments.auto.labels import Label, read_labels, read_labels_sidecar
from cmrkit.judgments.auto.options import CONFIDENT
from cmrkit.judgments.pooled import Pooled

JUDGE = "judge"  # the value of a pool pair's labelled_by


def check_confident(p: float) -> None:
    """Refuse a ``--confident`` outside (0.5, 1]."""
    if not 0.5 < p <= 1.0:  # refuses nan too
        raise CmrkitError(
            f"--confident {p} must lie in (0.5, 1]: the judge takes a pair whose probability of "
            f"relevance is at least P or at most 1 - P (e.g. {CONFIDENT})"
        )


def is_confident(probability: float | None, p: float) -> bool:
    """Whether the judge is sure enough of a pair (probabilities are written with 6 decimals,
    so 1 - P is rounded alike: at P = 0.9 a probability of 0.1 counts)."""
    if probability is None:
        return False
    return probability >= p or probability <= round(1.0 - p, 6)


class HybridLabels:
    """A judge's labels read for a hybrid pool: the labels, their sidecar and where they are."""

    def __init__(self, path: str | os.PathLike, confident: float = CONFIDENT):
        check_confident(confident)
        self.path = str(path)
        self.confident = confident
        self.labels: list[Label] = read_labels(path)
        if not self.labels:
            raise CmrkitError("the labels file holds no label", path=path)
        self.sidecar: dict[str, Any] = read_labels_sidecar(path) or {}
        from cmrkit.fileio import sha256_file

        self.sha256 = sha256_file(path)

    @property
    def judge(self) -> dict[str, Any]:
        judge = self.sidecar.get("judge") if isinstance(self.sidecar.get("judge"), dict) else {}
        kinds = sorted({lb.judge for lb in self.labels})
        return {
            "worker": ",".join(kinds),
            "kind": judge.get("kind"),
            "identity": judge.get("identity"),
        }

    def identity(self) -> dict[str, Any]:
        """What a server database records so that it is restarted with the same labels."""
        return {"labels_sha256": self.sha256, "confident": self.confident}

    def check_pool(self, pool: Pooled, pool_sha256: str, pool_path: object) -> None:
        """Refuse labels made for another pool (see the module's docstring)."""
        recorded = self.sidecar.get("pool")
        sha = recorded.get("sha256") if isinstance(recorded, dict) else None
        if isinstance(sha, str) and sha == pool_sha256:
            return
        wanted = {(p.qid, p.docno) for p in pool.pairs if p.sampled}
        mine = {lb.key for lb in self.labels}
        if mine == wanted:  # the same pairs (e.g. the pool made again from another folder)
            return
        made = ""
        if isinstance(sha, str) and sha:
            made = (
                f"{self.path} was made for the pool with sha256 {sha[:12]}... "
                f"({recorded.get('path')}), not {pool_path} ({pool_sha256[:12]}...), and "
            )
        pairs = pool.pair_index()
        stray = next((lb for lb in self.labels if lb.key not in pairs), None)
        if stray is not None:
            detail = f"pair {stray.qid} {stray.docno} is not a pair of {pool_path}"
        else:
            missing = sorted(wanted - mine)
            example = f" (e.g. {missing[0][0]} {missing[0][1]})" if missing else ""
            detail = (
                f"{len(missing)} pairs of {pool_path} to judge have no label{example}"
                if missing
                else f"{len(mine - wanted)} labelled pairs are not to be judged in {pool_path}"
            )
        raise CmrkitError(
            f"labels from another pool: {made}{detail}; label this pool with "
            "`cmrkit judgments auto`",
            path=self.path,
        )

    def apply(self, pool: Pooled) -> dict[str, Any]:
        """Record the judge's labels on the pool's pairs and take the sure ones from people
        (see the module's docstring); returns what the pool's header records."""
        return apply_labels(pool, self.labels, self.confident, self.source())

    def source(self) -> dict[str, Any]:
        return {"labels": self.path, "labels_sha256": self.sha256, **self.judge}


def apply_labels(
    pool: Pooled, labels: Sequence[Label], confident: float, source: Mapping[str, Any]
) -> dict[str, Any]:
    """Every labelled pair of ``pool`` gets the judge's label and probability; a sampled pair
    the judge is sure of (:func:`is_confident`) becomes the judge's (``labelled_by``, no longer
    sampled). The header's ``judge`` records ``source``, ``confident`` and the counts."""
    check_confident(confident)
    by_pair = {lb.key: lb for lb in labels}
    taken = people = labelled = 0
    for pair in pool.pairs:
        lb = by_pair.get((pair.qid, pair.docno))
        if lb is not None:
            labelled += 1
            pair.judge_label = lb.label
            pair.judge_probability = lb.probability
            if pair.sampled and is_confident(lb.probability, confident):
                pair.sampled = False
                pair.labelled_by = JUDGE
                taken += 1
                continue
        people += int(pair.sampled)
    record = {
        **dict(source),
        "confident": confident,
        "labelled": labelled,
        "judge_labelled": taken,
        "people": people,
    }
    pool.header["judge"] = record
    return record
