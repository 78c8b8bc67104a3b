"""`judgments auto --judge llm:URL` against endpoints that misbehave, each a real HTTP server on
loopback (http.server in a thread of the test) writing the replies a test chooses: a server
that drips bytes (the whole request is bounded by --timeout), replies too long to read, an
endpoint that refuses logprobs under concurrency, replies that are no chat completion; the
label cache damaged, locked by another process, or another program's SQLite file; Ctrl-C."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fault_tools import ROOT, start
from test_interrupts import wait_for_handlers
from test_reader import TEST, write_candidates, write_tiny

from cmrkit.judgments.auto.labels import read_labels, sidecar_path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """test_reader's tiny collection, a depth-2 pool of its test queries (4 pairs)."""
    from cmrkit.pooling import create_pool, write_pool

    root = tmp_path_factory.mktemp("endpoint")
    coll = write_tiny(root)
    cand = write_candidates(root, coll, "test", TEST)
    pool = root / "test.pool.jsonl"
    write_pool(create_pool([cand], coll, depth=2), pool)
    return root, coll, cand, pool


def chat(content: str = "4", **more) -> dict:
    """An OpenAI chat completion whose message says ``content``."""
    choice = {"index": 0, "message": {"role": "assistant", "content": content}}
    choice.update(more.pop("choice", {}))
    return {"id": "x", "object": "chat.completion", "choices": [choice], **more}


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes | dict) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class Endpoint:
    """A chat endpoint on a loopback port; ``reply(handler, request)`` answers each POST."""

    def __init__(self, reply):
        self.reply, self.requests = reply, []
        self.stop = threading.Event()  # handlers that hold a request wait on it
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(n))
                outer.requests.append(request)
                with contextlib.suppress(OSError):  # the client gave up: fine
                    outer.reply(self, request)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    made = []

    def serve(reply) -> Endpoint:
        made.append(Endpoint(reply))
        return made[-1]

    yield serve
    for e in made:
        e.close()


def _auto(cli, pool, url, out, cache, *more):
    return cli("judgments", "auto", pool, "--judge", f"llm:{url}", "--model", "m", "-o", out,
               "--cache", cache, "--quiet", *more)  # fmt: skip


def _line(res) -> str:
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output[:2000]
    return lines[0]


def _answer_four(handler, request):
    send(handler, 200, chat("4", usage={"prompt_tokens": 10, "completion_tokens": 1}))


# --- item 5: --timeout bounds the whole request ----------------------------------------------


def _drip(handler, data: bytes, every: float) -> None:
    for i in range(len(data)):
        if handler.server_stop.is_set():  # type: ignore[attr-defined]
            return
        handler.wfile.write(data[i : i + 1])
        handler.wfile.flush()
        time.sleep(every)


@pytest.mark.parametrize("what", ["headers", "body"])
def test_timeout_bounds_the_whole_request_against_a_server_that_drips(
    what, tiny, cli, tmp_path, endpoint
):
    """A byte every 0.2 s (the whole reply in about 25 s): each read returns within any
    socket timeout, yet --timeout 1 ends the request after about a second, headers or body."""
    body = json.dumps(chat("4")).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()

    def reply(handler, request):
        handler.server_stop = server.stop
        if what == "headers":
            _drip(handler, head + body, 0.2)
        else:
            handler.wfile.write(head)
            handler.wfile.flush()
            _drip(handler, body, 0.2)

    server = endpoint(reply)
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    t0 = time.monotonic()
    res = _auto(cli, pool, server.url, out, cache, "--timeout", "1", "--retries", "0")
    took = time.monotonic() - t0
    assert res.exit_code == 2, res.output
    line = _line(res)
    assert "did not answer within --timeout 1 s" in line and "after 1 try" in line, line
    assert took < 8, f"{took:.1f} s for a request bounded by --timeout 1"
    assert not out.exists()


# --- item 6: a reply's size is bounded ---------------------------------------------------------


def test_a_reply_longer_than_the_bound_is_cut_and_said_and_an_unparsed_one_is_shown_short(
    tiny, cli, tmp_path, endpoint
):
    root, coll, cand, pool = tiny
    huge = endpoint(lambda h, r: send(h, 200, chat("x" * 5_000_000)))
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    res = _auto(cli, pool, huge.url, out, cache, "--retries", "0")
    assert res.exit_code == 2, res.output[:300]
    line = _line(res)
    assert len(line) < 600, line[:600]
    assert "sent a reply longer than 256 KiB (cut there" in line, line
    with sqlite3.connect(cache) as db:  # nothing of it cached
        assert db.execute("SELECT COUNT(*) FROM labels").fetchone()[0] == 0

    # under the bound, an unparsed reply is kept whole in the cache but quoted short
    long = endpoint(lambda h, r: send(h, 200, chat("no score " * 20_000)))
    res = _auto(cli, pool, long.url, out, tmp_path / "d.sqlite", "--on-unparsed", "fail")
    assert res.exit_code == 2, res.output[:300]
    line = _line(res)
    assert len(line) < 600 and "(180,000 characters)" in line, line[:600]
    with sqlite3.connect(tmp_path / "d.sqlite") as db:
        assert {len(a) for (a,) in db.execute("SELECT answer FROM labels")} == {180_000}


# --- item 7: the logprobs fallback under concurrency -------------------------------------------


def test_an_endpoint_refusing_logprobs_falls_back_at_the_default_concurrency(
    tiny, cli, tmp_path, endpoint
):
    """Four requests at once (the default --concurrency 4) all ask for logprobs; each 400 comes
    after the first has switched them off, and each is asked again without."""

    def reply(handler, request):
        if request.get("logprobs"):
            time.sleep(0.3)  # every request is in flight before the first 400 arrives
            send(handler, 400, {"error": {"message": "logprobs are not supported"}})
        else:
            send(handler, 200, chat("5"))

    server = endpoint(reply)
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    res = _auto(cli, pool, server.url, out, cache)
    assert res.exit_code == 0, res.output
    labels = read_labels(out)
    assert len(labels) == 4 and {(x.label, x.probability) for x in labels} == {(5, None)}
    asked = [bool(r.get("logprobs")) for r in server.requests]
    assert asked.count(True) == 4 and asked.count(False) == 4, asked


# --- item 11: replies that are no chat completion ----------------------------------------------

NESTED = b"[" * 100_000 + b"]" * 100_000
LOGPROBS_1000 = {
    "content": [{"token": "4", "logprob": 1000, "top_logprobs": [{"token": "4", "logprob": 1000}]}]
}
MALFORMED = [
    (b'{"choices":"abc"}', 'choices "abc", not a list of choices'),
    (b'{"choices":[1]}', "choices[0] is 1, not an object"),
    (b'{"choices":[{"message":"5"}]}', 'choices[0].message is "5", not an object'),
    (
        json.dumps(chat([{"type": "text", "text": "4"}])).encode(),
        "choices[0].message.content is a list (content parts), not a string",
    ),
    (
        json.dumps(chat("4", usage={"prompt_tokens": "many"})).encode(),
        'usage.prompt_tokens is "many"',
    ),
    (
        json.dumps(chat("4")).encode()[:-1] + b', "usage": {"completion_tokens": 1e999}}',
        "usage.completion_tokens is Infinity, not a count of tokens",
    ),
    (
        json.dumps(chat("4", choice={"logprobs": LOGPROBS_1000})).encode(),
        "choices[0].logprobs.content[0].logprob is 1000, not a log-probability",
    ),
    (NESTED, "JSON nested too deeply to be a chat completion"),
    (
        b"<html>Bad gateway</html>",
        "a reply that is not JSON (it starts '<html>Bad gateway</html>')",
    ),
]


@pytest.mark.parametrize("body,said", MALFORMED, ids=[s[:24] for _, s in MALFORMED])
def test_a_reply_that_is_no_chat_completion_is_one_line_saying_what_was_sent(
    body, said, tiny, cli, tmp_path, endpoint
):
    server = endpoint(lambda h, r: send(h, 200, body))
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    res = _auto(cli, pool, server.url, out, cache, "--retries", "0")
    assert res.exit_code == 2, res.output[:500]
    line = _line(res)
    assert line.startswith(f"error: {server.url}/chat/completions: the endpoint sent ")
    assert "not an OpenAI chat completion" in line and said in line, line
    assert len(line) < 600 and not out.exists()


# --- item 12: --timeout inf ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "1e309", "nan", "0", "86401"])
def test_a_timeout_without_a_finite_deadline_is_refused_where_it_enters(
    value, tiny, cli, tmp_path, endpoint
):
    server = endpoint(_answer_four)
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    res = _auto(cli, pool, server.url, out, cache, "--timeout", value)
    assert res.exit_code == 2, res.output
    assert _line(res).startswith("error: --timeout must be a number of seconds > 0 and at most")
    assert server.requests == [] and not cache.exists() and not out.exists()


# --- item 4: cached answers checked as strictly as fresh ones ----------------------------------


@pytest.mark.parametrize(
    "column,value,said",
    [
        ("label", 9, "label 9 is not one of 1..5"),
        ("probability", 5.0, "probability 5.0 is not a number in 0..1"),
        ("label", "abc", "label 'abc' is not one of 1..5"),
        ("probability", "high", "probability 'high' is not a number in 0..1"),
        ("prompt_tokens", -3, "prompt_tokens -3 is not a count"),
        ("score", 0.5, "an LLM's answer holds no score"),
    ],
)
def test_a_damaged_cached_answer_is_refused_naming_the_file_and_the_pair(
    column, value, said, tiny, cli, tmp_path, endpoint
):
    server = endpoint(_answer_four)
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    assert _auto(cli, pool, server.url, out, cache).exit_code == 0
    first = out.read_bytes()
    with contextlib.closing(sqlite3.connect(cache)) as db:
        qid, docno = db.execute("SELECT qid, docno FROM labels ORDER BY qid, docno").fetchone()
        db.execute(f"UPDATE labels SET {column} = ? WHERE qid = ? AND docno = ?",
                   (value, qid, docno))  # fmt: skip
        db.commit()
    res = _auto(cli, pool, server.url, out, cache, "--force")
    assert res.exit_code == 2, res.output
    line = _line(res)
    assert line.startswith(f"error: {cache}: the cached answer for query {qid} unit {docno} ")
    assert said in line and f"DELETE FROM labels WHERE qid = '{qid}'" in line, line
    assert "pass --cache with another file" in line
    assert out.read_bytes() == first  # nothing written


# --- items 8 and 9: a cache locked by another process, a file that is no cache ------------------

HOLD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(120)
"""


def test_a_cache_another_process_keeps_locked_is_exit_1_naming_it_within_seconds(
    tiny, cli, tmp_path, endpoint
):
    server = endpoint(_answer_four)
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    first = cli("judgments", "auto", "--run", cand, "--depth", "1", "--judge", f"llm:{server.url}",
                "--model", "m", "-o", out, "--cache", cache, "--quiet")  # fmt: skip
    assert first.exit_code == 0, first.output
    out.unlink()
    sidecar_path(out).unlink()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(cache)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        res = _auto(cli, pool, server.url, out, cache)  # 2 pairs to ask, 2 cached
        took = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    assert res.exit_code == 1, res.output
    line = _line(res)
    assert line.startswith(f"error: {cache}: the judge's label cache is locked by process "
                           f"{holder.pid} ({sys.executable} -c")  # fmt: skip
    assert "pass --cache with another file" in line, line
    assert took < 20, f"{took:.1f} s"
    assert not out.exists()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "schema,said",
    [
        ("CREATE TABLE labels (a TEXT, b INTEGER)", "its labels table has the columns a, b"),
        ("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('x')", "table(s) users"),
        (None, "not an SQLite file"),
    ],
)
def test_a_file_that_is_no_label_cache_is_refused_and_left_unchanged(
    schema, said, tiny, cli, tmp_path, endpoint
):
    server = endpoint(_answer_four)
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "other.sqlite"
    if schema is None:
        cache.write_text("query_id,doc_id\nq1,d1\n", encoding="utf-8")
    else:
        with contextlib.closing(sqlite3.connect(cache)) as db:
            db.executescript(schema)
    before = _sha(cache)
    res = _auto(cli, pool, server.url, out, cache)
    assert res.exit_code == 2, res.output
    line = _line(res)
    assert line.startswith(f"error: {cache}: not a cmrkit label cache") and said in line, line
    assert "nothing in it was changed" in line
    assert _sha(cache) == before and server.requests == [] and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]  # no -wal, no -shm


# --- item 13: the Ctrl-C line says the labels kept ---------------------------------------------


def test_ctrl_c_while_an_endpoint_is_asked_says_the_labels_kept(tiny, tmp_path, endpoint):
    """Ctrl-C while the main thread waits for the endpoint (Python code takes the signal and
    the command unwinds, closing the cache): the line still counts the label made."""
    answered = []

    def reply(handler, request):
        if answered:
            server.stop.wait(60)  # the second request is held until the end of the test
            return
        answered.append(1)
        _answer_four(handler, request)

    server = endpoint(reply)
    root, coll, cand, pool = tiny
    out, cache = tmp_path / "l.csv", tmp_path / "c.sqlite"
    proc = start("judgments", "auto", pool, "--judge", f"llm:{server.url}", "--model", "m",
                 "-o", out, "--cache", cache, "--concurrency", "1", "--quiet", cwd=tmp_path,
                 start_new_session=True)  # fmt: skip
    wait_for_handlers(proc)

    def made() -> int:
        if not cache.exists():
            return 0
        with contextlib.closing(sqlite3.connect(cache, timeout=30)) as db:
            with contextlib.suppress(sqlite3.OperationalError):  # no table yet
                return db.execute("SELECT COUNT(*) FROM labels").fetchone()[0]
        return 0

    deadline = time.monotonic() + 120
    while made() == 0 or len(server.requests) < 2:  # a label made, the next request held
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == (
        f"interrupted by Ctrl-C (SIGINT): nothing written: did not write {out}, "
        f"{sidecar_path(out)}; kept 1 label(s) made in the cache {cache} (a rerun resumes there)"
    )
    assert not out.exists()


# --- progress where stderr is no terminal ---------------------------------------------------


def test_progress_reaches_a_log_file_while_the_judge_works(tiny, tmp_path, endpoint):
    """stderr to a file (a script's log, nohup): a plain progress line is there while the
    command still runs, not only once it ends; a last line when done."""

    def reply(handler, request):
        time.sleep(0.45)
        _answer_four(handler, request)

    server = endpoint(reply)
    root, coll, cand, pool = tiny
    out, log = tmp_path / "l.csv", tmp_path / "judge.log"
    args = ["judgments", "auto", "--run", cand, "--depth", "9", "--judge", f"llm:{server.url}",
            "--model", "m", "-o", out, "--cache", "c.sqlite", "--concurrency", "1"]  # fmt: skip
    with open(log, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cmrkit", *map(str, args)], cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while "judge pairs: " not in log.read_text(encoding="utf-8"):
                assert proc.poll() is None, log.read_text(encoding="utf-8")  # ended before
                assert time.monotonic() < deadline
                time.sleep(0.05)
            line = log.read_text(encoding="utf-8").splitlines()[0]
            running = proc.poll() is None
        finally:
            proc.wait(120)
    assert running, "the first progress line came only at the end"
    assert re.fullmatch(r"judge pairs: \d+/18 \(\d+%\), 0:00:0\d elapsed, 0:00:0\d left", line)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert proc.returncode == 0, lines
    assert re.fullmatch(r"judge pairs: 18/18 done in 0:00:\d\d", lines[-2]), lines
    assert lines[-1].startswith("wrote 18 labels of 18 pairs")
