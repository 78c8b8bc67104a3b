"""TAC KBP EDL data: `cmrkit tac check`, the `--source tac` build, and `cmrkit run coref`."""

from __future__ import annotations

from pathlib import Path

import typer

import cmrkit.commands.runs as r
from cmrkit.commands.group import group
from cmrkit.console import out, user_errors

tac_app = group(
    help="TAC KBP entity-linking data (bring your own LDC copy): check gold mentions against "
    "the source documents."
)


def _types(text: str) -> tuple[str, ...]:
    return tuple(t.strip().upper() for t in text.split(",") if t.strip())


def build_tac(
    *,
    name: str | None,
    mentions: Path | None,
    queries_xml: Path | None,
    links: Path | None,
    docs: Path | None,
    sentence_offsets: Path | None,
    types: str,
    cmr_queries: Path | None = None,
    cmr_qrels: Path | None = None,
    queries: str,
    min_relevant: int,
    seed: int,
    split: str,
    qid_tag: str | None,
    date_range: str | None,
    keep_own_doc: bool,
    skip_bad: bool,
    chains: bool,
    spacy_model: str,
    collections_dir: Path,
    qrels_dir: Path,
    force: bool,
    progress=None,
):
    """`build-collection --source tac`: the options as the build command received them."""
    from cmrkit.errors import CmrkitError
    from cmrkit.tac.collection import TacInputs, TacOptions, build_tac_collection

    if docs is None:
        raise CmrkitError("--source tac needs --docs DIR (the TAC source documents)")
    inputs = TacInputs(docs, mentions, queries_xml, links, sentence_offsets, cmr_queries, cmr_qrels)
    opts = TacOptions(
        name=name or "tac",
        types=_types(types),
        queries=queries,
        min_relevant=min_relevant,
        seed=seed,
        split=split,
        tag=qid_tag,
        date_range=date_range,
        keep_own_doc=keep_own_doc,
        skip_bad=skip_bad,
        spacy_model=spacy_model,
        chains=chains,
    )
    report = build_tac_collection(
        inputs,
        opts,
        collections_dir=collections_dir,
        qrels_dir=qrels_dir,
        force=force,
        progress=progress,
    )
    problems = report.counts.get("skipped_bad_records", 0)
    if problems:
        out.print(
            f"skipped {problems} bad record(s) (--skip-bad); listed under 'problems' in "
            f"{report.out_dir}/manifest.json"
        )
    return report


def register(app: typer.Typer) -> None:
    """Add the `tac` group (`tac check`); `run coref` is in the `run` group."""
    app.add_typer(tac_app, name="tac")


@tac_app.command("check")
@user_errors
def check_command(
    docs: Path = typer.Option(..., "--docs", help="Folder (or file) of TAC source documents."),
    mentions: Path | None = typer.Option(
        None, "--mentions", help="TAC 2015+ gold mention tab file."
    ),
    queries_xml: Path | None = typer.Option(
        None, "--queries-xml", help="TAC 2014 queries XML (with --links)."
    ),
    links: Path | None = typer.Option(None, "--links", help="TAC 2014 links tab file."),
    types: str = typer.Option(
        "PER,ORG,GPE", "--types", help="Entity types to keep (PER,ORG,GPE,LOC,FAC,TTL)."
    ),
    show: int = typer.Option(20, "--show", help="Problems to print (all are counted)."),
) -> None:
    """Check every gold mention against its document at its offsets; list the mismatches.

    Offsets are 0-based, end inclusive, counted from the document's own '<DOC' with markup
    and XML escapes included. Exit code 2 when any mention is bad.

    Example with your TAC copy: cmrkit tac check --mentions tac_kbp_2015_tedl_gold.tab
    --docs source_docs/
    """
    from cmrkit.errors import CmrkitError
    from cmrkit.sources import tac
    from cmrkit.tac.collection import TacInputs

    inputs = TacInputs(docs, mentions, queries_xml, links)
    inputs.check()
    problems = tac.Problems(skip_bad=True)
    wanted = _types(types)
    if mentions is not None:
        gold = tac.read_mention_tab(mentions, types=wanted, problems=problems)
    else:
        gold = tac.read_queries_xml(queries_xml, links, types=wanted, problems=problems)
    needed = {m.doc_id for m in gold}
    found = {d.doc_id: d for d in tac.iter_documents(docs) if d.doc_id in needed}
    good = 0
    for m in gold:
        doc = found.get(m.doc_id)
        why = (
            f"document {m.doc_id} is not under {docs}" if doc is None else tac.check_mention(m, doc)
        )
        if why is None:
            good += 1
        else:
            problems.report_mention(why, m)
    for message in problems.messages[:show]:
        out.print(message, markup=False)
    out.print(
        f"{good:,} mention(s) match their documents; {len(problems):,} problem(s); "
        f"{len(found):,} of {len(needed):,} documents found"
    )
    if problems:
        raise CmrkitError(f"{len(problems)} bad mention record(s); see the list above")


@r.run_app.command("coref")
@user_errors
@r.leaves_cluster
@r.shared_options(*(n for n in r.LUCENE_RUN if n != "spacy_model"))
def coref_command(
    ctx: typer.Context,
    collection: Path = r.COLLECTION_ARG,
    split: str | None = r.SPLIT,
) -> None:
    """BM25 over the words of within-document coreference chains (the CMR coref baseline).

    The query is the words of the query mention's chain in its document; a unit is matched
    on the words of the chains with a mention in it (the `chain` field that
    `build-collection --source tac` stores and `cmrkit index` indexes). Collections
    without chains are refused.

    Example (a TAC collection): cmrkit run coref collections/tac15 --split test
    """
    from cmrkit.retrieval import run_fields

    r.report_run(
        run_fields(
            collection,
            weights={"chain": 1.0},
            query="chain",
            **r.lucene_run(ctx, leaves=("spacy_model",), name=ctx.params["name"] or "coref"),
        )
    )
