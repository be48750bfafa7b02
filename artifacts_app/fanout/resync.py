"""A layer that goes away or restarts: the watch of the layer's servers that catches the hub's
feeds up from the stored events while they are away and re-adds every group when they are back or
restarted. Each ``Hub`` has one ``LayerWatch``, which owns what it saw of the servers; it asks the
hub only through ``Watched`` (this module does not import the hub, which imports it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from artifacts_app import event_schema, selectors
from artifacts_app.layer import ServerWatch

log = logging.getLogger(__name__)

CATCH_UP_LIMIT = 10_000  # stored events read per feed per look; the next look reads on


class Watched(Protocol):
    """What the watch needs of a hub (``fanout.hub.Hub``)."""

    @property
    def closing(self) -> bool: ...

    def positions(self) -> list[tuple[int, int]]:
        """(agent, the last seq handed out) of each started feed."""

    def deliver(self, agent_id: int, payloads: Sequence[event_schema.Event]) -> None: ...

    async def add_all_groups(self) -> bool:
        """(Re-)join every watched agent's group; False when the layer fails."""


def _stored_after(agent_id: int, after: int) -> list[event_schema.Event]:
    last = selectors.agent_last_seq(agent_id)
    return event_schema.stored(
        selectors.events_between(agent_id, after, min(last, after + CATCH_UP_LIMIT) + 1)
    )


def watch_timeout() -> float:
    return max(1.0, float(getattr(settings, "ARTIFACTS_WS_LAYER_WATCH", 2.0)))


class LayerWatch:
    """The layer's servers as last seen (their run_ids), whether they are away now, and the task
    that looks at them."""

    def __init__(self, hub: Watched) -> None:
        self.hub = hub
        self.ids: tuple[str, ...] | None = None
        self.away = False
        self.task: asyncio.Task[None] | None = None

    def mark_away(self) -> None:
        if not self.away:  # once per outage
            log.warning("channel layer unreachable: serving events from the database")
        self.away = True

    async def start(self, watch: ServerWatch) -> None:
        """Learn who the servers are now, then look again every interval (``watch_forever``)."""
        try:
            self.ids = await watch.server_ids()
        except asyncio.CancelledError:
            await watch.close()
            raise
        except Exception:
            self.away = True
        self.task = asyncio.get_running_loop().create_task(self.watch_forever(watch))

    async def watch_forever(self, watch: ServerWatch) -> None:
        """Every ``ARTIFACTS_WS_LAYER_WATCH`` seconds: ask the layer's servers who they are. While
        they do not answer, catch every feed up from the stored events (other processes' events
        cannot arrive); when they answer again, or answer as other servers (a restart forgot our
        groups), re-add every group at once and catch up what was missed meanwhile."""
        interval = float(getattr(settings, "ARTIFACTS_WS_LAYER_WATCH", 2.0))
        try:
            while not self.hub.closing:
                await asyncio.sleep(interval)
                try:
                    ids = await watch.server_ids()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    self.mark_away()
                    await self.catch_up_all()
                    continue
                if self.away or ids != self.ids:
                    log.warning(
                        "channel layer %s: re-adding the groups and catching up",
                        "back" if ids == self.ids else "restarted",
                    )
                    await self.resync(ids)
        finally:
            if self.task is asyncio.current_task():
                self.task = None
            await watch.close()

    async def resync(self, ids: tuple[str, ...]) -> None:
        if await self.hub.add_all_groups():
            self.ids, self.away = ids, False
        else:
            self.away = True  # gone again: the next look retries
        # Joined first, then read: what commits in between arrives live, and seqs dedupe.
        await self.catch_up_all()

    async def catch_up_all(self) -> None:
        for agent_id, after in self.hub.positions():
            try:
                stored = await database_sync_to_async(_stored_after)(agent_id, after)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("catching up agent %s failed; retrying", agent_id, exc_info=True)
                continue
            if stored:
                # A feed that left meanwhile takes nothing; one started again keeps what is new.
                self.hub.deliver(agent_id, stored)
