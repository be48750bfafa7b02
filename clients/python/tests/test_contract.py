"""The kit's tag against the server's own description of a tag's input (its OpenAPI schema's
``TagRequest``, which the server derives from its one declaration of the input): every field the
server takes is a keyword of ``tag``, ``tag`` sends no field the server does not take, and what
the server requires the kit requires."""

from __future__ import annotations

import inspect
import re

import httpx
import pytest
from agent_artifacts_client import ArtifactsClient, AsyncArtifactsClient
from agent_artifacts_client.wire import tag_body
from conftest import Served

# The contents travel as one of these fields (or as a multipart part); the kit takes them as one
# keyword, ``contents``, and picks the field by the type and size of what it is given (large
# contents: known contents, else a resumable upload, on their own).
CONTENTS_FIELDS = {"contents", "contentsBase64", "upload", "contentsSha256", "contentsSize"}
# The kit's own keywords that are no field: how the resumable road reports its progress.
KIT_ONLY = {"on_progress"}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), name)


@pytest.fixture(scope="module")
def tag_request(served: Served) -> dict:
    schema = httpx.get(f"{served.base}/api/schema/", params={"format": "json"}, timeout=30)
    assert schema.status_code == 200, schema.text
    return schema.json()["components"]["schemas"]["TagRequest"]


def keywords(function) -> dict[str, inspect.Parameter]:
    return {
        name: p
        for name, p in inspect.signature(function).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


@pytest.mark.parametrize("tag", [ArtifactsClient.tag, AsyncArtifactsClient.tag])
def test_tag_takes_every_field_of_the_server_and_requires_what_it_requires(tag, tag_request):
    fields = set(tag_request["properties"])
    expected = {snake(name) for name in fields - CONTENTS_FIELDS} | {"contents"} | KIT_ONLY
    taken = keywords(tag)
    assert set(taken) == expected
    required = {name for name, p in taken.items() if p.default is inspect.Parameter.empty}
    assert required == {snake(name) for name in tag_request["required"]}


def test_tag_sends_only_fields_the_server_takes(tag_request):
    every = {name: "x" for name in keywords(tag_body)}
    sent = set(tag_body(**every))
    fields = set(tag_request["properties"])
    assert sent <= fields
    assert sent == fields - CONTENTS_FIELDS
