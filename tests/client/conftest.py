"""A real daphne process serving the whole site on a free port, with its own SQLite and blobs,
and the secrets the client tests use (agent key, user token, staff token)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

import pytest

from tests.servers import ROOT, DaphneServer


@dataclass
class Served:
    base: str
    port: int
    key: str  # agent key of `reviewer`
    user_token: str  # a plain user, "uma"
    staff_token: str  # a staff user, "stan"


def _last_line(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def served(tmp_path_factory) -> Served:
    data_dir = tmp_path_factory.mktemp("client-daphne")
    env = {
        **os.environ,
        "ARTIFACTS_DATA_DIR": str(data_dir),
        "DATABASE_URL": "",  # its own SQLite file, whatever profile the suite runs in
        "REDIS_URL": "",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "client-test-" + "k" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "PYTHONPATH": str(ROOT),
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [*manage, "shell", "-c",
         "from django.contrib.auth.models import User; "
         "User.objects.create_user('uma', password='uma-pw-123'); "
         "User.objects.create_user('stan', password='stan-pw-123', is_staff=True)"],
        cwd=ROOT, env=env, check=True,
    )  # fmt: skip
    key = _last_line([*manage, "create_agent_key", "reviewer"], env)
    user_token = _last_line([*manage, "create_user_token", "uma"], env)
    staff_token = _last_line([*manage, "create_user_token", "stan"], env)
    with DaphneServer(env, log_path=data_dir / "daphne.log", ready_path="/reviewer/v1/") as server:
        yield Served(
            base=server.base_url,
            port=server.port,
            key=key,
            user_token=user_token,
            staff_token=staff_token,
        )


class DroppingProxy:
    """A TCP proxy in front of daphne that hands the first ``drop`` connections' requests to the
    server, waits until the server starts answering (the tag has committed), then drops the
    connection without passing the answer on: a network failure after the work was done."""

    def __init__(self, upstream_port: int, drop: int = 1) -> None:
        self.upstream_port = upstream_port
        self.drop = drop
        self.connections = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        up = socket.create_connection(("127.0.0.1", self.upstream_port))
        forward = threading.Thread(target=_pipe, args=(conn, up), daemon=True)
        forward.start()
        if number <= self.drop:
            try:
                up.recv(1)  # the server has answered: the request was handled
            finally:
                for sock in (conn, up):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    sock.close()
            return
        _pipe(up, conn)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
