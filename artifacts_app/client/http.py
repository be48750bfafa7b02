"""``ArtifactsClient``: the REST API of one agent from another process (sync), and its async twin.

    client = ArtifactsClient("https://artifacts.example", token, "reviewer")
    record = client.tag(kind="reviewed-pr", key=url, data={"url": url, "verdict": "approve"})
    for record in client.list(kind="reviewed-pr"):      # every page, newest-updated first
        ...
    client.content(record.id, to="review.md")           # streamed to a file (or iterate chunks)
    tool = client.tool("openai")                        # hand it to the model
    result = client.run_tool(call_input)                # a ToolResult for the model

Every refusal raises ``ClientError`` with the envelope's ``code`` and ``message`` (and ``status``,
``details``). Retries happen only where repeating cannot make a second record: reads, keyed tags
(the key is the upsert handle) and connections that never got through. An unkeyed tag whose
connection dropped is not retried: ``ClientError("connection_error")`` says so.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

import httpx

from artifacts_app.client.wire import inline_contents, record_from_json, tag_body
from artifacts_app.records import ArtifactRecord
from artifacts_app.tool.run import ToolResult, is_model_error

INLINE_LIMIT = 4 * 1024 * 1024  # bigger bytes (and any file) go multipart, streamed
CHUNK = 256 * 1024
RETRY_STATUSES = frozenset({502, 503, 504})


class ClientError(Exception):
    """A refusal or failure: ``code`` and ``message`` from the API's error envelope.

    ``status`` is the HTTP status (None when no answer came: ``connection_error``).
    """

    def __init__(
        self, code: str, message: str, *, status: int | None = None, details: Any = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details

    def __repr__(self) -> str:
        return f"ClientError({self.code!r}, {self.message!r}, status={self.status})"


def _error(response: httpx.Response) -> ClientError:
    try:
        error = response.json()["error"]
        return ClientError(
            error["code"],
            error["message"],
            status=response.status_code,
            details=error.get("details"),
        )
    except (ValueError, KeyError, TypeError):
        text = response.text[:200]
        return ClientError(
            f"http_{response.status_code}",
            f"The server answered {response.status_code} {response.reason_phrase}. {text}".strip(),
            status=response.status_code,
        )


def _connection_error(exc: Exception, attempts: int, retried: bool) -> ClientError:
    why = "retried" if retried else "not retried: repeating it could tag twice"
    return ClientError(
        "connection_error",
        f"No answer from the server after {attempts} attempt(s) ({type(exc).__name__}: {exc}); {why}.",
    )


def _tool_key(tool_input: Any) -> Any:
    if isinstance(tool_input, str):
        try:
            tool_input = json.loads(tool_input)
        except ValueError:
            return None
    artifact = tool_input.get("artifact") if isinstance(tool_input, dict) else None
    return artifact.get("key") if isinstance(artifact, dict) else None


class _Base:
    def __init__(
        self,
        base_url: str,
        token: str,
        agent: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.agent = agent
        self.token = token
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self.prefix = f"{self.base_url}/{agent}/v1/"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}

    def _url(self, path: str) -> str:
        return self.prefix + path

    def _tag_request(
        self,
        *,
        data: Any,
        kind: str | None,
        key: str | None,
        title: str | None,
        session_id: str | None,
        turn_id: str | None,
        source: str | None,
        contents: Any,
        content_type: str | None,
    ) -> tuple[dict[str, Any], bool]:
        """httpx keyword arguments for a tag, and whether it may be retried."""
        body = tag_body(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, content_type=content_type,
        )  # fmt: skip
        keyed = key is not None
        if contents is None:
            return {"json": body}, keyed
        if isinstance(contents, str) or (
            isinstance(contents, (bytes, bytearray)) and len(contents) <= INLINE_LIMIT
        ):
            return {
                "json": inline_contents(
                    body, contents if isinstance(contents, str) else bytes(contents)
                )
            }, keyed
        if isinstance(contents, os.PathLike):
            contents = Path(contents)
        if isinstance(contents, Path):
            handle: Any = contents.open("rb")
            retry = keyed
        elif isinstance(contents, (bytes, bytearray)):
            handle, retry = bytes(contents), keyed
        else:  # a binary file: streamed; retried only when it can be read again
            handle = contents
            retry = keyed and getattr(contents, "seekable", lambda: False)()
        record = json.dumps(body)
        files = {
            "record": (None, record, "application/json"),
            "contents": ("contents", handle, content_type or "application/octet-stream"),
        }
        return {"files": files, "_rewind": handle}, retry

    @staticmethod
    def _rewind(kwargs: dict[str, Any]) -> dict[str, Any]:
        handle = kwargs.get("_rewind")
        if handle is not None and hasattr(handle, "seek"):
            handle.seek(0)
        return {k: v for k, v in kwargs.items() if k != "_rewind"}

    @staticmethod
    def _list_params(**filters: Any) -> dict[str, Any]:
        names = {"session_id": "sessionId"}
        return {names.get(k, k): v for k, v in filters.items() if v is not None}

    @staticmethod
    def _run_tool_result(response: httpx.Response) -> ToolResult:
        if response.is_success:
            return ToolResult.tagged(record_from_json(response.json()), response.status_code == 201)
        error = _error(response)
        if is_model_error(response.status_code, error.details):
            return ToolResult.refused(error.code, error.message, error.details)
        raise error

    def _events_url(self, session_id: str | None) -> str:
        ws = "wss" + self.prefix[5:] if self.prefix.startswith("https") else "ws" + self.prefix[4:]
        return ws + (f"sessions/{session_id}/events" if session_id else "events")


class ArtifactsClient(_Base):
    """The REST API of one agent (synchronous). Use as a context manager, or call ``close``."""

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
        super().__init__(base_url, token, agent, timeout=timeout, retries=retries, backoff=backoff)
        self.http = httpx.Client(headers=self._headers(), timeout=timeout, transport=transport)

    def __enter__(self) -> ArtifactsClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(
        self, method: str, url: str, *, retry: bool, stream: bool = False, **kwargs: Any
    ) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self.http.build_request(method, url, **self._rewind(kwargs))
                response = self.http.send(request, stream=stream)
            except httpx.TransportError as exc:
                # A refused connection never reached the server: repeating it is always safe.
                safe = retry or isinstance(exc, httpx.ConnectError)
                if not safe or attempt > self.retries:
                    raise _connection_error(exc, attempt, safe) from exc
            else:
                if not (
                    retry and response.status_code in RETRY_STATUSES and attempt <= self.retries
                ):
                    return response
                response.close()
            time.sleep(self.backoff * 2 ** (attempt - 1))

    def _json(self, method: str, path: str, *, retry: bool, **kwargs: Any) -> Any:
        response = self._send(method, self._url(path), retry=retry, **kwargs)
        if not response.is_success:
            raise _error(response)
        return response.json() if response.content else None

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
        contents: str | bytes | IO[bytes] | Path | None = None,
        content_type: str | None = None,
    ) -> ArtifactRecord:
        """Tag an artifact (upsert by ``key``). Big or file contents are streamed as multipart."""
        kwargs, retry = self._tag_request(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, contents=contents, content_type=content_type,
        )  # fmt: skip
        try:
            return record_from_json(self._json("POST", "artifacts", retry=retry, **kwargs))
        finally:
            handle = kwargs.get("_rewind")
            if isinstance(contents, os.PathLike) and hasattr(handle, "close"):
                handle.close()

    def page(
        self,
        *,
        kind: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
        key: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> tuple[list[ArtifactRecord], str | None]:
        """One page of records and the URL of the next (None at the end)."""
        params = self._list_params(
            kind=kind, session_id=session_id, source=source, key=key, limit=limit, cursor=cursor
        )
        body = self._json("GET", "artifacts", retry=True, params=params)
        return [record_from_json(r) for r in body["results"]], body["next"]

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
        params = self._list_params(
            kind=kind, session_id=session_id, source=source, key=key, limit=page_size
        )
        url: str | None = self._url("artifacts")
        while url:
            response = self._send("GET", url, retry=True, params=params)
            if not response.is_success:
                raise _error(response)
            body = response.json()
            yield from (record_from_json(r) for r in body["results"])
            url, params = body["next"], None  # next carries the filters and the cursor

    def get(self, artifact_id: str) -> ArtifactRecord:
        return record_from_json(self._json("GET", f"artifacts/{artifact_id}", retry=True))

    def delete(self, artifact_id: str) -> None:
        self._json("DELETE", f"artifacts/{artifact_id}", retry=False)

    def content(
        self, artifact_id: str, to: str | os.PathLike[str] | IO[bytes] | None = None
    ) -> int | Iterator[bytes]:
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
        response = self._send(
            "GET", self._url(f"artifacts/{artifact_id}/content"), retry=True, stream=True
        )
        try:
            if not response.is_success:
                response.read()
                raise _error(response)
            yield from response.iter_bytes(CHUNK)
        finally:
            response.close()

    def sessions(self, *, page_size: int = 200) -> Iterator[dict[str, Any]]:
        """Every session the caller may see, newest first: ``{"id", "owner", "createdAt"}``."""
        url: str | None = self._url("sessions")
        params: dict[str, Any] | None = {"limit": page_size}
        while url:
            response = self._send("GET", url, retry=True, params=params)
            if not response.is_success:
                raise _error(response)
            body = response.json()
            yield from body["results"]
            url, params = body["next"], None

    def session(self, session_id: str) -> dict[str, Any]:
        return self._json("GET", f"sessions/{session_id}", retry=True)

    def create_session(self, *, id: str | None = None, owner: str | None = None) -> dict[str, Any]:
        """Create a session (``id`` None: generated). A named id is retried safely (409 = exists)."""
        body = {k: v for k, v in {"id": id, "owner": owner}.items() if v is not None}
        return self._json("POST", "sessions", retry=False, json=body)

    def kinds(self) -> dict[str, Any]:
        """``{"kinds": [{"name", "description", "schema"}], "max", "agentTool"}``."""
        return self._json("GET", "artifacts/kinds", retry=True)

    def tool(self, format: str = "anthropic") -> dict[str, Any]:
        """The model-facing ``tag_artifact`` tool in ``anthropic``, ``openai`` or ``openai-responses``."""
        return self._json("GET", "tools/tag_artifact", retry=True, params={"format": format})

    def run_tool(
        self,
        input: Any,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> ToolResult:
        """Run a model's ``tag_artifact`` call; a refusal the model can fix comes back as a result."""
        body = {"input": input, "sessionId": session_id, "turnId": turn_id}
        body = {k: v for k, v in body.items() if v is not None or k == "input"}
        retry = _tool_key(input) is not None
        response = self._send("POST", self._url("tools/tag_artifact"), retry=retry, json=body)
        return self._run_tool_result(response)

    def subscribe(
        self, *, session_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The agent's (or a session's) event stream: an async iterator that reconnects with
        ``after`` by itself (``artifacts_app.client.events.subscribe``)."""
        return _subscribe(self._events_url(session_id), self.token, after)


class AsyncArtifactsClient(_Base):
    """The async twin of ``ArtifactsClient``: the same methods, awaited (``list`` is async-iterated)."""

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
        super().__init__(base_url, token, agent, timeout=timeout, retries=retries, backoff=backoff)
        self.http = httpx.AsyncClient(headers=self._headers(), timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncArtifactsClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _send(
        self, method: str, url: str, *, retry: bool, stream: bool = False, **kwargs: Any
    ) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self.http.build_request(method, url, **self._rewind(kwargs))
                response = await self.http.send(request, stream=stream)
            except httpx.TransportError as exc:
                safe = retry or isinstance(exc, httpx.ConnectError)
                if not safe or attempt > self.retries:
                    raise _connection_error(exc, attempt, safe) from exc
            else:
                if not (
                    retry and response.status_code in RETRY_STATUSES and attempt <= self.retries
                ):
                    return response
                await response.aclose()
            await asyncio.sleep(self.backoff * 2 ** (attempt - 1))

    async def _json(self, method: str, path: str, *, retry: bool, **kwargs: Any) -> Any:
        response = await self._send(method, self._url(path), retry=retry, **kwargs)
        if not response.is_success:
            raise _error(response)
        return response.json() if response.content else None

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
        contents: str | bytes | IO[bytes] | Path | None = None,
        content_type: str | None = None,
    ) -> ArtifactRecord:
        """Tag an artifact; a big or file ``contents`` is streamed as multipart."""
        kwargs, retry = self._tag_request(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, contents=contents, content_type=content_type,
        )  # fmt: skip
        try:
            return record_from_json(await self._json("POST", "artifacts", retry=retry, **kwargs))
        finally:
            handle = kwargs.get("_rewind")
            if isinstance(contents, os.PathLike) and hasattr(handle, "close"):
                handle.close()

    async def page(self, **filters: Any) -> tuple[list[ArtifactRecord], str | None]:
        cursor = filters.pop("cursor", None)
        params = self._list_params(**filters, cursor=cursor)
        body = await self._json("GET", "artifacts", retry=True, params=params)
        return [record_from_json(r) for r in body["results"]], body["next"]

    async def list(
        self,
        *,
        kind: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
        key: str | None = None,
        page_size: int = 200,
    ) -> AsyncIterator[ArtifactRecord]:
        params: dict[str, Any] | None = self._list_params(
            kind=kind, session_id=session_id, source=source, key=key, limit=page_size
        )
        url: str | None = self._url("artifacts")
        while url:
            response = await self._send("GET", url, retry=True, params=params)
            if not response.is_success:
                raise _error(response)
            body = response.json()
            for row in body["results"]:
                yield record_from_json(row)
            url, params = body["next"], None

    async def get(self, artifact_id: str) -> ArtifactRecord:
        return record_from_json(await self._json("GET", f"artifacts/{artifact_id}", retry=True))

    async def delete(self, artifact_id: str) -> None:
        await self._json("DELETE", f"artifacts/{artifact_id}", retry=False)

    async def content(
        self, artifact_id: str, to: str | os.PathLike[str] | IO[bytes] | None = None
    ) -> Any:
        """Written to ``to`` (answers the byte count), or with no ``to`` an async iterator of chunks."""
        if to is None:
            return self._chunks(artifact_id)
        size = 0
        handle = open(to, "wb") if isinstance(to, (str, os.PathLike)) else to
        try:
            async for chunk in self._chunks(artifact_id):
                handle.write(chunk)
                size += len(chunk)
        finally:
            if handle is not to:
                handle.close()
        return size

    async def _chunks(self, artifact_id: str) -> AsyncIterator[bytes]:
        response = await self._send(
            "GET", self._url(f"artifacts/{artifact_id}/content"), retry=True, stream=True
        )
        try:
            if not response.is_success:
                await response.aread()
                raise _error(response)
            async for chunk in response.aiter_bytes(CHUNK):
                yield chunk
        finally:
            await response.aclose()

    async def sessions(self, *, page_size: int = 200) -> AsyncIterator[dict[str, Any]]:
        url: str | None = self._url("sessions")
        params: dict[str, Any] | None = {"limit": page_size}
        while url:
            response = await self._send("GET", url, retry=True, params=params)
            if not response.is_success:
                raise _error(response)
            body = response.json()
            for row in body["results"]:
                yield row
            url, params = body["next"], None

    async def session(self, session_id: str) -> dict[str, Any]:
        return await self._json("GET", f"sessions/{session_id}", retry=True)

    async def create_session(
        self, *, id: str | None = None, owner: str | None = None
    ) -> dict[str, Any]:
        body = {k: v for k, v in {"id": id, "owner": owner}.items() if v is not None}
        return await self._json("POST", "sessions", retry=False, json=body)

    async def kinds(self) -> dict[str, Any]:
        return await self._json("GET", "artifacts/kinds", retry=True)

    async def tool(self, format: str = "anthropic") -> dict[str, Any]:
        return await self._json("GET", "tools/tag_artifact", retry=True, params={"format": format})

    async def run_tool(
        self,
        input: Any,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> ToolResult:
        body = {"input": input, "sessionId": session_id, "turnId": turn_id}
        body = {k: v for k, v in body.items() if v is not None or k == "input"}
        retry = _tool_key(input) is not None
        response = await self._send("POST", self._url("tools/tag_artifact"), retry=retry, json=body)
        return self._run_tool_result(response)

    def subscribe(
        self, *, session_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        return _subscribe(self._events_url(session_id), self.token, after)


def _subscribe(url: str, token: str, after: int | None) -> AsyncIterator[dict[str, Any]]:
    try:
        from artifacts_app.client.events import subscribe
    except ImportError as exc:  # the events issue provides it
        raise ClientError(
            "not_available", "Event subscriptions need artifacts_app.client.events (websockets)."
        ) from exc
    return subscribe(url, token, after)
