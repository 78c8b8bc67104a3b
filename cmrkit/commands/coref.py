"""`cmrkit eval-coref`, `cmrkit cluster` and `cmrkit eval-spans`: retrieval scored as
coreference, with the CoNLL-2012 reference scorer's numbers."""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.choices import Device, choices
from cmrkit.commands.output import FORMAT, Format, check_order, coverage, emit, with_warnings
from cmrkit.console import console, out, user_errors
from cmrkit.coref.options import EMBEDDING_BATCH, JACCARD, TOPIC_THRESHOLD
from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

CorefFormat = choices("CorefFormat", ("table", "json", "csv"))
Scope = choices("Scope", ("document", "corpus"))  # evaluation.coref.SCOPES
Singletons = choices("Singletons", ("keep", "remove"))  # evaluation.coref.SINGLETONS
# evaluation.clusters.METHODS (a run's), then coref.options.METHODS (a collection's)
Method = choices("Method", ("closure", "average", "lemma", "head-lemma", "lh", "embedding"))
Within = choices("Within", ("corpus", "topic", "subtopic", "predicted"))  # coref.options.WITHIN
Lemmas = choices("Lemmas", ("mention", "sentence"))  # coref.options.LEMMAS
GoldSingletons = choices("GoldSingletons", ("keep", "drop"))  # coref.options.SINGLETONS
Protocol = choices("Protocol", ("papers", "ucdcr"))  # evaluation.coref_table.PROTOCOLS
TableSingletons = choices("TableSingletons", ("both", "with", "without"))
RUN_METHODS = ("closure", "average")
COLLECTION = "Collections (--method lemma, head-lemma, lh, embedding)"


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
    app.command("coref-table")(coref_table_command)
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


def _coll(default, flag: str, text: str, **kw):
    """An option of clustering a collection's mentions, in its help panel."""
    return typer.Option(default, flag, help=text, rich_help_panel=COLLECTION, **kw)


@user_errors
def cluster_command(
    run: Path = typer.Argument(
        ...,
        metavar="RUN|COLLECTION",
        help="A TREC run over a collection's queries (--method closure, average), or a "
        "collection, its folder or bare name (--method lemma, head-lemma, lh, embedding: no "
        "run).",
    ),
    collection: Path = typer.Option(
        Path("collections/sample"), "--collection", help="The collection folder."
    ),
    threshold: float = typer.Option(
        None,
        "--threshold",
        "-t",
        help="A run's: link a query to results scoring at least this. embedding: the cosine "
        "down to which average link merges [default: the model's, tuned on dev].",
    ),
    top: int = typer.Option(None, "--top", min=1, help="Link to the top k results only."),
    method: Method | None = typer.Option(
        None,
        "--method",
        help="A run's: closure (default: connected components of the links), average "
        "(average-link agglomerative clustering down to --threshold). A collection's: lemma "
        "(equal lemma sequences, Hsu & Horwood), head-lemma (equal head lemmas), lh (Ahmed et "
        "al.'s lemma heuristic), embedding (the mentions encoded by --model, average link down "
        "to --threshold).",
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
    within: Within = _coll(
        Within.topic,
        "--within",
        "Where mentions may join: corpus, topic or subtopic (the corpus's gold ones), "
        "predicted (documents clustered into topics first).",
    ),
    lemmas: Lemmas = _coll(
        Lemmas.mention,
        "--lemmas",
        "lemma: lemmatize each mention's text alone (mention), or read each token's lemma "
        "from its parsed sentence (sentence).",
    ),
    topic_threshold: float = _coll(
        TOPIC_THRESHOLD,
        "--topic-threshold",
        "predicted: the TF-IDF cosine above which documents share a topic (-1 to 1).",
    ),
    jaccard: float = _coll(
        JACCARD, "--jaccard", "lh: the sentences' lemma Jaccard a link needs (0 to 1)."
    ),
    gold_singletons: GoldSingletons = _coll(
        GoldSingletons.keep,
        "--gold-singletons",
        "drop: leave out the mentions of gold singleton chains before clustering (uCDCR).",
    ),
    train_split: str = _coll("train", "--train-split", "lh: the split of coreferent lemmas."),
    spacy_model: str = _coll(DEFAULT_SPACY_MODEL, "--spacy-model", "Installed spaCy model."),
    model: Path = _coll(
        None, "--model", "embedding: a model folder written by `cmrkit train coref`."
    ),
    device: Device = _coll(Device.auto, "--device", "embedding: cpu, cuda or auto."),
    batch_size: int = _coll(EMBEDDING_BATCH, "--batch-size", "embedding: mentions per batch."),
) -> None:
    """Turn a run, or a collection's mentions, into coreference clusters.

    A run: each query is linked to the mentions of the units it retrieves (at or above
    --threshold, within --top); the links become clusters. Every mention of the key is
    clustered (alone when nothing links it). Score them with `cmrkit eval-coref KEY CLUSTERS`.

    A collection: the split's mentions clustered by --method within --within; written to
    runs/NAME/METHOD.WITHIN.SPLIT.clusters.jsonl with a .json sidecar. Score them with
    `cmrkit coref-table KEY CLUSTERS...`.

    Example: cmrkit cluster runs/sample/bm25.test.trec --collection collections/sample --top 1

    Example: cmrkit cluster ecbplus --split test --method lemma --within topic

    Example: cmrkit cluster ecbplus --split test --method embedding --model models/coref
    """  # noqa: E501
    from cmrkit.collection.layout import bare_name

    if bare_name(run).is_dir() or (method is not None and method.value not in RUN_METHODS):
        from cmrkit.coref.options import ClusterOptions

        embedding = method is not None and method.value == "embedding"
        unused = [
            flag
            for flag, value in (
                ("--threshold", None if embedding else threshold),
                ("--top", top),
                ("--key", key),
            )
            if value is not None
        ]
        if missing_score is not None:
            unused.append("--missing-score")
        _cluster_collection(
            run,
            ClusterOptions(
                method=method.value if method is not None else "",
                within=within.value,
                lemmas=lemmas.value,
                topic_threshold=topic_threshold,
                jaccard=jaccard,
                gold_singletons=gold_singletons.value,
                train_split=train_split,
                spacy_model=spacy_model,
                model=str(model) if model is not None else None,
                threshold=threshold if embedding else None,
                device=device.value,
                batch_size=batch_size,
            ),
            split,
            output,
            force,
            unused,
        )
        return
    method = method or Method.closure
    if model is not None:
        raise CmrkitError(
            "--model is for --method embedding on a collection; a run is clustered by "
            "closure or average"
        )
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


def _cluster_collection(
    collection: Path, opts, split: str | None, output: Path | None, force: bool, unused: list
) -> None:
    """`cmrkit cluster COLLECTION --method M`: the split's mentions clustered, written with a
    sidecar naming how."""
    import dataclasses
    import json

    from cmrkit._version import __version__
    from cmrkit.collection.clusters import write_clusters_jsonl
    from cmrkit.collection.layout import collection_dir, resolve_split
    from cmrkit.commands.build import _progress
    from cmrkit.fileio import RepeatableOutputs

    if not opts.method:
        raise CmrkitError(
            "a collection is clustered by --method lemma, head-lemma, lh or embedding (closure "
            "and average cluster a run)",
            path=collection,
        )
    if unused:
        raise CmrkitError(
            f"{', '.join(unused)}: for clustering a run; --method {opts.method} takes none"
        )
    opts.check()
    folder = collection_dir(collection)
    split = resolve_split(folder, split)
    name = folder.resolve().name
    target = output or Path("runs") / name / f"{opts.method}.{opts.within}.{split}.clusters.jsonl"
    sidecar = target.with_name(target.name.removesuffix(".jsonl") + ".json")
    from cmrkit.coref.cluster import cluster_split, prepare

    ready = prepare(folder, split, opts)
    with _progress() as progress:
        done = cluster_split(ready, progress=progress)
    purity = done.scope.purity(done.mentions) if done.scope.topics is not None else None
    record = {
        "collection": str(folder),
        "split": split,
        "method": opts.method,
        "within": opts.within,
        "options": dataclasses.asdict(opts),
        "mentions": len(done.mentions.mentions),
        "clusters": len(done.clusters),
        "predicted_topics": purity,
        **done.record,
        "cmrkit_version": __version__,
    }
    with RepeatableOutputs([target, sidecar], force=force) as staged:
        with open(staged.path(target), "w", encoding="utf-8", newline="\n") as f:
            write_clusters_jsonl(
                f,
                (
                    {"cluster": n, "mention_id": m}
                    for n, members in enumerate(done.clusters, 1)
                    for m in members
                ),
            )
        with open(staged.path(sidecar), "w", encoding="utf-8", newline="\n") as f:
            f.write(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    linked = sum(1 for c in done.clusters if len(c) > 1)
    state = f"{target} is up to date" if staged.up_to_date else f"wrote {target}"
    console.print(
        f"{state}: {len(done.mentions.mentions):,} {split} mentions, {len(done.clusters):,} "
        f"clusters ({linked:,} with two or more) by {opts.method} within {opts.within}, "
        f"{len(done.scope.groups):,} group(s), in {done.seconds:.1f} s",
        markup=False,
        soft_wrap=True,
    )
    if purity:
        console.print(
            f"predicted topics: {int(purity['predicted_topics'])} for "
            f"{int(purity['gold_topics'])} gold topics over {int(purity['documents'])} "
            f"documents; purity {purity['purity']:.3f}, inverse purity "
            f"{purity['inverse_purity']:.3f}",
            markup=False,
            soft_wrap=True,
        )
    for note in done.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    from cmrkit.evaluation.units import gold_clusters_path

    key = gold_clusters_path(folder, split)
    console.print(f"score it: cmrkit coref-table {key} {target}", markup=False, soft_wrap=True)


def _response_label(path: Path, label: str | None) -> tuple[str, str]:
    """A response's (system, scope): from the sidecar `cmrkit cluster` wrote beside it, else
    the file name; ``--label`` names the system."""
    import json

    sidecar = path.with_name(path.name.removesuffix(".jsonl") + ".json")
    system, scope = path.name.removesuffix(".jsonl").removesuffix(".clusters"), ""
    try:
        recorded = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    if isinstance(recorded, dict) and isinstance(recorded.get("method"), str):
        system, scope = recorded["method"], str(recorded.get("within", ""))
    return (label or system), scope


def _subtopics(key: Path) -> dict[str, str]:
    """mention id -> subtopic, from the gold clusters' ``subtopic`` fields."""
    from cmrkit.fileio import iter_jsonl

    found: dict[str, str] = {}
    for _, rec in iter_jsonl(key, what="one mention record per line"):
        if rec.get("subtopic") is not None and rec.get("mention_id") is not None:
            found[str(rec["mention_id"])] = str(rec["subtopic"])
    return found


def _papers_table(rows, title: str) -> None:
    from cmrkit.commands.tables import Table, render
    from cmrkit.evaluation.coref import LABELS, perl_percent
    from cmrkit.evaluation.coref_table import TABLE_MEASURES

    heads = ["system", "scope", "singletons"]
    for m in TABLE_MEASURES:
        heads += [f"{LABELS[m]} R", f"{LABELS[m]} P", f"{LABELS[m]} F1"]
    heads.append("CoNLL F1")
    table = Table(
        title,
        heads,
        keys=3,
        caption="percent, truncated to 2 decimals as scorer.pl prints; all documents as one; "
        "without: singleton chains removed from key and response after clustering",
    )
    for r in rows:
        cells = [r.system, r.scope, r.singletons]
        for m in TABLE_MEASURES:
            c = r.scores[m]
            cells += [perl_percent(c.recall), perl_percent(c.precision), perl_percent(c.f1)]
        cells.append(perl_percent(r.conll))
        table.add_row(*cells)
    render(table, out)


def _ucdcr_table(rows, means, title: str) -> None:
    from cmrkit.commands.tables import Table, render

    table = Table(
        title,
        ["subtopic", "mentions", "MUC F1", "B3 F1", "CEAF-e F1", "CoNLL F1"],
        caption="uCDCR's protocol: gold singletons left out, each subtopic scored alone, F1 "
        "rounded to 2 decimals, CoNLL their mean (3); the last row the mean over subtopics",
    )
    for r in rows:
        table.add_row(
            r.subtopic,
            f"{r.mentions:,}",
            *(f"{r.f1[m]:.2f}" for m in ("muc", "bcub", "ceafe")),
            f"{r.conll:.3f}",
        )
    table.add_section()
    table.add_row(
        f"mean of {int(means['subtopics'])}",
        "",
        *(f"{means[m]:.3f}" for m in ("muc", "bcub", "ceafe")),
        f"{means['conll']:.3f}",
        style="bold",
    )
    render(table, out)


@user_errors
def coref_table_command(
    key: Path = typer.Argument(..., help="The key (gold) clusters. " + FORMATS_HELP),
    responses: list[Path] = typer.Argument(
        ..., help="The responses (system clusters), one row each; same formats."
    ),
    label: list[str] = typer.Option(
        None,
        "--label",
        "-l",
        help="The system name of each response, in order (default: the method its sidecar "
        "records, else its file name).",
    ),
    singletons: TableSingletons = typer.Option(
        TableSingletons.both,
        "--singletons",
        help="Rows with singletons (the reference scorer as it is), without (singleton chains "
        "removed from key and response after clustering, as coval's keep_singletons=False), "
        "or both.",
    ),
    protocol: Protocol = typer.Option(
        Protocol.papers,
        "--protocol",
        help="papers: MUC, B3, CEAF-e, LEA (R/P/F1) and CoNLL F1, a row per system, scope and "
        "singletons; ucdcr: uCDCR's per-subtopic table of one response (gold singletons left "
        "out, each subtopic alone, F1 rounded to 2 decimals, the mean over subtopics).",
    ),
    fmt: CorefFormat = typer.Option(CorefFormat.table, "--format", "-f", help="Output format."),
) -> None:
    """Print the table cross-document coreference papers print, for one or more clusterings.

    Scores are the reference scorer's (scorer.pl v8.01; LEA as coval), all documents as one.

    Example: cmrkit coref-table qrels/ecbplus.test.clusters.jsonl
    runs/ecbplus/lemma.topic.test.clusters.jsonl runs/ecbplus/lemma.corpus.test.clusters.jsonl

    Example: cmrkit coref-table qrels/ucdcr-ecbplus.dev.clusters.jsonl
    runs/ucdcr-ecbplus/head-lemma.subtopic.dev.clusters.jsonl --protocol ucdcr
    """
    from cmrkit.collection.clusters import read_clustering
    from cmrkit.evaluation import coref_table as ct

    if label and len(label) > len(responses):
        raise CmrkitError(f"{len(label)} --label for {len(responses)} response(s)")
    key_clusters = read_clustering(key)
    read = []
    for n, path in enumerate(responses):
        clusters = read_clustering(path)
        _check_order(key, key_clusters, path, clusters)
        system, scope = _response_label(path, label[n] if label and n < len(label) else None)
        read.append(ct.Response(clusters, system, scope))
    extra = {"key": str(key), "responses": [str(p) for p in responses]}
    if protocol is Protocol.ucdcr:
        if len(responses) != 1:
            raise CmrkitError("--protocol ucdcr scores one response (uCDCR's table is per system)")
        rows, means = ct.ucdcr_table(key_clusters, read[0].clustering, _subtopics(key))
        if fmt is CorefFormat.table:
            _ucdcr_table(rows, means, f"{key} vs {responses[0]}")
        elif fmt is CorefFormat.json:
            emit(ct.subtopics_to_json(rows, means, extra))
        else:
            emit(ct.subtopics_to_csv(rows, means))
        return
    which = ("with", "without") if singletons is TableSingletons.both else (singletons.value,)
    rows = ct.papers_table(key_clusters, read, which)
    if fmt is CorefFormat.table:
        _papers_table(rows, f"{key}: {len(responses)} response(s)")
    elif fmt is CorefFormat.json:
        emit(ct.table_to_json(rows, extra))
    else:
        emit(ct.table_to_csv(rows))


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
