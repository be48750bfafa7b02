"""One way for the tests to run a real daphne: a free port, a subprocess, a readiness wait, a stop.

``DaphneServer`` serves ``agent_site.asgi:application`` with ``python -m daphne`` from the repo
root. The caller gives the complete environment (each suite differs: its own SQLite data dir, the
test database, Redis or not), optionally a port (to come back on the same one) and how to tell it
is ready: a TCP connection by default, or an HTTP path that must answer (with a given status).
The server's output goes to a log file; if it exits or is not ready in time, the error says so
and carries the end of that log. ``stop`` sends SIGTERM and then SIGKILL; ``kill`` sends SIGKILL
straight away (every connection drops); ``start`` again brings it back on the same port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parents[1]
APP = "agent_site.asgi:application"
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_for(predicate, what: str, seconds: float = 60.0):
    """Poll until ``predicate()`` answers something true, and answer it (a bound for failure,
    not a timing assert)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never saw {what} within {seconds} s")


def sqlite_site(data_dir: Path, **settings: str) -> tuple[dict[str, str], str]:
    """The environment of a site on its own SQLite file in ``data_dir`` (whatever profile the suite
    runs in), migrated, and an agent key of ``reviewer``: ``(env, key)``, for a ``DaphneServer``.
    ``settings`` are more environment variables (``DJANGO_DEBUG="1"``, a limit…)."""
    env = {
        **os.environ,
        "ARTIFACTS_DATA_DIR": str(data_dir),
        "DATABASE_URL": "",
        "REDIS_URL": "",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "test-" + "k" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        **settings,
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    made = subprocess.run(
        [*manage, "create_agent_key", "reviewer"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return env, made.stdout.strip().splitlines()[-1]


class DaphneNotReady(RuntimeError):
    """The server exited or did not become ready in time; the message ends with its output."""


class DaphneServer:
    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        ready_path: str | None = None,
        ready_status: int | None = None,
        timeout: float = 120,
        app: str = APP,
        cwd: Path = ROOT,
        args: tuple[str, ...] = (),
    ) -> None:
        """``env`` is the server's whole environment (default: this process's). With
        ``ready_path`` the server is ready once ``GET ready_path`` gets an answer (with status
        ``ready_status``, if given); without it, once the port accepts a connection. ``cwd`` is the
        source tree it serves (bench/peers.py's ``--before`` serves an earlier commit's); ``args``
        more of daphne's options (``-v0``: no access line of daphne's own, as in production)."""
        self.env = dict(os.environ if env is None else env)
        self.port = port or free_port()
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"daphne-{self.port}-", suffix=".log")
            os.close(fd)
            log_path = Path(name)
        self.log_path = log_path
        self.ready_path = ready_path
        self.ready_status = ready_status
        self.timeout = timeout
        self.app = app
        self.cwd = cwd
        self.args = args
        self.process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{HOST}:{self.port}"

    def __enter__(self) -> DaphneServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self, wait: bool = True) -> DaphneServer:
        """Start the process (again, after ``stop`` or ``kill``: same port, same log)."""
        if self.running:
            raise RuntimeError(f"daphne on port {self.port} is already running")
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                *self.args,
                "-b",
                HOST,
                "-p",
                str(self.port),
                self.app,
            ],
            cwd=self.cwd,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        if wait:
            self.wait_ready()
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self) -> None:
        """Poll until the server is ready; stop it and raise ``DaphneNotReady`` if it never is."""
        assert self.process is not None, "start() first"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                self._close_log()
                raise DaphneNotReady(
                    f"daphne on port {self.port} exited with {code}:\n{self.output()}"
                )
            if self._ready():
                return
            time.sleep(0.05)
        self.stop()
        raise DaphneNotReady(
            f"daphne on port {self.port} was not ready within {self.timeout} s:\n{self.output()}"
        )

    def _ready(self) -> bool:
        if self.ready_path is None:
            try:
                socket.create_connection((HOST, self.port), 0.5).close()
            except OSError:
                return False
            return True
        try:
            response = httpx.get(self.base_url + self.ready_path, timeout=1)
        except httpx.HTTPError:
            return False
        return self.ready_status is None or response.status_code == self.ready_status

    def output(self, limit: int = 4000) -> str:
        """The end of what the server wrote (stdout and stderr), over all its starts."""
        if self._log is not None:
            self._log.flush()
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError as error:
            return f"(no output: {error})"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within 10 s. Safe to call again."""
        if self.running:
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None
        self._close_log()

    def kill(self) -> None:
        """SIGKILL outright: every connection (websockets too) drops with no close frame."""
        if self.running:
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)
        self.process = None
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
