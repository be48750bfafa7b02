"""How a stored content is shown in a page: one renderer for the admin and the playground.

The decision is made from the **parsed** media type (``media.parse``) and the size, never from the
bytes' look and never from an extension:

=================  ====================================================================
``markdown``       ``text/markdown`` up to ``MARKDOWN_MAX``: CommonMark (markdown-it-py, raw
                   HTML off, tables and strikethrough on) then sanitized by nh3 (an allow-list
                   of tags, ``http``/``https``/``mailto`` links with ``rel=noopener noreferrer
                   nofollow``); images in the Markdown become links, so a report cannot make
                   the supervisor's browser fetch anything.
``image``          PNG, JPEG, GIF, WebP up to ``IMAGE_MAX``: an ``<img>`` of the content URL.
                   Never SVG (it is a document that can carry script).
``pdf``            ``application/pdf``: an ``<iframe sandbox>`` of the content URL.
``json``           ``application/json`` and ``+json`` up to ``JSON_MAX`` that parse: pretty and
                   foldable (``<details>`` per object and array), every value escaped.
``text``           other text (``text/*``, XML, YAML…): the first ``TEXT_SHOWN`` characters, the
                   rest (up to ``TEXT_MAX`` bytes) behind a "Show all".
``download``       HTML, XHTML, SVG, anything unknown or unparsable, binary-looking text, and
                   anything past its kind's size cap: only a download link.
=================  ====================================================================

Every preview ends with a download link. The HTML returned is safe to put in a page as it is
(``SafeString``): everything stored is escaped or sanitized here. No JavaScript is needed, so it
works under a strict CSP. Styles: ``static/previews/previews.css``.

Usage::

    from artifacts_app import previews

    shown = previews.preview_blob(
        sha256=record.content.sha256,
        size=record.content.size,
        content_type=record.content.content_type,
        url=f"/{slug}/v1/artifacts/{record.id}/content",
        filename="report.md",
    )
    shown.kind   # "markdown" | "image" | "pdf" | "json" | "text" | "download"
    shown.html   # SafeString, ready for a template

``preview_kind`` gives the decision alone (no bytes read); ``render`` takes a ``read(n)`` callable
instead of a blob id (tests, or bytes from elsewhere); ``json_html`` renders any JSON value
foldable (the record's ``data``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import nh3
import orjson
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from artifacts_app import blobs, media
from artifacts_app.errors import UnavailableError
from artifacts_app.jsontypes import JSON

MARKDOWN_MAX = 512 * 1024
JSON_MAX = 256 * 1024
JSON_NODES = 5_000  # past this many values a tree of <details> is heavier than the text
JSON_DEPTH = 100  # the stored data's own bound (values.MAX_DEPTH); deeper content shows as text
IMAGE_MAX = 32 * 1024 * 1024
TEXT_SHOWN = 8 * 1024  # characters shown before "Show all"
TEXT_MAX = 1024 * 1024  # bytes read for "Show all"; past it, the download has the rest

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
# Types a browser renders as a document (and so could run script from): shown only as a download,
# whatever their size. text/* and +xml would otherwise be previewed as text.
NEVER_SHOWN = frozenset(
    {"text/html", "application/xhtml+xml", "image/svg+xml", "text/xsl", "application/xslt+xml"}
)
TEXT_APPLICATION_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-ndjson",
        "application/javascript",
        "application/sql",
        "application/csv",
    }
)

KINDS = ("markdown", "image", "pdf", "json", "text", "download")


@dataclass(frozen=True)
class Preview:
    """What to show: ``kind`` (one of ``KINDS``) and ``html``, safe to insert as it is."""

    kind: str
    html: SafeString


def preview_kind(content_type: str | None, size: int) -> str:
    """The kind of preview a content of this type and size gets (no bytes are read)."""
    parsed = media.parse(content_type or "")
    if parsed is None:
        return "download"
    essence = parsed.essence
    if essence in NEVER_SHOWN or "html" in parsed.subtype or "svg" in parsed.subtype:
        return "download"
    if essence in IMAGE_TYPES:
        return "image" if size <= IMAGE_MAX else "download"
    if essence == "application/pdf":
        return "pdf"
    if essence in MARKDOWN_TYPES:
        return "markdown" if size <= MARKDOWN_MAX else "text"
    if essence == "application/json" or parsed.subtype.endswith("+json"):
        return "json" if size <= JSON_MAX else "text"
    if (
        parsed.type == "text"
        or essence in TEXT_APPLICATION_TYPES
        or parsed.subtype.endswith(("+xml", "+yaml"))
    ):
        return "text"
    return "download"


def preview_blob(
    *, sha256: str, size: int, content_type: str | None, url: str, filename: str = ""
) -> Preview:
    """The preview of a stored blob; reads at most the bytes its kind needs, from ``blobs``."""

    def read(limit: int) -> bytes:
        return blobs.blob_read(sha256, end=min(size, limit) - 1) if size else b""

    return render(content_type=content_type, size=size, url=url, read=read, filename=filename)


def render(
    *,
    content_type: str | None,
    size: int,
    url: str,
    read: Callable[[int], bytes],
    filename: str = "",
) -> Preview:
    """The preview of a content: ``url`` is where the browser may fetch it (the content route),
    ``read(n)`` returns its first ``n`` bytes. Bytes that cannot be read (``OSError``, or the
    storage's failure as ``faults`` names it) become a sentence and the download link, never an
    exception."""
    kind = preview_kind(content_type, size)
    download = download_link(url, size=size, content_type=content_type, filename=filename)
    try:
        kind, body = _body(kind, content_type=content_type, size=size, url=url, read=read)
    except (OSError, UnavailableError):
        body = mark_safe(
            '<p class="preview-missing"><em>The stored bytes are missing, or the storage did not'
            " answer.</em></p>"
        )
        kind = "download"
    return Preview(
        kind,
        format_html('<div class="preview preview-{}">{}{}</div>', kind, body, download),
    )


def download_link(url: str, *, size: int, content_type: str | None, filename: str = "") -> str:
    return format_html(
        '<p class="preview-download"><a href="{}" download="{}">Download</a> ({}, {})</p>',
        url,
        filename,
        human_size(size),
        content_type or "application/octet-stream",
    )


def _body(
    kind: str, *, content_type: str | None, size: int, url: str, read: Callable[[int], bytes]
) -> tuple[str, SafeString]:
    """The kind actually shown (it falls back: JSON that does not parse is text, text that is
    bytes is a download) and its HTML."""
    if kind == "image":
        return kind, format_html('<img class="preview-image" src="{}" alt="" loading="lazy">', url)
    if kind == "pdf":
        # An empty sandbox: no script, no forms, no top navigation, its own opaque origin.
        return kind, format_html(
            '<iframe class="preview-pdf" sandbox src="{}" title="PDF preview"></iframe>', url
        )
    if kind == "download":
        return kind, mark_safe("")
    raw = read(MARKDOWN_MAX if kind == "markdown" else JSON_MAX if kind == "json" else TEXT_MAX)
    if b"\x00" in raw[:8192]:
        return "download", mark_safe("")  # labelled text, but bytes: nothing readable to show
    text = raw.decode(_charset(content_type), errors="replace")
    if kind == "markdown":
        return kind, mark_safe(markdown_html(text))  # noqa: S308 (sanitized by nh3)
    if kind == "json":
        try:
            tree = json_html(orjson.loads(raw))
        except orjson.JSONDecodeError:
            tree = None
        if tree is not None:
            return kind, tree
    return "text", _text(text, size=size, read_all=len(raw) >= size)


def _charset(content_type: str | None) -> str:
    # A text encoding, never any codec the tag named (idna failed under errors="replace", zlib
    # is no text encoding: the page answered 500).
    parsed = media.parse(content_type or "")
    return media.text_encoding(parsed.param("charset") if parsed else None) or "utf-8"


def human_size(size: int) -> str:
    """``512 B``, ``1.5 KiB``, ``3.2 MiB``: how pages write a content's size."""
    if size < 1024:
        return f"{size:,} B"
    if size < 1024 * 1024:
        return f"{size / 1024:,.1f} KiB"
    return f"{size / 1024 / 1024:,.1f} MiB"


def _text(text: str, *, size: int, read_all: bool) -> SafeString:
    head, rest = text[:TEXT_SHOWN], text[TEXT_SHOWN:]
    shown = format_html('<pre class="preview-text">{}</pre>', head)
    if not rest:
        return shown
    note = "" if read_all else f" (the first {human_size(TEXT_MAX)}; download for the whole)"
    return format_html(
        '{}<details class="preview-more"><summary>Show all ({} characters more{})</summary>'
        '<pre class="preview-text preview-rest">{}</pre></details>',
        shown,
        f"{len(rest):,}",
        note,
        rest,
    )


# --- Markdown -----------------------------------------------------------------------------------

_ALLOWED_TAGS = {
    "h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "blockquote", "ul", "ol", "li",
    "strong", "em", "del", "s", "code", "pre", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
_URL_SCHEMES = {"http", "https", "mailto"}


def _image_as_link(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    return f'<a href="{escape(token.attrGet("src") or "")}">[image: {escape(alt)}]</a>'


_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_markdown.enable(["table", "strikethrough"])
_markdown.add_render_rule("image", _image_as_link)


def markdown_html(text: str) -> str:
    """Markdown → sanitized HTML: raw HTML in the source is shown as text, never passed through,
    and the sanitizer has the last word over whatever the parser produced."""
    return nh3.clean(
        _markdown.render(text),
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


# --- JSON ---------------------------------------------------------------------------------------


def json_html(value: JSON, *, max_nodes: int = JSON_NODES) -> SafeString | None:
    """A JSON value as a foldable tree (objects and arrays are ``<details open>``), every key and
    scalar escaped; None when it holds more than ``max_nodes`` values (show the text instead)."""
    parts: list[str] = []
    budget = [max_nodes]
    if not _json_node(value, parts, budget, depth=0):
        return None
    return format_html('<div class="json-tree">{}</div>', mark_safe("".join(parts)))  # noqa: S308


def _json_node(value: JSON, out: list[str], budget: list[int], *, depth: int) -> bool:
    budget[0] -= 1
    if budget[0] < 0 or depth > JSON_DEPTH:
        return False
    if isinstance(value, dict | list):
        is_dict = isinstance(value, dict)
        opening, closing = ("{", "}") if is_dict else ("[", "]")
        count = len(value)
        if not count:
            out.append(f'<span class="json-punct">{opening}{closing}</span>')
            return True
        label = (
            f"{count} key{'s' if count != 1 else ''}"
            if is_dict
            else f"{count} item" + ("s" if count != 1 else "")
        )
        # Open near the top; deeper levels start folded so that a large document reads at once.
        out.append(
            f'<details class="json-fold"{" open" if depth < 3 else ""}><summary>'
            f'<span class="json-punct">{opening}</span><span class="json-count"> {label} </span>'
            f"</summary><ul>"
        )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for name, child in items:
            out.append("<li>")
            if is_dict:
                out.append(f'<span class="json-key">{escape(json.dumps(name))}</span>: ')
            if not _json_node(child, out, budget, depth=depth + 1):
                return False
            out.append("</li>")
        out.append(f'</ul><span class="json-punct">{closing}</span></details>')
        return True
    kind = (
        "null"
        if value is None
        else "bool"
        if isinstance(value, bool)
        else "number"
        if isinstance(value, int | float)
        else "string"
    )
    text = json.dumps(value, ensure_ascii=False)
    out.append(f'<span class="json-{kind}">{escape(text)}</span>')
    return True
