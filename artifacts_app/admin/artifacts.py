"""Artifacts in the admin: a bounded changelist scoped to one agent, a read-only page with a safe
preview and the record's history (each version's data, a readable diff, a download), delete through
``services.artifacts_delete``, pin and unpin through ``services.artifact_pin``, and a bulk
"export as JSON"."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import orjson
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.text import Truncator

from artifacts_app import access, blobs, selectors, services
from artifacts_app.admin.fastlist import SupervisorMixin, UncountedAdmin
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Artifact
from artifacts_app.records import RECORD_FIELDS, media_type, record_json
from artifacts_app.registry import spec_for
from artifacts_app.selectors import versions

PREVIEW_BYTES = 64 * 1024
EXPORT_MAX = 10_000
KIND_SAMPLE = 1000
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/yaml")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def content_url(artifact: Artifact) -> str:
    """The REST content route (API.md), which staff may read with their session cookie."""
    return f"/{artifact.agent.slug}/v1/artifacts/{artifact.pk}/content"


class AgentFilter(admin.SimpleListFilter):
    """Always one agent: every artifact index starts with the agent, so the newest-first page is
    an index walk; across all agents it would be a sort of the whole table."""

    title = "agent"
    parameter_name = "agent"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(slug, slug) for slug in selectors.agent_slugs()]

    def value(self) -> str | None:
        chosen = super().value()
        if chosen is None and self.lookup_choices:
            return self.lookup_choices[0][0]
        return chosen

    def choices(self, changelist: Any):
        for slug, label in self.lookup_choices:
            yield {
                "selected": self.value() == slug,
                "query_string": changelist.get_query_string({self.parameter_name: slug}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        slug = self.value()
        if slug is None:
            return queryset.none()
        agent = selectors.agent_find(slug)
        return queryset.filter(agent_id=agent.pk) if agent else queryset.none()


class KindFilter(admin.SimpleListFilter):
    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        slug = request.GET.get("agent") or next(iter(selectors.agent_slugs(limit=1)), None)
        agent = selectors.agent_find(slug) if slug else None
        if agent is None:
            return []
        spec = spec_for(agent)
        if spec.kinds:
            names = list(spec.kinds)
        else:
            # Freeform: the kinds among its newest records, a bounded walk of the (agent, updated_at,
            # id) index; a DISTINCT over all of them would read every row of the agent.
            recent = (
                Artifact.objects.filter(agent_id=agent.pk)
                .order_by("-updated_at", "-id")
                .values_list("kind", flat=True)[:KIND_SAMPLE]
            )
            names = sorted(set(recent))
            chosen = request.GET.get(self.parameter_name)
            if chosen and chosen not in names:
                names.append(chosen)
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(kind=self.value()) if self.value() else queryset


class HasContentFilter(admin.SimpleListFilter):
    title = "has content"
    parameter_name = "has_content"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(blob__isnull=False)
        if self.value() == "no":
            return queryset.filter(blob__isnull=True)
        return queryset


@admin.action(description="Export selected artifacts as JSON")
def export_as_json(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
    rows = queryset.order_by("-updated_at", "-id").values(*RECORD_FIELDS)[:EXPORT_MAX]
    body = orjson.dumps([record_json(row) for row in rows], option=orjson.OPT_INDENT_2)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="artifacts.json"'
    return response


def _pin_action(pinned: bool):
    verb = "Pin" if pinned else "Unpin"

    @admin.action(description=f"{verb} selected artifacts")
    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> None:
        done = 0
        rows = queryset.values_list("agent__slug", "id")[:EXPORT_MAX]
        for slug, artifact_id in rows:
            try:
                services.artifact_pin(agent=slug, artifact_id=artifact_id, pinned=pinned)
                done += 1
            except ArtifactError as exc:
                messages.error(request, exc.message)
        messages.success(request, f"{verb}ned {done} artifact(s).")

    action.__name__ = f"{verb.lower()}_selected"
    return action


pin_selected = _pin_action(True)
unpin_selected = _pin_action(False)
HISTORY_SHOWN = 50


@admin.register(Artifact)
class ArtifactAdmin(SupervisorMixin, UncountedAdmin):
    list_display = (
        "short_title",
        "kind",
        "short_key",
        "agent",
        "session_sid",
        "source",
        "content_size",
        "content_type",
        "version",
        "pinned",
        "updated_at",
    )
    list_filter = (AgentFilter, KindFilter, "source", HasContentFilter, "pinned")
    search_fields = ("=id", "key", "title")
    search_help_text = "Id (exact), key or title (contains), within the chosen agent."
    date_hierarchy = "updated_at"
    ordering = ("-updated_at", "-id")
    sortable_by = ()
    list_select_related = ("agent", "session", "blob")
    actions = (export_as_json, pin_selected, unpin_selected)
    fields = (
        "id",
        "agent",
        "kind",
        "key",
        "title",
        "session_link",
        "turn_id",
        "source",
        "version",
        "pinned",
        "created_at",
        "updated_at",
        "pretty_data",
        "content_preview",
        "history",
    )
    readonly_fields = fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return access.is_staff(request.user)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str):
        # Every search field is on the artifact itself: no joins, so never any duplicates.
        queryset, _ = super().get_search_results(request, queryset, search_term)
        return queryset, False

    # --- columns ---------------------------------------------------------------------------

    @admin.display(description="title")
    def short_title(self, obj: Artifact) -> str:
        return Truncator(obj.title or obj.key or obj.pk).chars(80)

    @admin.display(description="key")
    def short_key(self, obj: Artifact) -> str:
        return Truncator(obj.key).chars(60) if obj.key else "—"

    @admin.display(description="session")
    def session_sid(self, obj: Artifact) -> str:
        return obj.session.sid if obj.session else "—"

    @admin.display(description="size")
    def content_size(self, obj: Artifact) -> str:
        return f"{obj.blob.size:,} B" if obj.blob else "—"

    # --- the page --------------------------------------------------------------------------

    @admin.display(description="session")
    def session_link(self, obj: Artifact) -> str:
        if not obj.session:
            return "—"
        url = reverse("admin:artifacts_app_session_change", args=[obj.session_id])
        return format_html('<a href="{}">{}</a>', url, obj.session.sid)

    @admin.display(description="data")
    def pretty_data(self, obj: Artifact) -> str:
        text = json.dumps(obj.data, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre class="artifact-json">{}</pre>', text)

    @admin.display(description="content")
    def content_preview(self, obj: Artifact) -> str:
        if not obj.blob or not obj.blob_id:
            return "—"
        kind = media_type(obj.content_type)
        url = content_url(obj)
        size = obj.blob.size
        download = format_html(
            '<a href="{}" download>Download ({} bytes, {})</a>',
            url,
            f"{size:,}",
            obj.content_type or "application/octet-stream",
        )
        if kind in IMAGE_TYPES:
            return format_html(
                '<img src="{}" alt="" style="max-width:480px;max-height:360px"><br>{}',
                url,
                download,
            )
        if kind.startswith(TEXT_TYPES) or kind.endswith("+json"):
            try:
                raw = blobs.blob_read(obj.blob_id, end=PREVIEW_BYTES - 1)
            except OSError:
                return format_html("<em>The stored bytes are missing.</em> {}", download)
            text = raw.decode("utf-8", errors="replace")
            more = " (first 64 KiB)" if size > PREVIEW_BYTES else ""
            return format_html('<pre class="artifact-text">{}</pre>{}{}', text, more, download)
        return download

    @admin.display(description="history")
    def history(self, obj: Artifact) -> str:
        """Every kept version, newest first: its data, what changed from the one before, and a
        download of its content (the REST version content route, which staff may read)."""
        page = versions.versions_page(agent=obj.agent, artifact_id=obj.pk, limit=HISTORY_SHOWN)
        records = page.records()
        parts = []
        for index, record in enumerate(records):
            older = records[index + 1] if index + 1 < len(records) else None
            if older is not None:
                diff = versions.versions_diff(
                    agent=obj.agent,
                    artifact_id=obj.pk,
                    number=record.version,
                    from_=older.version,
                )
                lines = [
                    f"{name}: {json.dumps(change['from'], ensure_ascii=False)} → "
                    f"{json.dumps(change['to'], ensure_ascii=False)}"
                    for name, change in diff["fields"].items()
                ]
                lines += [
                    f"{op['op']} {op['path'] or '/'}"
                    + (f" = {json.dumps(op['value'], ensure_ascii=False)}" if "value" in op else "")
                    + (f" (from {op['from']})" if "from" in op else "")
                    for op in diff["data"]
                ]
                changes = "\n".join(lines) or "no change"
                change_html = format_html(
                    '<p>Changes from v{}:</p><pre class="artifact-diff">{}</pre>',
                    older.version,
                    changes,
                )
            else:
                change_html = format_html("<p>{}</p>", "The oldest version kept.")
            download = "—"
            if record.content is not None:
                url = f"/{obj.agent.slug}/v1/artifacts/{obj.pk}/versions/{record.version}/content"
                download = format_html(
                    '<a href="{}" download>Download v{} ({} bytes, {})</a>',
                    url,
                    record.version,
                    f"{record.content.size:,}",
                    record.content.content_type,
                )
            parts.append(
                format_html(
                    '<details class="artifact-version"{}><summary>v{} · {} · {} · session {} · {}'
                    '</summary>{}<pre class="artifact-json">{}</pre><p>{}</p></details>',
                    " open" if index == 0 else "",
                    record.version,
                    record.updated_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
                    record.kind,
                    record.session_id or "—",
                    record.title or "(no title)",
                    change_html,
                    json.dumps(record.data, indent=2, ensure_ascii=False, sort_keys=True),
                    download,
                )
            )
        more = (
            format_html("<p>Only the newest {} versions are shown.</p>", HISTORY_SHOWN)
            if page.next_cursor
            else ""
        )
        # Each part is already escaped by format_html.
        return mark_safe("".join(parts) + more)  # noqa: S308

    # --- deletes go through the service, which emits artifact.deleted ------------------------

    def delete_model(self, request: HttpRequest, obj: Artifact) -> None:
        try:
            services.artifact_delete(agent=obj.agent, artifact_id=obj.pk)
        except ArtifactError as exc:
            messages.error(request, exc.message)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        by_agent: dict[int, list[str]] = defaultdict(list)
        for agent_id, artifact_id in queryset.values_list("agent_id", "id")[:EXPORT_MAX]:
            by_agent[agent_id].append(artifact_id)
        for agent in selectors.agents_by_pk(list(by_agent)):
            try:
                services.artifacts_delete(agent=agent, ids=by_agent[agent.pk], reason="deleted")
            except ArtifactError as exc:
                messages.error(request, f"{agent.slug}: {exc.message}")
