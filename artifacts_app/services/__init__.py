"""Writes, by noun: the one implementation of each (DESIGN.md "services/").

Every entry point (REST, admin, commands, websocket, Python API, tool) calls these functions with
plain Python values; none of them writes a model itself. Access is decided by the caller through
``access``; these functions enforce the data rules of API.md "Tag" and raise ``ArtifactError``.

``artifacts`` (tag, delete, evict), ``kinds`` (kinds declared over HTTP), ``history`` (restore, pin), ``pruning`` (prune), ``rules`` (the Tag rules that need no
database), ``sessions``, ``agents`` (freeform and declared), ``secrets`` (keys and tokens), ``tool``
(running a model's call), ``webhooks`` (webhooks: create, change, rotate, replay), ``blobs`` (collecting unreferenced blobs), ``indexing`` (the search index's backfill), ``uploads`` (resumable uploads, tus). The reads they need, and that
callers used to find here (``agent_get``, ``token_lookup``), are ``selectors``' and re-exported.
"""

from __future__ import annotations

from artifacts_app.names import keyed_id, new_id
from artifacts_app.selectors import agent_get, token_lookup
from artifacts_app.services._write import TagResult
from artifacts_app.services.agents import agent_create, agents_sync_declared
from artifacts_app.services.artifacts import (
    artifact_content_put,
    artifact_delete,
    artifact_tag,
    artifacts_delete,
    artifacts_evict,
)
from artifacts_app.services.blobs import GcReport, blob_collect_one, blobs_collect
from artifacts_app.services.history import artifact_pin, artifact_restore
from artifacts_app.services.indexing import search_backfill
from artifacts_app.services.kinds import kinds_declare
from artifacts_app.services.pruning import (
    PruneReport,
    artifacts_prune,
    events_prune,
    parse_duration,
)
from artifacts_app.services.rules import parse_data, tag_validate
from artifacts_app.services.secrets import (
    agent_key_create,
    agent_keys_revoke,
    api_key_revoke,
    token_revoke,
    user_token_create,
)
from artifacts_app.services.sessions import session_create
from artifacts_app.services.tool import tool_run
from artifacts_app.services.uploads import (
    UploadState,
    parse_checksum,
    upload_create,
    upload_delete,
    upload_status,
    upload_write,
    uploads_expire,
)
from artifacts_app.services.users import user_set
from artifacts_app.services.webhooks import (
    webhook_create,
    webhook_delete,
    webhook_replay,
    webhook_secret_rotate,
    webhook_update,
)

__all__ = [
    "webhook_create",
    "webhook_delete",
    "webhook_replay",
    "webhook_secret_rotate",
    "webhook_update",
    "GcReport",
    "PruneReport",
    "TagResult",
    "UploadState",
    "agent_create",
    "agent_get",
    "agent_key_create",
    "agent_keys_revoke",
    "agents_sync_declared",
    "api_key_revoke",
    "artifact_content_put",
    "artifact_delete",
    "artifact_pin",
    "artifact_restore",
    "artifact_tag",
    "artifacts_delete",
    "artifacts_evict",
    "artifacts_prune",
    "blob_collect_one",
    "blobs_collect",
    "events_prune",
    "keyed_id",
    "kinds_declare",
    "new_id",
    "parse_data",
    "parse_checksum",
    "parse_duration",
    "search_backfill",
    "session_create",
    "tag_validate",
    "token_lookup",
    "token_revoke",
    "tool_run",
    "upload_create",
    "upload_delete",
    "upload_status",
    "upload_write",
    "uploads_expire",
    "user_set",
    "user_token_create",
]
