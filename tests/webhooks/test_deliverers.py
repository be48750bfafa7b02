"""At scale: any number of ``manage.py deliver_webhooks`` processes share the work through
PostgreSQL (``SKIP LOCKED`` claims, leases). Two of them deliver a burst with no event sent twice;
one killed with SIGKILL mid-burst loses nothing — the other takes its webhooks over after the lease
— and the only duplicates are the events the killed one had sent but not yet recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from artifacts_app import services
from tests.webhooks.conftest import tag
from tests.webhooks.receiver import Receiver, Reply

ROOT = Path(__file__).resolve().parents[2]
HOOKS = 4

pytestmark = [pytest.mark.scale, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def child_env() -> dict[str, str]:
    conf = connection.settings_dict
    url = f"postgres://{conf['USER']}@{conf['HOST']}:{conf['PORT'] or 5432}/{conf['NAME']}"
    return {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "ARTIFACTS_WEBHOOK_ALLOW_HTTP": "1",
        "ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
        "ARTIFACTS_WEBHOOK_TIMEOUT": "0.5",
        "ARTIFACTS_WEBHOOK_LEASE_MS": "2000",
        "ARTIFACTS_WEBHOOK_POLL_MS": "50",
        "ARTIFACTS_WEBHOOK_RETRY_DELAYS": "0.05,0.1",
    }


def deliverer(env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "deliver_webhooks", "--workers", "2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert "delivering" in proc.stdout.readline()
    return proc


def received(receiver: Receiver) -> dict[str, list[tuple[int, float]]]:
    """Per webhook path: (seq, monotonic time) of every request, in arrival order."""
    out: dict[str, list[tuple[int, float]]] = {}
    with receiver.lock:
        for r in receiver.requests:
            out.setdefault(r.path, []).append((r.event["seq"], r.at))
    return out


def wait_all(receiver: Receiver, seqs: set[int], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = received(receiver)
        if len(got) == HOOKS and all(seqs <= {s for s, _ in v} for v in got.values()):
            return
        time.sleep(0.05)
    raise AssertionError("not every event reached every webhook")


def test_two_deliverers_share_the_work_and_a_killed_one_loses_nothing(agent, hook_settings):
    assert connection.vendor == "postgresql"
    env = child_env()
    with Receiver(lambda n, r: Reply(200, delay=0.002)) as receiver:
        for n in range(HOOKS):
            services.webhook_create(agent=agent, url=receiver.url(f"/h{n}"))
        procs = [deliverer(env), deliverer(env)]
        try:
            # Steady state: both running, a burst — every event once.
            start = agent.last_seq
            last = tag(agent, 60)
            wait_all(receiver, set(range(start + 1, last + 1)))
            for path, got in received(receiver).items():
                assert Counter(s for s, _ in got).most_common(1)[0][1] == 1, path
                assert [s for s, _ in got] == sorted(s for s, _ in got), path

            # A burst, and one deliverer killed in the middle of it.
            before = {p: len(v) for p, v in received(receiver).items()}
            start = last
            last = tag(agent, 150)
            while sum(len(v) for v in received(receiver).values()) - sum(before.values()) < 100:
                time.sleep(0.005)
            killed_at = time.monotonic()
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(10)
            wait_all(receiver, set(range(start + 1, last + 1)))
            for path, got in received(receiver).items():
                burst = got[before[path] :]
                counts = Counter(s for s, _ in burst)
                for seq, count in counts.items():
                    if count > 1:  # sent again only because its first send was never recorded
                        first = min(t for s, t in burst if s == seq)
                        assert first <= killed_at, (path, seq)
                firsts = list(dict.fromkeys(s for s, _ in burst))
                assert firsts == sorted(firsts), path  # each event after every earlier one

            # Steady state again, with the survivor: none twice.
            before = {p: len(v) for p, v in received(receiver).items()}
            start = last
            last = tag(agent, 40)
            wait_all(receiver, set(range(start + 1, last + 1)))
            for path, got in received(receiver).items():
                seqs = [s for s, _ in got[before[path] :]]
                assert seqs == list(range(start + 1, last + 1)), path
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(20)
    assert procs[1].returncode == 0
