"""Media types, parsed rather than pattern-matched (API.md "Content").

A tagged ``contentType`` must be exactly one media type: ``type/subtype`` and ``; name=value``
parameters (RFC 9110 §8.3.1), printable ASCII, no comma anywhere. ``text/plain;,text/html`` was
once accepted by a pattern and served inline, and Chromium rendered it as HTML: a browser reads a
comma as the start of another type. The canonical form (type, subtype and parameter names in lower
case, ``charset`` too, quoted values only where needed) is what is stored and what goes into the
``Content-Type`` header, so the header always says what was parsed.

Low in the layers: it knows only ``errors``.
"""

from __future__ import annotations

import codecs
import mimetypes
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote

from artifacts_app.errors import ArtifactError

MAX_LENGTH = 255
INLINE_SAFE = frozenset(
    {
        "text/plain",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "application/pdf",
        "application/json",
    }
)
# The grammar (RFC 9110 §5.6.2 token, §5.6.4 quoted-string), public for the schemas that state it.
TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
QUOTED = r'"(?:[\t\x20\x21\x23-\x5b\x5d-\x7e]|\\[\t\x20-\x7e])*"'
# A quoted string without a comma (``parse`` refuses any comma, quoted or not).
_QUOTED_NO_COMMA = QUOTED.replace("\\x23-\\x5b", "\\x23-\\x2b\\x2d-\\x5b").replace(
    "\\x20-\\x7e", "\\x20-\\x2b\\x2d-\\x7e"
)
PATTERN = f"{TOKEN}/{TOKEN}(?:[ \\t]*;[ \\t]*{TOKEN}=(?:{TOKEN}|{_QUOTED_NO_COMMA}))*(?:[ \\t]*;)?"
"""One media type as ``parse`` reads it (type/subtype, ``;name=value`` parameters, an empty ``;``
at the end, no comma), without the whitespace ``parse`` strips around it: a schema's pattern (a
header's value, which HTTP trims). Not anchored."""
_TYPE_RE = re.compile(rf"({TOKEN})/({TOKEN})")
_PARAM_RE = re.compile(rf"[ \t]*;[ \t]*({TOKEN})=({TOKEN}|{QUOTED})")
_EMPTY_PARAM_RE = re.compile(r"[ \t]*;[ \t]*")
_TOKEN_RE = re.compile(TOKEN)


@dataclass(frozen=True)
class MediaType:
    type: str
    subtype: str
    params: tuple[tuple[str, str], ...]

    @property
    def essence(self) -> str:
        """``type/subtype``, in lower case: what the inline-safe list is matched on."""
        return f"{self.type}/{self.subtype}"

    def param(self, name: str) -> str | None:
        return next((value for key, value in self.params if key == name), None)

    def __str__(self) -> str:
        parts = [self.essence]
        for name, value in self.params:
            if not _TOKEN_RE.fullmatch(value):
                value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
            parts.append(f"{name}={value}")
        return "; ".join(parts)


def parse(value: str) -> MediaType | None:
    """The one media type ``value`` holds, or None when it is not exactly one."""
    if not isinstance(value, str) or len(value) > MAX_LENGTH or "," in value:
        return None
    text = value.strip(" \t")
    match = _TYPE_RE.match(text)
    if match is None:
        return None
    pos = match.end()
    params: list[tuple[str, str]] = []
    while pos < len(text):
        found = _PARAM_RE.match(text, pos)
        if found is None:
            empty = _EMPTY_PARAM_RE.match(text, pos)  # "text/plain;" is allowed, once at the end
            if empty is not None and empty.end() == len(text):
                break
            return None
        name, raw = found.group(1).lower(), found.group(2)
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        if name == "charset":
            raw = raw.lower()
        if any(existing == name for existing, _ in params):
            return None  # two values for one parameter: which would a browser believe?
        params.append((name, raw))
        pos = found.end()
    return MediaType(match.group(1).lower(), match.group(2).lower(), tuple(params))


# The charsets this server decodes with, by Python's name for the codec: the encodings of the
# WHATWG Encoding Standard (what browsers and HTTP clients label text with) that Python has, plus
# ASCII, UTF-16 and UTF-32. ``codecs.lookup`` alone would also let through codecs that are not text
# encodings (base64, zlib, rot13), one that fails on every input (undefined), ones that fail under
# ``errors="replace"`` or on ordinary text (idna, punycode) and ones that turn bytes into any text
# (unicode_escape, utf-7): a request naming one of those once answered 500.
TEXT_ENCODINGS = frozenset(
    {
        "utf-8",
        "utf-16",
        "utf-16-le",
        "utf-16-be",
        "utf-32",
        "utf-32-le",
        "utf-32-be",
        "ascii",
        *(f"iso8859-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
        *(f"cp{n}" for n in (866, 874, 932, *range(1250, 1259))),
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "gbk",
        "gb2312",
        "gb18030",
        "big5",
        "big5hkscs",
        "euc_jp",
        "iso2022_jp",
        "shift_jis",
        "euc_kr",
    }
)


def text_encoding(charset: str | None) -> str | None:
    """Python's codec for ``charset`` (a ``charset`` parameter as sent, any case or alias) when it
    is one of ``TEXT_ENCODINGS``; else None, and the caller refuses it or does not decode."""
    if not charset or len(charset) > 64:
        return None
    try:
        name = codecs.lookup(charset.strip().strip('"')).name
    except (LookupError, ValueError):  # unknown; ValueError: a NUL in the name
        return None
    return name if name in TEXT_ENCODINGS else None


def charset_refusal(charset: str) -> ArtifactError:
    """400 ``invalid_charset``: a request whose ``Content-Type`` names a charset that is not one
    of ``TEXT_ENCODINGS`` (refused at the door, before anything decodes with it)."""
    shown = charset if len(charset) <= 64 else charset[:64] + "…"
    return ArtifactError(
        "invalid_charset",
        f"The Content-Type's charset {shown!r} is not a text encoding this server reads; send "
        "UTF-8 (charset=utf-8, or no charset).",
        {"charset": shown},
    )


def canonical(value: str, *, field: str = "contentType") -> str:
    """The canonical form of one media type, or 400 ``invalid_content_type`` naming ``field``."""
    parsed = parse(value)
    if parsed is None:
        raise ArtifactError(
            "invalid_content_type",
            f"`{field}` must be exactly one media type, such as text/markdown or "
            "text/plain; charset=utf-8 (type/subtype and ;name=value parameters, no comma).",
            {"field": field},
        )
    return str(parsed)


def is_inline_safe(content_type: str | None) -> bool:
    """Whether the parsed type may be shown by a browser (API.md "Content"); parameters ignored."""
    parsed = parse(content_type or "")
    return parsed is not None and parsed.essence in INLINE_SAFE


# --- Content-Disposition (RFC 6266, RFC 8187 for filename*) -----------------------------------

_UNSAFE_NAME = re.compile(r'[\x00-\x1f\x7f"\\/:*?<>|;]+')
MAX_FILENAME = 120
_EXTENSIONS = {
    "text/plain": ".txt",
    "text/markdown": ".md",
    "application/json": ".json",
    "image/jpeg": ".jpg",
    "application/octet-stream": ".bin",
}


def _extension(content_type: str | None) -> str:
    parsed = parse(content_type or "")
    if parsed is None:
        return ".bin"
    return _EXTENSIONS.get(parsed.essence) or mimetypes.guess_extension(parsed.essence) or ".bin"


def download_name(
    *, key: str | None, title: str | None, artifact_id: str, content_type: str | None
) -> str:
    """A name a person recognises: the key's last path segment, else the title, else the id; with
    an extension from the type when it has none."""
    name = ""
    for candidate in (
        (key or "").rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0].split("#", 1)[0],
        title or "",
        artifact_id,
    ):
        cleaned = _UNSAFE_NAME.sub("-", unicodedata.normalize("NFC", candidate)).strip(" .-")
        if cleaned:
            name = cleaned
            break
    name = name or artifact_id
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or not 1 <= len(ext) <= 8 or not ext.isalnum():
        name = name[: MAX_FILENAME - 8] + _extension(content_type)
    elif len(name) > MAX_FILENAME:
        name = stem[: MAX_FILENAME - len(ext) - 1] + "." + ext
    return name


def content_disposition(disposition: str, filename: str) -> str:
    """``inline`` or ``attachment`` with ``filename`` (an ASCII fallback) and, when the name is not
    plain ASCII, ``filename*=UTF-8''…`` (RFC 6266 §4.3)."""
    ascii_name = filename.encode("ascii", "ignore").decode() or "download"
    ascii_name = ascii_name.replace("\\", "").replace('"', "")
    header = f'{disposition}; filename="{ascii_name}"'
    if ascii_name != filename:
        header += "; filename*=UTF-8''" + quote(filename, safe="")
    return header
