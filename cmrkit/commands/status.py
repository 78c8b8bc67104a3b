"""`cmrkit status`: the collections, indexes, runs, pools and judgments of the working folder."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import typer

from cmrkit.console import out, user_errors


def register(app: typer.Typer) -> None:
    """Add `status`."""
    app.command("status")(status_command)


def _table(title: str, columns: list[tuple[str, str]]):
    """A table of the shared 80-column renderer; the first column labels the rows."""
    from cmrkit.commands.tables import Table

    left = [name for name, justify in columns[1:] if justify == "left"]
    return Table(title, [name for name, _ in columns], left=left)


@user_errors
def status_command(
    collection: Path = typer.Argument(
        None, help="A collection folder or name (default: every one under --collections)."
    ),
    measure: str = typer.Option(
        None,
        "--measure",
        "-m",
        help="Headline measure of each run (default: AP, or infAP when the qrels hold "
        "pooled but unjudged grades).",
    ),
    collections_dir: Path = typer.Option(
        Path("collections"), "--collections", help="Where collections are."
    ),
    runs_dir: Path = typer.Option(Path("runs"), "--runs", help="Where runs are."),
    qrels_dir: Path = typer.Option(None, "--qrels", help="Where qrels are (default: qrels/)."),
    pools_dir: Path = typer.Option(Path("pools"), "--pools", help="Where pools are."),
) -> None:
    """Show the collections (splits, counts, index), runs, pools and judgments found here.

    Reads only what the commands wrote: no JVM, no spaCy. Each run's headline measure is
    computed against its split's qrels over every qrels query (0 where the run has none, as
    eval -c; the number shown), and kept in the run's sidecar for the next time (keyed by the
    qrels' sha256 and the run file).

    Example: cmrkit status collections/sample
    """
    import cmrkit.collection.layout as layout
    import cmrkit.workspace as ws
    from cmrkit.commands.tables import render
    from cmrkit.evaluation import parse_measure

    if measure is not None:
        parse_measure(measure)  # a typo fails here, before any work
    if collection is not None:
        folders = [layout.collection_dir(collection, collections_dir)]
    else:
        folders = layout.find_collections(collections_dir)
    if not folders:
        out.print(
            f"no collections under {collections_dir}/; build one with `cmrkit build-collection`"
        )
        return
    infos = [ws.describe_collection(f, qrels_dir) for f in folders]

    _collections(infos)

    qrels_cache: dict[Path, tuple[dict, str]] = {}
    every = {info.name: ws.collection_runs(info.name, runs_dir) for info in infos}
    with _reading_runs(sum(map(len, every.values()))) as advance:
        tables = [_runs_table(info, every[info.name], runs_dir, measure, qrels_cache, advance)
                  for info in infos]  # fmt: skip
    for info, (table, partial) in zip(infos, tables, strict=True):
        if table is None:
            out.print(f"no runs under {runs_dir / info.name}/")
            continue
        render(table, out)
        if partial:
            out.print(
                "* scored over every qrels query of its split, 0 where the run has none (as "
                "eval -c): " + "; ".join(partial),
                markup=False,
            )

    names = {info.name for info in infos}
    _pools_and_judgments(pools_dir, names)
    built = {s.qrels.resolve() for info in infos for s in info.splits if s.qrels is not None}
    extra = [
        p
        for name in sorted(names)
        for p in ws.other_qrels(name, qrels_dir or "qrels")
        if p.resolve() not in built
    ]
    if extra:
        out.print("other qrels: " + ", ".join(str(p) for p in extra))


def _collections(infos: list) -> None:
    """The table of the collections: a row per split."""
    from cmrkit.commands.tables import render

    table = _table(
        "collections",
        [("collection", "left"), ("split", "left"), ("queries", "right"), ("rel/query", "right"),
         ("qrels", "left"), ("units", "right"), ("index", "left")],
    )  # fmt: skip
    for info in infos:
        for i, s in enumerate(info.splits):
            first = i == 0
            table.add_row(
                info.name if first else "",
                s.split,
                f"{s.queries:,}",
                "" if s.mean_relevant is None else f"{s.mean_relevant:.2f}",
                "yes" if s.qrels is not None else "missing",
                f"{info.units:,}" if first and info.units is not None else "",
                info.index if first else "",
            )
    render(table, out)


def _pools_and_judgments(pools_dir: Path, names: set[str]) -> None:
    """The tables of the pools of these collections and of the judgment files."""
    import cmrkit.workspace as ws
    from cmrkit.commands.tables import render

    pools = [p for p in ws.find_pools(pools_dir) if p.collection in names]
    judgments = ws.find_judgments(pools_dir)
    if pools:
        table = _table(
            "pools",
            [("pool", "left"), ("collection", "left"), ("depth", "right"), ("runs", "right"),
             ("queries", "right"), ("pairs", "right")],
        )  # fmt: skip
        for p in pools:
            depth = "" if p.depth is None else str(p.depth)
            table.add_row(
                str(p.path), p.collection, depth, str(p.runs), f"{p.queries:,}", f"{p.pairs:,}"
            )
        render(table, out)
    if judgments:
        table = _table("judgments", [("file", "left"), ("kind", "left"), ("rows", "right")])
        for j in judgments:
            table.add_row(str(j.path), j.kind, f"{j.rows:,}")
        render(table, out)
    if not pools and not judgments:
        out.print(f"no pools or judgments under {pools_dir}/")


@contextlib.contextmanager
def _reading_runs(total: int) -> Iterator[Callable[..., None]]:
    """A bar on stderr while the runs are scored (a big working folder takes seconds the
    first time); ``at(path)`` names the run being read, ``at(path, done=True)`` counts it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from cmrkit.console import console

    with Progress(
        TextColumn("scoring runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
        disable=total == 0 or not console.is_terminal,
    ) as bar:
        task = bar.add_task("", total=total)

        def at(name: str, done: bool = False) -> None:
            bar.update(task, advance=1 if done else 0, description="" if done else name)
            bar.refresh()  # shown now: a big run takes seconds, the next may take none

        yield at


def _runs_table(info, runs, runs_dir: Path, measure, qrels_cache, advance):
    """The table of a collection's runs (None when it has none) and the runs that answer
    fewer queries than their qrels hold."""
    from cmrkit import workspace as ws
    from cmrkit.evaluation import parse_measure
    from cmrkit.fileio import sha256_file
    from cmrkit.trec import read_qrels

    if not runs:
        return None, []
    qrels_of = {s.split: s.qrels for s in info.splits}
    table = _table(
        f"runs in {runs_dir / info.name}/",
        [("run", "left"), ("system", "left"), ("split", "left"), ("written", "left"),
         ("measure", "left"), ("value", "right"), ("qrels queries", "right")],
    )  # fmt: skip
    partial = []
    for run in runs:
        path = qrels_of.get(run.split)
        if path is not None and path not in qrels_cache:
            qrels_cache[path] = (read_qrels(path), sha256_file(path))
        qrels, digest = qrels_cache[path] if path is not None else (None, None)
        advance(str(run.path))
        h = ws.headline(run, qrels, measure, qrels_sha256=digest)
        advance(str(run.path), done=True)
        value = h.note if h.value is None else parse_measure(h.measure).format(h.value)
        queries = f"{h.queries:,}" if h.queries else ""
        if h.queries and h.answered < h.queries:
            queries += "*"
            partial.append(f"{run.name} ranks {h.answered:,} of {h.queries:,}")
        table.add_row(
            run.name,
            run.system,
            run.split,
            run.date.strftime("%Y-%m-%d %H:%M"),
            h.measure,
            value,
            queries,
        )
    return table, partial
