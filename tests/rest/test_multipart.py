"""The streaming multipart parser (``artifacts_app/rest/multipart.py``) answers what Django's
parser answers, however the body is cut into reads, hands file parts on uncopied, and keeps
Django's limits."""

from __future__ import annotations

import base64
import io
from typing import Any

import orjson
import pytest
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http.multipartparser import MultiPartParser as DjangoParser
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from artifacts_app.rest import multipart
from tests.rest.conftest import World, bearer
from tests.rest.conftest import body as response_body
from tests.rest.test_bad_input import envelope_of, snapshot

B = b"xyz"


class Collect(FileUploadHandler):
    """Keeps each file in memory, noting the types of the chunks it was handed."""

    def __init__(self) -> None:
        super().__init__(None)
        self.chunk_types: set[type] = set()

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.buffer = bytearray()

    def receive_data_chunk(self, raw_data: Any, start: int) -> None:
        assert start == len(self.buffer)
        self.chunk_types.add(type(raw_data))
        self.buffer += raw_data
        return None

    def file_complete(self, file_size: int) -> SimpleUploadedFile:
        assert file_size == len(self.buffer)
        upload = SimpleUploadedFile(self.file_name, bytes(self.buffer), self.content_type)
        upload.charset = self.charset
        upload.content_type_extra = self.content_type_extra
        return upload


class Reads(io.RawIOBase):
    """A body answered in reads of the given sizes (cycled), as a socket answers."""

    def __init__(self, raw: bytes, sizes: list[int]) -> None:
        self.data = io.BytesIO(raw)
        self.sizes = sizes
        self.n = 0

    def read(self, size: int = -1) -> bytes:
        self.n += 1
        return self.data.read(min(size, self.sizes[self.n % len(self.sizes)]))


def part(headers: list[bytes], payload: bytes) -> bytes:
    return (
        b"--" + B + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + payload + b"\r\n"
    )


def body(*parts: bytes, epilogue: bytes = b"") -> bytes:
    return b"".join(parts) + b"--" + B + b"--\r\n" + epilogue


def answer(post: Any, files: Any) -> tuple:
    return (
        sorted(post.lists()),
        sorted(
            (name, f.name, f.content_type, f.charset, f.content_type_extra, f.read())
            for name, values in files.lists()
            for f in values
        ),
    )


def ours(raw: bytes, sizes: list[int] | None = None) -> tuple:
    stream = Reads(raw, sizes) if sizes else io.BytesIO(raw)
    return answer(*multipart.parse(stream, B, [Collect()], "utf-8"))


def djangos(raw: bytes) -> tuple:
    meta = {"CONTENT_TYPE": "multipart/form-data; boundary=xyz", "CONTENT_LENGTH": len(raw)}
    return answer(*DjangoParser(meta, io.BytesIO(raw), [Collect()], "utf-8").parse())


DISPOSITION = b'Content-Disposition: form-data; name="%s"'
CORPUS = {
    "a field": body(part([DISPOSITION % b"record"], b'{"kind": "note"}')),
    "a field and a file": body(
        part([DISPOSITION % b"record"], b"{}"),
        part(
            [
                DISPOSITION % b'contents"; filename="a.txt',
                b"Content-Type: text/plain; charset=UTF-8",
            ],
            b"hello\r\n--xy world",
        ),
    ),
    "one name twice": body(part([DISPOSITION % b"a"], b"1"), part([DISPOSITION % b"a"], b"2")),
    "an empty file and an empty field": body(
        part([DISPOSITION % b'f"; filename="e.bin'], b""), part([DISPOSITION % b"g"], b"")
    ),
    "RFC 2231 filename": body(
        part(
            [b"Content-Disposition: form-data; name=\"f\"; filename*=UTF-8''na%C3%AFve%20r.txt"],
            b"x",
        )
    ),
    "a path in the filename": body(part([DISPOSITION % b'f"; filename="../../etc/pass\\wd'], b"x")),
    "a filename of dots is skipped": body(
        part([DISPOSITION % b'f"; filename=".."'], b"x"), part([DISPOSITION % b"g"], b"y")
    ),
    "an empty filename is a field": body(part([DISPOSITION % b'f"; filename="'], b"x")),
    "no disposition is skipped": body(
        part([b"Content-Type: text/plain"], b"x"), part([DISPOSITION % b"g"], b"y")
    ),
    "no name is skipped": body(part([b"Content-Disposition: form-data"], b"x")),
    "base64 field and file": body(
        part([DISPOSITION % b"a", b"Content-Transfer-Encoding: base64"], b"aGVsbG8="),
        part(
            [DISPOSITION % b'f"; filename="b.bin', b"Content-Transfer-Encoding: base64"],
            base64.encodebytes(bytes(range(256)) * 40),
        ),
    ),
    "a field that is not base64": body(
        part([DISPOSITION % b"a", b"Content-Transfer-Encoding: base64"], b"not base64!")
    ),
    "content type parameters": body(
        part(
            [
                DISPOSITION % b'f"; filename="x',
                b'Content-Type: Text/Plain; Charset="UTF-8"; x=1;,y',
            ],
            b"x",
        )
    ),
    "an epilogue": body(part([DISPOSITION % b"a"], b"1"), epilogue=b"trailing words\r\n"),
    "a leading line break": b"\r\n" + body(part([DISPOSITION % b"a"], b"1")),
    "bytes that nearly make a delimiter": body(
        part([DISPOSITION % b'f"; filename="x'], b"a--xy\r\n--xy\r\n-\r-xyz\t\n--xy\r\n")
    ),
    "nothing but the close": body(),
}


@pytest.mark.parametrize("raw", CORPUS.values(), ids=CORPUS.keys())
def test_it_answers_what_djangos_parser_answers(raw):
    expected = djangos(raw)
    assert ours(raw) == expected
    # However the body is cut into reads: a boundary or a header split across them.
    for sizes in ([1], [2, 3], [7, 64, 1], [len(raw) - 1]):
        assert ours(raw, sizes) == expected


bytes_with_boundaries = st.lists(
    st.sampled_from([b"a", b"\r\n", b"--", b"xyz", b"--xyz", b"\r\n--xy", b"\x00\xff", b"-"]),
    max_size=40,
).map(b"".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.tuples(st.booleans(), bytes_with_boundaries), min_size=1, max_size=4),
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=5),
)
def test_any_values_in_any_reads_answer_what_django_answers(values, sizes):
    # A sender picks a boundary its values do not hold (Django ends a part at any "--boundary",
    # RFC 2046 only at one after a line break: test_a_boundary_inside_a_line_is_data).
    assume(all(b"--xyz" not in value for _, value in values))
    parts = [
        part([DISPOSITION % (b'f%d"; filename="f.bin' % i if is_file else b"v%d" % i)], value)
        for i, (is_file, value) in enumerate(values)
    ]
    raw = body(*parts)
    if all(is_file or _is_utf8(value) for is_file, value in values):
        assert ours(raw, sizes) == djangos(raw)
    else:  # Django keeps U+FFFD in place of what does not decode; refused here
        with pytest.raises(multipart.MultipartError):
            ours(raw, sizes)


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_a_field_that_is_not_text_in_the_charset_is_refused():
    # Django's parser stores U+FFFD in place of the bytes; the record would keep them silently.
    raw = body(part([DISPOSITION % b"a"], b"ok"), part([DISPOSITION % b"record"], b"\xff\xfe ok"))
    assert djangos(raw)[0] == [("a", ["ok"]), ("record", ["\ufffd\ufffd ok"])]
    with pytest.raises(multipart.MultipartError) as refused:
        ours(raw)
    assert refused.value.part == "record"
    # The same bytes are text in a charset the request may name.
    assert ours_in(raw, "iso8859-1")[0] == [("a", ["ok"]), ("record", ["\xff\xfe ok"])]


def ours_in(raw: bytes, encoding: str, parts: dict[str, str] | None = None) -> tuple:
    return answer(*multipart.parse(io.BytesIO(raw), B, [Collect()], encoding, parts))


def test_a_boundary_inside_a_line_is_data():
    # RFC 2046: a delimiter is CRLF, "--" and the boundary; Django's parser also ends a part at a
    # "--boundary" in the middle of a line, and loses the rest of the value.
    raw = body(part([DISPOSITION % b"a"], b"x--xyz y"))
    assert ours(raw)[0] == [("a", ["x--xyz y"])]
    assert djangos(raw)[0] == [("a", ["x"])]


def test_file_parts_reach_the_handler_as_views_of_the_reads():
    # The zero-copy road: a file part's bytes are slices of what was read, never joined copies.
    handler = Collect()
    payload = bytes(range(256)) * 8192  # 2 MiB
    raw = body(part([DISPOSITION % b'f"; filename="x.bin'], payload))
    _, files = multipart.parse(io.BytesIO(raw), B, [handler], "utf-8")
    assert files["f"].read() == payload
    assert handler.chunk_types == {memoryview}


@pytest.mark.parametrize(
    "raw",
    [
        body(part([DISPOSITION % b"a"], b"1"))[:-4],  # cut off before the close
        body(part([b"Bad Header: x", DISPOSITION % b"a"], b"1")),
        body(part([b"X-Long: " + b"x" * 5000, DISPOSITION % b"a"], b"1")),
        body(part([b"X-%d: 1" % i for i in range(9)], b"1")),
        body(
            part(
                [DISPOSITION % b'f"; filename="b', b"Content-Transfer-Encoding: base64"], b"aGVsbG8"
            )
        ),
        body(
            part([DISPOSITION % b'f"; filename="b', b"Content-Transfer-Encoding: base64"], b"a*==")
        ),
    ],
    ids=[
        "truncated",
        "space in header name",
        "header line too long",
        "nine headers",
        "base64 cut",
        "base64 garbage",
    ],
)
def test_bodies_that_are_not_well_formed_are_refused(raw):
    with pytest.raises(multipart.MultipartError):
        ours(raw)


def test_djangos_limits_are_kept(settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 3
    fields = [part([DISPOSITION % b"v%d" % i], b"1") for i in range(6)]
    with pytest.raises(TooManyFieldsSent):
        ours(body(*fields))
    with pytest.raises(TooManyFieldsSent):
        djangos(body(*fields))
    with pytest.raises(TooManyFieldsSent):
        djangos(body(*fields[:4]))
    assert ours(body(*fields[:3])) == djangos(body(*fields[:3]))
    with pytest.raises(TooManyFieldsSent):
        ours(body(*fields[:4]))

    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    files = [part([DISPOSITION % b'f"; filename="%d' % i], b"1") for i in range(3)]
    with pytest.raises(TooManyFilesSent):
        ours(body(*files))
    assert ours(body(*files[:2])) == djangos(body(*files[:2]))

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    # Field bytes with their names, +2 each, are bounded together; files are not counted.
    fits = body(part([DISPOSITION % b"a"], b"x" * 47), part([DISPOSITION % b"b"], b"y" * 47))
    assert ours(fits) == djangos(fits)
    over = body(part([DISPOSITION % b"a"], b"x" * 47), part([DISPOSITION % b"b"], b"y" * 48))
    for parser in (ours, djangos):
        with pytest.raises(RequestDataTooBig):
            parser(over)
    big_file = body(part([DISPOSITION % b'f"; filename="x'], b"z" * 1000))
    assert ours(big_file) == djangos(big_file)
    # An empty field counts its name too: refused at its end, as Django does.
    empty = body(part([DISPOSITION % (b"n" * 300)], b""))
    for parser in (ours, djangos):
        with pytest.raises(RequestDataTooBig):
            parser(empty)


def test_a_skipped_file_leaves_the_rest():
    class Skips(Collect):
        def receive_data_chunk(self, raw_data: Any, start: int) -> None:
            raise SkipFile()

    raw = body(part([DISPOSITION % b'f"; filename="x'], b"zz"), part([DISPOSITION % b"a"], b"1"))
    post, files = multipart.parse(io.BytesIO(raw), B, [Skips()], "utf-8")
    assert dict(post.lists()) == {"a": ["1"]} and not files


def test_a_preamble_is_refused_where_django_skips_it():
    # No client of this API sends one (RFC 2046 allows it, for MIME mail); refused, not guessed at.
    raw = b"preamble\r\n" + body(part([DISPOSITION % b"a"], b"1"))
    assert djangos(raw)[0] == [("a", ["1"])]
    with pytest.raises(multipart.MultipartError):
        ours(raw)


# --- through the tag route -----------------------------------------------------------------


def _post(client, world: World, raw: bytes, boundary: str = "xyz"):
    return client.post(
        "/reviewer/v1/artifacts",
        data=raw,
        content_type=f"multipart/form-data; boundary={boundary}",
        **bearer(world.agent_key),
    )


RECORD = part([DISPOSITION % b"record"], b'{"kind": "report", "data": {}}')


def test_the_tag_route_reads_multipart_with_this_parser(world: World, client, monkeypatch):
    # The guard against Django's parser coming back on the route (it copies every byte 2-3 times).
    def refuse(*args: Any) -> None:
        raise AssertionError("Django's multipart parser was used")

    monkeypatch.setattr(DjangoParser, "parse", refuse)
    calls = []
    real = multipart.parse
    monkeypatch.setattr(multipart, "parse", lambda *a: calls.append(a) or real(*a))
    file = part([DISPOSITION % b'contents"; filename="a.txt'], b"hello")
    response = _post(client, world, body(RECORD, file))
    assert response.status_code == 201, response.content
    assert len(calls) == 1
    assert orjson.loads(response.content)["content"]["size"] == 5


def test_a_base64_file_part_is_stored_decoded(world: World, client):
    payload = bytes(range(256)) * 100
    raw = body(
        RECORD,
        part(
            [DISPOSITION % b'contents"; filename="b.bin', b"Content-Transfer-Encoding: base64"],
            base64.encodebytes(payload),
        ),
    )
    response = _post(client, world, raw)
    assert response.status_code == 201, response.content
    record = orjson.loads(response.content)
    assert record["content"]["size"] == len(payload)
    content = client.get(
        f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(world.agent_key)
    )
    assert response_body(content) == payload


# Python codecs that are not text encodings a request may name: not of text at all (rot13, hex,
# base64, zlib, bz2, uu), failing on every input (undefined) or under errors="replace" (idna,
# punycode), turning bytes into any text (unicode_escape, raw_unicode_escape, utf-7), Windows-only
# (mbcs), or unknown. Each once answered 500 (idna, undefined, punycode) or 400 by luck.
NOT_TEXT_ENCODINGS = [
    "idna",
    "undefined",
    "punycode",
    "rot13",
    "hex",
    "base64",
    "zlib",
    "bz2",
    "uu",
    "unicode_escape",
    "raw_unicode_escape",
    "utf-7",
    "mbcs",
    "nope",
    '"idna"',
    "",
]


@pytest.mark.parametrize("charset", NOT_TEXT_ENCODINGS)
def test_a_charset_that_is_not_a_text_encoding_is_refused(world: World, client, charset):
    before = snapshot()
    record = part([DISPOSITION % b"record"], orjson.dumps({"kind": "report", "data": "é"}))
    response = client.generic(  # post() would encode the body with that charset itself
        "POST",
        "/reviewer/v1/artifacts",
        data=body(record),
        content_type=f"multipart/form-data; boundary=xyz; charset={charset}",
        **bearer(world.agent_key),
    )
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert error["code"] == "invalid_charset"
    assert error["details"] == {"charset": charset.strip('"')}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("charset", "encoded"),
    [("utf-8", "utf-8"), ("UTF8", "utf-8"), ("latin-1", "latin-1"), ("windows-1252", "cp1252")],
)
def test_a_record_is_read_in_the_charset_the_request_names(world: World, client, charset, encoded):
    raw = '{"kind": "report", "data": "café"}'.encode(encoded)
    response = client.generic(
        "POST",
        "/reviewer/v1/artifacts",
        data=body(part([DISPOSITION % b"record"], raw)),
        content_type=f"multipart/form-data; boundary=xyz; charset={charset}",
        **bearer(world.agent_key),
    )
    assert response.status_code == 201, response.content
    assert orjson.loads(response.content)["data"] == "café"


def test_a_record_that_is_not_utf8_is_refused(world: World, client):
    before = snapshot()
    record = part([DISPOSITION % b"record"], b'{"kind": "report", "data": "caf\xe9"}')
    response = _post(client, world, body(record))
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert error["code"] == "malformed_multipart"
    assert error["details"] == {"field": "record"}
    assert "utf-8" in error["message"]
    assert snapshot() == before


def test_two_record_parts_are_refused(world: World, client):
    before = snapshot()
    second = part([DISPOSITION % b"record"], b'{"kind": "report", "data": 2}')
    response = _post(client, world, body(RECORD, second))
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert (error["code"], error["details"]) == ("malformed_multipart", {"field": "record"})
    assert "twice" in error["message"]
    assert snapshot() == before


def test_two_contents_parts_are_refused(world: World, client):
    before = snapshot()
    files = [part([DISPOSITION % b'contents"; filename="%d' % i], b"x") for i in range(2)]
    response = _post(client, world, body(RECORD, *files))
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert (error["code"], error["details"]) == ("malformed_multipart", {"field": "contents"})
    assert snapshot() == before


@pytest.mark.parametrize(
    "headers",
    [
        [DISPOSITION % b"contents"],  # a form's text field, curl -F 'contents=<file'
        [DISPOSITION % b'contents"; filename="'],  # an empty filename: a field to Django
        [DISPOSITION % b'contents"; filename=".."'],  # sanitised to nothing: skipped by Django
    ],
    ids=["no filename", "empty filename", "filename of dots"],
)
def test_a_contents_part_without_a_filename_is_the_content(world: World, client, headers):
    payload = b"\x00\xffbytes, not text\r\n"
    response = _post(client, world, body(RECORD, part(headers, payload)))
    assert response.status_code == 201, response.content
    record = orjson.loads(response.content)
    assert record["content"]["size"] == len(payload)
    assert record["content"]["contentType"] == "application/octet-stream"
    content = client.get(
        f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(world.agent_key)
    )
    assert response_body(content) == payload


def test_a_record_part_with_a_filename_is_the_record(world: World, client):
    # curl -F record=@record.json sends the record as a file part.
    record = part(
        [DISPOSITION % b'record"; filename="record.json', b"Content-Type: application/json"],
        b'{"kind": "report", "key": "from-a-file", "data": {"x": 1}}',
    )
    response = _post(client, world, body(record))
    assert response.status_code == 201, response.content
    assert orjson.loads(response.content)["key"] == "from-a-file"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (part([DISPOSITION % b'content"; filename="a.txt'], b"x"), "content"),  # a typo
        (part([DISPOSITION % b"kind"], b"report"), "kind"),  # a record field as a part
    ],
    ids=["content", "kind"],
)
def test_a_part_that_is_not_record_or_contents_is_refused(world: World, client, extra, field):
    before = snapshot()
    response = _post(client, world, body(RECORD, extra))
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert error["code"] == "unknown_field"
    assert error["details"]["field"] == field
    assert snapshot() == before


@pytest.mark.parametrize(
    "headers",
    [[b"Content-Type: text/plain"], [b"Content-Disposition: form-data"]],
    ids=["no disposition", "no name"],
)
def test_a_part_without_a_name_is_refused(world: World, client, headers):
    before = snapshot()
    response = _post(client, world, body(RECORD, part(headers, b"x")))
    assert response.status_code == 400, response.content
    assert envelope_of(response)["code"] == "malformed_multipart"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (
            body(
                RECORD,
                part(
                    [DISPOSITION % b'contents"; filename="b', b"Content-Transfer-Encoding: base64"],
                    b"aGVsbG8",
                ),
            ),
            400,
            "malformed_multipart",
        ),
        (body(RECORD, part([b"X-Long: " + b"x" * 5000], b"1")), 400, "malformed_multipart"),
        (
            # Parts past record and contents are refused at the first (Django's count limits,
            # test_djangos_limits_are_kept, are never reached on this route).
            body(RECORD, *[part([DISPOSITION % b"v%d" % i], b"1") for i in range(1003)]),
            400,
            "unknown_field",
        ),
        (
            body(
                RECORD, *[part([DISPOSITION % b'f"; filename="%d' % i], b"1") for i in range(101)]
            ),
            400,
            "unknown_field",
        ),
    ],
    ids=["bad base64 file", "header too long", "many fields", "many files"],
)
def test_refused_bodies_change_nothing(world: World, client, raw, status, code):
    before = snapshot()
    response = _post(client, world, raw)
    assert response.status_code == status, response.content
    assert envelope_of(response)["code"] == code
    assert snapshot() == before


TAG_PARTS = {"record": multipart.FIELD, "contents": multipart.FILE}


@pytest.mark.parametrize(
    ("raw", "refused", "name"),
    [
        (body(RECORD, part([DISPOSITION % b"other"], b"1")), multipart.UnknownPart, "other"),
        (body(RECORD, RECORD), multipart.RepeatedPart, "record"),
        (
            body(*[part([DISPOSITION % b'contents"; filename="x'], b"1")] * 2),
            multipart.RepeatedPart,
            "contents",
        ),
        (body(part([b"Content-Disposition: form-data"], b"1")), multipart.MultipartError, None),
        (body(part([b"Content-Type: text/plain"], b"1")), multipart.MultipartError, None),
    ],
    ids=["unknown name", "record twice", "contents twice", "no name", "no disposition"],
)
def test_declared_parts_refuse_what_django_lets_through(raw, refused, name):
    with pytest.raises(refused) as error:
        ours_in(raw, "utf-8", TAG_PARTS)
    assert error.value.part == name


def test_declared_parts_are_fields_or_files_by_name():
    raw = body(
        part([DISPOSITION % b'record"; filename="r.json'], b"{}"),
        part([DISPOSITION % b"contents", b"Content-Type: image/png"], b"\x89PNG"),
    )
    post, files = ours_in(raw, "utf-8", TAG_PARTS)
    assert post == [("record", ["{}"])]
    # Named after the part: sent without a filename, it has none of its own.
    assert files == [("contents", "contents", "image/png", None, {}, b"\x89PNG")]
