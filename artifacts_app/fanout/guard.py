"""The credentials watch of a ``Hub``: open streams whose credentials no longer hold are ended.

A revocation is a database write, made by any process (the admin, a REST call, ``manage.py
revoke_token``). The database is the one place every writer reaches, so each hub asks it again,
every ``ARTIFACTS_STREAM_RECHECK_MS``, for the credentials of every stream it holds, in one
statement (``selectors.credentials_state``) whatever the number of streams; with no stream open it
asks nothing (its task ends and the next stream starts it again). Each guarded stream judges the
answer itself (``recheck``: consumers and the MCP watch ask ``access``, the one rule) and ends
itself if it must. A database that does not answer ends nothing: the next look asks again.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from artifacts_app import selectors

log = logging.getLogger(__name__)


class Guarded(Protocol):
    """An open stream whose credentials the hub asks about again."""

    @property
    def credentials(self) -> selectors.Credentials: ...

    def recheck(self, state: selectors.CredentialsState) -> None:
        """Given the credentials' state now, end the stream if it may no longer stay open.
        Called on the hub's loop; must not block."""


class Closing(Protocol):
    """What the watch needs of a hub (``fanout.hub.Hub``), named here so that this module does not
    import the hub that imports it."""

    @property
    def closing(self) -> bool: ...


def interval() -> float:
    return float(getattr(settings, "ARTIFACTS_STREAM_RECHECK", 0.5))


class CredentialsWatch:
    """A hub's guarded streams, what was asked about them last, and the task that asks again."""

    def __init__(
        self, hub: Closing, loop: asyncio.AbstractEventLoop, context: contextvars.Context
    ) -> None:
        self.hub = hub
        self.loop = loop
        self.context = context  # the task's: none of the first caller's contextvars
        self.streams: set[Guarded] = set()
        self.seen: tuple[frozenset[selectors.Credentials], selectors.CredentialsState] | None = None
        self.task: asyncio.Task[None] | None = None

    def add(self, stream: Guarded) -> None:
        self.streams.add(stream)
        if self.task is None and not self.hub.closing:
            self.task = self.loop.create_task(self.guard_forever(), context=self.context.copy())

    def discard(self, stream: Guarded) -> None:
        self.streams.discard(stream)

    async def look(self) -> None:
        """Ask once about every guarded stream and hand each the answer.

        A stream's verdict depends only on its grant and the state, so when the same credentials
        were asked about and the state is the same as at the last look, nothing can have changed
        for any stream (a stream opened since was let in by the same rule): the streams are not
        asked."""
        streams = list(self.streams)
        if not streams:
            return
        wanted = frozenset(stream.credentials for stream in streams)
        state = await database_sync_to_async(selectors.credentials_state, thread_sensitive=False)(
            wanted
        )
        if self.seen == (wanted, state):
            return
        self.seen = (wanted, state)
        for stream in streams:
            if stream in self.streams:  # still open after the query's await
                try:
                    stream.recheck(state)
                except Exception:
                    log.exception("re-checking the credentials of a stream failed")

    async def guard_forever(self) -> None:
        """The watch: runs while any stream is guarded (``add`` starts it)."""
        failing = False
        try:
            while not self.hub.closing:
                await asyncio.sleep(interval())
                if not self.streams:
                    return
                try:
                    await self.look()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # Once per outage: a database that does not answer revokes nothing meanwhile.
                    (log.debug if failing else log.warning)(
                        "re-checking the open streams' credentials failed; retrying",
                        exc_info=True,
                    )
                    failing = True
                else:
                    failing = False
        finally:
            if self.task is asyncio.current_task():
                self.task = None
