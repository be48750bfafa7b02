"""``subscribe``: an event stream as an async iterator that reconnects by itself with ``after``.

    async for event in subscribe("ws://host/reviewer/v1/events", token, after=0):
        ...

Each item is a message dict (API.md "Events"): ``artifact.tagged``, ``artifact.deleted``, and
``replay.truncated`` when the asked ``after`` is older than the stored events. The iterator keeps the
last ``seq`` it yielded; when the connection drops or cannot be made (network, server restart, a 5xx
at the handshake, or 4429 because this client read too slowly) it reconnects with ``?after=<that seq>``, so nothing is missed or repeated.
Refusals (4400, 4401, 4403, 4404, and 4408: too many failed authentications from this address) are
final: ``StreamRefused`` with the code and the reason.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:  # websockets >= 13
    from websockets.asyncio.client import connect as _connect

    _HEADERS = "additional_headers"
except ImportError:  # pragma: no cover - websockets 12
    from websockets import connect as _connect  # type: ignore[no-redef,unused-ignore]

    _HEADERS = "extra_headers"
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus

# 4408 comes only with bad credentials past the server's limit: retrying would only extend it.
FINAL = {4400, 4401, 4403, 4404, 4408}


class StreamRefused(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def with_after(url: str, after: int | None) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "after"]
    if after is not None:
        query.append(("after", str(after)))
    return urlunsplit(parts._replace(query=urlencode(query)))


async def subscribe(
    url: str,
    token: str | None,
    after: int | None = None,
    *,
    max_backoff: float = 5.0,
    max_size: int | None = 2**24,
) -> AsyncIterator[dict[str, Any]]:
    """Yield the stream's messages forever, reconnecting with ``after`` (see the module doc)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # The headers' keyword differs between websockets versions (see the import above).
    options: dict[str, Any] = {"max_size": max_size, _HEADERS: headers}
    backoff = 0.1
    while True:
        try:
            async with _connect(with_after(url, after), **options) as ws:
                async for raw in ws:
                    message = json.loads(raw)
                    seq = message.get("seq")
                    if isinstance(seq, int):
                        if after is not None and seq <= after:
                            continue
                        after = seq
                    backoff = 0.1
                    yield message
                code = ws.close_code
                reason = ws.close_reason or ""
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
            reason = closed.rcvd.reason if closed.rcvd else ""
        except (TimeoutError, OSError, InvalidMessage):
            # InvalidMessage: the connection closed during the handshake, as a server does while
            # it starts or stops; as passing as a refused connection.
            code, reason = None, ""
        except InvalidStatus as status:
            # A 5xx at the handshake (a proxy whose server is restarting) passes too; any other
            # status is the server's answer and goes to the caller.
            if status.response.status_code < 500:
                raise
            code, reason = None, ""
        if code in FINAL:
            raise StreamRefused(code, reason or "")
        await asyncio.sleep(backoff if code != 4429 else 0)
        backoff = min(backoff * 2, max_backoff)
