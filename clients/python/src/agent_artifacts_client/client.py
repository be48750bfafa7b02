"""``ArtifactsClient`` (blocking) and ``AsyncArtifactsClient``: the REST API of one agent.

    with ArtifactsClient("https://artifacts.example", token, "reviewer") as client:
        record = client.tag(kind="reviewed-pr", key=url, data={"url": url, "verdict": "approve"})
        for record in client.list(kind="reviewed-pr"):      # every page, newest-updated first
            ...
        client.content(record.id, to="review.md")           # streamed to a file (or iterate chunks)
        tool = client.tool("openai")                        # hand it to the model
        result = client.run_tool(call_input)                # a ToolResult for the model

Both are drivers of the operations in ``agent_artifacts_client.wire``, where every route is written
once; here is only how each one sends a request (blocking or awaited), pages and streams.

Every refusal raises ``ClientError`` with the envelope's ``code`` and ``message`` (and ``status``,
``details``). Retries happen only where repeating cannot make a second record: reads, keyed tags
(the key is the upsert handle) and connections that never got through. An unkeyed tag whose
connection dropped is not retried: ``ClientError("connection_error")`` says so.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import IO, Any, TypeVar

import httpx

from agent_artifacts_client.errors import from_response
from agent_artifacts_client.events import subscribe
from agent_artifacts_client.records import ArtifactRecord, record_from_json
from agent_artifacts_client.tools import ToolResult
from agent_artifacts_client.wire import CHUNK, Contents, Op, Request, Wire

T = TypeVar("T")
Target = str | os.PathLike[str] | IO[bytes]


def _identity(row: Any) -> Any:
    return row


class ArtifactsClient:
    """The REST API of one agent (blocking). Use as a context manager, or call ``close``."""

    def __init__(
        self,
        base_url: str,
        token: str,
        agent: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.wire = Wire(base_url, token, agent, retries=retries, backoff=backoff)
        self.http = httpx.Client(headers=self.wire.headers(), timeout=timeout, transport=transport)

    def __enter__(self) -> ArtifactsClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # -- the driver -------------------------------------------------------------------------------

    def _send(self, request: Request) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.http.send(request.build(self.http), stream=request.stream)
            except httpx.TransportError as exc:
                delay = self.wire.retry_delay(request, attempt, error=exc)
            else:
                delay = self.wire.retry_delay(request, attempt, response=response)
                if delay is None:
                    return response
                response.close()
            time.sleep(delay or 0)

    def _run(self, op: Op[T]) -> T:
        try:
            request = next(op)
            while True:
                request = op.send(self._send(request))
        except StopIteration as done:
            return done.value
        finally:
            op.close()

    def _pages(
        self, url: str | None, params: dict[str, Any] | None, row: Callable[[Any], T]
    ) -> Iterator[T]:
        while url:
            rows, url = self._run(self.wire.page(url, params))
            params = None  # ``next`` carries the filters and the cursor
            yield from map(row, rows)

    # -- the API ----------------------------------------------------------------------------------

    def tag(
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
    ) -> ArtifactRecord:
        """Tag an artifact (upsert by ``key``). ``contents``: a ``str`` is sent as text, ``bytes``
        up to 4 MiB inline, larger bytes, a path or a binary file as a streamed multipart upload."""
        return self._run(self.wire.tag(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, contents=contents, content_type=content_type,
        ))  # fmt: skip

    def page(
        self, *, cursor: str | None = None, **filters: Any
    ) -> tuple[list[ArtifactRecord], str | None]:
        """One page of records (filters as ``list``, plus ``limit``) and the URL of the next."""
        url, params = self.wire.artifacts_query(cursor=cursor, **filters)
        rows, next_url = self._run(self.wire.page(url, params))
        return [record_from_json(r) for r in rows], next_url

    def list(
        self,
        *,
        kind: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
        key: str | None = None,
        page_size: int = 200,
    ) -> Iterator[ArtifactRecord]:
        """Every record matching the filters, newest-updated first, fetching page after page."""
        url, params = self.wire.artifacts_query(
            kind=kind, session_id=session_id, source=source, key=key, limit=page_size
        )
        return self._pages(url, params, record_from_json)

    def get(self, artifact_id: str) -> ArtifactRecord:
        return self._run(self.wire.get(artifact_id))

    def delete(self, artifact_id: str) -> None:
        self._run(self.wire.delete(artifact_id))

    def content(self, artifact_id: str, to: Target | None = None) -> Any:
        """The record's content: written to ``to`` (a path or a binary file; answers the byte
        count), or, with no ``to``, an iterator of chunks. Never held whole in memory."""
        if to is None:
            return self._chunks(artifact_id)
        if isinstance(to, (str, os.PathLike)):
            with open(to, "wb") as handle:
                return self._write(artifact_id, handle)
        return self._write(artifact_id, to)

    def _write(self, artifact_id: str, handle: IO[bytes]) -> int:
        size = 0
        for chunk in self._chunks(artifact_id):
            handle.write(chunk)
            size += len(chunk)
        return size

    def _chunks(self, artifact_id: str) -> Iterator[bytes]:
        response = self._send(self.wire.content_request(artifact_id))
        try:
            if not response.is_success:
                response.read()
                raise from_response(response)
            yield from response.iter_bytes(CHUNK)
        finally:
            response.close()

    def sessions(self, *, page_size: int = 200) -> Iterator[dict[str, Any]]:
        """Every session the caller may see, newest first: ``{"id", "owner", "createdAt"}``."""
        url, params = self.wire.sessions_query(limit=page_size)
        return self._pages(url, params, _identity)

    def session(self, session_id: str) -> dict[str, Any]:
        return self._run(self.wire.session(session_id))

    def create_session(self, *, id: str | None = None, owner: str | None = None) -> dict[str, Any]:  # noqa: A002
        """Create a session (``id`` None: generated; ``owner`` a username or None)."""
        return self._run(self.wire.create_session(id=id, owner=owner))

    def kinds(self) -> dict[str, Any]:
        """``{"kinds": [{"name", "description", "schema"}], "max", "agentTool"}``."""
        return self._run(self.wire.kinds())

    def tool(self, format: str = "anthropic") -> dict[str, Any]:  # noqa: A002
        """The model-facing ``tag_artifact`` tool: ``anthropic``, ``openai`` or ``openai-responses``."""
        return self._run(self.wire.tool(format))

    def run_tool(
        self,
        input: Any,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,  # noqa: A002
    ) -> ToolResult:
        """Run a model's ``tag_artifact`` call; a refusal the model can fix comes back as a result."""
        return self._run(self.wire.run_tool(input, session_id=session_id, turn_id=turn_id))

    def subscribe(
        self, *, session_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The agent's (or a session's) event stream: an async iterator that reconnects with
        ``after`` by itself (``agent_artifacts_client.subscribe``)."""
        return subscribe(self.wire.events_url(session_id), self.wire.token, after)


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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.wire = Wire(base_url, token, agent, retries=retries, backoff=backoff)
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
                request = op.send(await self._send(request))
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
    ) -> ArtifactRecord:
        """Tag an artifact; as ``ArtifactsClient.tag``."""
        return await self._run(self.wire.tag(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, contents=contents, content_type=content_type,
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
        page_size: int = 200,
    ) -> AsyncIterator[ArtifactRecord]:
        url, params = self.wire.artifacts_query(
            kind=kind, session_id=session_id, source=source, key=key, limit=page_size
        )
        return self._pages(url, params, record_from_json)

    async def get(self, artifact_id: str) -> ArtifactRecord:
        return await self._run(self.wire.get(artifact_id))

    async def delete(self, artifact_id: str) -> None:
        await self._run(self.wire.delete(artifact_id))

    async def content(self, artifact_id: str, to: Target | None = None) -> Any:
        """Written to ``to`` (answers the byte count), or with no ``to`` an async iterator of chunks."""
        if to is None:
            return self._chunks(artifact_id)
        size = 0
        handle = open(to, "wb") if isinstance(to, (str, os.PathLike)) else to  # noqa: SIM115
        try:
            async for chunk in self._chunks(artifact_id):
                handle.write(chunk)
                size += len(chunk)
        finally:
            if handle is not to:
                handle.close()
        return size

    async def _chunks(self, artifact_id: str) -> AsyncIterator[bytes]:
        response = await self._send(self.wire.content_request(artifact_id))
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

    def subscribe(
        self, *, session_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        return subscribe(self.wire.events_url(session_id), self.wire.token, after)
