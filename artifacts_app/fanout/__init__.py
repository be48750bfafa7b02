"""Per-process fan-out of events to this process's websockets and MCP clients (DESIGN.md §5).

The plain Channels pattern makes every socket its own layer channel and group member, so one event
costs one layer message per socket. Here each event loop that serves websockets has one ``Hub``: the
sockets register with it, it holds ONE layer channel for the whole process (Redis only) joined to the
groups of the agents its sockets watch, and it hands each event to its local sockets, filtered per
session, serialized once.

Order and completeness live here too. Per agent, ``seq`` is gapless and in commit order, but two
transactions' publishes can arrive swapped, and a layer may drop a message. A feed therefore keeps
``next_seq``: an event past a hole waits; if the hole is not filled within ``ARTIFACTS_WS_GAP_WAIT``
seconds the missing events are read from the stored rows. So every socket sees the agent's events in
seq order, none missing, none twice.

Events reach the hubs without waiting on the network and without a layer object shared between
loops: ``events.publish`` (on commit) calls ``deliver_local`` (each hub is fed on its own loop with
``call_soon_threadsafe``) and, with Redis, hands the batch to this process's publisher thread, which
sends ONE layer message per transaction to the agent's group from its own loop with its own layer
instance (channels_redis pools are per loop). The in-memory layer reaches no other process, so with
it nothing goes to the layer at all. The hubs read stored events through ``selectors``.

A socket is a ``Subscriber``: ``offer`` must not block (it puts into the socket's bounded buffer, and
a socket whose buffer is full is dropped by its consumer, not waited for).

A stream may also be *guarded* (``Hub.guard``): the hub asks the database again, every
``ARTIFACTS_STREAM_RECHECK_MS``, about the credentials of its guarded streams, in one statement, and
each one ends itself if they no longer hold (a revoked key, a deactivated user, a lost session).

Modules: ``hub`` (the ``Hub``, the registry of hubs, ``deliver_local``, ``close_hub``), ``resync``
(the watch of the layer's servers: catch-up while away, re-added groups when back), ``guard`` (the
credentials watch) and ``publisher`` (the publisher thread, the agents' groups, the layer message
type). This package re-exports their public names.
"""

from __future__ import annotations

from artifacts_app.fanout.guard import Guarded
from artifacts_app.fanout.hub import (
    Hub,
    Subscriber,
    close_hub,
    deliver_local,
    hub,
)
from artifacts_app.fanout.publisher import (
    BATCH,
    agent_group,
    flush,
    new_layer,
    origin,
    publisher,
    remote_enabled,
)
from artifacts_app.fanout.resync import CATCH_UP_LIMIT

__all__ = [
    "BATCH",
    "CATCH_UP_LIMIT",
    "Guarded",
    "Hub",
    "Subscriber",
    "close_hub",
    "agent_group",
    "deliver_local",
    "flush",
    "hub",
    "new_layer",
    "origin",
    "publisher",
    "remote_enabled",
]
