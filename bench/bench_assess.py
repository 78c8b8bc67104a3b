"""Load on the assessment server: simulated assessors over the JSON API, then a kill -9.

A synthetic collection (Q queries x D candidates, one run) is pooled and served by a real
`cmrkit assess serve` process on a loopback port (3 assessors per pair). Each simulated assessor
logs in, then asks GET /api/next and answers POST /api/judgments in a loop with no pause (the
worst case: a person takes seconds per pair) until the time is up or the queue is dry. All
assessors run as coroutines of one asyncio process (httpx). The reference measured in the same
run is GET /healthz (the same stack and one database round trip), asked in a loop alongside.

- load: N assessors for S seconds; p50/p95 of next and judgments; then the export
  (`cmrkit assess export`) must hold every acknowledged judgment exactly once.
- crash: the same load, the server killed with SIGKILL halfway, restarted on the same database,
  the assessors carrying on with their sessions; the export must again hold every acknowledged
  judgment exactly once, and at most one unacknowledged judgment per assessor (the requests in
  flight at the kill).

Loopback only; every loop is bounded by the deadline.

    python bench/bench_assess.py                                   # SQLite, 50 x 60 s, crash
    python bench/bench_assess.py --postgres postgresql://cmrkit@127.0.0.1:55432/cmrkit_test
    python bench/bench_assess.py --assessors 3 --no-crash         # 3 assessors at full pace
    python bench/bench_assess.py --smoke                          # seconds: CI's check
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import gzip
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_collection(folder: Path, queries: int, docs: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)] + "the a of to in and said was for on".split() * 30
    coll = folder / "collections" / "bench"
    coll.mkdir(parents=True)
    with gzip.open(coll / "corpus.jsonl.gz", "wt", encoding="utf-8") as f:
        for q in range(queries):
            f.write(
                json.dumps(
                    {
                        "id": f"U:q{q}",
                        "contents": f"Query unit of q{q}.",
                        "doc_id": f"doc-q{q}",
                        "title": None,
                        "kind": "annotated",
                        "mentions": [],
                    }
                )
                + "\n"
            )
        for d in range(queries * docs):
            text = " ".join(rng.choices(vocab, k=60)).capitalize() + "."
            f.write(
                json.dumps(
                    {
                        "id": f"d{d}",
                        "contents": text,
                        "doc_id": None,
                        "title": None,
                        "kind": "distractor",
                    }
                )
                + "\n"
            )
    with open(coll / "topics.jsonl", "w", encoding="utf-8") as f:
        for q in range(queries):
            context = f"Here the mention q{q} sits in its sentence."
            s = context.index(f"q{q}")
            f.write(
                json.dumps(
                    {
                        "qid": f"q{q}",
                        "split": "test",
                        "cluster": f"c{q}",
                        "mention": f"q{q}",
                        "span": [s, s + len(f"q{q}")],
                        "context": context,
                        "unit": f"U:q{q}",
                        "doc_id": f"doc-q{q}",
                        "title": None,
                    }
                )
                + "\n"
            )
    run = folder / "bench.trec"
    with open(run, "w", encoding="utf-8") as f:
        for q in range(queries):
            for k in range(docs):
                f.write(f"q{q} Q0 d{q * docs + k} {k + 1} {docs - k} bench\n")
    pool = folder / "bench.pool.jsonl"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cmrkit",
            "pool",
            "create",
            str(run),
            "--collection",
            str(coll),
            "--depth",
            str(docs),
            "-o",
            str(pool),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return pool


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, pool: Path, db: str, log: Path):
        self.pool, self.db, self.log = pool, db, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
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
            "--assessors",
            "3",
            "--lease",
            "600",
        ]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
        end = time.monotonic() + 300
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit("the server did not start")

    def cpu(self) -> float:
        """CPU seconds the server process has used (user + system; NaN without /proc)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, AttributeError):
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def add_users(db: str, n: int) -> dict[str, str]:
    from cmrkit.assess.server import auth
    from cmrkit.assess.server import db as dbm

    engine = dbm.make_engine(db)
    dbm.migrate(engine)
    users = {f"a{i:02d}": f"bench-password-{i:02d}" for i in range(n)}
    with dbm.write(engine) as conn:
        for name, pw in users.items():
            auth.add_user(conn, name, "assessor", pw)
    engine.dispose()
    return users


class Assessor:
    def __init__(self, base: str, name: str, password: str, think: float = 0.0):
        import httpx

        self.name, self.password, self.think = name, password, think
        self.rng = random.Random(name)
        self.http = httpx.AsyncClient(base_url=base, timeout=30)
        self.acked: list[tuple[str, str, int]] = []
        self.next_ms: list[float] = []
        self.judge_ms: list[float] = []

    async def login(self) -> None:
        await self.http.get("/healthz")
        r = await self.http.post(
            "/api/login",
            json={"name": self.name, "password": self.password},
            headers={"X-CSRFToken": self.http.cookies.get("csrftoken")},
        )
        r.raise_for_status()

    async def work(self, deadline: float) -> str:
        import httpx

        token = self.http.cookies.get("csrftoken")
        try:
            while time.monotonic() < deadline:
                t = time.perf_counter()
                r = await self.http.get("/api/next")
                self.next_ms.append((time.perf_counter() - t) * 1000)
                if r.status_code == 204:
                    return "dry"
                r.raise_for_status()
                pid = r.json()["pair_id"]
                label = 1 + (sum(map(ord, pid + self.name)) % 5)
                t = time.perf_counter()
                r = await self.http.post(
                    "/api/judgments",
                    json={"pair_id": pid, "label": label},
                    headers={"X-CSRFToken": token},
                )
                self.judge_ms.append((time.perf_counter() - t) * 1000)
                if r.status_code != 201:
                    raise SystemExit(f"{self.name}: judgment refused {r.status_code} {r.text}")
                self.acked.append((pid, self.name, label))
                if self.think:
                    await asyncio.sleep(self.rng.uniform(0, 2 * self.think))
        except httpx.TimeoutException:
            return "timeout"  # no answer in 30 s
        except httpx.TransportError:
            return "gone"  # the server was killed
        return "time"


async def reference(base: str, deadline: float) -> list[float]:
    import httpx

    out = []
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        while time.monotonic() < deadline:
            t = time.perf_counter()
            try:
                await http.get("/healthz")
            except httpx.TransportError:
                return out
            out.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.05)
    return out


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def load(server: Server, people: list[Assessor], seconds: float, kill_at: float | None):
    deadline = time.monotonic() + seconds
    ref_ms: list[float] = []
    if kill_at is None:
        ends = await asyncio.gather(
            reference(server.url, deadline), *(a.work(deadline) for a in people)
        )
        ref_ms += ends[0]
        return ref_ms, Counter(ends[1:])
    first = time.monotonic() + kill_at
    tasks = [asyncio.ensure_future(a.work(deadline)) for a in people]
    ref = asyncio.ensure_future(reference(server.url, first))
    await asyncio.sleep(kill_at)
    server.kill()
    ref_ms += await ref
    ends = await asyncio.gather(*tasks)
    server.start()  # same database; the assessors keep their sessions
    ends2 = await asyncio.gather(
        reference(server.url, deadline), *(a.work(deadline) for a in people)
    )
    ref_ms += ends2[0]
    return ref_ms, Counter(ends) + Counter(ends2[1:])


def check_export(db: str, folder: Path, acked: list[tuple[str, str, int]], slack: int) -> str:
    out = folder / f"export-{uuid.uuid4().hex[:6]}.csv"
    subprocess.run(
        [sys.executable, "-m", "cmrkit", "assess", "export", "--db", db, "-o", str(out)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    with open(out, newline="", encoding="utf-8") as f:
        rows = [(r["pair_id"], r["worker_id"], int(r["label"])) for r in csv.DictReader(f)]
    got = Counter(rows)
    lost = sum(1 for a in acked if got[a] == 0)
    doubled = sum(1 for n in Counter((p, w) for p, w, _ in rows).values() if n > 1)
    extra = len(rows) - len(set(acked))
    ok = lost == 0 and doubled == 0 and 0 <= extra <= slack and len(set(acked)) == len(acked)
    return (
        f"{'yes' if ok else 'NO'} ({len(rows)} rows, {lost} lost, {doubled} doubled, "
        f"{extra} unacked)"
    )


def fresh_postgres(url: str) -> str:
    import psycopg

    name = "bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rpartition("/")[0] + "/" + name


def run_case(
    label: str,
    db: str,
    pool: Path,
    folder: Path,
    n: int,
    seconds: float,
    crash: bool,
    think: float,
) -> dict:
    users = add_users(db, n)
    server = Server(pool, db, folder / f"server-{label.replace(' ', '-')}.log")
    server.start()

    async def main():
        people = [Assessor(server.url, name, pw, think) for name, pw in users.items()]
        gate = asyncio.Semaphore(4)  # logins are not what is measured

        async def login(a):
            async with gate:
                await a.login()

        await asyncio.gather(*(login(a) for a in people))
        t, cpu = time.monotonic(), server.cpu()
        ref_ms, ends = await load(server, people, seconds, seconds / 2 if crash else None)
        took = time.monotonic() - t
        # the server's CPU per judgment (its GET /api/next, its POST, the reference's share):
        # what the machine's load does not change (a restarted server is not counted)
        cpu = float("nan") if crash else server.cpu() - cpu
        for a in people:
            await a.http.aclose()
        return people, ref_ms, ends, took, cpu

    people, ref_ms, ends, took, cpu = asyncio.run(main())
    server.stop()
    acked = [x for a in people for x in a.acked]
    nxt = [x for a in people for x in a.next_ms]
    jud = [x for a in people for x in a.judge_ms]
    verdict = check_export(db, folder, acked, slack=n if crash else 0)
    return {
        "case": label,
        "think": think,
        "assessors": n,
        "seconds": took,
        "judgments": len(acked),
        "per_s": len(acked) / took,
        "next_p50": pct(nxt, 50),
        "next_p95": pct(nxt, 95),
        "judge_p50": pct(jud, 50),
        "judge_p95": pct(jud, 95),
        "ref_p95": pct(ref_ms, 95),
        "cpu_ms": cpu * 1000 / max(1, len(acked)),
        "ends": dict(ends),
        "exactly_once": verdict,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--assessors", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--docs", type=int, default=60, help="candidates per query")
    ap.add_argument(
        "--postgres",
        default=os.environ.get("CMRKIT_TEST_POSTGRES_URL"),
        help="a PostgreSQL server where a fresh database is made for each case",
    )
    ap.add_argument("--no-crash", action="store_true", help="skip the kill -9 cases")
    ap.add_argument(
        "--think",
        type=float,
        action="append",
        help="mean seconds an assessor takes per pair (uniform 0..2x; repeatable: one load "
        "case each) [default: 0, no pause]",
    )
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="a check in seconds: 3 assessors for 3 s on a 5 x 10 pool, SQLite, no kill -9",
    )
    args = ap.parse_args()
    if args.smoke:
        args.assessors, args.seconds, args.queries, args.docs = 3, 3.0, 5, 10
        args.no_crash, args.postgres = True, None
    from rich.console import Console
    from rich.table import Table

    folder = Path(tempfile.mkdtemp(prefix="cmrkit-bench-assess-"))
    pool = make_collection(folder, args.queries, args.docs)
    thinks = args.think or [0.0]
    cases = []
    for backend in ["sqlite"] + (["postgresql"] if args.postgres else []):
        cases += [(f"{backend} load", False, t) for t in thinks]
        if not args.no_crash:
            cases.append((f"{backend} kill -9", True, thinks[0]))
    rows = []
    for i, (label, crash, think) in enumerate(cases):
        if label.startswith("sqlite"):
            db = f"sqlite:///{folder / f'bench-{i}.sqlite'}"
        else:
            db = fresh_postgres(args.postgres)
        rows.append(run_case(label, db, pool, folder, args.assessors, args.seconds, crash, think))
    t = Table(
        title=f"cmrkit assess: {args.assessors} assessors, {args.seconds:g} s, "
        f"{args.queries * args.docs} pairs x 3 assessors; think: mean seconds per pair"
    )
    for col in (
        "case",
        "think",
        "judgments",
        "per s",
        "next p50",
        "next p95",
        "judg. p50",
        "judg. p95",
        "/healthz p95",
        "p95 / ref",
        "server CPU / judgment",
        "assessors ended by",
        "exactly once",
    ):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["case"],
            f"{r['think']:g} s",
            str(r["judgments"]),
            f"{r['per_s']:.0f}",
            f"{r['next_p50']:.1f} ms",
            f"{r['next_p95']:.1f} ms",
            f"{r['judge_p50']:.1f} ms",
            f"{r['judge_p95']:.1f} ms",
            f"{r['ref_p95']:.1f} ms",
            f"{max(r['next_p95'], r['judge_p95']) / r['ref_p95']:.1f}x",
            "-" if r["cpu_ms"] != r["cpu_ms"] else f"{r['cpu_ms']:.1f} ms",
            ", ".join(f"{k} {v}" for k, v in sorted(r["ends"].items())),
            r["exactly_once"],
        )
    Console(width=200).print(t)
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()}, files: {folder}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if not all(r["exactly_once"].startswith("yes") for r in rows):
        raise SystemExit("an acknowledged judgment was lost or doubled")


if __name__ == "__main__":
    main()
