"""`cmrkit build-collection`: coreference-annotated mentions -> TREC-style test collection."""

from __future__ import annotations

import contextlib
from importlib import resources
from pathlib import Path

import typer

from cmrkit.commands.choices import (
    DistractorFilter,
    DistractorFormat,
    HubDataset,
    QueryMode,
    SentenceMethod,
    Source,
    Unit,
)
from cmrkit.console import console, out, user_errors
from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

SAMPLE_FILES = {"dev": "ecbplus.dev.json.gz", "test": "ecbplus.test.json.gz"}
SAMPLE_DISTRACTORS = "ecbplus.train-documents.txt.gz"
SAMPLE_LICENSE = "README.md"
TAC = "TAC (--source tac)"


def _tac(default, flag: str, text: str):
    """An option of `--source tac`: in the TAC help panel, its help marked TAC."""
    return typer.Option(default, flag, help=f"TAC: {text}", rich_help_panel=TAC)


def _sample_path(name: str) -> Path:
    return Path(str(resources.files("cmrkit") / "data" / "sample" / name))


def _parse_ratios(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    ratios: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            ratios[name.strip()] = float(value)
        except ValueError:
            raise CmrkitError(
                f"--resplit: {part!r} is not NAME=RATIO; write e.g. train=0.45,dev=0.1,test=0.45"
            ) from None
    return ratios


def register(app: typer.Typer) -> None:
    """Add `sample-data` and `build-collection`."""
    app.command("sample-data")(sample_data_command)
    app.command("build-collection")(build_collection_command)


@contextlib.contextmanager
def _progress():
    from cmrkit.console import progress_bar

    with progress_bar(transient=True, spinner=True) as p:

        def start(description: str, total: int | None):
            task = p.add_task(description, total=total)
            return lambda n: p.advance(task, n)

        yield start


def _print_report(report) -> None:
    if report.up_to_date:
        out.print(
            f"{report.out_dir} is up to date (same inputs and parameters); --force rebuilds it",
            markup=False,
        )
        return
    from cmrkit.commands.tables import Table, render

    heads = ("split", "clusters", "queries", "units", "distractors", "rel/query", "max rel")
    table = Table(f"collection {report.name}", heads)
    for split, s in report.splits.items():
        table.add_row(
            split,
            f"{s['clusters']:,}",
            f"{s['queries']:,}",
            f"{s['annotated_units']:,}",
            f"{s['distractors']:,}",
            f"{s['mean_relevant']:.2f}",
            str(s["max_relevant"]),
        )
    render(table, out)
    dropped = ", ".join(f"{k.replace('_', ' ')}: {v:,}" for k, v in report.dropped.items() if v)
    c = report.counts
    context = f", other sentences of annotated passages {c['context_units']:,}"
    out.print(
        f"corpus units: {c['corpus_units']:,} (annotated {c['annotated_units']:,}"
        f"{context if c['context_units'] else ''}, distractors {c['distractor_units']:,})"
    )
    out.print(f"dropped: {dropped or 'nothing'}")
    out.print(
        f"wrote {report.out_dir}/ and " + ", ".join(str(p) for p in report.qrels_files.values())
    )


def _mention_kind(source: str, mentions: str | None) -> str:
    """``--mentions`` of a coreference corpus (events, entities, all); a file for tac."""
    if source in ("ecbplus", "ucdcr"):
        from cmrkit.sources.ecbplus import KINDS

        if mentions is not None and mentions not in KINDS:
            raise CmrkitError(
                f"--mentions {mentions!r}: with --source {source} write events, entities or all"
            )
        return mentions or "events"
    if mentions is not None and source != "tac":
        raise CmrkitError(
            "--mentions is for --source ecbplus, ucdcr (events, entities, all) and tac (a file)"
        )
    return "events"


@user_errors
def sample_data_command(
    folder: Path = typer.Argument(..., help="Folder to copy the sample files into."),
    force: bool = typer.Option(False, "--force", help="Overwrite files that differ."),
) -> None:
    """Copy the ECB+ sample shipped inside cmrkit (with its license and attribution) out.

    Writes ecbplus.dev.json.gz and ecbplus.test.json.gz (annotated mentions in WEC-Eng
    shape), ecbplus.train-documents.txt.gz (distractor documents, one per line) and
    README.md (source, license, citation): inputs for the examples of build-collection.

    Example: cmrkit sample-data data/ecbplus
    """
    from cmrkit.fileio import RepeatableOutputs

    names = [*SAMPLE_FILES.values(), SAMPLE_DISTRACTORS, SAMPLE_LICENSE]
    targets = [folder / n for n in names]
    with RepeatableOutputs(targets, force=force, anchor=folder.parent) as staged:
        for n, target in zip(names, targets, strict=True):
            staged.path(target).write_bytes(_sample_path(n).read_bytes())
    if staged.up_to_date:
        out.print(f"{folder}/ is up to date (the sample files are there)", markup=False)
        return
    out.print(
        f"wrote {', '.join(names)} to {folder}/ (ECB+, CC BY 3.0: keep README.md with them)",
        markup=False,
    )


@user_errors
def build_collection_command(
    source: Source = typer.Option(
        Source("wec-eng"),
        "--source",
        "-s",
        help="Input format: wec-eng, coresearch, jsonl, hf, tac (TAC KBP EDL, see the "
        "TAC options), ecbplus (the ECB+ 1.0 release: -i ECB+.zip or its folder) or ucdcr "
        "(uCDCR's unified mentions: -i a dataset folder, a split folder or a file).",
    ),
    inputs: list[str] = typer.Option(
        [],
        "--input",
        "-i",
        help="Annotated mention file (repeatable): plain, .gz, or ARCHIVE.zip::MEMBER. "
        "SPLIT=PATH names its split; else the split comes from the file name.",
    ),
    name: str | None = typer.Option(
        None, "--name", "-n", help="Collection name (default: 'sample', else from the input)."
    ),
    unit: Unit | None = typer.Option(
        None,
        help="Retrieval unit: passage (one per distinct paragraph), sentence, or mention "
        "(one passage per mention, CoreSearch's rule). Default: mention for --source "
        "coresearch, else passage.",
    ),
    queries: QueryMode = typer.Option(
        QueryMode.all,
        help="all: every mention of a non-singleton cluster (CoreSearch); "
        "longest: the longest mention per cluster (CMR).",
    ),
    min_relevant: int = typer.Option(
        1,
        help="Drop queries with fewer known relevant units (1 keeps every query with one; "
        "`judgments aggregate` drops pooled queries below 5, the CMR protocol's rule).",
    ),
    resplit: str | None = typer.Option(
        None, help="Re-split by cluster, e.g. train=0.45,dev=0.1,test=0.45 (else keep splits)."
    ),
    seed: int = typer.Option(13, help="Seed for re-splitting and tie-breaking."),
    distractors: list[str] = typer.Option(
        [],
        "--distractors",
        "-d",
        help="Distractor passages (repeatable): WEC-Eng JSON, passage JSONL or text "
        "(one paragraph per line).",
    ),
    distractor_format: DistractorFormat = typer.Option(
        DistractorFormat.auto, help="auto, wec, jsonl or text."
    ),
    filter_distractors: DistractorFilter = typer.Option(
        DistractorFilter.none,
        help="none; titles: drop distractors naming a query cluster's title; "
        "mentions: also its multi-word mention strings.",
    ),
    exclude_own_doc: bool = typer.Option(
        False, help="Never judge units of the query's own document as relevant."
    ),
    sentences: SentenceMethod = typer.Option(
        SentenceMethod.parser, help="Sentence splitting: parser (spaCy) or rule."
    ),
    spacy_model: str = typer.Option(DEFAULT_SPACY_MODEL, help="Installed spaCy model."),
    hf_dataset: HubDataset = typer.Option(
        HubDataset("wec-eng"), help="With --source hf: wec-eng or coresearch."
    ),
    hf_splits: str = typer.Option("dev,test", help="With --source hf: splits to download."),
    revision: str = typer.Option("main", help="With --source hf: hub revision (commit)."),
    hf_cache_dir: Path | None = typer.Option(
        None, help="With --source hf: cache folder (default: the hub client's cache)."
    ),
    collections_dir: Path = typer.Option(Path("collections"), help="Where collections go."),
    qrels_dir: Path = typer.Option(Path("qrels"), help="Where qrels go."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing collection."),
    mentions: str | None = typer.Option(
        None,
        "--mentions",
        help="ecbplus, ucdcr: events (default), entities or all. tac: the 2015+ gold mention "
        "tab file.",
    ),
    validated: str | None = typer.Option(
        None,
        "--validated",
        help="ecbplus: the validated-sentences CSV (default: ECBplus_coreference_sentences.csv "
        "beside the input, else the release's copy); none keeps every sentence.",
    ),
    tac_queries_xml: Path | None = _tac(None, "--queries-xml", "2014 queries XML (with --links)."),
    tac_links: Path | None = _tac(None, "--links", "2014 links tab file."),
    tac_docs: Path | None = _tac(None, "--docs", "Folder of TAC source documents (SGML/XML)."),
    tac_cmr_queries: Path | None = _tac(
        None, "--cmr-queries", "Published CMR queries file as the topics (with --cmr-qrels)."
    ),
    tac_cmr_qrels: Path | None = _tac(None, "--cmr-qrels", "Published CMR qrels file."),
    tac_sentence_offsets: Path | None = _tac(
        None,
        "--sentence-offsets",
        "Sentence spans, one 'DOC:start:last' per line (the docno layout), instead of spaCy's.",
    ),
    tac_types: str = _tac("PER,ORG,GPE", "--types", "Entity types to keep."),
    tac_date_range: str | None = _tac(
        None, "--date-range", "auto (query documents' first..last date) or YYYYMMDD-YYYYMMDD."
    ),
    tac_keep_own_doc: bool = _tac(
        False,
        "--keep-own-doc",
        "Let the query document's other sentences be candidates and relevant.",
    ),
    tac_skip_bad: bool = _tac(False, "--skip-bad", "Count and skip bad mention records."),
    tac_split: str = _tac("test", "--split", "Split name of the queries."),
    tac_qid_tag: str | None = _tac(
        None, "--qid-tag", "Collection tag in query ids TAG:ENTITY:MENTION (default: --name)."
    ),
    tac_chains: bool = _tac(True, "--chains/--no-chains", "spaCy NER for within-document chains."),
) -> None:
    """Build a TREC-style test collection (corpus, topics, qrels, manifest) from mentions.

    With no arguments, builds collections/sample/ from the ECB+ sample shipped inside cmrkit.

    Example (after `cmrkit sample-data data/ecbplus`): cmrkit build-collection
    -i data/ecbplus/ecbplus.test.json.gz --queries longest --unit sentence --name ecb-sent

    Example with WEC-Eng's files: cmrkit build-collection
    -i Dev_Event_gold_mentions_validated.json -i Test_Event_gold_mentions_validated.json
    -d Train_Event_gold_mentions.json --name wec

    Example with the ECB+ 1.0 release (test events: 1,780 mentions): cmrkit build-collection
    --source ecbplus -i ECB+.zip

    Example with your TAC copy: cmrkit build-collection --source tac --name tac15
    --mentions gold.tab --docs source_docs/ --queries longest --date-range auto
    """
    kind = _mention_kind(source, mentions)
    if source == "tac":
        from cmrkit.commands.tac import build_tac

        with _progress() as progress:
            report = build_tac(
                name=name,
                mentions=None if mentions is None else Path(mentions),
                queries_xml=tac_queries_xml,
                links=tac_links,
                docs=tac_docs,
                sentence_offsets=tac_sentence_offsets,
                cmr_queries=tac_cmr_queries,
                cmr_qrels=tac_cmr_qrels,
                types=tac_types,
                queries=queries,
                min_relevant=min_relevant,
                seed=seed,
                split=tac_split,
                qid_tag=tac_qid_tag,
                date_range=tac_date_range,
                keep_own_doc=tac_keep_own_doc,
                skip_bad=tac_skip_bad,
                chains=tac_chains,
                spacy_model=spacy_model,
                collections_dir=collections_dir,
                qrels_dir=qrels_dir,
                force=force,
                progress=progress,
            )
        _print_report(report)
        return
    import cmrkit.collection.build as col
    from cmrkit.commands.loaders import load_inputs

    opts = col.BuildOptions(
        name=name or "sample",
        unit=unit or "passage",
        queries=queries,
        min_relevant=min_relevant,
        resplit=_parse_ratios(resplit),
        seed=seed,
        distractor_filter=filter_distractors,
        sentences=sentences,
        spacy_model=spacy_model,
        exclude_own_doc=exclude_own_doc,
    )
    sample = source == "wec-eng" and not inputs
    if sample:
        inputs = [f"{s}={_sample_path(f)}" for s, f in SAMPLE_FILES.items()]
        if not distractors:
            distractors = [str(_sample_path(SAMPLE_DISTRACTORS))]
    loaded = load_inputs(
        source,
        inputs,
        distractors,
        distractor_format=distractor_format,
        hf_dataset=hf_dataset,
        hf_splits=hf_splits,
        revision=revision,
        hf_cache_dir=None if hf_cache_dir is None else str(hf_cache_dir),
        sample=sample,
        kind=kind,
        validated=validated,
    )
    if name is None and not sample:
        opts.name = loaded.default_name
    if unit is None and loaded.source == "coresearch":
        opts.unit = "mention"  # CoreSearch's own passages, one per mention
    for note in loaded.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    with _progress() as progress:
        report = col.build_collection(
            loaded.mentions,
            loaded.distractors,
            opts,
            inputs=loaded.inputs,
            source=loaded.source,
            collections_dir=collections_dir,
            qrels_dir=qrels_dir,
            force=force,
            progress=progress,
            query_ids=loaded.query_ids,
        )
    _print_report(report)
