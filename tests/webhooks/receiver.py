"""A real HTTP receiver for webhook tests: a threaded ``http.server`` on a free port of 127.0.0.1
that records every request and answers as the test's ``answer`` says."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event(self) -> dict:
        return orjson.loads(self.body)


@dataclass
class Reply:
    status: int = 204
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class Receiver:
    """``answer(n, received)`` → ``Reply`` (n counts requests from 0); by default 204."""

    def __init__(self, answer: Callable[[int, Received], Reply] | None = None) -> None:
        self.answer = answer or (lambda n, r: Reply())
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                got = Received(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    time.monotonic(),
                )
                with receiver.lock:
                    n = len(receiver.requests)
                    receiver.requests.append(got)
                reply = receiver.answer(n, got)
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                try:
                    self.wfile.write(reply.body)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def got(self, path: str = "/hook") -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def wait(self, count: int, seconds: float = 10.0, path: str = "/hook") -> list[Received]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = self.got(path)
            if len(found) >= count:
                return found
            time.sleep(0.01)
        raise AssertionError(f"{count} request(s) expected at {path}, got {len(self.got(path))}")
