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
import time
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
    foreign_bytes = foreign.read_bytes()
    r = cli("assess", "users", "add", "ann", "--role", "assessor", "--db", f"sqlite:///{foreign}")
    assert r.exit_code == 2 and "holds tables that are not cmrkit's (users)" in r.output
    r = cli("assess", "serve", d["pool"], "--db", f"sqlite:///{foreign}", "--port", free_port())
    assert r.exit_code == 2 and "holds tables that are not cmrkit's (users)" in r.output
    assert foreign.read_bytes() == foreign_bytes  # not even switched to WAL mode
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


# Imports of the named top-level modules fail as they do where a package is not installed (a real
# ModuleNotFoundError raised by the import system, not a stand-in in sys.modules).
BLOCKER = """
import os, sys

class _Missing:
    blocked = set(os.environ.get("CMRKIT_TEST_BLOCKED", "").split(","))

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Missing())
"""

NO_EXTRA = """
import json, sys
from typer.testing import CliRunner
from cmrkit.cli import app
out = []
for args in json.loads(sys.argv[1]):
    r = CliRunner().invoke(app, args)
    out.append([r.exit_code, r.output, repr(r.exception)])
print(json.dumps(out))
"""


def _without(tmp_path: Path, blocked: str) -> dict:
    """The environment of a process in which the modules ``blocked`` cannot be imported."""
    import os

    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "CMRKIT_TEST_BLOCKED": blocked}


EXTRA_MISSING = (
    "error: the assessment server needs the 'assess' extra ({}): pip install 'cmrkit[assess]'"
)


def test_every_assess_command_without_the_extra_says_so(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    db = f"sqlite:///{work / 'a.sqlite'}"
    commands = [
        ["serve", str(work / "p.pool.jsonl")],
        ["users", "add", "ann", "--role", "assessor", "--db", db],
        ["users", "list", "--db", db],
        ["users", "disable", "ann", "--db", db],
        ["users", "enable", "ann", "--db", db],
        ["users", "resume", "ann", "--db", db],
        ["export", "--db", db, "-o", str(work / "j.csv")],
        ["close", "--db", db],
        ["migrate", "--db", db],
    ]
    done = subprocess.run(
        [sys.executable, "-c", NO_EXTRA, json.dumps([["assess", *c] for c in commands])],
        capture_output=True,
        text=True,
        check=True,
        cwd=work,
        env=_without(tmp_path, "sqlalchemy"),
    )
    for command, (code, output, _) in zip(commands, json.loads(done.stdout), strict=True):
        assert code == 1, (command, output)
        assert output.strip() == EXTRA_MISSING.format("sqlalchemy is missing"), command
    # as a user runs it: the process's own exit code and one line on stderr, for each library of
    # the extra and for a library that one of them needs
    for blocked, says, args in (
        ("starlette", "starlette is missing", ["serve", work / "p.pool.jsonl"]),
        ("argon2", "argon2 is missing", ["users", "add", "ann", "--role", "assessor", "--db", db]),
        ("_cffi_backend", "argon2 needs _cffi_backend, which is missing", ["migrate", "--db", db]),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "cmrkit", "assess", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=work,
            env=_without(tmp_path, blocked),
            timeout=120,
        )
        assert (r.returncode, r.stderr.strip()) == (1, EXTRA_MISSING.format(says)), r.stderr
    assert list(work.iterdir()) == []


def test_the_login_limit_holds_for_parallel_guesses_two_servers_and_a_restart(
    tmp_path,
    cli,
    db_url,  # noqa: F811
):
    from collections import Counter
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    d = small_pool(tmp_path, cli)
    people = add_users(db_url, ["ann", "bob"])
    servers = [Server(d["pool"], db_url, log=tmp_path / f"s{i}.log").start() for i in range(2)]
    try:
        token = httpx.get(servers[0].url + "/healthz").cookies["csrftoken"]

        def login(url: str, name: str, password: str) -> int:
            with httpx.Client(base_url=url, timeout=120, cookies={"csrftoken": token}) as c:
                r = c.post(
                    "/api/login",
                    json={"name": name, "password": password},
                    headers={"X-CSRFToken": token},
                )
                return r.status_code

        # 200 wrong guesses for one name at once, spread over two server processes
        with ThreadPoolExecutor(64) as pool:
            codes = Counter(
                pool.map(lambda i: login(servers[i % 2].url, "ann", f"guess {i:04d}!"), range(200))
            )
        assert codes == {401: 5, 429: 195}
        # a restart forgets nothing: the right password is still refused for a while
        servers[0].stop()
        servers[0].start()
        for s in servers:
            assert login(s.url, "ann", people["ann"]) == 429
        assert login(servers[0].url, "bob", people["bob"]) == 200  # 5 of the address's 20
    finally:
        for s in servers:
            s.stop()


def _memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc for the memory")
def test_an_oversized_body_is_refused_before_it_is_read(tmp_path, cli):
    import contextlib
    import socket
    import threading

    import httpx

    d = small_pool(tmp_path, cli, queries=1, docs=2)
    server = Server(d["pool"], f"sqlite:///{tmp_path / 'a.sqlite'}").start()
    try:
        token = httpx.get(server.url + "/healthz").cookies["csrftoken"]
        head = (
            f"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Cookie: csrftoken={token}\r\nX-CSRFToken: {token}\r\n"
        )

        def answer(sock: socket.socket) -> str:
            sock.settimeout(60)
            got = b""
            while b"\r\n\r\n" not in got:
                part = sock.recv(65536)
                if not part:
                    break
                got += part
            return got.split(b"\r\n", 1)[0].decode()

        # 1 GB announced: the answer comes before a byte of the body is sent
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall((head + "Content-Length: 1000000000\r\n\r\n").encode())
            assert answer(sock) == "HTTP/1.1 413 Request Entity Too Large"

        # 256 MB streamed without a length: refused once the limit is passed, and the server
        # never holds the body
        pid = server.proc.pid
        with contextlib.suppress(OSError):  # the peak so far (the pool's loading) forgotten
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = _memory_kb(pid, "VmRSS")
        sent = [0]
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
            chunk = b"%x\r\n" % (1 << 20) + b"x" * (1 << 20) + b"\r\n"

            def stream():
                try:
                    for _ in range(256):
                        sock.sendall(chunk)
                        sent[0] += 1
                    sock.sendall(b"0\r\n\r\n")
                except OSError:
                    pass  # the server closed the connection: refused

            writer = threading.Thread(target=stream)
            writer.start()
            status = answer(sock)
            with contextlib.suppress(OSError):  # the server may have closed it already
                sock.shutdown(socket.SHUT_RDWR)
            writer.join(timeout=120)
        assert status == "HTTP/1.1 413 Request Entity Too Large"
        grew_mb = (_memory_kb(pid, "VmHWM") - before) / 1024
        assert grew_mb < 32, f"the server grew by {grew_mb:.0f} MB for a refused body"
        assert sent[0] < 256  # it stopped reading: the rest was never taken
        assert httpx.get(server.url + "/healthz").status_code == 200
    finally:
        server.stop()


def _tmpfs_allowed(folder: Path) -> bool:
    """Can this machine mount a tmpfs in a mount namespace of its own (unshare -rm)?"""
    import shutil

    if shutil.which("unshare") is None:
        return False
    folder.mkdir(exist_ok=True)
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs '{folder}'"],
        capture_output=True,
    )
    return done.returncode == 0


def test_a_full_disk_while_judging_is_a_json_503_and_loses_nothing(tmp_path, cli):
    """A real full tmpfs (mounted in a mount namespace of the server's own: needs unshare -rm)."""
    import errno

    import httpx

    disk = tmp_path / "disk"
    if not _tmpfs_allowed(disk):
        pytest.skip("cannot mount a tmpfs here (unshare -rm refused: no user namespaces)")
    d = small_pool(tmp_path, cli, queries=4, docs=8)
    port = free_port()
    log = tmp_path / "s.log"
    people = {"ann": "pw-ann-0123456789", "olga": "pw-olga-0123456789"}
    db = f"sqlite:///{disk}/a.sqlite"
    me = f"'{sys.executable}' -m cmrkit assess"
    # the accounts are added inside the namespace too: SQLite resolves /proc/PID/root to /
    serve = (
        f"mount -t tmpfs -o size=2m tmpfs '{disk}' && "
        f"echo {people['ann']} | {me} users add ann --role assessor --db {db} --password-stdin && "
        f"echo {people['olga']} | {me} users add olga --role organizer --db {db} "
        f"--password-stdin && exec {me} serve '{d['pool']}' --db {db} --port {port} --assessors 1"
    )
    with open(log, "wb") as out:
        proc = subprocess.Popen(["unshare", "-rm", "sh", "-c", serve], stdout=out, stderr=out)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        inside = Path(f"/proc/{proc.pid}/root{disk}")  # the server's tmpfs, seen from here
        ann = HttpClient(base)
        assert ann.login("ann", people["ann"]).status_code == 200
        acked, refused = [], []

        def judge_one() -> int:
            r = ann.get("/api/next")
            if r.status_code != 200:
                if r.status_code == 503:
                    refused.append(r.json()["error"])
                return r.status_code
            pid = r.json()["pair_id"]
            label = 1 + len(acked) % 5
            r = ann.judge(pid, label)
            if r.status_code == 201:
                acked.append((pid, "ann", label))
            elif r.status_code == 503:
                refused.append(r.json()["error"])
            return r.status_code

        assert [judge_one() for _ in range(3)] == [201] * 3
        held = ann.get("/api/next").json()["pair_id"]  # handed out before the disk fills
        filler = inside / "filler"
        with open(filler, "wb", buffering=0) as f:  # fill the disk to the last byte
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC
        r = ann.judge(held, 4)
        assert r.status_code == 503 and r.headers["content-type"] == "application/json", r.text
        refused.append(r.json()["error"])
        codes = [judge_one() for _ in range(5)]
        assert set(codes) <= {201, 503}, codes
        assert all("disk is full" in e for e in refused)
        filler.unlink()  # space again: the work goes on where it stopped
        while (code := judge_one()) == 201:
            pass
        assert code == 204
        org = HttpClient(base)
        assert org.login("olga", people["olga"]).status_code == 200
        rows = org.get("/api/export.csv").text.splitlines()[1:]
        got = [tuple(r.split(",")) for r in rows]
        assert sorted(got) == sorted((p, w, str(v)) for p, w, v in acked)  # each once, none lost
        assert len(acked) == 32
        said = log.read_text()
        assert "Traceback" not in said
        assert said.count("the disk of the database is full") == len(refused), said
        ann.close()
        org.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_refused_serve_creates_no_database(tmp_path, cli, db_url):  # noqa: F811
    """Issue 42 item 15: a serve refused for its pool (labels of another pool, seen) left a new,
    migrated, empty database behind. Every refusal of the pool, its labels, strategy, gold and
    collection now comes before the database is created: no SQLite file, no PostgreSQL table."""
    import sqlalchemy as sa
    from pool_fixtures import write_collection

    from cmrkit.judgments.auto.labels import Label, write_labels

    d = small_pool(tmp_path, cli, queries=2, docs=3)
    write_labels([Label("q9", "d1", "auto:llm", 5, 0.99)], tmp_path / "other.csv")
    other = write_collection(tmp_path / "elsewhere", ["q1", "q2"], ["d1", "zz"])
    refusals = {
        "labels from another pool: pair q9 d1": ["--auto", tmp_path / "other.csv"],
        "--auto with mtf's adaptive rounds is not supported": [
            "--auto", tmp_path / "other.csv", "--strategy", "mtf", "--budget", "2",
            "--per-query",
        ],
        "--gold-rate needs --gold QRELS": ["--gold-rate", "0.1"],
        "missing.txt: file not found": ["--gold", tmp_path / "missing.txt"],
        "below the number of queries": ["--strategy", "depth", "--budget", "1"],
        "corpus": ["--collection", other],
    }  # fmt: skip
    before = sorted(p.name for p in tmp_path.iterdir())
    for why, args in refusals.items():
        r = cli("assess", "serve", d["pool"], "--db", db_url, "--port", free_port(), *args)
        assert r.exit_code == 2, (why, r.output)
        assert why in " ".join(r.output.split()), (why, r.output)
        assert sorted(p.name for p in tmp_path.iterdir()) == before, why  # no SQLite file
        if db_url.startswith("postgresql"):
            engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
            with engine.connect() as conn:
                assert sa.inspect(conn).get_table_names() == [], why
            engine.dispose()
