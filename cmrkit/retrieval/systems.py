"""The retrieval baselines: BM25, multi-field BM25 (with learned weights) and query expansion.

Every system writes ``RUNS/<collection>/<name>.<split>.trec`` and a JSON sidecar
(``<name>.<split>.json``) holding the command, all parameters, the index and corpus hashes, the
versions and the timings. The run file is a pure function of the inputs and parameters: the same
command rewrites it byte for byte.

Ranking order in the run: Anserini rounds Lucene's scores to 4 decimals and separates exact
ties by lowering scores in steps of 1e-6 in docno-ascending order (as in its own runs); the file
is then sorted by the score as written (6 decimals) descending, any remaining tie by docno
descending, which is trec_eval's order, so the rank column agrees with how trec_eval reads it.
A query's own unit (``unit`` in topics.jsonl) is never returned; each query still gets k results
when the index holds that many other units. A query whose text analyses to no terms (only
stopwords or punctuation) gets no results and a warning in the sidecar.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import cmrkit.retrieval.entities as ner
from cmrkit.collection.layout import (
    Topic,
    collection_dir,
    qrels_path,
    read_topics,
    resolve_split,
    topics_path,
)
from cmrkit.errors import CmrkitError, check_range
from cmrkit.retrieval.docnos import DocnoTable
from cmrkit.retrieval.index import (
    FEATURE_FIELDS,
    FIELDS,
    IndexInfo,
    ensure_index,
    opening,
)
from cmrkit.retrieval.java import java_errors
from cmrkit.retrieval.options import MAX_K, RunOptions, with_overrides
from cmrkit.retrieval.queries import check_formulation, formulate
from cmrkit.retrieval.runfile import (
    Computed,
    RankedRun,
    RunResult,
    RunSpec,
    own_document_units,
    produce_run,
    rerun_command,
    written_scores,
)
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL
from cmrkit.trec import read_qrels

PRESETS: dict[str, dict[str, float]] = {
    # CMR "doc": the unit (mention) field plus the document text at 10% of its weight
    "doc": {"contents": 1.0, "document": 0.1},
    # CMR "mention": the unit field alone
    "mention": {"contents": 1.0},
}
PRESET_QUERY = "mention"
DEFAULT_QUERY = "mention+entities"
MAX_FEEDBACK = 10_000  # feedback terms and documents
MAX_WEIGHT = 1000.0  # k1, Rocchio's alpha, beta, gamma
WEIGHT_GRID = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
WEIGHTED_FIELDS = FIELDS + FEATURE_FIELDS
_CANNOT_OPEN = "Lucene cannot open the index"
_REBUILD = "rebuild it with `cmrkit index --force`"
TIE_BREAK = (
    "Anserini separates equal scores by 1e-6 steps, docno ascending; then score descending "
    "(as written, 6 decimals), then docno descending (trec_eval order)"
)


@dataclass
class QE:
    """Pseudo-relevance feedback settings (Anserini's RM3 and Rocchio rerankers)."""

    method: str = "rm3"
    fb_terms: int = 10
    fb_docs: int = 10
    original_weight: float = 0.5
    filter_terms: bool = True
    alpha: float = 0.9
    beta: float = 0.1
    gamma: float = 0.0
    bottom_fb_terms: int = 10
    bottom_fb_docs: int = 10
    use_negative: bool = False

    def params(self) -> dict[str, Any]:
        if self.method == "rm3":
            return {
                "method": "rm3",
                "fb_terms": self.fb_terms,
                "fb_docs": self.fb_docs,
                "original_weight": self.original_weight,
                "filter_terms": self.filter_terms,
            }
        return {
            "method": "rocchio",
            "fb_terms": self.fb_terms,
            "fb_docs": self.fb_docs,
            "alpha": self.alpha,
            "beta": self.beta,
            "gamma": self.gamma,
            "bottom_fb_terms": self.bottom_fb_terms,
            "bottom_fb_docs": self.bottom_fb_docs,
            "use_negative": self.use_negative,
        }

    def check(self) -> None:
        if self.method not in ("rm3", "rocchio"):
            raise CmrkitError(f"unknown expansion method {self.method!r}; choose rm3 or rocchio")
        for name in ("fb_terms", "fb_docs", "bottom_fb_terms", "bottom_fb_docs"):
            low = 1 if name in ("fb_terms", "fb_docs") else 0
            check_range(getattr(self, name), low, MAX_FEEDBACK, f"--{name.replace('_', '-')}")
        check_range(self.original_weight, 0.0, 1.0, "--original-weight")
        for name in ("alpha", "beta", "gamma"):
            check_range(getattr(self, name), 0.0, MAX_WEIGHT, f"--{name}")


class Searcher:
    """A BM25 searcher over a cmrkit index: Anserini's queries, scores and order, with whole
    result arrays from cmrkit's Lucene helper (no stored record loaded per hit)."""

    def __init__(self, info: IndexInfo, *, k1: float = 0.9, b: float = 0.4, verbose: bool = False):
        from cmrkit.retrieval.java import java_log_path, jclass, quiet

        check_range(k1, 0.0, MAX_WEIGHT, "BM25 --k1")
        check_range(b, 0.0, 1.0, "BM25 --b")
        self.info = info
        self.k1, self.b = float(k1), float(b)
        self.verbose = verbose
        self._jclass = jclass
        with (
            java_errors(_CANNOT_OPEN, _REBUILD, info.path),
            opening(info),
            quiet(java_log_path(), verbose=verbose),
        ):
            # long contexts (query formulation `context`) exceed Lucene's default 1024 clauses
            jclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(1 << 20)
            self.java = jclass("io.anserini.search.SimpleSearcher")(str(info.path.resolve()))
            self.java.set_bm25(self.k1, self.b)
        self._analyzer = jclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
        self._analyze = jclass("io.anserini.analysis.AnalyzerUtils").analyze
        self._batch: Any = None
        self._batch_threads = 0
        self._table: DocnoTable | None = None
        self._qe: QE | None = None

    def _helper(self, threads: int) -> tuple[Any, DocnoTable]:
        """cmrkit's BatchSearcher on this index with ``threads`` search threads, and the
        index's doc-number table."""
        from cmrkit.retrieval.docnos import load_table
        from cmrkit.retrieval.helper import CLASS
        from cmrkit.retrieval.java import java_log_path, quiet

        if self._batch is not None and self._table is not None and self._batch_threads == threads:
            return self._batch, self._table
        if self._batch is not None:
            self._batch.close()
            self._batch = None
        # opened under the read lock like the searcher: an index rebuilt since is refused
        with (
            java_errors(_CANNOT_OPEN, _REBUILD, self.info.path),
            opening(self.info),
            quiet(java_log_path(), verbose=self.verbose),
        ):
            batch = self._jclass(CLASS)(
                str(self.info.path.resolve()),
                self.java.get_analyzer(),
                self.k1,
                self.b,
                int(threads),
            )
            if self._table is None:
                self._table = load_table(self.info.path, self.info.index_id, batch)
        self._batch, self._batch_threads = batch, threads
        if self._qe is not None:
            batch.setFeedback(self.java)
        return batch, self._table

    def index_fields(self, fields: Mapping[str, float]) -> dict[str, float]:
        """Field weights on the index's own fields (``document`` is ``contents`` in an index
        whose units are each alone in their document)."""
        merged: dict[str, float] = {}
        alias = self.info.manifest["settings"].get("document_is_contents", False)
        for name, weight in fields.items():
            target = "contents" if alias and name == "document" else name
            merged[target] = merged.get(target, 0.0) + weight
        return merged

    def terms(self, text: str) -> list[str]:
        """The index terms of a text (as the query parser sees them)."""
        return [str(t) for t in self._analyze(self._analyzer, text)]

    def set_qe(self, qe: QE | None) -> None:
        self.java.unset_rm3()
        self.java.unset_rocchio()
        self._qe = qe
        if qe is not None:
            qe.check()
            if qe.method == "rm3":
                self.java.set_rm3(
                    None,
                    int(qe.fb_terms),
                    int(qe.fb_docs),
                    float(qe.original_weight),
                    False,
                    bool(qe.filter_terms),
                )
            else:
                self.java.set_rocchio(
                    None,
                    int(qe.fb_terms),
                    int(qe.fb_docs),
                    int(qe.bottom_fb_terms),
                    int(qe.bottom_fb_docs),
                    float(qe.alpha),
                    float(qe.beta),
                    float(qe.gamma),
                    False,
                    bool(qe.use_negative),
                )
        if self._batch is not None:
            self._batch.setFeedback(self.java)

    def feedback_terms(self, text: str) -> dict[str, float]:
        """RM3's expansion terms and weights for a query (RM3 must be set)."""
        batch, _ = self._helper(self._batch_threads or 1)
        terms = batch.feedbackTerms(text)
        if not terms:
            return {}
        return {str(e.getKey()): float(e.getValue()) for e in terms.entrySet().toArray()}

    def search(
        self,
        queries: Mapping[str, str],
        *,
        k: int,
        exclude: Mapping[str, str] | None = None,
        exclude_units: Mapping[str, AbstractSet[str]] | None = None,
        fields: Mapping[str, float] | None = None,
        threads: int = 2,
        progress: Callable[[int], None] | None = None,
        warnings: list[dict[str, str]] | None = None,
    ) -> RankedRun:
        """Rank k units per query (its ``exclude`` unit and ``exclude_units`` left out), in the
        documented order."""
        exclude = exclude or {}
        exclude_units = exclude_units or {}
        batch, table = self._helper(threads)
        jfields = None
        if fields:
            jfields = self._jclass("java.util.HashMap")()
            jfloat = self._jclass("java.lang.Float")
            for name, weight in sorted(self.index_fields(fields).items()):
                if weight > 0:
                    jfields.put(name, jfloat(float(weight)))
        run: RankedRun = {}
        searchable = []
        for qid, text in queries.items():
            if self.terms(text):
                searchable.append(qid)
            elif warnings is not None:
                warnings.append(
                    {
                        "qid": qid,
                        "warning": f"query {text!r} has no index terms "
                        "(only stopwords or punctuation): no results",
                    }
                )
        n = k + 1 + max((len(units) for units in exclude_units.values()), default=0)
        chunk = max(64, 32 * threads)
        done = len(queries) - len(searchable)
        if progress and done:
            progress(done)
        parts = [searchable[i : i + chunk] for i in range(0, len(searchable), chunk)]

        def submit(j: int) -> Any:
            # the next batch runs on the search threads while this thread orders the last one
            if j >= len(parts):
                return None
            return batch.submit([queries[qid] for qid in parts[j]], n, jfields)

        pending = submit(0)
        try:
            for j, part in enumerate(parts):
                following = submit(j + 1)
                try:
                    with java_errors(
                        f"Lucene search failed on queries {part[0]}..{part[-1]}",
                        "rerun with --verbose to see Lucene's log",
                        self.info.path,
                    ):
                        packed = batch.collect(pending)
                finally:
                    pending = following
                self._order(part, packed, run, table, exclude, exclude_units, k, warnings)
                if progress:
                    progress(len(part))
        finally:
            if pending is not None:  # interrupted: the batch submitted ahead is not needed
                batch.cancel(pending)
        return {qid: run[qid] for qid in queries if qid in run}

    @staticmethod
    def _order(
        part: list[str],
        packed: Any,
        run: RankedRun,
        table: DocnoTable,
        exclude: Mapping[str, str],
        exclude_units: Mapping[str, AbstractSet[str]],
        k: int,
        warnings: list[dict[str, str]] | None,
    ) -> None:
        """Put one batch's hits into ``run``: ids from the table, the query's own units left
        out, trec_eval's order, the first k."""
        counts, docs, scores = _unpack(packed, len(part))
        ends = np.cumsum(counts)
        written = written_scores(scores)
        names = table.names[docs]
        order_keys = table.order[docs]
        single = written.astype(np.float32)
        for i, qid in enumerate(part):
            lo, hi = int(ends[i] - counts[i]), int(ends[i])
            keep = names[lo:hi] != exclude.get(qid)
            more = exclude_units.get(qid)
            if more:
                keep &= np.fromiter(
                    (d not in more for d in names[lo:hi]), dtype=bool, count=hi - lo
                )
            idx = np.nonzero(keep)[0] + lo
            # trec_eval's order: score as written (in single precision) descending, then
            # docno descending
            ordered = idx[np.lexsort((order_keys[idx], single[idx]))[::-1]][:k]
            run[qid] = list(zip(names[ordered].tolist(), written[ordered].tolist(), strict=True))
            if not len(idx) and warnings is not None:
                warnings.append(
                    {"qid": qid, "warning": "no unit other than the query's own matches it"}
                )

    def close(self) -> None:
        if self._batch is not None:
            self._batch.close()
            self._batch = None
        self.java.close()


def _unpack(packed: Any, n_queries: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hit counts, doc numbers, float32 scores) from the helper's little-endian byte array."""
    # pyjnius's ByteArray.tostring() copies the array in one call (bytes() goes item by item)
    raw = packed.tostring() if hasattr(packed, "tostring") else bytes(packed)
    data = np.frombuffer(raw, dtype="<i4")
    if int(data[0]) != n_queries:
        raise RuntimeError("the Lucene helper answered for another number of queries")
    counts = data[1 : 1 + n_queries].astype(np.int64)
    total = int(counts.sum())
    docs = data[1 + n_queries : 1 + n_queries + total].astype(np.int64)
    scores = data[1 + n_queries + total : 1 + n_queries + 2 * total].view("<f4")
    return counts, docs, scores


def parse_weights(text: str) -> dict[str, float]:
    """``contents=0.1,entities=1`` -> {field: weight}; unknown fields and bad numbers are errors."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise CmrkitError(
                f"--weights item {part!r} is not FIELD=WEIGHT (e.g. contents=1,document=0.1)"
            )
        name, value = (s.strip() for s in part.split("=", 1))
        if name not in WEIGHTED_FIELDS:
            raise CmrkitError(
                f"unknown field {name!r} in --weights; use {', '.join(FIELDS)} (and, in "
                f"collections that carry them, {', '.join(FEATURE_FIELDS)})"
            )
        try:
            weight = float(value)
        except ValueError:
            raise CmrkitError(
                f"weight {value!r} for field {name!r} in --weights is not a number"
            ) from None
        if not math.isfinite(weight) or weight < 0:
            raise CmrkitError(f"weight {value!r} for field {name!r} must be a number >= 0")
        weights[name] = weight
    return check_weights(weights)


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    for name in weights:
        if name not in WEIGHTED_FIELDS:
            raise CmrkitError(
                f"unknown field {name!r} in the field weights; use {', '.join(FIELDS)} (and, "
                f"in collections that carry them, {', '.join(FEATURE_FIELDS)})"
            )
    if not any(w > 0 for w in weights.values()):
        raise CmrkitError("at least one field weight must be above 0")
    return {name: float(weights[name]) for name in WEIGHTED_FIELDS if name in weights}


def _weights_text(weights: Mapping[str, float]) -> str:
    return ",".join(f"{k}={v:g}" for k, v in weights.items() if v > 0)


def _versions(spacy_model: str | None) -> dict[str, Any]:
    from cmrkit.retrieval.index import _versions as index_versions

    versions: dict[str, Any] = index_versions()
    if spacy_model:
        versions["spacy"] = ner.spacy_version(spacy_model)
    return versions


@dataclass(frozen=True)
class _Query:
    """What ``query``, ``weights`` and ``preset`` choose: the field weights (None: the unit text
    alone), the formulation, the preset used (None when none is) and the formulation the
    system queries with by default, which a run's default name leaves out."""

    fields: dict[str, float] | None
    formulation: str
    preset: str | None = None
    default: str = DEFAULT_QUERY

    @property
    def suffix(self) -> str:
        """What the preset adds to a run's default name (``fields-doc``)."""
        return "" if self.preset is None else f"-{self.preset}"


@dataclass
class _Plan:
    """One Lucene run: the system, its default name and its own parameters."""

    system: str
    name: str
    collection: Path
    formulation: str
    k1: float
    b: float
    fields: dict[str, float] | None = None
    qe: QE | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def named(
        cls,
        system: str,
        base: str,
        collection: str | Path,
        query: _Query,
        k1: float,
        b: float,
        opts: RunOptions,
        **own: Any,
    ) -> _Plan:
        """The plan of a run named ``opts.name``, else ``base`` plus the query formulation when
        it is not the system's default (``bm25-context``), so that another formulation writes
        another file."""
        name = opts.name or (
            base if query.formulation == query.default else f"{base}-{query.formulation}"
        )
        return cls(
            system, name, Path(collection), query.formulation, k1, b, fields=query.fields, **own
        )


def _execute(
    plan: _Plan,
    opts: RunOptions,
    learn: Callable[[Searcher, str, dict], None] | None = None,
) -> RunResult:
    started = time.perf_counter()
    check_formulation(plan.formulation)
    coll = collection_dir(plan.collection)
    split = resolve_split(coll, opts.split)
    topics = _topics(coll, split, plan.formulation)
    info = _index(coll, opts)
    _check_fields_held(info, plan.fields)
    parameters = {
        "query": plan.formulation,
        "k": opts.k,
        "k1": plan.k1,
        "b": plan.b,
        "spacy_model": opts.spacy_model,
        "fields": plan.fields,
        "qe": plan.qe.params() if plan.qe else None,
        **plan.params,
    }
    spec = RunSpec.for_collection(
        opts.runs_dir,
        info.collection,
        system=plan.system,
        name=plan.name,
        split=split,
        parameters=parameters,
        index_id=info.index_id,
        command=rerun_command(opts.argv, opts.split, split),
    )

    def compute() -> Computed:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        queries = formulate(topics, plan.formulation, opts.spacy_model)
        timings["formulate"] = round(time.perf_counter() - t0, 3)
        searcher, engine = _searcher(plan, info, opts)
        extra: dict[str, Any] = {}
        warnings: list[dict[str, str]] = []
        try:
            if learn is not None:
                t0 = time.perf_counter()
                learn(searcher, split, extra)
                timings["learn"] = round(time.perf_counter() - t0, 3)
            searcher.set_qe(plan.qe)
            t0 = time.perf_counter()
            run = _search(searcher, plan, opts, info, topics, queries, split, warnings)
            timings["search"] = round(time.perf_counter() - t0, 3)
        finally:
            searcher.close()
        sidecar = {
            "parameters": {**parameters, "fields": plan.fields},  # learned weights, if any
            "threads": opts.threads,
            "engine": engine,
            **extra,
            "ranking": {
                "own_unit_removed": True,
                "own_document_removed": any(t.exclude_doc for t in topics),
                "tie_break": TIE_BREAK,
            },
            "index": {
                "path": str(info.path),
                "index_id": info.index_id,
                "corpus_sha256": info.corpus_sha256,
            },
            "versions": _versions(
                opts.spacy_model if plan.formulation in ("mention+entities", "sentence") else None
            ),
            "n_queries": len(queries),
            "warnings": warnings,
            "queries": queries,
        }
        return Computed(run, _tag(plan), sidecar, timings)

    return produce_run(spec, compute, force=opts.force, started=started)


def _topics(coll: Path, split: str, formulation: str) -> list[Topic]:
    topics = read_topics(coll, split)
    if formulation == "chain" and not any(t.chain for t in topics):
        raise CmrkitError(
            f"no topic of split {split!r} carries a coreference chain (field 'chain'); chain "
            "queries apply to TAC collections (`cmrkit build-collection --source tac`)",
            path=topics_path(coll),
        )
    return topics


def _index(coll: Path, opts: RunOptions) -> IndexInfo:
    """The collection's index, built (on the run's engine) or rebuilt first when needed."""
    build = None
    if opts.engine.distributed:
        from cmrkit.retrieval.distributed.index import build_sharded

        build = functools.partial(build_sharded, engine=opts.engine)
    return ensure_index(
        coll,
        auto=opts.auto_index,
        threads=opts.threads,
        spacy_model=opts.spacy_model,
        verbose=opts.verbose,
        progress=opts.progress,
        build=build,
    )


def _searcher(plan: _Plan, info: IndexInfo, opts: RunOptions) -> tuple[Any, dict[str, Any]]:
    """A searcher of the index on the run's engine, and the engine's record for the sidecar."""
    if opts.engine.distributed:
        from cmrkit.retrieval.distributed.search import DistributedSearcher

        searcher = DistributedSearcher(
            Searcher, info, k1=plan.k1, b=plan.b, engine=opts.engine, verbose=opts.verbose
        )
        return searcher, searcher.record
    return Searcher(info, k1=plan.k1, b=plan.b, verbose=opts.verbose), {"name": "local"}


def _search(
    searcher: Any,
    plan: _Plan,
    opts: RunOptions,
    info: IndexInfo,
    topics: list[Topic],
    queries: Any,
    split: str,
    warnings: list[dict[str, str]],
) -> Any:
    """Every query searched, each query's own unit (and for TAC its document's units) left
    out, with a progress bar."""
    from cmrkit.console import progress_bar

    with progress_bar(opts.progress, f"{plan.name} {split}") as bar:
        task = bar.add_task("queries", total=len(queries))
        return searcher.search(
            queries,
            k=opts.k,
            exclude={t.qid: t.unit for t in topics},
            exclude_units=own_document_units(info.collection, topics),
            fields=plan.fields,
            threads=opts.threads,
            warnings=warnings,
            progress=lambda n: bar.advance(task, n),
        )


def _check_fields_held(info: IndexInfo, fields: Mapping[str, float] | None) -> None:
    """A weighted field the index lacks would match nothing: refuse rather than write an
    empty run."""
    held = set(info.manifest["settings"]["fields"]) | {"document"}  # document: maybe contents
    for name, weight in (fields or {}).items():
        if weight > 0 and name not in held:
            hint = (
                " (feature fields come from TAC collections: `cmrkit build-collection --source "
                "tac`)"
                if name in FEATURE_FIELDS
                else ""
            )
            raise CmrkitError(
                f"the index has no {name!r} field (its fields: "
                f"{', '.join(info.manifest['settings']['fields'])}){hint}",
                path=info.path,
            )


def _tag(plan: _Plan) -> str:
    parts = [plan.name, f"q={plan.formulation}", f"k1={plan.k1:g}", f"b={plan.b:g}"]
    if plan.fields:
        parts.append(f"w={_weights_text(plan.fields)}")
    if plan.qe:
        p = plan.qe.params()
        if plan.qe.method == "rm3":
            parts.append(f"rm3={p['fb_terms']},{p['fb_docs']},{p['original_weight']:g}")
        else:
            parts.append(f"rocchio={p['fb_terms']},{p['fb_docs']},{p['alpha']:g},{p['beta']:g}")
    return ":".join(parts).replace(" ", "_")


def run_bm25(
    collection: str | Path = "collections/sample",
    *,
    query: str = DEFAULT_QUERY,
    k1: float = 0.9,
    b: float = 0.4,
    options: RunOptions | None = None,
    **overrides: Any,
) -> RunResult:
    """BM25 on the unit text; writes ``RUNS/<collection>/<name>.<split>.trec`` and its sidecar.

    ``options`` holds what every run shares (split, k, name, ...; see :class:`RunOptions`);
    keyword ``overrides`` set single options (``split="dev", k=100``).
    """
    opts = RunOptions.build(options, overrides)
    return _execute(_Plan.named("bm25", "bm25", collection, _Query(None, query), k1, b, opts), opts)


def _resolve_fields(
    weights: str | Mapping[str, float] | None, preset: str | None, query: str | None
) -> _Query:
    """The fields query: ``weights``, else a preset (default ``doc``), whose default
    formulation is the mention text; ``query`` overrides the formulation."""
    if weights is not None and preset is not None:
        raise CmrkitError("give --weights or --preset, not both")
    if preset is not None and preset not in PRESETS:
        raise CmrkitError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if weights is not None:
        w = parse_weights(weights) if isinstance(weights, str) else check_weights(weights)
        return _Query(w, query or DEFAULT_QUERY)
    chosen = preset or "doc"
    return _Query(dict(PRESETS[chosen]), query or PRESET_QUERY, chosen, PRESET_QUERY)


def run_fields(
    collection: str | Path = "collections/sample",
    *,
    weights: str | Mapping[str, float] | None = None,
    preset: str | None = None,
    query: str | None = None,
    learn_weights: bool = False,
    train_split: str = "train",
    measure: str = "map",
    tune_k: int = 100,
    max_rounds: int = 3,
    qrels_dir: str | Path | None = None,
    k1: float = 0.9,
    b: float = 0.4,
    options: RunOptions | None = None,
    **overrides: Any,
) -> RunResult:
    """Multi-field BM25 with per-field weights, a preset (doc, mention) or weights learned on train.

    Without ``weights`` and ``preset`` the ``doc`` preset is used. Presets query with the mention
    text unless ``query`` says otherwise. Shared options as for :func:`run_bm25`.
    """
    opts = RunOptions.build(options, overrides)
    if learn_weights:  # a bad --measure is said before anything else
        from cmrkit.evaluation.scoring import query_scorer

        query_scorer(measure)
    chosen = _resolve_fields(weights, preset, query)
    base_name = "fields-learned" if learn_weights else "fields" + chosen.suffix
    params = {"preset": chosen.preset, "learn_weights": learn_weights}
    plan = _Plan.named("fields", base_name, collection, chosen, k1, b, opts, params=params)
    fields, formulation = chosen.fields, chosen.formulation
    learn = None
    if learn_weights:
        plan.params.update(
            {
                "train_split": train_split,
                "measure": measure,
                "tune_k": tune_k,
                "max_rounds": max_rounds,
                "weight_grid": list(WEIGHT_GRID),
                "initial_weights": dict(fields),
            }
        )

        def learn(searcher: Searcher, split: str, extra: dict[str, Any]) -> None:
            learned, trace = learn_field_weights(
                searcher,
                Path(collection),
                train_split=train_split,
                initial=fields,
                formulation=formulation,
                measure=measure,
                k=tune_k,
                threads=opts.threads,
                max_rounds=max_rounds,
                spacy_model=opts.spacy_model,
                qrels_dir=qrels_dir,
            )
            plan.fields = learned
            extra["learned_weights"] = learned
            extra["learning"] = {
                "trace": trace,
                "qrels": str(
                    qrels_path(
                        Path(collection), train_split, Path(qrels_dir) if qrels_dir else None
                    )
                ),
            }

    return _execute(plan, opts, learn=learn)


def learn_field_weights(
    searcher: Searcher,
    collection: Path,
    *,
    train_split: str,
    initial: Mapping[str, float],
    formulation: str,
    measure: str = "map",
    k: int = 100,
    threads: int = 2,
    max_rounds: int = 3,
    spacy_model: str = DEFAULT_SPACY_MODEL,
    qrels_dir: str | Path | None = None,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Coordinate ascent over ``WEIGHT_GRID`` per field, maximising ``measure`` on train topics.

    Only the fields the index holds are tuned (plus those in ``initial``). A candidate replaces
    the current weights only if it scores strictly higher, so ties keep the earlier weights and
    the search is deterministic. Returns the weights and the trace of (weights, score)
    evaluations in order.
    """
    from cmrkit.evaluation.scoring import query_scorer

    check_range(k, 1, MAX_K, "--tune-k")
    _, scores = query_scorer(measure)
    path = qrels_path(collection, train_split, Path(qrels_dir) if qrels_dir else None)
    if not path.exists():
        raise CmrkitError(
            f"no qrels for the train split {train_split!r}, which --learn-weights "
            "needs; build the collection with a train split or name another with "
            "--train-split",
            path=path,
        )
    qrels = read_qrels(path)
    topics = [t for t in read_topics(collection, train_split) if t.qid in qrels]
    if not topics:
        raise CmrkitError(
            f"no train topic of split {train_split!r} has judgments in the qrels", path=path
        )
    queries = formulate(topics, formulation, spacy_model)
    exclude = {t.qid: t.unit for t in topics}
    judged = {q: qrels[q] for q in exclude}
    # the fields this index really holds (no empty `entities`, no `document` copy of contents)
    settings = searcher.info.manifest["settings"]
    tuned = tuple(
        f
        for f in WEIGHTED_FIELDS
        if (f in settings["fields"] and (f != "entities" or settings.get("entities")))
        or f in initial
    )
    cache: dict[tuple[float, ...], float] = {}
    trace: list[dict[str, Any]] = []

    def score(weights: dict[str, float]) -> float:
        key = tuple(weights.get(f, 0.0) for f in tuned)
        if key not in cache:
            run = searcher.search(queries, k=k, exclude=exclude, fields=weights, threads=threads)
            found = {q: dict(docs) for q, docs in run.items() if docs and q in judged}
            res = scores(found, judged) if found else {}
            value = sum(res.get(q, 0.0) for q in exclude) / len(exclude)
            cache[key] = value
            trace.append(
                {
                    "weights": {f: w for f, w in zip(tuned, key, strict=True)},
                    measure: round(value, 6),
                }
            )
        return cache[key]

    current = {f: float(initial.get(f, 0.0)) for f in tuned}
    best = score(current)
    for _ in range(max_rounds):
        improved = False
        for f in tuned:
            for value in WEIGHT_GRID:
                if value == current[f]:
                    continue
                candidate = dict(current, **{f: value})
                if not any(w > 0 for w in candidate.values()):
                    continue
                s = score(candidate)
                if s > best + 1e-12:
                    best, current, improved = s, candidate, True
        if not improved:
            break
    return {f: w for f, w in current.items() if w > 0}, trace


def run_qe(
    collection: str | Path = "collections/sample",
    *,
    base: str = "bm25",
    query: str | None = None,
    weights: str | Mapping[str, float] | None = None,
    preset: str | None = None,
    feedback: QE | None = None,
    k1: float = 0.9,
    b: float = 0.4,
    options: RunOptions | None = None,
    **overrides: Any,
) -> RunResult:
    """Pseudo-relevance feedback (RM3 or Rocchio) on top of ``bm25`` or ``fields``.

    ``feedback`` holds the expansion's settings (:class:`QE`; default RM3 with its defaults);
    keyword ``overrides`` set single ones (``method="rocchio", fb_docs=5``) or shared options
    as for :func:`run_bm25`.
    """
    own = {f.name for f in dataclasses.fields(QE)}
    opts = RunOptions.build(options, {k: v for k, v in overrides.items() if k not in own})
    qe = with_overrides(QE, feedback, {k: v for k, v in overrides.items() if k in own}, "QE")
    qe.check()
    if base == "bm25":
        if weights is not None or preset is not None:
            raise CmrkitError("--weights and --preset apply to --base fields only")
        chosen, base_name = _Query(None, query or DEFAULT_QUERY), f"qe-{qe.method}"
    elif base == "fields":
        chosen = _resolve_fields(weights, preset, query)
        base_name = f"qe-{qe.method}-fields" + chosen.suffix
    else:
        raise CmrkitError(f"unknown --base {base!r}; choose bm25 or fields")
    params = {"base": base, "preset": chosen.preset}
    plan = _Plan.named("qe", base_name, collection, chosen, k1, b, opts, qe=qe, params=params)
    return _execute(plan, opts)
