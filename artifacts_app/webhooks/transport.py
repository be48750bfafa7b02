"""Sending one delivery: HTTP/1.1 over httpcore's public doors, to vetted addresses only.

httpcore's ``ConnectionPool`` takes a ``NetworkBackend``: ours (``VettedBackend``) resolves the
host itself at every new connection, asks ``targets.address_problem`` of each address, and
connects to an allowed one by its IP; TLS is then started by httpcore with the URL's host as the
server name (SNI and certificate check) and the ``Host`` header is the URL's. So the address
connected to is the address checked — a name rebound to an inside address between the check and
the connection cannot slip through. The streams it returns hold every read and write to the
delivery's deadline (``ARTIFACTS_WEBHOOK_TIMEOUT`` all told, not per read), redirects are never
followed (httpcore does not), and at most ``ANSWER_LIMIT`` bytes of the answer are read.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpcore

from artifacts_app.webhooks import targets

ANSWER_LIMIT = 4096
_deadline = threading.local()


class AddressRefused(Exception):
    """No address of the host may be connected to; the message says why."""


def _left(timeout: float | None) -> float:
    deadline = getattr(_deadline, "at", None)
    if deadline is None:
        return timeout if timeout is not None else 30.0
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the delivery's time ran out")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self.stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.stream.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.stream.write(buffer, _left(timeout))

    def close(self) -> None:
        self.stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self.stream.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self.stream.get_extra_info(info)


class VettedBackend(httpcore.NetworkBackend):
    """Connects only to addresses the address rule allows, found by resolving the host here."""

    def __init__(self) -> None:
        self.base = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            literal: targets.IPAddress | None = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        target = targets.Target(url="", scheme="", host=host, port=port, ip=literal)
        try:
            allowed, refused = targets.vetted(target)
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} does not resolve: {exc}") from None
        if not allowed:
            raise AddressRefused(
                f"{host} leads to no address deliveries may reach: " + "; ".join(refused)
            )
        error: Exception | None = None
        for address in allowed:
            try:
                stream = self.base.connect_tcp(
                    str(address), port, _left(timeout), local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            return _DeadlineStream(stream)
        assert error is not None
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise AddressRefused("webhooks never connect to a unix socket")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass(frozen=True)
class Answer:
    """What came of one attempt: the HTTP status (None when there was no answer) or the error."""

    status: int | None
    error: str
    duration_ms: int

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Sender:
    """A thread's connection pools, one per webhook (so that two webhooks never share a
    connection), the least recently used closed past ``POOLS``."""

    POOLS = 64

    def __init__(self) -> None:
        self.pools: OrderedDict[str, httpcore.ConnectionPool] = OrderedDict()
        self.backend = VettedBackend()

    def pool(self, key: str) -> httpcore.ConnectionPool:
        pool = self.pools.pop(key, None)
        if pool is None:
            pool = httpcore.ConnectionPool(
                network_backend=self.backend,
                max_connections=2,
                keepalive_expiry=30.0,
                retries=0,
            )
        self.pools[key] = pool
        while len(self.pools) > self.POOLS:
            _, old = self.pools.popitem(last=False)
            old.close()
        return pool

    def forget(self, key: str) -> None:
        pool = self.pools.pop(key, None)
        if pool is not None:
            pool.close()

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()
        self.pools.clear()

    def post(
        self, key: str, url: str, body: bytes, headers: list[tuple[str, str]], timeout: float
    ) -> Answer:
        """POST ``body`` to ``url``; never raises for what the receiver or the network does."""
        started = time.monotonic()
        _deadline.at = started + timeout
        status: int | None = None
        error = ""
        try:
            with self.pool(key).stream(
                "POST",
                url,
                headers=[(k.encode(), v.encode()) for k, v in headers],
                content=body,
                extensions={
                    "timeout": {
                        "connect": timeout,
                        "read": timeout,
                        "write": timeout,
                        "pool": timeout,
                    }
                },
            ) as response:
                status = response.status
                read = 0
                for chunk in response.iter_stream():
                    read += len(chunk)
                    if read >= ANSWER_LIMIT:
                        break  # the rest is not read; the connection is closed, not reused
        except AddressRefused as exc:
            error = str(exc)
        except httpcore.TimeoutException:
            error = f"no answer within {timeout:g} s"
        except (httpcore.NetworkError, httpcore.ProtocolError, OSError, ssl.SSLError) as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        except httpcore.UnsupportedProtocol as exc:
            error = f"unsupported URL: {exc}"
        except Exception as exc:  # whatever else a receiver makes happen is this attempt's error
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        finally:
            _deadline.at = None
        if error and status is not None:
            error = f"the answer's body failed: {error}"
        return Answer(status, error[:500], int((time.monotonic() - started) * 1000))


def host_of(address: str) -> str:
    """For messages: an address as a host name would be written."""
    try:
        socket.inet_pton(socket.AF_INET6, address)
    except OSError:
        return address
    return f"[{address}]"
