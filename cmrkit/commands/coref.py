"""`cmrkit eval-coref`, `cmrkit cluster` and `cmrkit eval-spans`: retrieval scored as
coreference, with the CoNLL-2012 reference scorer's numbers."""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.choices import choices
from cmrkit.commands.output import FORMAT, Format, check_order, coverage, emit, with_warnings
from cmrkit.console import console, out, user_errors
from cmrkit.errors import CmrkitError

CorefFormat = choices("CorefFormat", ("table", "json", "csv"))
Scope = choices("Scope", ("document", "corpus"))  # evaluation.coref.SCOPES
Singletons = choices("Singletons", ("keep", "remove"))  # evaluation.coref.SINGLETONS
Method = choices("Method", ("closure", "average"))  # evaluation.clusters.METHODS


COREF_MEASURE_HELP = (
    "Measures: mentions (identification), muc, bcub (b3), ceafm, ceafe, blanc, lea, conll "
    "(mean F1 of muc, bcub, ceafe), ari, nmi; repeat or separate with commas. Default: all."
)
FORMATS_HELP = (
    "CoNLL-2012 ('#begin document' ... '#end document', coreference last column), cluster "
    'JSON lines ({"cluster": C, "mention_id": M} or {"cluster": C, "doc_id": D, "start": S, '
    '"end": E}, or e2e-coref {"doc_key", "clusters"}), or a JSON list of lists of mention ids.'
)


def register(app: typer.Typer) -> None:
    """Add `eval-coref`, `cluster` and `eval-spans` to the app."""
    app.command("eval-coref")(eval_coref_command)
    app.command("cluster")(cluster_command)
    app.command("eval-spans")(eval_spans_command)


def _coref_table(result, title: str, per_document: bool) -> None:
    from rich.table import Table

    from cmrkit.evaluation.coref import LABELS, perl_percent

    rpf = [m for m in result.measures if m not in ("ari", "nmi", "conll")]
    how = (
        "all documents as one (cross-document)"
        if result.scope == "corpus"
        else "each document on its own, counts summed (as scorer.pl)"
    )
    kept = "kept" if result.singletons == "keep" else "removed"
    caption = (
        f"{result.documents} document(s) scored {how}; singletons {kept}; "
        "percent, truncated to 2 decimals as scorer.pl prints"
    )
    if per_document:
        shown = [m for m in result.measures if m not in ("ari", "nmi")]
        if len(shown) > 5:  # 80 columns: the CoNLL set and LEA; json and csv hold the rest
            shown = [m for m in shown if m in ("muc", "bcub", "ceafe", "lea", "conll")]
            caption += "; F1 of MUC, B3, CEAF-e, LEA, CoNLL here, all in --format json or csv"
        table = Table(title=title, caption=caption)
        table.add_column("document")
        for m in shown:
            table.add_column(f"{LABELS[m]} F1", justify="right")
        for m in ("ari", "nmi"):
            if m in result.measures and len(shown) < 5:
                table.add_column(LABELS[m], justify="right")

        def cells(row) -> list[str]:
            values = [perl_percent(_f1(row[m])) for m in shown]
            if len(shown) < 5:
                values += [f"{row[m]:.4f}" for m in ("ari", "nmi") if m in result.measures]
            return values

        for doc, row in result.per_document.items():
            table.add_row(doc or "(corpus)", *cells(row))
        table.add_section()
        table.add_row("all", *cells(result.total), style="bold")
        out.print(table)
        return
    if rpf or "conll" in result.measures:
        table = Table(title=title, caption=caption)
        table.add_column("measure")
        table.add_column("recall", justify="right")
        table.add_column("precision", justify="right")
        table.add_column("F1", justify="right")
        for m in rpf:
            v = result.total[m]
            table.add_row(
                LABELS[m], perl_percent(v.recall), perl_percent(v.precision), perl_percent(v.f1)
            )
        if "conll" in result.measures:
            table.add_row("CoNLL", "", "", perl_percent(result.total["conll"]), style="bold")
        out.print(table)
    agreement = [m for m in ("ari", "nmi") if m in result.measures]
    if agreement:
        table = Table(title="agreement over the key mentions")
        table.add_column("measure")
        table.add_column("value", justify="right")
        for m in agreement:
            table.add_row(LABELS[m], f"{result.total[m]:.4f}")
        out.print(table)


def _f1(value) -> float:
    return value if isinstance(value, float) else value.f1


@user_errors
def eval_coref_command(
    key: Path = typer.Argument(..., help="The key (gold) clusters. " + FORMATS_HELP),
    response: Path = typer.Argument(..., help="The response (system) clusters, same formats."),
    measure: list[str] = typer.Option(None, "--measure", "-m", help=COREF_MEASURE_HELP),
    singletons: Singletons = typer.Option(
        Singletons.keep,
        "--singletons",
        help="remove: drop one-mention chains from key and response first (as coval's "
        "keep_singletons=False); papers report both.",
    ),
    scope: Scope = typer.Option(
        Scope.document,
        "--scope",
        help="document: score each document on its own and sum the counts (the reference "
        "scorer); corpus: all documents as one, chains crossing documents "
        "(cross-document coreference).",
    ),
    per_document: bool = typer.Option(
        False, "--per-document", help="Also show each document's scores."
    ),
    fmt: CorefFormat = typer.Option(CorefFormat.table, "--format", "-f", help="Output format."),
) -> None:
    """Score coreference clusters: MUC, B3, CEAF-m, CEAF-e, BLANC, LEA, CoNLL F1, ARI, NMI.

    MUC, B3, CEAF and BLANC equal the CoNLL-2012 reference scorer's (scorer.pl v8.01), LEA
    coval's; see docs/coreference.md for the handling of repeated and invented mentions.

    Example: cmrkit eval-coref qrels/sample.test.clusters.jsonl runs/sample/bm25.test.clusters.jsonl
    """  # noqa: E501
    from cmrkit.collection.clusters import read_clustering
    from cmrkit.evaluation.coref import parse_coref_measures, score
    from cmrkit.evaluation.report import coref_to_csv, coref_to_json

    names = parse_coref_measures(measure)
    key_clusters = read_clustering(key)
    response_clusters = read_clustering(response)
    _check_order(key, key_clusters, response, response_clusters)
    result = score(
        key_clusters, response_clusters, names, scope=scope.value, singletons=singletons.value
    )
    if fmt is CorefFormat.table:
        _coref_table(result, f"{key} vs {response}", per_document)
    elif fmt is CorefFormat.json:
        emit(coref_to_json(result, per_document, {"key": str(key), "response": str(response)}))
    else:
        emit(coref_to_csv(result, per_document))
    for note in result.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)


def _check_order(key: Path, key_clusters, response: Path, response_clusters) -> None:
    """Refuse a key and response given the wrong way round when that is certain (the response
    is build-collection's gold clusters, the key a `cmrkit cluster` output over the same
    mentions); warn when it is only likely (the response is gold-shaped, the key is not).

    Swapped, every recall is the precision and the reverse, and nothing else shows it."""
    if response_clusters.records != "gold" or key_clusters.records == "gold":
        return
    why = (
        f"{response} looks like gold clusters (each record carries 'unit' and 'doc_id', as "
        "build-collection writes them beside the qrels)"
    )
    usage = f"the key (gold) comes first: cmrkit eval-coref {response} {key}"
    same = {i for d in key_clusters.documents.values() for i in d.ids} == {
        i for d in response_clusters.documents.values() for i in d.ids
    }
    if key_clusters.records == "plain" and same:
        raise CmrkitError(
            f"key and response are swapped: {why} and {key} like a system's clusters of the "
            f"same mentions (as `cmrkit cluster` writes them); {usage}",
            path=key,
        )
    console.print(
        f"warning: key and response may be swapped: {why} but the key does not; if so, "
        f"recall and precision are exchanged; {usage}",
        markup=False,
        soft_wrap=True,
    )


def _first_line_of(path: Path, qid: str) -> str | None:
    from cmrkit.trec import read_run_rows

    for n, row in read_run_rows(path):
        if row.qid == qid:
            return f"line {n}"
    return None


def _split_of(collection: Path, qids: set[str]) -> str:
    from cmrkit.collection.layout import topic_records, topics_path

    topics = topics_path(collection)
    if not topics.is_file():
        raise CmrkitError("no topics.jsonl to tell the run's split; pass --split", path=topics)
    splits = {t["split"] for t in topic_records(collection) if t["qid"] in qids}
    if len(splits) != 1:
        raise CmrkitError(
            f"the run's queries come from {len(splits)} splits ({', '.join(sorted(splits))}); "
            "pass --split",
            path=topics,
        )
    return splits.pop()


@user_errors
def cluster_command(
    run: Path = typer.Argument(..., help="TREC run over a collection's queries."),
    collection: Path = typer.Option(
        Path("collections/sample"), "--collection", help="The collection folder."
    ),
    threshold: float = typer.Option(
        None, "--threshold", "-t", help="Link a query to results scoring at least this."
    ),
    top: int = typer.Option(None, "--top", min=1, help="Link to the top k results only."),
    method: Method = typer.Option(
        Method.closure,
        "--method",
        help="closure: connected components of the links; average: average-link "
        "agglomerative clustering down to --threshold.",
    ),
    missing_score: float = typer.Option(
        None,
        "--missing-score",
        help="average: the score of a mention pair the run does not link (default: the "
        "lowest link score).",
    ),
    split: str = typer.Option(
        None, "--split", help="The split the run answers (default: from its queries)."
    ),
    key: Path = typer.Option(
        None,
        "--key",
        help="Gold clusters whose mentions are clustered (default: the split's file that "
        "build-collection wrote beside the qrels).",
    ),
    output: Path = typer.Option(
        None, "--output", "-o", help="Clusters JSONL (default: RUN with .clusters.jsonl)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace an output that differs from what this would write."
    ),
) -> None:
    """Turn a run into coreference clusters of the collection's annotated mentions.

    Each query is linked to the mentions of the units it retrieves (at or above --threshold,
    within --top); the links become clusters. Every mention of the key is clustered (alone
    when nothing links it). Score them with `cmrkit eval-coref KEY CLUSTERS`.

    Example: cmrkit cluster runs/sample/bm25.test.trec --collection collections/sample --top 1
    """  # noqa: E501
    from cmrkit.collection.clusters import ID, read_clustering, write_clusters_jsonl
    from cmrkit.evaluation.clusters import ClusterOptions, cluster_links, run_links
    from cmrkit.evaluation.units import gold_clusters_path, read_annotated_units
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.trec import read_run

    opts = ClusterOptions(threshold, top, method.value, missing_score)
    opts.check()
    target = output or run.with_name(run.name.removesuffix(".trec") + ".clusters.jsonl")
    units = read_annotated_units(collection)
    run_data = read_run(run)
    mention_of = units.mention_of_qid()
    for qid in run_data:
        if qid not in mention_of:
            raise CmrkitError(
                f"query {qid!r} is no annotated mention of {collection}; cluster runs over the "
                "collection's own queries",
                path=run,
                where=_first_line_of(run, qid),
            )
    if key is None:
        key = gold_clusters_path(collection, split or _split_of(collection, set(run_data)))
    gold = read_clustering(key)
    if gold.identity != ID:
        raise CmrkitError("the key must identify mentions by mention_id", path=key)
    items = [str(i) for doc in gold.documents.values() for i in doc.ids]
    unit_mentions = {u: [m.mention_id for m in ms] for u, ms in units.mentions.items()}
    links = run_links(run_data, mention_of, unit_mentions, items, opts)
    clusters = cluster_links(links, opts)
    # the same run, key and options give the same bytes: a rerun is up to date (exit 0)
    with RepeatableOutputs([target], force=force) as staged:
        with open(staged.path(target), "w", encoding="utf-8", newline="\n") as f:
            write_clusters_jsonl(
                f,
                (
                    {"cluster": n, "mention_id": m}
                    for n, members in enumerate(clusters, 1)
                    for m in members
                ),
            )
    linked = sum(1 for c in clusters if len(c) > 1)
    done = f"{target} is up to date" if staged.up_to_date else f"wrote {target}"
    console.print(
        f"{done}: {len(links.items)} mentions, {len(links.pairs)} links, "
        f"{len(clusters)} clusters ({linked} with two or more mentions)",
        markup=False,
        soft_wrap=True,
    )
    if links.shared_units:
        console.print(
            f"note: {links.shared_units} linked unit(s) hold several annotated mentions; the "
            "run ranks units, not mentions, so a query is linked to each of them (a collection "
            "built with --unit mention has one mention per unit)",
            markup=False,
            soft_wrap=True,
        )
    console.print(f"score it: cmrkit eval-coref {key} {target}", markup=False, soft_wrap=True)


def _spans_table(result, per_query: bool, title: str) -> None:
    from rich.table import Table

    table = Table(title=title, caption=coverage(result))
    table.add_column("qid" if per_query else "measure")
    if per_query:
        for m in result.measures:
            table.add_column(m.name, justify="right")
        for qid, row in result.per_query.items():
            table.add_row(qid, *(m.format(row[m.name]) for m in result.measures))
        table.add_section()
        table.add_row(
            "all", *(m.format(result.aggregate[m.name]) for m in result.measures), style="bold"
        )
    else:
        table.add_column("all", justify="right")
        for m in result.measures:
            table.add_row(m.name, m.format(result.aggregate[m.name]))
    out.print(table)


def _spans_collection(spans: Path) -> Path:
    """The collection the run beside a spans file was made on (its sidecar's ``collection``),
    else the sample."""
    from cmrkit.retrieval.runfile import read_sidecar, recorded

    suffix = ".spans.jsonl"
    if spans.name.endswith(suffix):
        run = spans.with_name(spans.name[: -len(suffix)] + ".trec")  # the run beside it
        made_on = recorded(read_sidecar(run), "collection")
        if made_on is not None:
            return Path(made_on)
    return Path("collections/sample")


SPANS_USAGE = "usage: cmrkit eval-spans SPANS QRELS (the answer spans first, then the qrels)"


@user_errors
def eval_spans_command(
    spans: Path = typer.Argument(
        ...,
        help='Answer spans, JSON lines {"qid", "docno", "start", "end", "score"} (characters '
        'of the unit, end exclusive) or {"qid", "docno", "text", "score"}.',
    ),
    qrels: Path = typer.Argument(..., help="TREC qrels: which units are relevant."),
    collection: Path | None = typer.Option(
        None,
        "--collection",
        help="The collection folder [default: the one the sidecar of the run beside the "
        "spans names (NAME.SPLIT.json for NAME.SPLIT.spans.jsonl), else collections/sample].",
    ),
    k: list[int] = typer.Option(
        None, "-k", "--k", help="Best of the top k answers (repeatable); default 1 and 10."
    ),
    per_query: bool = typer.Option(
        False, "--per-query", "-q", help="Table format: one row per query."
    ),
    all_queries: bool = typer.Option(
        False,
        "--all-queries",
        help="Average over every qrels query with a relevant unit, 0 when unanswered.",
    ),
    fmt: Format = FORMAT,
) -> None:
    """Score a reader's answer spans with SQuAD exact match and token F1.

    An answer in a relevant unit is compared with the mentions of the query's cluster in
    that unit (the best match counts); elsewhere it scores 0.

    Example: cmrkit eval-spans answers.jsonl qrels/sample.test.txt --collection collections/sample -k 1 -k 5
    """  # noqa: E501
    check_order([(spans, "JSON lines"), (qrels, "qrels")], SPANS_USAGE)
    from cmrkit import evaluation
    from cmrkit.evaluation.spans import evaluate_spans, read_span_run, span_measures
    from cmrkit.evaluation.units import read_annotated_units
    from cmrkit.trec import read_qrels

    measures = span_measures(k or [1, 10])
    units = read_annotated_units(collection or _spans_collection(spans))
    qrels_data = with_warnings(lambda: read_qrels(qrels))
    run = read_span_run(spans, units)
    result = evaluate_spans(run, qrels_data, units, measures, all_queries=all_queries)
    if fmt is Format.table:
        _spans_table(result, per_query, title=f"{spans} vs {qrels}")
        return
    if fmt is Format.json:
        emit(evaluation.result_to_json(result, None, {"spans": str(spans), "qrels": str(qrels)}))
    elif fmt is Format.csv:
        emit(evaluation.result_to_csv(result, None))
    else:
        emit(evaluation.result_to_trec(result, None))
    console.print(coverage(result), markup=False, soft_wrap=True)
