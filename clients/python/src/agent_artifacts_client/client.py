"""``ArtifactsClient``: the REST API of one agent, blocking (``AsyncArtifactsClient`` is its twin).

    with ArtifactsClient("https://artifacts.example", token, "reviewer") as client:
        record = client.tag(kind="reviewed-pr", key=url, data={"url": url, "verdict": "approve"})
        for record in client.list(kind="reviewed-pr"):      # every page, newest-updated first
            ...
        client.content(record.id, to="review.md")           # streamed to a file (or iterate chunks)
        tool = client.tool("openai")                        # hand it to the model
        result = client.run_tool(call_input)                # a ToolResult for the model

Both are drivers of the operations in ``agent_artifacts_client.wire``, where every route is written
once; here (and in ``async_client``) is only how each one sends a request, pages and streams.

Every refusal raises ``ClientError`` with the envelope's ``code`` and ``message`` (and ``status``,
``details``). Retries happen only where repeating cannot make a second record: reads, keyed tags
(the key is the upsert handle) and connections that never got through. An unkeyed tag whose
connection dropped is not retried: ``ClientError("connection_error")`` says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import IO, Any, TypeVar

import httpx

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
Target = str | os.PathLike[str] | IO[bytes]


def _identity(row: Any) -> Any:
    return row


def _write(chunks: Iterator[bytes], handle: IO[bytes]) -> int:
    size = 0
    for chunk in chunks:
        handle.write(chunk)
        size += len(chunk)
    return size


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
        upload_threshold: int = UPLOAD_THRESHOLD,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.wire = Wire(
            base_url,
            token,
            agent,
            retries=retries,
            backoff=backoff,
            upload_threshold=upload_threshold,
        )
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
                try:
                    response = self._send(request)
                except ClientError as exc:  # the operation may go on (a resumable upload)
                    request = op.throw(exc)
                    continue
                request = op.send(response)
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
        on_progress: Progress | None = None,
    ) -> ArtifactRecord:
        """Tag an artifact (upsert by ``key``). ``contents``: a ``str`` is sent as text, ``bytes``
        up to 4 MiB inline, larger bytes, a path or a binary file as a streamed multipart upload;
        past ``upload_threshold`` (8 MiB; a pipe aside) as known contents if the agent stores them
        already, else as a resumable upload that goes on after a dropped connection, calling
        ``on_progress(bytes the server holds, bytes in all)`` as it goes."""
        return self._run(self.wire.tag(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, contents=contents, content_type=content_type, on_progress=on_progress,
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
        q: str | None = None,
        where: dict[str, Any] | str | None = None,
        page_size: int = 200,
    ) -> Iterator[ArtifactRecord]:
        """Every record matching the filters, newest-updated first, fetching page after page.
        ``q`` searches words, ``where`` (an object, or its JSON text) conditions over ``data``
        (API.md "Search")."""
        url, params = self.wire.artifacts_query(
            kind=kind, session_id=session_id, source=source, key=key, q=q, where=where,
            limit=page_size,
        )  # fmt: skip
        return self._pages(url, params, record_from_json)

    def get(self, artifact_id: str) -> ArtifactRecord:
        return self._run(self.wire.get(artifact_id))

    def delete(self, artifact_id: str) -> None:
        self._run(self.wire.delete(artifact_id))

    def content(
        self, artifact_id: str, to: Target | None = None, *, version: int | None = None
    ) -> Any:
        """The record's content (or that ``version``'s): written to ``to`` (a path or a binary
        file; answers the byte count), or, with no ``to``, an iterator of chunks. Never held whole
        in memory."""
        chunks = self._chunks(self.wire.content_request(artifact_id, version))
        if to is None:
            return chunks
        if isinstance(to, (str, os.PathLike)):
            with open(to, "wb") as handle:
                return _write(chunks, handle)
        return _write(chunks, to)

    def _chunks(self, request: Request) -> Iterator[bytes]:
        response = self._send(request)
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

    # -- versions, pins and diffs ----------------------------------------------------------------

    def versions(self, artifact_id: str, *, page_size: int = 200) -> Iterator[ArtifactRecord]:
        """The record's versions the caller may see, newest first: each the record as that tag
        stored it, with ``version`` = its number (1 is the first tag)."""
        url, params = self.wire.versions_query(artifact_id, limit=page_size)
        return self._pages(url, params, record_from_json)

    def version(self, artifact_id: str, number: int) -> ArtifactRecord:
        return self._run(self.wire.version(artifact_id, number))

    def diff(self, artifact_id: str, number: int, *, from_: int | None = None) -> dict[str, Any]:
        """``{"from", "to", "fields": {name: {"from", "to"}}, "data": <JSON Patch>}``; ``from_``
        defaults to the newest version before ``number`` the caller may see."""
        return self._run(self.wire.diff(artifact_id, number, from_))

    def restore(self, artifact_id: str, number: int) -> ArtifactRecord:
        """A new version with version ``number``'s kind, title and data (agent key)."""
        return self._run(self.wire.restore(artifact_id, number))

    def pin(self, artifact_id: str) -> ArtifactRecord:
        """Eviction skips a pinned record (agent key, staff)."""
        return self._run(self.wire.pin(artifact_id, True))

    def unpin(self, artifact_id: str) -> ArtifactRecord:
        return self._run(self.wire.pin(artifact_id, False))

    def declare(
        self,
        kinds: dict[str, Any],
        *,
        agent_tool: bool | None = None,
        max: int | None = None,  # noqa: A002
        keep_versions: int | None = None,
    ) -> dict[str, Any]:
        """Declare the agent's kinds (``PUT artifacts/kinds``; an agent with no Python module):
        ``kinds`` maps a name to ``{"description", "schema"?: <JSON Schema>, "keepVersions"?}``.
        The declaration replaces the whole previous one; answers what ``kinds()`` then answers."""
        return self._run(
            self.wire.declare(kinds, agent_tool=agent_tool, max=max, keep_versions=keep_versions)
        )

    def subscribe(
        self, *, session_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The agent's (or a session's) event stream: an async iterator that reconnects with
        ``after`` by itself (``agent_artifacts_client.subscribe``)."""
        return subscribe(self.wire.events_url(session_id), self.wire.token, after)
