"""Media types parsed, not pattern-matched; downloads named; multipart details."""

from __future__ import annotations

import orjson
import pytest

from artifacts_app import media
from artifacts_app.models import Artifact
from tests.rest.conftest import World, bearer
from tests.rest.test_bad_input import envelope_of, snapshot


def _tag(client, world: World, **fields):
    body = {"kind": "report", "data": {}, "contents": "<h1>hi</h1>", **fields}
    return client.post(
        "/reviewer/v1/artifacts",
        data=orjson.dumps(body),
        content_type="application/json",
        **bearer(world.agent_key),
    )


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain;,text/html",
        "text/plain, text/html",
        "text/plain;charset=utf-8,text/html",
        "text/plain; charset=utf-8; charset=iso-8859-1",
        "text/plain; charset",
        "text/plain;;",
        "text/plain\n",
        'text/plain; x="a\nb"',
        "text",
        "/html",
        "text/pl ain",
        "text/plain; a=é",
        "",
        "t/" + "x" * 300,
    ],
)
def test_a_content_type_that_is_not_exactly_one_media_type_is_400(
    world: World, client, content_type
):
    before = snapshot()
    response = _tag(client, world, contentType=content_type)
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert error["code"] == "invalid_content_type"
    assert error["details"] == {"field": "contentType"}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("given", "stored", "inline"),
    [
        ("text/plain", "text/plain", True),
        ("Text/Plain ; Charset=UTF-8", "text/plain; charset=utf-8", True),
        ('text/plain; charset="utf-8"', "text/plain; charset=utf-8", True),
        ("text/plain;", "text/plain", True),
        ("application/json", "application/json", True),
        ("image/svg+xml", "image/svg+xml", False),
        ("text/html", "text/html", False),
        ("text/markdown; variant=GFM", "text/markdown; variant=GFM", False),
        ('application/x-thing; name="a b"', 'application/x-thing; name="a b"', False),
    ],
)
def test_types_are_stored_as_parsed_and_inline_only_on_the_safe_list(
    world: World, client, given, stored, inline
):
    response = _tag(client, world, contentType=given, key=f"https://x/reports/{len(given)}")
    assert response.status_code == 201, response.content
    record = orjson.loads(response.content)
    assert record["content"]["contentType"] == stored
    content = client.get(
        f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(world.agent_key)
    )
    assert content["Content-Type"] == stored
    disposition = content["Content-Disposition"]
    assert disposition.startswith("inline;" if inline else "attachment;")
    assert 'filename="' in disposition


@pytest.mark.parametrize(
    ("fields", "filename"),
    [
        ({"key": "https://github.com/o/r/pull/7", "contentType": "text/markdown"}, "7.md"),
        ({"key": "reports/weekly.pdf", "contentType": "application/pdf"}, "weekly.pdf"),
        ({"key": "reports/", "title": "Week 48", "contentType": "text/plain"}, "reports.txt"),
        ({"title": "Week 48 report", "contentType": "application/json"}, "Week 48 report.json"),
        ({"title": 'a"b\\c/d', "contentType": "text/plain"}, "a-b-c-d.txt"),
        ({"contentType": "application/x-unknown-thing"}, None),
    ],
)
def test_downloads_carry_a_filename(world: World, client, fields, filename):
    record = orjson.loads(_tag(client, world, **fields).content)
    content = client.get(
        f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(world.agent_key)
    )
    expected = filename or f"{record['id']}.bin"
    assert f'filename="{expected}"' in content["Content-Disposition"]


def test_a_non_ascii_filename_goes_in_filename_star(world: World, client):
    record = orjson.loads(
        _tag(client, world, key="docs/résumé", contentType="application/pdf").content
    )
    content = client.get(
        f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(world.agent_key)
    )
    assert content["Content-Disposition"] == (
        "inline; filename=\"rsum.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf"
    )


def test_a_type_stored_before_parsing_is_served_as_bytes_to_download(world: World, client):
    record = orjson.loads(_tag(client, world, contentType="text/plain").content)
    Artifact.objects.filter(pk=record["id"]).update(content_type="text/plain;,text/html")
    content = client.get(
        f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(world.agent_key)
    )
    assert content["Content-Type"] == "application/octet-stream"
    assert content["Content-Disposition"].startswith("attachment;")


def test_media_parse():
    assert str(media.parse('text/plain; q="a\\"b"')) == 'text/plain; q="a\\"b"'
    assert media.parse("text/plain").essence == "text/plain"
    assert media.parse("text/plain;,text/html") is None
    assert not media.is_inline_safe(None)


# --- multipart --------------------------------------------------------------------------------

RECORD = b'--xyz\r\nContent-Disposition: form-data; name="record"\r\n\r\n{"kind": "report", "data": {}}\r\n'
FILE = (
    b'--xyz\r\nContent-Disposition: form-data; name="contents"; filename="a.txt"\r\n'
    b"Content-Type: text/plain; charset=UTF-8\r\n\r\nhello world"
)
CLOSE = b"\r\n--xyz--\r\n"


@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("multipart/form-data; boundary=xyz", RECORD + FILE),  # cut off mid-contents
        ("multipart/form-data; boundary=xyz", RECORD + FILE + b"\r\n--xyz"),
        ("multipart/form-data; boundary=wrong", RECORD + FILE + CLOSE),
        ("multipart/form-data", RECORD + FILE + CLOSE),
        ("multipart/form-data; boundary=", RECORD + FILE + CLOSE),
        ("multipart/form-data; boundary=" + "b" * 71, RECORD + FILE + CLOSE),
    ],
    ids=[
        "truncated",
        "no closing dashes",
        "wrong boundary",
        "no boundary",
        "empty boundary",
        "boundary too long",
    ],
)
def test_broken_multipart_bodies_are_refused_with_the_envelope(
    world: World, client, content_type, raw
):
    before = snapshot()
    response = client.post(
        "/reviewer/v1/artifacts", data=raw, content_type=content_type, **bearer(world.agent_key)
    )
    assert response.status_code == 400, response.content
    assert envelope_of(response)["code"] == "malformed_multipart"
    assert snapshot() == before


def test_a_file_parts_charset_is_decoded(world: World, client):
    response = client.post(
        "/reviewer/v1/artifacts",
        data=RECORD + FILE + CLOSE,
        content_type="multipart/form-data; boundary=xyz",
        **bearer(world.agent_key),
    )
    assert response.status_code == 201, response.content
    assert orjson.loads(response.content)["content"]["contentType"] == "text/plain; charset=utf-8"


def _tag_with_part_type(client, world: World, part_type: bytes):
    raw = (
        RECORD
        + b'--xyz\r\nContent-Disposition: form-data; name="contents"; filename="x.txt"\r\n'
        + b"Content-Type: "
        + part_type
        + b"\r\n\r\n<b>x</b>"
        + CLOSE
    )
    return client.post(
        "/reviewer/v1/artifacts",
        data=raw,
        content_type="multipart/form-data; boundary=xyz",
        **bearer(world.agent_key),
    )


@pytest.mark.parametrize(
    "part_type",
    [
        b"text/plain;,text/html",
        b"text/plain, text/html",
        b"text/plain; charset=utf-8, text/html",
        b"text/plain; charset=utf-8;,text/html",
        b"text/plain; x=1;,text/html",
        b"text/html;/",
    ],
)
def test_a_file_parts_content_type_that_is_two_types_is_refused(world: World, client, part_type):
    # API.md "Content": the part's Content-Type is the content type when the record names none,
    # so it must be exactly one media type, as a JSON contentType must. Django keeps only the
    # type and a dict of parameters; ",text/html" arrives as a parameter's name.
    before = snapshot()
    response = _tag_with_part_type(client, world, part_type)
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert error["code"] == "invalid_content_type"
    assert error["details"] == {"field": "contents"}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("part_type", "stored", "served"),
    [
        (b"text/plain", "text/plain", "text/plain"),
        (b'Text/Plain; Charset="UTF-8"', "text/plain; charset=utf-8", "text/plain; charset=utf-8"),
        (b"text/markdown; variant=GFM", "text/markdown; variant=GFM", "text/markdown; variant=GFM"),
        (b'text/plain; name="a b"', 'text/plain; name="a b"', 'text/plain; name="a b"'),
    ],
)
def test_a_file_parts_content_type_is_parsed_and_kept(
    world: World, client, part_type, stored, served
):
    response = _tag_with_part_type(client, world, part_type)
    assert response.status_code == 201, response.content
    record = orjson.loads(response.content)
    assert record["content"]["contentType"] == stored
    content = client.get(
        f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(world.agent_key)
    )
    assert content["Content-Type"] == served
