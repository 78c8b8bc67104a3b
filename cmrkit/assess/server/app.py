"""The Starlette application: routes, pages, sessions, CSRF, security headers; and ``serve``.

- Sessions: Starlette's ``SessionMiddleware`` (a cookie signed with itsdangerous, HttpOnly,
  SameSite=Lax; ``Secure`` with ``--secure-cookies`` behind TLS). The cookie expires after
  ``session_seconds`` without a request, and a session ends ``session_seconds`` after its login
  whatever happens; disabling a user ends their sessions at once.
- CSRF: ``asgi-csrf`` (double-submit cookie, signed): every POST/PUT/DELETE that carries cookies,
  and every login, must send the ``csrftoken`` cookie's value in the ``X-CSRFToken`` header.
- Pages allow scripts and styles from the server only (Content-Security-Policy), are never framed,
  and insert as HTML only the texts that cmrkit escaped (:func:`cmrkit.assess.render.shown_parts`).
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from asgi_csrf import asgi_csrf
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cmrkit.assess.server import api, auth, work
from cmrkit.assess.server.work import ApiError
from cmrkit.errors import CmrkitError

SESSION_COOKIE = "cmrkit_session"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


def _assets() -> Path:
    return Path(str(resources.files("cmrkit").joinpath("data", "assess", "server")))


class SecurityHeaders:
    """Adds the CSP and friends to every response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def wrapped(event):
            if event["type"] == "http.response.start":
                headers = list(event.get("headers") or [])
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                ]
                event = {**event, "headers": headers}
            await send(event)

        await self.app(scope, receive, wrapped)


class BodyLimit:
    """Refuses a request body over ``limit`` bytes with 413 before reading it: by its
    Content-Length, or, without one (chunked), as soon as the bytes received pass the limit.
    Outermost, so that no layer (the CSRF check reads form bodies) reads more."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _too_large(send, self.limit)
            return
        seen = 0
        started = refused = False

        async def counted():
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    refused = True
                    if not started:
                        await _too_large(send, self.limit)
                    return {"type": "http.disconnect"}  # the application reads no further
            return message

        async def watched(message):
            nonlocal started
            if refused:
                return  # the 413 is the answer
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except ClientDisconnect:
            if not refused:
                raise


async def _too_large(send, limit: int) -> None:
    body = json.dumps({"error": f"the request body exceeds {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _csrf_failed(scope, send, message_id):
    body = json.dumps(
        {
            "error": "CSRF check failed: send the value of the csrftoken cookie in the "
            "X-CSRFToken header (GET /healthz or any page sets the cookie)"
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _page(request: Request, name: str, **context) -> HTMLResponse:
    env: Environment = request.app.state.templates
    html = env.get_template(name).render(csrf_token=api.csrf_token(request), **context)
    return HTMLResponse(html)


async def home(request: Request) -> Response:
    try:
        user = await api.current_user(request)
    except ApiError:
        return RedirectResponse("/login", status_code=303)
    return RedirectResponse("/progress" if user.role == "organizer" else "/assess", 303)


async def login_page(request: Request) -> Response:
    return _page(request, "login.html", title=request.app.state.title)


async def assess_page(request: Request) -> Response:
    try:
        user = await api.current_user(request)
    except ApiError:
        return RedirectResponse("/login", status_code=303)
    return _page(request, "assess.html", title=request.app.state.title, user=user)


async def progress_page(request: Request) -> Response:
    try:
        user = await api.current_user(request)
    except ApiError:
        return RedirectResponse("/login", status_code=303)
    if user.role != "organizer":
        return api.error(403, "the progress page is for organizers")
    from starlette.concurrency import run_in_threadpool

    data = await run_in_threadpool(work.progress, request.app.state.engine)
    return _page(
        request, "progress.html", title=request.app.state.title, user=user, p=data, fmt=_fmt
    )


def _fmt(x: float | None) -> str:
    return "\u2013" if x is None else f"{x:.2f}"


def create_app(
    engine: Engine,
    *,
    secret: str,
    session_seconds: float = 8 * 3600,
    secure_cookies: bool = False,
    title: str = "Coreference search assessment",
    limiter: auth.LoginLimiter | None = None,
):
    """The ASGI application serving the pool loaded in ``engine``'s database."""
    routes = [
        Route("/", home),
        Route("/login", login_page),
        Route("/assess", assess_page),
        Route("/progress", progress_page),
        Route("/healthz", api.healthz),
        Route("/api/login", api.login, methods=["POST"]),
        Route("/api/logout", api.logout, methods=["POST"]),
        Route("/api/me", api.me),
        Route("/api/next", api.next_pair),
        Route("/api/judgments", api.post_judgment, methods=["POST"]),
        Route("/api/judgments", api.my_judgments, methods=["GET"]),
        Route("/api/judgments/{pair_id}", api.put_judgment, methods=["PUT"]),
        Route("/api/progress", api.progress),
        Route("/api/close", api.close, methods=["POST"]),
        Route("/api/export.csv", api.export_csv),
        Mount("/static", StaticFiles(directory=str(_assets() / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(
                SessionMiddleware,
                secret_key=secret,
                session_cookie=SESSION_COOKIE,
                max_age=int(session_seconds),
                same_site="lax",
                https_only=secure_cookies,
            ),
        ],
    )
    app.state.engine = engine
    app.state.session_seconds = session_seconds
    app.state.title = title
    app.state.limiter = limiter or auth.LoginLimiter()
    app.state.templates = Environment(
        loader=FileSystemLoader(str(_assets() / "templates")),
        autoescape=select_autoescape(default=True),
    )
    protected = asgi_csrf(
        app,
        signing_secret=secret,
        always_set_cookie=True,
        always_protect={"/api/login"},
        cookie_secure=secure_cookies,
        send_csrf_failed=_csrf_failed,
    )
    return BodyLimit(protected, api.MAX_BODY)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (before anything is written: a server that cannot start
    changes nothing); one line naming the option when the address is wrong or taken."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        why = e.strerror if isinstance(e, socket.gaierror) else str(e)
        raise CmrkitError(
            f"--host {host} is not an address of this machine ({why}); give one, e.g. 127.0.0.1"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise CmrkitError(
                f"--port {port} on {host} is in use (another server?); stop it or give "
                "another --port"
            ) from None
        raise CmrkitError(
            f"cannot listen on --host {host} --port {port} ({e.strerror or e}); give an "
            "address of this machine and a free port"
        ) from None
    return sock


def serve(
    app,
    sock: socket.socket,
    *,
    access_log: bool = False,
    on_signal: Callable[[int], None] | None = None,
) -> int | None:
    """Run the application with uvicorn on the bound socket until SIGINT, SIGTERM or SIGHUP,
    then stop gracefully (requests in flight get a second to finish; every acknowledged judgment
    is already committed). Returns the signal that stopped it (``on_signal`` is told at once)."""
    import contextlib
    import signal

    import uvicorn

    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=access_log,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    stopped: list[int] = []

    def handle(signum, frame):
        if not stopped:
            stopped.append(signum)
            if on_signal is not None:
                on_signal(signum)
        server.handle_exit(signum, frame)

    @contextlib.contextmanager
    def stop_on_signals():
        # uvicorn's own handling re-raises the signal after shutting down; here the caller
        # hears which signal stopped the server once it has stopped
        names = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        old = {s: signal.signal(s, handle) for s in names}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    server.capture_signals = stop_on_signals
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return stopped[0] if stopped else None
