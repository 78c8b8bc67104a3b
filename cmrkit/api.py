"""The Python API: runs, qrels, topics and collections as pandas DataFrames; evaluate, compare.

Columns follow the conventions of PyTerrier and ir_measures users: a run is ``qid, docno,
score, rank``; qrels are ``qid, docno, label``; topics are ``qid, query`` (the mention text)
plus the topic's other fields. Wherever a run or qrels is taken, a path, a DataFrame (with
those columns, or ir_measures' ``query_id, doc_id, score`` / ``relevance``) or a dict
(``{qid: {docno: score}}``, ``{qid: {docno: label}}``) will do. :func:`evaluate` and
:func:`compare` compute exactly what ``cmrkit eval`` and ``cmrkit compare`` print: the
values are the same floats, their ``repr`` the same text as the CLI's CSV.

pandas is imported when a function is called, never when ``cmrkit`` is imported.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from cmrkit.comparison import COMPARE
from cmrkit.errors import CmrkitError

if TYPE_CHECKING:
    import pandas as pd

    from cmrkit.trec import Qrels, Run, RunColumns

RunLike = Union[str, os.PathLike, "pd.DataFrame", Mapping[str, Mapping[str, float]]]
QrelsLike = Union[str, os.PathLike, "pd.DataFrame", Mapping[str, Mapping[str, int]]]

_RUN_COLUMNS = (("qid", "query_id"), ("docno", "doc_id"), ("score", "score"))
_QRELS_COLUMNS = (("qid", "query_id"), ("docno", "doc_id"), ("label", "relevance"))


def _pandas():
    try:
        import pandas as pd
    except ImportError:
        raise CmrkitError("the Python API needs pandas; pip install pandas") from None
    return pd


def _is_path(value: object) -> bool:
    return isinstance(value, str | os.PathLike)


def _columns(df: pd.DataFrame, names: tuple[tuple[str, str], ...], what: str) -> list[str]:
    chosen = []
    for ours, theirs in names:
        if ours in df.columns:
            chosen.append(ours)
        elif theirs in df.columns:
            chosen.append(theirs)
        else:
            wanted = ", ".join(n for n, _ in names)
            raise CmrkitError(
                f"the {what} DataFrame has no column {ours!r} (or {theirs!r}); it needs "
                f"{wanted} (has {', '.join(map(str, df.columns))})"
            )
    return chosen


def _run_dict(run: RunLike, *, dedupe: bool = False) -> Run | RunColumns:
    """A run in the form the scorer takes, read exactly as ``cmrkit eval`` reads it."""
    from cmrkit.trec import read_run_columns

    if _is_path(run):
        return read_run_columns(run, dedupe=dedupe)
    pd = _pandas()
    if isinstance(run, pd.DataFrame):
        q, d, s = _columns(run, _RUN_COLUMNS, "run")
        out: dict[str, dict[str, float]] = {}
        for qid, docno, score in zip(
            run[q].astype(str), run[d].astype(str), run[s].astype(float), strict=True
        ):
            docs = out.setdefault(qid, {})
            if docno in docs:
                if not dedupe:
                    raise CmrkitError(
                        f"the run retrieves {docno} twice for query {qid}; pass dedupe=True to "
                        "keep the best score"
                    )
                score = max(score, docs[docno])
            docs[docno] = score
        if not out:
            raise CmrkitError("the run DataFrame is empty")
        return out
    if isinstance(run, Mapping):
        return {str(q): {str(d): float(s) for d, s in docs.items()} for q, docs in run.items()}
    raise CmrkitError(f"a run is a path, a DataFrame or a dict, not {type(run).__name__}")


def _qrels_dict(qrels: QrelsLike) -> Qrels:
    """Qrels as {qid: {docno: label}}, read exactly as ``cmrkit eval`` reads them."""
    from cmrkit.trec import read_qrels

    if _is_path(qrels):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # identical duplicate lines: the CLI prints a note
            return read_qrels(qrels)
    pd = _pandas()
    if isinstance(qrels, pd.DataFrame):
        q, d, label = _columns(qrels, _QRELS_COLUMNS, "qrels")
        out: dict[str, dict[str, int]] = {}
        for qid, docno, rel in zip(
            qrels[q].astype(str), qrels[d].astype(str), qrels[label], strict=True
        ):
            if float(rel) != int(rel):
                raise CmrkitError(
                    f"qrels label {rel!r} (query {qid}, {docno}) is not a whole number"
                )
            docs = out.setdefault(qid, {})
            if docno in docs and docs[docno] != int(rel):
                raise CmrkitError(
                    f"query {qid} document {docno} is judged {docs[docno]} and {int(rel)}; "
                    "keep one judgment"
                )
            docs[docno] = int(rel)
        if not out:
            raise CmrkitError("the qrels DataFrame is empty")
        return out
    if isinstance(qrels, Mapping):
        return {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    raise CmrkitError(f"qrels are a path, a DataFrame or a dict, not {type(qrels).__name__}")


def read_run(run: RunLike, *, dedupe: bool = False) -> pd.DataFrame:
    """A run as a DataFrame ``qid, docno, score, rank``: queries in file order, each ranked
    as trec_eval ranks it (score descending, ties by docno descending), ``rank`` from 1.

    >>> run = cmrkit.read_run("runs/sample/bm25.test.trec")
    """
    from cmrkit.trec import ranked

    pd = _pandas()
    data = _run_dict(run, dedupe=dedupe)
    if not isinstance(data, dict):
        data = data.to_run()
    rows = [
        (qid, docno, score, rank)
        for qid, docs in data.items()
        for rank, (docno, score) in enumerate(ranked(docs), 1)
    ]
    return pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])


def read_qrels(qrels: QrelsLike) -> pd.DataFrame:
    """Qrels as a DataFrame ``qid, docno, label`` in file order (label < 0: pooled, unjudged).

    >>> qrels = cmrkit.read_qrels("qrels/sample.test.txt")
    """
    pd = _pandas()
    data = _qrels_dict(qrels)
    rows = [(qid, docno, rel) for qid, docs in data.items() for docno, rel in docs.items()]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"])


def read_topics(topics: str | os.PathLike, split: str | None = None) -> pd.DataFrame:
    """Topics as a DataFrame ``qid, query, ...``: from a collection folder or its
    ``topics.jsonl`` (every field: split, cluster, mention, span, context, unit, ...), a
    ``qid<TAB>text`` TSV, or a CMR queries file (type, mention_id). ``split`` keeps one split.

    >>> topics = cmrkit.read_topics("collections/sample", split="test")
    """
    import cmrkit.collection.layout as layout
    from cmrkit.tac import cmr
    from cmrkit.trec import read_topics_tsv

    pd = _pandas()
    path = Path(topics)
    if path.is_dir() or path.name.endswith(".jsonl"):
        folder = path if path.is_dir() else path.parent
        if path.is_dir():
            layout.collection_dir(path)
        records = layout.topic_records(folder) if path.is_dir() else _jsonl_topics(path)
        df = pd.DataFrame(records)
        df.insert(1, "query", df["mention"] if "mention" in df.columns else "")
    elif cmr.is_cmr_queries_file(path):
        qs = cmr.read_cmr_queries(path, check_ends=False).values()
        df = pd.DataFrame(
            [(q.qid, q.text, q.type, q.mention_id, q.doc_id) for q in qs],
            columns=["qid", "query", "type", "mention_id", "doc_id"],
        )
    else:
        df = pd.DataFrame(list(read_topics_tsv(path).items()), columns=["qid", "query"])
    if split is not None:
        if "split" not in df.columns:
            raise CmrkitError("these topics have no split field; leave out split", path=path)
        known = sorted(set(df["split"]))
        df = df[df["split"] == split].reset_index(drop=True)
        if df.empty:
            raise CmrkitError(
                f"no topics in split {split!r} (splits: {', '.join(known)})", path=path
            )
    return df


def _jsonl_topics(path: Path) -> list[dict[str, Any]]:
    from cmrkit.fileio import iter_jsonl

    records = [rec for _, rec in iter_jsonl(path, what="one topic object per line")]
    if not records:
        raise CmrkitError("no topics in the file", path=path)
    return records


@dataclass
class Collection:
    """A built collection: its manifest, and its topics, qrels and corpus as DataFrames (the
    corpus is read on first use)."""

    name: str
    path: Path
    manifest: dict[str, Any]
    topics: pd.DataFrame
    qrels: pd.DataFrame

    @property
    def splits(self) -> list[str]:
        from cmrkit.collection.layout import split_order

        return split_order(set(self.topics["split"]))

    @cached_property
    def corpus(self) -> pd.DataFrame:
        """``docno, text, title, doc_id, kind, mentions, passage`` per unit, in corpus order."""
        from cmrkit.collection.layout import iter_corpus

        pd = _pandas()
        rows = [
            (
                rec["id"],
                rec["contents"],
                rec.get("title"),
                rec.get("doc_id"),
                rec.get("kind"),
                rec.get("mentions", []),
                rec.get("passage"),
            )
            for _, rec in iter_corpus(self.path)
        ]
        return pd.DataFrame(
            rows, columns=["docno", "text", "title", "doc_id", "kind", "mentions", "passage"]
        )


def load_collection(
    collection: str | os.PathLike,
    *,
    split: str | None = None,
    qrels_dir: str | os.PathLike | None = None,
) -> Collection:
    """A collection folder's topics and qrels (``qid, docno, label, split``) as DataFrames, its
    manifest, and its corpus on first use; ``split`` keeps one split's topics and qrels.

    >>> col = cmrkit.load_collection("collections/sample", split="test")
    """
    import cmrkit.collection.layout as layout

    pd = _pandas()
    folder = layout.collection_dir(collection)
    topics = read_topics(folder, split=split)
    frames = []
    for s in layout.split_order(set(topics["split"])):
        path = layout.qrels_file(folder, s, qrels_dir)
        if path is None:
            continue
        df = read_qrels(path)
        df["split"] = s
        frames.append(df)
    qrels = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["qid", "docno", "label", "split"])
    )
    return Collection(
        name=folder.resolve().name,
        path=folder,
        manifest=layout.read_manifest(folder),
        topics=topics,
        qrels=qrels,
    )


def evaluate(
    run: RunLike,
    qrels: QrelsLike,
    measures: Sequence[str] | str | None = None,
    *,
    all_queries: bool = False,
    depth: int | None = None,
    dedupe: bool = False,
    topics: str | os.PathLike | None = None,
    by: str | None = None,
    trec_eval: str = "10",
) -> pd.DataFrame:
    """Score a run: a DataFrame ``qid, measure, value, trec_eval`` with one row per query and
    measure (``trec_eval`` names the version whose numbers these are: "10.0" or "9.0.8",
    chosen by ``trec_eval="10"`` or ``"9"``),
    then the aggregates (qid ``all``), as ``cmrkit eval -f csv`` writes them. With ``topics``
    and ``by`` (a topics field such as ``type``) a ``group`` column comes first and each
    group's aggregate rows follow the queries. Measures in ir_measures syntax (default: the
    CLI's set); ``all_queries`` is trec_eval ``-c``, ``depth`` trec_eval ``-M``.

    >>> cmrkit.evaluate(run, qrels, ["AP", "RR@10"]).query("qid == 'all'")
    """
    import cmrkit.evaluation as evaluation

    pd = _pandas()
    if (topics is None) != (by is None):
        raise CmrkitError("by and topics go together: give the topics file and the field")
    from cmrkit.evaluation.measures import RANKING, TREC_EVAL, resolve
    from cmrkit.evaluation.measures.trec import VERSION_NAMES

    engine = RANKING if topics is not None else None
    plan = resolve(measures, trec_eval, engine=engine)
    if plan.engine == TREC_EVAL:
        return _evaluate_trec(pd, run, qrels, plan, all_queries, depth, dedupe)
    ms = list(plan.measures)
    result = evaluation.evaluate(
        _run_dict(run, dedupe=dedupe),
        _qrels_dict(qrels),
        ms,
        all_queries=all_queries,
        depth=depth,
        version=trec_eval,
    )
    groups = None
    if topics is not None:
        groups = evaluation.by_group(result, evaluation.load_groups(topics, by))
    rows: list[tuple] = []
    member = {q: g.group for g in groups or [] for q in g.queries}
    lead = (lambda q: (member[q],)) if groups is not None else (lambda q: ())
    for qid, row in result.per_query.items():
        rows.extend((*lead(qid), qid, m.name, row[m.name]) for m in result.measures)
    for g in groups or []:
        rows.extend((g.group, "all", m.name, g.aggregate[m.name]) for m in result.measures)
    everyone = ("all",) if groups is not None else ()
    rows.extend((*everyone, "all", m.name, result.aggregate[m.name]) for m in result.measures)
    columns = (["group"] if groups is not None else []) + ["qid", "measure", "value"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["trec_eval"] = VERSION_NAMES[trec_eval]
    return frame


def _evaluate_trec(pd, run, qrels, plan, all_queries, depth, dedupe):
    """:func:`evaluate` for trec_eval's own names (``P.5,10``, ``all_trec``, ``set_F.0.5``):
    the trec_eval port, rows named as trec_eval prints them."""
    from cmrkit.evaluation import trec_eval as te
    from cmrkit.evaluation.measures import trec as defs

    version = plan.version
    opts = te.Options(version=version, complete=all_queries)
    if depth is not None:
        opts.max_docs = depth
    run_dict = _run_dict(run, dedupe=dedupe)
    if not isinstance(run_dict, dict):  # a file read as columns
        run_dict = run_dict.to_run()
    results = te.Results.of(run_dict, version)
    rel_info = te.RelInfo("qrels", qrels={q: dict(d) for q, d in _qrels_dict(qrels).items()})
    result = te.evaluate(results, rel_info, plan.columns, opts)
    rows = [
        (qid, name, value)
        for qid in result.queries
        for name, value in zip(result.names, result.per_query[qid], strict=True)
    ]
    for name, value, col in zip(result.names, result.summary, result.value_columns, strict=True):
        if col.family.summary != defs.NO_SUMMARY:
            rows.append(("all", name, value))
    frame = pd.DataFrame(rows, columns=["qid", "measure", "value"])
    frame["trec_eval"] = defs.VERSION_NAMES[version]
    return frame


def compare(
    runs: Mapping[str, RunLike] | Sequence[str | os.PathLike],
    qrels: QrelsLike,
    measures: Sequence[str] | str | None = None,
    *,
    baseline: str | None = None,
    test: str = "t",
    correction: str = "holm",
    alpha: float = COMPARE.alpha,
    all_queries: bool = False,
    depth: int | None = None,
    permutations: int = COMPARE.permutations,
    seed: int = COMPARE.seed,
    dedupe: bool = False,
    ci: float = COMPARE.ci,
    bootstrap: int = COMPARE.bootstrap,
    all_pairs: bool = False,
) -> pd.DataFrame:
    """Systems against a baseline (the first run unless named), as ``cmrkit compare -f csv``:
    one row per system and measure with ``value`` (the mean over the compared queries) and its
    bootstrap interval (``value_low``, ``value_high``), ``delta`` with its interval
    (``delta_low``, ``delta_high``), ``d_z``, ``paired_queries``, ``improved``, ``hurt``, ``p``,
    ``p_adjusted``, ``significant``, ``versus``, ``test`` and ``note`` (empty for the
    baseline); with ``all_pairs``, Tukey's HSD rows (``test`` ``tukey``) follow. ``runs`` is
    {name: run} or a list of run files (named by file). Every system and the baseline are
    averaged over the same queries (``paired_queries``: those in the qrels and in the runs,
    which must score the same ones, or with ``all_queries`` every qrels query).

    >>> cmrkit.compare(["runs/sample/bm25.test.trec", "runs/sample/qe.test.trec"], qrels)
    """
    import cmrkit.evaluation as evaluation
    from cmrkit.evaluation import report

    pd = _pandas()
    if isinstance(runs, Mapping):
        named = {str(k): v for k, v in runs.items()}
    else:
        paths = list(runs)
        if not all(_is_path(p) for p in paths):
            raise CmrkitError("give runs as {name: run} when they are not all file paths")
        named = dict(zip(evaluation.run_names(paths), paths, strict=True))
    if baseline is not None and baseline not in named:
        for name, value in named.items():
            if _is_path(value) and Path(baseline) == Path(value):
                baseline = name
    comp = evaluation.compare(
        {name: _run_dict(r, dedupe=dedupe) for name, r in named.items()},
        _qrels_dict(qrels),
        [measures] if isinstance(measures, str) else measures,
        baseline=baseline,
        test=test,
        correction=correction,
        alpha=alpha,
        all_queries=all_queries,
        depth=depth,
        permutations=permutations,
        seed=seed,
        ci=ci,
        bootstrap=bootstrap,
        all_pairs=all_pairs,
    )
    columns = list(report.COMPARISON_COLUMNS)
    df = pd.DataFrame(report.comparison_rows(comp), columns=columns)
    floats = ["value", "delta", "p", "p_adjusted", "value_low", "value_high", "delta_low",
              "delta_high", "d_z"]  # fmt: skip
    df[floats] = df[floats].astype("float64")  # None -> NaN
    # the baseline has no counts or verdict: nullable columns keep the others' dtypes
    return df.astype({"improved": "Int64", "hurt": "Int64", "significant": "boolean"})
