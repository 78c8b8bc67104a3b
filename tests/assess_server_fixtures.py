"""Databases, pools and clients for the assessment-server tests.

Every test runs against SQLite and against PostgreSQL: ``CMRKIT_TEST_POSTGRES_URL`` names a
server where each test gets a database of its own (``bash .ci/postgres.sh`` starts a throwaway
cluster and prints the URL). In CI (``CI=true``) a missing URL fails the PostgreSQL tests rather
than skipping them.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pool_fixtures import write_collection, write_qrels, write_run

PG_ENV = "CMRKIT_TEST_POSTGRES_URL"
BACKENDS = ["sqlite", "postgresql"]


def postgres_url() -> str | None:
    url = os.environ.get(PG_ENV)
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {PG_ENV} is not set: .ci/run must start PostgreSQL")
        pytest.skip(f"no PostgreSQL: set {PG_ENV} (bash .ci/postgres.sh prints one)")
    return url


def fresh_database(backend: str, tmp_path: Path):
    """(url, drop) for an empty database of the backend."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'assess.sqlite'}", lambda: None
    import psycopg

    base = postgres_url()
    name = "t_" + uuid.uuid4().hex[:16]
    admin = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop():
        from cmrkit.assess.server import db

        for engine in list(db.ENGINES):
            engine.dispose()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    head, _, _ = base.rpartition("/")
    return f"{head}/{name}", drop


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    url, drop = fresh_database(request.param, tmp_path)
    yield url
    drop()


HOSTILE = (
    '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> {{TITLE}} '
    '</script><!-- "quoted", comma'
)


def small_pool(tmp_path: Path, cli, queries=3, docs=6, hostile=False, extra=(), qids=None) -> dict:
    """A collection, a run pooling ``docs`` candidates for each of ``queries`` queries, qrels
    (every third candidate relevant, plus gold pairs outside the pool) and the pool file."""
    qids = list(qids or [f"q{i}" for i in range(1, queries + 1)])
    docnos = [f"d{j}" for j in range(1, docs + 4)]
    units = []
    if hostile:
        units = [
            {
                "id": f"h{j}",
                "contents": f"{HOSTILE} unit h{j} about q1.",
                "doc_id": None,
                "title": HOSTILE,
                "kind": "distractor",
            }
            for j in range(1, 3)
        ]
    coll = write_collection(tmp_path / "collections", qids, docnos, extra_units=units + list(extra))
    pooled = {q: [f"d{j}" for j in range(1, docs + 1)] for q in qids}
    if hostile:
        pooled[qids[0]] = ["h1", "h2"] + pooled[qids[0]]
    run = write_run(
        tmp_path / "r.trec",
        {q: [(d, float(len(ds) - i)) for i, d in enumerate(ds)] for q, ds in pooled.items()},
    )
    truth = {q: {d: int(i % 3 == 0) for i, d in enumerate(ds)} for q, ds in pooled.items()}
    gold = {q: {f"d{docs + 1}": 1, f"d{docs + 2}": 0, f"d{docs + 3}": 0} for q in qids}
    qrels = write_qrels(tmp_path / "truth.txt", truth)
    gold_file = write_qrels(tmp_path / "gold.txt", gold)
    pool = tmp_path / "p.pool.jsonl"
    r = cli("pool", "create", run, "--collection", coll, "--depth", "100", "-o", pool)
    assert r.exit_code == 0, r.output
    return {
        "collection": coll,
        "run": run,
        "pool": pool,
        "truth": truth,
        "qrels": qrels,
        "gold": gold,
        "gold_file": gold_file,
    }


def make_app(db_url: str, pool: Path, *, strategy=None, gold_file=None, seed=0, **opts):
    """The application as `cmrkit assess serve` builds it, on a migrated database."""
    from cmrkit.assess.server import app as webapp
    from cmrkit.assess.server import db, work

    engine = db.make_engine(db_url)
    db.migrate(engine)
    session_seconds = opts.pop("session_seconds", 3600.0)
    limiter = opts.pop("limiter", None)
    work.load_pool(
        engine, pool, None, work.Options(**opts), strategy=strategy, gold_file=gold_file, seed=seed
    )
    app = webapp.create_app(
        engine, secret=work.secret(engine), session_seconds=session_seconds, limiter=limiter
    )
    return app, engine


def add_user(engine, name: str, role: str = "assessor", password: str | None = None) -> str:
    from cmrkit.assess.server import auth
    from cmrkit.assess.server.db import write

    password = password or f"pw-{name}-0123456789"
    with write(engine) as conn:
        auth.add_user(conn, name, role, password)
    return password


class Client:
    """A browser-like API client: keeps cookies, sends the CSRF token on changes."""

    def __init__(self, app):
        from starlette.testclient import TestClient

        self.http = TestClient(app)
        self.http.get("/healthz")

    @property
    def token(self) -> str:
        return self.http.cookies.get("csrftoken")

    def login(self, name: str, password: str):
        return self.post("/api/login", {"name": name, "password": password})

    def get(self, url: str):
        return self.http.get(url)

    def post(self, url: str, data, csrf: bool = True):
        headers = {"X-CSRFToken": self.token} if csrf else {}
        return self.http.post(url, json=data, headers=headers)

    def put(self, url: str, data, csrf: bool = True):
        headers = {"X-CSRFToken": self.token} if csrf else {}
        return self.http.put(url, json=data, headers=headers)

    def judge(self, pair_id: str, label: int):
        return self.post("/api/judgments", {"pair_id": pair_id, "label": label})


def logged_in(app, engine, name: str, role: str = "assessor") -> Client:
    password = add_user(engine, name, role)
    c = Client(app)
    r = c.login(name, password)
    assert r.status_code == 200, r.text
    return c


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`cmrkit assess serve` in a process of its own, on a loopback port."""

    def __init__(self, pool: Path, db: str, *args: str, log: Path | None = None):
        self.pool, self.db, self.args = pool, db, [str(a) for a in args]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = None

    def start(self, timeout: float = 60.0) -> Server:
        import subprocess
        import sys
        import time

        import httpx

        cmd = [
            sys.executable,
            "-m",
            "cmrkit",
            "assess",
            "serve",
            str(self.pool),
            "--db",
            self.db,
            "--port",
            str(self.port),
            *self.args,
        ]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not answer /healthz in time")

    def kill(self) -> None:
        """kill -9: no shutdown, no flush, nothing."""
        import signal

        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                self.kill()


class HttpClient:
    """:class:`Client` over real HTTP (httpx) for a server in another process."""

    def __init__(self, base: str):
        import httpx

        self.http = httpx.Client(base_url=base, timeout=30)
        self.http.get("/healthz")

    @property
    def token(self) -> str:
        return self.http.cookies.get("csrftoken")

    def login(self, name: str, password: str):
        return self.post("/api/login", {"name": name, "password": password})

    def get(self, url: str):
        return self.http.get(url)

    def post(self, url: str, data):
        return self.http.post(url, json=data, headers={"X-CSRFToken": self.token})

    def judge(self, pair_id: str, label: int):
        return self.post("/api/judgments", {"pair_id": pair_id, "label": label})

    def close(self) -> None:
        self.http.close()


def add_users(db: str, names, role: str = "assessor") -> dict[str, str]:
    """Accounts added straight into the database; name -> password."""
    from cmrkit.assess.server import db as dbm

    engine = dbm.make_engine(db)
    dbm.migrate(engine)
    out = {n: add_user(engine, n, role) for n in names}
    engine.dispose()
    return out
