"""A live daphne per module and the official MCP SDK client pointed at it, over real HTTP.

The server shares the test database and, unlike other suites, the blob store: records tagged in
this process and content the server reads must be in one place, so ``_isolated_storage`` is
replaced here by one store per module that the server is started on.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from django.conf import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import TEST_AGENTS
from tests.consumers.live import test_database_url
from tests.rest.conftest import World, staff, world  # noqa: F401
from tests.servers import ROOT, DaphneServer


@pytest.fixture(scope="module")
def _shared_store(tmp_path_factory) -> dict[str, str]:
    """Where this module's blobs live, for this process and the server alike."""
    if settings.STORAGES["artifacts"]["BACKEND"].endswith("FileSystemStorage"):
        data_dir = tmp_path_factory.mktemp("mcp-data")
        return {"ARTIFACTS_DATA_DIR": str(data_dir), "location": str(data_dir / "blobs")}
    prefix = f"mcp-{uuid.uuid4().hex}"
    return {"ARTIFACTS_S3_PREFIX": prefix, "location": prefix}


@pytest.fixture(autouse=True)
def _isolated_storage(settings, _shared_store):  # replaces tests/conftest.py's
    storages = {name: dict(conf) for name, conf in settings.STORAGES.items()}
    options = dict(storages["artifacts"].get("OPTIONS") or {})
    options["location"] = (
        Path(_shared_store["location"])
        if storages["artifacts"]["BACKEND"].endswith("FileSystemStorage")
        else _shared_store["location"]
    )
    storages["artifacts"]["OPTIONS"] = options
    settings.STORAGES = storages
    settings.ARTIFACTS_AGENTS = dict(TEST_AGENTS)
    yield


def server_env(store: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": test_database_url(), "PYTHONPATH": str(ROOT)}
    env.update({k: v for k, v in store.items() if k != "location"})
    return env


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, _shared_store) -> Any:
    with django_db_blocker.unblock():
        env = server_env(_shared_store)
    server = DaphneServer(env).start()
    yield server
    server.stop()


@asynccontextmanager
async def mcp(
    server: DaphneServer,
    token: str | None,
    *,
    slug: str = "reviewer",
    mode: str = "legacy",
    query: str = "",
    inbox: asyncio.Queue | None = None,
) -> AsyncIterator[Client]:
    """The SDK's client on ``/<slug>/mcp`` with this bearer token; notifications go to ``inbox``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def handler(message: Any) -> None:
        if inbox is not None and not isinstance(message, Exception):
            await inbox.put(message)

    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{server.base_url}/{slug}/mcp{query}", http_client=http)
        async with Client(transport, mode=mode, message_handler=handler) as client:
            yield client


async def rest(
    server: DaphneServer, method: str, path: str, token: str | None, **kwargs: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=30) as http:
        return await http.request(method, path, **kwargs)


async def list_all(client: Client) -> list[str]:
    """Every resource URI, walking the protocol's cursor."""
    uris: list[str] = []
    cursor = None
    while True:
        page = await client.list_resources(cursor=cursor)
        uris.extend(str(r.uri) for r in page.resources)
        if page.next_cursor is None:
            return uris
        cursor = page.next_cursor


async def rest_ids(server: DaphneServer, token: str | None, slug: str = "reviewer") -> list[str]:
    ids: list[str] = []
    url: str | None = f"/{slug}/v1/artifacts?limit=500"
    while url:
        response = await rest(server, "GET", url, token)
        assert response.status_code == 200, response.text
        body = response.json()
        ids.extend(row["id"] for row in body["results"])
        url = body["next"]
    return ids


__all__ = ["World", "list_all", "mcp", "rest", "rest_ids"]
