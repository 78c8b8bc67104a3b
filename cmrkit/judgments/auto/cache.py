"""Every label a judge made, kept by (judge identity, prompt sha256, pair) in one SQLite file.

Where: ``--cache FILE`` when given, else ``judgments.sqlite`` in the cmrkit cache folder
(``$CMRKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/cmrkit``, else ``~/.cache/cmrkit``; an empty
``$CMRKIT_CACHE_DIR`` turns it off: labels are then kept for the run only). A pair is its query
id and doc id together with the sha256 of the texts the judge reads (the query's context and
marked span, the unit's text; for the reader judge also the group of pairs read with it), so a
rebuilt collection whose texts changed is judged again.

What is kept is what the judge said before any calibration: the reader's selection score, an
LLM's label, probability, answer and token counts (an unparsed answer too, with no label).
Each answer is committed as it comes (the reader's by group), so a run stopped by Ctrl-C or an
unreachable endpoint keeps every label it made, and the next run asks only for the rest.

Nothing read back is trusted: a file that is not a label cache (not SQLite, other tables, a
``labels`` table of another shape) is refused before anything in it is changed; a cached answer
is checked as strictly as a fresh one (:func:`entry_problem`); a file another process keeps
locked is an environment fault (exit 1) naming the process, after :data:`BUSY_SECONDS`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmrkit import interrupts
from cmrkit.errors import CmrkitError, EnvironmentFault
from cmrkit.nercache import cache_root

CACHE_NAME = "judgments.sqlite"
FORMAT = "cmrkit-judge-cache-1"
BUSY_SECONDS = 5.0  # how long a write waits for another process's transaction to end
# the labels table: (column, declared type, position in the primary key)
COLUMNS = (
    ("judge", "TEXT", 1),
    ("prompt", "TEXT", 2),
    ("qid", "TEXT", 3),
    ("docno", "TEXT", 4),
    ("pair", "TEXT", 5),
    ("score", "REAL", 0),
    ("label", "INTEGER", 0),
    ("probability", "REAL", 0),
    ("answer", "TEXT", 0),
    ("prompt_tokens", "INTEGER", 0),
    ("completion_tokens", "INTEGER", 0),
)
_CREATE = (
    "CREATE TABLE IF NOT EXISTS labels ("
    + ", ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
    + ", PRIMARY KEY (judge, prompt, qid, docno, pair)) WITHOUT ROWID"
)


@dataclass(frozen=True)
class Entry:
    """A judge's answer for one pair, as the cache keeps it."""

    score: float | None = None  # the reader's raw selection score
    label: int | None = None  # an LLM's Likert label (None: unparsed, or a reader)
    probability: float | None = None
    answer: str | None = None  # an LLM's reply as it came
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def entry_problem(entry: Entry, kind: str | None = None) -> str | None:
    """What is wrong with an answer (None: nothing): a label that is no Likert 1..5, a
    probability outside 0..1, a score that is no number, text where a number belongs, negative
    token counts; with ``kind``, what that judge never writes (a reader's row without a score,
    an LLM's with one)."""
    e = entry
    if e.score is not None and (not _is_number(e.score) or math.isnan(e.score)):
        return f"score {e.score!r} is not a number"
    if e.label is not None and (type(e.label) is not int or not 1 <= e.label <= 5):
        return f"label {e.label!r} is not one of 1..5"
    if e.probability is not None and (
        not _is_number(e.probability) or not 0.0 <= e.probability <= 1.0
    ):
        return f"probability {e.probability!r} is not a number in 0..1"
    if e.answer is not None and not isinstance(e.answer, str):
        return f"answer {e.answer!r} is not text"
    for name in ("prompt_tokens", "completion_tokens"):
        value = getattr(e, name)
        if type(value) is not int or value < 0:
            return f"{name} {value!r} is not a count"
    if kind == "reader" and (e.score is None or e.label is not None):
        return "a reader's answer holds its score and no label"
    if kind is not None and kind != "reader" and e.score is not None:
        return f"an LLM's answer holds no score (found {e.score!r})"
    return None


def pair_sha256(query: str, span: tuple[int, int], unit: str) -> str:
    """The identity of a pair's texts: the query context, its mention span and the unit."""
    text = json.dumps([query, list(span), unit], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_path() -> Path | None:
    """``judgments.sqlite`` in the cmrkit cache folder (None: the cache is turned off)."""
    root = cache_root()
    return None if root is None else root / CACHE_NAME


Key = tuple[str, str, str]  # qid, docno, pair sha256


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _locks_on(paths: Iterable[Path]) -> list[int]:
    """The processes (other than this one) holding a POSIX or flock lock on any of ``paths``
    (Linux's /proc/locks; empty where there is none)."""
    inodes = set()
    for p in paths:
        with contextlib.suppress(OSError):
            st = os.stat(p)
            inodes.add((f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}", st.st_ino))
    pids: list[int] = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return pids
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter: "1: -> POSIX ..."
            continue
        try:
            pid, where = int(fields[4]), fields[5]
            dev, ino = where.rsplit(":", 1)
            found = (dev, int(ino))
        except (IndexError, ValueError):
            continue
        if found in inodes and pid > 0 and pid != os.getpid() and pid not in pids:
            pids.append(pid)
    return pids


def holder(path: Path) -> str:
    """Who holds the SQLite file ``path`` (or its -wal/-shm files) locked: ``process N
    (command)``, else ``another process``."""
    pids = _locks_on([path, Path(f"{path}-wal"), Path(f"{path}-shm")])
    if not pids:
        return "another process"
    try:
        with open(f"/proc/{pids[0]}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
        command = " ".join(b" ".join(words).decode("utf-8", "replace").split())
    except OSError:
        command = ""
    if len(command) > 100:
        command = command[:97] + "..."
    return f"process {pids[0]} ({command})" if command else f"process {pids[0]}"


def _locked(error: sqlite3.Error) -> bool:
    text = str(error).lower()
    return isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _shape(path: Path) -> str | None:
    """Why an existing file at ``path`` is not a label cache (None: it is one, or it holds
    nothing yet). Read only: the file is not changed."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS)
    try:
        tables = [
            r[0]
            for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r[0].startswith("sqlite_")  # SQLite's own (statistics, sequences)
        ]
        if not tables:
            return None
        if tables != ["labels"]:
            others = ", ".join(sorted(t for t in tables if t != "labels")) or "labels"
            return f"it holds the table(s) {others}"
        found = tuple((r[1], r[2].upper(), r[5]) for r in db.execute("PRAGMA table_info(labels)"))
        if found != COLUMNS:
            cols = ", ".join(c[0] for c in found)
            return f"its labels table has the columns {cols}, not a label cache's"
        return None
    finally:
        db.close()


class LabelCache:
    """The labels of one judge (identity) and prompt (sha256) in an SQLite file (``path``
    None: in memory, for this run only). ``kind``, when given, is the judge's kind: its
    answers read back are checked for what that judge writes."""

    def __init__(self, path: Path | None, judge: str, prompt: str, kind: str | None = None):
        self.path = path
        self.judge, self.prompt, self.kind = judge, prompt, kind
        self.written = 0  # answers committed by this run
        self._db: sqlite3.Connection | None = None
        try:
            if path is not None:
                not_cache = _shape(path)
                if not_cache is not None:
                    raise CmrkitError(
                        f"not a cmrkit label cache ({not_cache}); nothing in it was changed: "
                        "pass --cache with a new file or one `cmrkit judgments auto` made",
                        path=path,
                    )
                path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(":memory:" if path is None else path, timeout=BUSY_SECONDS)
            if path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_CREATE)
            self._db.commit()
        except (OSError, sqlite3.Error) as e:
            self.close()
            raise self._failure(e, "cannot open the judge's label cache") from None
        except BaseException:
            self.close()
            raise
        _made.append(self)

    def _failure(self, e: BaseException, what: str) -> CmrkitError:
        if isinstance(e, sqlite3.Error) and _locked(e) and self.path is not None:
            kept = (
                f"; the {self.written} label(s) made so far are kept there" if self.written else ""
            )
            return EnvironmentFault(
                f"the judge's label cache is locked by {holder(self.path)}, which kept it for "
                f"more than {BUSY_SECONDS:g} s{kept}; wait for it to finish, stop it, or pass "
                "--cache with another file",
                path=self.path,
            )
        if isinstance(e, sqlite3.DatabaseError) and "not a database" in str(e):
            return CmrkitError(
                "not a cmrkit label cache (not an SQLite file); nothing in it was changed: pass "
                "--cache with a new file or one `cmrkit judgments auto` made",
                path=self.path,
            )
        return CmrkitError(
            f"{what} ({e}); pass --cache with a file you can write, or remove this one",
            path=self.path,
        )

    def get(self, keys: Sequence[Key]) -> dict[Key, Entry]:
        """The cached answers of those pairs that have one; a damaged one (see
        :func:`entry_problem`) is an error naming the file and the pair."""
        assert self._db is not None
        found: dict[Key, Entry] = {}
        wanted = set(keys)
        try:
            rows = self._db.execute(
                "SELECT qid, docno, pair, score, label, probability, answer, prompt_tokens, "
                "completion_tokens FROM labels WHERE judge = ? AND prompt = ?",
                (self.judge, self.prompt),
            )
            for qid, docno, pair, *rest in rows:
                if (qid, docno, pair) in wanted:
                    entry = Entry(*rest)
                    problem = entry_problem(entry, self.kind)
                    if problem is not None:
                        raise self._damaged(qid, docno, problem)
                    found[(qid, docno, pair)] = entry
        except sqlite3.Error as e:
            raise self._failure(e, "cannot read the judge's label cache") from None
        return found

    def _damaged(self, qid: object, docno: object, problem: str) -> CmrkitError:
        where = (
            f"DELETE FROM labels WHERE qid = {_sql_text(str(qid))} AND docno = "
            f"{_sql_text(str(docno))}"
        )
        return CmrkitError(
            f"the cached answer for query {qid} unit {docno} is damaged ({problem}); delete "
            f"that row ({where}) or pass --cache with another file, then rerun; nothing written",
            path=self.path,
        )

    def put(self, entries: Iterable[tuple[Key, Entry]]) -> None:
        """Keep answers (committed at once, as one transaction)."""
        assert self._db is not None
        rows = [
            (
                self.judge,
                self.prompt,
                *key,
                e.score,
                e.label,
                e.probability,
                e.answer,
                e.prompt_tokens,
                e.completion_tokens,
            )
            for key, e in entries
        ]
        with interrupts.critical():
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO labels VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
                self._db.commit()
            except sqlite3.Error as e:
                with contextlib.suppress(sqlite3.Error):
                    self._db.rollback()
                raise self._failure(e, "cannot write the judge's label cache") from None
        self.written += len(rows)

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        if self in _made and (not self.written or self.path is None):
            _made.remove(self)

    def __enter__(self) -> LabelCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# the caches of this command: those that kept labels stay listed once closed, so that the
# interrupt line, made after the command unwound, still says what they kept
_made: list[LabelCache] = []


class _Kept:
    """What the interrupt line says about the labels kept (see :mod:`cmrkit.interrupts`)."""

    def reset(self) -> None:
        _made.clear()

    def summary(self) -> str:
        kept = [c for c in _made if c.written and c.path is not None]
        if not kept:
            return ""
        n = sum(c.written for c in kept)
        return f"kept {n} label(s) made in the cache {kept[0].path} (a rerun resumes there)"

    def emergency(self) -> None:
        pass


interrupts.watch(_Kept())
