"""A scripted OpenAI-compatible endpoint on 127.0.0.1 for the http teacher's tests (the teacher asks through the
``openai`` SDK, so its tests answer over real HTTP, never the network).

Each POST takes the next step of the script (the last step repeats once the script is spent; none: ``"ok"``):
a ``str`` is the answer's text (``choices[0].message.content``, or ``choices[0].text`` on ``/completions``), an
``int`` an error status, ``bytes`` a raw 200 body, a ``dict`` all of ``status``, ``headers``, ``text``, ``body``
and ``delay`` (seconds before answering), a callable the step for the request's JSON body. ``requests`` records
each one (path, headers with lower-case names, JSON body, arrival time); ``most_in_flight`` is how many were
being answered at once at most.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _answer(step: Any, path: str) -> dict[str, Any]:
    if isinstance(step, dict):
        spec = {"status": 200, "headers": {}, "text": "ok", "body": None, "delay": 0.0, **step}
    elif isinstance(step, int):
        spec = {"status": step, "headers": {}, "text": None, "body": None, "delay": 0.0}
    elif isinstance(step, bytes):
        spec = {"status": 200, "headers": {}, "text": None, "body": step, "delay": 0.0}
    else:
        spec = {"status": 200, "headers": {}, "text": str(step), "body": None, "delay": 0.0}
    if spec["body"] is None:
        if spec["status"] >= 400:
            payload: dict[str, Any] = {"error": {"message": f"scripted {spec['status']}"}}
        elif path.endswith("/chat/completions"):
            payload = {"choices": [{"index": 0, "message": {"role": "assistant", "content": spec["text"]}}]}
        else:
            payload = {"choices": [{"index": 0, "text": spec["text"]}]}
        spec["body"] = json.dumps(payload).encode()
    return spec


class StubServer:
    """``with StubServer(*script) as server: HttpBackend(server.url, ...)``."""

    def __init__(self, *script: Any):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with stub.lock:
                    headers = {name.lower(): value for name, value in self.headers.items()}
                    stub.requests.append({"path": self.path, "headers": headers, "body": body, "at": time.monotonic()})
                    step = stub.script.pop(0) if len(stub.script) > 1 else (stub.script or ["ok"])[0]
                    stub.in_flight += 1
                    stub.most_in_flight = max(stub.most_in_flight, stub.in_flight)
                try:
                    spec = _answer(step(body) if callable(step) else step, self.path)
                    time.sleep(spec["delay"])
                    self.send_response(spec["status"])
                    for name, value in {"Content-Type": "application/json", **spec["headers"]}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(spec["body"])))
                    self.end_headers()
                    self.wfile.write(spec["body"])
                finally:
                    with stub.lock:
                        stub.in_flight -= 1

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> StubServer:  # noqa: PYI034 - no typing_extensions here
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["StubServer"]
