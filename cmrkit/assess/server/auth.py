"""Accounts: argon2 password hashes (argon2-cffi), roles, disabling, and the login rate limit.

Passwords are never stored or logged: only their argon2id hash is kept. A login with an unknown
name still spends one hash verification, so timing does not tell names apart. Failed logins are
counted per name and per client address in a moving window (the ``limits`` library); past the
limit, logins are refused with 429 until the window has moved on.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from sqlalchemy.engine import Connection, Engine

from cmrkit.assess.server.db import read, users, write
from cmrkit.errors import CmrkitError

ROLES = ("assessor", "organizer")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
MIN_PASSWORD = 10

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


def _user(row) -> User:
    return User(row.id, row.name, row.role, row.disabled, row.paused, row.flag, row.epoch)


def check_name(name: str) -> str:
    if not _NAME.match(name):
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
    get_user(conn, name)
    conn.execute(
        users.update()
        .where(users.c.name == name)
        .values(disabled=disabled, epoch=users.c.epoch + 1)
    )
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


class LoginLimiter:
    """Failed logins allowed per name and per client address in a moving window of minutes."""

    def __init__(self, per_name: int = 5, per_address: int = 20, minutes: int = 5):
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._name = RateLimitItemPerMinute(per_name, minutes)
        self._address = RateLimitItemPerMinute(per_address, minutes)

    def allowed(self, name: str, address: str) -> bool:
        return self._limiter.test(self._name, "name", name) and self._limiter.test(
            self._address, "address", address
        )

    def failed(self, name: str, address: str) -> None:
        self._limiter.hit(self._name, "name", name)
        self._limiter.hit(self._address, "address", address)

    def retry_after(self, name: str, address: str) -> int:
        stats = [
            self._limiter.get_window_stats(self._name, "name", name),
            self._limiter.get_window_stats(self._address, "address", address),
        ]
        return max(1, int(max(s.reset_time for s in stats) - time.time()) + 1)
