"""Assessment tasks: the query unit and the candidate in context, grouped into HITs with gold.

Tasks are blind by default: each pair is known to assessors by an opaque pair id only (see
:mod:`cmrkit.assess.key`), the candidate's annotated mentions are not marked (only annotated
units have them), and titles are shown only when every candidate has one and none is a file
name (ECB+ titles such as ``37_14ecbplus.xml`` name the topic; distractors without titles would
stand out). Texts are detokenised and cut to a window (:mod:`cmrkit.assess.display`).
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmrkit.assess.display import Prepared, Shown, detokenize
from cmrkit.assess.key import KeyEntry, pair_id
from cmrkit.collection.layout import corpus_path, topics_by_qid
from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl
from cmrkit.pooling import Pool, natural_key
from cmrkit.trec import read_qrels

_OFFSETS = re.compile(r":(\d+):(\d+)$")
_FILE_NAME = re.compile(r"^\S+\.(?:xml|naf|txt|json|jsonl|tsv|sgm|sgml|html?|conll)$", re.I)


def _shown_json(s: Shown) -> dict[str, Any]:
    return {
        "text": s.text,
        "spans": [list(x) for x in s.spans],
        "window": list(s.window) if s.window else None,
    }


@dataclass
class Task:
    """One query/candidate pair as an assessor sees it."""

    hit_id: str
    position: int
    pair_id: str
    query_id: str
    doc_id: str
    query: Shown
    title: str | None
    first: str | None
    candidate: Shown
    next: str | None
    gold: int | None = None

    def to_json(self, blind: bool = True) -> dict[str, Any]:
        """The task as a JSON object; ``blind`` leaves out the real ids and the known answer."""
        obj: dict[str, Any] = {
            "hit_id": self.hit_id,
            "position": self.position,
            "pair_id": self.pair_id,
            "query": _shown_json(self.query),
            "candidate": {
                "title": self.title,
                "first_sentence": self.first,
                "unit": _shown_json(self.candidate),
                "next_sentence": self.next,
            },
        }
        if not blind:
            obj.update(query_id=self.query_id, doc_id=self.doc_id, gold=self.gold)
        return obj


@dataclass
class Tasks:
    """The tasks of one export, whether they are blind, and notes for the person exporting."""

    tasks: list[Task]
    blind: bool
    notes: list[str] = field(default_factory=list)

    @property
    def hits(self) -> int:
        return len({t.hit_id for t in self.tasks})

    @property
    def gold_pairs(self) -> int:
        return sum(1 for t in self.tasks if t.gold is not None)

    def key(self) -> list[KeyEntry]:
        """The answer key: what each pair id stands for, in task order."""
        return [
            KeyEntry(t.pair_id, t.query_id, t.doc_id, t.hit_id, t.position, t.gold)
            for t in self.tasks
        ]


def _group_of(rec: dict[str, Any]) -> tuple[str, int] | None:
    """(group, start) for a sentence unit: its passage, or its document for ``DOC:start:end``."""
    docno = rec["id"]
    m = _OFFSETS.search(docno)
    if not m:
        return None
    if rec.get("passage"):
        return str(rec["passage"]), int(m[1])
    if not docno.startswith(("P:", "D:")) and rec.get("doc_id"):
        return "doc:" + str(rec["doc_id"]), int(m[1])
    return None


def _read_units(corpus: Path, wanted: set[str]) -> tuple[dict[str, dict], dict[str, list]]:
    """Records of the wanted units, and the ordered sentence units of the groups they belong to."""
    records: dict[str, dict] = {}
    groups: dict[str, list[tuple[int, str]]] = {}
    for n, rec in iter_jsonl(corpus, what="one unit object per line"):
        docno = rec.get("id")
        if not isinstance(docno, str):
            raise CmrkitError("a corpus unit needs a string 'id'", path=corpus, where=f"line {n}")
        g = _group_of(rec)
        if g is not None:
            groups.setdefault(g[0], []).append((g[1], docno))
        if docno in wanted:
            records[docno] = rec
    return records, groups


def _mention_spans(rec: dict[str, Any], path: object) -> list[tuple[int, int]]:
    spans = []
    for m in rec.get("mentions") or []:
        try:
            s, e = int(m["start"]), int(m["end"])
        except (KeyError, TypeError, ValueError):
            raise CmrkitError(
                f"unit {rec['id']}: a mention needs integer 'start' and 'end'", path=path
            ) from None
        if 0 <= s < e <= len(rec.get("contents", "")):
            spans.append((s, e))
    return sorted(spans)


def _plain(text: str | None) -> str | None:
    return detokenize(text)[0] if text else None


def describe_pairs(
    pairs: list[tuple[str, str]],
    collection: str | os.PathLike,
    *,
    blind: bool = True,
    max_chars: int = 600,
) -> dict[tuple[str, str], dict[str, Any]]:
    """What to show for each (qid, docno): the query unit with its mention marked, and the
    candidate with its title and neighbouring sentences, detokenised and windowed.

    Unless ``blind`` is off, the candidate's annotated mentions are marked too (only annotated
    units have them, so marking tells assessors which candidates were annotated)."""
    root = Path(collection)
    corpus = corpus_path(root)
    topics = topics_by_qid(root)
    docnos = {d for _, d in pairs}
    records, groups = _read_units(corpus, docnos)
    neighbours: dict[str, tuple[str | None, str | None]] = {}
    need: set[str] = set()
    for docno, rec in records.items():
        g = _group_of(rec)
        if g is None:
            continue
        members = sorted(groups[g[0]], key=lambda sd: (sd[0], natural_key(sd[1])))
        ids = [d for _, d in members]
        i = ids.index(docno)
        first = ids[0] if i > 0 else None
        nxt = ids[i + 1] if i + 1 < len(ids) else None
        neighbours[docno] = (first, nxt)
        need.update(x for x in (first, nxt) if x is not None and x not in records)
    if need:
        extra, _ = _read_units(corpus, need)
        records.update(extra)

    out = {}
    queries: dict[str, Shown] = {}
    units: dict[str, Prepared] = {}
    candidates: dict[tuple[str, str], Shown] = {}
    for qid, docno in pairs:
        topic = topics.get(qid)
        if topic is None:
            raise CmrkitError(f"query {qid} is not in the collection's topics", path=root)
        rec = records.get(docno)
        if rec is None:
            raise CmrkitError(f"unit {docno} (query {qid}) is not in the corpus", path=corpus)
        mention = str(topic.get("mention", ""))
        if qid not in queries:
            context = str(topic.get("context", mention))
            span = topic.get("span")
            qspans = []
            if isinstance(span, list) and len(span) == 2 and 0 <= span[0] < span[1] <= len(context):
                qspans = [(int(span[0]), int(span[1]))]
            queries[qid] = Prepared(context, qspans).shown(mention, max_chars)
        if docno not in units:
            spans = [] if blind else _mention_spans(rec, corpus)
            units[docno] = Prepared(str(rec.get("contents", "")), spans)
        if (docno, mention) not in candidates:
            candidates[(docno, mention)] = units[docno].shown(mention, max_chars)
        first, nxt = neighbours.get(docno, (None, None))
        out[(qid, docno)] = {
            "query": queries[qid],
            "title": rec.get("title"),
            "first": _plain(records[first]["contents"]) if first else None,
            "candidate": candidates[(docno, mention)],
            "next": _plain(records[nxt]["contents"]) if nxt else None,
        }
    return out


def titles_reveal(titles: list[str | None]) -> str | None:
    """Why showing these candidates' titles would tell assessors something about the source
    (some candidates have none, or titles are file names), or None when they are safe."""
    missing = sum(1 for t in titles if not t)
    if missing:
        return f"{missing} of {len(titles)} candidates have no title"
    files = sum(1 for t in titles if t and _FILE_NAME.match(t.strip()))
    if files:
        return f"{files} of {len(titles)} titles are file names"
    return None


def read_gold(path: str | os.PathLike) -> dict[tuple[str, str], int]:
    """Known answers from a qrels file: rel > 0 -> 1, rel == 0 -> 0 (rel < 0 is ignored)."""
    gold = {}
    for qid, docs in read_qrels(path).items():
        for docno, rel in docs.items():
            if rel >= 0:
                gold[(qid, docno)] = 1 if rel > 0 else 0
    return gold


def _shuffled_pairs(pool: Pool, rng: random.Random) -> list[tuple[str, str]]:
    """The pool's sampled pairs, query by query in natural order, each query's shuffled."""
    by_query: dict[str, list[str]] = {}
    for p in pool.pairs:
        if p.sampled:
            by_query.setdefault(p.qid, []).append(p.docno)
    ordered: list[tuple[str, str]] = []
    for qid in sorted(by_query, key=natural_key):
        docs = sorted(by_query[qid])
        rng.shuffle(docs)
        ordered.extend((qid, d) for d in docs)
    if not ordered:
        raise CmrkitError("the pool has no pairs to judge")
    return ordered


def _gold_pairs(
    pool: Pool,
    collection: str | os.PathLike,
    gold: dict[tuple[str, str], int] | None,
    gold_per_hit: int,
) -> list[tuple[str, str]]:
    """The gold pairs that can be shown: outside the pool, of a topic of the collection, not
    the topic's own unit; none when no gold pair goes in a HIT."""
    if not gold_per_hit:
        return []
    if not gold:
        raise CmrkitError("--gold-per-hit needs --gold QRELS with pairs of known answer")
    pooled = {(p.qid, p.docno) for p in pool.pairs}
    gold_pairs = sorted(
        (k for k in gold if k not in pooled), key=lambda k: (natural_key(k[0]), k[1])
    )
    topics = topics_by_qid(collection)
    gold_pairs = [k for k in gold_pairs if k[0] in topics and topics[k[0]].get("unit") != k[1]]
    if len(gold_pairs) < gold_per_hit:
        raise CmrkitError(
            f"--gold holds {len(gold_pairs)} usable pairs outside the pool; "
            f"need at least {gold_per_hit}"
        )
    return gold_pairs


_Hit = list[tuple[tuple[str, str], int | None]]


def _hits(
    ordered: list[tuple[str, str]],
    per_hit: int,
    gold_pairs: list[tuple[str, str]],
    gold: dict[tuple[str, str], int],
    gold_per_hit: int,
    rng: random.Random,
) -> list[_Hit]:
    """HITs of ``per_hit`` pairs in order, each with ``gold_per_hit`` gold pairs (with their
    answer; of the HIT's first query when it has some) at random places; HITs shuffled."""
    gold_by_query: dict[str, list[tuple[str, str]]] = {}
    for k in gold_pairs:
        gold_by_query.setdefault(k[0], []).append(k)
    hits: list[_Hit] = []
    for start in range(0, len(ordered), per_hit):
        chunk: _Hit = [(k, None) for k in ordered[start : start + per_hit]]
        for _ in range(gold_per_hit):
            used = {k for k, _ in chunk}
            local = [k for k in gold_by_query.get(chunk[0][0][0], []) if k not in used]
            choices = local or [k for k in gold_pairs if k not in used] or gold_pairs
            g = rng.choice(choices)
            chunk.insert(rng.randrange(len(chunk) + 1), (g, gold[g]))
        hits.append(chunk)
    rng.shuffle(hits)
    return hits


def build_tasks(
    pool: Pool,
    collection: str | os.PathLike,
    *,
    per_hit: int = 10,
    gold: dict[tuple[str, str], int] | None = None,
    gold_per_hit: int = 0,
    seed: int = 0,
    blind: bool = True,
    max_chars: int = 600,
) -> Tasks:
    """Tasks for the sampled pairs of a pool, in HITs of ``per_hit`` pool pairs plus
    ``gold_per_hit`` pairs of known answer; pairs and HITs shuffled with ``seed``.

    Pair ids are salted with the pool's corpus and ``seed``; ``blind`` (the default) hides
    annotated mentions of candidates and titles that tell the source apart; texts show a window
    of about ``max_chars`` characters first."""
    if per_hit < 1:
        raise CmrkitError(f"--per-hit must be at least 1, not {per_hit}")
    if gold_per_hit < 0:
        raise CmrkitError(f"--gold-per-hit must not be negative, not {gold_per_hit}")
    rng = random.Random(seed)
    ordered = _shuffled_pairs(pool, rng)
    gold_pairs = _gold_pairs(pool, collection, gold, gold_per_hit)
    hits = _hits(ordered, per_hit, gold_pairs, gold or {}, gold_per_hit, rng)
    described = describe_pairs(
        sorted({k for h in hits for k, _ in h}),
        collection,
        blind=blind,
        max_chars=max_chars,
    )
    notes = []
    show_titles = True
    if blind:
        titles = {docno: d["title"] for (_, docno), d in described.items()}
        why = titles_reveal(list(titles.values()))
        if why:
            show_titles = False
            notes.append(f"titles hidden from assessors: {why}")
    salt = f"{pool.header['collection']['corpus_sha256']}:{seed}"
    tasks = []
    width = max(4, len(str(len(hits))))
    for h, chunk in enumerate(hits, 1):
        for pos, ((qid, docno), label) in enumerate(chunk, 1):
            d = described[(qid, docno)]
            tasks.append(
                Task(
                    f"H{h:0{width}d}",
                    pos,
                    pair_id(salt, qid, docno),
                    qid,
                    docno,
                    d["query"],
                    d["title"] if show_titles else None,
                    d["first"],
                    d["candidate"],
                    d["next"],
                    label,
                )
            )
    return Tasks(tasks, blind, notes)
