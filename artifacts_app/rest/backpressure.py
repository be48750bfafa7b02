"""Flow control for streamed responses under daphne (DESIGN.md §4).

Daphne hands every ``http.response.body`` message straight to Twisted, which buffers whatever the
client has not read yet: streaming a 256 MiB blob to a slower client would grow the server by up
to the whole blob, async generator or not. This ASGI wrapper waits, after each body chunk, until
the connection's send buffer is back under ``HIGH_WATER`` bytes, so a download costs the server a
bounded amount of memory whatever the blob's size. Under servers it does not recognise (uvicorn,
the test client) it does nothing: they apply their own flow control or none is needed.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

HIGH_WATER = 2 * 1024 * 1024
POLL_SECONDS = 0.002


def _daphne_transport(send: Any) -> tuple[Any, Any] | None:
    """(request protocol, twisted transport) behind daphne's ``send``, or None elsewhere."""
    if not isinstance(send, functools.partial) or not send.args:
        return None
    protocol = send.args[0]
    transport = getattr(getattr(protocol, "channel", None), "transport", None)
    if transport is None or not hasattr(transport, "dataBuffer"):
        return None
    return protocol, transport


def _buffered(transport: Any) -> int:
    return (
        len(transport.dataBuffer)
        - getattr(transport, "offset", 0)
        + getattr(transport, "_tempDataLen", 0)
    )


class BackpressureMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        found = _daphne_transport(send) if scope.get("type") == "http" else None
        if found is None:
            return await self.app(scope, receive, send)
        protocol, transport = found

        async def paced_send(message: dict) -> None:
            await send(message)
            if message.get("type") != "http.response.body" or not message.get("more_body"):
                return
            while (
                _buffered(transport) > HIGH_WATER
                and not protocol.finished
                and protocol.channel is not None
                and not getattr(transport, "disconnected", False)
            ):
                await asyncio.sleep(POLL_SECONDS)

        return await self.app(scope, receive, paced_send)
