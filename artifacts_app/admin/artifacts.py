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
from django.contrib.admin import ModelAdmin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html

from artifacts_app import access, media, previews, selectors, services
from artifacts_app.admin import history
from artifacts_app.admin.display import EMPTY, RawIdMixin, cut, elide, pin_mark, size, when
from artifacts_app.admin.fastlist import SupervisorMixin, UncountedAdmin
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Artifact
from artifacts_app.records import RECORD_FIELDS, media_type, record_json
from artifacts_app.registry import spec_for

EXPORT_MAX = 10_000
KIND_SAMPLE = 1000


def content_url(artifact: Artifact) -> str:
    """The REST content route (API.md), which staff may read with their session cookie."""
    return f"/{artifact.agent.slug}/v1/artifacts/{artifact.pk}/content"


class AgentFilter(admin.SimpleListFilter):
    """Always one agent: every artifact index starts with the agent, so the newest-first page is
    an index walk; across all agents it would be a sort of the whole table."""

    title = "agent"
    parameter_name = "agent"

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [(slug, slug) for slug in selectors.agent_slugs()]

    def value(self) -> str | None:
        chosen = super().value()
        if chosen is None and self.lookup_choices:
            return self.lookup_choices[0][0]
        return chosen

    def choices(self, changelist: ChangeList):
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

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
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

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(blob__isnull=False)
        if self.value() == "no":
            return queryset.filter(blob__isnull=True)
        return queryset


@admin.action(description="Export selected artifacts as JSON")
def export_as_json(
    modeladmin: ModelAdmin[Artifact], request: HttpRequest, queryset: QuerySet
) -> HttpResponse:
    rows = queryset.order_by("-updated_at", "-id").values(*RECORD_FIELDS)[:EXPORT_MAX]
    body = orjson.dumps([record_json(row) for row in rows], option=orjson.OPT_INDENT_2)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="artifacts.json"'
    return response


def _pin_action(pinned: bool):
    verb = "Pin" if pinned else "Unpin"

    @admin.action(description=f"{verb} selected artifacts")
    def action(modeladmin: ModelAdmin[Artifact], request: HttpRequest, queryset: QuerySet) -> None:
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


@admin.register(Artifact)
class ArtifactAdmin(RawIdMixin, SupervisorMixin, UncountedAdmin):
    # Fits 1280 px with both sidebars open: no agent column (the agent filter always names one),
    # related values stacked in one cell (title over key, kind over source, type over size), long
    # values cut with the whole on hover, and the sort order (updated) last and always visible.
    list_display = (
        "title_key",
        "kind_source",
        "session_sid",
        "type_size",
        "version_pin",
        "updated",
    )
    list_display_links = ("title_key",)
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
        "shown_key",
        "shown_title",
        "session_link",
        "shown_turn",
        "source",
        "version",
        "pinned",
        "created",
        "updated",
        "pretty_data",
        "content_preview",
        "history_versions",
    )
    readonly_fields = fields

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return access.is_staff(request.user)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str):
        # Every search field is on the artifact itself: no joins, so never any duplicates.
        queryset, _ = super().get_search_results(request, queryset, search_term)
        return queryset, False

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path(
                "<path:object_id>/diff/",
                wrap(lambda request, object_id: history.diff_view(self, request, object_id)),
                name="artifacts_app_artifact_diff",
            ),
            path(
                "<path:object_id>/pin/",
                wrap(lambda request, object_id: history.pin_view(self, request, object_id)),
                name="artifacts_app_artifact_pin",
            ),
            *super().get_urls(),
        ]

    # --- columns ---------------------------------------------------------------------------

    @admin.display(description="title · key")
    def title_key(self, obj: Artifact) -> str:
        return format_html(
            '<span class="cell-main">{}</span><span class="cell-sub">{}</span>',
            elide(obj.title or obj.key or obj.pk, 26),
            elide(obj.key, 22),
        )

    @admin.display(description="kind · source")
    def kind_source(self, obj: Artifact) -> str:
        return format_html(
            '<span class="cell-main">{}</span><span class="cell-sub">{}</span>',
            elide(obj.kind, 16),
            obj.source,
        )

    @admin.display(description="session")
    def session_sid(self, obj: Artifact) -> str:
        return elide(obj.session.sid if obj.session else None, 14)

    @admin.display(description="type · size")
    def type_size(self, obj: Artifact) -> str:
        if not obj.blob:
            return EMPTY
        return format_html(
            '<span class="cell-main">{}</span><span class="cell-sub">{}</span>',
            cut(media_type(obj.content_type) or None, 16),
            size(obj.blob.size),
        )

    @admin.display(description="v")
    def version_pin(self, obj: Artifact) -> str:
        return format_html(
            '<span title="version {}{}">{} {}</span>',
            obj.version,
            ", pinned" if obj.pinned else "",
            obj.version,
            pin_mark(obj.pinned),
        )

    @admin.display(description="updated (UTC)")
    def updated(self, obj: Artifact) -> str:
        return when(obj.updated_at)

    # --- the page --------------------------------------------------------------------------

    @admin.display(description="created (UTC)")
    def created(self, obj: Artifact) -> str:
        return when(obj.created_at)

    @admin.display(description="key")
    def shown_key(self, obj: Artifact) -> str:
        return obj.key or EMPTY

    @admin.display(description="title")
    def shown_title(self, obj: Artifact) -> str:
        return obj.title or EMPTY

    @admin.display(description="turn")
    def shown_turn(self, obj: Artifact) -> str:
        return obj.turn_id or EMPTY

    @admin.display(description="session")
    def session_link(self, obj: Artifact) -> str:
        if not obj.session:
            return EMPTY
        url = reverse("admin:artifacts_app_session_change", args=[obj.session_id])
        return format_html('<a href="{}">{}</a>', url, obj.session.sid)

    @admin.display(description="data")
    def pretty_data(self, obj: Artifact) -> str:
        tree = previews.json_html(obj.data)
        if tree is not None:
            return format_html('<div class="artifact-json">{}</div>', tree)
        text = json.dumps(obj.data, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre class="artifact-json">{}</pre>', text)

    @admin.display(description="content")
    def content_preview(self, obj: Artifact) -> str:
        """Rendered by the one preview renderer (``previews``): the playground shows the same."""
        if not obj.blob or not obj.blob_id:
            return EMPTY
        return previews.preview_blob(
            sha256=obj.blob_id,
            size=obj.blob.size,
            content_type=obj.content_type,
            url=content_url(obj),
            filename=media.download_name(
                key=obj.key, title=obj.title, artifact_id=obj.pk, content_type=obj.content_type
            ),
        ).html

    @admin.display(description="versions")
    def history_versions(self, obj: Artifact) -> str:
        return history.history_table(obj)

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
