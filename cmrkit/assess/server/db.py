"""The assessment database: tables, engines (SQLite or PostgreSQL) and migrations.

Times are seconds since the epoch (floats) so that both databases store them alike. The schema
is created and changed by Alembic (``migrations/``); :func:`migrate` brings any database to the
newest revision and is run by every ``cmrkit assess`` command before it touches the data.
"""

from __future__ import annotations

import collections
import json
import os
import threading
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from cmrkit.errors import CmrkitError, EnvironmentFault

metadata = sa.MetaData()

settings = sa.Table(
    "settings",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(100), nullable=False, unique=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("password_hash", sa.String(255), nullable=False),
    sa.Column("disabled", sa.Boolean, nullable=False, default=False),
    sa.Column("paused", sa.Boolean, nullable=False, default=False),
    sa.Column("flag", sa.Text, nullable=True),
    sa.Column("handed", sa.Integer, nullable=False, default=0),
    sa.Column("epoch", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", sa.Float, nullable=False),
)

pairs = sa.Table(
    "pairs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("pair_id", sa.String(32), nullable=False, unique=True),
    sa.Column("qid", sa.Text, nullable=False),
    sa.Column("docno", sa.Text, nullable=False),
    sa.Column("is_gold", sa.Boolean, nullable=False, default=False),
    sa.Column("gold", sa.Integer, nullable=True),
    sa.Column("active", sa.Boolean, nullable=False, default=True),
    sa.Column("round", sa.Integer, nullable=False, default=1),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("taken", sa.Integer, nullable=False, default=0),
    sa.Column("judged", sa.Integer, nullable=False, default=0),
    sa.Column("display", sa.Text, nullable=False),
    sa.Index("ix_pairs_queue", "is_gold", "active", "taken", "seq"),
)

assignments = sa.Table(
    "assignments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("pair_ref", sa.Integer, sa.ForeignKey("pairs.id"), nullable=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("leased_at", sa.Float, nullable=False),
    sa.Column("lease_until", sa.Float, nullable=False),
    sa.Column("label", sa.Integer, nullable=True),
    sa.Column("judged_at", sa.Float, nullable=True),
    sa.Column("changed_at", sa.Float, nullable=True),
    sa.UniqueConstraint("pair_ref", "user_id", name="uq_assignment_pair_user"),
    sa.Index("ix_assignments_user", "user_id", "judged_at"),
    sa.Index("ix_assignments_open", "judged_at", "lease_until"),
)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),  # sha256 of the token in the cookie
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Index("ix_sessions_user", "user_id"),
    sa.Index("ix_sessions_expires", "expires_at"),
)

login_attempts = sa.Table(
    "login_attempts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(64), nullable=False),  # sha256 of "name:..." or "address:..."
    sa.Column("at", sa.Float, nullable=False),
    sa.Index("ix_login_attempts_key", "key", "at"),
    sa.Index("ix_login_attempts_at", "at"),
)

MIGRATIONS = "cmrkit.assess.server:migrations"
ENGINES: weakref.WeakSet = weakref.WeakSet()  # made in this process (tests dispose of them)


def default_db_url(pool_file: str | os.PathLike) -> str:
    """The SQLite file beside a pool: ``pools/x.pool.jsonl`` -> ``pools/x.assess.sqlite``."""
    p = Path(pool_file)
    name = p.name
    for suffix in (".pool.jsonl", ".jsonl"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return "sqlite:///" + str(p.with_name(name + ".assess.sqlite").resolve())


def _normalise(url: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def disk_full(error: BaseException) -> bool:
    """Was a write refused because the disk is full (SQLite's SQLITE_FULL, PostgreSQL's
    disk_full 53100, or the operating system's ENOSPC)?"""
    import errno

    orig = getattr(error, "orig", None) or error
    if isinstance(orig, OSError) and orig.errno == errno.ENOSPC:
        return True
    if (getattr(orig, "sqlite_errorcode", None) or 0) & 0xFF == 13:  # SQLITE_FULL
        return True
    return getattr(orig, "sqlstate", None) == "53100"


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for ``sqlite:///PATH`` or ``postgresql://...``; SQLite in WAL mode with full
    sync (an acknowledged judgment survives a crash) and a busy wait, PostgreSQL pooled. Without
    ``create`` a missing SQLite file is refused (a command that reads must not make one)."""
    url = _normalise(url)
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if not path or path == ":memory:":
            raise CmrkitError("--db sqlite needs a file (sqlite:///PATH); memory is lost on exit")
        if not Path(path).parent.is_dir():
            raise CmrkitError("the folder of the --db file does not exist", path=path)
        if not create and not Path(path).is_file():
            raise CmrkitError(
                "--db: no such database file; check the path (`cmrkit assess serve POOL` "
                "makes the database beside the pool)",
                path=path,
            )
        engine = sa.create_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=20
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # pragma: no cover - run by SQLAlchemy
            # pysqlite's own transaction handling is off: SQLAlchemy's BEGIN below is the only one
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn):  # pragma: no cover - run by SQLAlchemy
            # writers take the write lock at the start: no deadlock between two readers turning
            # writers; readers take a snapshot (WAL: they never wait)
            options = conn.get_execution_options()
            read_only = options.get("cmrkit_read", False)
            if not read_only:
                # the commit waits for the disk (FULL) unless the writer said it need not
                sync = "FULL" if options.get("cmrkit_durable", True) else "NORMAL"
                info = conn.connection.info
                if info.get("cmrkit_sync") != sync:
                    conn.exec_driver_sql(f"PRAGMA synchronous={sync}")
                    info["cmrkit_sync"] = sync
            conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        ENGINES.add(engine)
        return engine
    if url.startswith("postgresql"):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise EnvironmentFault(
                "PostgreSQL needs psycopg: pip install 'cmrkit[assess]'"
            ) from None
        engine = sa.create_engine(url, pool_size=20, max_overflow=40, pool_pre_ping=True)
        ENGINES.add(engine)
        return engine
    raise CmrkitError(f"--db {url!r} is neither sqlite:///PATH nor postgresql://USER@HOST/DB")


class FifoLock:
    """A lock handed over in the order it was asked for (``threading.Lock`` is not fair: under
    heavy contention one thread can wait for many seconds while others take it again)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._held = False

    def __enter__(self) -> FifoLock:
        with self._guard:
            if not self._held and not self._waiting:
                self._held = True
                return self
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the holder hands the lock over: it stays held
        return self

    def __exit__(self, *exc) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._held = False


_write_locks: dict[int, FifoLock] = {}
_locks_guard = threading.Lock()


@contextmanager
def write(engine: Engine, *, durable: bool = True):
    """A write transaction; on SQLite the threads of this process take turns, first come first
    served (one writer at a time is all SQLite allows, and waiting here is cheaper and fairer
    than its busy loop).

    ``durable=False`` (SQLite): the commit does not wait for the disk (``synchronous=NORMAL``),
    for writes that a power cut may undo without harm (a pair handed out: it goes back to the
    queue). A killed process loses nothing either way, and the next durable commit (every
    judgment's) puts everything written before it on the disk too."""
    if is_sqlite(engine):
        with _locks_guard:
            lock = _write_locks.setdefault(id(engine), FifoLock())
        with lock, engine.connect() as conn:
            conn.execution_options(cmrkit_durable=durable)
            with conn.begin():
                yield conn
    else:
        with engine.begin() as conn:
            yield conn


@contextmanager
def read(engine: Engine):
    """A read-only connection (SQLite: a deferred transaction, readers never wait in WAL)."""
    with engine.connect().execution_options(cmrkit_read=True) as conn:
        try:
            yield conn
        finally:
            conn.rollback()


def alembic_config(conn: Connection):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS)
    cfg.attributes["connection"] = conn
    return cfg


def is_empty(engine: Engine) -> bool:
    """Whether the database holds nothing yet (SQLite: no file, or an empty one; PostgreSQL:
    no table), found without creating or changing anything: ``assess serve`` makes a new
    database's pool ready first, so that a refusal leaves none behind."""
    if is_sqlite(engine):
        path = Path(engine.url.database or "")
        return not path.exists() or (path.is_file() and path.stat().st_size == 0)
    try:
        with engine.connect() as conn:
            return not sa.inspect(conn).get_table_names()
    except sa.exc.OperationalError as e:
        raise EnvironmentFault(f"cannot reach the database {_shown(engine)}: {e.orig}") from None


def migrate(engine: Engine, *, create: bool = True) -> None:
    """Create the schema or bring it to the newest revision (Alembic ``upgrade head``). Refused
    in one line: a file that is not an SQLite database, a database holding other tables than
    cmrkit's, a revision this cmrkit does not know (a newer one made it), and without ``create``
    a database with no cmrkit tables yet (nothing is created then)."""
    from alembic import command
    from alembic.util.exc import CommandError

    where = _shown(engine)
    _refuse_foreign_file(engine, where)
    try:
        with write(engine) as conn:
            tables = set(sa.inspect(conn).get_table_names())
            if "alembic_version" not in tables:
                if tables:
                    raise _foreign(tables, where)
                if not create:
                    raise CmrkitError(
                        f"--db {where} holds no assessment data yet; start `cmrkit assess serve "
                        "POOL --db ...` first"
                    )
            else:
                _check_revision(conn, where)
            command.upgrade(alembic_config(conn), "head")
    except sa.exc.OperationalError as e:
        raise EnvironmentFault(f"cannot reach the database {where}: {e.orig}") from None
    except sa.exc.DatabaseError as e:
        raise CmrkitError(f"--db {where} is not a database cmrkit can read ({e.orig})") from None
    except CommandError as e:
        raise CmrkitError(f"--db {where}: {e}") from None


def _foreign(tables: set[str], where: str) -> CmrkitError:
    return CmrkitError(
        f"--db {where} holds tables that are not cmrkit's ({', '.join(sorted(tables)[:5])}); "
        "give a new or a cmrkit database"
    )


def _refuse_foreign_file(engine: Engine, where: str) -> None:
    """An SQLite file that is no database, or holds tables of another program, refused before
    the engine opens it: its connections switch the file to WAL mode, which would change it."""
    import sqlite3

    path = Path(engine.url.database or "") if is_sqlite(engine) else None
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        raise CmrkitError(f"--db {where} is not a database cmrkit can read ({e})") from None
    tables = {name for (name,) in rows}
    if tables and "alembic_version" not in tables:
        raise _foreign(tables, where)


def _check_revision(conn: Connection, where: str) -> None:
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    known = {s.revision for s in ScriptDirectory.from_config(alembic_config(conn)).walk_revisions()}
    for rev in MigrationContext.configure(conn).get_current_heads():
        if rev not in known:
            raise CmrkitError(
                f"--db {where} is at revision {rev!r}, which this cmrkit does not know (a newer "
                "cmrkit made it); use that version, or give another --db"
            )


def _shown(engine: Engine) -> str:
    """The database's URL for messages, without a password."""
    return engine.url.render_as_string(hide_password=True)


def head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS)
    return ScriptDirectory.from_config(cfg).get_current_head() or ""


def current_revision(engine: Engine) -> str | None:
    from alembic.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def get_setting(conn: Connection, key: str, default: Any = None) -> Any:
    row = conn.execute(sa.select(settings.c.value).where(settings.c.key == key)).first()
    return default if row is None else json.loads(row[0])


def put_setting(conn: Connection, key: str, value: Any) -> None:
    text = json.dumps(value, sort_keys=True)
    done = conn.execute(settings.update().where(settings.c.key == key).values(value=text))
    if done.rowcount == 0:
        conn.execute(settings.insert().values(key=key, value=text))
