"""A request's ``charset`` is one of the text encodings the server reads, or the request is refused
with 400 ``invalid_charset`` at the door, before anything decodes with it (``media.TEXT_ENCODINGS``;
API.md "Errors"). ``codecs.lookup`` knows names that are not text encodings — Django took them as
the request's encoding, and ``charset=idna`` or ``charset=undefined`` answered 500 (with
``DJANGO_DEBUG=1``, Django's technical page)."""

from __future__ import annotations

import httpx
import orjson
import pytest

from artifacts_app import media, previews
from tests.rest.conftest import World, bearer
from tests.rest.test_bad_input import envelope_of, snapshot
from tests.rest.test_multipart import NOT_TEXT_ENCODINGS
from tests.servers import DaphneServer, sqlite_site

RECORD = orjson.dumps({"kind": "report", "key": "k", "data": {"text": "é"}})
MULTIPART = (
    b'--B\r\nContent-Disposition: form-data; name="record"\r\n\r\n' + RECORD + b"\r\n--B--\r\n"
)


@pytest.mark.parametrize(
    ("charset", "codec"),
    [
        ("utf-8", "utf-8"),
        ("UTF8", "utf-8"),
        ('"utf-8"', "utf-8"),
        ("latin1", "iso8859-1"),
        ("us-ascii", "ascii"),
        ("windows-1252", "cp1252"),
        ("utf-16", "utf-16"),
        ("shift_jis", "shift_jis"),
        ("koi8-r", "koi8-r"),
    ],
)
def test_text_encodings_are_known_by_any_of_their_names(charset, codec):
    assert media.text_encoding(charset) == codec


@pytest.mark.parametrize("charset", [*NOT_TEXT_ENCODINGS, "a\x00b", "x" * 65])
def test_codecs_that_are_not_text_encodings_are_not_text_encodings(charset):
    assert media.text_encoding(charset) is None


@pytest.mark.parametrize("charset", NOT_TEXT_ENCODINGS)
def test_a_json_body_with_a_charset_that_is_not_a_text_encoding_is_refused(
    world: World, client, charset
):
    before = snapshot()
    response = client.generic(  # post() would encode the body with that charset itself
        "POST",
        "/reviewer/v1/artifacts",
        RECORD,
        content_type=f"application/json; charset={charset}",
        **bearer(world.agent_key),
    )
    assert response.status_code == 400, response.content
    assert envelope_of(response)["code"] == "invalid_charset"
    assert snapshot() == before


def test_the_refusal_comes_before_authentication(world: World, client):
    # The door answers before anything else reads the request: no credentials, the same 400.
    response = client.generic(
        "POST",
        "/reviewer/v1/artifacts",
        MULTIPART,
        content_type="multipart/form-data; boundary=B; charset=idna",
    )
    assert response.status_code == 400
    assert envelope_of(response)["code"] == "invalid_charset"


def test_a_json_body_in_a_text_encoding_is_read_as_json_reads_it(world: World, client):
    # JSON is UTF-8 (RFC 8259 §8.1; application/json defines no charset): a charset that is a
    # text encoding passes the door and changes nothing of how the body is read.
    response = client.generic(
        "POST",
        "/reviewer/v1/artifacts",
        RECORD,
        content_type="application/json; charset=latin-1",
        **bearer(world.agent_key),
    )
    assert response.status_code == 201, response.content
    assert orjson.loads(response.content)["data"] == {"text": "é"}


def test_outside_the_api_the_refusal_is_a_sentence(db, client):
    # The admin login reads a form with the request's encoding (request.POST): 400, not 500.
    response = client.generic(
        "POST",
        "/admin/login/",
        b"username=a&password=b",
        content_type="application/x-www-form-urlencoded; charset=idna",
    )
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert b"charset" in response.content


@pytest.fixture(scope="module")
def debug_server(tmp_path_factory):
    """A real daphne with ``DJANGO_DEBUG=1`` (where the 500 was Django's technical page), on its
    own SQLite: what is tested is the door, before any database work."""
    data_dir = tmp_path_factory.mktemp("charsets")
    env, key = sqlite_site(data_dir, DJANGO_DEBUG="1")
    with DaphneServer(env, log_path=data_dir / "daphne.log", ready_path="/reviewer/v1/") as server:
        yield server.base_url, key


@pytest.mark.parametrize("charset", ["idna", "undefined", "punycode", "zlib"])
def test_the_seen_requests_answer_the_envelope_under_daphne_with_debug_on(debug_server, charset):
    base, key = debug_server
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=auth, timeout=30) as http:
        for method, path, content_type, raw in [
            ("POST", "/reviewer/v1/artifacts", "multipart/form-data; boundary=B", MULTIPART),
            ("POST", "/reviewer/v1/artifacts?q=%C3%A9", "application/json", RECORD),
            ("GET", "/reviewer/v1/artifacts?kind=%C3%A9", "text/plain", b""),
        ]:
            response = http.request(
                method,
                path,
                content=raw,
                headers={"Content-Type": f"{content_type}; charset={charset}"},
            )
            assert response.status_code == 400, (method, path, response.text[:300])
            assert response.json()["error"]["code"] == "invalid_charset"
        # Nothing was stored.
        listed = http.get("/reviewer/v1/artifacts")
        assert listed.status_code == 200 and listed.json()["results"] == []


@pytest.mark.parametrize("charset", ["idna", "undefined", "zlib", "punycode", "utf-7"])
def test_a_stored_charset_that_is_not_a_text_encoding_is_previewed_as_utf8(charset):
    # A tag may label its content with any charset; the admin's and the playground's preview
    # decoded with it (idna under errors="replace", undefined, zlib: an exception, the page 500).
    raw = "café <b>".encode()
    shown = previews.render(
        content_type=f"text/plain; charset={charset}",
        size=len(raw),
        url="/reviewer/v1/artifacts/art_x/content",
        read=lambda n: raw[:n],
    )
    assert shown.kind == "text"
    assert "café &lt;b&gt;" in str(shown.html)
