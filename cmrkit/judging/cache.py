"""Every label a judge made, kept by (judge identity, prompt sha256, pair) in one SQLite file.

Where: ``--cache FILE`` when given, else ``judgments.sqlite`` in the cmrkit cache folder
(``$CMRKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/cmrkit``, else ``~/.cache/cmrkit``; an empty
``$CMRKIT_CACHE_DIR`` turns it off: labels are then kept for the run only). A pair is its query
id and doc id together with the sha256 of the texts the judge reads (the query's context and
marked span, the unit's text), so a rebuilt collection whose texts changed is judged again.

What is kept is what the judge said before any calibration: the reader's selection score, an
LLM's label, probability, answer and token counts (an unparsed answer too, with no label).
Each answer is committed as it comes (the reader's in chunks), so a run stopped by Ctrl-C or an
unreachable endpoint keeps every label it made, and the next run asks only for the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmrkit import interrupts
from cmrkit.errors import CmrkitError
from cmrkit.nercache import cache_root

CACHE_NAME = "judgments.sqlite"
FORMAT = "cmrkit-judge-cache-1"


@dataclass(frozen=True)
class Entry:
    """A judge's answer for one pair, as the cache keeps it."""

    score: float | None = None  # the reader's raw selection score
    label: int | None = None  # an LLM's Likert label (None: unparsed, or a reader)
    probability: float | None = None
    answer: str | None = None  # an LLM's reply as it came
    prompt_tokens: int = 0
    completion_tokens: int = 0


def pair_sha256(query: str, span: tuple[int, int], unit: str) -> str:
    """The identity of a pair's texts: the query context, its mention span and the unit."""
    text = json.dumps([query, list(span), unit], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_path() -> Path | None:
    """``judgments.sqlite`` in the cmrkit cache folder (None: the cache is turned off)."""
    root = cache_root()
    return None if root is None else root / CACHE_NAME


Key = tuple[str, str, str]  # qid, docno, pair sha256


class LabelCache:
    """The labels of one judge (identity) and prompt (sha256) in an SQLite file (``path``
    None: in memory, for this run only)."""

    def __init__(self, path: Path | None, judge: str, prompt: str):
        self.path = path
        self.judge, self.prompt = judge, prompt
        self.written = 0  # answers committed by this run
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(":memory:" if path is None else path, timeout=60)
            if path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS labels (judge TEXT, prompt TEXT, qid TEXT, "
                "docno TEXT, pair TEXT, score REAL, label INTEGER, probability REAL, "
                "answer TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, "
                "PRIMARY KEY (judge, prompt, qid, docno, pair)) WITHOUT ROWID"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as e:
            raise CmrkitError(
                f"cannot open the judge's label cache ({e}); pass --cache with a file you can "
                "write, or remove this one",
                path=path,
            ) from None
        _open.append(self)

    def get(self, keys: Sequence[Key]) -> dict[Key, Entry]:
        """The cached answers of those pairs that have one."""
        found: dict[Key, Entry] = {}
        wanted = set(keys)
        rows = self._db.execute(
            "SELECT qid, docno, pair, score, label, probability, answer, prompt_tokens, "
            "completion_tokens FROM labels WHERE judge = ? AND prompt = ?",
            (self.judge, self.prompt),
        )
        for qid, docno, pair, *rest in rows:
            if (qid, docno, pair) in wanted:
                found[(qid, docno, pair)] = Entry(*rest)
        return found

    def put(self, entries: Iterable[tuple[Key, Entry]]) -> None:
        """Keep answers (committed at once, as one transaction)."""
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
            self._db.executemany(
                "INSERT OR REPLACE INTO labels VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            self._db.commit()
        self.written += len(rows)

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        if self in _open:
            _open.remove(self)

    def __enter__(self) -> LabelCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_open: list[LabelCache] = []


class _Kept:
    """What the interrupt line says about the labels kept (see :mod:`cmrkit.interrupts`)."""

    def reset(self) -> None:
        pass

    def summary(self) -> str:
        kept = [c for c in _open if c.written and c.path is not None]
        if not kept:
            return ""
        n = sum(c.written for c in kept)
        return f"kept {n} label(s) made in the cache {kept[0].path} (a rerun resumes there)"

    def emergency(self) -> None:
        pass


interrupts.watch(_Kept())
