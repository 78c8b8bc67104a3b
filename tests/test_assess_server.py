"""The assessment server (`cmrkit assess`) over its JSON API, against real SQLite and PostgreSQL:
accounts, N distinct assessors per pair, leases, gold pauses, idempotent judgments, CSRF, login
rate limit, sessions, adaptive rounds, strata, and the export read by `judgments aggregate`."""

from __future__ import annotations

import csv
import io
import time
from collections import Counter

import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

from assess_server_fixtures import (  # noqa: E402
    Client,
    add_user,
    db_url,  # noqa: F401 - the fixture
    logged_in,
    make_app,
    small_pool,
)
from pool_fixtures import read_qrels_lines  # noqa: E402


def judge_all(client, label_of=lambda task: 4, limit=500, must_end=True):
    """Ask and judge until 204 (or a refusal); returns [(pair_id, label)] and the last status
    (None when ``limit`` pairs were judged and ``must_end`` is off)."""
    done = []
    for _ in range(limit):
        r = client.get("/api/next")
        if r.status_code != 200:
            return done, r.status_code
        task = r.json()
        label = label_of(task)
        ans = client.judge(task["pair_id"], label)
        assert ans.status_code == 201, ans.text
        done.append((task["pair_id"], label))
    assert not must_end, "the queue never ran dry"
    return done, None


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_migrations_build_the_models_schema(db_url):  # noqa: F811
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from cmrkit.assess.server import db

    engine = db.make_engine(db_url)
    db.migrate(engine)
    db.migrate(engine)  # twice is a no-op
    assert db.current_revision(engine) == db.head_revision()
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    assert diff == []


def test_users_commands(tmp_path, cli, db_url):  # noqa: F811
    import sqlalchemy as sa

    from cmrkit.assess.server import db

    r = cli("assess", "users", "add", "ann", "--role", "assessor", "--db", db_url)
    assert r.exit_code == 0, r.output
    password = r.output.split("password (shown once): ")[1].split()[0]
    assert len(password) >= 10
    from typer.testing import CliRunner

    from cmrkit.cli import app

    r = CliRunner().invoke(
        app,
        [
            "assess",
            "users",
            "add",
            "olga",
            "--role",
            "organizer",
            "--db",
            db_url,
            "--password-stdin",
        ],
        input="correct horse battery\n",
    )
    assert r.exit_code == 0, r.output
    assert "correct horse" not in r.output
    again = cli("assess", "users", "add", "ann", "--role", "assessor", "--db", db_url)
    assert again.exit_code == 2 and "already exists" in again.output
    bad = cli("assess", "users", "add", "zed", "--role", "boss", "--db", db_url)
    assert bad.exit_code == 2 and "--role" in bad.output
    listed = cli("assess", "users", "list", "--db", db_url)
    assert "ann\tassessor\tactive" in listed.output and "olga\torganizer\tactive" in listed.output
    assert cli("assess", "users", "disable", "ann", "--db", db_url).exit_code == 0
    assert "ann\tassessor\tdisabled" in cli("assess", "users", "list", "--db", db_url).output

    engine = db.make_engine(db_url)
    with engine.connect() as conn:
        hashes = dict(conn.execute(sa.select(db.users.c.name, db.users.c.password_hash)).all())
    assert hashes["ann"].startswith("$argon2id$") and password not in hashes["ann"]
    assert "correct horse" not in hashes["olga"]


def test_each_pair_goes_to_n_distinct_assessors(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli)
    app, engine = make_app(db_url, d["pool"], assessors=2)
    people = [logged_in(app, engine, n) for n in ("ann", "bob", "cid")]
    org = logged_in(app, engine, "olga", "organizer")
    fresh = org.get("/api/progress").json()["pool"]
    # a depth pool has no round to come, and is finished only once every pair is judged
    assert (fresh["finished"], fresh["more_rounds"], fresh["complete"]) == (False, False, 0)
    by_pair: dict[str, list[str]] = {}
    # interleave the three assessors one pair at a time
    active = list(people)
    while active:
        for c in list(active):
            r = c.get("/api/next")
            if r.status_code == 204:
                active.remove(c)
                continue
            assert r.status_code == 200, r.text
            pid = r.json()["pair_id"]
            assert c.judge(pid, 5).status_code == 201
            by_pair.setdefault(pid, []).append(c)
    pairs = 3 * 6
    assert len(by_pair) == pairs
    assert all(len(v) == 2 and v[0] is not v[1] for v in by_pair.values())
    assert org.get("/api/progress").json()["pool"]["finished"] is True
    # an assessor sees their own judgments only
    mine = people[0].get("/api/judgments").json()["judgments"]
    assert {j["pair_id"] for j in mine} == {p for p, v in by_pair.items() if people[0] in v}


def test_refusals_change_nothing(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli)
    app, engine = make_app(db_url, d["pool"], assessors=1)
    ann = logged_in(app, engine, "ann")
    bob = logged_in(app, engine, "bob")
    task = ann.get("/api/next").json()
    again = ann.get("/api/next").json()  # asking again returns the same open pair
    assert again["pair_id"] == task["pair_id"]
    pid = task["pair_id"]
    for label in (0, 6, "5", 4.0, True, None):
        r = ann.judge(pid, label)
        assert r.status_code == 422 and "1..5" in r.json()["error"], (label, r.text)
    assert ann.post("/api/judgments", {"pair_id": pid, "label": 3, "x": 1}).status_code == 422
    assert ann.post("/api/judgments", [1, 2]).status_code == 400
    # an unknown id and another assessor's pair get the same answer
    assert ann.judge("x0000000000", 3).status_code == 404
    r = bob.judge(pid, 1)
    assert r.status_code == 404 and "not yours" in r.json()["error"]
    assert ann.judge(pid, 2).status_code == 201
    dup = ann.judge(pid, 5)
    assert dup.status_code == 409 and dup.json()["label"] == 2
    assert ann.get("/api/judgments").json()["judgments"][0]["label"] == 2
    # assessors do not reach organizer pages
    assert ann.get("/api/progress").status_code == 403
    assert ann.get("/progress").status_code == 403
    assert ann.get("/api/export.csv").status_code == 403
    assert ann.post("/api/close", {}).status_code == 403
    # not logged in
    anon = Client(app)
    assert anon.get("/api/next").status_code == 401
    assert anon.judge(pid, 3).status_code == 401
    # closed pool
    org = logged_in(app, engine, "olga", "organizer")
    open_task = bob.get("/api/next").json()
    assert org.post("/api/close", {}).json() == {"closed": True, "released_leases": 1}
    assert bob.judge(open_task["pair_id"], 3).status_code == 409
    assert bob.get("/api/next").status_code == 409
    assert ann.put(f"/api/judgments/{pid}", {"label": 4}).status_code == 409
    p = org.get("/api/progress").json()
    assert p["pool"]["judgments"] == 1 and p["pool"]["closed"] is True


def test_csrf_and_login_rate_limit(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli)
    app, engine = make_app(db_url, d["pool"], assessors=1)
    password = add_user(engine, "ann")
    c = Client(app)
    r = c.post("/api/login", {"name": "ann", "password": password}, csrf=False)
    assert r.status_code == 403 and "CSRF" in r.json()["error"]
    assert c.login("ann", password).status_code == 200
    pid = c.get("/api/next").json()["pair_id"]
    r = c.post("/api/judgments", {"pair_id": pid, "label": 4}, csrf=False)
    assert r.status_code == 403
    forged = c.http.post(
        "/api/judgments", json={"pair_id": pid, "label": 4}, headers={"X-CSRFToken": "forged"}
    )
    assert forged.status_code == 403
    assert c.get("/api/judgments").json()["judgments"] == []  # nothing was saved
    assert c.judge(pid, 4).status_code == 201

    other = Client(app)
    for _ in range(5):
        assert other.login("ann", "wrong password!").status_code == 401
    r = other.login("ann", password)  # right, but too many failures before it
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert other.login("nobody", "wrong password!").status_code == 401


def test_sessions_expire_and_end_on_disable(tmp_path, cli, db_url):  # noqa: F811
    from cmrkit.assess.server import auth
    from cmrkit.assess.server.db import write

    d = small_pool(tmp_path, cli)
    app, engine = make_app(db_url, d["pool"], assessors=1, session_seconds=3.0)
    ann = logged_in(app, engine, "ann")
    assert ann.get("/api/me").status_code == 200
    time.sleep(4.2)
    r = ann.get("/api/me")
    assert r.status_code == 401 and "expired" in r.json()["error"]

    app, engine = make_app(db_url, d["pool"], assessors=1, session_seconds=3600)
    bob = logged_in(app, engine, "bob")
    assert bob.get("/api/next").status_code == 200
    with write(engine) as conn:
        auth.set_disabled(conn, "bob", True)
    assert bob.get("/api/next").status_code == 401
    assert bob.login("bob", "pw-bob-0123456789").status_code == 401


def test_logout_ends_the_session_on_the_server(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli)
    app, engine = make_app(db_url, d["pool"], assessors=1)
    ann = logged_in(app, engine, "ann")
    pid = ann.get("/api/next").json()["pair_id"]
    kept = ann.http.cookies.get("cmrkit_session")  # the cookie, as someone who saw it keeps it
    assert ann.post("/api/logout", {}).status_code == 200
    replay = Client(app)
    replay.http.cookies.set("cmrkit_session", kept)
    assert replay.get("/api/me").status_code == 401
    assert replay.get("/api/next").status_code == 401
    r = replay.judge(pid, 4)
    assert r.status_code == 401 and "logged out or expired" in r.json()["error"]
    assert replay.get("/api/judgments").status_code == 401
    assert replay.put(f"/api/judgments/{pid}", {"label": 2}).status_code == 401
    org = logged_in(app, engine, "olga", "organizer")
    assert org.get("/api/progress").json()["pool"]["judgments"] == 0  # nothing was taken
    # a new login is a new session; the old cookie stays dead
    assert ann.login("ann", "pw-ann-0123456789").status_code == 200
    assert ann.judge(pid, 4).status_code == 201
    assert replay.get("/api/me").status_code == 401


def test_user_names_and_passwords_that_cannot_work_are_refused(tmp_path, cli, db_url):  # noqa: F811
    import json

    from typer.testing import CliRunner

    from cmrkit.assess.server.auth import MAX_PASSWORD
    from cmrkit.cli import app as cli_app

    r = cli("assess", "users", "add", "zed\n", "--role", "assessor", "--db", db_url)
    assert r.exit_code == 2 and "user name 'zed\\n'" in r.output, r.output

    def add(name, password):
        args = ["assess", "users", "add", name, "--role", "assessor", "--db", db_url]
        return CliRunner().invoke(cli_app, [*args, "--password-stdin"], input=password + "\n")

    r = add("long", "x" * (MAX_PASSWORD + 1))
    assert r.exit_code == 2 and f"at most {MAX_PASSWORD}" in r.output, r.output
    # the longest password allowed logs in, even written as JSON's longest escapes
    longest = "\U0001f600" * MAX_PASSWORD
    assert add("ann", longest).exit_code == 0
    assert "zed" not in cli("assess", "users", "list", "--db", db_url).output
    d = small_pool(tmp_path, cli)
    app, _ = make_app(db_url, d["pool"], assessors=1)
    c = Client(app)
    body = json.dumps({"name": "ann", "password": longest}, ensure_ascii=True)
    assert len(body) > 12 * MAX_PASSWORD
    r = c.http.post(
        "/api/login",
        content=body,
        headers={"X-CSRFToken": c.token, "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text


def test_expired_leases_go_back_to_the_queue(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli, queries=1, docs=2)
    app, engine = make_app(db_url, d["pool"], assessors=1, lease_seconds=4.0)
    ann = logged_in(app, engine, "ann")
    bob = logged_in(app, engine, "bob")
    cid = logged_in(app, engine, "cid")
    first = ann.get("/api/next").json()["pair_id"]
    second = bob.get("/api/next").json()["pair_id"]
    assert first != second
    assert cid.get("/api/next").status_code == 204  # both pairs are out
    time.sleep(4.2)
    assert bob.judge(second, 3).status_code == 201  # late, but not yet reclaimed: taken
    got = cid.get("/api/next").json()["pair_id"]  # ann's lease ran out: it comes back
    assert got == first
    r = ann.judge(first, 5)
    assert r.status_code == 404 and "lease" in r.json()["error"]
    assert cid.judge(first, 1).status_code == 201
    org = logged_in(app, engine, "olga", "organizer")
    assert org.get("/api/progress").json()["pool"]["complete"] == 2


def test_gold_pairs_pause_and_flag_an_inaccurate_assessor(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli)
    app, engine = make_app(
        db_url,
        d["pool"],
        assessors=2,
        gold_file=d["gold_file"],
        gold_rate=0.25,
        gold_after=2,
        min_gold_accuracy=0.6,
    )
    bad = logged_in(app, engine, "bad")
    org = logged_in(app, engine, "olga", "organizer")
    # the assessor guesses; the key (after export) tells which pairs were gold
    exported = tmp_path / "out.csv"
    seen = []

    def wrong(task):
        seen.append(task["pair_id"])
        return 1 if len(seen) % 4 == 0 else 4  # guessing: label 1 on every 4th pair

    done, status = judge_all(bad, wrong)
    r = cli("assess", "export", "--db", db_url, "-o", exported)
    assert r.exit_code == 0, r.output
    key = {
        row["pair_id"]: row
        for row in csv.DictReader(
            io.StringIO((tmp_path / "out.key.tsv").read_text()), delimiter="\t"
        )
    }
    golds = [(p, lab) for p, lab in done if key[p]["gold"] != ""]
    right = [int((lab >= 4) == (key[p]["gold"] == "1")) for p, lab in golds]
    p = org.get("/api/progress").json()
    row = next(a for a in p["assessors"] if a["name"] == "bad")
    assert row["gold"] == len(golds) and row["gold_accuracy"] == pytest.approx(
        sum(right) / len(right)
    )
    # the gold share handed out: one in four
    assert len(golds) == len(done) // 4
    expect_paused = any(k >= 2 and sum(right[:k]) / k < 0.6 for k in range(1, len(right) + 1))
    assert row["paused"] == expect_paused
    if expect_paused:
        assert status == 403
        assert "gold accuracy" in row["flag"]
        r = bad.get("/api/next")
        assert r.status_code == 403 and r.json()["paused"] is True
        assert "paused: gold accuracy" in cli("assess", "users", "list", "--db", db_url).output
        assert cli("assess", "users", "resume", "bad", "--db", db_url).exit_code == 0
        assert bad.get("/api/next").status_code in (200, 204)


def test_change_last_judgments(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli, queries=4, docs=6)
    app, engine = make_app(db_url, d["pool"], assessors=1)
    ann = logged_in(app, engine, "ann")
    done, _ = judge_all(ann, lambda t: 2, limit=22, must_end=False)
    oldest, newest = done[0][0], done[-1][0]
    r = ann.put(f"/api/judgments/{newest}", {"label": 5})
    assert r.status_code == 200 and r.json() == {"pair_id": newest, "label": 5, "previous": 2}
    r = ann.put(f"/api/judgments/{oldest}", {"label": 5})
    assert r.status_code == 409 and "last 20" in r.json()["error"]
    assert ann.put(f"/api/judgments/{newest}", {"label": 9}).status_code == 422
    bob = logged_in(app, engine, "bob")
    assert bob.put(f"/api/judgments/{newest}", {"label": 1}).status_code == 404
    out = tmp_path / "j.csv"
    assert cli("assess", "export", "--db", db_url, "-o", out).exit_code == 0
    labels = {r["pair_id"]: int(r["label"]) for r in read_csv(out)}
    assert labels[newest] == 5 and labels[oldest] == 2 and len(labels) == 22


def test_export_is_read_by_judgments_aggregate(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli, hostile=True)
    app, engine = make_app(db_url, d["pool"], assessors=3)
    people = {n: logged_in(app, engine, n) for n in ("ann", "bob", "cid")}
    given: dict[str, list[int]] = {}
    by_worker: dict[str, dict[str, int]] = {}
    for i, (name, c) in enumerate(people.items()):
        done, status = judge_all(
            c, lambda t, i=i: [5, 4, 1, 2][(sum(map(ord, t["pair_id"])) // (i + 1)) % 4]
        )
        assert status == 204
        for pid, label in done:
            given.setdefault(pid, []).append(label)
            by_worker.setdefault(name, {})[pid] = label
    out = tmp_path / "exp" / "judged.csv"
    out.parent.mkdir()
    r = cli("assess", "export", "--db", db_url, "-o", out)
    assert r.exit_code == 0, r.output
    rows = read_csv(out)
    assert list(rows[0]) == ["pair_id", "worker_id", "label"]
    assert Counter((r["pair_id"], r["worker_id"]) for r in rows).most_common(1)[0][1] == 1
    assert sorted(int(r["label"]) for r in rows) == sorted(x for v in given.values() for x in v)
    # a second export is up to date; another content needs --force
    assert "up to date" in cli("assess", "export", "--db", db_url, "-o", out).output
    qrels = tmp_path / "q.txt"
    r = cli(
        "judgments",
        "aggregate",
        out,
        "--pool",
        tmp_path / "exp" / "judged.pool.jsonl",
        "--key",
        tmp_path / "exp" / "judged.key.tsv",
        "--min-agree",
        "2",
        "--min-unanimous",
        "2",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--report",
        tmp_path / "report.json",
        "-o",
        qrels,
    )
    assert r.exit_code == 0, r.output
    got = read_qrels_lines(qrels)
    # the progress page's agreement is the one `judgments aggregate` reports
    import json

    report = json.loads((tmp_path / "report.json").read_text())["agreement"]
    org = logged_in(app, engine, "olga", "organizer")
    agreement = org.get("/api/progress").json()["agreement"]
    assert agreement["pairs"] == report["pairs"] == len(given)
    assert agreement["fleiss_kappa"] == pytest.approx(report["kappa"])
    assert agreement["fleiss_kappa_likert"] == pytest.approx(report["kappa_likert"])
    sklearn = pytest.importorskip("sklearn.metrics")
    for c in agreement["cohen"]:
        a, b = by_worker[c["a"]], by_worker[c["b"]]
        both = sorted(set(a) & set(b))
        want = sklearn.cohen_kappa_score([a[p] >= 4 for p in both], [b[p] >= 4 for p in both])
        assert c["pairs"] == len(both) and c["kappa"] == pytest.approx(want)
    assert len(agreement["cohen"]) == 3
    key = {
        row["pair_id"]: (row["query_id"], row["doc_id"])
        for row in csv.DictReader(
            io.StringIO((tmp_path / "exp" / "judged.key.tsv").read_text()), delimiter="\t"
        )
    }
    for pid, labels in given.items():
        rel = sum(1 for x in labels if x >= 4)
        expect = 1 if rel >= 2 else 0
        assert got[key[pid]] == expect, (pid, labels)
    # the same through export --qrels
    r = cli(
        "assess",
        "export",
        "--db",
        db_url,
        "-o",
        tmp_path / "again.csv",
        "--qrels",
        tmp_path / "q2.txt",
        "--min-agree",
        "2",
        "--min-unanimous",
        "2",
        "--min-relevant",
        "0",
    )
    assert r.exit_code == 0, r.output
    assert read_qrels_lines(tmp_path / "q2.txt") == got


def test_hostile_texts_arrive_escaped(tmp_path, cli, db_url):  # noqa: F811
    evil = "<script>window.pwned=4</script>"
    d = small_pool(tmp_path, cli, hostile=True, qids=["q1", evil])
    app, engine = make_app(db_url, d["pool"], assessors=1)
    ann = logged_in(app, engine, "ann")
    seen = 0
    for _ in range(30):
        r = ann.get("/api/next")
        if r.status_code != 200:
            break
        t = r.json()
        html = "".join(
            [*t["query"].values(), *(v for v in t["unit"].values() if isinstance(v, str))]
        )
        assert "<script" not in html and "<img" not in html and "<!--" not in html
        if "&lt;script&gt;window.pwned = 1" in t["unit"]["main"]:
            seen += 1
        assert ann.judge(t["pair_id"], 3).status_code == 201
    assert seen == 2
    r = ann.get("/assess")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    org = logged_in(app, engine, "olga", "organizer")
    page = org.get("/progress").text  # the organizer sees query ids: escaped
    assert "&lt;script&gt;window.pwned=4&lt;/script&gt;" in page and evil not in page
    assert any(q["qid"] == evil for q in org.get("/api/progress").json()["queries"])


def test_adaptive_rounds_follow_the_strategy(tmp_path, cli, db_url):  # noqa: F811
    from cmrkit.pooling import StrategyOptions

    d = small_pool(tmp_path, cli, queries=2, docs=8)
    opts = StrategyOptions(name="mtf", budget=4, per_query=True)
    app, engine = make_app(db_url, d["pool"], assessors=1, strategy=opts)
    ann = logged_in(app, engine, "ann")
    org = logged_in(app, engine, "olga", "organizer")
    first = org.get("/api/progress").json()["pool"]
    assert first["pairs"] == 2  # round 1: one per query
    assert first["finished"] is False and first["more_rounds"] is True
    # each judgment that completes a round makes the next one at once
    done, status = judge_all(ann, lambda t: 5 if _relevant(t, d["truth"]) else 1)
    assert status == 204 and len(done) == 2 * 4
    pool = org.get("/api/progress").json()["pool"]
    assert pool["round"] == 4 and pool["finished"] is True and pool["complete"] == 8
    assert pool["more_rounds"] is False
    out = tmp_path / "mtf.csv"
    assert cli("assess", "export", "--db", db_url, "-o", out).exit_code == 0
    served = {
        (row["query_id"], row["doc_id"])
        for row in csv.DictReader(
            io.StringIO((tmp_path / "mtf.key.tsv").read_text()), delimiter="\t"
        )
    }
    # the same strategy run at once against assessors who know the truth chooses the same pairs
    sim = tmp_path / "sim.pool.jsonl"
    r = cli(
        "pool",
        "create",
        d["run"],
        "--collection",
        d["collection"],
        "--depth",
        "100",
        "--strategy",
        "mtf",
        "--budget",
        "4",
        "--per-query",
        "--simulate",
        d["qrels"],
        "--assessors",
        "1",
        "--noise",
        "0",
        "-o",
        sim,
    )
    assert r.exit_code == 0, r.output
    from cmrkit.pooling import read_pool

    chosen = {(p.qid, p.docno) for p in read_pool(sim).pairs if p.order is not None}
    assert served == chosen


def _relevant(task, truth):
    # the candidate's text names its docno ("Text of d3.")
    text = task["unit"]["main"]
    docno = text.removeprefix("Text of ").rstrip(".")
    qid = task["query"]["main"].split('<mark class="q">')[1].split("</mark>")[0]
    return truth[qid].get(docno, 0) > 0


def test_strata_pool_gives_sample_qrels(tmp_path, cli, db_url):  # noqa: F811
    from cmrkit.pooling import StrategyOptions

    d = small_pool(tmp_path, cli, queries=2, docs=8)
    opts = StrategyOptions(name="strata", strata="1-2:1.0,3-100:0.5", seed=3)
    app, engine = make_app(db_url, d["pool"], assessors=1, strategy=opts)
    ann = logged_in(app, engine, "ann")
    done, status = judge_all(ann, lambda t: 5 if _relevant(t, d["truth"]) else 1)
    assert status == 204 and len(done) == 2 * (2 + 3)
    out = tmp_path / "s.csv"
    r = cli(
        "assess",
        "export",
        "--db",
        db_url,
        "-o",
        out,
        "--qrels",
        tmp_path / "s.qrels",
        "--sample-qrels",
        tmp_path / "s.sample",
        "--min-agree",
        "1",
        "--min-unanimous",
        "1",
        "--min-relevant",
        "0",
    )
    assert r.exit_code == 0, r.output
    r = cli(
        "pool",
        "sample-qrels",
        tmp_path / "s.pool.jsonl",
        tmp_path / "s.qrels",
        "-o",
        tmp_path / "ref.sample",
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "s.sample").read_text() == (tmp_path / "ref.sample").read_text()
    lines = (tmp_path / "s.sample").read_text().splitlines()
    assert len(lines) == 2 * 8 and sum(1 for x in lines if x.endswith(" -1")) == 2 * 3


def test_serve_refuses_another_pool_on_the_same_database(tmp_path, cli, db_url):  # noqa: F811
    from cmrkit.errors import CmrkitError

    d = small_pool(tmp_path, cli)
    make_app(db_url, d["pool"], assessors=1)
    with pytest.raises(CmrkitError, match="another pool or other choices"):
        make_app(db_url, d["pool"], assessors=1, seed=5)


def test_cohen_kappa_matches_scikit_learn():
    import random

    sklearn = pytest.importorskip("sklearn.metrics")
    from cmrkit.judgments.agreement import cohen_kappa

    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)  # by hand
    assert cohen_kappa([1, 1], [1, 1]) is None  # chance agreement is certain
    rng = random.Random(7)
    for _ in range(20):
        a = [rng.randint(1, 5) for _ in range(30)]
        b = [x if rng.random() < 0.6 else rng.randint(1, 5) for x in a]
        assert cohen_kappa(a, b) == pytest.approx(sklearn.cohen_kappa_score(a, b))


def test_serve_refuses_bad_options_before_serving(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli)
    cases = [
        (["--gold-rate", "0.1"], "--gold-rate needs --gold"),
        (["--assessors", "0"], "--assessors must lie in 1..1000"),
        (["--budget", "5"], "go with --strategy"),
        (["--strategy", "mtf"], "needs a --budget"),
        (["--lease", "0"], "--lease must lie"),
        (["--port", "70000"], "--port must lie"),
    ]
    for args, message in cases:
        r = cli("assess", "serve", d["pool"], "--db", db_url, *args)
        assert r.exit_code == 2 and message in r.output, (args, r.output)
    r = cli("assess", "serve", d["pool"], "--db", "mysql://x@y/z")
    assert r.exit_code == 2 and "sqlite:///PATH nor postgresql://" in r.output
    r = cli("assess", "serve", tmp_path / "missing.jsonl", "--db", db_url)
    assert r.exit_code == 2 and "pool file not found" in r.output
    # nothing was loaded by the refused starts: a good start still works
    app, engine = make_app(db_url, d["pool"], assessors=1)
    assert logged_in(app, engine, "ann").get("/api/next").status_code == 200


def test_the_command_line_does_not_import_the_server_libraries():
    import subprocess
    import sys

    code = (
        "import sys, cmrkit.cli; "
        "print(sorted(m for m in ('starlette', 'sqlalchemy', 'argon2', 'uvicorn', 'alembic') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_sqlite_writers_take_turns_in_order():
    import threading

    from cmrkit.assess.server.db import FifoLock

    lock = FifoLock()
    order: list[int] = []
    threads = []
    with lock:  # held while the others line up, one after the other
        for i in range(8):
            t = threading.Thread(
                target=lambda i=i: (
                    lock.__enter__(),
                    order.append(i),
                    lock.__exit__(None, None, None),
                )
            )
            t.start()
            threads.append(t)
            deadline = time.monotonic() + 10
            while len(lock._waiting) < i + 1 and time.monotonic() < deadline:
                time.sleep(0.001)
    for t in threads:
        t.join(timeout=10)
    assert order == list(range(8))


def test_the_scale_is_the_one_the_server_sends(tmp_path, cli):
    from importlib import resources

    from cmrkit.judgments.scale import LIKERT

    d = small_pool(tmp_path, cli, queries=1, docs=2)
    app, engine = make_app(f"sqlite:///{tmp_path / 'a.sqlite'}", d["pool"], assessors=1)
    ann = logged_in(app, engine, "ann")
    scale = [list(item) for item in LIKERT]
    assert ann.get("/api/next").json()["scale"] == scale
    assert ann.get("/api/judgments").json()["scale"] == scale
    # the page builds its buttons and keys from what the server sends, and knows no label
    script = resources.files("cmrkit").joinpath("data/assess/server/static/assess.js")
    text = script.read_text(encoding="utf-8")
    assert not any(name in text for _, name in LIKERT)
    assert "setScale(current.scale)" in text and "setScale(r.data.scale)" in text


def test_handing_out_a_pair_reads_by_index_only(tmp_path, cli):
    """GET /api/next at full pace (issue 33): every statement it runs on SQLite finds its rows
    through an index; none sorts or scans the pool's pairs (a pool of 6,000 pairs took 12 ms
    a request to sort the open pairs for the first one)."""
    from sqlalchemy import event

    d = small_pool(tmp_path, cli, queries=4, docs=8)
    app, engine = make_app(f"sqlite:///{tmp_path / 'a.sqlite'}", d["pool"], assessors=3)
    people = [logged_in(app, engine, n) for n in ("ann", "bob")]
    for c in people:  # some pairs open, some judged, as in the middle of a session
        c.judge(c.get("/api/next").json()["pair_id"], 4)
    seen: list[tuple[str, tuple]] = []

    def look(conn, cursor, statement, params, context, many):
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, params))

    event.listen(engine, "before_cursor_execute", look)
    try:
        assert people[0].get("/api/next").status_code == 200
        assert people[1].get("/api/next").status_code == 200  # its open pair, again
    finally:
        event.remove(engine, "before_cursor_execute", look)
    assert any("pairs.taken" in s for s, _ in seen)  # the queue was asked
    with engine.connect() as conn:
        for statement, params in seen:
            plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
            details = [row[-1] for row in plan]
            assert not any("TEMP B-TREE" in x for x in details), (statement, details)
            assert not any(x.startswith("SCAN pairs") for x in details), (statement, details)


def test_an_aggregation_that_keeps_no_query_says_which_rule_dropped_them(tmp_path, cli):
    d = small_pool(tmp_path, cli)
    db = f"sqlite:///{tmp_path / 'a.sqlite'}"
    app, engine = make_app(db, d["pool"], assessors=1)
    done, _ = judge_all(logged_in(app, engine, "ann"), lambda t: 1)
    assert done
    # one assessor per pair can never meet the defaults (--min-unanimous 3): refused, the
    # option named, nothing written (the CSV, key and pool neither)
    r = cli("assess", "export", "--db", db, "-o", tmp_path / "j.csv", "--qrels", tmp_path / "q.txt")
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "no pair can get a label: the judgments give each pair at most 1 assessor(s)" in said
    assert "--min-unanimous 3" in said and "pass --min-unanimous 1" in said
    assert not any(tmp_path.glob("j.*")) and not (tmp_path / "q.txt").exists()
    r = cli(
        "assess", "export", "--db", db, "-o", tmp_path / "j.csv", "--qrels", tmp_path / "q.txt",
        "--min-unanimous", "1",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (tmp_path / "q.txt").read_text() == ""
    assert "warning: no query kept, the qrels written are empty: 3 dropped by --min-relevant 5" in (
        " ".join(r.output.split())
    )
    r = cli(
        "judgments", "aggregate", tmp_path / "j.csv", "--pool", tmp_path / "j.pool.jsonl",
        "--key", tmp_path / "j.key.tsv", "-o", tmp_path / "agg.txt",
    )  # fmt: skip
    assert r.exit_code == 2 and "--min-unanimous 3" in r.output, r.output
    assert not (tmp_path / "agg.txt").exists()
    r = cli(
        "judgments", "aggregate", tmp_path / "j.csv", "--pool", tmp_path / "j.pool.jsonl",
        "--key", tmp_path / "j.key.tsv", "--min-unanimous", "1", "-o", tmp_path / "agg.txt",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "warning: no query kept" in r.output and "--min-relevant 5" in r.output
    kept = cli(
        "judgments", "aggregate", tmp_path / "j.csv", "--pool", tmp_path / "j.pool.jsonl",
        "--key", tmp_path / "j.key.tsv", "--min-unanimous", "1", "--min-relevant", "0",
        "-o", tmp_path / "all.txt",
    )  # fmt: skip
    assert kept.exit_code == 0 and "warning" not in kept.output
    assert set(read_qrels_lines(tmp_path / "all.txt").values()) == {0}
