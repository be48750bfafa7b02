"""agent-artifacts from any Python process, without Django: REST, events, the ``tag_artifact`` tool.

from agent_artifacts_client import ArtifactsClient, subscribe

with ArtifactsClient("http://localhost:8000", token, "reviewer") as client:
    record = client.tag(kind="report", key="r-1", data="…")

async for event in subscribe("ws://localhost:8000/reviewer/v1/sessions/s1/events", token):
    ...
"""

from agent_artifacts_client.async_client import AsyncArtifactsClient
from agent_artifacts_client.client import ArtifactsClient
from agent_artifacts_client.errors import ClientError
from agent_artifacts_client.events import StreamRefused, subscribe
from agent_artifacts_client.records import ArtifactRecord, ContentInfo
from agent_artifacts_client.tools import ToolResult, is_model_error

__all__ = [
    "ArtifactRecord",
    "ArtifactsClient",
    "AsyncArtifactsClient",
    "ClientError",
    "ContentInfo",
    "StreamRefused",
    "ToolResult",
    "is_model_error",
    "subscribe",
]
