"""A real daphne for the browser tests: its own data dir, DEBUG off, collected static files.

The server runs in a subprocess with the embedded profile (SQLite in a temporary data dir), so the
browser sees exactly what `bin/run` serves; the test process reaches its data with `manage.py`
subprocesses on the same data dir, never through the test database.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx

from tests.servers import ROOT, DaphneServer

PYTHON = sys.executable

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


class LiveServer:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
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
        self.server = DaphneServer(
            self.env,
            log_path=data_dir / "daphne.log",
            ready_path="/accounts/login/",
            ready_status=200,
        )
        self.port = self.server.port
        self.url = self.server.base_url
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
        """Start daphne (again, after ``kill``: same port) and wait until the login page answers."""
        self.server.start()

    def kill(self) -> None:
        """Kill the server outright: every websocket drops with no close frame."""
        self.server.kill()

    def stop(self) -> None:
        self.server.stop()

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
