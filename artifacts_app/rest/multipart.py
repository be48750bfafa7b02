"""``multipart/form-data`` read as it arrives: python-multipart's state machine finds the parts, a
file part's bytes go to the upload handlers as slices of what was read.

Django's own parser (``django.http.multipartparser``) copies every byte two or three times on its
way through ``LazyStream`` and ``BoundaryIter`` and took a 64 MiB upload at ~0.38 GB/s here; this
one hands a file part's bytes to the handlers as ``memoryview`` slices of each read, without a copy
(~1.1 GB/s with the sha256 of ``LimitedUploadHandler``). What it answers is what Django's answers,
rule for rule (each is marked "as Django" below): the part headers read by
``parse_header_parameters`` (RFC 2231 names included); a part without ``Content-Disposition``, or
without a ``name``, skipped; a part with a non-empty ``filename`` a file (its name sanitised as
Django does; a file whose name sanitises to nothing is skipped), else a field decoded with the
request's encoding; ``Content-Transfer-Encoding: base64`` decoded in
both; ``DATA_UPLOAD_MAX_NUMBER_FIELDS``, ``DATA_UPLOAD_MAX_NUMBER_FILES`` and
``DATA_UPLOAD_MAX_MEMORY_SIZE`` (the fields' bytes, never the files') enforced with Django's
exceptions; the upload handlers driven through ``new_file``, ``receive_data_chunk`` (a handler
answering None ends the chain for that chunk), ``file_complete`` and ``upload_complete``, with
``StopFutureHandlers`` and ``SkipFile`` honoured. Where it differs from Django: a body that is not
well formed (no first boundary, a preamble, bad characters in a header name, more than 8 headers or
a header line over 4 KiB in a part) is refused (``MultipartError``) where Django would skip what it
could not read, and a boundary ends a part only at the start of a line (RFC 2046; Django's parser
also cut a value at ``--boundary`` mid-line); a part's header block may take up to those 8 lines
of 4 KiB where Django refuses one over ~1 KiB; a field whose bytes are not text in the request's
encoding is refused (``MultipartError`` naming the part) where Django stores U+FFFD in their place.
Given the body's ``parts`` (name -> ``FIELD`` or ``FILE``; the tag's are ``record`` and
``contents``), it also refuses what Django would let through unseen: a part without a name
(``MultipartError``), a name not among them (``UnknownPart``), a name sent twice (``RepeatedPart``:
Django keeps both, and a reader of one value takes the last); and a part is a field or a file by
its name, not by its ``filename`` (a ``contents`` part sent without one, as a form's text field or
``curl -F contents=<file`` sends it, is the file; a ``record`` part sent with one, as
``curl -F record=@record.json``, is the field). Not driven: ``handle_raw_input`` and ``StopUpload``
(no handler of this site uses them); ``SkipFile`` closes a handler's ``file``, as Django does.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Protocol, cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile, StopFutureHandlers
from django.http import QueryDict
from django.http.multipartparser import MultiPartParser as DjangoMultiPartParser
from django.utils.datastructures import MultiValueDict
from django.utils.encoding import force_str
from django.utils.http import parse_header_parameters
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser

READ_SIZE = 1024 * 1024  # per read of the body (daphne feeds it in pieces up to this size)


FIELD, FILE = "field", "file"  # what a part named in ``parts`` is


class Readable(Protocol):
    """A body read in pieces: DRF's stream, or the request itself for a chunked body."""

    def read(self, size: int, /) -> bytes: ...


class MultipartError(Exception):
    """The body is not a well-formed multipart body; the message says how, ``part`` names the
    part it is about (or None)."""

    def __init__(self, message: str, part: str | None = None) -> None:
        super().__init__(message)
        self.part = part


class UnknownPart(MultipartError):
    """A part whose name is not one of the body's ``parts``."""


class RepeatedPart(MultipartError):
    """A second part of one name."""


def sanitize_file_name(file_name: str) -> str | None:
    """Django's own rule (``MultiPartParser.sanitize_file_name``: no path, no unprintable
    characters, nothing left of ``.`` and ``..``), called without a parser: it reads none of its
    state."""
    return DjangoMultiPartParser.sanitize_file_name(cast(Any, None), file_name)


def _header(line: bytes) -> tuple[str, tuple[str, dict[str, bytes]]] | None:
    """One part header as Django reads it (``parse_boundary_stream``): the line lower-cased up to
    its parameters, parameter values as bytes; None for a line Django would skip."""
    try:
        main_value_pair, params = parse_header_parameters(line.decode())
        name, value = main_value_pair.split(":", 1)
    except ValueError:  # undecodable, or no colon
        return None
    return name, (value, {k: v.encode() for k, v in params.items()})


class _Part:
    """The part being read: its headers, then what its bytes are for."""

    def __init__(self) -> None:
        self.headers: dict[str, tuple[str, dict[str, bytes]]] = {}
        self.field_name = ""
        self.header_name: list[bytes] = []
        self.header_value: list[bytes] = []
        self.kind = ""  # "field", "file", or "" (skipped)
        self.base64 = False
        self.field: list[bytes] = []
        self.remainder = b""  # base64 bytes past the last multiple of four


class StreamingMultipart:
    """One body's parse: ``feed`` it the body in pieces, then ``finish``."""

    def __init__(
        self,
        boundary: bytes,
        handlers: list[FileUploadHandler],
        encoding: str,
        parts: Mapping[str, str] | None = None,
    ) -> None:
        self.handlers = handlers
        self.encoding = encoding
        self.parts = parts
        self.names_seen: set[str] = set()
        self.post = QueryDict(mutable=True)
        self.files: MultiValueDict[str, UploadedFile] = MultiValueDict()
        self.ended = False
        self.part = _Part()
        self.counters = [0] * len(handlers)
        self.fields_seen = 0
        self.files_seen = 0
        self.field_bytes = 0
        self.parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._part_begin,
                "on_header_field": self._header_field,
                "on_header_value": self._header_value,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
                "on_end": self._end,
            },
        )

    def feed(self, data: bytes) -> None:
        try:
            self.parser.write(data)
        except MultipartParseError as exc:
            raise MultipartError(f"it is not well formed ({exc})") from None

    def finish(self) -> tuple[QueryDict, MultiValueDict[str, UploadedFile]]:
        if not self.ended:
            raise MultipartError("it ends before its closing boundary (was it cut off?)")
        # As Django: the handlers see the upload end, until one answers something.
        for handler in self.handlers:
            if cast(Any, handler).upload_complete():
                break
        # Left mutable (Django's parser freezes its QueryDict through a private flag); DRF hands
        # a view a mutable copy anyway whenever the body has a file.
        return self.post, self.files

    def close_files(self) -> None:
        """Close what was parsed so far (a refused body): as Django, on the way out of an error."""
        for _, files in self.files.lists():
            for file in files:
                file.close()

    # python-multipart's callbacks.
    def _part_begin(self) -> None:
        self.part = _Part()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self.part.header_name.append(data[start:end])

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self.part.header_value.append(data[start:end])

    def _header_end(self) -> None:
        part = self.part
        line = b"".join(part.header_name) + b":" + b"".join(part.header_value)
        part.header_name, part.header_value = [], []
        header = _header(line)
        if header is not None:
            part.headers[header[0]] = header[1]

    def _headers_finished(self) -> None:
        part = self.part
        disposition = part.headers.get("content-disposition")
        is_file = disposition is not None and bool(disposition[1].get("filename"))
        if self.parts is not None:
            is_file = self._declared(disposition) == FILE
        if not is_file and settings.DATA_UPLOAD_MAX_NUMBER_FIELDS is not None:
            # As Django: fields and parts without a disposition count, up to the setting (Django
            # allows it + 2 and counts the two empty parts it sees around the boundaries).
            self.fields_seen += 1
            if self.fields_seen > settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:
                raise TooManyFieldsSent(
                    "The number of GET/POST parameters exceeded "
                    "settings.DATA_UPLOAD_MAX_NUMBER_FIELDS."
                )
        if disposition is None or "name" not in disposition[1]:
            return  # as Django: skipped
        encoding = part.headers.get("content-transfer-encoding")
        part.base64 = encoding is not None and encoding[0].strip() == "base64"
        part.field_name = force_str(disposition[1]["name"].strip(), self.encoding, errors="replace")
        if is_file:
            self._file_begin(disposition[1])
        else:
            part.kind = "field"

    def _declared(self, disposition: tuple[str, dict[str, bytes]] | None) -> str:
        """What the part is by its name among ``parts``; refuses a part that is none of them."""
        assert self.parts is not None
        name_raw = disposition[1].get("name") if disposition is not None else None
        if name_raw is None:
            raise MultipartError(
                "a part has no Content-Disposition: form-data header with a name; name every "
                f"part ({', '.join(self.parts)})"
            )
        name = force_str(name_raw.strip(), self.encoding, errors="replace")
        if name not in self.parts:
            raise UnknownPart(
                f"the body has a part named {name!r}; its parts are {', '.join(self.parts)}",
                name,
            )
        if name in self.names_seen:
            raise RepeatedPart(f"the part {name!r} is sent twice; send it once", name)
        self.names_seen.add(name)
        return self.parts[name]

    def _file_begin(self, disposition: dict[str, bytes]) -> None:
        self.files_seen += 1
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES
        if limit is not None and self.files_seen > limit:
            raise TooManyFilesSent(
                "The number of files exceeded settings.DATA_UPLOAD_MAX_NUMBER_FILES."
            )
        raw_name = disposition.get("filename")
        file_name = (
            sanitize_file_name(force_str(raw_name, self.encoding, errors="replace"))
            if raw_name
            else None
        )
        if not file_name and self.parts is None:
            return  # as Django: skipped (a declared part is the file whatever its filename)
        content_type, extra = self.part.headers.get("content-type", ("", {}))
        try:
            content_length: int | None = int(self.part.headers["content-length"][0])
        except (KeyError, ValueError):
            content_length = None
        self.counters = [0] * len(self.handlers)
        self.part.kind = "file"
        try:
            for handler in self.handlers:
                try:
                    handler.new_file(
                        self.part.field_name,
                        # A declared part sent without a usable filename is named after the part
                        # (Django's UploadedFile refuses an empty name; a None breaks its handlers).
                        file_name or self.part.field_name,
                        content_type.strip(),
                        content_length,
                        extra.get("charset"),  # type: ignore[arg-type]  # bytes, as Django's
                        extra,
                    )
                except StopFutureHandlers:
                    break
        except SkipFile:
            self._skip_file()

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        part = self.part
        if part.kind == "file":
            chunk: Any = memoryview(data)[start:end]
            if part.base64:
                chunk = self._base64(part, bytes(chunk))
                if not chunk:
                    return
            try:
                self._to_handlers(chunk)
            except SkipFile:
                self._skip_file()
        elif part.kind == "field":
            self.field_bytes += end - start
            self._check_field_bytes(len(part.field_name) + 2)
            part.field.append(data[start:end])

    def _check_field_bytes(self, pending: int) -> None:
        # As Django: the fields' bytes with their names (and 2 for ``&=``) are bounded together,
        # the base64 text counted as sent; checked as a field's bytes come and at its end.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and self.field_bytes + pending > limit:
            raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")

    def _base64(self, part: _Part, raw: bytes) -> bytes:
        # As Django: decoded four characters at a time, whitespace dropped, the 1–3 left over
        # carried to the next piece; a remainder at the part's end is an error.
        stripped = part.remainder + b"".join(raw.split())
        aligned = len(stripped) // 4 * 4
        part.remainder = stripped[aligned:]
        try:
            return base64.b64decode(stripped[:aligned])
        except binascii.Error:
            raise MultipartError("a base64 file part could not be decoded") from None

    def _to_handlers(self, chunk: Any) -> None:
        for i, handler in enumerate(self.handlers):
            length = len(chunk)
            chunk = handler.receive_data_chunk(chunk, self.counters[i])
            self.counters[i] += length
            if chunk is None:
                break

    def _skip_file(self) -> None:
        # As Django: the handlers' files closed, the rest of the part ignored.
        for handler in self.handlers:
            if hasattr(handler, "file"):
                handler.file.close()
        self.part.kind = ""

    def _part_end(self) -> None:
        part = self.part
        if part.kind == "file":
            if part.remainder:
                raise MultipartError("a base64 file part could not be decoded")
            for i, handler in enumerate(self.handlers):
                file = handler.file_complete(self.counters[i])
                if file:
                    self.files.appendlist(part.field_name, file)
                    break
        elif part.kind == "field":
            data = b"".join(part.field)
            if part.base64:
                try:
                    data = base64.b64decode(data)
                except binascii.Error:
                    pass  # as Django: kept as sent
            self.field_bytes += len(part.field_name) + 2
            self._check_field_bytes(0)
            try:
                text = data.decode(self.encoding)
            except UnicodeDecodeError as exc:
                raise MultipartError(
                    f"the part {part.field_name!r} is not {self.encoding} text (at byte "
                    f"{exc.start}); send it in the charset the Content-Type names (UTF-8 if none)",
                    part.field_name,
                ) from None
            self.post.appendlist(part.field_name, text)

    def _end(self) -> None:
        self.ended = True


def parse(
    stream: Readable,
    boundary: bytes,
    handlers: list[FileUploadHandler],
    encoding: str,
    parts: Mapping[str, str] | None = None,
) -> tuple[QueryDict, MultiValueDict[str, UploadedFile]]:
    """Read ``stream`` to its end as a multipart body: (fields, files), as Django's parser
    answers them, with only ``parts`` (name -> ``FIELD`` or ``FILE``) when given. Raises
    ``MultipartError`` (``UnknownPart``, ``RepeatedPart``), or Django's limit exceptions."""
    body = StreamingMultipart(boundary, handlers, encoding, parts)
    try:
        while chunk := stream.read(READ_SIZE):
            body.feed(chunk)
        return body.finish()
    except BaseException:
        body.close_files()
        raise
