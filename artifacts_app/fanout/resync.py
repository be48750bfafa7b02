"""A layer that goes away or restarts: the watch of the layer's servers that catches the
hub's feeds up from the stored events while they are away and re-adds every group when they are back
or restarted. Functions of a ``Hub`` (its watcher task runs ``watch_forever``)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.conf import settings

from artifacts_app import selectors
from artifacts_app.fanout.publisher import agent_group

if TYPE_CHECKING:
    from artifacts_app.fanout.hub import Hub
    from artifacts_app.layer import ServerWatch

log = logging.getLogger(__name__)

CATCH_UP_LIMIT = 10_000  # stored events read per feed per look; the next look reads on


def _stored_after(agent_id: int, after: int) -> list[dict[str, Any]]:
    last = selectors.agent_last_seq(agent_id)
    return selectors.events_between(agent_id, after, min(last, after + CATCH_UP_LIMIT) + 1)


def watch_timeout() -> float:
    return max(1.0, float(getattr(settings, "ARTIFACTS_WS_LAYER_WATCH", 2.0)))


async def watch_forever(hub: Hub, watch: ServerWatch) -> None:
    """Every ``ARTIFACTS_WS_LAYER_WATCH`` seconds: ask the layer's servers who they are. While
    they do not answer, catch every feed up from the stored events (other processes' events
    cannot arrive); when they answer again, or answer as other servers (a restart forgot our
    groups), re-add every group at once and catch up what was missed meanwhile."""
    interval = float(getattr(settings, "ARTIFACTS_WS_LAYER_WATCH", 2.0))
    try:
        while not hub.closing:
            await asyncio.sleep(interval)
            try:
                ids = await watch.server_ids()
            except asyncio.CancelledError:
                raise
            except Exception:
                hub.mark_away()
                await catch_up_all(hub)
                continue
            if hub.layer_away or ids != hub.layer_ids:
                log.warning(
                    "channel layer %s: re-adding %d group(s) and catching up",
                    "back" if ids == hub.layer_ids else "restarted",
                    len(hub.feeds),
                )
                await resync(hub, ids)
    finally:
        await watch.close()


async def add_all_groups(hub: Hub) -> bool:
    """(Re-)join the group of every watched agent; False (logged) when the layer fails."""
    try:
        for agent_id in list(hub.feeds):
            await hub.layer.group_add(agent_group(agent_id), hub.channel)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.warning("joining the fan-out's groups failed", exc_info=True)
        return False
    return True


async def resync(hub: Hub, ids: tuple[str, ...]) -> None:
    if await add_all_groups(hub):
        hub.layer_ids, hub.layer_away = ids, False
    else:
        hub.layer_away = True  # gone again: the next look retries
    # Joined first, then read: what commits in between arrives live, and seqs dedupe.
    await catch_up_all(hub)


async def catch_up_all(hub: Hub) -> None:
    for feed in list(hub.feeds.values()):
        if feed.next_seq is None or hub.feeds.get(feed.agent_id) is not feed:
            continue
        try:
            stored = await database_sync_to_async(_stored_after)(feed.agent_id, feed.next_seq - 1)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("catching up agent %s failed; retrying", feed.agent_id, exc_info=True)
            continue
        if stored:
            hub.deliver(feed.agent_id, stored)
