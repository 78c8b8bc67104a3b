"""Build a sentence-level CMR-style collection from TAC EDL gold mentions and source documents.

Flow: gold mentions (tab file, or queries XML + links) -> checked against their documents ->
sentence units (spaCy; sentences of a sentence-offsets file replace those they overlap; the
sentences a mention crosses are merged) -> within-document chains (gold entity ids plus the
tagger mentions :mod:`cmrkit.tac.chains` links) -> queries (the longest mention per entity, ties by
seed, or every mention) and their known relevant sentences (the sentences of the entity's other
mentions, never in the query's own document unless ``keep_own_doc``) -> the sentences of the
other documents (optionally only those dated within the query documents' range) as candidates.

Files (``docs/collection-format.md``): ``corpus.jsonl.gz`` with docnos ``DOC:start:last`` (raw
offsets, last character included) and per unit the fields ``chain`` (the words of the chains
with a mention in the unit), ``acronyms`` and ``trigrams`` (of those mentions);
``topics.jsonl`` (with ``exclude_doc`` = the query's document, ``cmr_mention_id`` and
``chain``), ``topics.SPLIT.tsv``, ``queries.SPLIT.txt`` (published CMR queries layout),
``chains.jsonl.gz`` (one line per document), ``manifest.json``; ``qrels/NAME.SPLIT.txt`` in the
published CMR qrels layout (entity type in column 2, float rels).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from cmrkit._version import __version__
from cmrkit.collection.build import (
    BuildReport,
    InputFile,
    build_identity,
    kept_collection,
    pick_longest,
    relevant_units,
)
from cmrkit.collection.clusters import write_clusters_jsonl
from cmrkit.collection.layout import (
    CORPUS,
    TOPICS,
    clusters_name,
    corpus_path,
    manifest_path,
    qrels_name,
    topics_path,
    topics_tsv_name,
    topics_tsv_path,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import StagedOutputs, gzip_writer, safe_name, sha256_file
from cmrkit.sources import tac
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL
from cmrkit.tac import chains, cmr
from cmrkit.trec import write_topics_tsv

QUERY_MODES = ("longest", "all")

Progress = Callable[[str, int | None], Callable[[int], None]]


@dataclass
class TacOptions:
    """Everything that shapes a TAC collection; recorded in the manifest."""

    name: str
    types: tuple[str, ...] = tac.DEFAULT_TYPES
    queries: str = "longest"
    min_relevant: int = 1
    seed: int = 13
    split: str = "test"
    tag: str | None = None
    date_range: str | None = None
    keep_own_doc: bool = False
    skip_bad: bool = False
    spacy_model: str = DEFAULT_SPACY_MODEL
    chains: bool = True

    @property
    def qid_tag(self) -> str:
        return self.tag or self.name

    def check(self) -> None:
        if self.queries not in QUERY_MODES:
            raise CmrkitError(f"--queries {self.queries!r} is not one of longest, all")
        unknown = [t for t in self.types if t not in tac.TAC_TYPES]
        if unknown or not self.types:
            raise CmrkitError(
                f"--types: unknown entity type {(unknown or [''])[0]!r}; choose from "
                f"{', '.join(tac.TAC_TYPES)}"
            )
        if self.min_relevant < 0:
            raise CmrkitError("--min-relevant must be 0 or more")
        safe_name(self.name, "collection name")
        safe_name(self.split, "split name")
        parse_date_range(self.date_range)


def parse_date_range(text: str | None) -> tuple[date, date] | str | None:
    """None, ``"auto"``, or ``YYYYMMDD-YYYYMMDD`` -> (first, last)."""
    if text is None or text in ("", "none", "auto"):
        return "auto" if text == "auto" else None
    first, sep, last = text.partition("-")
    days = [tac.doc_date(f"_{first}_"), tac.doc_date(f"_{last}_")]
    if not sep or None in days:
        raise CmrkitError(f"--date-range {text!r}: use auto or FIRST-LAST as YYYYMMDD-YYYYMMDD")
    return days[0], days[1]  # type: ignore[return-value]


@dataclass
class TacInputs:
    """Where the gold mentions and documents are."""

    docs: Path
    mentions: Path | None = None
    queries_xml: Path | None = None
    links: Path | None = None
    sentence_offsets: Path | None = None
    cmr_queries: Path | None = None
    cmr_qrels: Path | None = None

    def check(self) -> None:
        given = [
            self.mentions is not None,
            self.queries_xml is not None or self.links is not None,
            self.cmr_queries is not None or self.cmr_qrels is not None,
        ]
        if sum(given) != 1:
            raise CmrkitError(
                "--source tac needs one of: --mentions GOLD.tab (TAC 2015+); --queries-xml Q.xml "
                "with --links L.tab (TAC 2014); --cmr-queries Q.txt with --cmr-qrels R.txt "
                "(the published CMR files)"
            )
        if given[1] and (self.queries_xml is None or self.links is None):
            raise CmrkitError("--queries-xml and --links go together")
        if given[2] and (self.cmr_queries is None or self.cmr_qrels is None):
            raise CmrkitError("--cmr-queries and --cmr-qrels go together")

    def records(self) -> list[InputFile]:
        out = []
        for path, role in (
            (self.mentions, "mentions"),
            (self.queries_xml, "queries-xml"),
            (self.links, "links"),
            (self.sentence_offsets, "sentence-offsets"),
            (self.cmr_queries, "cmr-queries"),
            (self.cmr_qrels, "cmr-qrels"),
        ):
            if path is not None:
                out.append(InputFile.of(str(path), role, format="tac"))
        return out


@dataclass
class _Unit:
    id: str
    start: int
    end: int
    contents: str
    doc_id: str
    kind: str
    index: list[int]
    mentions: list[dict[str, Any]] = field(default_factory=list)
    chain: str = ""
    acronyms: str = ""
    trigrams: str = ""

    def line(self) -> str:
        obj: dict[str, Any] = {
            "id": self.id,
            "contents": self.contents,
            "doc_id": self.doc_id,
            "title": None,
            "kind": self.kind,
        }
        if self.mentions:
            obj["mentions"] = self.mentions
        obj["chain"] = self.chain
        obj["acronyms"] = self.acronyms
        obj["trigrams"] = self.trigrams
        return json.dumps(obj, ensure_ascii=False) + "\n"

    def span_of(self, start: int, end: int) -> tuple[int, int]:
        """Span in ``contents`` of the raw span ``[start, end)`` (inside the unit)."""
        inside = [self.index[k - self.start] for k in range(start, end)]
        inside = [i for i in inside if i >= 0]
        return (min(inside), max(inside) + 1) if inside else (0, 0)


def _analysed(
    analyser: tac.Analyser,
    docs: Iterable[tac.TacDocument],
    offsets: dict[str, list[tuple[int, int]]] | None,
) -> Iterator[tuple[tac.TacDocument, list[tuple[int, int]], list[tuple[int, int, str, str]]]]:
    """Each document with its sentences and entities. Sentences of the sentence-offsets file,
    when given, replace the spaCy sentences they overlap; spaCy's others are kept."""
    for doc, sents, ents in analyser.analyse_many(docs):
        given = offsets.get(doc.doc_id, []) if offsets is not None else []
        for s, e in given:
            if e > len(doc.raw):
                raise CmrkitError(
                    f"sentence {s}:{e - 1} of the sentence-offsets file lies outside document "
                    f"{doc.doc_id} ({len(doc.raw)} characters)"
                )
        if given:
            sents = sorted(
                given + [(s, e) for s, e in sents if not any(gs < e and s < ge for gs, ge in given)]
            )
        yield doc, sents, ents


def _units_of(
    doc: tac.TacDocument,
    spans: list[tuple[int, int]],
    doc_chains: list[chains.Chain],
    kind: str,
) -> list[_Unit]:
    index = chains.chain_index(doc_chains)
    units = []
    for s, e in spans:
        text, idx = doc.visible(s, e)
        if not text:
            continue
        inside = sorted(
            (m for c in doc_chains for m in c.mentions if s <= m.start < e),
            key=lambda m: (m.start, m.end),
        )
        units.append(
            _Unit(
                id=cmr.cmr_docno(doc.doc_id, s, e),
                start=s,
                end=e,
                contents=text,
                doc_id=doc.doc_id,
                kind=kind,
                index=idx,
                chain=chains.unit_chain_words(index, s, e),
                acronyms=" ".join(a for a in (chains.acronym(m.text) for m in inside) if a),
                trigrams=" ".join(g for m in inside for g in chains.char_trigrams(m.text)),
            )
        )
    return units


def _date_filter(spec: tuple[date, date] | str | None, query_docs: set[str]):
    if spec is None:
        return None
    if spec == "auto":
        dates = sorted(d for d in (tac.doc_date(x) for x in query_docs) if d is not None)
        if not dates:
            raise CmrkitError(
                "--date-range auto: no query document id holds a date like "
                "AFP_ENG_20091001.0009; give the range as YYYYMMDD-YYYYMMDD"
            )
        return dates[0], dates[-1]
    return spec


def build_tac_collection(
    inputs: TacInputs,
    opts: TacOptions,
    *,
    collections_dir: Path = Path("collections"),
    qrels_dir: Path = Path("qrels"),
    force: bool = False,
    progress: Progress | None = None,
) -> BuildReport:
    """Build ``collections_dir/NAME`` and ``qrels_dir/NAME.SPLIT.txt`` from TAC data; a
    collection already there from the same inputs and parameters is kept (up to date)."""
    opts.check()
    inputs.check()
    identity = {
        "source": "tac",
        "inputs": [asdict(i) for i in inputs.records()],
        "documents": str(inputs.docs),
        "parameters": {k: v for k, v in asdict(opts).items() if k != "name"},
    }
    up_to_date = kept_collection(
        Path(collections_dir) / opts.name, build_identity(identity), Path(qrels_dir), force=force
    )
    if up_to_date is not None:
        return up_to_date
    problems = tac.Problems(skip_bad=opts.skip_bad)
    dropped: dict[str, int] = defaultdict(int)
    gold, published, offsets, expected = _read_gold(inputs, opts, problems)
    tick = progress or (lambda description, total: lambda n: None)
    annotated, kept = _usable_mentions(gold, inputs, problems)
    analyser = tac.Analyser(opts.spacy_model, entities=opts.chains)
    ann = _analyse_annotated(analyser, annotated, kept, offsets, problems, tick)

    kept = [m for m in kept if m.mention_id in ann.placed]
    if published is None:
        queries = _choose_queries(kept, ann.placed, opts, dropped)
    else:
        queries = _published_queries(kept, ann.placed, published, expected, problems)
    if not queries:
        raise CmrkitError(
            "no queries: no entity has mentions in two documents with at least "
            f"--min-relevant {opts.min_relevant} relevant sentences"
            + ("" if opts.keep_own_doc else " outside the query's document (see --keep-own-doc)")
        )
    window = _date_filter(parse_date_range(opts.date_range), {q.mention.doc_id for q in queries})
    judged_docs = {d.rsplit(":", 2)[0] for q in queries for d in q.judgments}
    missing = {d for q in queries for d in q.judgments}
    missing.difference_update(u.id for u in ann.units)

    out_dir = Path(collections_dir) / opts.name
    qrels_file = Path(qrels_dir) / qrels_name(opts.name, opts.split)
    clusters_file = Path(qrels_dir) / clusters_name(opts.name, opts.split)
    counts: dict[str, Any] = {"gold_mentions": len(gold), "mentions": len(kept)}
    targets = [out_dir, qrels_file, clusters_file]
    with StagedOutputs(
        targets, force=force, anchor=Path(collections_dir), kinds={out_dir: "collection"}
    ) as st:
        cdir = st.path(out_dir)
        cdir.mkdir()

        def candidates() -> Iterator[tac.TacDocument]:
            advance = tick("candidate documents", None)
            for doc in tac.iter_documents(inputs.docs):
                advance(1)
                if doc.doc_id in annotated:
                    continue
                day = doc.date
                if window is not None and doc.doc_id not in judged_docs:
                    if day is None:
                        dropped["undated_documents_kept"] += 1
                    elif not window[0] <= day <= window[1]:
                        dropped["documents_outside_date_range"] += 1
                        continue
                yield doc

        n_candidates = _write_corpus(cdir, ann, analyser, candidates(), offsets, missing, counts)
        for docno in sorted(missing):
            problems.report(
                f"judged sentence {docno} is not a unit of the corpus; check that its document is "
                f"under {inputs.docs} and the offsets lie inside it",
                path=inputs.cmr_qrels or qrels_file,
            )
        _write_topics(cdir, st.path(qrels_file), queries, ann.placed, ann.doc_chains, opts)
        with open(st.path(clusters_file), "w", encoding="utf-8", newline="\n") as f:
            write_clusters_jsonl(f, _gold_clusters(kept, ann.placed))
        counts.update(_counts(kept, queries, ann.units, n_candidates, len(problems)))
        counts.setdefault("candidate_documents", 0)
        stats = _stats(queries, ann.units, n_candidates)
        manifest = {
            "name": opts.name,
            "cmrkit_version": __version__,
            "source": "tac",
            "inputs": [asdict(i) for i in inputs.records()],
            "documents": str(inputs.docs),
            "parameters": {k: v for k, v in asdict(opts).items() if k != "name"},
            "date_window": [d.isoformat() for d in window] if window else None,
            "seed": opts.seed,
            "counts": counts,
            "dropped": dict(sorted(dropped.items())),
            "problems": problems.messages,
            "splits": {opts.split: stats},
            "files": _manifest_files(opts.split, qrels_file, clusters_file),
            "corpus_sha256": sha256_file(corpus_path(cdir)),
        }
        manifest_path(cdir).write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return BuildReport(
        opts.name, out_dir, {opts.split: qrels_file}, {opts.split: stats}, counts, dict(dropped)
    )


def _read_gold(
    inputs: TacInputs, opts: TacOptions, problems: tac.Problems
) -> tuple[
    list[tac.TacMention],
    dict[str, dict[str, int]] | None,
    dict[str, list[tuple[int, int]]] | None,
    dict[str, str],
]:
    """The gold mentions of the chosen types; with the published CMR files also their
    judgments and published mention ids (None and {} otherwise); the sentence spans that
    replace spaCy's (None: spaCy's alone)."""
    offsets = (
        tac.read_sentence_offsets(inputs.sentence_offsets) if inputs.sentence_offsets else None
    )
    if inputs.mentions is not None:
        gold = tac.read_mention_tab(inputs.mentions, types=opts.types, problems=problems)
        return gold, None, offsets, {}
    if inputs.queries_xml is not None:
        gold = tac.read_queries_xml(
            inputs.queries_xml, inputs.links, types=opts.types, problems=problems
        )
        return gold, None, offsets, {}
    return _published(inputs, opts, offsets or {}, problems)


def _usable_mentions(
    gold: list[tac.TacMention], inputs: TacInputs, problems: tac.Problems
) -> tuple[dict[str, tac.TacDocument], list[tac.TacMention]]:
    """The documents that hold gold mentions, and the mentions that match their document
    (each mention id once); the others are reported."""
    by_doc: dict[str, list[tac.TacMention]] = defaultdict(list)
    for m in gold:
        by_doc[m.doc_id].append(m)
    annotated: dict[str, tac.TacDocument] = {}
    for doc in tac.iter_documents(inputs.docs):
        if doc.doc_id in by_doc:
            annotated[doc.doc_id] = doc
    kept: list[tac.TacMention] = []
    for m in gold:
        doc = annotated.get(m.doc_id)
        if doc is None:
            problems.report_mention(
                f"document {m.doc_id} is not under {inputs.docs}; add it or drop the mention", m
            )
            continue
        why = tac.check_mention(m, doc)
        if why is not None:
            problems.report_mention(why, m)
            continue
        kept.append(m)
    seen_ids: dict[str, tac.TacMention] = {}
    for m in kept:
        if m.mention_id in seen_ids:
            raise CmrkitError(
                f"mention id {m.mention_id} already used on line {seen_ids[m.mention_id].line}",
                path=m.path,
                where=f"line {m.line}",
            )
        seen_ids[m.mention_id] = m
    if not kept:
        raise CmrkitError("no usable gold mentions of the chosen --types in the inputs")
    return annotated, kept


_Placed = dict[str, tuple[_Unit, tuple[int, int], str]]


@dataclass
class _AnnotatedUnits:
    """The units of the annotated documents, where each gold mention landed (its unit, its span
    in the unit's text, its CMR mention id), and each document's chains (also as lines)."""

    units: list[_Unit] = field(default_factory=list)
    placed: _Placed = field(default_factory=dict)
    doc_chains: dict[str, list[chains.Chain]] = field(default_factory=dict)
    chain_lines: list[str] = field(default_factory=list)


def _analyse_annotated(
    analyser: tac.Analyser,
    annotated: dict[str, tac.TacDocument],
    kept: list[tac.TacMention],
    offsets: dict[str, list[tuple[int, int]]] | None,
    problems: tac.Problems,
    tick: Progress,
) -> _AnnotatedUnits:
    """Split the annotated documents into sentence units (a mention's sentences merged), build
    their chains and place each gold mention in its unit; a mention outside the text is
    reported."""
    out = _AnnotatedUnits()
    kept_by_doc: dict[str, list[tac.TacMention]] = defaultdict(list)
    for m in kept:
        kept_by_doc[m.doc_id].append(m)
    advance = tick("annotated documents", len(kept_by_doc))
    ordered = (annotated[doc_id] for doc_id in sorted(kept_by_doc))
    for doc, sents, ents in _analysed(analyser, ordered, offsets):
        doc_id = doc.doc_id
        ms = kept_by_doc[doc_id]
        spans = tac.merge_spans(sents, [(m.start, m.end + 1) for m in ms])
        doc_chains = chains.build_chains(
            doc_id, [(m.start, m.end + 1, m.text, m.entity, m.type) for m in ms], ents
        )
        out.doc_chains[doc_id] = doc_chains
        doc_units = _units_of(doc, spans, doc_chains, "context")
        for m in ms:
            unit = next((u for u in doc_units if u.start <= m.start and m.end < u.end), None)
            if unit is None:
                problems.report_mention(
                    f"mention {m.text!r} lies in document metadata (e.g. <DOCID>), not in text", m
                )
                continue
            span = unit.span_of(m.start, m.end + 1)
            mention_id = cmr.cmr_mention_id(doc_id, (unit.start, unit.end), (m.start, m.end + 1))
            unit.kind = "annotated"
            unit.mentions.append(
                {"mention_id": mention_id, "cluster": m.entity, "start": span[0], "end": span[1]}
            )
            out.placed[m.mention_id] = (unit, span, mention_id)
        out.units.extend(doc_units)
        out.chain_lines.append(_chain_line(doc_id, doc_chains))
        advance(1)
    return out


def _write_corpus(
    cdir: Path,
    ann: _AnnotatedUnits,
    analyser: tac.Analyser,
    candidates: Iterable[tac.TacDocument],
    offsets: dict[str, list[tuple[int, int]]] | None,
    missing: set[str],
    counts: dict[str, Any],
) -> int:
    """Write the corpus and the chains: the annotated documents' units, then the sentences of
    the candidate documents; each judged unit written leaves ``missing``. Returns the number of
    candidate units."""
    corpus = gzip_writer(corpus_path(cdir))
    chain_out = gzip_writer(cdir / "chains.jsonl.gz")
    n_candidates = 0
    try:
        for u in ann.units:
            corpus.write(u.line())
        for line in ann.chain_lines:
            chain_out.write(line)
        for doc, sents, ents in _analysed(analyser, candidates, offsets):
            doc_chains = chains.build_chains(doc.doc_id, [], ents)
            for u in _units_of(doc, sents, doc_chains, "distractor"):
                corpus.write(u.line())
                missing.discard(u.id)
                n_candidates += 1
            chain_out.write(_chain_line(doc.doc_id, doc_chains))
            counts["candidate_documents"] = counts.get("candidate_documents", 0) + 1
    finally:
        corpus.close()
        chain_out.close()
    return n_candidates


def _counts(
    kept: list[tac.TacMention],
    queries: list[_Query],
    units: list[_Unit],
    n_candidates: int,
    n_problems: int,
) -> dict[str, int]:
    return {
        "entities": len({m.entity for m in kept}),
        "query_entities": len({q.mention.entity for q in queries}),
        "queries": len(queries),
        "annotated_units": sum(1 for u in units if u.kind == "annotated"),
        "context_units": sum(1 for u in units if u.kind == "context"),
        "distractor_units": n_candidates,
        "corpus_units": len(units) + n_candidates,
        "skipped_bad_records": n_problems,
    }


def _manifest_files(split: str, qrels_file: Path, clusters_file: Path) -> dict[str, Any]:
    return {
        "corpus": CORPUS,
        "topics": TOPICS,
        "topics_tsv": {split: topics_tsv_name(split)},
        "cmr_queries": {split: f"queries.{split}.txt"},
        "chains": "chains.jsonl.gz",
        "qrels": {split: str(qrels_file)},
        "clusters": {split: str(clusters_file)},
    }


def _gold_clusters(
    kept: list[tac.TacMention], placed: dict[str, tuple[_Unit, tuple[int, int], str]]
) -> Iterator[dict[str, Any]]:
    """The key for `cmrkit eval-coref`: every placed gold mention once (by its CMR mention id,
    the id the units carry; a span annotated twice counts once), its entity as the cluster (a
    NIL id is a cluster of its own), its unit and its document."""
    seen: set[str] = set()
    for m in kept:
        unit, _, mention_id = placed[m.mention_id]
        if mention_id in seen:
            continue
        seen.add(mention_id)
        yield {"cluster": m.entity, "mention_id": mention_id, "unit": unit.id, "doc_id": m.doc_id}


@dataclass
class _Query:
    mention: tac.TacMention
    judgments: dict[str, int]  # docno -> relevance (published qrels: 1, 0 or -1)
    qid: str


def _published(
    inputs: TacInputs,
    opts: TacOptions,
    offsets: dict[str, list[tuple[int, int]]],
    problems: tac.Problems,
) -> tuple[
    list[tac.TacMention],
    dict[str, dict[str, int]],
    dict[str, list[tuple[int, int]]],
    dict[str, str],
]:
    """The published CMR queries as gold mentions, their judgments, the sentence spans their
    docnos name (added to any sentence-offsets file) and each query's published mention id."""
    queries = cmr.read_cmr_queries(inputs.cmr_queries)
    qrels, _ = cmr.read_cmr_qrels(inputs.cmr_qrels)
    spans = {doc: set(s) for doc, s in offsets.items()}
    gold = []
    for q in queries.values():
        parts = q.qid.split(":")
        if q.type not in opts.types:
            continue
        gold.append(
            tac.TacMention(
                mention_id=q.qid,
                text=q.text,
                doc_id=q.doc_id,
                start=q.start,
                end=q.end,
                entity=parts[1] if len(parts) >= 3 else q.qid,
                type=q.type,
                mention_type=None,
                path=str(inputs.cmr_queries),
                line=q.line,
            )
        )
        spans.setdefault(q.doc_id, set()).add((q.sent_start, q.sent_end + 1))
    for docs in qrels.values():
        for docno in docs:
            doc, start, last = docno.rsplit(":", 2) if docno.count(":") >= 2 else (docno, "", "")
            if not (start.isdigit() and last.isdigit()) or int(last) < int(start):
                problems.report(
                    f"judged unit {docno!r} is not a 'DOC:start:last' sentence id",
                    path=inputs.cmr_qrels,
                )
                continue
            spans.setdefault(doc, set()).add((int(start), int(last) + 1))
    expected = {q.qid: q.mention_id for q in queries.values()}
    return gold, qrels, {doc: sorted(s) for doc, s in spans.items()}, expected


def _published_queries(
    kept: list[tac.TacMention],
    placed: dict[str, tuple[_Unit, tuple[int, int], str]],
    qrels: dict[str, dict[str, int]],
    expected: dict[str, str],
    problems: tac.Problems,
) -> list[_Query]:
    queries = []
    for m in kept:
        mention_id = placed[m.mention_id][2]
        published = expected[m.mention_id]
        if mention_id != published:
            problems.report_mention(
                f"query {m.mention_id}: its sentence became {mention_id}, not the published "
                f"{published} (overlapping sentences in the offsets); fix the files",
                m,
            )
            continue
        if m.mention_id not in qrels:
            problems.report_mention(f"query {m.mention_id} has no judgments in the qrels", m)
            continue
        queries.append(_Query(m, dict(qrels[m.mention_id]), m.mention_id))
    return queries


def _choose_queries(
    kept: list[tac.TacMention],
    placed: dict[str, tuple[_Unit, tuple[int, int], str]],
    opts: TacOptions,
    dropped: dict[str, int],
) -> list[_Query]:
    by_entity: dict[str, list[tac.TacMention]] = defaultdict(list)
    for m in kept:
        by_entity[m.entity].append(m)
    chosen: list[tac.TacMention] = []
    for entity in sorted(by_entity):
        group = by_entity[entity]
        if opts.queries == "all":
            chosen.extend(group)
            continue
        chosen.append(pick_longest(group, opts.seed, entity))
    queries: list[_Query] = []
    for q in chosen:
        relevant = relevant_units(
            by_entity[q.entity],
            lambda mid: placed[mid][0].id,
            placed[q.mention_id][0].id,
            None if opts.keep_own_doc else q.doc_id,
        )
        if len(relevant) < max(opts.min_relevant, 1):
            dropped["queries_below_min_relevant"] += 1
            continue
        queries.append(
            _Query(q, dict.fromkeys(relevant, 1), cmr.cmr_qid(opts.qid_tag, q.entity, q.mention_id))
        )
    return queries


def _topic_records(
    queries: list[_Query],
    placed: dict[str, tuple[_Unit, tuple[int, int], str]],
    doc_chains: dict[str, list[chains.Chain]],
    opts: TacOptions,
) -> Iterator[dict[str, Any]]:
    for query in queries:
        q = query.mention
        unit, span, mention_id = placed[q.mention_id]
        chain = next(c for c in doc_chains[q.doc_id] if c.entity == q.entity)
        rec: dict[str, Any] = {
            "qid": query.qid,
            "split": opts.split,
            "cluster": q.entity,
            "cluster_title": None,
            "mention": " ".join(q.text.split()),
            "span": list(span),
            "context": unit.contents,
            "unit": unit.id,
            "doc_id": q.doc_id,
            "title": None,
            "type": q.type,
            "n_relevant": sum(1 for rel in query.judgments.values() if rel > 0),
            "cmr_mention_id": mention_id,
            "chain": chain.words(),
            "judgments": query.judgments,
        }
        if not opts.keep_own_doc:
            rec["exclude_doc"] = q.doc_id
        rec["source"] = {"file": q.path, "line": q.line, "mention_id": q.mention_id}
        yield rec


def _write_topics(
    cdir: Path,
    qrels_path: Path,
    queries: list[_Query],
    placed: dict[str, tuple[_Unit, tuple[int, int], str]],
    doc_chains: dict[str, list[chains.Chain]],
    opts: TacOptions,
) -> None:
    records = list(_topic_records(queries, placed, doc_chains, opts))
    with open(topics_path(cdir), "w", encoding="utf-8", newline="\n") as f:
        for rec in records:
            f.write(
                json.dumps({k: v for k, v in rec.items() if k != "judgments"}, ensure_ascii=False)
                + "\n"
            )
    with open(topics_tsv_path(cdir, opts.split), "w", encoding="utf-8", newline="\n") as f:
        write_topics_tsv(f, ((r["qid"], r["mention"]) for r in records))
    with open(cdir / f"queries.{opts.split}.txt", "w", encoding="utf-8", newline="\n") as f:
        cmr.write_cmr_queries(
            f, ((r["qid"], r["type"], r["cmr_mention_id"], r["mention"]) for r in records)
        )
    with open(qrels_path, "w", encoding="utf-8", newline="\n") as f:
        cmr.write_cmr_qrels(
            f,
            {r["qid"]: r["judgments"] for r in records},
            {r["qid"]: r["type"] for r in records},
        )


def _chain_line(doc_id: str, doc_chains: list[chains.Chain]) -> str:
    obj = {
        "doc_id": doc_id,
        "chains": [
            {
                "id": c.id,
                "entity": c.entity,
                "type": c.type,
                "mentions": [[m.start, m.end, m.text, m.type, m.source] for m in c.mentions],
            }
            for c in doc_chains
        ],
    }
    return json.dumps(obj, ensure_ascii=False) + "\n"


def _stats(queries: list[_Query], units: list[_Unit], n_candidates: int) -> dict[str, float]:
    rel = [sum(1 for r in q.judgments.values() if r > 0) for q in queries]
    return {
        "clusters": len({q.mention.entity for q in queries}),
        "queries": len(queries),
        "annotated_units": sum(1 for u in units if u.kind == "annotated"),
        "distractors": n_candidates,
        "mean_relevant": round(sum(rel) / len(rel), 2) if rel else 0.0,
        "max_relevant": max(rel) if rel else 0,
    }
