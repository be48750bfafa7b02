"""A real daphne of the server for these tests, started by them.

The server is not a dependency of this distribution: its checkout and interpreter are found at
``ARTIFACTS_SERVER_ROOT`` (default: the repository this kit sits in, ``../..``) and
``ARTIFACTS_SERVER_PYTHON`` (default: that checkout's ``.venv/bin/python``). That interpreter runs
``python -m tests.kit_server``, which makes a fresh SQLite site with the demo agent ``reviewer``,
the freeform agent ``notes``, a user and a staff user, starts daphne as the server's own tests do,
and prints the URLs and secrets as one JSON line. It stops when these tests end (its stdin closes).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ARTIFACTS_SERVER_ROOT") or Path(__file__).resolve().parents[3])
PYTHON = os.environ.get("ARTIFACTS_SERVER_PYTHON") or str(ROOT / ".venv" / "bin" / "python")


@dataclass
class Served:
    base: str
    ws: str
    port: int
    key: str  # agent key of `reviewer` (kinds declared in code)
    notes_key: str  # agent key of `notes` (freeform)
    tiny_key: str  # agent key of `tiny` (freeform, max 2)
    declared_key: str  # agent key of `declared` (freeform; the declare tests give it kinds)
    user_token: str  # a plain user, "uma"
    staff_token: str  # a staff user, "stan"


@contextmanager
def kit_server(env: dict[str, str] | None = None) -> Iterator[Served]:
    """A kit server (``env``: variables on top of this process's), stopped on exit."""
    if not Path(PYTHON).exists():
        pytest.fail(
            f"These tests need the server: no interpreter at {PYTHON}. Run the server's bin/test once "
            "(it makes .venv), or set ARTIFACTS_SERVER_PYTHON and ARTIFACTS_SERVER_ROOT."
        )
    process = subprocess.Popen(
        [PYTHON, "-m", "tests.kit_server"],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)
        line = process.stdout.readline() if ready else ""
        if not line:
            process.kill()
            pytest.fail(
                f"the test server did not start (exit {process.wait()}); see its output above"
            )
        info = json.loads(line)
        yield Served(
            base=info["base"],
            ws=info["ws"],
            port=info["port"],
            key=info["keys"]["reviewer"],
            notes_key=info["keys"]["notes"],
            tiny_key=info["keys"]["tiny"],
            declared_key=info["keys"]["declared"],
            user_token=info["userToken"],
            staff_token=info["staffToken"],
        )
    finally:
        if process.stdin:
            process.stdin.close()  # the server stops daphne and cleans up
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def served():
    with kit_server() as server:
        yield server
