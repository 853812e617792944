"""One POST to an HTTP endpoint within a wall-clock deadline: connect, send and the whole answer, stdlib only.

Why a deadline and not a socket timeout: a socket timeout bounds each read, so a server that sends one byte a
second (a stuck proxy, an overloaded gateway) is never timed out. httpx's timeouts are per operation too. Here the
attempt runs in a daemon thread and the caller waits for it at most ``seconds``; past that the attempt's sockets
are shut down (the thread then ends at its next read; a daemon thread never holds the process) and the caller gets
``AttemptError("deadline", ...)``. urllib does the HTTP, so the environment's proxy settings keep working.

``post`` is all ``HttpBackend`` needs from a transport (status and body, or ``AttemptError``): an SDK client that
keeps a total deadline can take its place without touching the retries or the error reports.
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

EXCERPT = 80  # characters of an answer quoted in an error: enough to recognise it, never a whole page


class AttemptError(Exception):
    """One attempt got no HTTP answer. ``kind``: ``deadline``, ``unreachable`` or ``protocol`` (the server answered
    something that is not a complete HTTP response); ``str()``: a short description that quotes what came back."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


def excerpt(data: bytes | str, limit: int = EXCERPT) -> str:
    """A short, safe quote of what a server sent: at most ``limit`` characters, control characters escaped (a quote
    never moves the terminal's cursor nor breaks the one-line error), marked when cut."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)
    quoted = repr(text[:limit])
    return quoted + (f" (+{len(text) - limit} more)" if len(text) > limit else "")


class _Sockets:
    """The sockets one attempt opened, so the caller can end the attempt at its deadline."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.closed = False

    def add(self, sock: socket.socket) -> socket.socket:
        with self.lock:
            self.open.append(sock)
            closed = self.closed
        if closed:  # connected after the deadline: end it now
            _shut(sock)
        return sock

    def close_all(self) -> None:
        with self.lock:
            self.closed = True
            sockets = list(self.open)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:  # shutdown (not close) wakes a read blocked in another thread
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected, or detached by the TLS layer (its own socket is registered too)


def _tracked(base: type, sockets: _Sockets) -> type:
    """``base`` (an http.client connection class) registering its raw TCP socket and, after TLS, the wrapped one."""

    class Tracked(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            create = self._create_connection
            self._create_connection = lambda *a, **k: sockets.add(create(*a, **k))

        def connect(self) -> None:
            super().connect()
            sockets.add(self.sock)

    return Tracked


class _Tracking:
    sockets: _Sockets

    def do_open(self, http_class: type, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_tracked(http_class, self.sockets), req, **kwargs)  # type: ignore[misc]


class _HTTPHandler(_Tracking, urllib.request.HTTPHandler):
    def __init__(self, sockets: _Sockets) -> None:
        super().__init__()
        self.sockets = sockets


class _HTTPSHandler(_Tracking, urllib.request.HTTPSHandler):
    def __init__(self, sockets: _Sockets) -> None:
        super().__init__()
        self.sockets = sockets


Opener = Callable[..., Any]  # urlopen's shape: (request, timeout=) -> a response to read; tests pass their own


def post(url: str, data: bytes, headers: dict[str, str], seconds: float, opener: Opener | None = None) -> tuple:
    """``(status, body)`` of one POST answered within ``seconds`` (an error status included: its body says why);
    ``AttemptError`` when there is no complete answer in time."""
    sockets = _Sockets()
    open_url = opener or urllib.request.build_opener(_HTTPHandler(sockets), _HTTPSHandler(sockets)).open
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        return within(seconds, lambda: _exchange(open_url, request, seconds), cancel=sockets.close_all)
    except (OSError, http.client.HTTPException) as err:  # urllib's and http.client's: said as what the server did
        raise _classify(err, url) from None


def within(seconds: float, call: Callable[[], Any], cancel: Callable[[], None]) -> Any:
    """``call()``'s result (or its exception) when it ends within ``seconds`` of wall clock; otherwise ``cancel()``
    (which should make the call end soon: here it shuts the sockets down) and ``AttemptError("deadline")``. The call
    runs in a daemon thread, so the caller's wait is bounded whatever the call is blocked on (DNS, a TLS handshake,
    a byte a second); any client library's call can be wrapped the same way."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["answer"] = call()
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = err
        finally:
            done.set()

    threading.Thread(target=run, name="teacher-http", daemon=True).start()
    if not done.wait(seconds):
        cancel()
        raise AttemptError("deadline", f"no complete answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["answer"]


def _exchange(open_url: Opener, request: urllib.request.Request, seconds: float) -> tuple[int, bytes]:
    try:
        with open_url(request, timeout=seconds) as response:  # per read too: a silent server ends the thread
            return int(getattr(response, "status", None) or 200), response.read()
    except urllib.error.HTTPError as err:
        try:
            body = err.read() or b""
        except (OSError, http.client.HTTPException):
            body = b""
        return err.code, body


def _classify(err: Exception, url: str) -> Exception:
    """An exception of the attempt's thread -> ``AttemptError`` (what the server did), or itself (a bug)."""
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(reason, http.client.RemoteDisconnected):
        return AttemptError("protocol", f"{url} closed the connection without an answer")
    if isinstance(reason, http.client.BadStatusLine):
        line = reason.args[0] if reason.args else ""
        return AttemptError("protocol", f"{url} answered a bad status line {excerpt(line)}")
    if isinstance(reason, http.client.IncompleteRead):
        got = reason.partial or b""
        missing = f", {reason.expected} more expected" if reason.expected is not None else ""
        return AttemptError(
            "protocol", f"{url} answered an incomplete body ({len(got)} bytes{missing}): {excerpt(got)}"
        )
    if isinstance(reason, http.client.HTTPException):
        name = type(reason).__name__
        return AttemptError("protocol", f"{url} answered something that is not HTTP ({name}): {excerpt(str(reason))}")
    if isinstance(reason, (OSError, str)):
        return AttemptError("unreachable", f"cannot reach {url}: {reason}")
    return err


__all__ = ["AttemptError", "excerpt", "post", "within"]
