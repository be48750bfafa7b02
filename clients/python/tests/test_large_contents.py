"""Large contents take the resumable road on their own (API.md "Large contents"): known contents
first, else a tus upload that goes on from the server's offset after a dropped connection."""

from __future__ import annotations

import hashlib
import os

import pytest
from agent_artifacts_client import ArtifactsClient, AsyncArtifactsClient
from proxies import BudgetProxy

MIB = 1024 * 1024


def test_a_dropped_upload_goes_on_and_known_contents_are_not_sent_again(served, tmp_path):
    data = os.urandom(20 * MIB)
    proxy = BudgetProxy(served.port, budget=12 * MIB)  # mid-way through the first PATCH
    progress: list[tuple[int, int]] = []
    try:
        with ArtifactsClient(proxy.base, served.notes_key, "notes", upload_threshold=MIB) as client:
            record = client.tag(
                data={"run": 1},
                key="big-1",
                contents=data,
                content_type="application/x-parquet",
                on_progress=lambda held, total: progress.append((held, total)),
            )
    finally:
        proxy.close()
    assert proxy.cuts == 1
    assert record.content is not None
    assert record.content.sha256 == hashlib.sha256(data).hexdigest()
    assert record.content.content_type == "application/x-parquet"
    assert progress[-1] == (len(data), len(data))
    assert all(a[0] <= b[0] for a, b in zip(progress, progress[1:], strict=False))
    # The same contents again, from a file: the agent stores them, nothing is uploaded.
    path = tmp_path / "again.bin"
    path.write_bytes(data)
    watched = BudgetProxy(served.port, budget=4 * MIB)  # would cut any upload of them
    try:
        with ArtifactsClient(
            watched.base, served.notes_key, "notes", upload_threshold=MIB
        ) as client:
            again = client.tag(data={"run": 2}, key="big-2", contents=path)
    finally:
        watched.close()
    assert watched.cuts == 0
    assert again.content is not None and again.content.sha256 == record.content.sha256


@pytest.mark.asyncio
async def test_the_async_client_takes_the_same_road(served):
    data = os.urandom(3 * MIB)
    async with AsyncArtifactsClient(
        served.base, served.notes_key, "notes", upload_threshold=MIB
    ) as client:
        record = await client.tag(data={"run": 3}, key="big-3", contents=data)
    assert record.content is not None
    assert record.content.sha256 == hashlib.sha256(data).hexdigest()
