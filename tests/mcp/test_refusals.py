"""A refused tool call reaches the caller as its message, through both official SDKs: an ``isError``
result whose text is the REST envelope, with no structured content for the SDK to hold against the
tool's output schema (the TypeScript SDK — and the MCP Inspector on it — reported "-32602
Structured content does not match the tool's output schema" in place of the message). Answers that
are not refusals keep their structured content, valid under the output schema in both SDKs."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from mcp import types

from artifacts_app import services
from tests.mcp.conftest import World, mcp

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TS_DIR = Path(__file__).parent / "ts"
BAD_TAG = {"artifact": {"kind": "poem", "key": None, "title": None, "data": 1}}
GOOD_TAG = {
    "artifact": {
        "kind": "reviewed-pr",
        "key": "https://x/pr/sdk",
        "title": None,
        "data": {"url": "https://x/pr/sdk", "verdict": "approve"},
    }
}


def envelope_of(result: Any) -> dict[str, Any]:
    """The REST envelope a refused call's one text block holds (either SDK's result shape)."""
    content = result["content"] if isinstance(result, dict) else result.content
    assert len(content) == 1
    block = content[0]
    text = block["text"] if isinstance(block, dict) else block.text
    envelope = json.loads(text)
    assert set(envelope) == {"error"}
    assert {"code", "message"} <= set(envelope["error"]) <= {"code", "message", "details"}
    return envelope["error"]


async def test_refusals_are_the_envelope_as_text_without_structured_content(world: World, live):
    async with mcp(live, world.agent_key) as client:
        wrong = await client.call_tool("tag_artifact", BAD_TAG)
        assert wrong.is_error and wrong.structured_content is None
        error = envelope_of(wrong)
        assert (error["code"], error["details"]["field"]) == ("tool_input_invalid", "artifact.kind")
        assert "reviewed-pr" in error["message"]

        bad_limit = await client.call_tool("list_artifacts", {"limit": 0})
        assert bad_limit.is_error and bad_limit.structured_content is None
        assert envelope_of(bad_limit)["details"]["field"] == "limit"

        missing = await client.call_tool("read_artifact", {"id": "art_nope"})
        assert missing.is_error and missing.structured_content is None
        assert envelope_of(missing)["code"] == "unknown_artifact"

        unknown = await client.call_tool("no_such_tool", {})
        assert unknown.is_error and envelope_of(unknown)["code"] == "unknown_tool"

        # What is not refused keeps its structured content (the SDK checks it: no error raised).
        tagged = await client.call_tool("tag_artifact", GOOD_TAG)
        assert not tagged.is_error and tagged.structured_content["kind"] == "reviewed-pr"

    async with mcp(live, world.alice_token) as client:  # a user may not tag
        refused = await client.call_tool("tag_artifact", GOOD_TAG)
        assert refused.is_error and refused.structured_content is None
        assert envelope_of(refused)["code"] == "forbidden"


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed: the TypeScript SDK check needs Node 20+")
    if not (TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        # The SDK at the version of tests/mcp/ts/package-lock.json.
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=TS_DIR, check=True, timeout=600
        )
    return node


def ts_calls(node: str, url: str, token: str, calls: list[tuple[str, dict]]) -> dict[str, Any]:
    done = subprocess.run(
        [node, str(TS_DIR / "calls.mjs"), url, token, json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_the_typescript_sdk_shows_a_refusal_as_its_message(world: World, live, node):
    url = f"{live.base_url}/reviewer/mcp"
    answered = ts_calls(
        node,
        url,
        world.agent_key,
        [
            ("tag_artifact", BAD_TAG),
            ("list_artifacts", {"limit": 0}),
            ("read_artifact", {"id": "art_nope"}),
            ("tag_artifact", GOOD_TAG),
            ("list_artifacts", {"limit": 2}),
            ("read_artifact", {"id": world.content_id, "version": 1}),
        ],
    )
    assert set(answered["tools"]) == {"tag_artifact", "list_artifacts", "read_artifact"}
    calls = answered["calls"]
    # No call was turned into an SDK error: each answered a result.
    assert [call.get("thrown") for call in calls] == [None] * len(calls)
    results = [call["result"] for call in calls]

    bad_tag, bad_limit, missing = results[:3]
    for refused in (bad_tag, bad_limit, missing):
        assert refused["isError"] is True and "structuredContent" not in refused
    error = envelope_of(bad_tag)
    assert (error["code"], error["details"]["field"]) == ("tool_input_invalid", "artifact.kind")
    assert "reviewed-pr" in error["message"]
    assert envelope_of(bad_limit)["details"]["field"] == "limit"
    assert envelope_of(missing)["code"] == "unknown_artifact"

    # Answers: structured content the SDK validated against each tool's output schema.
    tagged, page, old = results[3:]
    assert not tagged.get("isError") and tagged["structuredContent"]["source"] == "model"
    assert len(page["structuredContent"]["results"]) == 2
    assert old["structuredContent"]["version"] == 1


@pytest.mark.parametrize("charset", ["undefined", "idna", "utf-7"])
async def test_a_content_charset_that_is_not_a_text_encoding_is_read_as_bytes(
    world: World, live, charset
):
    # resources/read decodes text content with its charset; a tagged `text/plain;
    # charset=undefined` failed that decoding with an internal error (a UnicodeError that is not
    # a UnicodeDecodeError), and utf-7 turned the bytes into other text.
    raw = "café +AGEAYgBj-".encode()
    tagged = await sync_to_async(services.artifact_tag)(
        agent=world.agent,
        kind="report",
        key=f"charset-{charset}",
        data={},
        contents=raw,
        content_type=f"text/plain; charset={charset}",
    )
    record = tagged.record
    async with mcp(live, world.agent_key) as client:
        read = await client.read_resource(f"artifact://reviewer/{record.id}")
    blobs = [c for c in read.contents if isinstance(c, types.BlobResourceContents)]
    assert [base64.b64decode(c.blob) for c in blobs] == [raw]
