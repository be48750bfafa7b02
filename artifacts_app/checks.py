"""System checks for how the site is deployed (docs/operations.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.compatibility, deploy=False)
def check_layer_for_processes(app_configs: Any = None, **_: Any) -> list[checks.CheckMessage]:
    """More than one server process needs a channel layer that crosses processes (Redis):
    with the in-memory layer each process would only see its own publishes."""
    processes = int(getattr(settings, "ARTIFACTS_PROCESSES", 1))
    backend = str(settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", ""))
    if processes > 1 and backend.endswith("InMemoryChannelLayer"):
        return [
            checks.Error(
                f"ARTIFACTS_PROCESSES is {processes}, but the channel layer is in-memory: events "
                "would not reach subscribers of the other processes.",
                hint="Set REDIS_URL (the channels_redis layer), or run one process.",
                id="artifacts.E101",
            )
        ]
    return []


@checks.register(checks.Tags.database)
def check_persistent_connections(app_configs: Any = None, **_: Any) -> list[checks.CheckMessage]:
    """Under ASGI requests run on changing threads: persistent connections leak (DESIGN.md §10)."""
    messages: list[checks.CheckMessage] = []
    for alias, conf in settings.DATABASES.items():
        # Django's default is 0; None means "never close" (the worst case, so it warns too).
        if conf.get("CONN_MAX_AGE", 0) != 0 and not conf.get("OPTIONS", {}).get("pool"):
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] sets CONN_MAX_AGE={conf['CONN_MAX_AGE']}; under ASGI "
                    "use 0 or psycopg's pool (DATABASE_URL …?pool=1).",
                    id="artifacts.W102",
                )
            )
    return messages
