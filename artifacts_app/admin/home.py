"""The admin's home: **what shipped**, the newest records of every agent at once, newest first, one
dense row each with a preview, filters, keyset pages, and new records arriving live
(``static/admin_ui/home.js`` over the staff stream of every agent, ``consumers``).

A page is one statement (``selectors.artifacts_across``) plus a bounded few for the filters'
choices, whatever the store holds. Only staff reach it (the admin's own door); everything a record
says is escaped or sanitized (``previews``).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from artifacts_app import access, blobs, previews, selectors
from artifacts_app.admin.display import EMPTY, elide, pin_mark, size, when
from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSON
from artifacts_app.records import ValuesRow, media_type

PER_PAGE = 50
LINES_SHOWN = 4  # lines of a text or Markdown content in its row
HEAD_BYTES = 2048  # bytes read for those lines
FIELDS_SHOWN = 3
HEADING = re.compile(r"<(/?)h[1-6]>")  # top-level fields of ``data`` in a row
SOURCES = ("host", "model")
FILTERS = ("q", "where", "agent", "kind", "source", "session", "since", "until")


@dataclass(frozen=True)
class Filters:
    agents: list[str] | None
    kind: str | None
    source: str | None
    session: str | None
    since: datetime.datetime | None
    until: datetime.datetime | None
    cursor: str | None
    chosen: dict[str, str]  # what the form shows back
    q: str | None = None
    where: str | None = None


def _moment(text: str, *, field: str, end: bool) -> datetime.datetime | None:
    """A date (``2026-12-05``: the whole day, ``end`` the day after) or a date and time, UTC."""
    if not text:
        return None
    try:
        if len(text) == 10:
            day = datetime.date.fromisoformat(text)
            moment = datetime.datetime.combine(day, datetime.time(), tzinfo=datetime.UTC)
            return moment + datetime.timedelta(days=1) if end else moment
        moment = datetime.datetime.fromisoformat(text)
    except (ValueError, OverflowError):  # 9999-12-31 as an end: the day after is past year 9999
        raise ArtifactError(
            "invalid_query", f"`{field}` is a date (2026-12-05) or a date and time, in UTC."
        ) from None
    return moment.replace(tzinfo=datetime.UTC) if moment.tzinfo is None else moment


def parse_filters(request: HttpRequest, slugs: list[str]) -> Filters:
    """The filters the query string asks for; ``ArtifactError`` (a sentence) when one is wrong."""
    get = request.GET
    chosen = {name: get.get(name, "").strip() for name in FILTERS}
    agents = None
    wanted = [slug for slug in get.getlist("agent") if slug]
    if wanted:
        agents = [slug for slug in wanted if slug in slugs]
        if not agents:
            raise ArtifactError("invalid_query", f"There is no agent {wanted[0]!r}.")
    source = chosen["source"] or None
    if source is not None and source not in SOURCES:
        raise ArtifactError("invalid_query", "`source` is host or model.")
    return Filters(
        agents=agents,
        kind=chosen["kind"] or None,
        source=source,
        session=chosen["session"] or None,
        since=_moment(chosen["since"], field="since", end=False),
        until=_moment(chosen["until"], field="until", end=True),
        cursor=get.get("cursor") or None,
        chosen=chosen,
        q=chosen["q"] or None,
        where=chosen["where"] or None,
    )


def _page(request: HttpRequest, filters: Filters) -> selectors.Page:
    # The one rule: staff see every agent (None); the admin's door lets no one else in.
    visible = access.visible_across(access.caller_from_user(request.user))
    return selectors.artifacts_across(
        visible=visible,
        agents=filters.agents,
        q=filters.q,
        where=filters.where,
        kind=filters.kind,
        source=filters.source,
        session_id=filters.session,
        since=filters.since,
        until=filters.until,
        limit=PER_PAGE,
        cursor=filters.cursor,
    )


def home(request: HttpRequest) -> HttpResponse:
    site = admin.site
    slugs = selectors.agent_slugs()
    try:
        filters = parse_filters(request, slugs)
        page = _page(request, filters)
    except ArtifactError as exc:
        messages.error(request, _sentence(exc))
        filters = Filters(None, None, None, None, None, None, None, dict.fromkeys(FILTERS, ""))
        page = _page(request, filters)
    kept = [(name, value) for name, value in request.GET.lists() if name != "cursor"]
    query = [(name, v) for name, values in kept for v in values]
    older = "?" + urlencode([*query, ("cursor", page.next_cursor)]) if page.next_cursor else None
    context = {
        **site.each_context(request),
        "title": "What shipped",
        "subtitle": None,
        "rows": [row_html(row) for row in page.rows],
        "filters": filters.chosen,
        "agent_choices": slugs,
        "kind_choices": selectors.kinds_recent(agents=filters.agents),
        "sources": SOURCES,
        "older_url": older,
        "newest_url": ("?" + urlencode(query)) if filters.cursor else None,
        "first_page": filters.cursor is None,
        "filtered": any(filters.chosen.values()),
        "searching": bool(filters.q or filters.where),
        "row_url": reverse("admin-home-row"),
    }
    return TemplateResponse(request, "admin/artifacts_app/home.html", context)


def _sentence(exc: ArtifactError) -> str:
    """The refusal as a person reads it, with the part of a search it names."""
    details = exc.details if isinstance(exc.details, dict) else {}
    where = details.get("path") or details.get("part") or details.get("field")
    return f"{exc.message} ({where})" if where and str(where) not in exc.message else exc.message


def row(request: HttpRequest) -> HttpResponse:
    """One row as the home draws it (``home.js`` asks for a record that just arrived)."""
    slug, artifact_id = request.GET.get("agent", ""), request.GET.get("id", "")
    agent = selectors.agent_find(slug) if slug else None
    if agent is None or not artifact_id:
        raise Http404("no such record")
    try:
        values = dict(selectors.artifact_values(agent=agent, artifact_id=artifact_id))
    except ArtifactError:
        raise Http404("no such record") from None
    values["agent__slug"] = agent.slug
    return HttpResponse(row_html(values))


# --- one row ----------------------------------------------------------------------------------


def content_url(slug: str, artifact_id: str) -> str:
    return f"/{slug}/v1/artifacts/{artifact_id}/content"


def row_html(row: ValuesRow) -> SafeString:
    slug = row["agent__slug"]
    artifact_id = row["id"]
    link = reverse("admin:artifacts_app_artifact_change", args=[artifact_id])
    title = row["title"] or row["key"] or artifact_id
    whole = " · ".join(v for v in (row["title"], row["key"], artifact_id) if v)
    return format_html(
        '<tr data-id="{}" data-agent="{}" data-kind="{}" data-source="{}" data-session="{}">'
        '<td class="c-when">{}</td>'
        '<td class="c-agent"><a href="?agent={}">{}</a></td>'
        '<td class="c-kind">{}</td>'
        '<td class="c-title"><a href="{}" title="{}" class="row-link">{}</a>'
        '<span class="cell-sub">{}</span></td>'
        '<td class="c-source">{}</td>'
        '<td class="c-session">{}<span class="cell-sub">{}</span></td>'
        '<td class="c-version">v{}</td>'
        '<td class="c-pinned">{}</td>'
        '<td class="c-preview">{}</td></tr>',
        artifact_id,
        slug,
        row["kind"],
        row["source"],
        row["session__sid"] or "",
        when(row["updated_at"]),
        slug,
        elide(slug, 16),
        elide(row["kind"], 18),
        link,
        whole,
        elide(title, 48),
        elide(row["key"], 48) if row["key"] and row["key"] != title else "",
        row["source"],
        elide(row["session__sid"], 16),
        elide(row["turn_id"], 16) if row["turn_id"] else "",
        row["version"],
        pin_mark(bool(row["pinned"])),
        preview_html(row),
    )


def preview_html(row: ValuesRow) -> SafeString:
    """A thumbnail for an image, the first lines of a text or Markdown content, and the top
    fields of ``data``."""
    parts: list[SafeString] = []
    sha, length = row["blob_id"], row["blob__size"]
    if sha:
        parts.append(_content_head(row["agent__slug"], row["id"], sha, length, row["content_type"]))
    parts.append(_data_head(row["data"]))
    return format_html_join("", "{}", ((part,) for part in parts))


def _content_head(
    slug: str, artifact_id: str, sha: str, length: int, content_type: str | None
) -> SafeString:
    kind = previews.preview_kind(content_type, length)
    label = format_html(
        '<span class="p-type">{} · {}</span>', media_type(content_type) or EMPTY, size(length)
    )
    if kind == "image":
        return format_html(
            '<img class="p-thumb" src="{}" alt="thumbnail of {}" loading="lazy" height="40">{}',
            content_url(slug, artifact_id),
            artifact_id,
            label,
        )
    if kind not in ("markdown", "text") or not length:
        return label
    try:
        raw = blobs.blob_read(sha, end=min(length, HEAD_BYTES) - 1)
    except (OSError, ArtifactError):
        return format_html("{}<em>(the stored bytes did not answer)</em>", label)
    if b"\x00" in raw:
        return label
    lines: list[str] = []
    filled = 0  # the first LINES_SHOWN lines that say something, blank ones between kept
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if filled == LINES_SHOWN:
            break
        lines.append(line[:200])
        filled += bool(line.strip())
    head = "\n".join(lines).strip("\n")
    if kind == "markdown":
        # Headings become bold lines: a row holds no headings of its own (the page's outline).
        html = HEADING.sub(
            lambda m: "</p>" if m.group(1) else '<p class="p-h">', previews.markdown_html(head)
        )
        shown = mark_safe(html)  # noqa: S308 (sanitized by nh3, tags renamed only)
        return format_html('<div class="p-md">{}</div>', shown)
    return format_html('<pre class="p-text">{}</pre>', head)


def _scalar(value: JSON) -> str:
    if isinstance(value, dict):
        return f"{{{len(value)} keys}}"
    if isinstance(value, list):
        return f"[{len(value)} items]"
    if isinstance(value, str):
        return value
    return (
        "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


def _data_head(data: JSON) -> SafeString:
    if not isinstance(data, dict):
        return format_html('<span class="p-data">{}</span>', elide(_scalar(data), 60))
    if not data:
        return mark_safe("")
    items = list(data.items())[:FIELDS_SHOWN]
    more = len(data) - len(items)
    shown = format_html_join(
        "",
        '<span class="p-field"><b>{}</b> {}</span>',
        ((elide(k, 20), elide(_scalar(v), 44)) for k, v in items),
    )
    return format_html(
        '<span class="p-data">{}{}</span>',
        shown,
        format_html('<span class="p-more">+{} more</span>', more) if more > 0 else "",
    )
