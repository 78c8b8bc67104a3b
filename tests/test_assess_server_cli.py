"""`cmrkit assess` as a user runs it: real processes on loopback ports, real databases (SQLite
and PostgreSQL). A server that cannot start changes nothing; a --db that is wrong is one line
and creates nothing; the commands without the `assess` extra say so in one line; a served pool
stops on Ctrl-C as every command does."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from assess_server_fixtures import (  # noqa: E402
    HttpClient,
    Server,
    add_users,
    db_url,  # noqa: F401 - the fixture
    free_port,
    small_pool,
)


def cmrkit(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    """`cmrkit ARGS` in a process of its own (the real exit code and stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "cmrkit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def served_options(db: str) -> dict:
    from cmrkit.assess.server import db as dbm
    from cmrkit.assess.server import work

    engine = dbm.make_engine(db)
    with dbm.read(engine) as conn:
        opts = work.options(conn)
    engine.dispose()
    return {"assessors": opts.assessors, "lease": opts.lease_seconds}


def test_a_serve_that_cannot_start_changes_nothing(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli)
    people = add_users(db_url, ["olga"], role="organizer")
    server = Server(d["pool"], db_url, "--assessors", "1", log=tmp_path / "s.log").start()
    try:
        before = served_options(db_url)
        assert before == {"assessors": 1, "lease": 600.0}
        # the port is taken: refused before the options are written
        taken = cmrkit(
            "assess", "serve", d["pool"], "--db", db_url, "--port", server.port,
            "--assessors", "7", "--lease", "5",
        )  # fmt: skip
        assert taken.returncode == 2, taken.stderr
        assert f"--port {server.port} on 127.0.0.1 is in use" in one_line(taken.stderr)
        assert "serving" not in taken.stdout
        # an address that is not this machine's, or no address at all
        for host in ("nosuch.invalid", "192.0.2.7"):
            bad = cmrkit(
                "assess", "serve", d["pool"], "--db", db_url, "--host", host,
                "--port", free_port(), "--assessors", "7",
            )  # fmt: skip
            assert bad.returncode == 2, bad.stderr
            assert f"--host {host}" in one_line(bad.stderr)
        assert served_options(db_url) == before
        org = HttpClient(server.url)
        assert org.login("olga", people["olga"]).status_code == 200
        assert org.get("/api/progress").json()["pool"]["assessors_per_pair"] == 1
        org.close()
    finally:
        server.stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_on_a_signal_as_every_command(tmp_path, cli, sig):
    d = small_pool(tmp_path, cli, queries=1, docs=2)
    log = tmp_path / "s.log"
    server = Server(d["pool"], f"sqlite:///{tmp_path / 'a.sqlite'}", log=log).start()
    server.proc.send_signal(sig)
    assert server.proc.wait(timeout=30) == 128 + sig
    said = log.read_text()
    name = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}[sig]
    assert f"interrupted by {name}: stopped; every acknowledged judgment is in the database" in said
    assert "Traceback" not in said


def test_a_wrong_db_is_one_line_and_creates_nothing(tmp_path, cli):
    d = small_pool(tmp_path, cli)
    listed = lambda folder: sorted(p.name for p in folder.iterdir())  # noqa: E731
    # a file that is not SQLite (the pool itself)
    pool_bytes = d["pool"].read_bytes()
    before = listed(tmp_path)
    for args in (["users", "list"], ["export", "-o", tmp_path / "x.csv"], ["migrate"]):
        r = cli("assess", *args, "--db", f"sqlite:///{d['pool']}")
        assert r.exit_code == 2 and "is not a database cmrkit can read" in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
    r = cli("assess", "serve", d["pool"], "--db", f"sqlite:///{d['pool']}", "--port", free_port())
    assert r.exit_code == 2 and "is not a database cmrkit can read" in r.output
    assert d["pool"].read_bytes() == pool_bytes and listed(tmp_path) == before

    # a typo in the path: the commands that read or change a database make none
    typo = tmp_path / "assess.sqlit"
    for args in (
        ["users", "list"],
        ["users", "disable", "ann"],
        ["users", "resume", "ann"],
        ["export", "-o", tmp_path / "x.csv"],
        ["close"],
    ):
        r = cli("assess", *args, "--db", f"sqlite:///{typo}")
        assert r.exit_code == 2 and "no such database file" in r.output, (args, r.output)
    assert listed(tmp_path) == before

    # a foreign SQLite database
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (x)")
    r = cli("assess", "users", "add", "ann", "--role", "assessor", "--db", f"sqlite:///{foreign}")
    assert r.exit_code == 2 and "holds tables that are not cmrkit's (users)" in r.output
    with sqlite3.connect(foreign) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["users"]

    # a database a newer cmrkit made (an Alembic revision this one does not know)
    newer = tmp_path / "newer.sqlite"
    assert cli("assess", "migrate", "--db", f"sqlite:///{newer}").exit_code == 0
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'f00dfeed'")
    r = cli("assess", "users", "list", "--db", f"sqlite:///{newer}")
    assert r.exit_code == 2 and "at revision 'f00dfeed', which this cmrkit does not know" in (
        r.output
    )


def test_an_empty_postgres_database_stays_empty_for_reading_commands(tmp_path, cli):
    import sqlalchemy as sa
    from assess_server_fixtures import fresh_database

    url, drop = fresh_database("postgresql", tmp_path)
    try:
        for args in (["users", "list"], ["export", "-o", tmp_path / "x.csv"], ["close"]):
            r = cli("assess", *args, "--db", url)
            assert r.exit_code == 2 and "holds no assessment data yet" in r.output, r.output
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
        engine.dispose()
    finally:
        drop()


NO_EXTRA = """
import json, sys
sys.modules["sqlalchemy"] = None  # as if the `assess` extra were not installed
from typer.testing import CliRunner
from cmrkit.cli import app
out = []
for args in json.loads(sys.argv[1]):
    r = CliRunner().invoke(app, args)
    out.append([r.exit_code, r.output, repr(r.exception)])
print(json.dumps(out))
"""


def test_every_assess_command_without_the_extra_says_so(tmp_path):
    db = f"sqlite:///{tmp_path / 'a.sqlite'}"
    commands = [
        ["serve", str(tmp_path / "p.pool.jsonl")],
        ["users", "add", "ann", "--role", "assessor", "--db", db],
        ["users", "list", "--db", db],
        ["users", "disable", "ann", "--db", db],
        ["users", "enable", "ann", "--db", db],
        ["users", "resume", "ann", "--db", db],
        ["export", "--db", db, "-o", str(tmp_path / "j.csv")],
        ["close", "--db", db],
        ["migrate", "--db", db],
    ]
    done = subprocess.run(
        [sys.executable, "-c", NO_EXTRA, json.dumps([["assess", *c] for c in commands])],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    for command, (code, output, _) in zip(commands, json.loads(done.stdout), strict=True):
        assert code == 1, (command, output)
        assert output.strip() == (
            "error: the assessment server needs the 'assess' extra (sqlalchemy is missing): "
            "pip install 'cmrkit[assess]'"
        ), command
    assert list(Path(tmp_path).iterdir()) == []
