"""``AgentArtifactsService``: Google ADK's artifact service, backed by agent-artifacts.

    from agent_artifacts_client.adk import AgentArtifactsService

    runner = Runner(
        app_name="my-app", agent=root_agent, session_service=InMemorySessionService(),
        artifact_service=AgentArtifactsService(base_url="http://127.0.0.1:8000",
                                               token=AGENT_KEY, agent="notes"),
    )

Installed with the ``[adk]`` extra (``pip install "./clients/python[adk]"``). ``token`` is an agent
key of ``agent``; any ADK ``app_name`` works. How ADK's names land in the service:

- **scope**: an artifact is *user-scoped* when its filename starts with ``user:`` or no
  ``session_id`` is given (as ADK's base class and ``FileArtifactService`` say), else it belongs to
  the ADK session. A user-scoped ``user:notes`` saved from a session and ``notes`` saved with no
  session are the same artifact.
- **sessions**: each ADK session (app, user, session) is a session of the agent, and so is each
  (app, user) pair's user scope. Their ids are ``adk-<hash of the ADK names>-<the ADK session id,
  or "user">``, so two apps or users never share one. The ADK ``user_id`` is the session's
  **owner** when the server has a user of that name (``owners=True``): that person then sees their
  artifacts with their own token and in the playground. Otherwise the session has no owner.
- **keys**: ADK's own artifact URI without its version,
  ``artifact://apps/<app>/users/<user>/sessions/<session>/artifacts/<filename>`` or
  ``artifact://apps/<app>/users/<user>/artifacts/<name>`` (app, user and session percent-encoded);
  the title is the filename and the kind ``kind`` (default ``adk-artifact``).
- **contents**: a ``types.Part`` with ``text`` is stored as UTF-8 text, one with ``inline_data`` as
  its bytes under its MIME type; a ``file_data`` part keeps only its URI (an ``artifact://``
  reference is followed on load, as ADK's services do). ``data`` holds the ADK names, which kind of
  part it was, its MIME type and ``custom_metadata``, so a load gives back the part that was saved.
- **versions**: ADK counts from 0, the service from 1: ADK version ``v`` is the service's ``v + 1``.
  A record keeps its newest ``keep_versions`` (10 by default): older ADK versions then load as
  None and are not listed, and numbering goes on (ADK's versions are increasing, not necessarily
  contiguous). Deleting an artifact removes every version; saving it again starts at 0 again, as
  ``InMemoryArtifactService`` does.
- ``canonical_uri`` of a version is the HTTP URL of that version's content on the service.
- **names**: ``app_name``, ``user_id`` and a ``session_id`` in use are held to ADK's own rule for
  its storage paths (``validate_path_segment``: not empty, no NUL, no leading slash or backslash,
  no drive such as ``C:``, no ``.``/``..`` segment, no reserved segment ``apps``, ``users``,
  ``sessions``, ``artifacts`` or ``versions`` beside a slash). A name that breaks it raises ADK's
  ``InputValidationError`` with ADK's own message before any request is sent, as ADK's services
  do; the session id of a ``user:`` artifact is not used and not checked, as in ADK.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from google.adk.artifacts import BaseArtifactService, artifact_util
from google.adk.artifacts.base_artifact_service import ArtifactVersion
from google.genai import types

from agent_artifacts_client.async_client import AsyncArtifactsClient
from agent_artifacts_client.errors import ClientError
from agent_artifacts_client.records import ArtifactRecord

try:
    from google.adk.errors.input_validation_error import InputValidationError
except ImportError:  # pragma: no cover - older ADK
    InputValidationError = ValueError  # type: ignore[misc,assignment,unused-ignore]

# ADK's own rule for the names in its storage paths; None in an ADK older than the rule.
_adk_segment_rule: Callable[[str, str], None] | None = getattr(
    artifact_util, "validate_path_segment", None
)

USER_PREFIX = "user:"
DEFAULT_KIND = "adk-artifact"
MAX_REFERENCE_DEPTH = 5  # as ADK's services: a reference chain that loops ends with an error
_NOT_SID = re.compile(r"[^A-Za-z0-9._:-]")
# ADK's reserved storage segments and drive prefix (google.adk.artifacts.artifact_util).
RESERVED_SEGMENTS = frozenset({"apps", "users", "sessions", "artifacts", "versions"})
_DRIVE = re.compile(r"[A-Za-z]:")


def check_segment(value: object, field_name: str) -> None:
    """Raise ADK's ``InputValidationError``, worded as ADK words it, for an ``app_name``,
    ``user_id`` or ``session_id`` ADK's services refuse (see the module doc, "names").

    ADK's own ``validate_path_segment`` when the installed ADK has it; for an older ADK, the
    same rule and wording (``test_adk`` holds the two to the same answers)."""
    if not isinstance(value, str):
        if value:  # a number, a list…: no name at all
            raise InputValidationError(f"{field_name} must be a string.")
        value = ""  # None: empty, as ADK words it
    if _adk_segment_rule is not None:
        _adk_segment_rule(value, field_name)
        return
    same_rule_as_adk(value, field_name)


def same_rule_as_adk(value: str, field_name: str) -> None:
    """ADK's ``validate_path_segment`` (google-adk 2.13), for an ADK that does not have it."""
    if not value or not value.strip():
        raise InputValidationError(f"{field_name} must not be empty.")
    if "\x00" in value:
        raise InputValidationError(f"{field_name} must not contain null bytes.")
    if value.startswith("/") or value.startswith("\\"):
        raise InputValidationError(
            f"{field_name} {value!r} must not be an absolute path or start with a slash."
        )
    if _DRIVE.match(value) is not None:
        raise InputValidationError(f"{field_name} {value!r} must not be drive-qualified.")
    segments = value.replace("\\", "/").split("/")
    if value in (".", "..") or ".." in segments:
        raise InputValidationError(f"{field_name} {value!r} must not contain traversal segments.")
    if len(segments) > 1 and not RESERVED_SEGMENTS.isdisjoint(s.casefold() for s in segments):
        raise InputValidationError(
            f"{field_name} {value!r} must not contain reserved path segments."
        )


@dataclass(frozen=True)
class _Scope:
    """Where one ADK artifact lives in the service."""

    app: str
    user: str
    session: str | None  # None: the user scope
    filename: str  # as the caller gave it

    @property
    def sid(self) -> str:
        digest = hashlib.sha256(
            "\0".join((self.app, self.user, self.session or "")).encode()
        ).hexdigest()[:16]
        readable = _NOT_SID.sub("_", self.session)[:96] if self.session else "user"
        return f"adk-{digest}-{readable}"

    @property
    def name(self) -> str:
        """The artifact's name inside its scope (a user-scoped one without ``user:``)."""
        if self.session is None and self.filename.startswith(USER_PREFIX):
            return self.filename[len(USER_PREFIX) :]
        return self.filename

    @property
    def key(self) -> str:
        base = f"artifact://apps/{_enc(self.app)}/users/{_enc(self.user)}/"
        if self.session is not None:
            base += f"sessions/{_enc(self.session)}/"
        return f"{base}artifacts/{self.name}"


def _enc(segment: str) -> str:
    return quote(segment, safe="")


def _scope(app_name: str, user_id: str, filename: str, session_id: str | None) -> _Scope:
    """Where an artifact lives; ADK's refusals of its names first, before any request."""
    check_segment(app_name, "app_name")
    check_segment(user_id, "user_id")
    if not isinstance(filename, str) or not filename.strip():
        raise InputValidationError("filename must be a non-empty string.")
    user_scoped = session_id is None or filename.startswith(USER_PREFIX)
    if not user_scoped:  # as ADK: a user: artifact's session id is not used, so not checked
        check_segment(session_id, "session_id")
    return _Scope(app_name, user_id, None if user_scoped else session_id, filename)


def _ensure_part(artifact: types.Part | dict[str, Any]) -> types.Part:
    return types.Part.model_validate(artifact) if isinstance(artifact, dict) else artifact


def _is_tombstone(part: types.Part) -> bool:
    """ADK's rewind marker (an empty application/octet-stream blob) loads as absent."""
    blob = part.inline_data
    return (
        blob is not None
        and blob.data == b""
        and blob.mime_type == "application/octet-stream"
        and part.text is None
        and part.file_data is None
    )


class AgentArtifactsService(BaseArtifactService):
    """ADK's ``BaseArtifactService`` over one agent of agent-artifacts (see the module doc)."""

    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        agent: str,
        kind: str = DEFAULT_KIND,
        owners: bool = True,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url
        self.token = token
        self.agent = agent
        self.kind = kind
        self.owners = owners
        self.timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: AsyncArtifactsClient | None = None
        self._sessions: set[str] = set()
        # A keyed record's id is derived from (agent, key) by the server: stable, so cacheable.
        self._ids: dict[str, str] = {}

    # -- plumbing ---------------------------------------------------------------------------------

    @property
    def client(self) -> AsyncArtifactsClient:
        """The HTTP client of the running event loop (httpx's connections belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http = AsyncArtifactsClient(
                self.base_url, self.token, self.agent, timeout=self.timeout
            )
            self._loop = loop
        return self._http

    async def aclose(self) -> None:
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.aclose()
        self._http = None

    async def _session(self, scope: _Scope) -> str:
        sid = scope.sid
        if sid in self._sessions:
            return sid
        owner = scope.user if self.owners else None
        try:
            await self.client.create_session(id=sid, owner=owner)
        except ClientError as error:
            if error.code == "unknown_user":  # no such user on the server: a session of no one
                try:
                    await self.client.create_session(id=sid)
                except ClientError as again:
                    if again.status != 409:
                        raise
            elif error.status != 409:  # 409: it exists already, which is all we need
                raise
        self._sessions.add(sid)
        return sid

    async def _id(self, scope: _Scope) -> str | None:
        found = self._ids.get(scope.key)
        if found is None:
            rows, _ = await self.client.page(key=scope.key, limit=1)
            if not rows:
                return None
            found = self._ids[scope.key] = rows[0].id
        return found

    async def _record(self, scope: _Scope, version: int | None) -> ArtifactRecord | None:
        """The record (ADK ``version`` None: as it is now), or None when there is none."""
        if version is not None and (isinstance(version, bool) or version < 0):
            return None
        artifact_id = await self._id(scope)
        if artifact_id is None:
            return None
        try:
            if version is None:
                return await self.client.get(artifact_id)
            return await self.client.version(artifact_id, version + 1)
        except ClientError as error:
            if error.status == 404:  # deleted, or a version past keep_versions
                return None
            raise

    def _artifact_version(self, record: ArtifactRecord) -> ArtifactVersion:
        data = record.data if isinstance(record.data, dict) else {}
        return ArtifactVersion(
            version=record.version - 1,
            canonical_uri=(
                f"{self.client.wire.url('artifacts')}/{quote(record.id, safe='')}"
                f"/versions/{record.version}/content"
            ),
            custom_metadata=data.get("customMetadata") or {},
            create_time=record.updated_at.timestamp(),
            mime_type=data.get("mimeType"),
        )

    def _check_reference(self, uri: str, scope: _Scope, session_id: str | None) -> Any:
        parsed = artifact_util.parse_artifact_uri(uri)
        if not parsed:
            raise InputValidationError(f"Invalid artifact reference URI: {uri}")
        if parsed.app_name != scope.app or parsed.user_id != scope.user:
            raise InputValidationError(
                "Artifact references must stay within the same app and user scope."
            )
        if parsed.session_id is not None and parsed.session_id != session_id:
            raise InputValidationError(
                "Session-scoped artifact references must stay within the same session scope."
            )
        return parsed

    # -- BaseArtifactService ----------------------------------------------------------------------

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        scope = _scope(app_name, user_id, filename, session_id)
        part = _ensure_part(artifact)
        data: dict[str, Any] = {
            "app": app_name,
            "user": user_id,
            "session": scope.session,
            "filename": filename,
            "customMetadata": custom_metadata or {},
        }
        contents: str | bytes | None = None
        content_type = None
        if part.inline_data is not None:
            blob = part.inline_data
            data.update(part="bytes", mimeType=blob.mime_type, displayName=blob.display_name)
            contents, content_type = blob.data or b"", blob.mime_type or None
        elif part.text is not None:
            data.update(part="text", mimeType="text/plain")
            contents = part.text
        elif part.file_data is not None and part.file_data.file_uri:
            file, uri = part.file_data, part.file_data.file_uri
            reference = uri.startswith("artifact://")
            if reference:  # its type is the target's, known only on load
                self._check_reference(uri, scope, session_id)
            data.update(
                part="file",
                fileUri=uri,
                mimeType=None if reference else file.mime_type,
                displayName=file.display_name,
            )
        else:
            raise InputValidationError("Not supported artifact type.")
        record = await self.client.tag(
            kind=self.kind,
            key=scope.key,
            title=filename,
            data=data,
            session_id=await self._session(scope),
            contents=contents,
            content_type=content_type,
        )
        self._ids[scope.key] = record.id
        return record.version - 1

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        return await self._load(app_name, user_id, filename, session_id, version, 0)

    async def _load(
        self,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None,
        version: int | None,
        depth: int,
    ) -> types.Part | None:
        scope = _scope(app_name, user_id, filename, session_id)
        record = await self._record(scope, version)
        if record is None:
            return None
        data = record.data if isinstance(record.data, dict) else {}
        if data.get("part") == "file":
            uri = data.get("fileUri") or ""
            if not uri.startswith("artifact://"):
                file = types.FileData(
                    file_uri=uri,
                    mime_type=data.get("mimeType"),
                    display_name=data.get("displayName"),
                )
                return types.Part(file_data=file)
            if depth >= MAX_REFERENCE_DEPTH:
                raise InputValidationError(
                    f"Exceeded maximum recursion depth resolving artifact reference: {uri}"
                )
            ref = self._check_reference(uri, scope, session_id)
            return await self._load(
                ref.app_name, ref.user_id, ref.filename, ref.session_id, ref.version, depth + 1
            )
        stream = await self.client.content(record.id, version=record.version)
        body = b"".join([chunk async for chunk in stream])
        if data.get("part") == "text":
            return types.Part(text=body.decode("utf-8"))
        blob = types.Blob(
            data=body, mime_type=data.get("mimeType"), display_name=data.get("displayName")
        )
        part = types.Part(inline_data=blob)
        return None if _is_tombstone(part) else part

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        scopes = [_scope(app_name, user_id, USER_PREFIX, None)]
        if session_id is not None:  # checked here too, as ADK does, even when nothing is saved
            scopes.append(_scope(app_name, user_id, "-", session_id))
        names: set[str] = set()
        for scope in scopes:  # a session never made lists as empty
            async for record in self.client.list(session_id=scope.sid, kind=self.kind):
                if isinstance(record.data, dict) and isinstance(record.data.get("filename"), str):
                    names.add(record.data["filename"])
        return sorted(names)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        scope = _scope(app_name, user_id, filename, session_id)
        artifact_id = await self._id(scope)
        if artifact_id is None:
            return
        try:
            await self.client.delete(artifact_id)
        except ClientError as error:
            if error.status != 404:  # already gone is what was asked
                raise

    async def _versions(self, scope: _Scope) -> list[ArtifactRecord]:
        artifact_id = await self._id(scope)
        if artifact_id is None:
            return []
        try:
            found = [record async for record in self.client.versions(artifact_id)]
        except ClientError as error:
            if error.status == 404:
                return []
            raise
        return sorted(found, key=lambda record: record.version)

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        scope = _scope(app_name, user_id, filename, session_id)
        return [record.version - 1 for record in await self._versions(scope)]

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        scope = _scope(app_name, user_id, filename, session_id)
        return [self._artifact_version(record) for record in await self._versions(scope)]

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        record = await self._record(_scope(app_name, user_id, filename, session_id), version)
        return None if record is None else self._artifact_version(record)


__all__ = ["AgentArtifactsService"]
