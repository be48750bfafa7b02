"""Python clients of the service, for agents whose host code runs in another process or machine.

from artifacts_app.client import ArtifactsClient, subscribe
with ArtifactsClient("http://localhost:8000", token, "reviewer") as client:
    record = client.tag(kind="report", key="r-1", data="…")

async for event in subscribe("ws://localhost:8000/reviewer/v1/sessions/s1/events", token):
    ...
"""

from artifacts_app.client.events import StreamRefused, subscribe
from artifacts_app.client.http import ArtifactsClient, AsyncArtifactsClient, ClientError

__all__ = ["ArtifactsClient", "AsyncArtifactsClient", "ClientError", "StreamRefused", "subscribe"]
