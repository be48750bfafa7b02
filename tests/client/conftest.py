"""A real daphne process serving the whole site on a free port, with its own SQLite and blobs,
and the secrets the client tests use (agent key, user token, staff token)."""

from __future__ import annotations

import os
import subprocess
import sys
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
        # docs/agents.md's webhook example points at a receiver on this machine.
        "ARTIFACTS_WEBHOOK_ALLOW_HTTP": "1",
        "ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
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
