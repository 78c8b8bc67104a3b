"""Accounts: argon2 password hashes (argon2-cffi), roles, disabling, sessions and the login rate
limit.

Passwords are never stored or logged: only their argon2id hash is kept. A login with an unknown
name still spends one hash verification, so timing does not tell names apart. A session is a
row of the database (the cookie carries a random token, the database its sha256): a logout or
an expiry deletes it, and a replayed cookie finds nothing. Login attempts are counted in the
database before the password is checked, per name and per client address in a moving window:
past the limit, logins are refused with 429 until the window has moved on, whichever server
process they reach, and across restarts.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy.engine import Connection, Engine

from cmrkit.assess.server.db import login_attempts, read, sessions, users, write
from cmrkit.errors import CmrkitError

ROLES = ("assessor", "organizer")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}")
MIN_PASSWORD = 10
# what a login body holds (api.MAX_BODY bytes) even when every character is written as JSON's
# 12-byte escape of a surrogate pair
MAX_PASSWORD = 1024

_hasher = PasswordHasher()
# each argon2 check takes 64 MiB and a CPU for a moment: a burst of logins waits its turn rather
# than taking the memory of dozens at once
_hashing = threading.BoundedSemaphore(4)
_DUMMY = _hasher.hash("not a password of anyone " + secrets.token_hex(8))


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    disabled: bool
    paused: bool
    flag: str | None
    epoch: int
    session: str | None = None  # the key of the session the request came with (None: no HTTP)


def _user(row) -> User:
    return User(row.id, row.name, row.role, row.disabled, row.paused, row.flag, row.epoch)


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise CmrkitError(
            f"user name {name!r}: use 1-100 letters, digits and _ . @ - (starting with a letter "
            "or digit); it is the worker_id of the exported judgments"
        )
    return name


def new_password() -> str:
    """A random password (about 96 bits)."""
    return secrets.token_urlsafe(12)


def add_user(conn: Connection, name: str, role: str, password: str) -> User:
    check_name(name)
    if role not in ROLES:
        raise CmrkitError(f"--role {role!r} is not one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD:
        raise CmrkitError(f"the password needs at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise CmrkitError(
            f"the password has {len(password)} characters; a login takes at most {MAX_PASSWORD}"
        )
    if conn.execute(sa.select(users.c.id).where(users.c.name == name)).first():
        raise CmrkitError(f"user {name!r} already exists; pick another name")
    conn.execute(
        users.insert().values(
            name=name,
            role=role,
            password_hash=_hasher.hash(password),
            disabled=False,
            paused=False,
            flag=None,
            handed=0,
            epoch=0,
            created_at=time.time(),
        )
    )
    return get_user(conn, name)


def get_user(conn: Connection, name: str) -> User:
    row = conn.execute(sa.select(users).where(users.c.name == name)).first()
    if row is None:
        raise CmrkitError(f"no user {name!r}; `cmrkit assess users list` shows them")
    return _user(row)


def user_by_id(conn: Connection, uid: int) -> User | None:
    row = conn.execute(sa.select(users).where(users.c.id == uid)).first()
    return None if row is None else _user(row)


def list_users(conn: Connection) -> list[User]:
    return [_user(r) for r in conn.execute(sa.select(users).order_by(users.c.name))]


def set_disabled(conn: Connection, name: str, disabled: bool) -> User:
    """Disable (or enable) a user; disabling ends their sessions (the epoch moves on)."""
    user = get_user(conn, name)
    conn.execute(
        users.update()
        .where(users.c.name == name)
        .values(disabled=disabled, epoch=users.c.epoch + 1)
    )
    conn.execute(sessions.delete().where(sessions.c.user_id == user.id))
    return get_user(conn, name)


def resume(conn: Connection, name: str) -> User:
    """Lift a pause for low gold accuracy (the flag stays in the user's record)."""
    get_user(conn, name)
    conn.execute(users.update().where(users.c.name == name).values(paused=False))
    return get_user(conn, name)


def verify(engine: Engine, name: str, password: str) -> User | None:
    """The user when the password is theirs and they are not disabled, else None. The hash is
    checked outside any transaction (it takes a while: writers must not wait for it)."""
    with read(engine) as conn:
        row = conn.execute(sa.select(users).where(users.c.name == name)).first()
    if row is None:
        try:
            with _hashing:
                _hasher.verify(_DUMMY, password)
        except VerificationError:
            pass
        return None
    try:
        with _hashing:
            _hasher.verify(row.password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return None
    if row.disabled:
        return None
    if _hasher.check_needs_rehash(row.password_hash):
        fresh = _hasher.hash(password)
        with write(engine) as conn:
            conn.execute(users.update().where(users.c.id == row.id).values(password_hash=fresh))
    return _user(row)


# --- sessions ------------------------------------------------------------------------------


def session_key(token: str) -> str:
    """What the database keeps of a session's token (the cookie's secret is not stored)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def log_in(engine: Engine, user: User, seconds: float, attempt: Attempt, now: float) -> str:
    """Start a session of ``seconds`` for ``user`` (the login ``attempt`` is no failure: it is
    forgotten); returns the token for the cookie."""
    token = secrets.token_urlsafe(32)
    with write(engine) as conn:
        if attempt.ids:
            conn.execute(login_attempts.delete().where(login_attempts.c.id.in_(attempt.ids)))
        conn.execute(sessions.delete().where(sessions.c.expires_at < now))
        conn.execute(
            sessions.insert().values(
                id=session_key(token), user_id=user.id, created_at=now, expires_at=now + seconds
            )
        )
    return token


def log_out(engine: Engine, token: str) -> None:
    """End the session: its cookie, replayed, finds nothing."""
    with write(engine) as conn:
        conn.execute(sessions.delete().where(sessions.c.id == session_key(token)))


def session_user(conn: Connection, key: str, now: float) -> User | None:
    """The user of a live session (None: logged out, expired, or never was)."""
    row = conn.execute(
        sa.select(users)
        .join(sessions, sessions.c.user_id == users.c.id)
        .where(sessions.c.id == key, sessions.c.expires_at > now)
    ).first()
    return None if row is None else _user(row)


_SESSION_UNTIL = sa.select(sessions.c.expires_at).where(
    sessions.c.id == sa.bindparam("key"), sessions.c.user_id == sa.bindparam("uid")
)


def session_alive(conn: Connection, user: User, now: float) -> bool:
    """Is the session the request came with (``user.session``) still live? True for a caller
    that has no session (the library used without HTTP)."""
    if user.session is None:
        return True
    until = conn.execute(_SESSION_UNTIL, {"key": user.session, "uid": user.id}).scalar()
    return until is not None and until > now


# --- the login rate limit ------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """A login attempt as counted: the rows that count it (forgotten when it succeeds), or how
    many seconds to wait when it was refused."""

    ids: tuple[int, ...] = ()
    retry_after: int = 0


def _key(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value}".encode("utf-8", "surrogatepass")).hexdigest()


class LoginLimiter:
    """Login attempts allowed per name and per client address in a moving window of minutes.

    An attempt is counted before its password is checked, in one transaction with the count
    (SQLite: the write lock; PostgreSQL: an advisory lock per name and address), so parallel
    guesses cannot pass the limit together; a successful login forgets its own attempt, so the
    count is of failures and of attempts still being checked."""

    def __init__(self, per_name: int = 5, per_address: int = 20, minutes: int = 5):
        self.per_name, self.per_address = per_name, per_address
        self.window = minutes * 60.0

    def attempt(self, engine: Engine, name: str, address: str, now: float) -> Attempt:
        """Count an attempt, or refuse it (``retry_after`` > 0) when a limit is reached."""
        limits = sorted(
            [(_key("name", name), self.per_name), (_key("address", address), self.per_address)]
        )
        since = now - self.window
        with write(engine) as conn:
            if conn.dialect.name == "postgresql":
                for key, _ in limits:
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": key})
            conn.execute(login_attempts.delete().where(login_attempts.c.at <= since))
            wait = 0.0
            for key, limit in limits:
                times = (
                    conn.execute(
                        sa.select(login_attempts.c.at)
                        .where(login_attempts.c.key == key, login_attempts.c.at > since)
                        .order_by(login_attempts.c.at)
                    )
                    .scalars()
                    .all()
                )
                if len(times) >= limit:  # free again when the oldest that counts leaves
                    wait = max(wait, times[len(times) - limit] + self.window - now)
            if wait > 0:
                return Attempt(retry_after=max(1, math.ceil(wait)))
            ids = tuple(
                conn.execute(login_attempts.insert().values(key=key, at=now)).inserted_primary_key[
                    0
                ]
                for key, _ in limits
            )
        return Attempt(ids=ids)
