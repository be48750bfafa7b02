"""A real daphne of the whole site for the client kits' own tests (clients/python, clients/typescript).

Run with the server's interpreter from the repo root:

    .venv/bin/python -m tests.kit_server

It makes a fresh data dir (its own SQLite file and blobs, whatever the caller's environment says),
migrates, creates the users and secrets the kits' tests need, starts daphne exactly as the server's
own tests do (``tests.servers.DaphneServer``), prints ONE line of JSON on stdout —

    {"base": "http://127.0.0.1:PORT", "ws": "ws://127.0.0.1:PORT", "port": PORT,
     "keys": {"reviewer": "<agent key>", "notes": "<agent key>", "tiny": "…", "declared": "…"},
     "userToken": "<uma's token>", "staffToken": "<stan's token>", "user": "uma", "staff": "stan"}

— and serves until its stdin closes (the test process ended, however it ended) or it gets SIGTERM;
then it stops daphne and removes the data dir. ``reviewer`` is the demo agent declared in code
(kinds ``reviewed-pr`` with a schema, ``report``; the tool on); ``notes`` is a freeform agent made
with ``create_agent``, as an agent whose host code is not Python would be; ``tiny`` is one with
``max`` 2 (eviction, pins, ``cap_reached``) and ``declared`` one whose kinds the kits' tests declare
over HTTP (``PUT artifacts/kinds``). ``uma`` is a plain user, ``stan`` a staff user. Everything
is made through the management commands the contract names, so the secrets are exactly what an
operator would hand an agent.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env(data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ARTIFACTS_DATA_DIR": str(data_dir),
        "DATABASE_URL": "",  # its own SQLite file, whatever profile the caller runs in
        "REDIS_URL": "",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "kit-test-" + "k" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "PYTHONPATH": str(ROOT),
    }


def _last_line(*args: str) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def _prepare() -> dict[str, object]:
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0, stdout=io.StringIO())
    User.objects.create_user("uma", password="uma-pw-123")
    User.objects.create_user("stan", password="stan-pw-123", is_staff=True)
    call_command("create_agent", "notes", stdout=io.StringIO())
    call_command("create_agent", "tiny", "--max", "2", stdout=io.StringIO())
    call_command("create_agent", "declared", stdout=io.StringIO())
    return {
        "keys": {
            "reviewer": _last_line("create_agent_key", "reviewer"),
            "notes": _last_line("create_agent_key", "notes"),
            "tiny": _last_line("create_agent_key", "tiny"),
            "declared": _last_line("create_agent_key", "declared"),
        },
        "userToken": _last_line("create_user_token", "uma"),
        "staffToken": _last_line("create_user_token", "stan"),
        "user": "uma",
        "staff": "stan",
    }


def main() -> int:
    data_dir = Path(tempfile.mkdtemp(prefix="kit-daphne-"))
    env = _env(data_dir)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    from tests.servers import DaphneServer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        secrets = _prepare()
        server = DaphneServer(env, log_path=data_dir / "daphne.log", ready_path="/reviewer/v1/")
        with server:
            print(
                json.dumps(
                    {"base": server.base_url, "ws": server.ws_url, "port": server.port, **secrets}
                ),
                flush=True,
            )

            def watch_stdin() -> None:
                sys.stdin.read()  # EOF: whoever started us is gone
                stop.set()

            threading.Thread(target=watch_stdin, daemon=True).start()
            stop.wait()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
