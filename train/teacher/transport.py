"""One question to an HTTP endpoint within a wall-clock deadline, whatever client asks it (here the ``openai`` SDK).

Why a deadline and not the client's timeouts: httpx's timeouts (the SDK's) bound each operation (connect, each
read), so a server that sends one byte a second (a stuck proxy, an overloaded gateway) is never timed out, and the
SDK's retries and waits add up on top. Here the question runs in a daemon thread (``within``) and the caller waits
for it at most ``seconds``; past that the question's sockets are shut down and any later attempt of it is refused,
so the thread ends at its next read or retry (a daemon thread never holds the process), and the caller gets
``AttemptError("deadline", ...)``.

How the sockets are known: ``HOOKS`` are httpx event hooks (give them to the client the SDK uses). A question run by
``run`` has its ``Question`` in a thread-local; the request hook counts the attempt, refuses it once the question is
cancelled, and asks httpcore to trace it (``connect_tcp`` / ``start_tls`` hand over the new socket); the response
hook keeps the socket of a reused keep-alive connection and what an error status said. A reused connection whose
status line never comes is the one case left to the client's read timeout (``timeout`` seconds of silence).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

EXCERPT = 80  # characters of an answer quoted in an error: enough to recognise it, never a whole page


class AttemptError(Exception):
    """A question got no answer in time. ``kind``: ``deadline``; ``str()``: a short description."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


class Cancelled(BaseException):
    """Raised by the request hook in a question past its deadline: a BaseException, so the SDK (which retries any
    ``Exception``) lets it through instead of retrying."""


def excerpt(data: bytes | str, limit: int = EXCERPT) -> str:
    """A short, safe quote of what a server sent: at most ``limit`` characters, control characters escaped (a quote
    never moves the terminal's cursor nor breaks the one-line error), marked when cut."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)
    quoted = repr(text[:limit])
    return quoted + (f" (+{len(text) - limit} more)" if len(text) > limit else "")


class Question:
    """One question's attempts: the sockets they opened (shut at the deadline) and what each got (``tried``: one
    line per attempt, ``None`` until a response or the final error says what happened)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.closed = False
        self.tried: list[str | None] = []

    def add(self, sock: Any) -> None:
        if not isinstance(sock, socket.socket):
            return
        with self.lock:
            self.sockets.append(sock)
            closed = self.closed
        if closed:  # connected after the deadline: end it now
            _shut(sock)

    def close_all(self) -> None:
        with self.lock:
            self.closed = True
            sockets = list(self.sockets)
        for sock in sockets:
            _shut(sock)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: each new connection's (and TLS wrapper's) socket."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            if stream is not None:
                self.add(stream.get_extra_info("socket"))


def _shut(sock: socket.socket) -> None:
    try:  # shutdown (not close) wakes a read blocked in another thread
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected any more


_current = threading.local()  # the Question of the thread ``run`` started, if any


def _on_request(request: Any) -> None:
    question: Question | None = getattr(_current, "question", None)
    if question is None:
        return
    if question.closed:
        raise Cancelled
    question.tried.append(None)
    request.extensions["trace"] = question.trace


def _on_response(response: Any) -> None:
    question: Question | None = getattr(_current, "question", None)
    if question is None:
        return
    stream = response.extensions.get("network_stream")
    if stream is not None:
        question.add(stream.get_extra_info("socket"))
    if response.status_code >= 400 and question.tried:
        response.read()  # small: an error's body, quoted in the report of a teacher given up on
        question.tried[-1] = f"HTTP {response.status_code}: {excerpt(response.content)}"


HOOKS: dict[str, list[Callable[[Any], None]]] = {"request": [_on_request], "response": [_on_response]}


def run(seconds: float, call: Callable[[], Any], question: Question | None = None) -> Any:
    """``call()``'s result within ``seconds`` of wall clock, its HTTP attempts tracked in ``question`` (through
    ``HOOKS``); ``AttemptError("deadline")`` past it, the attempts' sockets then shut down."""
    question = question or Question()

    def tracked() -> Any:
        _current.question = question
        return call()

    return within(seconds, tracked, cancel=question.close_all)


def within(seconds: float, call: Callable[[], Any], cancel: Callable[[], None]) -> Any:
    """``call()``'s result (or its exception) when it ends within ``seconds`` of wall clock; otherwise ``cancel()``
    (which should make the call end soon: here it shuts the sockets down) and ``AttemptError("deadline")``. The call
    runs in a daemon thread, so the caller's wait is bounded whatever the call is blocked on (DNS, a TLS handshake,
    a byte a second, a retry's wait)."""
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


__all__ = ["HOOKS", "AttemptError", "Cancelled", "Question", "excerpt", "run", "within"]
