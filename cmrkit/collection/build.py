"""Build a TREC-style test collection from coreference-annotated mentions.

Flow: mentions -> splits (kept, or re-split by cluster) -> retrieval units (passages, the
sentences of the passages, or one passage per mention) -> queries (every mention of a
non-singleton cluster, or the longest mention per cluster) -> qrels (the other units of the
query's cluster) -> distractors streamed into the corpus (deduplicated by text hash, never a
unit of a query cluster, optionally filtered) -> files in ``docs/collection-format.md``'s layout.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import IO, Any, TypeVar

import cmrkit.collection.layout as layout
from cmrkit._version import __version__
from cmrkit.collection.clusters import write_clusters_jsonl
from cmrkit.errors import CmrkitError
from cmrkit.fileio import StagedOutputs, gzip_writer, safe_name, sha256_file
from cmrkit.model import Mention, Passage
from cmrkit.sources.common import clean_id
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL
from cmrkit.trec import write_qrels, write_topics_tsv

UNITS = ("passage", "sentence", "mention")
QUERY_MODES = ("all", "longest")
FILTERS = ("none", "titles", "mentions")
SENTENCE_IDS = ("passage", "document")
_WORD = re.compile(r"\w+")
MentionT = TypeVar("MentionT")


@dataclass
class BuildOptions:
    """Everything that shapes a collection; recorded in the manifest."""

    name: str
    unit: str = "passage"
    queries: str = "all"
    min_relevant: int = 1
    resplit: dict[str, float] | None = None
    seed: int = 13
    distractor_filter: str = "none"
    sentences: str = "parser"
    spacy_model: str = DEFAULT_SPACY_MODEL
    sentence_ids: str = "passage"
    exclude_own_doc: bool = False

    def check(self) -> None:
        for value, allowed, flag in (
            (self.unit, UNITS, "--unit"),
            (self.queries, QUERY_MODES, "--queries"),
            (self.distractor_filter, FILTERS, "--filter-distractors"),
            (self.sentence_ids, SENTENCE_IDS, "sentence ids"),
        ):
            if value not in allowed:
                raise CmrkitError(f"{flag} {value!r} is not one of {', '.join(allowed)}")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.name):
            raise CmrkitError(
                f"collection name {self.name!r} must be letters, digits, '.', '_' or '-'"
            )
        if self.min_relevant < 0:
            raise CmrkitError("--min-relevant must be 0 or more")
        if self.resplit is not None:
            if not self.resplit or not all(0 < v < math.inf for v in self.resplit.values()):
                raise CmrkitError(
                    "--resplit ratios must be positive, e.g. train=0.45,dev=0.1,test=0.45"
                )


@dataclass
class InputFile:
    """An input as recorded in the manifest."""

    path: str
    role: str
    sha256: str
    split: str | None = None
    format: str | None = None

    @classmethod
    def of(cls, path: str, role: str, display: str | None = None, **kw: Any) -> InputFile:
        return cls(path=display or str(path), role=role, sha256=sha256_file(path), **kw)


@dataclass
class DistractorSource:
    """A stream of distractor passages, where it came from, and (when the stream can be read
    twice) a way to count its passages first, for progress totals."""

    name: str
    passages: Iterable[Passage]
    count: Callable[[], int] | None = None


@dataclass
class Unit:
    id: str
    contents: str
    doc_id: str | None
    title: str | None
    kind: str
    mentions: list[dict[str, Any]] = field(default_factory=list)
    passage: str | None = None


@dataclass
class Query:
    mention: Mention
    unit: Unit
    span: tuple[int, int]
    relevant: list[str]


@dataclass
class BuildReport:
    """What was built: per-split statistics and what was dropped, for the printed table."""

    name: str
    out_dir: Path
    qrels_files: dict[str, Path]
    splits: dict[str, dict[str, float]]
    counts: dict[str, Any]
    dropped: dict[str, int]
    up_to_date: bool = False  # an existing collection with the same inputs and parameters


def _plain_json(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, ensure_ascii=False))


def build_identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """What makes a collection what it is: its source, its inputs by content (role, split,
    format, sha256, in order) and its parameters; not where the inputs lay or when it was built."""
    return _plain_json(
        {
            "source": manifest.get("source"),
            "inputs": [
                [i.get("role"), i.get("split"), i.get("format"), i.get("sha256")]
                for i in manifest.get("inputs") or []
            ],
            "parameters": manifest.get("parameters"),
            "documents": manifest.get("documents"),
        }
    )


def _first_difference(have: Any, want: Any, where: str = "") -> str:
    if isinstance(have, dict) and isinstance(want, dict):
        for k in sorted(set(have) | set(want)):
            if have.get(k) != want.get(k):
                return _first_difference(have.get(k), want.get(k), f"{where}.{k}" if where else k)
    if have != want and isinstance(have, list) and isinstance(want, list):
        if len(have) != len(want):
            return f"{where}: {len(have)} here, {len(want)} asked"
        for i, (a, b) in enumerate(zip(have, want, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{where}[{i}]")
    return f"{where}: {json.dumps(have)} here, {json.dumps(want)} asked"


def kept_collection(
    out_dir: Path, wanted: dict[str, Any], qrels_dir: Path, *, force: bool
) -> BuildReport | None:
    """The existing collection at ``out_dir`` when it was built from the same inputs and
    parameters (``wanted``, a :func:`build_identity`) and is intact: it is up to date. None when
    there is none to keep (or ``force``); an error when another collection is there."""
    if force or not out_dir.exists():
        return None
    path = layout.manifest_path(out_dir)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict):
        raise CmrkitError(
            "already exists but is not a collection built by cmrkit (no readable manifest.json); "
            "pass --force to replace it, or --name to build another",
            path=out_dir,
        )
    have = build_identity(manifest)
    want = _plain_json(wanted)
    if have != want:
        raise CmrkitError(
            "already exists, built from other inputs or parameters "
            f"({_first_difference(have, want)}); pass --force to replace it, or --name to "
            "build another",
            path=out_dir,
        )
    files = manifest.get("files") or {}
    qrels = {s: Path(p) for s, p in (files.get("qrels") or {}).items()}
    corpus = out_dir / str(files.get("corpus", layout.CORPUS))
    elsewhere = [p for p in qrels.values() if p.parent != Path(qrels_dir)]
    if elsewhere:
        raise CmrkitError(
            f"already exists with its qrels in {elsewhere[0].parent}/, not {qrels_dir}/; pass "
            "--force to rebuild it",
            path=out_dir,
        )
    missing = [p for p in [corpus, *qrels.values()] if not p.is_file()]
    if missing:
        raise CmrkitError(
            "is missing from the collection built here before; pass --force to rebuild it",
            path=missing[0],
        )
    if sha256_file(corpus) != manifest.get("corpus_sha256"):
        raise CmrkitError(
            "changed since the collection was built (its sha256 differs from manifest.json); "
            "pass --force to rebuild it",
            path=corpus,
        )
    return BuildReport(
        str(manifest.get("name", out_dir.name)),
        out_dir,
        qrels,
        manifest.get("splits") or {},
        manifest.get("counts") or {},
        manifest.get("dropped") or {},
        up_to_date=True,
    )


def _text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()


def assign_splits(mentions: list[Mention], resplit: dict[str, float] | None, seed: int) -> None:
    """Keep each mention's split, or re-split by cluster with the given ratios and seed."""
    if resplit is None:
        for m in mentions:
            if m.split is None:
                m.split = "test"
        return
    clusters = sorted({m.cluster for m in mentions})
    rng = random.Random(seed)
    rng.shuffle(clusters)
    total = sum(resplit.values())
    names = list(resplit)
    bounds, acc = [], 0.0
    for name in names:
        acc += resplit[name] / total
        bounds.append(acc)
    cluster_split: dict[str, str] = {}
    n = len(clusters)
    start = 0
    for name, bound in zip(names, bounds, strict=True):
        end = n if name == names[-1] else round(bound * n)
        for c in clusters[start:end]:
            cluster_split[c] = name
        start = end
    for m in mentions:
        m.split = cluster_split[m.cluster]


def check_unique_ids(mentions: list[Mention]) -> None:
    seen: dict[str, Mention] = {}
    for m in mentions:
        key = clean_id(m.mention_id)
        if key in seen:
            first = seen[key].source
            raise CmrkitError(
                f"duplicate mention_id {m.mention_id!r} (first in {first.get('file')} "
                f"{_where(first)}); mention ids must be unique across inputs",
                path=m.source.get("file"),
                where=_where(m.source),
            )
        seen[key] = m


def _where(source: dict[str, Any]) -> str:
    if "line" in source:
        return f"line {source['line']}"
    if "record" in source:
        return f"record {source['record']}"
    return "record"


def _sentence_unit_id(m: Mention, first_id: str, s: int, e: int, style: str) -> str:
    if style == "document":
        # CMR layout: DOC:start:end with raw document offsets, end inclusive
        return f"{clean_id(m.doc_id)}:{m.context_offset + s}:{m.context_offset + e - 1}"
    return f"P:{first_id}:{s}:{e}"


def build_units(
    mentions: list[Mention],
    opts: BuildOptions,
    segmenter: Callable | None,
    tick: Callable[[int], None] | None = None,
) -> tuple[list[Unit], dict[str, tuple[Unit, tuple[int, int]]]]:
    """Units of the annotated passages, and for each mention its unit and span in that unit.

    ``passage``: one unit per distinct context text (mentions sharing a paragraph share it);
    ``mention``: one unit per mention, as CoreSearch has one passage id per mention, even where
    two mentions share a paragraph; ``sentence``: the sentences of each distinct context
    (``tick(1)`` after each context split into sentences).
    """
    if opts.unit == "mention":
        units: list[Unit] = []
        placed: dict[str, tuple[Unit, tuple[int, int]]] = {}
        for m in mentions:
            unit = Unit(
                id=f"P:{clean_id(m.mention_id)}",
                contents=m.context,
                doc_id=m.doc_id,
                title=m.doc_title,
                kind="annotated",
                mentions=[_mention_entry(m, m.start, m.end)],
            )
            units.append(unit)
            placed[m.mention_id] = (unit, (m.start, m.end))
        return units, placed
    passages: dict[str, list[Mention]] = {}
    for m in mentions:
        passages.setdefault(m.context, []).append(m)
    units = []
    placed = {}
    contexts = list(passages)
    if opts.unit == "passage":
        for ctx in contexts:
            group = passages[ctx]
            first = group[0]
            unit = Unit(
                id=f"P:{clean_id(first.mention_id)}",
                contents=ctx,
                doc_id=first.doc_id,
                title=first.doc_title,
                kind="annotated",
            )
            for m in group:
                unit.mentions.append(_mention_entry(m, m.start, m.end))
                placed[m.mention_id] = (unit, (m.start, m.end))
            units.append(unit)
        return units, placed
    assert segmenter is not None
    for ctx, spans in zip(contexts, segmenter(contexts), strict=True):
        if tick is not None:
            tick(1)
        group = passages[ctx]
        first = group[0]
        first_id = clean_id(first.mention_id)
        sent_units = []
        for s, e in spans:
            sent_units.append(
                (
                    s,
                    e,
                    Unit(
                        id=_sentence_unit_id(first, first_id, s, e, opts.sentence_ids),
                        contents=ctx[s:e],
                        doc_id=first.doc_id,
                        title=first.doc_title,
                        kind="context",
                        passage=f"P:{first_id}",
                    ),
                )
            )
        for m in group:
            for s, e, unit in sent_units:
                if s <= m.start < e or (m.start < s and m.end > s):
                    span = (max(m.start, s) - s, min(m.end, e) - s)
                    unit.kind = "annotated"
                    unit.mentions.append(_mention_entry(m, *span))
                    placed[m.mention_id] = (unit, span)
                    break
            else:
                raise CmrkitError(
                    f"mention {m.mention_id!r} falls outside every sentence of its context",
                    path=m.source.get("file"),
                    where=_where(m.source),
                )
        units.extend(u for _, _, u in sent_units)
    return units, placed


def _mention_entry(m: Mention, start: int, end: int) -> dict[str, Any]:
    return {"mention_id": m.mention_id, "cluster": m.cluster, "start": start, "end": end}


def pick_longest(group: Sequence[MentionT], seed: int, cluster: str) -> MentionT:
    """The mention with the longest string (CMR's canonical query); ties are broken by a
    choice seeded with ``seed`` and the cluster id among the tied mentions sorted by id."""
    longest = max(len(m.text) for m in group)
    tied = sorted((m for m in group if len(m.text) == longest), key=lambda m: m.mention_id)
    return random.Random(f"{seed}:{cluster}").choice(tied)


def relevant_units(
    group: Iterable[MentionT], unit_of: Callable[[str], str], own_unit: str, own_doc: str | None
) -> list[str]:
    """The distinct units of a cluster's mentions, in mention order, leaving out the query's
    own unit and, when ``own_doc`` is given, every unit of that document."""
    relevant: list[str] = []
    for m in group:
        uid = unit_of(m.mention_id)
        if uid == own_unit or uid in relevant or (own_doc is not None and m.doc_id == own_doc):
            continue
        relevant.append(uid)
    return relevant


def choose_queries(
    mentions: list[Mention],
    placed: dict[str, tuple[Unit, tuple[int, int]]],
    opts: BuildOptions,
    query_ids: AbstractSet[str] | None = None,
) -> tuple[list[Query], dict[str, int]]:
    """Queries with their known relevant units; and how many were dropped and why.

    ``query_ids``, when given (a source's own query list), limits the queries to those
    mentions; the others still count as relevant units of their clusters.
    """
    by_cluster: dict[str, list[Mention]] = defaultdict(list)
    for m in mentions:
        by_cluster[m.cluster].append(m)
    candidates: list[Mention] = []
    for cluster, group in by_cluster.items():
        if len(group) < 2:
            continue
        pool = group if query_ids is None else [m for m in group if m.mention_id in query_ids]
        if not pool:
            continue
        if opts.queries == "all":
            candidates.extend(pool)
            continue
        candidates.append(pick_longest(pool, opts.seed, cluster))
    order = {m.mention_id: i for i, m in enumerate(mentions)}
    candidates.sort(key=lambda m: order[m.mention_id])
    queries: list[Query] = []
    dropped = {"queries_below_min_relevant": 0}
    for q in candidates:
        unit, span = placed[q.mention_id]
        relevant = relevant_units(
            by_cluster[q.cluster],
            lambda mid: placed[mid][0].id,
            unit.id,
            q.doc_id if opts.exclude_own_doc else None,
        )
        if len(relevant) < max(opts.min_relevant, 1):
            dropped["queries_below_min_relevant"] += 1
            continue
        queries.append(Query(mention=q, unit=unit, span=span, relevant=relevant))
    return queries, dropped


class DistractorFilter:
    """Drops distractors that contain a query cluster's title (``titles``), or also any of its
    mention strings of two or more words (``mentions``), as whole words, ignoring case."""

    def __init__(self, mode: str, queries: list[Query], mentions: list[Mention]):
        self.mode = mode
        self.phrases: set[tuple[str, ...]] = set()
        if mode == "none":
            return
        query_clusters = {q.mention.cluster for q in queries}
        for m in mentions:
            if m.cluster not in query_clusters:
                continue
            if m.cluster_title:
                self._add(m.cluster_title)
            if mode == "mentions":
                words = tuple(w.lower() for w in _WORD.findall(m.text))
                if len(words) >= 2:
                    self.phrases.add(words)
        self.lengths = sorted({len(p) for p in self.phrases})

    def _add(self, text: str) -> None:
        words = tuple(w.lower() for w in _WORD.findall(text))
        if words:
            self.phrases.add(words)

    def drops(self, text: str) -> bool:
        if not self.phrases:
            return False
        words = [w.lower() for w in _WORD.findall(text)]
        phrases = self.phrases
        for n in self.lengths:
            for i in range(len(words) - n + 1):
                if tuple(words[i : i + n]) in phrases:
                    return True
        return False


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _unit_line(u: Unit) -> str:
    obj: dict[str, Any] = {
        "id": u.id,
        "contents": u.contents,
        "doc_id": u.doc_id,
        "title": u.title,
        "kind": u.kind,
    }
    if u.mentions:
        obj["mentions"] = u.mentions
    if u.passage is not None:
        obj["passage"] = u.passage
    return _json(obj) + "\n"


def _write_distractors(
    out: IO[str],
    sources: list[DistractorSource],
    seen: set[bytes],
    query_clusters: set[str],
    flt: DistractorFilter,
    opts: BuildOptions,
    segmenter: Callable | None,
    tick: Callable[[int], None],
) -> tuple[int, dict[str, int]]:
    dropped = {
        "distractor_duplicates": 0,
        "distractor_equal_to_annotated_unit": 0,
        "distractor_of_query_cluster": 0,
        "distractor_filtered": 0,
        "distractor_id_clash": 0,
    }
    annotated_keys = set(seen)
    used_ids: set[str] = set()
    written = 0
    pending: list[tuple[str, Passage]] = []

    def flush() -> None:
        nonlocal written
        if not pending:
            return
        texts = [p.text for _, p in pending]
        for (pid, p), spans in zip(pending, segmenter(texts), strict=True):
            for s, e in spans:
                out.write(_distractor_line(f"{pid}:{s}:{e}", p.text[s:e], p, pid))
                written += 1
        pending.clear()

    n = 0
    step = 8192 if segmenter is None else 256  # splitting sentences is slow: tick more often
    for source in sources:
        for p in source.passages:
            n += 1
            if n % step == 0:
                tick(step)
            if query_clusters and not query_clusters.isdisjoint(p.clusters):
                dropped["distractor_of_query_cluster"] += 1
                continue
            key = _text_key(p.text)
            if key in seen:
                which = (
                    "distractor_equal_to_annotated_unit"
                    if key in annotated_keys
                    else "distractor_duplicates"
                )
                dropped[which] += 1
                continue
            seen.add(key)
            if flt.phrases and flt.drops(p.text):
                dropped["distractor_filtered"] += 1
                continue
            pid = f"D:{p.source_id}"
            if pid in used_ids:
                dropped["distractor_id_clash"] += 1
                raise CmrkitError(
                    f"distractor id {pid!r} appears twice (source {source.name}); distractor ids "
                    "must be unique across --distractors files"
                )
            used_ids.add(pid)
            if segmenter is None:
                out.write(_distractor_line(pid, p.text, p, None))
                written += 1
            else:
                pending.append((pid, p))
                if len(pending) >= 256:
                    flush()
    if segmenter is not None:
        flush()
    tick(n % step)
    return written, dropped


def _str_or_null(value: str | None) -> str:
    return "null" if value is None else encode_basestring(value)


def _distractor_line(uid: str, text: str, p: Passage, passage: str | None) -> str:
    # the hot loop of a million-passage build: format the JSON by hand (same bytes as json.dumps)
    line = (
        f'{{"id": {encode_basestring(uid)}, "contents": {encode_basestring(text)}, '
        f'"doc_id": {_str_or_null(p.doc_id)}, "title": {_str_or_null(p.title)}, '
        '"kind": "distractor"'
    )
    if passage is not None:
        line += f', "passage": {encode_basestring(passage)}'
    return line + "}\n"


def _topic(q: Query, opts: BuildOptions) -> dict[str, Any]:
    m = q.mention
    obj: dict[str, Any] = {
        "qid": clean_id(m.mention_id),
        "split": m.split,
        "cluster": m.cluster,
        "cluster_title": m.cluster_title,
        "mention": m.text,
        "span": list(q.span),
        "context": q.unit.contents,
        "unit": q.unit.id,
        "doc_id": m.doc_id,
        "title": m.doc_title,
        "type": m.type,
        "n_relevant": len(q.relevant),
    }
    if opts.unit == "sentence":
        obj["passage_context"] = m.context
        obj["passage_span"] = [m.start, m.end]
    if opts.exclude_own_doc:
        obj["exclude_doc"] = m.doc_id
    obj["source"] = m.source
    return obj


def _split_order(splits: Iterable[str]) -> list[str]:
    known = ["train", "dev", "test"]
    return sorted(set(splits), key=lambda s: (known.index(s) if s in known else 3, s))


def build_collection(
    mentions: list[Mention],
    distractors: list[DistractorSource],
    opts: BuildOptions,
    *,
    inputs: list[InputFile],
    source: str,
    collections_dir: Path = Path("collections"),
    qrels_dir: Path = Path("qrels"),
    force: bool = False,
    progress: Callable[[str, int | None], Callable[[int], None]] | None = None,
    query_ids: AbstractSet[str] | None = None,
) -> BuildReport:
    """Build ``collections_dir/NAME`` and ``qrels_dir/NAME.SPLIT.txt``; all or nothing.

    ``query_ids`` limits the queries to those mention ids (a source's own query list). A
    collection already there from the same inputs and parameters is kept (up to date).
    """
    opts.check()
    identity = {
        "source": source,
        "inputs": [asdict(i) for i in inputs],
        "parameters": {k: v for k, v in asdict(opts).items() if k != "name"},
    }
    kept = kept_collection(
        Path(collections_dir) / opts.name, build_identity(identity), Path(qrels_dir), force=force
    )
    if kept is not None:
        return kept
    if not mentions:
        raise CmrkitError("no annotated mentions in the inputs")
    check_unique_ids(mentions)
    assign_splits(mentions, opts.resplit, opts.seed)

    def step(description: str, total: int | None) -> Callable[[int], None]:
        return progress(description, total) if progress else (lambda n: None)

    segmenter = _segmenter(opts, step)
    split_tick = None
    if segmenter is not None:
        split_tick = step(
            "splitting annotated passages into sentences", len({m.context for m in mentions})
        )
    units, placed = build_units(mentions, opts, segmenter, split_tick)
    queries, dropped = choose_queries(mentions, placed, opts, query_ids)
    if not queries:
        raise CmrkitError(
            "no queries: no cluster has two mentions in different units with at least "
            f"--min-relevant {opts.min_relevant} relevant; check the inputs' coref_chain values"
        )
    splits = _split_order(q.mention.split for q in queries)
    for s in splits:
        safe_name(s, "split name")
    out_dir = Path(collections_dir) / opts.name
    qrels_files = {s: Path(qrels_dir) / layout.qrels_name(opts.name, s) for s in splits}
    cluster_files = {s: Path(qrels_dir) / layout.clusters_name(opts.name, s) for s in splits}
    targets = [out_dir, *qrels_files.values(), *cluster_files.values()]

    query_clusters = {q.mention.cluster for q in queries}
    flt = DistractorFilter(opts.distractor_filter, queries, mentions)
    seen = {_text_key(u.contents) for u in units}
    tick = _distractor_progress(distractors, segmenter is not None, step)

    with StagedOutputs(
        targets, force=force, anchor=Path(collections_dir), kinds={out_dir: "collection"}
    ) as staged:
        cdir = staged.path(out_dir)
        cdir.mkdir()
        corpus_path = layout.corpus_path(cdir)
        out = gzip_writer(corpus_path)
        try:
            for u in units:
                out.write(_unit_line(u))
            n_distractors, d_dropped = _write_distractors(
                out, distractors, seen, query_clusters, flt, opts, segmenter, tick
            )
        finally:
            out.close()
        dropped.update(d_dropped)
        dropped.pop("distractor_id_clash", None)

        with open(layout.topics_path(cdir), "w", encoding="utf-8", newline="\n") as f:
            for q in queries:
                f.write(_json(_topic(q, opts)) + "\n")
        for s in splits:
            _write_split(
                cdir,
                s,
                queries,
                staged.path(qrels_files[s]),
                staged.path(cluster_files[s]),
                gold_cluster_records(mentions, s, placed),
            )

        cdcr = write_cdcr(cdir, mentions, placed)
        stats = _split_stats(splits, queries, mentions, placed, n_distractors)
        counts = _counts(mentions, len(query_clusters), queries, units, n_distractors)
        manifest = {
            "name": opts.name,
            "cmrkit_version": __version__,
            "source": source,
            "inputs": [asdict(i) for i in inputs],
            "parameters": {k: v for k, v in asdict(opts).items() if k != "name"},
            "seed": opts.seed,
            "counts": counts,
            "dropped": dropped,
            "splits": stats,
            "files": _manifest_files(splits, qrels_files, cluster_files, cdcr),
            "corpus_sha256": sha256_file(corpus_path),
        }
        with open(layout.manifest_path(cdir), "w", encoding="utf-8", newline="\n") as f:
            f.write(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return BuildReport(opts.name, out_dir, qrels_files, stats, counts, dropped)


def _counts(
    mentions: list[Mention],
    n_query_clusters: int,
    queries: list[Query],
    units: list[Unit],
    n_distractors: int,
) -> dict[str, int]:
    return {
        "mentions": len(mentions),
        "clusters": len({m.cluster for m in mentions}),
        "query_clusters": n_query_clusters,
        "queries": len(queries),
        "annotated_units": sum(1 for u in units if u.kind == "annotated"),
        "context_units": sum(1 for u in units if u.kind == "context"),
        "distractor_units": n_distractors,
        "corpus_units": len(units) + n_distractors,
    }


def _manifest_files(
    splits: list[str], qrels_files: dict[str, Path], cluster_files: dict[str, Path], cdcr: bool
) -> dict[str, Any]:
    files = {
        "corpus": layout.CORPUS,
        "topics": layout.TOPICS,
        "topics_tsv": {s: layout.topics_tsv_name(s) for s in splits},
        "qrels": {s: str(p) for s, p in qrels_files.items()},
        "clusters": {s: str(p) for s, p in cluster_files.items()},
    }
    if cdcr:
        files["mentions"] = layout.MENTIONS
        files["documents"] = layout.DOCUMENTS
    return files


def write_cdcr(
    cdir: Path, mentions: list[Mention], placed: dict[str, tuple[Unit, tuple[int, int]]]
) -> bool:
    """``mentions.jsonl.gz`` and ``documents.jsonl.gz`` when the source placed its mentions in
    a cross-document coreference corpus (``Mention.cdcr``); False when it did not."""
    if not any(m.cdcr is not None for m in mentions):
        return False
    documents: dict[str, Mention] = {}
    out = gzip_writer(layout.mentions_path(cdir))
    try:
        for m in mentions:
            c = m.cdcr
            if c is None:
                raise CmrkitError(
                    f"mention {m.mention_id!r} lacks the corpus fields its source gives the others",
                    path=m.source.get("file"),
                    where=_where(m.source),
                )
            documents.setdefault(m.doc_id, m)
            unit, span = placed[m.mention_id]
            record = {
                "mention_id": m.mention_id,
                "split": m.split,
                "cluster": m.cluster,
                "doc_id": m.doc_id,
                "unit": unit.id,
                "span": list(span),
                "text": m.text,
                "type": m.type,
                "topic": c.topic,
                "subtopic": c.subtopic,
                "sentence": c.sentence,
                "tokens": c.tokens,
                "head": c.head,
                "head_lemma": c.head_lemma,
                "singleton": c.singleton,
                "source": m.source,
            }
            out.write(_json(record) + "\n")
    finally:
        out.close()
    out = gzip_writer(layout.documents_path(cdir))
    try:
        for doc_id, m in documents.items():
            c = m.cdcr
            assert c is not None
            record = {
                "doc_id": doc_id,
                "split": m.split,
                "topic": c.topic,
                "subtopic": c.subtopic,
                "sentences": [[n, words] for n, words in c.sentences],
            }
            out.write(_json(record) + "\n")
    finally:
        out.close()
    return True


def _segmenter(
    opts: BuildOptions, step: Callable[[str, int | None], Callable[[int], None]]
) -> Callable[[list[str]], Iterator[list[tuple[int, int]]]] | None:
    """For sentence units, spaCy's sentence splitter over a batch of texts (loaded here, a
    progress step of its own); None for passage units."""
    if opts.unit != "sentence":
        return None
    from cmrkit.collection.sentences import load_segmenter, sentence_spans

    loaded = step(f"loading spaCy ({opts.sentences})", 1)
    nlp = load_segmenter(opts.spacy_model, opts.sentences)
    loaded(1)

    def segmenter(texts: list[str]) -> Iterator[list[tuple[int, int]]]:
        return sentence_spans(nlp, texts)

    return segmenter


def _distractor_progress(
    distractors: list[DistractorSource],
    sentences: bool,
    step: Callable[[str, int | None], Callable[[int], None]],
) -> Callable[[int], None]:
    """The progress step of the distractors; when they are split into sentences (slow) and
    every source can count its passages, they are counted first for a total."""
    total = None
    if sentences and all(d.count for d in distractors):
        counted = step("counting distractor passages", len(distractors))
        total = 0
        for d in distractors:
            total += d.count()  # type: ignore[misc]
            counted(1)
    what = "distractors: splitting into sentences" if sentences else "distractors"
    return step(what, total)


def _write_split(
    cdir: Path,
    split: str,
    queries: list[Query],
    qrels_path: Path,
    clusters_path: Path,
    clusters: Iterable[dict[str, Any]],
) -> None:
    """A split's topics TSV in the collection, its qrels and its gold clusters."""
    mine = [q for q in queries if q.mention.split == split]
    with open(layout.topics_tsv_path(cdir, split), "w", encoding="utf-8", newline="\n") as f:
        write_topics_tsv(f, ((clean_id(q.mention.mention_id), q.mention.text) for q in mine))
    with open(qrels_path, "w", encoding="utf-8", newline="\n") as f:
        for q in mine:
            write_qrels(f, {clean_id(q.mention.mention_id): dict.fromkeys(q.relevant, 1)})
    with open(clusters_path, "w", encoding="utf-8", newline="\n") as f:
        write_clusters_jsonl(f, clusters)


def gold_cluster_records(
    mentions: list[Mention], split: str, placed: dict[str, tuple[Unit, tuple[int, int]]]
) -> Iterator[dict[str, Any]]:
    """The key of a split for `cmrkit eval-coref`: every annotated mention of the split (the
    singletons too) with its cluster, its unit and its document."""
    for m in mentions:
        if m.split == split:
            record = {
                "cluster": m.cluster,
                "mention_id": m.mention_id,
                "unit": placed[m.mention_id][0].id,
                "doc_id": m.doc_id,
            }
            if m.cdcr is not None:  # the corpus's scopes, for scoring within them
                record["topic"] = m.cdcr.topic
                record["subtopic"] = m.cdcr.subtopic
            yield record


def _split_stats(
    splits: list[str],
    queries: list[Query],
    mentions: list[Mention],
    placed: dict[str, tuple[Unit, tuple[int, int]]],
    n_distractors: int,
) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = {}
    for s in splits:
        qs = [q for q in queries if q.mention.split == s]
        clusters = {q.mention.cluster for q in qs}
        units = {placed[m.mention_id][0].id for m in mentions if m.cluster in clusters}
        rel = [len(q.relevant) for q in qs]
        stats[s] = {
            "clusters": len(clusters),
            "queries": len(qs),
            "annotated_units": len(units),
            "distractors": n_distractors,
            "mean_relevant": round(sum(rel) / len(rel), 2) if rel else 0.0,
            "max_relevant": max(rel) if rel else 0,
        }
    return stats
