"""SQLite and PostgreSQL answer the same records for the same search (API.md "Search"): one data
set (Unicode, mixed types, nested data, text contents) and a few hundred q and where searches,
run by ``tests/search_compare.py`` on a fresh database of each kind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def _answers(env: dict[str, str]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.search_compare"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.scale
@pytest.mark.slow
def test_sqlite_and_postgresql_find_the_same_records(tmp_path, db):
    import psycopg  # the scale extra: the embedded profile's venv has no PostgreSQL driver

    assert connection.vendor == "postgresql"
    conf = connection.settings_dict
    server = f"postgres://{conf['USER']}@{conf['HOST']}:{conf['PORT'] or 5432}"
    name = f"{conf['NAME']}_cmp_{uuid.uuid4().hex[:8]}"
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    base["DJANGO_SETTINGS_MODULE"] = "agent_site.settings"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        on_postgresql = _answers(
            {**base, "DATABASE_URL": f"{server}/{name}", "ARTIFACTS_DATA_DIR": str(tmp_path / "pg")}
        )
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    sqlite_env = {**base, "ARTIFACTS_DATA_DIR": str(tmp_path / "lite")}
    sqlite_env.pop("ARTIFACTS_PROFILE", None)
    on_sqlite = _answers(sqlite_env)
    assert len(on_sqlite) == len(on_postgresql) > 300
    differ = [
        (lite["query"], lite["keys"], pg["keys"])
        for lite, pg in zip(on_sqlite, on_postgresql, strict=True)
        if lite["keys"] != pg["keys"]
    ]
    assert differ == []
    # The data set exercises the searches: most find something, and not everything.
    assert sum(1 for a in on_sqlite if 0 < len(a["keys"]) < 300) > len(on_sqlite) // 2
