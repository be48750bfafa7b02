"""One road for every request body through a real daphne (agent_site/server.py, agent_site/body.py):
an ``Upgrade`` header changes nothing, a body is bounded in time and in number, a request waiting
for its body holds no database connection, and what Twisted's parser refuses is answered with the
envelope (400, 414, 431) instead of a closed connection.

Each test starts its own server on the suite's database: PostgreSQL (with S3) on the scale profile,
a migrated SQLite data dir otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest
from django.db import connection

from tests.rest.test_uploads import _peak_rss, _read_response, _reset_peak
from tests.servers import HOST, ROOT, DaphneServer, wait_for

MIB = 1024 * 1024
SLUG = "reviewer"


def _base_env(data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "test-" + "k" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "ARTIFACTS_DATA_DIR": str(data_dir),
    }


@pytest.fixture(scope="module")
def sqlite_site(tmp_path_factory):
    """A migrated SQLite data dir of its own and an agent key of ``reviewer`` (default profile)."""
    data_dir = tmp_path_factory.mktemp("road")
    env = {**_base_env(data_dir), "DATABASE_URL": "", "REDIS_URL": "", "ARTIFACTS_STORAGE": ""}
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    made = subprocess.run(
        [*manage, "create_agent_key", SLUG],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return env, made.stdout.strip().splitlines()[-1], data_dir


@pytest.fixture
def site(request, tmp_path, transactional_db):
    """(the servers' environment, an agent key of ``reviewer``, where to count the servers'
    database connections): the suite's PostgreSQL test database (and S3) on the scale profile,
    ``sqlite_site`` otherwise."""
    if connection.vendor != "postgresql":
        return request.getfixturevalue("sqlite_site")
    # transactional_db: what is made here is committed, so the server's connections see it.
    from artifacts_app import services
    from artifacts_app.models import Agent

    conf = connection.settings_dict
    app = f"road-{uuid.uuid4().hex[:12]}"  # the servers' connections, by name
    url = f"postgres://{conf['USER']}@{conf['HOST']}:{conf['PORT'] or 5432}/{conf['NAME']}"
    env = {
        **_base_env(tmp_path),
        "DATABASE_URL": f"{url}?application_name={app}",
        "ARTIFACTS_S3_PREFIX": f"road-{uuid.uuid4().hex}",
    }
    agent = Agent.objects.get_or_create(
        slug=SLUG, defaults={"module": "agent_site.agents.reviewer"}
    )[0]
    return env, services.agent_key_create(agent=agent)[1], app


@contextlib.contextmanager
def serve(site, **settings: str):
    env, _, _ = site
    log = Path(env["ARTIFACTS_DATA_DIR"]) / f"daphne-{uuid.uuid4().hex[:8]}.log"
    with DaphneServer({**env, **settings}, log_path=log) as server:
        yield server


def _connect(server: DaphneServer) -> socket.socket:
    return socket.create_connection((HOST, server.port), timeout=30)


def _head(method: str, path: str, *headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}", *headers, "", ""]
    return "\r\n".join(lines).encode()


def _answer(sock: socket.socket, *, kept: bool = False) -> tuple[int, dict[str, str], dict]:
    """One whole response: its status, headers (lower-case names) and JSON body; ``kept``: on a
    connection that stays open (else what came before a reset counts too)."""
    raw = _read_response(sock, until_reset=not kept)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in lines[1:])
    )
    return int(lines[0].split(" ", 2)[1]), headers, orjson.loads(body) if body else {}


def _closed_after(sock: socket.socket) -> bool:
    """Whether the server ends the connection (EOF or reset) once it has answered."""
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, TimeoutError):
        return True


BOUNDARY = "roadroadroad"


def _multipart_start(key: str = "slow") -> bytes:
    record = orjson.dumps({"kind": "report", "key": key, "data": {}})
    return (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="record"\r\n\r\n'.encode()
        + record
        + f"\r\n--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="contents"; filename="c.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
    )


def _multipart_end() -> bytes:
    return f"\r\n--{BOUNDARY}--\r\n".encode()


def _tag_head(length: int, token: str | None, *extra: str) -> bytes:
    auth = [f"Authorization: Bearer {token}"] if token else []
    return _head(
        "POST",
        f"/{SLUG}/v1/artifacts",
        *auth,
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
        f"Content-Length: {length}",
        *extra,
    )


# --- the Upgrade header -------------------------------------------------------------------------


def test_an_upgrade_header_does_not_hold_unauthenticated_bodies_in_memory(site):
    """Four concurrent unauthenticated 110 MiB bodies with ``Upgrade: x``: each answered 401 at its
    headers, its body read and dropped; the server's peak memory stays flat (it grew by 348 MiB
    when the header turned streaming off and the bodies were held whole)."""
    body = memoryview(b"u" * (110 * MIB))
    with serve(site) as server:
        pid = server.process.pid
        with _connect(server) as warm:  # first-use imports are not counted
            warm.sendall(_tag_head(10, None, "Upgrade: x") + b"x" * 10)
            assert _answer(warm)[0] == 401
        before = _reset_peak(pid)
        answers: list[tuple[int, str]] = []

        def send() -> None:
            with _connect(server) as sock:
                sock.sendall(_tag_head(len(body), None, "Upgrade: x", "Connection: Upgrade"))
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    for start in range(0, len(body), MIB):
                        sock.sendall(body[start : start + MIB])
                status, _, envelope = _answer(sock)
                answers.append((status, envelope["error"]["code"]))

        senders = [threading.Thread(target=send) for _ in range(4)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(120)
        growth = _peak_rss(pid) - before
    assert answers == [(401, "not_authenticated")] * 4
    assert growth < 32 * MIB, f"the server grew by {growth / MIB:.1f} MiB"


def test_an_upgrade_header_streams_a_body_under_the_same_limit(site):
    """With ``Upgrade: x`` an authenticated body is streamed and stored like any other, and one
    past the limit is refused with 413 on its Content-Length, before a byte of it is read."""
    _, key, _ = site
    contents = os.urandom(3 * MIB)
    body = _multipart_start("upgraded") + contents + _multipart_end()
    with serve(site, ARTIFACTS_MAX_CONTENT_BYTES=str(8 * MIB)) as server:
        with _connect(server) as sock:
            sock.sendall(_tag_head(len(body), key, "Upgrade: x") + body)
            status, _, record = _answer(sock)
        assert status == 201, record
        assert record["content"]["sha256"] == hashlib.sha256(contents).hexdigest()

        with _connect(server) as sock:
            sock.sendall(_tag_head(8 * MIB + 12 * MIB, key, "Upgrade: x"))
            status, _, refused = _answer(sock)
        assert (status, refused["error"]["code"]) == (413, "content_too_large")


def test_a_websocket_handshake_with_a_body_is_refused_unread(site):
    """Daphne hands an ``Upgrade: websocket`` request to the websocket protocol with its whole body;
    a handshake never has one (a GET without a body), so such a request is refused at its headers."""
    with serve(site) as server:
        for extra in ("Content-Length: 104857600", "Transfer-Encoding: chunked"):
            with _connect(server) as sock:
                sock.sendall(
                    _head(
                        "POST",
                        f"/{SLUG}/v1/sessions/s/events",
                        "Upgrade: websocket",
                        "Connection: Upgrade",
                        "Sec-WebSocket-Version: 13",
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                        extra,
                    )
                )
                status, _, refused = _answer(sock)
            assert (status, refused["error"]["code"]) == (400, "malformed_request"), refused


# --- slow bodies ---------------------------------------------------------------------------------


def test_a_trickled_body_is_cut_at_the_deadline(site):
    """One byte every 0.3 s never trips the idle bound (30 s), but the whole body must be in
    ARTIFACTS_BODY_DEADLINE_SECONDS after its headers: 408 `body_timeout`, streamed or not."""
    _, key, _ = site
    with serve(site, ARTIFACTS_BODY_DEADLINE_SECONDS="2") as server:
        for length in (4 * MIB, 5000):  # streamed to a view; held by the door (under 100 KB)
            with _connect(server) as sock:
                sock.sendall(_tag_head(length, key) + _multipart_start())
                start = time.monotonic()
                sock.settimeout(0.3)
                answer = b""
                while not answer and time.monotonic() - start < 20:
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        sock.sendall(b"t")
                    with contextlib.suppress(TimeoutError):
                        answer = sock.recv(65536, socket.MSG_PEEK)
                took = time.monotonic() - start
                sock.settimeout(30)
                status, _, refused = _answer(sock)
            assert (status, refused["error"]["code"]) == (408, "body_timeout"), refused
            assert refused["error"]["details"] == {"seconds": 2}
            assert 2 <= took < 15, took  # the deadline, not the idle bound (30 s)
        # The server serves on.
        with _connect(server) as sock:
            sock.sendall(_head("GET", "/healthz"))
            assert _answer(sock)[0] == 200


def test_bodies_past_the_stream_cap_are_answered_busy(site):
    """ARTIFACTS_MAX_BODY_STREAMS=2: two bodies streaming, a third is refused at its headers with
    503 `busy` and Retry-After, unread; once one of the two ends, the next is taken."""
    _, key, _ = site
    with serve(site, ARTIFACTS_MAX_BODY_STREAMS="2") as server:
        slow = [_connect(server) for _ in range(2)]
        try:
            for n, sock in enumerate(slow):
                sock.sendall(_tag_head(2 * MIB, key) + _multipart_start(f"slow-{n}"))
            time.sleep(0.5)  # both taken at their headers
            with _connect(server) as sock:
                sock.sendall(_tag_head(2 * MIB, key) + _multipart_start("third"))
                status, headers, refused = _answer(sock)
                assert _closed_after(sock)
            assert (status, refused["error"]["code"]) == (503, "busy"), refused
            assert refused["error"]["details"] == {"streams": 2}
            assert int(headers["retry-after"]) > 0

            # One of the two finishes: its slot is free again.
            rest = 2 * MIB - len(_multipart_start("slow-0")) - len(_multipart_end())
            slow[0].sendall(b"r" * rest + _multipart_end())
            assert _answer(slow[0])[0] == 201
            contents = os.urandom(MIB)
            body = _multipart_start("after") + contents + _multipart_end()
            with _connect(server) as sock:
                sock.sendall(_tag_head(len(body), key) + body)
                status, _, record = _answer(sock)
            assert status == 201, record
            assert record["content"]["sha256"] == hashlib.sha256(contents).hexdigest()
        finally:
            for sock in slow:
                sock.close()
        # A client gone mid-body frees its slot too.
        wait_for(lambda: _takes_a_stream(server, key), "a slot freed by the clients gone")


def _takes_a_stream(server: DaphneServer, key: str) -> bool:
    with _connect(server) as a, _connect(server) as b:
        a.sendall(_tag_head(2 * MIB, key) + _multipart_start("a"))
        b.sendall(_tag_head(2 * MIB, key) + _multipart_start("b"))
        b.settimeout(0.5)
        try:
            b.recv(1, socket.MSG_PEEK)  # an answer before the body: refused
        except TimeoutError:
            return True  # both wait for their bodies: two slots
        return False


def _database_connections(site, server: DaphneServer) -> int:
    """The server's open database connections: PostgreSQL's backends with its application_name,
    or its file descriptors on the SQLite database file."""
    _, _, where = site
    if isinstance(where, str):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [where]
            )
            return cursor.fetchone()[0]
    database = {p.resolve() for p in Path(where).glob("*.sqlite3")}
    fds = Path(f"/proc/{server.process.pid}/fd")
    found = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            found += Path(os.readlink(fd)) in database
    return found


def test_a_request_waiting_for_its_body_holds_no_database_connection(site):
    """Six authenticated bodies that stop after their first bytes: each request looked its key up
    (a connection on its thread) and waits for the rest; none holds a connection meanwhile
    (20 such clients held 17 PostgreSQL connections). Sent whole, each is then stored."""
    _, key, _ = site
    with serve(site) as server:
        idle = _database_connections(site, server)
        waiting = [_connect(server) for _ in range(6)]
        try:
            for n, sock in enumerate(waiting):
                sock.sendall(_tag_head(MIB, key) + _multipart_start(f"wait-{n}") + b"w" * 1000)
            time.sleep(2)  # long enough to authenticate, look the agent up and wait
            held = _database_connections(site, server)
            assert held <= idle, (idle, held)
            rest = MIB - len(_multipart_start("wait-0")) - 1000 - len(_multipart_end())
            for sock in waiting:
                sock.sendall(b"w" * rest + _multipart_end())
            assert [_answer(sock)[0] for sock in waiting] == [201] * 6
        finally:
            for sock in waiting:
                sock.close()


# --- framing ---------------------------------------------------------------------------------------


def test_chunked_plus_a_second_transfer_encoding_is_refused(site):
    """``Transfer-Encoding: chunked`` plus ``Transfer-Encoding: identity`` was taken as chunked (a
    proxy honouring the last header frames the body otherwise: a desync); refused with 400, as is
    an encoding other than chunked, and the connection ends."""
    _, key, _ = site
    body = b'{"kind": "report", "key": "te", "data": {}}'
    chunked = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    with serve(site) as server:
        for encodings in (
            ("Transfer-Encoding: chunked", "Transfer-Encoding: identity"),
            ("Transfer-Encoding: identity", "Transfer-Encoding: chunked"),
            ("Transfer-Encoding: identity", f"Content-Length: {len(chunked)}"),
            ("Transfer-Encoding: chunked, identity",),
        ):
            with _connect(server) as sock:
                sock.sendall(
                    _head(
                        "POST",
                        f"/{SLUG}/v1/artifacts",
                        f"Authorization: Bearer {key}",
                        "Content-Type: application/json",
                        *encodings,
                    )
                    + chunked
                )
                status, _, refused = _answer(sock)
                assert _closed_after(sock)
            assert (status, refused["error"]["code"]) == (400, "malformed_request"), encodings
        # Chunks that are not well framed, the view already reading: the envelope too.
        with _connect(server) as sock:
            sock.sendall(
                _tag_head(0, key, "Transfer-Encoding: chunked").replace(
                    b"Content-Length: 0\r\n", b""
                )
                + b"%x\r\n" % 1000
                + b"c" * 1000
                + b"\r\nzz\r\n"
            )
            status, _, refused = _answer(sock)
            assert _closed_after(sock)
        assert (status, refused["error"]["code"]) == (400, "malformed_request"), refused
        # One chunked encoding is taken; nothing of the refused ones was stored.
        with _connect(server) as sock:
            sock.sendall(
                _head(
                    "POST",
                    f"/{SLUG}/v1/artifacts",
                    f"Authorization: Bearer {key}",
                    "Content-Type: application/json",
                    "Transfer-Encoding: chunked",
                )
                + chunked
            )
            status, _, record = _answer(sock)
        assert status == 201, record  # a new record: none of the refused bodies was stored


def test_a_header_block_past_16_kib_answers_431(site):
    with serve(site) as server:
        many = [f"X-Filler-{n}: {'f' * 1000}" for n in range(20)]
        for headers in (many, [f"X-Long: {'l' * 20_000}"]):
            with _connect(server) as sock:
                sock.sendall(_head("GET", "/healthz", *headers))
                status, _, refused = _answer(sock)
                assert _closed_after(sock)
            assert (status, refused["error"]["code"]) == (431, "headers_too_large")
            assert refused["error"]["details"] == {"limit": 16384}


def test_a_70_kb_request_line_answers_414(site):
    with serve(site) as server:
        with _connect(server) as sock:
            sock.sendall(_head("GET", "/healthz?q=" + "q" * 70_000))
            status, _, refused = _answer(sock)
            assert _closed_after(sock)
        assert (status, refused["error"]["code"]) == (414, "uri_too_long")
        # A malformed request line: the envelope too, not a bare 400.
        with _connect(server) as sock:
            sock.sendall(b"NOT-HTTP\r\n\r\n")
            status, _, refused = _answer(sock)
        assert (status, refused["error"]["code"]) == (400, "malformed_request")
        # Daphne's own refusal (a path that is not ASCII): the envelope, not its HTML page.
        with _connect(server) as sock:
            sock.sendall(b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers, refused = _answer(sock)
        assert (status, refused["error"]["code"]) == (400, "malformed_request")
        assert headers["content-type"] == "application/json"
        with _connect(server) as sock:  # and the server serves on
            sock.sendall(_head("GET", "/healthz"))
            assert _answer(sock)[0] == 200


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"ARTIFACTS_BODY_DEADLINE_SECONDS": "0"}, "ARTIFACTS_BODY_DEADLINE_SECONDS must be at"),
        ({"ARTIFACTS_BODY_DEADLINE_SECONDS": "5m"}, "ARTIFACTS_BODY_DEADLINE_SECONDS must be a"),
        ({"ARTIFACTS_MAX_BODY_STREAMS": "0"}, "ARTIFACTS_MAX_BODY_STREAMS must be at least 1"),
        ({"ARTIFACTS_MAX_BODY_STREAMS": "many"}, "ARTIFACTS_MAX_BODY_STREAMS must be a whole"),
    ],
)
def test_the_body_bounds_refuse_bad_settings_at_start(env, fragment):
    from tests.settings.test_profiles import settings_with

    proc = settings_with(**env)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and fragment in proc.stderr


# --- a kept-alive connection after a paused body -----------------------------------------------


def test_a_websocket_upgrade_after_a_paused_body_on_the_same_connection(site):
    """A large body pauses the socket (``agent_site.body``'s high water) and the request's thread
    resumes it; what the socket brings next — here a websocket handshake on the same kept-alive
    connection — is served in a context of its own, not in the finished request's (whose
    ``ThreadSensitiveContext`` has exited: the handshake's user lookup failed with a 500)."""
    _, token, _ = site
    auth = f"Authorization: Bearer {token}"
    with serve(site) as server, _connect(server) as sock:
        record = orjson.dumps({"kind": "report", "key": "kept-alive", "data": {}})
        sock.sendall(
            _head(
                "POST",
                f"/{SLUG}/v1/artifacts",
                auth,
                "Content-Type: application/json",
                f"Content-Length: {len(record)}",
            )
            + record
        )
        status, _, tagged = _answer(sock, kept=True)
        assert status == 201, tagged
        sock.sendall(
            _head(
                "PUT",
                f"/{SLUG}/v1/artifacts/{tagged['id']}/content",
                auth,
                "Content-Type: application/octet-stream",
                "Transfer-Encoding: chunked",
            )
        )
        block = os.urandom(MIB)
        for _ in range(48):  # far past the high water: the socket is paused and resumed
            sock.sendall(f"{len(block):x}\r\n".encode() + block + b"\r\n")
        sock.sendall(b"0\r\n\r\n")
        status, _, stored = _answer(sock, kept=True)
        assert status == 200, stored
        sock.sendall(_handshake(auth))
        assert _switched(sock)
    assert "ThreadSensitiveContext" not in server.output(), server.output()


def _handshake(auth: str) -> bytes:
    return _head(
        "GET",
        f"/{SLUG}/v1/events",
        auth,
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    )


def _switched(sock: socket.socket) -> bool:
    """Whether the server answers the handshake with 101 (its head read whole)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        data = sock.recv(65536)
        assert data, answer
        answer += data
    assert answer.startswith(b"HTTP/1.1 101"), answer[:200]
    return True


def test_a_websocket_upgrade_pipelined_behind_a_request(site):
    """A handshake sent right behind a request, before its answer: Twisted holds it until the
    request is done and takes it from there (inside the finished request's send); it still
    starts in a context of its own."""
    _, token, _ = site
    auth = f"Authorization: Bearer {token}"
    record = orjson.dumps({"kind": "report", "key": "pipelined", "data": {}})
    tag = _head(
        "POST",
        f"/{SLUG}/v1/artifacts",
        auth,
        "Content-Type: application/json",
        f"Content-Length: {len(record)}",
    )
    with serve(site) as server, _connect(server) as sock:
        sock.sendall(tag + record + _handshake(auth))
        # Both answers, in order (they may come in one read): the tag's, then the switch.
        answers = b""
        while b"\r\n\r\n" not in answers.partition(b"HTTP/1.1 101")[2] and len(answers) < 65536:
            data = sock.recv(65536)
            assert data, answers
            answers += data
        assert answers.startswith(b"HTTP/1.1 201"), answers[:200]
        assert b"HTTP/1.1 101 " in answers, answers[:400]
    assert "ThreadSensitiveContext" not in server.output(), server.output()
