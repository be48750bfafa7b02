"""Sessions: owner, creation, last activity and a bounded artifact count per row; a session's page
groups its newest artifacts by turn (selectors.sessions: every figure an indexed, bounded read)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from artifacts_app import selectors
from artifacts_app.admin.fastlist import SupervisorMixin, UncountedAdmin
from artifacts_app.models import Session
from artifacts_app.selectors.sessions import PICKER_CAP, iso_seconds, with_activity

EMPTY = "—"


def playground_url(session: Session) -> str:
    return "/playground/?" + urlencode({"agent": session.agent.slug, "session": session.sid})


def _turn_rows(turns: selectors.Turns) -> list[dict[str, Any]]:
    """The template's view of the turns: plain strings, links already quoted (ids like
    ``art_25…`` would otherwise be unquoted by the admin into another id)."""
    return [
        {
            "turn": turn.turn_id,
            "count": len(turn.records),
            "last": iso_seconds(turn.last_activity),
            "first": iso_seconds(turn.first_created),
            "records": [
                {
                    "url": reverse("admin:artifacts_app_artifact_change", args=[quote(r.id)]),
                    "label": Truncator(r.title or r.key or r.id).chars(80),
                    "full": r.title or r.key or r.id,
                    "kind": r.kind,
                    "source": r.source,
                    "version": r.version,
                    "pinned": r.pinned,
                    "content": r.content.content_type if r.content else EMPTY,
                    "updated": iso_seconds(r.updated_at),
                }
                for r in turn.records
            ],
        }
        for turn in turns.turns
    ]


@admin.register(Session)
class SessionAdmin(SupervisorMixin, UncountedAdmin):
    list_display = ("sid", "agent", "owner", "created", "last_activity", "artifacts", "playground")
    list_filter = ("agent",)
    search_fields = ("=sid", "owner__username")
    list_select_related = ("agent", "owner")
    ordering = ("-created_at", "-id")
    sortable_by = ()
    empty_value_display = EMPTY
    fields = ("sid", "agent", "owner", "created", "playground")
    readonly_fields = fields
    change_form_template = "admin/artifacts_app/session/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        # Per row: one backward seek for the last activity, a count over at most 101 index entries.
        return with_activity(super().get_queryset(request), cap=PICKER_CAP)

    @admin.display(description="created (UTC)")
    def created(self, obj: Session) -> str:
        return iso_seconds(obj.created_at)

    @admin.display(description="last activity (UTC)")
    def last_activity(self, obj: Any) -> str:
        return iso_seconds(obj.last_activity) if obj.last_activity else EMPTY

    @admin.display(description="artifacts")
    def artifacts(self, obj: Any) -> str:
        count = int(obj.artifact_count or 0)
        return f"{PICKER_CAP}+" if count > PICKER_CAP else str(count)

    @admin.display(description="playground")
    def playground(self, obj: Session) -> str:
        return format_html('<a href="{}">open in the playground</a>', playground_url(obj))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        session = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if session is not None:
            summary = selectors.session_summary(agent=session.agent, sid=session.sid)
            turns = selectors.session_turns(agent=session.agent, sid=session.sid)
            context.update(
                summary={
                    "owner": summary.owner or EMPTY,
                    "created": iso_seconds(summary.created_at),
                    "last": iso_seconds(summary.last_activity),
                    "count": summary.count_label,
                    "turns": len(turns.turns),
                },
                turns=_turn_rows(turns),
                shown=turns.shown,
                more=turns.more,
                all_url=reverse("admin:artifacts_app_artifact_changelist")
                + "?"
                + urlencode({"session__id__exact": session.pk}),
            )
        return super().change_view(request, object_id, form_url, extra_context=context)
