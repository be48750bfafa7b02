"""``AsyncArtifactsClient``: the async twin of ``ArtifactsClient`` (same methods, awaited).

A driver of the same operations (``agent_artifacts_client.wire``) as the blocking client, with an
``httpx.AsyncClient``; only how a request is sent, pages are walked and content is streamed lives here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import httpx

from agent_artifacts_client.client import Target, _identity
from agent_artifacts_client.errors import ClientError, from_response
from agent_artifacts_client.events import subscribe
from agent_artifacts_client.records import ArtifactRecord, record_from_json
from agent_artifacts_client.tools import ToolResult
from agent_artifacts_client.wire import (
    CHUNK,
    UPLOAD_THRESHOLD,
    Contents,
    Op,
    Progress,
    Request,
    Wire,
)

T = TypeVar("T")


class AsyncArtifactsClient:
    """The async twin of ``ArtifactsClient``: the same methods, awaited (``list``, ``sessions``
    and content chunks are async iterators)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        agent: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
        upload_threshold: int = UPLOAD_THRESHOLD,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.wire = Wire(
            base_url,
            token,
            agent,
            retries=retries,
            backoff=backoff,
            upload_threshold=upload_threshold,
        )
        self.http = httpx.AsyncClient(
            headers=self.wire.headers(), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncArtifactsClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    # -- the driver -------------------------------------------------------------------------------

    async def _send(self, request: Request) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self.http.send(request.build(self.http), stream=request.stream)
            except httpx.TransportError as exc:
                delay = self.wire.retry_delay(request, attempt, error=exc)
            else:
                delay = self.wire.retry_delay(request, attempt, response=response)
                if delay is None:
                    return response
                await response.aclose()
            await asyncio.sleep(delay or 0)

    async def _run(self, op: Op[T]) -> T:
        try:
            request = next(op)
            while True:
                try:
                    response = await self._send(request)
                except ClientError as exc:  # the operation may go on (a resumable upload)
                    request = op.throw(exc)
                    continue
                request = op.send(response)
        except StopIteration as done:
            return done.value
        finally:
            op.close()

    async def _pages(
        self, url: str | None, params: dict[str, Any] | None, row: Callable[[Any], T]
    ) -> AsyncIterator[T]:
        while url:
            rows, url = await self._run(self.wire.page(url, params))
            params = None
            for item in rows:
                yield row(item)

    # -- the API ----------------------------------------------------------------------------------

    async def tag(
        self,
        *,
        data: Any,
        kind: str | None = None,
        key: str | None = None,
        title: str | None = None,
        session_id: str | None = None,
        turn_id: str | None = None,
        source: str | None = None,
        contents: Contents = None,
        content_type: str | None = None,
        on_progress: Progress | None = None,
    ) -> ArtifactRecord:
        """Tag an artifact; as ``ArtifactsClient.tag``."""
        return await self._run(self.wire.tag(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, contents=contents, content_type=content_type, on_progress=on_progress,
        ))  # fmt: skip

    async def page(
        self, *, cursor: str | None = None, **filters: Any
    ) -> tuple[list[ArtifactRecord], str | None]:
        url, params = self.wire.artifacts_query(cursor=cursor, **filters)
        rows, next_url = await self._run(self.wire.page(url, params))
        return [record_from_json(r) for r in rows], next_url

    def list(
        self,
        *,
        kind: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
        key: str | None = None,
        q: str | None = None,
        where: dict[str, Any] | str | None = None,
        page_size: int = 200,
    ) -> AsyncIterator[ArtifactRecord]:
        url, params = self.wire.artifacts_query(
            kind=kind, session_id=session_id, source=source, key=key, q=q, where=where,
            limit=page_size,
        )  # fmt: skip
        return self._pages(url, params, record_from_json)

    async def get(self, artifact_id: str) -> ArtifactRecord:
        return await self._run(self.wire.get(artifact_id))

    async def delete(self, artifact_id: str) -> None:
        await self._run(self.wire.delete(artifact_id))

    async def content(
        self, artifact_id: str, to: Target | None = None, *, version: int | None = None
    ) -> Any:
        """Written to ``to`` (answers the byte count), or with no ``to`` an async iterator of chunks."""
        chunks = self._chunks(self.wire.content_request(artifact_id, version))
        if to is None:
            return chunks
        size = 0
        handle = open(to, "wb") if isinstance(to, (str, os.PathLike)) else to  # noqa: SIM115
        try:
            async for chunk in chunks:
                handle.write(chunk)
                size += len(chunk)
        finally:
            if handle is not to:
                handle.close()
        return size

    async def _chunks(self, request: Request) -> AsyncIterator[bytes]:
        response = await self._send(request)
        try:
            if not response.is_success:
                await response.aread()
                raise from_response(response)
            async for chunk in response.aiter_bytes(CHUNK):
                yield chunk
        finally:
            await response.aclose()

    def sessions(self, *, page_size: int = 200) -> AsyncIterator[dict[str, Any]]:
        url, params = self.wire.sessions_query(limit=page_size)
        return self._pages(url, params, _identity)

    async def session(self, session_id: str) -> dict[str, Any]:
        return await self._run(self.wire.session(session_id))

    async def create_session(
        self, *, id: str | None = None, owner: str | None = None
    ) -> dict[str, Any]:  # noqa: A002
        return await self._run(self.wire.create_session(id=id, owner=owner))

    async def kinds(self) -> dict[str, Any]:
        return await self._run(self.wire.kinds())

    async def tool(self, format: str = "anthropic") -> dict[str, Any]:  # noqa: A002
        return await self._run(self.wire.tool(format))

    async def run_tool(
        self,
        input: Any,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,  # noqa: A002
    ) -> ToolResult:
        return await self._run(self.wire.run_tool(input, session_id=session_id, turn_id=turn_id))

    def versions(self, artifact_id: str, *, page_size: int = 200) -> AsyncIterator[ArtifactRecord]:
        url, params = self.wire.versions_query(artifact_id, limit=page_size)
        return self._pages(url, params, record_from_json)

    async def version(self, artifact_id: str, number: int) -> ArtifactRecord:
        return await self._run(self.wire.version(artifact_id, number))

    async def diff(
        self, artifact_id: str, number: int, *, from_: int | None = None
    ) -> dict[str, Any]:
        return await self._run(self.wire.diff(artifact_id, number, from_))

    async def restore(self, artifact_id: str, number: int) -> ArtifactRecord:
        return await self._run(self.wire.restore(artifact_id, number))

    async def pin(self, artifact_id: str) -> ArtifactRecord:
        return await self._run(self.wire.pin(artifact_id, True))

    async def unpin(self, artifact_id: str) -> ArtifactRecord:
        return await self._run(self.wire.pin(artifact_id, False))

    async def declare(
        self,
        kinds: dict[str, Any],
        *,
        agent_tool: bool | None = None,
        max: int | None = None,  # noqa: A002
        keep_versions: int | None = None,
    ) -> dict[str, Any]:
        return await self._run(
            self.wire.declare(kinds, agent_tool=agent_tool, max=max, keep_versions=keep_versions)
        )

    def subscribe(
        self, *, session_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        return subscribe(self.wire.events_url(session_id), self.wire.token, after)
