"""One HTTP POST whose whole exchange has a deadline, and whose reply is read up to a bound.

A socket timeout bounds each read, not a request: a server that sends a byte now and then
holds a plain ``urlopen`` for ever. Here a timer shuts the request's socket down when the
deadline passes, wherever the exchange is (connecting, sending, the status line and headers,
the body), and the request ends as :class:`Timeout`. The reply's body is read up to ``limit``
bytes; a longer one is cut there (:class:`TooLarge`), never read whole into memory. urllib's
handling stays as it is (proxies from the environment, redirects, HTTPS contexts).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

DETAIL_BYTES = 300  # of a refusal's body, for its message


class Timeout(Exception):
    """The deadline passed before the exchange was done."""


class TooLarge(Exception):
    """The reply's body is longer than the limit (it was cut there)."""


class Refused(Exception):
    """The server answered with an HTTP error status; ``detail``: the start of its body."""

    def __init__(self, status: int, detail: str):
        super().__init__(status, detail)
        self.status, self.detail = status, detail


class _Deadline:
    """Shuts the sockets of one exchange down once ``seconds`` have passed (unless done)."""

    def __init__(self, seconds: float):
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.expired = False
        self.done = False
        self.timer = threading.Timer(seconds, self.expire)
        self.timer.daemon = True

    def attach(self, sock: Any) -> Any:
        with self.lock:
            self.sockets.append(sock)
            if self.expired:
                _shut(sock)
        return sock

    def expire(self) -> None:
        with self.lock:
            if self.done:
                return
            self.expired = True
            for sock in self.sockets:
                _shut(sock)

    def finish(self) -> bool:
        """Stop the timer; whether the deadline had passed."""
        self.timer.cancel()
        with self.lock:
            self.done = True
            return self.expired


def _shut(sock: Any) -> None:
    # a blocked recv returns at once; a closed or detached socket (fd -1) raises, ignored
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type, deadline: _Deadline) -> type:
    """``base`` (an http.client connection class) whose sockets ``deadline`` can shut."""

    class Watched(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            create = self._create_connection
            self._create_connection = lambda *a, **k: deadline.attach(create(*a, **k))

        def connect(self) -> None:
            super().connect()
            deadline.attach(self.sock)  # the TLS socket, for HTTPS

    return Watched


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    class Http(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(_watched(http.client.HTTPConnection, deadline), req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            cls = _watched(http.client.HTTPSConnection, deadline)
            return self.do_open(cls, req, context=self._context)

    return urllib.request.build_opener(Http(), Https())


def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float, limit: int) -> bytes:
    """POST ``body`` to ``url`` and return the reply's body, all within ``timeout`` seconds.

    Raises :class:`Timeout` (the deadline passed, at any step), :class:`TooLarge` (a body over
    ``limit`` bytes), :class:`Refused` (an HTTP error status), or ``OSError`` /
    ``urllib.error.URLError`` / ``http.client.HTTPException`` (no connection, a connection
    cut)."""
    deadline = _Deadline(timeout)
    request = urllib.request.Request(url, body, dict(headers), method="POST")
    deadline.timer.start()
    try:
        try:
            with _opener(deadline).open(request, timeout=timeout) as resp:
                data = resp.read(limit + 1)
        except urllib.error.HTTPError as e:
            detail = b""
            with contextlib.suppress(OSError, http.client.HTTPException):
                detail = e.read(DETAIL_BYTES)
            text = " ".join(detail.decode("utf-8", "replace").split())
            raise Refused(e.code, text) from None
    except (Refused, OSError, http.client.HTTPException, ValueError) as e:
        if deadline.finish() or _timed_out(e):
            raise Timeout from None
        raise
    if deadline.finish():
        raise Timeout
    if len(data) > limit:
        raise TooLarge
    return data


def _timed_out(e: BaseException) -> bool:
    reason = getattr(e, "reason", None)
    return isinstance(e, TimeoutError) or isinstance(reason, TimeoutError)
