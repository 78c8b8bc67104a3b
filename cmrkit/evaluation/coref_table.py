"""The tables cross-document coreference papers print, scored by ``evaluation/coref.py``.

- The papers' table: MUC, B3, CEAF-e and LEA as recall, precision and F1, then CoNLL F1; a row
  per system and scope, with singletons (the reference scorer as it is) and without (singleton
  chains removed from key and response after clustering, as coval's ``keep_singletons=False``).
  Mentions are identified by id, all documents scored as one (cross-document).
- uCDCR's per-subtopic protocol (Zhukova et al. 2026): the mentions of gold singleton chains
  left out (they are dropped before clustering), each subtopic's mentions scored alone as one
  CoNLL document with the reference scorer's ``all``, each F1 as the scorer prints it (percent,
  2 decimals: rounding the printed figure to 2 decimals keeps it), CoNLL their mean rounded to
  3; the dataset's figure is the mean over subtopics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cmrkit.collection.clusters import CORPUS_DOCUMENT, ID, Clustering, Document
from cmrkit.errors import CmrkitError
from cmrkit.evaluation.coref import Counts, perl_percent, score

TABLE_MEASURES = ("muc", "bcub", "ceafe", "lea")
UCDCR_MEASURES = ("muc", "bcub", "ceafe")
PROTOCOLS = ("papers", "ucdcr")
SINGLETONS = {"with": "keep", "without": "remove"}


@dataclass
class Response:
    """A clustering to score, and how its row is labelled."""

    clustering: Clustering
    system: str
    scope: str


@dataclass
class TableRow:
    system: str
    scope: str
    singletons: str  # "with" or "without"
    scores: dict[str, Counts]
    conll: float


@dataclass
class SubtopicRow:
    subtopic: str
    mentions: int
    f1: dict[str, float]  # percent, rounded to 2 decimals
    conll: float  # their mean, rounded to 3 decimals


def papers_table(
    key: Clustering, responses: Sequence[Response], singletons: Iterable[str] = ("with", "without")
) -> list[TableRow]:
    """A row per response and singleton setting, in that order (responses first)."""
    rows = []
    for r in responses:
        for s in singletons:
            if s not in SINGLETONS:
                raise CmrkitError(f"singletons {s!r}: with or without")
            result = score(
                key,
                r.clustering,
                [*TABLE_MEASURES, "conll"],
                scope="corpus",
                singletons=SINGLETONS[s],
            )
            counts = {m: result.total[m] for m in TABLE_MEASURES}
            conll = result.total["conll"]
            assert isinstance(conll, float)
            rows.append(TableRow(r.system, r.scope, s, counts, conll))  # type: ignore[arg-type]
    return rows


def _chains(clustering: Clustering) -> dict[str, str]:
    """mention id -> chain label, of a clustering identified by mention id."""
    if clustering.identity != ID:
        raise CmrkitError(
            "uCDCR's protocol reads mentions by id: give cluster JSON lines "
            '{"cluster", "mention_id"}',
            path=clustering.path,
        )
    out: dict[str, str] = {}
    for doc in clustering.documents.values():
        for ident, chain in zip(doc.ids, doc.chains, strict=True):
            label = doc.names[chain]
            out[str(ident)] = label if clustering.global_chains else f"{doc.name}\0{label}"
    return out


def _clustering(path: str, members: Sequence[tuple[str, str]]) -> Clustering:
    doc = Document(CORPUS_DOCUMENT)
    for line, (mention, chain) in enumerate(members, 1):
        doc.add(mention, doc.chain(chain), line)
    return Clustering(path, "jsonl", ID, {CORPUS_DOCUMENT: doc})


def _printed_f1(value: float) -> float:
    """An F1 as uCDCR reads it from scorer.pl's output: the percentage the scorer prints
    (truncated to 2 decimals), which rounding to 2 decimals leaves as it is."""
    return round(float(perl_percent(value)), 2)


def ucdcr_table(
    key: Clustering, response: Clustering, subtopic_of: dict[str, str]
) -> tuple[list[SubtopicRow], dict[str, float]]:
    """Each subtopic's row (in the key's order of first mention) and the means over them."""
    gold = _chains(key)
    sizes = Counter(gold.values())
    system = _chains(response)
    missing = [m for m in gold if m not in subtopic_of]
    if missing:
        raise CmrkitError(
            f"key mention {missing[0]!r} has no subtopic; uCDCR's protocol scores each "
            "subtopic alone: use the gold clusters of a collection built from ecbplus or ucdcr",
            path=key.path,
        )
    by_subtopic: dict[str, list[str]] = {}
    for mention, chain in gold.items():
        if sizes[chain] > 1:  # gold singletons are left out, as before clustering
            by_subtopic.setdefault(subtopic_of[mention], []).append(mention)
    rows = []
    alone = 0
    for subtopic, mentions in by_subtopic.items():
        k = _clustering(key.path, [(m, gold[m]) for m in mentions])
        responded = []
        for m in mentions:
            if m in system:
                responded.append((m, system[m]))
            else:
                alone += 1
                responded.append((m, f"\0alone\0{m}"))
        r = _clustering(response.path, responded)
        result = score(k, r, list(UCDCR_MEASURES), scope="corpus")
        f1 = {m: _printed_f1(result.total[m].f1) for m in UCDCR_MEASURES}  # type: ignore[union-attr]
        rows.append(SubtopicRow(subtopic, len(mentions), f1, round(sum(f1.values()) / 3, 3)))
    if not rows:
        raise CmrkitError("the key has no chain of two or more mentions", path=key.path)
    means = {m: round(sum(r.f1[m] for r in rows) / len(rows), 3) for m in UCDCR_MEASURES}
    means["conll"] = round(sum(r.conll for r in rows) / len(rows), 3)
    means["subtopics"] = float(len(rows))
    means["missing_from_response"] = float(alone)
    return rows, means


def _entry(c: Counts) -> dict[str, float]:
    return {
        "recall": c.recall,
        "precision": c.precision,
        "f1": c.f1,
        "recall_num": c.recall_num,
        "recall_den": c.recall_den,
        "precision_num": c.precision_num,
        "precision_den": c.precision_den,
    }


def table_to_json(rows: Sequence[TableRow], extra: dict | None = None) -> str:
    import json

    obj = dict(extra or {})
    obj["rows"] = [
        {
            "system": r.system,
            "scope": r.scope,
            "singletons": r.singletons,
            **{m: _entry(r.scores[m]) for m in TABLE_MEASURES},
            "conll": r.conll,
        }
        for r in rows
    ]
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def table_to_csv(rows: Sequence[TableRow]) -> str:
    """``system,scope,singletons,measure,recall,precision,f1`` rows (CoNLL: its F1 alone)."""
    import io

    from cmrkit.escaping import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["system", "scope", "singletons", "measure", "recall", "precision", "f1"])
    for r in rows:
        for m in TABLE_MEASURES:
            c = r.scores[m]
            w.writerow(
                [r.system, r.scope, r.singletons, m, repr(c.recall), repr(c.precision), repr(c.f1)]
            )
        w.writerow([r.system, r.scope, r.singletons, "conll", "", "", repr(r.conll)])
    return buf.getvalue()


def subtopics_to_json(
    rows: Sequence[SubtopicRow], means: dict[str, float], extra: dict | None = None
) -> str:
    import json

    obj = dict(extra or {})
    obj["protocol"] = "ucdcr"
    obj["subtopics"] = [
        {"subtopic": r.subtopic, "mentions": r.mentions, **r.f1, "conll": r.conll} for r in rows
    ]
    obj["mean"] = means
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def subtopics_to_csv(rows: Sequence[SubtopicRow], means: dict[str, float]) -> str:
    import io

    from cmrkit.escaping import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["subtopic", "mentions", *UCDCR_MEASURES, "conll"])
    for r in rows:
        w.writerow(
            [r.subtopic, r.mentions, *(f"{r.f1[m]:.2f}" for m in UCDCR_MEASURES), f"{r.conll:.3f}"]
        )
    w.writerow(["mean", "", *(f"{means[m]:.3f}" for m in UCDCR_MEASURES), f"{means['conll']:.3f}"])
    return buf.getvalue()
