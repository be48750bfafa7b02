"""Database connections live as long as their request thread (DESIGN.md §10, agent_site/asgi.py):
reused across the requests of one thread, never shared between threads, and replaced — not reused
— when broken underneath (the SQLite file replaced; the PostgreSQL backend terminated).

With ``?pool=1`` on ``DATABASE_URL`` (.ci/run runs this file so) psycopg's pool holds them instead:
a request takes one and gives it back, the process never holds more than the pool's ``max_size``,
and one terminated underneath is replaced by the pool's check, never handed to a request."""

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

POOLED = bool(connection.settings_dict["OPTIONS"].get("pool"))
per_thread = pytest.mark.skipif(
    POOLED, reason="?pool=1: the pool holds the connections (the test_pooled_… tests below)"
)
pooled = pytest.mark.skipif(not POOLED, reason="needs ?pool=1 on DATABASE_URL (.ci/run runs it)")


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


@per_thread
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


@per_thread
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
@per_thread
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


@pytest.fixture
def backends():
    """The server pids of the connections the requests used, taken while each request ran (with
    the pool a connection goes back to it before the request's end)."""
    pids: list[int] = []

    def on_created(sender, connection, **kwargs):
        pids.append(connection.connection.info.backend_pid)

    connection_created.connect(on_created)
    yield pids
    connection_created.disconnect(on_created)
    django_asgi_app.retire_all()


@pytest.mark.scale
@pooled
def test_pooled_connections_are_taken_and_given_back_per_request(key, backends):
    _run(_get("/reviewer/v1/artifacts", key))
    for _ in range(10):
        _run(_get("/reviewer/v1/artifacts", key))
    # Each request took a connection from the pool and gave it back: the eleven reused the
    # pool's few, they did not open eleven.
    assert len(backends) == 11
    assert len(set(backends)) <= 2
    pool = connection.pool
    assert pool.get_stats()["pool_size"] <= pool.max_size


@pytest.mark.scale
@pooled
def test_pooled_connections_are_bounded_by_the_pool_size_under_concurrent_requests(key, backends):
    pool = connection.pool
    sizes: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            sizes.append(pool.get_stats()["pool_size"])
            stop.wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:

        async def concurrent():
            # More requests in flight than the pool holds: the rest wait for a free connection.
            many = 3 * pool.max_size
            for _ in range(2):
                await asyncio.gather(*(_get("/reviewer/v1/artifacts", key) for _ in range(many)))

        _run(concurrent())  # every one answered 200 (_get asserts it)
    finally:
        stop.set()
        watcher.join(10)
    assert len(backends) == 6 * pool.max_size
    assert len(set(backends)) <= pool.max_size
    assert max(sizes) <= pool.max_size


@pytest.mark.scale
@pooled
def test_pooled_connection_terminated_underneath_is_replaced_without_an_error(key, backends):
    _run(_get("/reviewer/v1/artifacts", key))
    pids = set(backends)
    with connection.cursor() as cursor:
        mine = connection.connection.info.backend_pid  # this thread's, taken from the pool too
        for pid in pids - {mine}:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            assert cursor.fetchone()[0] is True
    connection.close()  # give this thread's back, so that the requests may be handed it
    for _ in range(5):
        _run(_get("/reviewer/v1/artifacts", key))  # 200 each: the pool's check replaced it
    assert not (set(backends[len(pids) :]) & (pids - {mine}))
