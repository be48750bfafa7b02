"""Per-process fan-out of events to this process's websockets and MCP clients (DESIGN.md §5).

``hub``: each event loop's ``Hub`` (one layer subscription per process, order and gap filling, the
watch of the layer's servers), ``deliver_local``. ``publisher``: the thread that sends one layer
message per transaction to other processes (Redis). The docstring of ``hub`` tells the whole path.
"""

from __future__ import annotations

from artifacts_app.fanout.hub import (
    CATCH_UP_LIMIT,
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

__all__ = [
    "BATCH",
    "CATCH_UP_LIMIT",
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
