"""The wire format, once, for both clients: what each call sends and how its answer is read.

Every API call is written here as an *operation*: a generator that yields the ``Request`` it needs
sent and receives the ``httpx.Response`` back, then returns the call's result (or raises
``ClientError``). It does no I/O. ``ArtifactsClient`` drives operations with a blocking
``httpx.Client`` and ``AsyncArtifactsClient`` with an ``httpx.AsyncClient``; both drivers use the
same retry policy (``Wire.retry_delay``). So a route, a field name, a status rule or a retry rule
is written in one place and the two clients cannot drift apart.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import quote

import httpx

from agent_artifacts_client.errors import ClientError, connection_error, from_response
from agent_artifacts_client.records import ArtifactRecord, record_from_json
from agent_artifacts_client.tools import ToolResult, is_model_error, tool_call_key

T = TypeVar("T")
Op = Generator["Request", httpx.Response, T]

INLINE_LIMIT = 4 * 1024 * 1024  # bigger bytes (and any file) go multipart, streamed
# Contents past this many bytes take the resumable road (API.md "Large contents"): known contents
# first, then a tus upload in chunks of UPLOAD_CHUNK, resumed after a dropped connection.
UPLOAD_THRESHOLD = 8 * 1024 * 1024
UPLOAD_CHUNK = 16 * 1024 * 1024
UPLOAD_RESUMES = 5  # dropped connections one upload goes on after
TUS = {"Tus-Resumable": "1.0.0"}
CHUNK = 256 * 1024
RETRY_STATUSES = frozenset({502, 503, 504})

Contents = str | bytes | bytearray | IO[bytes] | os.PathLike[str] | None
Progress = Callable[[int, int], None]  # (bytes the server holds, bytes in all)


@dataclass
class Request:
    """One HTTP request, and whether repeating it is safe (it cannot make a second record)."""

    method: str
    url: str
    retry: bool
    params: dict[str, Any] | None = None
    json: Any = None
    files: dict[str, Any] | None = None
    stream: bool = False
    headers: dict[str, str] | None = None
    content: bytes | None = None
    rewind: Any = None  # a file to seek back to its start before a retry
    opened: list[IO[bytes]] = field(default_factory=list)  # files this request opened itself

    def build(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        if self.rewind is not None and hasattr(self.rewind, "seek"):
            self.rewind.seek(0)
        kwargs: dict[str, Any] = {"params": self.params}
        if self.headers is not None:
            kwargs["headers"] = self.headers
        if self.files is not None:
            kwargs["files"] = self.files
        elif self.content is not None:
            kwargs["content"] = self.content
        elif self.json is not None:
            kwargs["json"] = self.json
        return http.build_request(self.method, self.url, **kwargs)

    def close(self) -> None:
        for handle in self.opened:
            handle.close()


def ok(response: httpx.Response) -> Any:
    """The JSON of a successful answer (None when empty); a refusal raises ``ClientError``."""
    if not response.is_success:
        raise from_response(response)
    return response.json() if response.content else None


def tag_body(
    *,
    data: Any,
    kind: str | None,
    key: str | None,
    title: str | None,
    session_id: str | None,
    turn_id: str | None,
    source: str | None,
    content_type: str | None,
) -> dict[str, Any]:
    """The JSON of a tag, without contents; fields left as None are left out (``data`` never)."""
    body = {
        "kind": kind,
        "key": key,
        "title": title,
        "data": data,
        "sessionId": session_id,
        "turnId": turn_id,
        "source": source,
        "contentType": content_type,
    }
    return {name: value for name, value in body.items() if value is not None or name == "data"}


def _number(value: Any, name: str = "version") -> int:
    # A bool is an int to Python; a version number it is not.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` is a version number (an int from 1), not {value!r}.")
    return value


def _filters(**filters: Any) -> dict[str, Any]:
    names = {"session_id": "sessionId", "turn_id": "turnId"}
    return {names.get(k, k): v for k, v in filters.items() if v is not None}


class _Source:
    """Large contents, read where they are (bytes, a path or a seekable binary file): hashed in
    one pass, then read a chunk at a time at any offset."""

    def __init__(self, contents: Any, size: int, name: str) -> None:
        self.contents = contents
        self.size = size
        self.name = name
        self.opened = isinstance(contents, os.PathLike)
        self.handle: Any = Path(contents).open("rb") if self.opened else contents

    def read_at(self, offset: int, size: int) -> bytes:
        if isinstance(self.handle, (bytes, bytearray)):
            return bytes(self.handle[offset : offset + size])
        self.handle.seek(offset)
        return bytes(self.handle.read(size))

    def digest(self) -> tuple[str, int]:
        sha = hashlib.sha256()
        offset = 0
        while offset < self.size:
            chunk = self.read_at(offset, min(CHUNK * 16, self.size - offset))
            if not chunk:
                break
            sha.update(chunk)
            offset += len(chunk)
        return sha.hexdigest(), offset

    def close(self) -> None:
        if self.opened:
            self.handle.close()


def _large(contents: Contents, threshold: int) -> _Source | None:
    """Contents past ``threshold`` whose size is known and that can be read again (the
    resumable road); None for the rest (a str, small bytes, a pipe)."""
    if isinstance(contents, (bytes, bytearray)):
        return _Source(contents, len(contents), "contents") if len(contents) > threshold else None
    if isinstance(contents, os.PathLike):
        size = Path(contents).stat().st_size
        return _Source(contents, size, Path(contents).name) if size > threshold else None
    if contents is None or isinstance(contents, str):
        return None
    seekable = getattr(contents, "seekable", lambda: False)()
    if not seekable:
        return None
    start = contents.tell()
    size = contents.seek(0, os.SEEK_END) - start
    contents.seek(start)
    if size <= threshold or start:
        return None
    return _Source(contents, size, Path(str(getattr(contents, "name", "contents"))).name)


class Wire:
    """The routes of one agent (API.md "HTTP routes") as operations."""

    def __init__(
        self,
        base_url: str,
        token: str,
        agent: str,
        *,
        retries: int = 3,
        backoff: float = 0.2,
        upload_threshold: int = UPLOAD_THRESHOLD,
        upload_chunk: int = UPLOAD_CHUNK,
    ) -> None:
        self.upload_threshold = upload_threshold
        self.upload_chunk = upload_chunk
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.agent = agent
        self.retries = retries
        self.backoff = backoff
        self.prefix = f"{self.base_url}/{quote(agent, safe='')}/v1/"

    # -- transport policy, shared by both drivers ------------------------------------------------

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}

    def url(self, path: str) -> str:
        return self.prefix + path

    def retry_delay(
        self,
        request: Request,
        attempt: int,
        *,
        response: httpx.Response | None = None,
        error: httpx.TransportError | None = None,
    ) -> float | None:
        """Seconds to wait before sending ``request`` again, or None to take this answer.
        A transport failure that is not to be retried raises ``ClientError("connection_error")``."""
        if error is not None:
            # A refused connection never reached the server: repeating it is always safe.
            safe = request.retry or isinstance(error, httpx.ConnectError)
            if not safe or attempt > self.retries:
                raise connection_error(error, attempt, safe) from error
        elif not (
            request.retry
            and response is not None
            and response.status_code in RETRY_STATUSES
            and attempt <= self.retries
        ):
            return None
        return self.backoff * 2 ** (attempt - 1)

    def events_url(self, session_id: str | None) -> str:
        prefix = self.prefix
        ws = "wss" + prefix[5:] if prefix.startswith("https") else "ws" + prefix[4:]
        return ws + (f"sessions/{quote(session_id, safe='')}/events" if session_id else "events")

    # -- operations ------------------------------------------------------------------------------

    def call(self, method: str, path: str, *, retry: bool, **kwargs: Any) -> Op[Any]:
        return ok((yield Request(method, self.url(path), retry, **kwargs)))

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
    ) -> Op[ArtifactRecord]:
        body = tag_body(
            data=data, kind=kind, key=key, title=title, session_id=session_id, turn_id=turn_id,
            source=source, content_type=content_type,
        )  # fmt: skip
        # A key is the upsert handle: repeating a keyed tag replaces, never duplicates.
        request = Request("POST", self.url("artifacts"), retry=key is not None)
        large = _large(contents, self.upload_threshold)
        if large is not None:
            return (yield from self._tag_large(body, request, large, content_type, on_progress))
        if contents is None:
            request.json = body
        elif isinstance(contents, str):
            request.json = {**body, "contents": contents}
        elif isinstance(contents, (bytes, bytearray)) and len(contents) <= INLINE_LIMIT:
            request.json = {**body, "contentsBase64": base64.b64encode(contents).decode("ascii")}
        else:
            if isinstance(contents, os.PathLike):
                handle: Any = Path(contents).open("rb")
                request.opened.append(handle)
            elif isinstance(contents, (bytes, bytearray)):
                handle = bytes(contents)
            else:  # a binary file: streamed; retried only when it can be read again
                handle = contents
                request.retry = request.retry and getattr(contents, "seekable", lambda: False)()
            request.rewind = handle
            request.files = {
                "record": (None, json.dumps(body), "application/json"),
                "contents": ("contents", handle, content_type or "application/octet-stream"),
            }
        try:
            return record_from_json(ok((yield request)))
        finally:
            request.close()

    def _tag_large(
        self,
        body: dict[str, Any],
        request: Request,
        source: _Source,
        content_type: str | None,
        on_progress: Progress | None,
    ) -> Op[ArtifactRecord]:
        """Known contents first (nothing sent if the agent stores them), else a resumable upload
        that goes on from the server's offset after a dropped connection, then the tag."""
        try:
            sha, size = source.digest()
            request.json = {**body, "contentsSha256": sha, "contentsSize": size}
            response = yield request
            if response.is_success:
                if on_progress is not None:
                    on_progress(size, size)
                return record_from_json(response.json())
            error = from_response(response)
            if error.code != "contents_unknown":
                raise error
            upload = yield from self._upload(source, size, content_type, on_progress)
            request.json = {**body, "upload": upload}
            return record_from_json(ok((yield request)))
        finally:
            source.close()

    def _upload(
        self, source: _Source, size: int, content_type: str | None, on_progress: Progress | None
    ) -> Op[str]:
        metadata = {"filename": source.name, "contentType": content_type}
        headers = {
            **TUS,
            "Upload-Length": str(size),
            "Upload-Metadata": ",".join(
                f"{name} {base64.b64encode(value.encode()).decode()}"
                for name, value in metadata.items()
                if value
            ),
        }
        made = yield Request("POST", self.url("uploads"), retry=False, headers=headers)
        if made.status_code != 201:
            raise from_response(made)
        url = str(made.url.join(made.headers["Location"]))
        offset, resumes = 0, 0
        while offset < size:
            chunk = source.read_at(offset, min(self.upload_chunk, size - offset))
            patch = Request(
                "PATCH",
                url,
                retry=False,
                headers={
                    **TUS,
                    "Upload-Offset": str(offset),
                    "Content-Type": "application/offset+octet-stream",
                },
                content=chunk,
            )
            try:
                response = yield patch
            except ClientError as exc:
                if exc.code != "connection_error" or resumes >= UPLOAD_RESUMES:
                    raise
                resumes += 1
                # What reached the server is kept: ask where it stands and go on from there.
                offset = yield from self._offset(url)
                continue
            if response.status_code in (409, 423):  # another offset, or the cut PATCH still ends
                offset = yield from self._offset(url)
                continue
            if response.status_code != 204:
                raise from_response(response)
            offset = int(response.headers["Upload-Offset"])
            if on_progress is not None:
                on_progress(offset, size)
        return url.rsplit("/", 1)[1]

    def _offset(self, url: str) -> Op[int]:
        response = yield Request("HEAD", url, retry=True, headers=dict(TUS))
        if response.status_code != 200:
            raise from_response(response)
        return int(response.headers["Upload-Offset"])

    def page(self, url: str, params: dict[str, Any] | None) -> Op[tuple[list[Any], str | None]]:
        """One page of a list route: its rows and the absolute URL of the next page (or None)."""
        body = ok((yield Request("GET", url, retry=True, params=params)))
        return body["results"], body["next"]

    def artifacts_query(
        self,
        *,
        kind: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
        key: str | None = None,
        q: str | None = None,
        where: dict[str, Any] | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """The list's URL and query; ``where`` as an object is sent as its JSON text."""
        if where is not None and not isinstance(where, str):
            where = json.dumps(where, ensure_ascii=False, separators=(",", ":"))
        return self.url("artifacts"), _filters(
            kind=kind, session_id=session_id, source=source, key=key, q=q, where=where,
            limit=limit, cursor=cursor,
        )  # fmt: skip

    def sessions_query(self, *, limit: int | None = None) -> tuple[str, dict[str, Any]]:
        return self.url("sessions"), _filters(limit=limit)

    def get(self, artifact_id: str) -> Op[ArtifactRecord]:
        return record_from_json((yield from self._artifact("GET", artifact_id)))

    def delete(self, artifact_id: str) -> Op[None]:
        yield from self._artifact("DELETE", artifact_id, retry=False)

    def _artifact(self, method: str, artifact_id: str, *, retry: bool = True) -> Op[Any]:
        return (
            yield from self.call(method, f"artifacts/{quote(artifact_id, safe='')}", retry=retry)
        )

    def content_request(self, artifact_id: str, version: int | None = None) -> Request:
        """The streamed download of a record's content, or of one version's (the driver reads it
        in chunks)."""
        path = f"artifacts/{quote(artifact_id, safe='')}"
        if version is not None:
            path += f"/versions/{_number(version)}"
        return Request("GET", self.url(path + "/content"), retry=True, stream=True)

    # -- versions, pins and diffs (API.md "Versions, pins and diffs") ------------------------------

    def versions_query(
        self, artifact_id: str, *, limit: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        return self.url(f"artifacts/{quote(artifact_id, safe='')}/versions"), _filters(limit=limit)

    def version(self, artifact_id: str, number: int) -> Op[ArtifactRecord]:
        path = f"artifacts/{quote(artifact_id, safe='')}/versions/{_number(number)}"
        return record_from_json((yield from self.call("GET", path, retry=True)))

    def diff(self, artifact_id: str, number: int, from_: int | None = None) -> Op[dict[str, Any]]:
        path = f"artifacts/{quote(artifact_id, safe='')}/versions/{_number(number)}/diff"
        params = None if from_ is None else {"from": _number(from_, "from_")}
        return (yield from self.call("GET", path, retry=True, params=params))

    def restore(self, artifact_id: str, number: int) -> Op[ArtifactRecord]:
        path = f"artifacts/{quote(artifact_id, safe='')}/versions/{_number(number)}/restore"
        # Not retried on a dropped answer: each restore makes a new version.
        return record_from_json((yield from self.call("POST", path, retry=False)))

    def pin(self, artifact_id: str, pinned: bool) -> Op[ArtifactRecord]:
        path = f"artifacts/{quote(artifact_id, safe='')}/pin"
        method = "PUT" if pinned else "DELETE"
        return record_from_json((yield from self.call(method, path, retry=True)))

    def declare(
        self,
        kinds: dict[str, Any],
        *,
        agent_tool: bool | None = None,
        max: int | None = None,  # noqa: A002
        keep_versions: int | None = None,
    ) -> Op[dict[str, Any]]:
        body = {
            "kinds": kinds,
            **_filters(agentTool=agent_tool, max=max, keepVersions=keep_versions),
        }
        # The body replaces the whole declaration: repeating it changes nothing more.
        return (yield from self.call("PUT", "artifacts/kinds", retry=True, json=body))

    def session(self, session_id: str) -> Op[dict[str, Any]]:
        return (yield from self.call("GET", f"sessions/{quote(session_id, safe='')}", retry=True))

    def create_session(
        self, *, id: str | None = None, owner: str | None = None
    ) -> Op[dict[str, Any]]:  # noqa: A002
        body = {k: v for k, v in {"id": id, "owner": owner}.items() if v is not None}
        # Not retried on a dropped answer: a second try could make a second (generated) session.
        return (yield from self.call("POST", "sessions", retry=False, json=body))

    def kinds(self) -> Op[dict[str, Any]]:
        return (yield from self.call("GET", "artifacts/kinds", retry=True))

    def tool(self, format: str = "anthropic") -> Op[dict[str, Any]]:  # noqa: A002
        return (
            yield from self.call("GET", "tools/tag_artifact", retry=True, params={"format": format})
        )

    def run_tool(
        self,
        input: Any,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,  # noqa: A002
    ) -> Op[ToolResult]:
        body: dict[str, Any] = {"input": input}
        body.update(_filters(session_id=session_id, turn_id=turn_id))
        retry = tool_call_key(input) is not None
        response = yield Request("POST", self.url("tools/tag_artifact"), retry, json=body)
        if response.is_success:
            return ToolResult.tagged(record_from_json(response.json()), response.status_code == 201)
        error = from_response(response)
        if is_model_error(response.status_code, error.details):
            return ToolResult.refused(error.code, error.message, error.details)
        raise error


__all__ = ["CHUNK", "ClientError", "Op", "Request", "Wire", "ok", "tag_body"]
