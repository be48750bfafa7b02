"""System checks for how the site is deployed (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Sequence

from django.apps import AppConfig
from django.conf import settings
from django.core import checks

from artifacts_app import faults


@checks.register(checks.Tags.compatibility, deploy=False)
def check_layer_for_processes(
    app_configs: Sequence[AppConfig] | None = None, **_: object
) -> list[checks.CheckMessage]:
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
def check_persistent_connections(
    app_configs: Sequence[AppConfig] | None = None, **_: object
) -> list[checks.CheckMessage]:
    """Connections live as long as their request thread (DESIGN.md §10): the site's ASGI handler
    reuses its threads, so that is safe — but only with a health check, or a connection broken
    underneath (a database restart, a replaced SQLite file) would fail the next request on it."""
    messages: list[checks.CheckMessage] = []
    for alias, conf in settings.DATABASES.items():
        # Django's default is 0; None means "never close".
        persistent = conf.get("CONN_MAX_AGE", 0) != 0 and not conf.get("OPTIONS", {}).get("pool")
        if persistent and not conf.get("CONN_HEALTH_CHECKS", False):
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] keeps connections (CONN_MAX_AGE="
                    f"{conf['CONN_MAX_AGE']}) without CONN_HEALTH_CHECKS: a connection the "
                    "database dropped would fail the next request on its thread.",
                    hint="Set CONN_HEALTH_CHECKS = True (the default settings do), or "
                    "CONN_MAX_AGE = 0.",
                    id="artifacts.W102",
                )
            )
    return messages


REACHABLE = "artifacts_reachable"  # the tag of the reachability check alone (commands/migrate.py)


@checks.register(checks.Tags.database, REACHABLE)
def check_database_reachable(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **_: object,
) -> list[checks.CheckMessage]:
    """A database the site cannot reach is an error, not a passing ``check`` followed by failing
    requests. Bounded by the connection's timeouts (settings ``DATABASE_CONNECT_TIMEOUT``).
    Runs for ``check`` (every database) and for commands that name theirs (``migrate``)."""
    messages: list[checks.CheckMessage] = []
    for alias in databases if databases is not None else settings.DATABASES:
        try:
            faults.database_probe(alias)
        except Exception as exc:
            if faults.classify(exc) is None:
                raise
            messages.append(
                checks.Error(
                    f"The database {alias!r} cannot be reached: {type(exc).__name__}: "
                    f"{str(exc).strip() or 'no answer'}",
                    hint="Start it, or fix DATABASE_URL (host, port, name, credentials); the "
                    "connection gives up after DATABASE_CONNECT_TIMEOUT seconds.",
                    id="artifacts.E103",
                )
            )
    return messages


WEBSOCKET_HANDSHAKE_SECONDS = 5  # daphne's --websocket_connect_timeout, by default


@checks.register(checks.Tags.database)
def check_database_waits_fit_the_websocket_handshake(
    app_configs: Sequence[AppConfig] | None = None, **_: object
) -> list[checks.CheckMessage]:
    """A websocket whose database cannot be reached is closed with 4503 only if the wait for a
    connection ends before daphne drops a handshake that is still going (5 s by default)."""
    waits = {"DATABASE_CONNECT_TIMEOUT": getattr(settings, "DATABASE_CONNECT_TIMEOUT", 0)}
    if any(conf.get("OPTIONS", {}).get("pool") for conf in settings.DATABASES.values()):
        waits["DATABASE_POOL_TIMEOUT"] = getattr(settings, "DATABASE_POOL_TIMEOUT", 0)
    return [
        checks.Warning(
            f"{name} is {seconds} s, not below daphne's websocket handshake timeout "
            f"({WEBSOCKET_HANDSHAKE_SECONDS} s): a stream whose database cannot be reached would be "
            "dropped at the handshake instead of closed with 4503.",
            hint=f"Set {name} below {WEBSOCKET_HANDSHAKE_SECONDS}, or run daphne with a longer "
            "--websocket_connect_timeout.",
            id="artifacts.W104",
        )
        for name, seconds in waits.items()
        if seconds >= WEBSOCKET_HANDSHAKE_SECONDS
    ]


TAG_ROUTE_MIDDLEWARE = "artifacts_app.rest.lean.TagRouteMiddleware"


@checks.register()
def check_tag_route_last(
    app_configs: Sequence[AppConfig] | None = None, **_: object
) -> list[checks.CheckMessage]:
    """The tag route is answered by the last middleware (``rest/lean.py``): one after it would
    not run for a tag, and without it the tag's POST reaches a view that only declares it."""
    middleware = list(settings.MIDDLEWARE)
    if middleware and middleware[-1] == TAG_ROUTE_MIDDLEWARE:
        return []
    return [
        checks.Error(
            f"{TAG_ROUTE_MIDDLEWARE} must be the last entry of MIDDLEWARE.",
            hint="It answers POST /<slug>/v1/artifacts before URL resolution; middleware after "
            "it would not run for a tag. Put new middleware before it.",
            id="artifacts.E105",
        )
    ]
