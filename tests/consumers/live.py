"""Real daphne processes on free ports, sharing the test database (and Redis, when configured)."""

from __future__ import annotations

import os
from pathlib import Path

from django.db import connection

from tests.servers import ROOT, DaphneServer


def test_database_url() -> str:
    conf = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(conf['NAME']).resolve()}"
    user = conf.get("USER") or "postgres"
    password = f":{conf['PASSWORD']}" if conf.get("PASSWORD") else ""
    host = conf.get("HOST") or "127.0.0.1"
    port = conf.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{conf['NAME']}"


def daphne(port: int | None = None) -> DaphneServer:
    """A started daphne on the test database (on ``port``, to come back where a stopped one was)."""
    env = {**os.environ, "DATABASE_URL": test_database_url(), "PYTHONPATH": str(ROOT)}
    return DaphneServer(env, port=port).start()
