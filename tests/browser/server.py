"""A real daphne for the browser tests: its own data dir, DEBUG off, collected static files.

The server runs in a subprocess with the embedded profile (SQLite in a temporary data dir), so the
browser sees exactly what `bin/run` serves; the test process reaches its data with `manage.py`
subprocesses on the same data dir, never through the test database.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
DAPHNE = str(Path(PYTHON).with_name("daphne"))

SETUP = """
import json
from django.contrib.auth import get_user_model
from artifacts_app import services
User = get_user_model()
User.objects.create_superuser("sup", password="sup-pw-12345")
User.objects.create_user("alice", password="alice-pw-12345")
services.session_create(agent="reviewer", sid="s_live", owner="alice")
services.session_create(agent="reviewer", sid="s_view", owner="alice")
services.session_create(agent="reviewer", sid="s_other")
key, secret = services.agent_key_create(agent="reviewer", label="browser tests")
print(json.dumps({"key": secret}))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "REDIS_URL", "ARTIFACTS_PROFILE", "DJANGO_SETTINGS_MODULE"}
        }
        self.env.update(
            ARTIFACTS_DATA_DIR=str(data_dir),
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY=secrets.token_urlsafe(48),
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            DJANGO_SETTINGS_MODULE="agent_site.settings",
        )
        self.process: subprocess.Popen | None = None
        self.key = ""

    def manage(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def python(self, code: str) -> str:
        """Run code inside the project (services, selectors) against the server's database."""
        return self.manage("shell", "-c", code)

    def prepare(self) -> None:
        self.manage("migrate", "--noinput", "-v", "0")
        self.manage("collectstatic", "--noinput", "-v", "0")
        self.key = json.loads(self.python(SETUP).strip().splitlines()[-1])["key"]

    def start(self) -> None:
        log = open(self.data_dir / "daphne.log", "ab")  # noqa: SIM115 (kept open for the process)
        self.process = subprocess.Popen(
            [DAPHNE, "-b", "127.0.0.1", "-p", str(self.port), "agent_site.asgi:application"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError((self.data_dir / "daphne.log").read_text()[-3000:])
            try:
                if httpx.get(self.url + "/accounts/login/", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("daphne did not answer within 30 s")

    def kill(self) -> None:
        """Kill the server outright: every websocket drops with no close frame."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    # --- an agent over HTTP (API.md) ---------------------------------------------------------

    def tag(self, **record) -> dict:
        response = httpx.post(
            f"{self.url}/reviewer/v1/artifacts",
            json=record,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=10,
        )
        assert response.status_code in (200, 201), response.text
        return response.json()

    def delete(self, artifact_id: str) -> None:
        response = httpx.delete(
            f"{self.url}/reviewer/v1/artifacts/{artifact_id}",
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=10,
        )
        assert response.status_code == 204, response.text
