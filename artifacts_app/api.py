"""The in-process Python API: what host code inside the Django process uses.

    from artifacts_app import artifacts
    api = artifacts("reviewer", session_id="s_1", turn_id="t-3")   # session-bound
    record = api.tag(kind="reviewed-pr", key=url, data={...}, contents=b"...", content_type="text/markdown")

Each method calls the one service layer (``services``/``selectors``), so the rules are exactly the
HTTP tag's. The facade acts as the agent's host code: it has the rights of the agent's key.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any, TypedDict

from asgiref.sync import sync_to_async

from artifacts_app import selectors, services
from artifacts_app.errors import ArtifactError
from artifacts_app.evals import current_turn_id
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.records import ArtifactRecord, ContentInfo
from artifacts_app.registry import spec_for
from artifacts_app.selectors import versions

if TYPE_CHECKING:
    from artifacts_app.tool import ToolResult

__all__ = ["ArtifactRecord", "Artifacts", "ContentInfo"]

_UNSET: Any = object()


class _Filters(TypedDict):
    """What ``list`` filters by: the selectors' keyword arguments, checked against them."""

    agent: str
    kind: str | None
    session_id: str | None
    source: str | None
    key: str | None


class Artifacts:
    """The artifacts of one agent; bound to a session and turn when given them.

    A bound facade fills ``session_id`` and ``turn_id`` of every tag, and its ``list`` shows that
    session unless told otherwise. Inside ``evals.capture_turn`` an unbound turn is taken from it.
    """

    def __init__(
        self, agent: str, *, session_id: str | None = None, turn_id: str | None = None
    ) -> None:
        self.agent = agent
        self.session_id = session_id
        self.turn_id = turn_id

    def __repr__(self) -> str:
        return (
            f"artifacts({self.agent!r}, session_id={self.session_id!r}, turn_id={self.turn_id!r})"
        )

    def tag(
        self,
        *,
        data: JSON,
        kind: str | None = None,
        key: str | None = None,
        title: str | None = None,
        contents: bytes | str | IO[bytes] | Iterable[bytes] | None = None,
        content_type: str | None = None,
        session_id: str | None = _UNSET,
        turn_id: str | None = _UNSET,
        source: str = "host",
        upload: str | None = None,
        contents_sha256: str | None = None,
        contents_size: int | None = None,
    ) -> ArtifactRecord:
        """Tag an artifact (upsert by ``key``); answers the stored record. Instead of
        ``contents``: a finished ``upload``, or known contents (``contents_sha256`` with
        ``contents_size``) of a blob the agent already stores."""
        result = services.artifact_tag(
            agent=self.agent,
            data=data,
            kind=kind,
            key=key,
            title=title,
            contents=contents,
            content_type=content_type,
            session_id=self.session_id if session_id is _UNSET else session_id,
            turn_id=self._turn(turn_id),
            source=source,
            upload=upload,
            contents_sha256=contents_sha256,
            contents_size=contents_size,
        )
        return result.record

    def list(  # shadows builtins.list in this class: annotations below say builtins.list
        self,
        *,
        kind: str | None = None,
        session_id: str | None = _UNSET,
        source: str | None = None,
        key: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[ArtifactRecord]:
        """Records newest-updated first; all of them unless ``limit`` (1–500) is given."""
        filters: _Filters = {
            "agent": self.agent,
            "kind": kind,
            "session_id": self.session_id if session_id is _UNSET else session_id,
            "source": source,
            "key": key,
        }
        if limit is not None:
            return selectors.artifacts_page(limit=limit, **filters).records()
        return selectors.artifacts_all(**filters)

    def get(self, artifact_id: str) -> ArtifactRecord:
        return selectors.artifact_get(agent=self.agent, artifact_id=artifact_id)

    def delete(self, artifact_id: str) -> None:
        """Delete a record and its content; emits ``artifact.deleted``."""
        services.artifact_delete(agent=self.agent, artifact_id=artifact_id)

    # --- history (API.md "Versions, pins and diffs"): the agent key's rights, all versions -------

    def versions(self, artifact_id: str) -> builtins.list[ArtifactRecord]:
        """The record's kept versions, newest first; each is the record as that tag stored it."""
        return versions.versions_all(agent=self.agent, artifact_id=artifact_id)

    def version(self, artifact_id: str, number: int) -> ArtifactRecord:
        """Version ``number`` of a record (404 ``unknown_version`` once dropped past keep_versions)."""
        return versions.version_get(
            agent=self.agent, artifact_id=artifact_id, number=versions.check_number(number)
        )

    def diff(self, artifact_id: str, number: int, *, from_: int | None = None) -> JSONObject:
        """``{"from", "to", "fields", "data"}``: changed top-level fields and an RFC 6902 patch
        from ``from_``'s data (default: the version before ``number``) to ``number``'s."""
        return versions.versions_diff(
            agent=self.agent,
            artifact_id=artifact_id,
            number=versions.check_number(number),
            from_=None if from_ is None else versions.check_number(from_, field="from"),
        )

    def restore(
        self, artifact_id: str, number: int, *, turn_id: str | None = _UNSET
    ) -> ArtifactRecord:
        """A new version with version ``number``'s kind, title and data, in the record's current
        session; its content only if it was tagged in that session. Emits ``artifact.tagged``."""
        return services.artifact_restore(
            agent=self.agent,
            artifact_id=artifact_id,
            number=versions.check_number(number),
            turn_id=self._turn(turn_id),
        ).record

    def pin(self, artifact_id: str) -> ArtifactRecord:
        """Pin a record: eviction skips it. Emits ``artifact.pinned`` when it changes."""
        return services.artifact_pin(agent=self.agent, artifact_id=artifact_id, pinned=True)

    def unpin(self, artifact_id: str) -> ArtifactRecord:
        return services.artifact_pin(agent=self.agent, artifact_id=artifact_id, pinned=False)

    def create_session(self, *, id: str | None = None, owner: str | None = None) -> str:
        """Create a session of this agent; answers its id (generated when ``id`` is None)."""
        return services.session_create(agent=self.agent, sid=id, owner=owner).sid

    def tool(self, format: str = "anthropic") -> JSONObject:
        """The model-facing ``tag_artifact`` tool: ``anthropic``, ``openai`` or ``openai-responses``.

        Raises ``ArtifactError`` (``tool_not_offered``) when the agent offers no built-in tool.
        """
        from artifacts_app import tool

        return tool.tool_definition(spec_for(selectors.agent_get(self.agent)), format)

    def run_tool(
        self,
        input: JSON,
        *,
        session_id: str | None = _UNSET,
        turn_id: str | None = _UNSET,
    ) -> ToolResult:
        """Run a model's ``tag_artifact`` call (its input: a dict, or OpenAI's JSON arguments).

        Answers a ``ToolResult``: the record tagged with ``source="model"``, or a refusal whose
        text names the field to fix. Hand ``result.anthropic(id)`` / ``result.openai(id)`` back
        to the model. Refusals that are not the model's to fix (unknown session…) raise.
        """
        from artifacts_app import tool

        try:
            result = services.tool_run(
                agent=self.agent,
                input=input,
                session_id=self.session_id if session_id is _UNSET else session_id,
                turn_id=self._turn(turn_id),
            )
        except ArtifactError as exc:
            if tool.is_model_error(exc.status, exc.details):
                return tool.ToolResult.refused(exc.code, exc.message, exc.details)
            raise
        return tool.ToolResult.tagged(result.record, result.created)

    async def arun_tool(self, input: JSON, **kwargs: str | None) -> ToolResult:
        return await sync_to_async(self.run_tool)(input, **kwargs)

    async def atag(self, **kwargs: Any) -> ArtifactRecord:
        return await sync_to_async(self.tag)(**kwargs)

    async def alist(self, **kwargs: Any) -> builtins.list[ArtifactRecord]:
        return await sync_to_async(self.list)(**kwargs)

    async def aget(self, artifact_id: str) -> ArtifactRecord:
        return await sync_to_async(self.get)(artifact_id)

    async def adelete(self, artifact_id: str) -> None:
        await sync_to_async(self.delete)(artifact_id)

    async def aversions(self, artifact_id: str) -> builtins.list[ArtifactRecord]:
        return await sync_to_async(self.versions)(artifact_id)

    async def aversion(self, artifact_id: str, number: int) -> ArtifactRecord:
        return await sync_to_async(self.version)(artifact_id, number)

    async def adiff(self, artifact_id: str, number: int, **kwargs: int | None) -> JSONObject:
        return await sync_to_async(self.diff)(artifact_id, number, **kwargs)

    async def arestore(self, artifact_id: str, number: int, **kwargs: str | None) -> ArtifactRecord:
        return await sync_to_async(self.restore)(artifact_id, number, **kwargs)

    async def apin(self, artifact_id: str) -> ArtifactRecord:
        return await sync_to_async(self.pin)(artifact_id)

    async def aunpin(self, artifact_id: str) -> ArtifactRecord:
        return await sync_to_async(self.unpin)(artifact_id)

    def _turn(self, turn_id: str | None) -> str | None:
        if turn_id is not _UNSET:
            return turn_id
        if self.turn_id is not None:
            return self.turn_id
        return current_turn_id(self.agent)
