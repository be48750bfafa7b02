"""Real faults for the fault tests, each bounded in time and undone at the end:

- ``silent_port``: a TCP listener that accepts connections and never answers (a stalled database);
- ``closed_port``: a port nothing listens on (a database that refuses);
- ``small_disk``: a real tmpfs of a few MiB, mounted for the test (root: ``mount -t tmpfs``);
- ``readonly_dir``: a read-only directory — a tmpfs remounted read-only as root (root ignores
  permission bits), a ``chmod 555`` directory otherwise;
- ``own_redis``: a ``redis-server`` of the test's own on a free port, to stop and restart (never the
  shared one);
- ``stalling_proxy``: a TCP proxy of the test's own in front of a real server (PostgreSQL, S3) that
  stops forwarding on demand — what a stopped server looks like from the client, since the proxy's
  kernel still acknowledges every byte (the machine's shared PostgreSQL is never stopped).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.servers import HOST, free_port

# /healthz tells each dependency's state only to staff or this token (ARTIFACTS_HEALTH_TOKEN): set
# for every test here, in the settings and in the environment that the servers they start inherit.
HEALTH_TOKEN = "faults-health-token-0123456789abcdef"
HEALTH = {"Authorization": f"Bearer {HEALTH_TOKEN}"}


@pytest.fixture(autouse=True)
def _health_token(settings, monkeypatch):
    settings.ARTIFACTS_HEALTH_TOKEN = HEALTH_TOKEN
    monkeypatch.setenv("ARTIFACTS_HEALTH_TOKEN", HEALTH_TOKEN)


@pytest.fixture
def silent_port() -> Iterator[int]:
    server = socket.socket()
    server.bind((HOST, 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # accepted, never read, never answered

    thread = threading.Thread(target=accept, name="silent-listener", daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture
def closed_port() -> int:
    return free_port()


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(path)],
        capture_output=True,
        timeout=10,
    )
    return done.returncode == 0


def _umount(path: Path) -> None:
    # Lazy: a process that still holds a file there (a killed server's child) cannot pin it.
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=10)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted at a fresh directory, unmounted afterwards."""
    path = tmp_path / "small-disk"
    path.mkdir()
    if not _mount_tmpfs(path, "4m"):
        pytest.skip("mounting a tmpfs needs root and mount(8); this run has neither")
    try:
        yield path
    finally:
        _umount(path)


def fill(path: Path) -> int:
    """Write into ``path`` until the disk refuses (ENOSPC); answers the bytes written."""
    written = 0
    with open(path / "filler", "wb", buffering=0) as fh:
        block = b"\0" * 65536
        while True:
            try:
                written += fh.write(block)
            except OSError:
                break
    for size in (4096, 512, 1):  # the last blocks too: not one byte more fits
        try:
            with open(path / f"filler-{size}", "wb", buffering=0) as fh:
                while True:
                    written += fh.write(b"\0" * size)
        except OSError:
            pass
    return written


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory with ``blobs/.incoming`` and ``tmp`` inside it, then made read-only."""
    path = tmp_path / "readonly"
    path.mkdir()
    mounted = _mount_tmpfs(path, "1m")
    for sub in ("blobs/.incoming", "tmp"):
        (path / sub).mkdir(parents=True)
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True, timeout=10)
    else:
        for sub in ("blobs/.incoming", "blobs", "tmp", "."):
            (path / sub).chmod(0o555)
    try:
        yield path
    finally:
        if mounted:
            _umount(path)
        else:
            for sub in (".", "blobs", "blobs/.incoming", "tmp"):
                (path / sub).chmod(0o755)


class OwnRedis:
    """A redis-server of the test's own: no persistence, so a restart forgets everything (as a
    restarted cache does), on the same port."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self) -> None:
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed"
        self.process = subprocess.Popen(
            [exe, "--bind", HOST, "--port", str(self.port), "--save", "", "--appendonly", "no"]
            + ["--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    redis = OwnRedis(tmp_path)
    redis.start()
    try:
        yield redis
    finally:
        redis.kill()


class StallingProxy:
    """Forwards TCP connections to ``target`` both ways until ``stall()``; from then on it reads and
    holds what either side sends (each byte is acknowledged, nothing arrives) until ``resume()``.
    New connections are accepted while stalled, and held the same way."""

    def __init__(self, target_port: int, target_host: str = HOST) -> None:
        self.target = (target_host, target_port)
        self.loop = asyncio.new_event_loop()
        self.flowing: asyncio.Event | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        if not ready.wait(10):
            raise RuntimeError("the proxy did not start")

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.flowing = asyncio.Event()
            self.flowing.set()
            self.server = await asyncio.start_server(self._serve, HOST, 0)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers.append(up_writer)
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        assert self.flowing is not None
        try:
            while data := await source.read(65536):
                await self.flowing.wait()
                sink.write(data)
                await sink.drain()
        finally:
            sink.close()

    def stall(self) -> None:
        assert self.flowing is not None
        self.loop.call_soon_threadsafe(self.flowing.clear)

    def resume(self) -> None:
        assert self.flowing is not None
        self.loop.call_soon_threadsafe(self.flowing.set)

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            for writer in self.writers:
                writer.close()

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def stalling_proxy() -> Iterator[Callable[[int], StallingProxy]]:
    """``stalling_proxy(port)``: a ``StallingProxy`` to 127.0.0.1:port, closed at the end."""
    made: list[StallingProxy] = []

    def make(port: int) -> StallingProxy:
        made.append(StallingProxy(port))
        return made[-1]

    yield make
    for proxy in made:
        proxy.close()
