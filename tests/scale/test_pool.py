"""A daphne with ``?pool=1`` on ``DATABASE_URL`` (psycopg's pool, built by Django): tags and reads
from many threads at once are answered, the process never holds more PostgreSQL connections than
the pool's ``max_size``, and connections terminated underneath are replaced without an error."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection, connections

from artifacts_app import services
from tests.scale.test_processes import child_env
from tests.servers import DaphneServer

POOL_SIZE = 3


def backends(application: str) -> list[int]:
    """The server pids of the connections named ``application``, asked on this thread's own
    connection (closed after, so that a watcher thread keeps none)."""
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [application]
            )
            return [row[0] for row in cursor.fetchall()]
    finally:
        if threading.current_thread() is not threading.main_thread():
            connections["default"].close()


@pytest.mark.scale
@pytest.mark.django_db(transaction=True)
def test_a_pooled_server_tags_from_many_threads_within_the_pool_size_and_survives_terminations():
    agent = services.agent_create(slug="pooled", max_artifacts=1000)
    _, key = services.agent_key_create(agent=agent)
    application = f"pool-{uuid.uuid4().hex[:12]}"  # names this server's connections
    env = child_env()
    env.update(
        DATABASE_URL=f"{env['DATABASE_URL']}?pool=1&application_name={application}",
        DATABASE_POOL_SIZE=str(POOL_SIZE),
        ARTIFACTS_S3_PREFIX=f"pool-{uuid.uuid4().hex}",
    )
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(len(backends(application)))
            stop.wait(0.05)

    with (
        DaphneServer(env) as server,
        httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60
        ) as client,
    ):

        def tag(n: int) -> int:
            with_content = {"contents": f"report {n}"} if n % 3 == 0 else {}
            response = client.post(
                "/pooled/v1/artifacts",
                json={"kind": "report", "key": f"k{n % 20}", "data": {"n": n}, **with_content},
            )
            listed = client.get("/pooled/v1/artifacts?limit=5")
            assert listed.status_code == 200, listed.text[:300]
            return response.status_code

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(12) as threads:  # four times the pool's size at once
                statuses = list(threads.map(tag, range(120)))
        finally:
            stop.set()
            watcher.join(10)
        assert set(statuses) <= {200, 201} and statuses.count(201) == 20, statuses
        assert 0 < max(seen) <= POOL_SIZE, seen

        # Every connection of the pool terminated underneath: the next requests get new ones.
        pids = backends(application)
        assert pids
        with connection.cursor() as cursor:
            for pid in pids:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        with ThreadPoolExecutor(6) as threads:
            after = list(threads.map(tag, range(200, 230)))
        assert set(after) <= {200, 201}, after
        assert not set(backends(application)) & set(pids)
