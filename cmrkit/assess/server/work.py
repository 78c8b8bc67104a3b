"""The work of the assessment server: a pool loaded into the database, pairs handed out, judgments
saved, adaptive rounds chosen, progress and the export.

- Each pool pair goes to ``assessors`` different people: ``pairs.taken`` counts the live
  assignments of a pair (judged, or handed out and not expired) and is only ever raised by a
  conditional update (``taken < N``), so two servers or threads racing for the last place cannot
  both get it; ``(pair, user)`` is unique, so nobody gets a pair twice.
- A pair handed out is leased for ``lease_seconds``; an assessor has at most one open pair (asking
  again returns it). An expired lease that was never judged goes back to the queue the next time
  anyone asks for work; a judgment that arrives before that is still taken.
- Gold pairs (known answers outside the pool) are interleaved at ``gold_rate``: the k-th pair
  handed to an assessor is gold when ``floor(k * rate)`` steps up. Once an assessor has judged
  ``gold_after`` gold pairs, accuracy below ``min_gold_accuracy`` pauses and flags them.
- A judgment is written once: a second submission of the same pair is refused (409) and changes
  nothing; an assessor changes one of their last ``CHANGEABLE`` judgments explicitly.
- mtf/maxmean pools advance by rounds as judgments arrive (:func:`advance`): when every pair of the
  current round has its N judgments, the majority labels go to the strategy
  (:func:`cmrkit.pooling.next_round`) and the pairs it chooses join the queue.

Nothing here knows about HTTP: a refusal is an :class:`ApiError` with its status code.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import random
import secrets
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from cmrkit.assess.server.auth import User, session_alive
from cmrkit.assess.server.db import (
    assignments,
    get_setting,
    pairs,
    put_setting,
    read,
    settings,
    users,
    write,
)
from cmrkit.errors import CmrkitError
from cmrkit.judgments.scale import LABELS, LABELS_TEXT, LIKERT, MAX_ASSESSORS

ADAPTIVE = ("mtf", "maxmean")
CHANGEABLE = 20  # an assessor may change their last this many judgments
SCALE = [list(item) for item in LIKERT]  # as the API sends it: [[1, "very unlikely"], ...]


class ApiError(Exception):
    """A refused request: the HTTP status and one line saying why and what to do."""

    def __init__(self, status: int, message: str, **extra: Any):
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra


@dataclass(frozen=True)
class Options:
    """How the server hands out work (kept in the database; ``serve`` may change them)."""

    assessors: int = 3
    gold_rate: float = 0.0
    min_gold_accuracy: float = 0.6
    gold_after: int = 5
    lease_seconds: float = 600.0

    def check(self) -> None:
        if not 1 <= self.assessors <= MAX_ASSESSORS:
            raise CmrkitError(f"--assessors must lie in 1..{MAX_ASSESSORS}, not {self.assessors}")
        if not 0.0 <= self.gold_rate < 1.0:
            raise CmrkitError(f"--gold-rate must lie in 0..1 (below 1), not {self.gold_rate}")
        if not 0.0 <= self.min_gold_accuracy <= 1.0:
            raise CmrkitError(f"--min-gold-accuracy must lie in 0..1, not {self.min_gold_accuracy}")
        if self.gold_after < 1:
            raise CmrkitError(f"--gold-after must be at least 1, not {self.gold_after}")
        if not 1.0 <= self.lease_seconds <= 7 * 86400:
            raise CmrkitError(f"--lease must lie in 1..604800 seconds, not {self.lease_seconds}")


def options(conn: Connection) -> Options:
    return Options(**get_setting(conn, "options", {}))


# --- loading a pool ------------------------------------------------------------------------


def pool_text(pool) -> str:
    """A pool as the JSONL text :func:`cmrkit.pooling.write_pool` writes."""
    from cmrkit.pooling import write_pool

    with tempfile.TemporaryDirectory(prefix="cmrkit-assess-") as tmp:
        path = Path(tmp) / "pool.jsonl"
        write_pool(pool, path)
        return path.read_text(encoding="utf-8")


def stored_pool(conn: Connection):
    """The pool the database serves, as it is now (adaptive pools gain rounds)."""
    from cmrkit.pooling import read_pool

    text = get_setting(conn, "pool")
    if text is None:
        raise CmrkitError("the database serves no pool yet; start `cmrkit assess serve POOL`")
    with tempfile.TemporaryDirectory(prefix="cmrkit-assess-") as tmp:
        path = Path(tmp) / "pool.jsonl"
        path.write_text(text, encoding="utf-8")
        return read_pool(path)


def _display(described: Mapping[tuple[str, str], dict[str, Any]], show_titles: bool):
    from cmrkit.assess.render import shown_parts

    out = {}
    for key, d in described.items():
        out[key] = json.dumps(
            {
                "query": shown_parts(d["query"], "q"),
                "unit": {
                    "title": _escape(d["title"]) if show_titles else "",
                    "first": _escape(d["first"]),
                    "next": _escape(d["next"]),
                    **shown_parts(d["candidate"], "c"),
                },
            },
            sort_keys=True,
            ensure_ascii=False,
        )
    return out


def _escape(text: str | None) -> str:
    import html

    return html.escape(text or "")


def _gold_pairs(pool, collection: Path, gold: Mapping[tuple[str, str], int]) -> list:
    """Usable pairs of known answer: outside the pool, of a known query, not its own unit."""
    from cmrkit.collection.layout import topics_by_qid
    from cmrkit.pooling import natural_key

    pooled = {(p.qid, p.docno) for p in pool.pairs}
    topics = topics_by_qid(collection)
    keep = [
        k for k in gold if k not in pooled and k[0] in topics and topics[k[0]].get("unit") != k[1]
    ]
    return sorted(keep, key=lambda k: (natural_key(k[0]), k[1]))


def _shuffled(keys: Sequence[tuple[str, str]], seed: int, salt: str) -> list[tuple[str, str]]:
    out = sorted(keys)
    random.Random(f"{seed}:{salt}").shuffle(out)
    return out


@dataclass
class PreparedPool:
    """A pool made ready for a database that serves none yet: its identity, the pair rows and
    the settings to store (:func:`prepare_pool`)."""

    identity: dict[str, Any]
    rows: list[dict[str, Any]]
    settings: dict[str, Any]


def pool_identity(
    pool_file: Path,
    *,
    strategy=None,
    gold_file: Path | None = None,
    seed: int = 0,
    context_chars: int = 600,
    judge=None,
) -> dict[str, Any]:
    """What a database records of the pool it serves and the choices made: a restart must
    give the same (the files by sha256)."""
    from cmrkit.fileio import sha256_file

    identity = {
        "pool_sha256": sha256_file(pool_file),
        "strategy": strategy.to_json() if strategy is not None else None,
        "gold_sha256": sha256_file(gold_file) if gold_file else None,
        "seed": seed,
        "context_chars": context_chars,
    }
    if judge is not None:  # only then: a database of a pool served without one keeps its identity
        identity["judge"] = judge.identity()
    return identity


def prepare_pool(
    pool_file: Path,
    collection: Path | None,
    opts: Options,
    *,
    strategy=None,
    gold_file: Path | None = None,
    seed: int = 0,
    context_chars: int = 600,
    judge=None,
) -> PreparedPool:
    """Everything a new database will hold of the pool, made without touching one, so that
    every refusal (the collection, the strategy, labels of another pool, no pair to judge, the
    gold pairs) comes before a database is created: see :func:`load_pool`."""
    from cmrkit.assess.key import pair_id
    from cmrkit.assess.tasks import describe_pairs, read_gold, titles_reveal
    from cmrkit.pooling import apply_strategy, check_collection, read_pool

    opts.check()
    identity = pool_identity(
        pool_file,
        strategy=strategy,
        gold_file=gold_file,
        seed=seed,
        context_chars=context_chars,
        judge=judge,
    )
    pool = read_pool(pool_file)
    where = collection or Path(pool.header["collection"]["path"])
    check_collection(pool, where, pool_file)
    if strategy is not None:
        apply_strategy(pool, strategy)
    name = (pool.header.get("strategy") or {}).get("name", "depth")
    judge_labels = _hybrid(pool, judge, name, identity["pool_sha256"], pool_file)
    chosen = [(p.qid, p.docno) for p in pool.pairs if p.sampled]
    if not chosen:
        raise CmrkitError("the pool has no pairs to judge (none is sampled)", path=pool_file)
    gold = read_gold(gold_file) if gold_file else {}
    golds = _gold_pairs(pool, where, gold) if gold else []
    if opts.gold_rate > 0 and not golds:
        raise CmrkitError(
            "--gold-rate needs --gold QRELS with pairs of known answer outside the pool"
        )
    described = describe_pairs(chosen + golds, where, blind=True, max_chars=context_chars)
    why = titles_reveal([d["title"] for d in described.values()])
    show_titles = why is None
    display = _display(described, show_titles)
    salt = f"{pool.header['collection']['corpus_sha256']}:{seed}"
    rounds = {(p.qid, p.docno): (p.round or 1) for p in pool.pairs if p.sampled}
    rows = []
    seq = 0
    order = _shuffled(chosen, seed, "pool")
    if name in ADAPTIVE:
        order.sort(key=lambda k: rounds[k])
    for k in order:
        seq += 1
        rows.append(_pair_row(pair_id(salt, *k), k, None, rounds[k], seq, display[k]))
    for k in _shuffled(golds, seed, "gold"):
        seq += 1
        rows.append(_pair_row(pair_id(salt, *k), k, gold[k], 0, seq, display[k]))
    ids = Counter(r["pair_id"] for r in rows)
    if any(n > 1 for n in ids.values()):
        raise CmrkitError("two pairs got the same pair id; pass another --seed")
    stored = {
        "pool": pool_text(pool),
        "pool_file": str(pool_file),
        "collection": str(Path(where).resolve()),
        "salt": salt,
        "show_titles": show_titles,
        "titles_note": why,
        "round": 1,
        "closed": False,
        "finished": name not in ADAPTIVE,
        "seq": seq,
    }
    if judge_labels is not None:
        stored["judge_labels"] = judge_labels
    return PreparedPool(identity, rows, stored)


def load_pool(
    engine: Engine,
    pool_file: Path,
    collection: Path | None,
    opts: Options,
    *,
    strategy=None,
    gold_file: Path | None = None,
    seed: int = 0,
    context_chars: int = 600,
    judge=None,
    prepared: PreparedPool | None = None,
) -> dict[str, Any]:
    """Load the pool into an empty database, or check that the database serves this pool; store
    the options. ``strategy`` (StrategyOptions) chooses the pairs first (mtf, maxmean: the first
    round; strata: the sample); ``judge`` (hybrid judging: ``judging.hybrid.HybridLabels``)
    then takes the pairs it is sure of, and people are served the rest. ``prepared``: the same
    pool and choices made ready by :func:`prepare_pool` before the database was created.
    Returns what the database serves."""
    opts.check()
    choices = {
        "strategy": strategy,
        "gold_file": gold_file,
        "seed": seed,
        "context_chars": context_chars,
        "judge": judge,
    }
    identity = prepared.identity if prepared else pool_identity(pool_file, **choices)
    with read(engine) as conn:
        known = get_setting(conn, "identity")
    if known is not None:
        if known != identity:
            differ = sorted(k for k in {*identity, *known} if identity.get(k) != known.get(k))
            raise CmrkitError(
                f"the database serves another pool or other choices ({', '.join(differ)} "
                "differ); start with the same POOL and options, or give another --db"
            )
        with write(engine) as conn:
            put_setting(conn, "options", asdict(opts))
        return summary(engine)
    prepared = prepared or prepare_pool(pool_file, collection, opts, **choices)
    with write(engine) as conn:
        if get_setting(conn, "identity") is not None:
            raise CmrkitError("another process loaded a pool into this database meanwhile")
        conn.execute(pairs.insert(), prepared.rows)
        put_setting(conn, "identity", prepared.identity)
        put_setting(conn, "options", asdict(opts))
        for key, value in prepared.settings.items():
            put_setting(conn, key, value)
    return summary(engine)


def _hybrid(pool, judge, strategy: str, pool_sha: str, pool_file: Path) -> dict[str, int] | None:
    """Hybrid judging: the judge takes the pairs it is sure of (recorded in the pool served);
    the judge's labels of the pairs left to people, by ``qid<TAB>docno``, for the live kappa."""
    if judge is None:
        return None
    if strategy in ADAPTIVE:
        raise CmrkitError(
            f"--auto with {strategy}'s adaptive rounds is not supported: serve a depth, rbp, rrf "
            "or strata pool with the judge, or the adaptive pool without it"
        )
    judge.check_pool(pool, pool_sha, pool_file)
    judge.apply(pool)
    return {
        f"{p.qid}\t{p.docno}": p.judge_label
        for p in pool.pairs
        if p.sampled and p.judge_label is not None
    }


def _pair_row(pid, key, gold, rnd, seq, display) -> dict[str, Any]:
    return {
        "pair_id": pid,
        "qid": key[0],
        "docno": key[1],
        "is_gold": gold is not None,
        "gold": gold,
        "active": True,
        "round": rnd,
        "seq": seq,
        "taken": 0,
        "judged": 0,
        "display": display,
    }


def summary(engine: Engine) -> dict[str, Any]:
    with read(engine) as conn:
        n = dict(
            conn.execute(
                sa.select(pairs.c.is_gold, sa.func.count()).group_by(pairs.c.is_gold)
            ).all()
        )
        pool = get_setting(conn, "pool") or ""
        header = json.loads(pool.split("\n", 1)[0]) if pool else {}
        return {
            "pairs": int(n.get(False, 0)),
            "gold_pairs": int(n.get(True, 0)),
            "judge": header.get("judge"),
            "strategy": (header.get("strategy") or {}).get("name", "depth"),
            "round": get_setting(conn, "round", 1),
            "closed": get_setting(conn, "closed", False),
            "options": get_setting(conn, "options", {}),
            "titles_note": get_setting(conn, "titles_note"),
        }


def secret(engine: Engine) -> str:
    """The key that signs sessions and CSRF tokens (made once, kept in the database, so that
    sessions survive a restart)."""
    with write(engine) as conn:
        value = get_setting(conn, "secret")
        if value is None:
            value = secrets.token_urlsafe(48)
            put_setting(conn, "secret", value)
        return value


# --- handing out pairs ---------------------------------------------------------------------


# The statements of every request, built once: building a statement costs SQLAlchemy several
# times what running it costs SQLite (the values travel as bound parameters).
_b = sa.bindparam
_OPEN = sa.select(settings.c.key, settings.c.value).where(settings.c.key.in_(("closed", "options")))
_ACCOUNT = sa.select(users.c.paused, users.c.flag, users.c.disabled, users.c.epoch).where(
    users.c.id == _b("uid")
)
_OPEN_PAIR = (
    sa.select(assignments.c.id.label("aid"), pairs)
    .join(pairs, pairs.c.id == assignments.c.pair_ref)
    .where(assignments.c.user_id == _b("uid"), assignments.c.judged_at.is_(None))
    .order_by(assignments.c.id)
    .limit(1)
)
_RENEW = assignments.update().where(assignments.c.id == _b("aid")).values(lease_until=_b("until"))
_EXPIRED = (
    sa.select(assignments.c.id, assignments.c.pair_ref)
    .where(assignments.c.judged_at.is_(None), assignments.c.lease_until < _b("now"))
    .limit(100)
)
_RELEASE = assignments.delete().where(
    assignments.c.id == _b("aid"),
    assignments.c.judged_at.is_(None),
    assignments.c.lease_until < _b("now"),
)
_UNTAKE = pairs.update().where(pairs.c.id == _b("ref")).values(taken=pairs.c.taken - 1)
_JUDGED_BY = (
    sa.select(sa.func.count())
    .select_from(assignments)
    .where(assignments.c.user_id == _b("uid"), assignments.c.judged_at.is_not(None))
)
_HANDED = sa.select(users.c.handed).where(users.c.id == _b("uid"))
_CANDIDATE = (
    sa.select(pairs.c.id)
    .where(
        pairs.c.is_gold.is_(False),
        pairs.c.active.is_(True),
        pairs.c.taken == _b("taken"),
        ~sa.exists().where(
            assignments.c.pair_ref == pairs.c.id, assignments.c.user_id == _b("uid")
        ),
    )
    .order_by(pairs.c.seq)
    .limit(1)
)
_CANDIDATE_SKIP = _CANDIDATE.with_for_update(skip_locked=True)
_TAKE = (
    pairs.update()
    .where(pairs.c.id == _b("ref"), pairs.c.taken < _b("n"))
    .values(taken=pairs.c.taken + 1)
)
_PAIR = sa.select(pairs).where(pairs.c.id == _b("ref"))
_HAND = users.update().where(users.c.id == _b("uid")).values(handed=users.c.handed + 1)
_MINE = (
    sa.select(
        assignments.c.id,
        assignments.c.label,
        assignments.c.judged_at,
        pairs.c.id.label("ref"),
        pairs.c.is_gold,
        pairs.c.gold,
        pairs.c.round,
    )
    .join(pairs, pairs.c.id == assignments.c.pair_ref)
    .where(pairs.c.pair_id == _b("pid"), assignments.c.user_id == _b("uid"))
)
_JUDGE = (
    assignments.update()
    .where(assignments.c.id == _b("aid"), assignments.c.judged_at.is_(None))
    .values(label=_b("given"), judged_at=_b("at"))
)
_ONE_MORE = pairs.update().where(pairs.c.id == _b("ref")).values(judged=pairs.c.judged + 1)
_JUDGED = sa.select(pairs.c.judged).where(pairs.c.id == _b("ref"))


def _task(row, lease_until: float, opts: Options, stats: dict[str, int]) -> dict[str, Any]:
    return {
        "pair_id": row.pair_id,
        "lease_until": lease_until,
        "scale": SCALE,
        **json.loads(row.display),
        "done": stats,
    }


def _check_open(conn: Connection, user: User, now: float) -> Options:
    """The options, once the pool is open and the assessor's session still live (neither logged
    out nor expired, the account neither disabled nor changed since login) and not paused: one
    settings, one user and one session read."""
    found = dict(conn.execute(_OPEN).all())
    if json.loads(found.get("closed", "false")):
        raise ApiError(409, "the pool is closed; no more judgments are taken")
    row = conn.execute(_ACCOUNT, {"uid": user.id}).first()
    if row is None or row.disabled or row.epoch != user.epoch:
        raise ApiError(401, "the session has ended (account changed or disabled); log in again")
    if not session_alive(conn, user, now):
        raise ApiError(401, "the session has ended (logged out or expired); log in again")
    if row.paused:
        raise ApiError(
            403,
            f"paused: {row.flag or 'by an organizer'}; an organizer must review and resume",
            paused=True,
        )
    return Options(**json.loads(found.get("options", "{}")))


def _reclaim(conn: Connection, now: float) -> int:
    """Return expired, unjudged leases to the queue (up to 100 at a time)."""
    n = 0
    for aid, ref in conn.execute(_EXPIRED, {"now": now}).all():
        if conn.execute(_RELEASE, {"aid": aid, "now": now}).rowcount:
            conn.execute(_UNTAKE, {"ref": ref})
            n += 1
    return n


def _stats(conn: Connection, user: User) -> dict[str, int]:
    judged = conn.execute(_JUDGED_BY, {"uid": user.id}).scalar_one()
    return {"judged": int(judged)}


def _gold_due(handed: int, rate: float) -> bool:
    """Is the (handed + 1)-th pair given to an assessor a gold one?"""
    return rate > 0 and math.floor((handed + 1) * rate + 1e-9) > math.floor(handed * rate + 1e-9)


def _not_mine(user: User):
    return ~sa.exists().where(
        assignments.c.pair_ref == pairs.c.id, assignments.c.user_id == user.id
    )


def _claim(conn: Connection, user: User, n: int):
    """Claim a place on a pool pair that has fewer than ``n`` live assignments and none of this
    assessor's: the nearest to its ``n`` first (so complete pairs accumulate), then the first in
    the queue; None when there is none.

    One indexed look per count of live assignments (``taken = t``, in queue order): a look for
    ``taken < n`` in queue order would sort every open pair of the pool. PostgreSQL: the
    candidate row is locked with SKIP LOCKED (the queue pattern), so concurrent requests take
    different pairs instead of waiting on each other; when only locked rows are left, one plain
    look decides. The conditional update (``taken < n``) is the guard either way."""
    skip = conn.dialect.name == "postgresql"
    for _ in range(50):  # bounded: each miss is a place another assessor just took
        ref = _candidate(conn, user, n, skip)
        if ref is None and skip:
            ref = _candidate(conn, user, n, False)
        if ref is None:
            return None
        if conn.execute(_TAKE, {"ref": ref, "n": n}).rowcount:
            return conn.execute(_PAIR, {"ref": ref}).first()
    return None


def _candidate(conn: Connection, user: User, n: int, skip_locked: bool) -> int | None:
    look = _CANDIDATE_SKIP if skip_locked else _CANDIDATE
    for taken in range(n - 1, -1, -1):
        ref = conn.execute(look, {"taken": taken, "uid": user.id}).scalar()
        if ref is not None:
            return ref
    return None


def next_pair(engine: Engine, user: User, now: float | None = None) -> dict[str, Any] | None:
    """The assessor's open pair, or a new one (gold when due), or None when nothing is left for
    them now."""
    now = time.time() if now is None else now
    # a pair handed out need not wait for the disk: a power cut can only return it to the queue
    with write(engine, durable=False) as conn:
        opts = _check_open(conn, user, now)
        until = now + opts.lease_seconds
        open_row = conn.execute(_OPEN_PAIR, {"uid": user.id}).first()
        if open_row is not None:
            conn.execute(_RENEW, {"aid": open_row.aid, "until": until})
            return _task(open_row, until, opts, _stats(conn, user))
        _reclaim(conn, now)
        handed = conn.execute(_HANDED, {"uid": user.id}).scalar_one()
        row = None
        if _gold_due(handed, opts.gold_rate):
            golds = conn.execute(
                sa.select(pairs)
                .where(pairs.c.is_gold.is_(True), _not_mine(user))
                .order_by(pairs.c.seq)
            ).all()
            if golds:
                h = hashlib.sha256(f"{user.name}:{handed}".encode()).digest()
                row = golds[int.from_bytes(h[:4], "big") % len(golds)]
                conn.execute(
                    pairs.update().where(pairs.c.id == row.id).values(taken=pairs.c.taken + 1)
                )
        if row is None:
            row = _claim(conn, user, opts.assessors)
        if row is None:
            return None
        conn.execute(
            assignments.insert(),
            {"pair_ref": row.id, "user_id": user.id, "leased_at": now, "lease_until": until},
        )
        conn.execute(_HAND, {"uid": user.id})
        return _task(row, until, opts, _stats(conn, user))


def _label(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in LABELS:
        raise ApiError(422, f"label {value!r} is not one of {LABELS_TEXT}")
    return value


def _mine(conn: Connection, user: User, pid: Any):
    if not isinstance(pid, str) or not pid:
        raise ApiError(422, "pair_id must be the string GET /api/next gave")
    row = conn.execute(_MINE, {"pid": pid, "uid": user.id}).first()
    if row is None:
        # the same answer for unknown ids and others' pairs: ids cannot be probed
        raise ApiError(
            404,
            f"no pair {pid} is assigned to you (unknown, not yours, or its lease ran out and it "
            "went back to the queue); GET /api/next for your pair",
        )
    return row


def judge(engine: Engine, user: User, pid: Any, label: Any, now: float | None = None):
    """Save a judgment of the assessor's pair. Returns (answer, round_may_be_complete)."""
    now = time.time() if now is None else now
    label = _label(label)
    with write(engine) as conn:
        opts = _check_open(conn, user, now)
        row = _mine(conn, user, pid)
        if row.judged_at is not None:
            raise ApiError(
                409,
                f"pair {pid} is already judged ({row.label}); nothing changed. To change it: "
                f"PUT /api/judgments/{pid}",
                label=row.label,
            )
        done = conn.execute(_JUDGE, {"aid": row.id, "given": label, "at": now})
        if not done.rowcount:
            raise ApiError(409, f"pair {pid} is already judged; nothing changed")
        conn.execute(_ONE_MORE, {"ref": row.ref})
        paused = False
        if row.is_gold:
            paused = _gold_check(conn, user, opts, now)
        judged = conn.execute(_JUDGED, {"ref": row.ref}).scalar_one()
        complete = (not row.is_gold) and judged >= opts.assessors
        answer = {"pair_id": pid, "label": label, "judged_at": now, **_stats(conn, user)}
        if paused:
            answer["paused"] = True
        return answer, complete


def _gold_check(conn: Connection, user: User, opts: Options, now: float) -> bool:
    from cmrkit.judgments.scale import binarize

    rows = conn.execute(
        sa.select(assignments.c.label, pairs.c.gold)
        .join(pairs, pairs.c.id == assignments.c.pair_ref)
        .where(
            assignments.c.user_id == user.id,
            assignments.c.judged_at.is_not(None),
            pairs.c.is_gold.is_(True),
        )
    ).all()
    right = sum(1 for label, gold in rows if binarize(label) == gold)
    if len(rows) < opts.gold_after:
        return False
    acc = right / len(rows)
    if acc >= opts.min_gold_accuracy:
        return False
    flag = (
        f"gold accuracy {right}/{len(rows)} = {acc:.2f} below {opts.min_gold_accuracy:.2f} "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(now))})"
    )
    conn.execute(users.update().where(users.c.id == user.id).values(paused=True, flag=flag))
    return True


def change(engine: Engine, user: User, pid: Any, label: Any, now: float | None = None):
    """Change one of the assessor's last CHANGEABLE judgments."""
    now = time.time() if now is None else now
    label = _label(label)
    with write(engine) as conn:
        _check_open(conn, user, now)
        row = _mine(conn, user, pid)
        if row.judged_at is None:
            raise ApiError(409, f"pair {pid} is not judged yet; POST /api/judgments first")
        recent = conn.execute(
            sa.select(assignments.c.id)
            .where(assignments.c.user_id == user.id, assignments.c.judged_at.is_not(None))
            .order_by(assignments.c.judged_at.desc(), assignments.c.id.desc())
            .limit(CHANGEABLE)
        ).scalars()
        if row.id not in set(recent):
            raise ApiError(
                409, f"only your last {CHANGEABLE} judgments can be changed; {pid} is older"
            )
        if row.label != label:
            conn.execute(
                assignments.update()
                .where(assignments.c.id == row.id)
                .values(label=label, changed_at=now)
            )
        return {"pair_id": pid, "label": label, "previous": row.label}


def recent(engine: Engine, user: User, limit: int = CHANGEABLE) -> list[dict[str, Any]]:
    """The assessor's last judgments, newest first, with what they showed (for changing)."""
    with read(engine) as conn:
        rows = conn.execute(
            sa.select(
                assignments.c.label, assignments.c.judged_at, pairs.c.pair_id, pairs.c.display
            )
            .join(pairs, pairs.c.id == assignments.c.pair_ref)
            .where(assignments.c.user_id == user.id, assignments.c.judged_at.is_not(None))
            .order_by(assignments.c.judged_at.desc(), assignments.c.id.desc())
            .limit(max(1, min(limit, CHANGEABLE)))
        ).all()
    return [
        {"pair_id": r.pair_id, "label": r.label, "judged_at": r.judged_at, **json.loads(r.display)}
        for r in rows
    ]


def close(engine: Engine) -> int:
    """Close the pool: no more work is handed out or taken; open leases are released."""
    with write(engine) as conn:
        put_setting(conn, "closed", True)
        released = 0
        while n := _reclaim(conn, float("inf")):
            released += n
        return released


# --- adaptive rounds -----------------------------------------------------------------------

_advancing = threading.Lock()


def _feedback(conn: Connection) -> dict[tuple[str, str], int]:
    """The majority of binarized labels of every judged pool pair (-1 for a tie)."""
    from cmrkit.judgments.scale import binarize, majority

    votes: dict[tuple[str, str], list[int]] = {}
    for qid, docno, label in conn.execute(
        sa.select(pairs.c.qid, pairs.c.docno, assignments.c.label)
        .join(pairs, pairs.c.id == assignments.c.pair_ref)
        .where(pairs.c.is_gold.is_(False), assignments.c.judged_at.is_not(None))
    ):
        votes.setdefault((qid, docno), []).append(binarize(label))
    return {k: majority(sum(v), len(v) - sum(v)) for k, v in votes.items()}


def advance(engine: Engine) -> bool:
    """Choose the next round of an mtf/maxmean pool when every pair of the current one has its
    judgments; True when a round was added. Safe to call at any time, from any thread or
    process (the round number is moved on by a conditional update)."""
    from cmrkit.assess.key import pair_id
    from cmrkit.assess.tasks import describe_pairs
    from cmrkit.pooling import next_round

    with _advancing:
        with read(engine) as conn:
            if get_setting(conn, "finished", True) or get_setting(conn, "closed", False):
                return False
            opts = options(conn)
            rnd = get_setting(conn, "round", 1)
            left = conn.execute(
                sa.select(sa.func.count())
                .select_from(pairs)
                .where(
                    pairs.c.is_gold.is_(False),
                    pairs.c.round == rnd,
                    pairs.c.judged < opts.assessors,
                )
            ).scalar_one()
            if left:
                return False
            pool = stored_pool(conn)
            feedback = _feedback(conn)
            collection = Path(get_setting(conn, "collection"))
            salt = get_setting(conn, "salt")
            show_titles = get_setting(conn, "show_titles", False)
            seq = get_setting(conn, "seq", 0)
            identity = get_setting(conn, "identity")
            batch = ((identity.get("strategy") or {}) or {}).get("batch")
            batch = batch if batch is not None else (pool.header.get("strategy") or {}).get("batch")
        try:
            new = next_round(pool, feedback, n=batch)
        except CmrkitError:  # the budget is spent
            with write(engine) as conn:
                put_setting(conn, "finished", True)
                put_setting(conn, "pool", pool_text(_with_labels(pool, feedback)))
            return False
        chosen = [(p.qid, p.docno) for p in new.pairs if p.sampled]
        described = describe_pairs(
            chosen, collection, blind=True, max_chars=identity.get("context_chars", 600)
        )
        display = _display(described, show_titles)
        rows = []
        for k in _shuffled(chosen, seq, "round"):
            seq += 1
            rows.append(_pair_row(pair_id(salt, *k), k, None, rnd + 1, seq, display[k]))
        with write(engine) as conn:
            moved = conn.execute(
                sa.update(settings)
                .where(
                    settings.c.key == "round",
                    settings.c.value == json.dumps(rnd),
                )
                .values(value=json.dumps(rnd + 1))
            )
            if not moved.rowcount:
                return False
            if rows:
                conn.execute(pairs.insert(), rows)
            put_setting(conn, "pool", pool_text(new))
            put_setting(conn, "seq", seq)
        return True


def _with_labels(pool, feedback: Mapping[tuple[str, str], int]):
    for p in pool.pairs:
        if p.order is not None and (p.qid, p.docno) in feedback:
            p.label = feedback[(p.qid, p.docno)]
    return pool


# --- progress ------------------------------------------------------------------------------


def progress(engine: Engine, now: float | None = None, window: float = 600.0) -> dict[str, Any]:
    """Pairs done per query and per assessor, throughput, gold accuracy and agreement (Fleiss'
    kappa as `judgments aggregate` computes it, Cohen's kappa for each pair of assessors)."""
    from cmrkit.pooling import natural_key

    now = time.time() if now is None else now
    with read(engine) as conn:
        opts = options(conn)
        prs = conn.execute(
            sa.select(
                pairs.c.id,
                pairs.c.qid,
                pairs.c.docno,
                pairs.c.is_gold,
                pairs.c.gold,
                pairs.c.judged,
                pairs.c.taken,
            )
        ).all()
        judge_labels = get_setting(conn, "judge_labels")
        rows = conn.execute(
            sa.select(
                assignments.c.pair_ref,
                assignments.c.user_id,
                assignments.c.label,
                assignments.c.judged_at,
            )
        ).all()
        people = conn.execute(sa.select(users).order_by(users.c.name)).all()
        state = {
            "round": get_setting(conn, "round", 1),
            "closed": get_setting(conn, "closed", False),
            # the setting says that no round is to come (a depth pool has none)
            "rounds_done": get_setting(conn, "finished", True),
        }
        pool_head = (get_setting(conn, "pool") or "{}").split("\n", 1)[0]
    header = json.loads(pool_head) if pool_head else {}
    n = opts.assessors
    queries: dict[str, dict[str, int]] = {}
    for p in prs:
        if not p.is_gold:
            q = queries.setdefault(p.qid, {"pairs": 0, "complete": 0, "judgments": 0})
            q["pairs"] += 1
            q["complete"] += int(p.judged >= n)
            q["judgments"] += p.judged
    labels, assessors_out = _per_assessor(prs, rows, people, now, window)
    recent_all = sum(1 for r in rows if r.judged_at is not None and r.judged_at >= now - window)
    pool_pairs = [p for p in prs if not p.is_gold]
    complete = sum(1 for p in pool_pairs if p.judged >= n)
    rounds_done = state.pop("rounds_done")
    return {
        "pool": {
            "collection": (header.get("collection") or {}).get("name"),
            "strategy": (header.get("strategy") or {}).get("name", "depth"),
            **state,
            "more_rounds": not rounds_done,
            "finished": rounds_done and complete == len(pool_pairs),
            "assessors_per_pair": n,
            "gold_rate": opts.gold_rate,
            "pairs": len(pool_pairs),
            "complete": complete,
            "judgments": sum(p.judged for p in pool_pairs),
            "gold_judgments": sum(p.judged for p in prs if p.is_gold),
            "open_leases": sum(1 for r in rows if r.judged_at is None),
        },
        "throughput": {"window_seconds": window, "per_hour": recent_all * 3600.0 / window},
        "queries": [{"qid": q, **queries[q]} for q in sorted(queries, key=natural_key)],
        "assessors": assessors_out,
        "agreement": _agreement(labels, {u.id: u.name for u in people}),
        "judge": _judge_agreement(prs, labels, judge_labels, header.get("judge")),
    }


def _judge_agreement(prs, labels, judge_labels, record) -> dict[str, Any] | None:
    """Hybrid judging, live: how the judge agrees with people on the pairs both labelled (the
    pairs the judge was not sure of): Cohen's kappa of the judge's binary label and people's
    majority (ties left out), and the quadratic-weighted kappa of its Likert label and people's
    lower median."""
    if judge_labels is None:
        return None
    from cmrkit.judgments.agreement import cohen_kappa, weighted_kappa
    from cmrkit.judgments.scale import binarize, majority

    judge_b, people_b, judge_5, people_5 = [], [], [], []
    for p in prs:
        mine = judge_labels.get(f"{p.qid}\t{p.docno}")
        votes = list(labels.get(p.id, {}).values())
        if p.is_gold or mine is None or not votes:
            continue
        judge_5.append(mine)
        people_5.append(sorted(votes)[(len(votes) - 1) // 2])
        relevant = sum(binarize(v) for v in votes)
        decided = majority(relevant, len(votes) - relevant)
        if decided >= 0:
            judge_b.append(binarize(mine))
            people_b.append(decided)
    return {
        **(record or {}),
        "pairs_both": len(judge_5),
        "pairs_binary": len(judge_b),
        "agreement": (
            sum(1 for a, b in zip(judge_b, people_b, strict=True) if a == b) / len(judge_b)
            if judge_b
            else None
        ),
        "kappa": cohen_kappa(judge_b, people_b),
        "kappa_likert": weighted_kappa(judge_5, people_5),
    }


def _per_assessor(prs, rows, people, now: float, window: float):
    """The labels of every pool pair by assessor id, and each assessor's figures."""
    from cmrkit.judgments.scale import binarize

    pair_of = {p.id: p for p in prs}
    per_user: dict[int, dict[str, Any]] = {
        u.id: {
            "name": u.name,
            "role": u.role,
            "disabled": u.disabled,
            "paused": u.paused,
            "flag": u.flag,
            "judged": 0,
            "gold": 0,
            "gold_right": 0,
            "open": 0,
            "recent": 0,
            "last": None,
        }
        for u in people
    }
    labels: dict[int, dict[int, int]] = {}
    for ref, uid, label, at in rows:
        u = per_user[uid]
        p = pair_of[ref]
        if at is None:
            u["open"] += 1
            continue
        u["judged"] += 1
        u["recent"] += int(at >= now - window)
        u["last"] = max(u["last"] or 0.0, at)
        if p.is_gold:
            u["gold"] += 1
            u["gold_right"] += int(binarize(label) == p.gold)
        else:
            labels.setdefault(ref, {})[uid] = label
    out = []
    for u in per_user.values():
        if u["role"] != "assessor" and not u["judged"]:
            continue
        u["gold_accuracy"] = u["gold_right"] / u["gold"] if u["gold"] else None
        u["per_hour"] = u.pop("recent") * 3600.0 / window
        out.append(u)
    return labels, out


def _agreement(labels: Mapping[int, Mapping[int, int]], names: Mapping[int, str]):
    """Fleiss' kappa (binary and Likert) over the pairs with two or more judgments, and Cohen's
    kappa (binary) for each two assessors over the pairs they both judged."""
    from cmrkit.judgments.agreement import agreement_rows, cohen_kappa, fleiss_kappa
    from cmrkit.judgments.scale import binarize

    multi = [v for v in labels.values() if len(v) >= 2]
    tables = [agreement_rows(list(v.values())) for v in multi]
    # the labels each two assessors gave the pairs they both judged (one pass over the pairs)
    together: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for v in multi:
        raters = sorted(v, key=lambda i: names[i])
        for i, a in enumerate(raters):
            for b in raters[i + 1 :]:
                la, lb = together.setdefault((a, b), ([], []))
                la.append(binarize(v[a]))
                lb.append(binarize(v[b]))
    cohen = []
    for (a, b), (la, lb) in sorted(
        together.items(), key=lambda x: (names[x[0][0]], names[x[0][1]])
    ):
        if len(la) >= 2:
            k = cohen_kappa(la, lb)
            cohen.append({"a": names[a], "b": names[b], "pairs": len(la), "kappa": k})
    defined = [c["kappa"] for c in cohen if c["kappa"] is not None]
    return {
        "pairs": len(multi),
        "fleiss_kappa": fleiss_kappa([b for b, _ in tables]),
        "fleiss_kappa_likert": fleiss_kappa([lk for _, lk in tables]),
        "cohen_kappa_mean": sum(defined) / len(defined) if defined else None,
        "cohen": cohen,
    }


# --- export --------------------------------------------------------------------------------


@dataclass
class Export:
    rows: list[tuple[str, str, int]]  # pair_id, worker_id, label
    key: list  # KeyEntry
    pool: Any


def export(engine: Engine) -> Export:
    """Every judgment (one per pair and assessor) as the offline page's CSV rows, sorted; the
    answer key of every pair id; the pool as it stands (with the rounds chosen so far)."""
    from cmrkit.assess.key import KeyEntry
    from cmrkit.pooling import natural_key

    with read(engine) as conn:
        rows = conn.execute(
            sa.select(pairs.c.pair_id, users.c.name, assignments.c.label)
            .join(pairs, pairs.c.id == assignments.c.pair_ref)
            .join(users, users.c.id == assignments.c.user_id)
            .where(assignments.c.judged_at.is_not(None))
        ).all()
        prs = conn.execute(
            sa.select(
                pairs.c.pair_id,
                pairs.c.qid,
                pairs.c.docno,
                pairs.c.round,
                pairs.c.seq,
                pairs.c.gold,
            )
        ).all()
        pool = stored_pool(conn)
        feedback = _feedback(conn)
    if any(p.round for p in prs) and (pool.header.get("strategy") or {}).get("name") in ADAPTIVE:
        _with_labels(pool, feedback)
    out = sorted((r.pair_id, r.name, int(r.label)) for r in rows)
    key = [
        KeyEntry(p.pair_id, p.qid, p.docno, f"R{p.round}" if p.round else "gold", p.seq, p.gold)
        for p in sorted(prs, key=lambda p: (natural_key(p.qid), p.docno))
    ]
    return Export(out, key, pool)


def write_judgments_csv(rows: Sequence[tuple[str, str, int]], path: str | os.PathLike) -> None:
    """The offline page's CSV: ``pair_id,worker_id,label`` (cells spreadsheet-safe)."""
    from cmrkit.escaping import csv_writer

    buf = io.StringIO(newline="")
    w = csv_writer(buf)
    w.writerow(("pair_id", "worker_id", "label"))
    w.writerows(rows)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(buf.getvalue())
