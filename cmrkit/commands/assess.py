"""`cmrkit assess`: the assessment server for a lab's own annotators (docs/assess.md).

Self-contained: the web framework, SQLAlchemy and argon2 (the ``assess`` extra) are imported
inside the commands only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from cmrkit.commands.choices import Role, Strategy, plain
from cmrkit.commands.group import group
from cmrkit.commands.options import (
    PER_QUERY,
    POOL_ARG,
    POOL_COLLECTION,
    confident_option,
    hybrid_labels,
)
from cmrkit.console import console, out, user_errors

assess_app = group(
    order=("serve", "users", "export", "close", "migrate"),
    help="Judge a pool with your own assessors: a web server with accounts, N assessors per "
    "pair, gold checks, adaptive rounds and a JSON API (pip install 'cmrkit[assess]').",
)
users_app = group(
    order=("add", "list", "disable", "enable", "resume"),
    help="Accounts of the assessment server.",
)
assess_app.add_typer(users_app, name="users")

DB_HELP = "Database: sqlite:///PATH or postgresql://USER@HOST[:PORT]/DB."
DB = typer.Option(..., "--db", help=DB_HELP)
USER = typer.Argument(..., help="User name.")


def register(app: typer.Typer) -> None:
    """Add the `assess` group."""
    app.add_typer(assess_app, name="assess")


# the top-level modules of the `assess` extra that the commands import (psycopg only for
# PostgreSQL, asked for by db.make_engine)
EXTRA = ("sqlalchemy", "alembic", "starlette", "jinja2", "itsdangerous", "argon2", "asgi_csrf")


def _need_extra() -> None:
    """Refuse in one line when a library of the ``assess`` extra cannot be imported (before any
    import of the server's modules). Each is imported, not only looked for: a library that is
    there but fails to load (a missing dependency of its own, a broken build) is as missing."""
    import importlib

    from cmrkit.errors import EnvironmentFault

    for name in EXTRA + ("uvicorn",):
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing = name if e.name in (None, name) else f"{name} needs {e.name}, which"
            raise EnvironmentFault(
                f"the assessment server needs the 'assess' extra ({missing} is missing): "
                "pip install 'cmrkit[assess]'"
            ) from None


def _engine(url: str, *, create: bool = False):
    """An engine on a migrated database (the extra's libraries imported here). Only the commands
    that set a database up (``create``: serve, users add, migrate) may make a new SQLite file."""
    _need_extra()
    from cmrkit.assess.server import db

    engine = db.make_engine(url, create=create)
    db.migrate(engine, create=create)
    return engine


def _shown_url(url: str) -> str:
    """The URL without a password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for display
        return url.split("@")[-1]


@assess_app.command("serve")
@user_errors
def serve_command(
    pool_file: Path = POOL_ARG,
    db_url: str | None = typer.Option(
        None, "--db", help=DB_HELP + " [default: an SQLite file beside the pool]"
    ),
    host: str = typer.Option(
        "127.0.0.1", help="Address to listen on (loopback only unless told; see docs/assess.md)."
    ),
    port: int = typer.Option(8350, help="Port to listen on."),
    collection: Path | None = POOL_COLLECTION,
    assessors: int = typer.Option(3, help="Different assessors per pair."),
    gold: Path | None = typer.Option(
        None, help="Qrels of known answers (rel > 0 relevant) for gold pairs outside the pool."
    ),
    gold_rate: float = typer.Option(
        0.0, help="Share of the pairs handed to each assessor that are gold (e.g. 0.1)."
    ),
    min_gold_accuracy: float = typer.Option(
        0.6, help="Pause and flag an assessor whose gold accuracy falls below this."
    ),
    gold_after: int = typer.Option(5, help="Gold judgments before the accuracy check applies."),
    lease: float = typer.Option(
        600.0, help="Seconds a handed-out pair stays with its assessor before it goes back."
    ),
    strategy: Strategy | None = typer.Option(
        None,
        help="Choose the pairs first: mtf or maxmean (adaptive rounds as judgments arrive, "
        "with --budget), strata (a sample for xinfAP), or any `pool create` strategy "
        "[default: the pool's sampled pairs].",
    ),
    budget: int | None = typer.Option(None, help="Pairs to judge, in total or --per-query."),
    per_query: bool = PER_QUERY,
    batch: int | None = typer.Option(
        None, help="mtf/maxmean: pairs per round (default one per query)."
    ),
    strata: str | None = typer.Option(None, help="strata: LO-HI:RATE,... (as `pool create`)."),
    seed: int = typer.Option(0, help="Seed for the order of pairs and the strata draw."),
    context_chars: int = typer.Option(600, help="Characters of each unit shown around it."),
    session_hours: float = typer.Option(8.0, help="Sessions end this long after login."),
    secure_cookies: bool = typer.Option(
        False, "--secure-cookies", help="Send cookies over HTTPS only (behind a TLS proxy)."
    ),
    title: str = typer.Option("Coreference search assessment", help="Title of the pages."),
    access_log: bool = typer.Option(False, "--access-log", help="Log every request."),
    auto: Path | None = typer.Option(
        None,
        "--auto",
        metavar="LABELS",
        help="Hybrid judging: an automatic judge's labels of this pool (`judgments auto`); the "
        "pairs it is sure of (--confident) take its label, people judge the rest, and the "
        "progress page shows how it agrees with people.",
    ),
    confident: float | None = confident_option(),
) -> None:
    """Serve the pool's pairs to logged-in assessors until interrupted (Ctrl-C).

    Judgments are saved as they are made; stop and start again at any time with the same POOL
    and --db. Add accounts with `cmrkit assess users add`.

    Example: cmrkit assess serve pools/sample.pool.jsonl --assessors 3 --gold qrels/sample.test.txt
    --gold-rate 0.1
    """
    from cmrkit import interrupts
    from cmrkit.errors import CmrkitError

    _need_extra()
    from cmrkit.assess.server import app as webapp
    from cmrkit.assess.server import db, work
    from cmrkit.assess.server.db import default_db_url

    if not 1 <= port <= 65535:
        raise CmrkitError(f"--port must lie in 1..65535, not {port}")
    if not 0.01 <= session_hours <= 24 * 30:
        raise CmrkitError(f"--session-hours must lie in 0.01..720, not {session_hours}")
    if context_chars < 100:
        raise CmrkitError(f"--context-chars must be at least 100, not {context_chars}")
    if not pool_file.is_file():
        raise CmrkitError("pool file not found; make one with `cmrkit pool create`", path=pool_file)
    opts = work.Options(
        assessors=assessors,
        gold_rate=gold_rate,
        min_gold_accuracy=min_gold_accuracy,
        gold_after=gold_after,
        lease_seconds=lease,
    )
    opts.check()
    strat = _strategy(strategy, budget, per_query, batch, strata, seed)
    hybrid = hybrid_labels(auto, confident)
    # the address first: a server that cannot listen changes nothing in the database
    sock = webapp.listen(host, port)
    try:
        url = db_url or default_db_url(pool_file)
        engine = db.make_engine(url, create=True)
        choices = {
            "strategy": strat,
            "gold_file": gold,
            "seed": seed,
            "context_chars": context_chars,
            "judge": hybrid,
        }
        with console.status("loading the pool"):
            # a new database: the pool made ready (every refusal) before it is created
            fresh = db.is_empty(engine)
            prepared = work.prepare_pool(pool_file, collection, opts, **choices) if fresh else None
            db.migrate(engine, create=True)
            info = work.load_pool(engine, pool_file, collection, opts, prepared=prepared, **choices)
            work.advance(engine)
        app = webapp.create_app(
            engine,
            secret=work.secret(engine),
            session_seconds=session_hours * 3600,
            secure_cookies=secure_cookies,
            title=title,
        )
    except BaseException:
        sock.close()
        raise
    where = f"http://{host}:{port}/" if ":" not in host else f"http://[{host}]:{port}/"
    out.print(
        f"serving {info['pairs']} pairs ({info['gold_pairs']} gold) of strategy "
        f"{info['strategy']} to {assessors} assessors each at {where} (database "
        f"{_shown_url(url)}); Ctrl-C stops",
        markup=False,
        soft_wrap=True,
    )
    if info.get("judge"):
        j = info["judge"]
        out.print(
            f"the judge ({j.get('worker')}, --confident {j.get('confident')}) took "
            f"{j.get('judge_labelled')} pairs; people judge the other {j.get('people')}",
            markup=False,
        )
    if info.get("titles_note"):
        out.print(f"titles hidden from assessors: {info['titles_note']}", markup=False)
    if host not in ("127.0.0.1", "localhost", "::1"):
        out.print(
            f"listening on {host}: put it behind a TLS proxy and pass --secure-cookies "
            "(docs/assess.md)",
            markup=False,
        )
    interrupts.watch(SERVED)
    SERVED.serving = True
    signum = webapp.serve(app, sock, access_log=access_log, on_signal=interrupts.taken)
    if signum is not None:  # stopped as every command is: 128 + the signal, one line
        raise interrupts.Interrupted(signum)


class _Served:
    """What the interrupt line says of a server stopped by a signal."""

    serving = False

    def reset(self) -> None:
        self.serving = False

    def summary(self) -> str:
        return "stopped; every acknowledged judgment is in the database" if self.serving else ""

    def emergency(self) -> None:
        """Nothing to drop: every acknowledged judgment is committed."""


SERVED = _Served()


def _strategy(strategy, budget, per_query, batch, strata, seed):
    """serve's --strategy and the options that go with it (None: the pool's sampled pairs)."""
    from cmrkit.errors import CmrkitError
    from cmrkit.pooling import StrategyOptions

    if strategy is None:
        if budget is not None or per_query or batch is not None or strata is not None:
            raise CmrkitError("--budget, --per-query, --batch and --strata go with --strategy")
        return None
    strat = StrategyOptions(
        name=strategy, budget=budget, per_query=per_query, strata=strata, batch=batch, seed=seed
    )
    strat.check()
    return strat


@users_app.command("add")
@user_errors
def users_add_command(
    name: str = typer.Argument(..., help="User name (the worker_id of their judgments)."),
    role: Role = typer.Option(..., "--role", help="assessor or organizer."),
    db_url: str = DB,
    password_stdin: bool = typer.Option(
        False,
        "--password-stdin",
        help="Read the password from the first line of stdin [default: generate one and "
        "print it once].",
    ),
) -> None:
    """Add an account; its password is read from stdin or generated and printed once.

    Example: cmrkit assess users add ann --role assessor --db sqlite:///pools/sample.assess.sqlite
    """
    from cmrkit.errors import CmrkitError

    engine = _engine(db_url, create=True)
    from cmrkit.assess.server import auth
    from cmrkit.assess.server.db import write

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise CmrkitError("--password-stdin: stdin holds no password line")
    else:
        password = auth.new_password()
    with write(engine) as conn:
        user = auth.add_user(conn, name, plain(role), password)
    out.print(f"added {user.role} {user.name}", markup=False)
    if not password_stdin:
        out.print(f"password (shown once): {password}", markup=False)


@users_app.command("list")
@user_errors
def users_list_command(db_url: str = DB) -> None:
    """List the accounts: name, role, state (active, disabled, paused and why).

    Example: cmrkit assess users list --db sqlite:///pools/sample.assess.sqlite
    """
    engine = _engine(db_url)
    from cmrkit.assess.server import auth
    from cmrkit.assess.server.db import read

    with read(engine) as conn:
        people = auth.list_users(conn)
    if not people:
        out.print("no users yet; add one with `cmrkit assess users add`", markup=False)
    for u in people:
        state = "disabled" if u.disabled else (f"paused: {u.flag}" if u.paused else "active")
        typer.echo(f"{u.name}\t{u.role}\t{state}")  # tab-separated for scripts


def _set_state(name: str, db_url: str, what: str) -> None:
    engine = _engine(db_url)
    from cmrkit.assess.server import auth
    from cmrkit.assess.server.db import write

    with write(engine) as conn:
        if what == "resume":
            auth.resume(conn, name)
        else:
            auth.set_disabled(conn, name, what == "disable")
    out.print(f"{name}: {what}d", markup=False)


def _state_command(what: str, summary: str) -> None:
    """Add `assess users WHAT` (disable, enable, resume): one account's state set by name."""

    def command(name: str = USER, db_url: str = DB) -> None:
        _set_state(name, db_url, what)

    command.__name__ = f"users_{what}_command"
    command.__doc__ = (
        f"{summary}\n\n"
        f"Example: cmrkit assess users {what} ann --db sqlite:///pools/sample.assess.sqlite"
    )
    users_app.command(what)(user_errors(command))


_state_command(
    "disable",
    "Disable an account: its sessions end now and it cannot log in (judgments are kept).",
)
_state_command("enable", "Enable a disabled account again.")
_state_command(
    "resume",
    "Let an assessor paused for low gold accuracy work again (the flag stays on record).",
)


@assess_app.command("export")
@user_errors
def export_command(
    db_url: str = DB,
    output: Path = typer.Option(
        ..., "-o", "--output", help="Judgments CSV to write (pair_id,worker_id,label)."
    ),
    key: Path | None = typer.Option(
        None, "--key", help="Answer key to write [default: OUTPUT with .key.tsv, beside it]."
    ),
    pool_out: Path | None = typer.Option(
        None,
        "--pool-out",
        help="The pool as served (adaptive rounds included) [default: OUTPUT with .pool.jsonl].",
    ),
    qrels: Path | None = typer.Option(
        None, "--qrels", help="Also aggregate the judgments into these qrels."
    ),
    sample_qrels: Path | None = typer.Option(
        None, "--sample-qrels", help="strata pools: also write sample_eval's qrels for xinfAP."
    ),
    min_agree: int = typer.Option(4, help="--qrels: assessors who must agree for a label."),
    min_unanimous: int = typer.Option(
        3, help="--qrels: or this many, all agreeing (one assessor per pair: 1)."
    ),
    min_relevant: int = typer.Option(5, help="--qrels: drop queries with fewer relevant."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing outputs."),
) -> None:
    """Write the judgments as the offline page's CSV, with the answer key and the pool, so
    that `cmrkit judgments aggregate OUTPUT --pool POOL --key KEY` reads them unchanged.

    Example: cmrkit assess export --db sqlite:///pools/sample.assess.sqlite -o judged.csv
    """
    from cmrkit.assess.key import default_key_path, write_key
    from cmrkit.errors import CmrkitError
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.pooling import write_pool

    if sample_qrels is not None and qrels is None:
        raise CmrkitError("--sample-qrels needs --qrels (the aggregated judgments)")
    engine = _engine(db_url)
    from cmrkit.assess.server import db, work

    exp = work.export(engine)
    with db.read(engine) as conn:
        served = work.options(conn).assessors  # the most people a pair gets
    key = key or Path(default_key_path(output))
    stem = str(output)[: -len(output.suffix)] if output.suffix else str(output)
    pool_out = pool_out or Path(stem + ".pool.jsonl")
    targets = [output, key, pool_out] + [p for p in (qrels, sample_qrels) if p is not None]
    if len({t.resolve() for t in targets}) != len(targets):
        raise CmrkitError("the outputs must be different files", path=output)
    with RepeatableOutputs(targets, force=force, anchor=output.parent) as staged:
        work.write_judgments_csv(exp.rows, staged.path(output))
        write_key(exp.key, staged.path(key))
        write_pool(exp.pool, staged.path(pool_out))
        if qrels is not None:
            _aggregate(
                staged,
                output,
                key,
                exp.pool,
                qrels,
                sample_qrels,
                min_agree=min_agree,
                min_unanimous=min_unanimous,
                min_relevant=min_relevant,
                can_get=served,
            )
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    workers = len({w for _, w, _ in exp.rows})
    console.print(
        f"wrote {len(exp.rows)} judgments by {workers} assessors to {output}, the key to {key} "
        f"and the pool to {pool_out}",
        markup=False,
        soft_wrap=True,
    )


def _aggregate(staged, output, key, pool, qrels, sample_qrels, **rules) -> None:
    from cmrkit.assess.key import read_key
    from cmrkit.judgments.human import aggregate, nothing_kept, read_judgments
    from cmrkit.pooling import sample_qrels as make_sample
    from cmrkit.trec import write_qrels, write_sampled_qrels

    entries = read_key(staged.path(key))
    gold = {(e.qid, e.docno): e.gold for e in entries.values() if e.gold is not None}
    judged = read_judgments(staged.path(output), None, entries)
    agg = aggregate(judged, pool, gold=gold, hard_threshold=None, **rules)
    if (empty := nothing_kept(agg, rules["min_relevant"], None)) is not None:
        console.print(f"warning: {empty}", markup=False, soft_wrap=True)
    with open(staged.path(qrels), "w", encoding="utf-8", newline="\n") as f:
        write_qrels(f, agg.qrels)
    if sample_qrels is not None:
        docs, strata = make_sample(pool, agg.qrels)
        with open(staged.path(sample_qrels), "w", encoding="utf-8", newline="\n") as f:
            write_sampled_qrels(f, docs, strata)


@assess_app.command("close")
@user_errors
def close_command(db_url: str = DB) -> None:
    """Close the pool: no pair is handed out and no judgment taken any more (export works).

    Example: cmrkit assess close --db sqlite:///pools/sample.assess.sqlite
    """
    engine = _engine(db_url)
    from cmrkit.assess.server import work

    released = work.close(engine)
    out.print(f"closed; {released} open pairs released", markup=False)


@assess_app.command("migrate")
@user_errors
def migrate_command(db_url: str = DB) -> None:
    """Create the database schema or bring it to this version (every command does this too).

    Example: cmrkit assess migrate --db postgresql://cmrkit@127.0.0.1:5432/assess
    """
    engine = _engine(db_url, create=True)
    from cmrkit.assess.server import db

    out.print(f"database at revision {db.current_revision(engine)}", markup=False)
