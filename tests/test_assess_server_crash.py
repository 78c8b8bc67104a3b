"""kill -9 of a real `cmrkit assess serve` in the middle of judging, then a restart: nothing
acknowledged is lost, nothing is duplicated, and the work goes on to the end (SQLite and
PostgreSQL). bench/bench_assess.py runs the long version under load."""

from __future__ import annotations

import csv
import threading
import time
from collections import Counter

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from assess_server_fixtures import (  # noqa: E402
    HttpClient,
    Server,
    add_users,
    db_url,  # noqa: F401 - the fixture
    small_pool,
)


def _work(server: Server, name: str, password: str, acked: list, stop: threading.Event):
    """Judge until told to stop, the queue is dry, or the server is gone; record every 201."""
    import httpx

    try:
        c = HttpClient(server.url)
        assert c.login(name, password).status_code == 200
        for _ in range(10_000):  # bounded
            if stop.is_set():
                return
            r = c.get("/api/next")
            if r.status_code == 204:
                return
            assert r.status_code == 200, r.text
            pid = r.json()["pair_id"]
            label = 1 + (sum(map(ord, pid + name)) % 5)
            ans = c.judge(pid, label)
            assert ans.status_code == 201, ans.text
            acked.append((pid, name, label))
    except httpx.HTTPError:
        return  # the server was killed
    except AssertionError as e:
        acked.append(("error", name, str(e)))


def test_kill_9_loses_and_duplicates_nothing(tmp_path, cli, db_url):  # noqa: F811
    d = small_pool(tmp_path, cli, queries=6, docs=20)
    names = [f"a{i}" for i in range(6)]
    passwords = add_users(db_url, names)
    server = Server(d["pool"], db_url, "--assessors", "3", "--lease", "60", log=tmp_path / "s.log")
    server.start()
    acked: list[tuple[str, str, int]] = []
    stop = threading.Event()
    threads = [
        threading.Thread(target=_work, args=(server, n, passwords[n], acked, stop)) for n in names
    ]
    for t in threads:
        t.start()
    end = time.monotonic() + 60
    while len(acked) < 60 and time.monotonic() < end:
        time.sleep(0.05)
    server.kill()  # in the middle of the load
    before = list(acked)
    assert len(before) >= 60
    for t in threads:
        t.join(timeout=60)

    server.start()  # the same database
    out = tmp_path / "after-crash.csv"
    assert cli("assess", "export", "--db", db_url, "-o", out).exit_code == 0
    rows = list(csv.DictReader(open(out, newline="", encoding="utf-8")))
    got = Counter((r["pair_id"], r["worker_id"], int(r["label"])) for r in rows)
    assert all(got[a] == 1 for a in acked), "an acknowledged judgment is missing or doubled"
    assert max(Counter((r["pair_id"], r["worker_id"]) for r in rows).values()) == 1
    # at most the requests in flight at the kill were saved without their answer
    assert len(rows) - len(acked) <= len(names)

    assert not [a for a in acked if a[0] == "error"]
    # work goes on after the restart: open pairs come back to their assessors
    acked2: list[tuple[str, str, int]] = []
    threads = [
        threading.Thread(target=_work, args=(server, n, passwords[n], acked2, threading.Event()))
        for n in names
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    server.stop()
    assert not [a for a in acked2 if a[0] == "error"]
    final = tmp_path / "final.csv"
    assert cli("assess", "export", "--db", db_url, "-o", final).exit_code == 0
    rows = list(csv.DictReader(open(final, newline="", encoding="utf-8")))
    per_pair = Counter(r["pair_id"] for r in rows)
    assert len(per_pair) == 6 * 20 and set(per_pair.values()) == {3}
    assert Counter((r["pair_id"], r["worker_id"]) for r in rows).most_common(1)[0][1] == 1
    final_set = {(r["pair_id"], r["worker_id"], int(r["label"])) for r in rows}
    assert set(acked) | set(acked2) <= final_set
