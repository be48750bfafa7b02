"""Database connections live as long as their request thread (DESIGN.md §10, agent_site/asgi.py):
reused across the requests of one thread, never shared between threads, and replaced — not reused
— when broken underneath (the SQLite file replaced; the PostgreSQL backend terminated)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import orjson
import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.signals import request_finished
from django.db import connection, connections
from django.db.backends.signals import connection_created

from agent_site.asgi import django_asgi_app
from agent_site.settings import sqlite_database
from agent_site.sqlite.base import DatabaseWrapper as SQLiteWrapper
from artifacts_app import services

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key(reviewer) -> str:
    return services.agent_key_create(agent=reviewer)[1]


@pytest.fixture
def seen():
    """What each request saw when it finished: (thread, the DB-API connection object, its id)."""
    created: list[int] = []
    finished: list[tuple[int, object]] = []

    def on_created(sender, connection, **kwargs):
        created.append(threading.get_ident())

    def on_finished(sender, **kwargs):
        finished.append((threading.get_ident(), connections["default"].connection))

    connection_created.connect(on_created)
    request_finished.connect(on_finished)
    yield created, finished
    connection_created.disconnect(on_created)
    request_finished.disconnect(on_finished)
    django_asgi_app.retire_all()  # close the handler threads' connections before teardown


async def _get(path: str, key: str) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    app = ApplicationCommunicator(django_asgi_app, scope)
    await app.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await app.receive_output(timeout=30)
    body = b""
    while True:
        message = await app.receive_output(timeout=30)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await app.wait(timeout=30)  # the request's end (response.close, request_finished) too
    assert start["status"] == 200, body
    orjson.loads(body)
    return start["status"]


def _run(coro):
    return asyncio.run(coro)


def test_connection_is_reused_across_the_requests_of_one_thread(key, seen):
    created, finished = seen

    async def sequential():
        for _ in range(10):
            await _get("/reviewer/v1/artifacts", key)

    _run(sequential())
    threads = {thread for thread, _ in finished}
    assert len(finished) == 10 and len(threads) == 1  # one request at a time: one thread, reused
    assert len({id(conn) for _, conn in finished}) == 1  # …and one connection for all ten
    assert created == [next(iter(threads))]  # opened once, on that thread


def test_connections_are_never_shared_between_threads_and_bounded_by_concurrency(key, seen):
    created, finished = seen

    async def concurrent():
        for _ in range(3):
            await asyncio.gather(*(_get("/reviewer/v1/artifacts", key) for _ in range(4)))

    _run(concurrent())
    assert len(finished) == 12
    owner: dict[int, int] = {}
    for thread, conn in finished:
        assert owner.setdefault(id(conn), thread) == thread, "a connection served two threads"
    threads = {thread for thread, _ in finished}
    # At most one connection per thread, and at most as many threads as requests were in flight.
    assert len(owner) == len(threads) <= 4
    assert len(created) == len(threads)


def test_sqlite_connection_to_a_replaced_file_is_replaced(tmp_path):
    path = tmp_path / "db.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (v TEXT)")
        db.execute("INSERT INTO t VALUES ('original')")
    # The site's SQLite settings (the default database may be PostgreSQL: the scale profile).
    settings = {**connection.settings_dict, **sqlite_database(path), "NAME": str(path), "TEST": {}}
    wrapper = SQLiteWrapper(settings, alias="replaced")
    try:

        def request() -> tuple[object, str]:
            # What Django does around each request (close_old_connections), then one query.
            wrapper.close_if_unusable_or_obsolete()
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT v FROM t")
                return wrapper.connection, cursor.fetchone()[0]

        first, value = request()
        again, value_again = request()
        assert again is first and value == value_again == "original"  # kept while the file stays

        restored = tmp_path / "restored.sqlite3"
        with sqlite3.connect(restored) as db:
            db.execute("CREATE TABLE t (v TEXT)")
            db.execute("INSERT INTO t VALUES ('restored')")
        restored.replace(path)  # e.g. a restore from a backup, under a running server

        replaced, value = request()
        assert replaced is not first and value == "restored"
    finally:
        wrapper.close()


@pytest.mark.scale
def test_postgresql_connection_terminated_underneath_is_replaced(key, seen):
    created, finished = seen
    _run(_get("/reviewer/v1/artifacts", key))
    ((_, conn),) = finished
    pid = conn.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert cursor.fetchone()[0] is True
    _run(_get("/reviewer/v1/artifacts", key))  # 200: the health check replaced the connection
    (_, later) = finished[-1]
    assert later is not conn and later.info.backend_pid != pid
    assert len(created) == 2
