"""The channel layer's servers, looked at directly: are they there, and are they the
same servers as before?

A Redis that restarts forgets every group membership and every queued message, and channels_redis
says nothing about it: a process's fan-out would stay joined to groups that no longer exist. The
fan-out (``fanout.Hub``) therefore watches each server's ``run_id`` (``INFO server``), which a
restart changes, with clients of its own and short timeouts; ``/healthz`` pings the same servers.
The in-memory layer has no server: nothing to watch.
"""

from __future__ import annotations

from django.conf import settings

from artifacts_app.jsontypes import JSONObject


def layer_addresses() -> list[str]:
    """The Redis URLs of the default channel layer (empty for any other layer)."""
    conf = getattr(settings, "CHANNEL_LAYERS", {}).get("default") or {}
    if not str(conf.get("BACKEND", "")).startswith("channels_redis."):
        return []
    hosts = (conf.get("CONFIG") or {}).get("hosts") or ["redis://127.0.0.1:6379"]
    addresses = []
    for host in hosts:
        if isinstance(host, str):
            addresses.append(host)
        elif isinstance(host, dict) and "address" in host:
            addresses.append(str(host["address"]))
        elif isinstance(host, list | tuple):
            addresses.append(f"redis://{host[0]}:{host[1]}")
    return addresses


class ServerWatch:
    """Async clients of the layer's servers, for one event loop: ``server_ids`` answers each
    server's ``run_id`` or raises (unreachable, or no answer within ``timeout`` seconds)."""

    def __init__(self, timeout: float) -> None:
        import redis.asyncio as aioredis

        self.clients = [
            aioredis.Redis.from_url(address, socket_timeout=timeout, socket_connect_timeout=timeout)
            for address in layer_addresses()
        ]

    async def server_ids(self) -> tuple[str, ...]:
        ids = []
        for client in self.clients:
            info: dict[str, object] = await client.info("server")
            ids.append(str(info.get("run_id", "")))
        return tuple(ids)

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()


def layer_probe(timeout: float) -> JSONObject:
    """``/healthz``: ping every server of the layer (blocking, bounded by ``timeout``); raises
    what the client raises. The in-memory layer answers at once: it lives in this process."""
    addresses = layer_addresses()
    if not addresses:
        conf = getattr(settings, "CHANNEL_LAYERS", {}).get("default") or {}
        return {"backend": str(conf.get("BACKEND", "none")).rsplit(".", 1)[-1]}
    import redis

    for address in addresses:
        client = redis.Redis.from_url(
            address, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        try:
            client.ping()
        finally:
            client.close()
    return {"backend": "RedisChannelLayer", "servers": len(addresses)}
