"""The JSON API (documented in docs/assess.md): login, the next pair, judgments, progress.

Every handler runs its database work in Starlette's thread pool (the SQLAlchemy engine is
synchronous). Refusals are JSON ``{"error": "..."}`` with a 4xx status; nothing is changed by a
refused request.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sqlalchemy.exc import DBAPIError
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cmrkit.assess.server import auth, work
from cmrkit.assess.server.db import disk_full, read
from cmrkit.assess.server.work import ApiError

MAX_BODY = 16_384
log = logging.getLogger("uvicorn.error")  # the server's log: one line per event, no traceback


def error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def csrf_token(request: Request) -> str:
    return request.scope["csrftoken"]()


async def body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise ApiError(413, f"the request body exceeds {MAX_BODY} bytes")
    try:
        data = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "the body is not JSON; send a JSON object") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    return data


def _session_key(request: Request) -> str:
    """The database key of the request's session; 401 without one, or past its lifetime."""
    token = request.session.get("sid")
    if not isinstance(token, str) or request.session.get("uid") is None:
        raise ApiError(401, "not logged in, or the session expired; POST /api/login")
    login_at = float(request.session.get("login_at", 0))
    if time.time() - login_at > request.app.state.session_seconds:
        request.session.clear()
        raise ApiError(401, "the session has expired; log in again")
    return auth.session_key(token)


async def current_user(request: Request, role: str | None = None) -> auth.User:
    """The logged-in user of the session (a session logged out or expired, and disabled users,
    are refused: the database holds the live sessions)."""
    state = request.app.state
    key = _session_key(request)

    def load():
        with read(state.engine) as conn:
            return auth.session_user(conn, key, time.time())

    user = await run_in_threadpool(load)
    if user is None:
        request.session.clear()
        raise ApiError(401, "the session has ended (logged out or expired); log in again")
    if user.disabled or user.epoch != request.session.get("epoch"):
        request.session.clear()
        raise ApiError(401, "the session has ended (account changed or disabled); log in again")
    if role is not None and user.role != role:
        raise ApiError(403, f"this needs the {role} role")
    return user


def session_user(request: Request) -> auth.User:
    """The user the session names, without a database read: for the requests whose own
    transaction checks the session and the account (ended, disabled, changed, paused) anyway."""
    key = _session_key(request)
    uid, name = request.session.get("uid"), request.session.get("name")
    return auth.User(
        int(uid),
        str(name),
        str(request.session.get("role")),
        False,
        False,
        None,
        int(request.session.get("epoch", -1)),
        key,
    )


DISK_FULL = (
    "the server's disk is full: nothing of this request was saved (every judgment acknowledged "
    "before is); an organizer must free space, then try again"
)


def handled(func):
    """Turn ApiError into its JSON answer, and a full disk into 503 and one log line."""

    async def endpoint(request: Request) -> Response:
        try:
            return await func(request)
        except ApiError as e:
            return error(e.status, e.message, **e.extra)
        except (DBAPIError, OSError) as e:
            if not disk_full(e):
                raise
            log.error(
                "the disk of the database is full: %s %s refused with 503 (free space)",
                request.method,
                request.url.path,
            )
            return error(503, DISK_FULL)

    endpoint.__name__ = func.__name__
    return endpoint


@handled
async def healthz(request: Request) -> Response:
    engine = request.app.state.engine

    def check():
        with read(engine) as conn:
            conn.exec_driver_sql("SELECT 1")

    await run_in_threadpool(check)
    return JSONResponse({"ok": True, "database": engine.dialect.name})


@handled
async def login(request: Request) -> Response:
    state = request.app.state
    data = await body(request)
    name, password = data.get("name"), data.get("password")
    if not isinstance(name, str) or not isinstance(password, str) or not name or not password:
        raise ApiError(422, 'send {"name": ..., "password": ...}')
    address = request.client.host if request.client else "?"
    limiter: auth.LoginLimiter = state.limiter
    attempt = await run_in_threadpool(limiter.attempt, state.engine, name, address, time.time())
    if attempt.retry_after:
        return JSONResponse(
            {"error": f"too many failed logins; try again in {attempt.retry_after} s"},
            status_code=429,
            headers={"Retry-After": str(attempt.retry_after)},
        )
    user = await run_in_threadpool(auth.verify, state.engine, name, password)
    if user is None:
        raise ApiError(401, "wrong name or password (or the account is disabled)")
    now = time.time()
    token = await run_in_threadpool(
        auth.log_in, state.engine, user, state.session_seconds, attempt, now
    )
    request.session.clear()
    request.session.update(
        {
            "sid": token,
            "uid": user.id,
            "name": user.name,
            "role": user.role,
            "epoch": user.epoch,
            "login_at": now,
        }
    )
    return JSONResponse({"name": user.name, "role": user.role, "csrf_token": csrf_token(request)})


@handled
async def logout(request: Request) -> Response:
    token = request.session.get("sid")
    if isinstance(token, str):
        await run_in_threadpool(auth.log_out, request.app.state.engine, token)
    request.session.clear()
    return JSONResponse({"ok": True})


@handled
async def me(request: Request) -> Response:
    user = await current_user(request)
    return JSONResponse(
        {
            "name": user.name,
            "role": user.role,
            "paused": user.paused,
            "flag": user.flag,
            "csrf_token": csrf_token(request),
        }
    )


@handled
async def next_pair(request: Request) -> Response:
    user = session_user(request)
    engine = request.app.state.engine
    task = await run_in_threadpool(work.next_pair, engine, user)
    if task is None and await run_in_threadpool(work.advance, engine):
        task = await run_in_threadpool(work.next_pair, engine, user)
    if task is None:
        return Response(status_code=204)
    return JSONResponse(task)


@handled
async def post_judgment(request: Request) -> Response:
    user = session_user(request)
    data = await body(request)
    if set(data) - {"pair_id", "label"}:
        raise ApiError(422, 'send {"pair_id": ..., "label": 1..5} and nothing else')
    engine = request.app.state.engine
    answer, complete = await run_in_threadpool(
        work.judge, engine, user, data.get("pair_id"), data.get("label")
    )
    # a pair that got its last judgment may end an adaptive round: choose the next one after
    # answering (the assessor does not wait for the strategy)
    task = BackgroundTask(run_in_threadpool, _advance, engine) if complete else None
    return JSONResponse(answer, status_code=201, background=task)


def _advance(engine) -> None:
    """work.advance after the answer was sent: a full disk is one log line (the round is chosen
    again when an assessor next finds the queue empty)."""
    try:
        work.advance(engine)
    except (DBAPIError, OSError) as e:
        if not disk_full(e):
            raise
        log.error("the disk of the database is full: the next round waits (free space)")


@handled
async def put_judgment(request: Request) -> Response:
    user = session_user(request)
    data = await body(request)
    if set(data) - {"label"}:
        raise ApiError(422, 'send {"label": 1..5}')
    pid = request.path_params["pair_id"]
    answer = await run_in_threadpool(
        work.change, request.app.state.engine, user, pid, data.get("label")
    )
    return JSONResponse(answer)


@handled
async def my_judgments(request: Request) -> Response:
    user = await current_user(request)
    judged = await run_in_threadpool(work.recent, request.app.state.engine, user)
    return JSONResponse({"judgments": judged, "scale": work.SCALE})


@handled
async def progress(request: Request) -> Response:
    await current_user(request, role="organizer")
    return JSONResponse(await run_in_threadpool(work.progress, request.app.state.engine))


@handled
async def close(request: Request) -> Response:
    await current_user(request, role="organizer")
    released = await run_in_threadpool(work.close, request.app.state.engine)
    return JSONResponse({"closed": True, "released_leases": released})


@handled
async def export_csv(request: Request) -> Response:
    await current_user(request, role="organizer")
    import io

    from cmrkit.escaping import csv_writer

    exp = await run_in_threadpool(work.export, request.app.state.engine)
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(("pair_id", "worker_id", "label"))
    w.writerows(exp.rows)
    return Response(
        buf.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="judgments.csv"'},
    )
